// Write Sluice data-source connectors in JavaScript.
//
// A connector extends `Source`, overriding at least `spec`, `streams` and `readPage`, and exports
// it as the component's `source` interface:
//
//   import { Source, Stream, Page, exportSource, http } from '../../guest-sdk/js/src/sluice.js';
//
//   class MySource extends Source {
//     spec() { return { type: 'object', required: ['base_url'] }; }
//     streams(config) { return [new Stream('items', { type: 'object' }).withPrimaryKey('id')]; }
//     readPage(config, partition, token) {
//       return Page.fromValues(http.getJson(`${config.base_url}/items`).data);
//     }
//   }
//
//   export const source = exportSource(MySource);
//
// Build it with `componentize-js connector.js --wit wit -n connector -d http fetch-event -o x.wasm`.
// Every method is called with everything it needs: the host keeps page tokens, partitions and
// cursors between calls, so a connector holds no state of its own (each call gets a fresh object).

import { SluiceError } from './errors.js';
import { canonicalJson, CursorValue, Page, Partition, PartitionBatch, Stream } from './types.js';
import * as http from './http.js';
import * as log from './log.js';
import * as paginate from './paginate.js';
import * as slice from './slice.js';

export { SluiceError, withContext } from './errors.js';
export { field } from './config.js';
export { CursorValue, Page, Partition, PartitionBatch, Stream } from './types.js';
export { http, log, paginate, slice };

/** A data-source connector. Only `spec`, `streams` and `readPage` have no default. */
export class Source {
  /** The connector's configuration from the operator's config JSON (an object). Throw
   * `SluiceError.config` (or use `field`) for a config that is not usable; the default keeps it. */
  parseConfig(raw) {
    return raw;
  }

  /** The JSON Schema of the config. Mark secret fields with `airbyte_secret: true`. */
  spec() {
    throw new Error('a connector must implement spec()');
  }

  /** The `host:port` pairs this config needs to reach (see `http.hostPort`). */
  hosts(_config) {
    return [];
  }

  /** Tries the config against the API. The default accepts any config that parses. */
  check(_config) {}

  /** The streams this config can read. */
  streams(_config) {
    throw new Error('a connector must implement streams()');
  }

  /** Slicing: the partitions of `stream`. The default is one partition covering it. */
  partitions(_config, stream, _state) {
    return [Partition.whole(stream)];
  }

  /** Like `partitions`, a batch at a time (set the batch's next token to be called again), or to
   * report how many records the stream holds. */
  partitionBatch(config, stream, state, _token) {
    return new PartitionBatch(this.partitions(config, stream, state));
  }

  /** One page of `partition`: `token` is `undefined` for the first page, then the previous page's next token. */
  readPage(_config, _partition, _token) {
    throw new Error('a connector must implement readPage()');
  }
}

// --- Glue between the WIT bindings and `Source`. ---

function parseJson(what, text) {
  if (text === undefined || text === null) return undefined;
  try {
    return JSON.parse(text);
  } catch (e) {
    throw SluiceError.system(`the host sent invalid ${what} JSON: ${e.message}`);
  }
}

const toToken = (value) => (value === undefined || value === null ? undefined : JSON.stringify(value));

function cursorToWit(value) {
  if (value === undefined || value === null) return undefined;
  return { tag: value.kind, val: value.kind === 'integer' ? BigInt(value.value) : value.value };
}

function cursorFromWit(value) {
  if (value === undefined || value === null) return undefined;
  if (value.tag === 'integer') {
    const n = Number(value.val);
    return CursorValue.integer(Number.isSafeInteger(n) ? n : value.val);
  }
  return new CursorValue(value.tag, value.val);
}

function partitionToWit(p) {
  const range = p.cursorRange;
  return {
    stream: p.stream,
    key: canonicalJson(p.key),
    cursorRange: range ? { start: cursorToWit(range.start), end: cursorToWit(range.end) } : undefined,
  };
}

function partitionFromWit(p) {
  const range = p.cursorRange;
  const cursorRange = range ? { start: cursorFromWit(range.start), end: cursorFromWit(range.end) } : undefined;
  return new Partition(p.stream, parseJson('partition key', p.key) ?? null, cursorRange);
}

/** Runs a call into the connector; a `SluiceError` becomes the WIT error of its kind, anything else a system error. */
function guard(call) {
  try {
    return call();
  } catch (e) {
    if (e instanceof SluiceError) throw { tag: e.kind, val: e.detail };
    const where = typeof e?.stack === 'string' && e.stack.split('\n')[0] ? ` (at ${e.stack.split('\n')[0]})` : '';
    throw { tag: 'system', val: `the connector threw ${e?.name ?? 'a value'}: ${e?.message ?? String(e)}${where}` };
  }
}

/**
 * The `source` interface the component exports, from a `Source` subclass:
 * `export const source = exportSource(MySource);`.
 */
export function exportSource(SourceClass) {
  const config = (text) => {
    let raw;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw SluiceError.config(`invalid config: ${e.message}`);
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw SluiceError.config('invalid config: expected a JSON object');
    return new SourceClass().parseConfig(raw);
  };
  return {
    spec: () => JSON.stringify(new SourceClass().spec()),
    capabilities: (configJson) => guard(() => ({ hosts: [...new SourceClass().hosts(config(configJson))] })),
    check: (configJson) => guard(() => void new SourceClass().check(config(configJson))),
    discover: (configJson) =>
      guard(() =>
        new SourceClass().streams(config(configJson)).map((s) => ({
          name: s.name,
          jsonSchema: JSON.stringify(s.jsonSchema),
          primaryKey: s.primaryKey,
          cursorField: s.cursorField ?? undefined,
        })),
      ),
    partitions: (configJson, stream, state, token) =>
      guard(() => {
        const parsed = config(configJson);
        const batch = new SourceClass().partitionBatch(parsed, stream, parseJson('state', state), parseJson('partition token', token));
        const estimate = batch.recordEstimate;
        return {
          partitions: batch.partitions.map(partitionToWit),
          nextToken: toToken(batch.nextToken),
          recordEstimate: estimate === undefined || estimate === null ? undefined : BigInt(estimate),
        };
      }),
    readPage: (configJson, partition, token) =>
      guard(() => {
        const parsed = config(configJson);
        const page = new SourceClass().readPage(parsed, partitionFromWit(partition), parseJson('page token', token));
        return { records: page.records, nextToken: toToken(page.nextToken) };
      }),
  };
}
