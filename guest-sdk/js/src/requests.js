// Building requests and reading answers: no host interface needed, so it is unit-tested outside a
// component (guest-sdk/cases/requests.json, status_errors.json). `http.js` adds sending, which
// needs the host, and re-exports the rest.

import { SluiceError } from './errors.js';

const encoder = new TextEncoder();
// As Rust reads a body: a leading BOM is kept (TextDecoder drops it by default), and `text`
// refuses bytes that are not UTF-8 where the error message replaces them.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const lossyUtf8 = new TextDecoder('utf-8', { ignoreBOM: true });

/**
 * A request being built (`http.Request` adds `send` and `open`): `method`, `url`, `headers`
 * (`[name, value]` pairs) and `body` (bytes, or `undefined`).
 */
export class RequestBuilder {
  constructor(method, url) {
    this.method = method;
    this.url = url;
    this.headers = [];
    this.body = undefined;
  }

  /**
   * Appends a query parameter, percent-encoded as an HTML form encodes it: URLSearchParams is
   * the WHATWG serializer, as Rust's `form_urlencoded` (encodeURIComponent is not: it leaves
   * `~!'()` and encodes a space as `%20`).
   */
  query(name, value) {
    const pair = new URLSearchParams([[name, String(value)]]).toString();
    this.url += (this.url.includes('?') ? '&' : '?') + pair;
    return this;
  }

  header(name, value) {
    this.headers.push([name, String(value)]);
    return this;
  }

  bearerAuth(token) {
    return this.header('authorization', `Bearer ${token}`);
  }

  /** A JSON body (compact, keys in the order given) and its content-type header. */
  jsonBody(value) {
    this.body = encoder.encode(JSON.stringify(value));
    return this.header('content-type', 'application/json');
  }

  withBody(bytes) {
    this.body = bytes;
    return this;
  }

  /** The request as the host's `http` interface takes it. */
  toWit() {
    const { method, url, headers, body } = this;
    return { method, url, headers, body };
  }

  /**
   * This request for a `readPage` that is read in steps to yield: the host sends it between two
   * steps and the generator gets what `sendRecords(path)` answers.
   */
  records(path) {
    return new Later(this, 'records', [...path]);
  }

  /**
   * This request for a `readPage` that is read in steps to yield: the host sends it between two
   * steps, keeps the records for the page and the generator gets what `forwardRecords(path)`
   * answers.
   */
  forwarded(path) {
    return new Later(this, 'forward', [...path]);
  }
}

/**
 * A request a `readPage` written as a generator (`*readPage(...)`) yields, for the host to send:
 * between two steps when the stream is read in steps (no instance is kept while the answer is on
 * its way), at once otherwise. Yield a request for its whole answer (as `send`), or
 * `request.records(path)` / `request.forwarded(path)` (as `sendRecords` / `forwardRecords`):
 *
 *   const { records, rest } = (yield get(url).records(['data'])).errorForStatus().parts();
 *
 * An HTTP error is thrown at the `yield`, as `send` throws it.
 */
export class Later {
  constructor(request, use, path) {
    this.request = request;
    this.use = use;
    this.path = path;
  }

  /** What a generator yielded, as a `Later`; anything but a request is a system error. */
  static of(value) {
    if (value instanceof Later) return value;
    if (value instanceof RequestBuilder) return new Later(value, 'whole', undefined);
    throw SluiceError.system(`readPage yielded ${String(value)}: yield a request, or request.records(path) or .forwarded(path)`);
  }

  /** Sends it now, in this call. */
  sendNow() {
    if (this.use === 'records') return this.request.sendRecords(this.path);
    if (this.use === 'forward') return this.request.forwardRecords(this.path);
    return this.request.send();
  }

  /** The answer the host got for it between two steps (the WIT `answer`). */
  answered(answer) {
    const { url } = this.request;
    if (this.use === 'records') return new RecordsResponse(url, this.path.join('.'), answer.status, answer.headers, answer.records, answer.rest);
    if (this.use === 'forward') return new RecordsResponse(url, this.path.join('.'), answer.status, answer.headers, answer.forwarded, answer.rest);
    return new Response(url, answer.status, answer.headers, answer.rest);
  }

  /** The error `send` would throw for the host's WIT `http-error`. */
  failed(error) {
    return httpError(this.request.method, this.request.url, error);
  }

  /** The WIT `outgoing`. */
  toWit() {
    const use = this.use === 'whole' ? { tag: 'whole' } : { tag: this.use, val: this.path };
    return { request: this.request.toWit(), body: use };
  }
}

/** The error a request the host refused or could not make throws: it names the method and URL. */
export function httpError(method, url, error) {
  const what = `${method} ${url}`;
  switch (error?.tag) {
    case 'denied':
      return SluiceError.config(`${what} denied: ${error.val}`);
    case 'timeout':
      return SluiceError.transient(`${what} timed out: ${error.val}`);
    case 'connection':
      return SluiceError.transient(`${what} failed: ${error.val}`);
    case 'too-large':
      return SluiceError.system(`${what}: response too large: ${error.val}`);
    default:
      return SluiceError.system(`${what}: invalid request: ${error?.val ?? error}`);
  }
}

/** What every kind of answer has: `url`, `status`, `headers` (`[name, value]` pairs). */
export class Answer {
  constructor(url, status, headers) {
    this.url = url;
    this.status = status;
    this.headers = headers;
  }

  /** The first header called `name` (case-insensitive). */
  header(name) {
    const wanted = name.toLowerCase();
    return this.headers.find(([k]) => k.toLowerCase() === wanted)?.[1];
  }

  isSuccess() {
    return this.status >= 200 && this.status < 300;
  }
}

/** An HTTP answer: `url`, `status`, `headers` and `body` (bytes). */
export class Response extends Answer {
  constructor(url, status, headers, body) {
    super(url, status, headers);
    this.body = body;
  }

  /** The body as text; bytes that are not UTF-8 are a system error. */
  text() {
    try {
      return utf8.decode(this.body);
    } catch (e) {
      throw SluiceError.system(`${this.url}: body is not UTF-8: ${e.message}`);
    }
  }

  /** Parses the body as JSON, naming the URL when it is not. */
  json() {
    try {
      return JSON.parse(utf8.decode(this.body));
    } catch (e) {
      throw SluiceError.system(`${this.url} answered ${this.status} with unexpected JSON: ${e.message}`);
    }
  }

  /**
   * Turns a non-2xx answer into an error of the right kind: 401/403/404 are the config's fault,
   * 429 and 5xx are passing (the host has already retried them), anything else is a system error.
   */
  errorForStatus() {
    if (this.isSuccess()) return this;
    throw statusError(this.url, this.status, this.body);
  }
}

/**
 * An answer whose records the host took out (see `Request.sendRecords`): `url`, `status`,
 * `headers`, `records` (JSON texts, or for `forwardRecords` how many the host kept; `undefined`
 * when the answer was not a success or held no list of objects at the path, and then `rest` is
 * the whole body) and `rest` (bytes).
 */
export class RecordsResponse extends Answer {
  constructor(url, path, status, headers, records, rest) {
    super(url, status, headers);
    this.path = path;
    this.records = records ?? undefined;
    this.rest = rest;
  }

  /** As `Response.errorForStatus`, the body being `rest`. */
  errorForStatus() {
    if (this.isSuccess()) return this;
    throw statusError(this.url, this.status, this.rest);
  }

  /** `{ records, rest }`: the records and the rest of the answer parsed; a system error naming
   * the URL and the path when the answer had no list of records there. */
  parts() {
    if (this.records === undefined) {
      const start = new TextDecoder().decode(this.rest.subarray(0, 200));
      throw SluiceError.system(`${this.url} answered ${this.status} without a list of records at \`${this.path}\`: ${start}`);
    }
    let rest;
    try {
      rest = JSON.parse(utf8.decode(this.rest));
    } catch (e) {
      throw SluiceError.system(`${this.url} answered ${this.status} with unexpected JSON: ${e.message}`);
    }
    return { records: this.records, rest };
  }
}

/** The error `errorForStatus` throws: the URL, the status and at most the first 500 bytes of the body. */
export function statusError(url, status, body) {
  const message = `${url} answered ${status}: ${lossyUtf8.decode(body.slice(0, 500))}`;
  if ([401, 403, 404].includes(status)) return SluiceError.config(message);
  if (status === 429 || (status >= 500 && status <= 599)) return SluiceError.transient(message);
  return SluiceError.system(message);
}
