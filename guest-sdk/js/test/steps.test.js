// Unit tests of pages read in steps (`stepped-pages`, contract 0.1.5), outside a component: the
// exported `steppedPages` interface is called as the host calls it, with the answers it got.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exportConnector } from '../src/export.js';
import { RequestBuilder } from '../src/requests.js';
import { Source } from '../src/source.js';
import { Page, Stream } from '../src/types.js';

const CONFIG = JSON.stringify({});
const PARTITION = { stream: 'items', key: 'null', cursorRange: undefined };
const get = (url) => new RequestBuilder('GET', url);

/** Two requests a page: a count, then the records; `report` is a job stream. */
class Stepped extends Source {
  spec() {
    return { type: 'object' };
  }

  streams() {
    return [new Stream('items', {}), new Stream('report', {})];
  }

  jobStreams() {
    return ['report'];
  }

  *readPage() {
    const { count } = (yield get('https://api.example.com/count')).errorForStatus().json();
    try {
      const { records, rest } = (yield get(`https://api.example.com/items?n=${count}`).records(['data'])).parts();
      return new Page(records, rest.next);
    } catch (e) {
      return Page.fromValues([{ failed: e.detail }]);
    }
  }
}

/** A `readPage` that is not a generator: not read in steps. */
class Whole extends Source {
  spec() {
    return { type: 'object' };
  }

  streams() {
    return [new Stream('items', {})];
  }

  readPage() {
    return Page.fromValues([{ id: 1 }]);
  }
}

const encode = (text) => new TextEncoder().encode(text);
const answer = (body, records, status = 200) => ({ tag: 'ok', val: { status, headers: [], records, forwarded: undefined, rest: encode(body) } });
const step = (SourceClass, answers) => exportConnector(SourceClass).steppedPages.readStep(CONFIG, PARTITION, undefined, answers);

test('the first step asks for the first request', () => {
  const first = step(Stepped, []);
  assert.equal(first.tag, 'send');
  assert.equal(first.val.request.url, 'https://api.example.com/count');
  assert.deepEqual(first.val.body, { tag: 'whole' });
});

test('each step runs the page again with the answers so far', () => {
  const second = step(Stepped, [answer('{"count": 2}')]);
  assert.equal(second.val.request.url, 'https://api.example.com/items?n=2');
  assert.deepEqual(second.val.body, { tag: 'records', val: ['data'] });
  const last = step(Stepped, [answer('{"count": 2}'), answer('{"next": "t"}', ['{"id":1}', '{"id":2}'])]);
  assert.equal(last.tag, 'page');
  assert.deepEqual(last.val.records, ['{"id":1}', '{"id":2}']);
  assert.equal(last.val.nextToken, '"t"');
});

test('an HTTP error is thrown at the yield', () => {
  const last = step(Stepped, [answer('{"count": 2}'), { tag: 'err', val: { tag: 'denied', val: 'not granted' } }]);
  assert.deepEqual(last.val.records.map((r) => JSON.parse(r)), [{ failed: 'GET https://api.example.com/items?n=2 denied: not granted' }]);
});

test('an error the page does not catch fails the step', () => {
  assert.throws(() => step(Stepped, [answer('', undefined, 404)]), (e) => e.tag === 'config' && e.val.includes('https://api.example.com/count answered 404'));
});

test('a plain readPage ends in one step and is not stepped', () => {
  assert.equal(step(Whole, []).tag, 'page');
  assert.deepEqual(exportConnector(Whole).steppedPages.steppedStreams(CONFIG), []);
});

test('every stream but job streams is stepped by default', () => {
  assert.deepEqual(exportConnector(Stepped).steppedPages.steppedStreams(CONFIG), ['items']);
});

test('yielding anything but a request is a system error', () => {
  class Wrong extends Whole {
    *readPage() {
      yield 'https://api.example.com/';
    }
  }
  assert.throws(() => step(Wrong, []), (e) => e.tag === 'system' && e.val.includes('yield a request'));
});
