// Slicing helpers: cut a stream into date-time windows the host checkpoints one by one. A window
// is a partition whose cursor range is `(start, end]`. The same functions as the Rust SDK's
// `slice` module, giving the same windows.

import { SluiceError } from './errors.js';
import { CursorValue, Partition } from './types.js';

const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Seconds since the Unix epoch of an RFC 3339 date-time (`2024-01-31T12:00:00Z`, an offset such
 * as `+02:00`, or fractional seconds, which are dropped).
 */
export function parseRfc3339(text) {
  const m = typeof text === 'string' ? RFC3339.exec(text) : null;
  const bad = () => SluiceError.config(`not an RFC 3339 date-time: ${JSON.stringify(text)}`);
  if (!m) throw bad();
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number);
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) throw bad();
  const zone = m[8];
  let offset = 0;
  if (zone !== 'Z' && zone !== 'z') {
    const sign = zone[0] === '-' ? -1 : 1;
    offset = sign * (Number(zone.slice(1, 3)) * 3600 + Number(zone.slice(4, 6)) * 60);
  }
  return daysFromCivil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second - offset;
}

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** The RFC 3339 form (`Z`, whole seconds) of seconds since the Unix epoch. */
export function formatRfc3339(secs) {
  const days = Math.floor(secs / 86400);
  const rem = secs - days * 86400;
  const [y, m, d] = civilFromDays(days);
  return `${pad(y, 4)}-${pad(m)}-${pad(d)}T${pad(Math.floor(rem / 3600))}:${pad(Math.floor((rem % 3600) / 60))}:${pad(rem % 60)}Z`;
}

/**
 * Windows of `stepSecs` covering `(start, end]`, aligned to multiples of the step since the epoch
 * so they are the same in every run; each is a partition keyed by its bounds. The last window
 * ends at `end`, never after.
 */
export function datetimeWindows(stream, start, end, stepSecs) {
  if (!(stepSecs > 0)) throw SluiceError.config(`a window must be longer than 0 seconds, got ${stepSecs}`);
  const windows = [];
  // Aligned boundaries; the first window starts at `start` itself, so nothing before it is read.
  let lower = start;
  while (lower < end) {
    const upper = Math.min((Math.floor(lower / stepSecs) + 1) * stepSecs, end);
    const [s, e] = [formatRfc3339(lower), formatRfc3339(upper)];
    windows.push(Partition.keyed(stream, { start: s, end: e }).startingAt(CursorValue.datetime(s)).endingAt(CursorValue.datetime(e)));
    lower = upper;
  }
  return windows;
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
function daysFromCivil(y, m, d) {
  y = m <= 2 ? y - 1 : y;
  const era = Math.floor(y / 400);
  const yoe = y - era * 400;
  const doy = Math.floor((153 * (m > 2 ? m - 3 : m + 9) + 2) / 5) + d - 1;
  const doe = yoe * 365 + Math.floor(yoe / 4) - Math.floor(yoe / 100) + doy;
  return era * 146097 + doe - 719468;
}

function civilFromDays(z) {
  z += 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  return [yoe + era * 400 + (m <= 2 ? 1 : 0), m, d];
}
