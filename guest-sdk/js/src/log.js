// Messages for the operator; they become LOG messages in the host's output. What a connector
// prints with console.log or console.error does too.

import { log as hostLog } from 'sluice:connector/log@0.1.7';
import { refuseHost } from './warming.js';

function log(level, message) {
  refuseHost('logging');
  hostLog(level, String(message));
}

export const debug = (message) => log('debug', message);
export const info = (message) => log('info', message);
export const warn = (message) => log('warn', message);
export const error = (message) => log('error', message);
