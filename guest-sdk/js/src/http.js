// HTTP through the host. The host enforces the egress grant, timeouts, retries with backoff
// (429, 5xx, connection errors; `Retry-After` honoured) and size caps, so a connector just sends.

import { send } from 'sluice:connector/http@0.1.3';
import { SluiceError } from './errors.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A request being built: `http.get(url).query('limit', 100).bearerAuth(key).send()`. */
export class Request {
  constructor(method, url) {
    this.method = method;
    this.url = url;
    this.headers = [];
    this.body = undefined;
  }

  /** Appends a query parameter, percent-encoded. */
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

  jsonBody(value) {
    this.body = encoder.encode(JSON.stringify(value));
    return this.header('content-type', 'application/json');
  }

  withBody(bytes) {
    this.body = bytes;
    return this;
  }

  /** Sends the request through the host. Any status is a response; see `Response.errorForStatus`. */
  send() {
    let answer;
    try {
      answer = send({ method: this.method, url: this.url, headers: this.headers, body: this.body });
    } catch (e) {
      throw httpError(this.method, this.url, e?.payload ?? e);
    }
    return new Response(this.url, answer.status, answer.headers, answer.body);
  }
}

function httpError(method, url, error) {
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

/** An HTTP answer: `url`, `status`, `headers` (`[name, value]` pairs) and `body` (bytes). */
export class Response {
  constructor(url, status, headers, body) {
    this.url = url;
    this.status = status;
    this.headers = headers;
    this.body = body;
  }

  /** The first header called `name` (case-insensitive). */
  header(name) {
    const wanted = name.toLowerCase();
    return this.headers.find(([k]) => k.toLowerCase() === wanted)?.[1];
  }

  isSuccess() {
    return this.status >= 200 && this.status < 300;
  }

  text() {
    return decoder.decode(this.body);
  }

  /** Parses the body as JSON, naming the URL when it is not. */
  json() {
    try {
      return JSON.parse(this.text());
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
    const message = `${this.url} answered ${this.status}: ${decoder.decode(this.body.slice(0, 500))}`;
    if ([401, 403, 404].includes(this.status)) throw SluiceError.config(message);
    if (this.status === 429 || (this.status >= 500 && this.status <= 599)) throw SluiceError.transient(message);
    throw SluiceError.system(message);
  }
}

export const get = (url) => new Request('GET', url);
export const post = (url) => new Request('POST', url);
export const del = (url) => new Request('DELETE', url);

/** GETs `url` and parses a successful JSON answer. */
export function getJson(url) {
  return get(url).send().errorForStatus().json();
}

// URL helpers need no host, so they live apart (and are unit-tested outside a component).
export { join, hostPort } from './urls.js';
