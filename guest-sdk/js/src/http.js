// HTTP through the host. The host enforces the egress grant, timeouts, retries with backoff
// (429, 5xx, connection errors; `Retry-After` honoured) and size caps, so a connector just sends.
//
// `Request.send` answers with the whole body; `Request.open` leaves the body with the host, to be
// read a piece at a time (`Body.readLines`, `Body.readBytes`) for downloads too large to hold.

import {
  closeBody, forwardRecords, open, readBytes, readLines, send, sendRecords,
} from 'sluice:connector/http@0.1.7';
import { SluiceError } from './errors.js';
import { Answer, RecordsResponse, RequestBuilder, Response, httpError, statusError } from './requests.js';
import { Lines } from './types.js';
import { refuseHost } from './warming.js';

/**
 * A request being built: `http.get(url).query('limit', 100).bearerAuth(key).send()`. The building
 * (`query`, `header`, `bearerAuth`, `jsonBody`, `withBody`) is `RequestBuilder`'s, in requests.js.
 */
export class Request extends RequestBuilder {
  /** Sends the request through the host. Any status is a response; see `Response.errorForStatus`. */
  send() {
    const answer = hostCall(this, send);
    return new Response(this.url, answer.status, answer.headers, answer.body);
  }

  /**
   * Sends the request, and has the host take the records out of a successful JSON answer: those
   * of the list at `path` (`['data']`, `['result', 'items']`), each as the API wrote it, never
   * parsed here; the rest of the answer stays JSON text for the paginator. The fastest way to
   * pass records on unchanged (contract 0.1.4):
   *
   *   const { records, rest } = request.sendRecords(['data']).errorForStatus().parts();
   *   return new Page(records, paginate.nextCursor(rest.next_cursor));
   */
  sendRecords(path) {
    const answer = hostCall(this, sendRecords, path);
    return new RecordsResponse(this.url, path.join('.'), answer.status, answer.headers, answer.records, answer.rest);
  }

  /**
   * As `sendRecords`, but the records never come into JavaScript: the host keeps them and puts
   * them at the start of the page this `readPage` (or job result read) returns, before the page's
   * own records. The answer's `records` is how many were kept. Only in those calls; the records
   * count against the limit of records per page. The fastest way to pass records on unchanged:
   * handing a page of strings to JavaScript costs more than the rest of the page.
   *
   *   const { rest } = request.forwardRecords(['data']).errorForStatus().parts();
   *   return new Page([], paginate.nextCursor(rest.next_cursor));
   */
  forwardRecords(path) {
    const answer = hostCall(this, forwardRecords, path);
    return new RecordsResponse(this.url, path.join('.'), answer.status, answer.headers, answer.forwarded, answer.rest);
  }

  /**
   * Sends the request, but leaves the body with the host, to be read a piece at a time with
   * `Body.readLines` or `Body.readBytes`: for downloads too large to hold (a report of a million
   * rows). Retries, redirects and the egress policy work as for `send`.
   */
  open() {
    const head = hostCall(this, open);
    return new StreamedResponse(this.url, head.status, head.headers, new Body(head.body));
  }
}

/** A call of the host's `http` import with `request`; its error names the method and URL. */
function hostCall(request, call, ...args) {
  refuseHost(`${request.method} ${request.url}`);
  try {
    return call(request.toWit(), ...args);
  } catch (e) {
    throw httpError(request.method, request.url, e?.payload ?? e);
  }
}

/** An HTTP answer whose body is still with the host (see `Request.open`): `url`, `status`, `headers` and `body` (a `Body`). */
export class StreamedResponse extends Answer {
  constructor(url, status, headers, body) {
    super(url, status, headers);
    this.body = body;
  }

  /** As `Response.errorForStatus`; the message quotes the start of the body, and the body is closed. */
  errorForStatus() {
    if (this.isSuccess()) return this;
    let start;
    try {
      start = this.body.readBytes(500);
    } catch {
      // The status says enough; a body that fails to read adds nothing.
    }
    this.body.close();
    throw statusError(this.url, this.status, start ?? new Uint8Array());
  }
}

const MAX_U32 = 2 ** 32 - 1;

/**
 * An open response body, held by the host for as long as it reads the partition that opened it.
 * Its `handle` may go into a page token (and back with `Body.fromHandle`) so that the next
 * `readPage` or `readResult` call of the partition goes on reading where this one stopped; a body
 * read to its end is closed by the host.
 */
export class Body {
  #handle;

  constructor(handle) {
    this.#handle = handle;
  }

  /** The body a handle names, as kept in a page token; anything but a handle is a system error. */
  static fromHandle(handle) {
    if (!Number.isInteger(handle) || handle < 0 || handle > MAX_U32) throw SluiceError.system(`not a body handle: ${JSON.stringify(handle)}`);
    return new Body(handle);
  }

  get handle() {
    return this.#handle;
  }

  /**
   * Up to `maxLines` more lines, as `Lines`. `undefined` when the host holds no such body: it was
   * closed, or the partition is read by a new instance now (a retry, a resumed run), so open it
   * again (from a position the token kept, say).
   */
  readLines(maxLines) {
    refuseHost('reading a body');
    try {
      const read = readLines(this.#handle, maxLines);
      return new Lines(read.text, read.count, read.end);
    } catch (e) {
      return unknownBodyOrThrow(e?.payload ?? e);
    }
  }

  /** Up to `maxBytes` more bytes (a Uint8Array, empty at the end). `undefined` as for `readLines`. */
  readBytes(maxBytes) {
    refuseHost('reading a body');
    try {
      return readBytes(this.#handle, maxBytes);
    } catch (e) {
      return unknownBodyOrThrow(e?.payload ?? e);
    }
  }

  /** Closes the body before its end. */
  close() {
    refuseHost('closing a body');
    closeBody(this.#handle);
  }
}

function unknownBodyOrThrow(error) {
  switch (error?.tag) {
    case 'unknown-body':
      return undefined;
    case 'connection':
      throw SluiceError.transient(error.val);
    case 'too-large':
    case 'not-text':
      throw SluiceError.system(error.val);
    default:
      throw error;
  }
}

export const get = (url) => new Request('GET', url);
export const post = (url) => new Request('POST', url);
export const del = (url) => new Request('DELETE', url);

/** GETs `url` and parses a successful JSON answer. */
export function getJson(url) {
  return get(url).send().errorForStatus().json();
}

// URL helpers and answers need no host, so they live apart (and are unit-tested outside a component).
export { join, hostPort } from './urls.js';
export { Later, RecordsResponse, Response } from './requests.js';
export { Lines } from './types.js';
