// Reading a connector's config: typed fields, config errors for the rest.

import { SluiceError } from './errors.js';

const TYPE_NAMES = { string: 'a string', integer: 'an integer', number: 'a number', boolean: 'a boolean', array: 'an array', object: 'an object' };

function hasType(value, type) {
  switch (type) {
    case 'integer':
      return Number.isSafeInteger(value);
    case 'array':
      return Array.isArray(value);
    case 'object':
      return value !== null && typeof value === 'object' && !Array.isArray(value);
    default:
      return typeof value === type;
  }
}

/**
 * A config field of the given type (`'string'`, `'integer'`, `'number'`, `'boolean'`, `'array'`
 * or `'object'`), or `fallback` when absent or null (without a fallback the field is required);
 * a missing required field or a wrong type is a config error.
 */
export function field(raw, name, type, ...fallback) {
  const value = raw[name];
  if (value === undefined || value === null) {
    if (fallback.length === 0) throw SluiceError.config(`invalid config: missing field \`${name}\``);
    return fallback[0];
  }
  if (!hasType(value, type)) {
    throw SluiceError.config(`invalid config: \`${name}\` must be ${TYPE_NAMES[type] ?? type}, got ${JSON.stringify(value)}`);
  }
  return value;
}
