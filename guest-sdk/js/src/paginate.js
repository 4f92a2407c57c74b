// Pagination helpers. A page token is any JSON value; these give the common kinds a fixed shape,
// so a connector reads the token and builds the next one in one line each.

import { SluiceError } from './errors.js';

function number(token, first, what) {
  if (token === undefined || token === null) return first;
  if (Number.isSafeInteger(token) && token >= 0) return token;
  throw SluiceError.system(`expected a ${what} as page token, got ${JSON.stringify(token)}`);
}

/** Page numbers (`?page=N`), starting at `first`. The token is the next page's number. */
export function pageNumber(token, first = 1) {
  return number(token, first, 'page number');
}

/** The token for the page after `current`, or `undefined` after a short page (the last one). */
export function nextPageNumber(current, recordsOnPage, pageSize) {
  return recordsOnPage >= pageSize && recordsOnPage > 0 ? current + 1 : undefined;
}

/** Offsets (`?offset=N`). The token is the next offset. */
export function offset(token) {
  return number(token, 0, 'offset');
}

/** The token for the page after one that started at `current`, or `undefined` after a short page. */
export function nextOffset(current, recordsOnPage, pageSize) {
  return recordsOnPage >= pageSize && recordsOnPage > 0 ? current + recordsOnPage : undefined;
}

/** Opaque cursors or next-page URLs handed out by the API. The token is that string. */
export function cursor(token) {
  if (token === undefined || token === null) return undefined;
  if (typeof token === 'string') return token;
  throw SluiceError.system(`expected a cursor string as page token, got ${JSON.stringify(token)}`);
}

/** The token for an API's next cursor or URL; `undefined`, `null` or `''` ends the partition. */
export function nextCursor(value) {
  return value ? value : undefined;
}
