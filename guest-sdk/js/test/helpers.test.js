// Unit tests of the SDK's helpers, outside a component (`just test-guest-sdks`): the modules that
// do not import the host's interfaces.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { field } from '../src/config.js';
import { SluiceError, withContext } from '../src/errors.js';
import * as paginate from '../src/paginate.js';
import * as slice from '../src/slice.js';
import { canonicalJson, CursorValue } from '../src/types.js';
import { hostPort } from '../src/urls.js';
import { RecordsResponse, RequestBuilder, Response } from '../src/requests.js';
import { readFileSync } from 'node:fs';

/** A table of cases every SDK's tests run (guest-sdk/cases). */
const sharedCases = (name) => JSON.parse(readFileSync(new URL(`../../cases/${name}`, import.meta.url), 'utf8'));

const kindOf = (fn) => {
  try {
    fn();
  } catch (e) {
    return e instanceof SluiceError ? e.kind : `not a SluiceError: ${e}`;
  }
  return 'no error';
};

test('RFC 3339 date-times round-trip', () => {
  assert.equal(slice.parseRfc3339('1970-01-01T00:00:00Z'), 0);
  assert.equal(slice.parseRfc3339('2024-01-01T00:00:00Z'), 1704067200);
  assert.equal(slice.parseRfc3339('2024-01-01T02:00:00+02:00'), 1704067200);
  assert.equal(slice.parseRfc3339('2024-02-29T12:30:45.123Z'), 1709209845);
  for (const secs of [0, 951782400, 1704067200, 4102444800]) assert.equal(slice.parseRfc3339(slice.formatRfc3339(secs)), secs);
  for (const bad of ['', '2024-01-01', '2024-13-01T00:00:00Z', '2024-01-01T00:00:00', '2024-01-01T00:00:00.Z']) {
    assert.equal(kindOf(() => slice.parseRfc3339(bad)), 'config', bad);
  }
});

test('windows are aligned and end at the end', () => {
  const w = slice.datetimeWindows('s', 1704067200 + 60, 1704067200 + 7200, 3600);
  assert.equal(w.length, 2);
  assert.deepEqual(w[0].cursorStart(), CursorValue.datetime('2024-01-01T00:01:00Z'));
  assert.deepEqual(w[1].cursorStart(), CursorValue.datetime('2024-01-01T01:00:00Z'));
  assert.deepEqual(w[1].cursorEnd(), CursorValue.datetime('2024-01-01T02:00:00Z'));
  assert.equal(canonicalJson(w[0].key), '{"end":"2024-01-01T01:00:00Z","start":"2024-01-01T00:01:00Z"}');
  assert.deepEqual(slice.datetimeWindows('s', 10, 10, 5), []);
  assert.equal(slice.datetimeWindows('s', 0, 90, 60)[1].cursorEnd().value, slice.formatRfc3339(90));
  assert.equal(kindOf(() => slice.datetimeWindows('s', 0, 10, 0)), 'config');
});

test('page numbers stop on a short page; offsets and cursors', () => {
  assert.equal(paginate.pageNumber(undefined, 1), 1);
  assert.equal(paginate.nextPageNumber(1, 10, 10), 2);
  assert.equal(paginate.nextPageNumber(2, 3, 10), undefined);
  assert.equal(paginate.nextPageNumber(2, 0, 0), undefined);
  assert.equal(kindOf(() => paginate.pageNumber('x', 1)), 'system');
  assert.equal(paginate.nextOffset(20, 10, 10), 30);
  assert.equal(paginate.nextOffset(20, 9, 10), undefined);
  assert.equal(paginate.cursor('abc'), 'abc');
  assert.equal(paginate.nextCursor(''), undefined);
  assert.equal(kindOf(() => paginate.cursor(3)), 'system');
});

test('config fields are typed', () => {
  const raw = { base_url: 'http://h', page_size: 5, flag: true };
  assert.equal(field(raw, 'base_url', 'string'), 'http://h');
  assert.equal(field(raw, 'limit', 'integer', 100), 100);
  assert.equal(field(raw, 'start', 'string', undefined), undefined);
  assert.throws(() => field(raw, 'missing', 'string'), /missing field `missing`/);
  assert.throws(() => field(raw, 'flag', 'integer'), /must be an integer/);
  assert.equal(kindOf(() => field(raw, 'page_size', 'string')), 'config');
});

test('context keeps the kind', () => {
  assert.throws(
    () => withContext('listing accounts', () => { throw SluiceError.transient('overloaded'); }),
    (e) => e.kind === 'transient' && e.detail === 'listing accounts: overloaded',
  );
});

test('hostPort answers the shared cases', () => {
  for (const c of sharedCases('host_port.json')) {
    if (c.error) assert.equal(kindOf(() => hostPort(c.url)), c.error, c.url);
    else assert.equal(hostPort(c.url), c.host_port, c.url);
  }
});

test('pagination answers the shared cases', () => {
  const cases = sharedCases('paginate.json');
  for (const c of cases.next_page_number) {
    assert.equal(paginate.nextPageNumber(c.current, c.records_on_page, c.page_size) ?? null, c.next, JSON.stringify(c));
  }
  for (const c of cases.next_offset) {
    assert.equal(paginate.nextOffset(c.current, c.records_on_page, c.page_size) ?? null, c.next, JSON.stringify(c));
  }
  for (const c of cases.page_number) {
    if (c.error) assert.equal(kindOf(() => paginate.pageNumber(c.token, c.first)), c.error, JSON.stringify(c));
    else assert.equal(paginate.pageNumber(c.token, c.first), c.page, JSON.stringify(c));
  }
  for (const c of cases.next_cursor) {
    assert.equal(paginate.nextCursor(c.next) ?? null, c.token, JSON.stringify(c));
  }
});

test('slicing answers the shared cases', () => {
  const cases = sharedCases('slice.json');
  for (const c of cases.parse_rfc3339) {
    if (c.error) assert.equal(kindOf(() => slice.parseRfc3339(c.text)), c.error, c.text);
    else assert.equal(slice.parseRfc3339(c.text), c.secs, c.text);
  }
  for (const c of cases.datetime_windows) {
    const make = () => slice.datetimeWindows('s', c.from, c.to, c.step);
    if (c.error) assert.equal(kindOf(make), c.error, JSON.stringify(c));
    else assert.deepEqual(make().map((w) => w.key), c.keys, JSON.stringify(c));
  }
});

test('errorForStatus answers the shared cases', () => {
  const table = sharedCases('status_errors.json');
  const answer = (status, body) => new Response(table.url, status, [], new TextEncoder().encode(body));
  for (const c of table.statuses) {
    const kind = kindOf(() => answer(c.status, 'oops').errorForStatus());
    assert.equal(kind === 'no error' ? null : kind, c.kind, String(c.status));
  }
  for (const c of table.messages) {
    const body = c.body_repeat ? c.body_repeat[0].repeat(c.body_repeat[1]) : c.body;
    const [prefix, unit, times] = c.message_repeat ?? [c.message, '', 0];
    assert.throws(() => answer(c.status, body).errorForStatus(), (e) => e.detail === prefix + unit.repeat(times), String(c.status));
  }
});

test('requests are built as the shared cases say', () => {
  for (const c of sharedCases('requests.json').requests) {
    // Values as a connector passes them (numbers, booleans), not as text: the SDK writes them.
    const request = new RequestBuilder('GET', c.url);
    for (const [name, value] of c.query ?? []) request.query(name, value);
    if (c.bearer !== undefined) request.bearerAuth(c.bearer);
    if (c.json_body !== undefined) request.jsonBody(c.json_body);
    const what = JSON.stringify(c);
    assert.equal(request.url, c.expect_url, what);
    assert.deepEqual(request.headers, c.expect_headers ?? [], what);
    assert.equal(request.body === undefined ? null : new TextDecoder().decode(request.body), c.expect_body ?? null, what);
  }
});

test('config fields answer the shared cases', () => {
  const table = sharedCases('config_fields.json');
  const read = (config) =>
    Object.fromEntries(
      table.fields.map((f) => [f.name, 'default' in f ? field(config, f.name, f.type, f.default) : field(config, f.name, f.type)]),
    );
  for (const c of table.cases) {
    const what = JSON.stringify(c.config);
    if (c.error_names) {
      assert.throws(() => read(c.config), (e) => e instanceof SluiceError && e.kind === 'config' && e.detail.includes(c.error_names), what);
    } else {
      assert.deepEqual(read(c.config), c.values, what);
    }
  }
});

test('bodies are read as UTF-8, as the Rust SDK reads them', () => {
  const answer = (bytes) => new Response('http://h/x', 500, [], new Uint8Array(bytes));
  // A BOM is kept in the text and refused by `json`; bytes that are not UTF-8 are a system error.
  assert.equal(answer([0xef, 0xbb, 0xbf, 0x41]).text(), '\ufeffA');
  assert.equal(kindOf(() => answer([0xef, 0xbb, 0xbf, 0x7b, 0x7d]).json()), 'system');
  assert.equal(kindOf(() => answer([0x22, 0xff, 0x22]).text()), 'system');
  assert.equal(kindOf(() => answer([0x22, 0xff, 0x22]).json()), 'system');
  // The 500th byte cuts a character in two: the message ends with one U+FFFD.
  const cut = answer([...new TextEncoder().encode('x'.repeat(499) + '\u20ac')]);
  assert.throws(() => cut.errorForStatus(), (e) => e.detail.endsWith(`: ${'x'.repeat(499)}\ufffd`));
});

test('a JSON body is compact UTF-8', () => {
  const request = new RequestBuilder('POST', 'http://h/r').jsonBody({ name: 'été', n: [1, null] });
  assert.equal(new TextDecoder().decode(request.body), '{"name":"été","n":[1,null]}');
});

test('an answer whose records the host took out or kept', () => {
  const rest = new TextEncoder().encode('{"next_cursor":"c2"}');
  const taken = new RecordsResponse('http://h/x', 'data', 200, [], ['{"id":1}', '{"id":2}'], rest);
  assert.deepEqual(taken.parts(), { records: ['{"id":1}', '{"id":2}'], rest: { next_cursor: 'c2' } });
  // Kept by the host (`forwardRecords`): a count.
  assert.deepEqual(new RecordsResponse('http://h/x', 'data', 200, [], 2, rest).parts().records, 2);
  // No list at the path: a system error naming the URL and the path; not a success: the status's error.
  const missing = new RecordsResponse('http://h/x', 'result.items', 200, [], undefined, rest);
  assert.throws(() => missing.parts(), (e) => e.kind === 'system' && e.detail.includes('http://h/x') && e.detail.includes('`result.items`'));
  const denied = new RecordsResponse('http://h/x', 'data', 401, [], undefined, new TextEncoder().encode('no'));
  assert.equal(kindOf(() => denied.errorForStatus()), 'config');
});
