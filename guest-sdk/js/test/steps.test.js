// Unit tests of pages read in steps (`stepped-pages`, contract 0.1.5), outside a component: the
// exported `steppedPages` interface is called as the host calls it, with the answers it got.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { exportConnector, WARM_UP_ROUNDS } from '../src/export.js';
import { RequestBuilder } from '../src/requests.js';
import { Source } from '../src/source.js';
import { Page, Partition, Stream } from '../src/types.js';
import { refuseHost, warming } from '../src/warming.js';

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

// `Source.warmUp`: the pages read when the module is evaluated (while the component is built),
// with sample answers, before the snapshot every instance starts from.

test('each warm-up page is read step by step with its sample answers', () => {
  const seen = [];
  class Warmed extends Stepped {
    *readPage(config, partition, token) {
      seen.push(['start', config, partition.key, token]);
      const { count } = (yield get('https://api.example.com/count')).errorForStatus().json();
      const { records, rest } = (yield get(`https://api.example.com/items?n=${count}`).records(['data'])).parts();
      seen.push(['page', count, records, rest]);
      return new Page(records);
    }

    warmUp() {
      const answers = [{ body: { count: 2 } }, { body: { next: null }, records: [{ id: 1 }] }];
      return [{ config: { base_url: 'x' }, partition: Partition.keyed('items', { id: 7 }), token: 't', answers }];
    }
  }
  exportConnector(Warmed);
  // Three steps a page (no answer, one, both); the last one ends it.
  assert.equal(seen.filter((s) => s[0] === 'start').length, 3 * WARM_UP_ROUNDS);
  assert.deepEqual(seen[0], ['start', { base_url: 'x' }, { id: 7 }, 't']);
  assert.deepEqual(seen.at(-1), ['page', 2, ['{"id":1}'], { next: null }]);
  assert.equal(seen.filter((s) => s[0] === 'page').length, WARM_UP_ROUNDS);
});

test('a warm-up answer with records and no body leaves an empty object', () => {
  const seen = [];
  class Bare extends Stepped {
    *readPage() {
      const { rest } = (yield get('https://api.example.com/items').forwarded(['data'])).parts();
      seen.push(rest);
      return new Page([]);
    }

    warmUp() {
      return [{ config: {}, partition: Partition.whole('items'), answers: [{ forwarded: 3 }] }];
    }
  }
  exportConnector(Bare);
  assert.deepEqual(seen[0], {});
});

test('a failing warm-up is skipped and the connector still exports', (t) => {
  const calls = [];
  class Failing extends Stepped {
    *readPage(_config, _partition, token) {
      calls.push(token);
      throw new Error('not while building');
    }

    warmUp() {
      return ['a', 'b'].map((token) => ({ config: {}, partition: Partition.whole('items'), token }));
    }
  }
  class Broken extends Stepped {
    warmUp() {
      throw new Error('no samples');
    }
  }
  exportConnector(Failing);
  // Each page fails at its first step, every round, and the next page is still read.
  assert.deepEqual(calls, Array.from({ length: WARM_UP_ROUNDS }, () => ['a', 'b']).flat());
  const said = t.mock.method(console, 'error', () => {});
  const { steppedPages } = exportConnector(Broken);
  assert.deepEqual(steppedPages.steppedStreams(CONFIG), ['items']);
  // Said where the author builds the component.
  assert.match(said.mock.calls[0].arguments[0], /warmUp\(\) failed, nothing is warmed up: no samples/);
});

test('a warm-up page cannot reach the host', () => {
  // http.js and log.js import the host's interfaces (not there under node): the guard they call
  // first, as a page calls it.
  const reached = [];
  const refusals = [];
  class Chatty extends Stepped {
    *readPage(_config, _partition, token) {
      try {
        refuseHost(`GET ${token}`);
      } catch (e) {
        refusals.push(e.detail);
        throw e;
      }
      reached.push(token);
      yield get('https://api.example.com/items');
    }

    warmUp() {
      return [{ config: {}, partition: Partition.whole('items'), token: 'https://api.example.com/count' }];
    }
  }
  exportConnector(Chatty);
  assert.deepEqual(reached, []);
  assert.equal(refusals.length, WARM_UP_ROUNDS);
  assert.match(refusals[0], /^GET https:\/\/api.example.com\/count: a warm-up page runs with no host/);
  // Off again once the warm-up is done: the host's calls go through.
  assert.equal(warming.active, false);
  assert.doesNotThrow(() => refuseHost('GET x'));
});

test('no warm-up by default', () => {
  const calls = [];
  class Cold extends Stepped {
    *readPage(_config, _partition, token) {
      calls.push(token);
      return new Page([]);
    }
  }
  exportConnector(Cold);
  assert.deepEqual(calls, []);
});
