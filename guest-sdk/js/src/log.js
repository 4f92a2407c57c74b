// Messages for the operator; they become LOG messages in the host's output. What a connector
// prints with console.log or console.error does too.

import { log } from 'sluice:connector/log@0.1.7';

export const debug = (message) => log('debug', String(message));
export const info = (message) => log('info', String(message));
export const warn = (message) => log('warn', String(message));
export const error = (message) => log('error', String(message));
