// Glue between the WIT bindings componentize-js generates and `Source`; not part of the API.
// jco's conventions: names in camelCase, variants and errors as `{tag, val}` (a thrown value
// is the `err` of a `result`), `option` as `undefined`, u32 as a number and u64 as a BigInt.
// It imports nothing from the host, so it is unit-tested outside a component.

import { SluiceError } from './errors.js';
import { Later } from './requests.js';
import { canonicalJson, CursorValue, JobStatus, Partition } from './types.js';
import { warming } from './warming.js';

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

const pageToWit = (page) => ({ records: page.records, nextToken: toToken(page.nextToken) });

const isGenerator = (value) => typeof value?.next === 'function' && typeof value?.throw === 'function';

function checkedPage(page) {
  if (page === null || typeof page !== 'object' || !Array.isArray(page.records)) {
    throw SluiceError.system(`readPage returned ${String(page)}, not a Page`);
  }
  return page;
}

/** What the connector's `readPage` returns for the host's arguments: a page, or a generator. */
function readPage(SourceClass, config, configJson, partition, token) {
  return new SourceClass().readPage(config(configJson), partitionFromWit(partition), parseJson('page token', token));
}

/** What `readPage` returned; for a generator, run with each request it yields sent now. */
function pageNow(result) {
  if (!isGenerator(result)) return checkedPage(result);
  let next = result.next();
  while (!next.done) {
    const later = Later.of(next.value);
    let answer;
    try {
      answer = later.sendNow();
    } catch (e) {
      next = result.throw(e);
      continue;
    }
    next = result.next(answer);
  }
  return checkedPage(next.value);
}

/**
 * One step of a `readPage` generator: run again from its start, each request it yields answered
 * by the host's answers so far (jco's `{tag: 'ok' | 'err', val}`); the next request it yields, or
 * its page. A `readPage` that is not a generator ends the page at once.
 */
export function step(result, answers) {
  if (!isGenerator(result)) return { tag: 'page', val: pageToWit(checkedPage(result)) };
  let next = result.next();
  for (const answer of answers) {
    if (next.done) break;
    const later = Later.of(next.value);
    next = answer.tag === 'err' ? result.throw(later.failed(answer.val)) : result.next(later.answered(answer.val));
  }
  if (next.done) return { tag: 'page', val: pageToWit(checkedPage(next.value)) };
  const outgoing = Later.of(next.value).toWit();
  result.return();
  return { tag: 'send', val: outgoing };
}

/** The WIT `job-status` of what `pollJob` answered. */
export function jobStatusToWit(status) {
  if (!(status instanceof JobStatus)) throw SluiceError.system(`pollJob answered ${String(status)}, not a JobStatus`);
  switch (status.kind) {
    case 'completed':
      return { tag: 'completed', val: canonicalJson(status.value) };
    case 'failed':
      return { tag: 'failed', val: String(status.value) };
    default:
      return { tag: status.kind };
  }
}

const MAX_U32 = 2 ** 32 - 1;

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
 * How many times each warm-up page is read: enough for the engine to have compiled the functions
 * it runs (lazily, on their first call) and filled their inline caches.
 */
export const WARM_UP_ROUNDS = 16;

const encoder = new TextEncoder();

function warmAnswer({ body, status = 200, headers = [], records, forwarded }) {
  let rest = body;
  // Nothing given: an empty body, or with records taken out, the rest of an object.
  if (rest === undefined || rest === null) rest = records === undefined && forwarded === undefined ? '' : '{}';
  else if (typeof rest !== 'string' && !(rest instanceof Uint8Array)) rest = canonicalJson(rest);
  return {
    tag: 'ok',
    val: {
      status,
      headers: [...headers],
      records: records === undefined ? undefined : records.map((r) => (typeof r === 'string' ? r : canonicalJson(r))),
      forwarded,
      rest: typeof rest === 'string' ? encoder.encode(rest) : rest,
    },
  };
}

/**
 * Reads the pages `Source.warmUp` names, step by step with their sample answers, as the host
 * would: the connector's module is evaluated while the component is built, so this runs before
 * the snapshot every instance starts from. A page that fails stops there; nothing is thrown (it
 * only warms).
 */
function warmUp(SourceClass, readStep) {
  let pages;
  try {
    pages = [...new SourceClass().warmUp()].map((page) => ({
      config: JSON.stringify(page.config ?? {}),
      partition: partitionToWit(page.partition),
      token: toToken(page.token),
      answers: [...(page.answers ?? [])].map(warmAnswer),
    }));
  } catch (e) {
    console.error(`sluice: warmUp() failed, nothing is warmed up: ${e?.message ?? String(e)}`);
    return;
  }
  warming.active = true;
  try {
    for (let round = 0; round < (pages.length ? WARM_UP_ROUNDS : 0); round++) {
      for (const { config, partition, token, answers } of pages) {
        for (let taken = 0; taken <= answers.length; taken++) {
          let next;
          try {
            next = readStep(config, partition, token, answers.slice(0, taken));
          } catch {
            break;
          }
          if (next.tag !== 'send') break;
        }
      }
    }
  } finally {
    warming.active = false;
  }
}

/** Reads the config text the host passes to every call into what the connector wants. */
function configParser(SourceClass) {
  return (text) => {
    let raw;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw SluiceError.config(`invalid config: ${e.message}`);
    }
    if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) throw SluiceError.config('invalid config: expected a JSON object');
    return new SourceClass().parseConfig(raw);
  };
}

/**
 * The `source` interface the component exports, from a `Source` subclass, for the plain
 * `connector` world: `export const source = exportSource(MySource);`.
 */
export function exportSource(SourceClass) {
  const config = configParser(SourceClass);
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
        return pageToWit(pageNow(readPage(SourceClass, config, configJson, partition, token)));
      }),
  };
}

/**
 * What `settings` answers: the job streams and how many jobs at once. A connector with no job
 * streams for this config asks for no job slots, as the Rust SDK's `export_source!` does.
 */
function jobSettings(source, config) {
  const streams = [...source.jobStreams(config)];
  if (streams.length === 0) return { streams: [], maxJobs: 0 };
  const maxJobs = source.maxJobs(config);
  if (!Number.isInteger(maxJobs) || maxJobs < 0 || maxJobs > MAX_U32) {
    throw SluiceError.system(`maxJobs answered ${String(maxJobs)}, not a number of jobs`);
  }
  return { streams, maxJobs };
}

/**
 * The interfaces the component exports in the `stepped-connector` world (`source`,
 * `async-jobs`, `resume` and `stepped-pages`), from a `Source` subclass, with or without job
 * streams: `export const { source, asyncJobs, resume, steppedPages } = exportConnector(MySource);`.
 * (`steppedPages` may be left out in the `resumable-connector` world; in the
 * `partition-config-connector` world, export `stateShape` and `partitionConfig` too.)
 */
export function exportConnector(SourceClass) {
  const config = configParser(SourceClass);
  const job = (text) => parseJson('job handle', text);
  const asyncJobs = {
    settings: (configJson) => guard(() => jobSettings(new SourceClass(), config(configJson))),
    createJob: (configJson, partition) =>
      guard(() => canonicalJson(new SourceClass().createJob(config(configJson), partitionFromWit(partition)))),
    pollJob: (configJson, handle) => guard(() => jobStatusToWit(new SourceClass().pollJob(config(configJson), job(handle)))),
    readResult: (configJson, handle, download, token) =>
      guard(() => {
        const parsed = config(configJson);
        const page = new SourceClass().readResult(parsed, job(handle), parseJson('job download', download), parseJson('page token', token));
        return pageToWit(page);
      }),
    abortJob: (configJson, handle) => guard(() => void new SourceClass().abortJob(config(configJson), job(handle))),
    deleteJob: (configJson, handle) => guard(() => void new SourceClass().deleteJob(config(configJson), job(handle))),
  };
  const resume = {
    resumableStreams: (configJson) => guard(() => [...new SourceClass().resumableStreams(config(configJson))]),
  };
  const steppedPages = {
    steppedStreams: (configJson) => guard(() => [...new SourceClass().steppedStreams(config(configJson))]),
    readStep: (configJson, partition, token, answers) =>
      guard(() => {
        return step(readPage(SourceClass, config, configJson, partition, token), answers);
      }),
  };
  warmUp(SourceClass, steppedPages.readStep);
  // The `partition-config-connector` world (contract 0.1.7) adds these two; no state is shaped.
  const stateShape = {
    shapedStreams: (_configJson) => [],
    toHost: (_configJson, _stream, _state) => undefined,
    fromHost: (_configJson, _stream, state) => state,
  };
  const partitionConfig = {
    partitionFields: (configJson) =>
      guard(() => {
        const fields = new SourceClass().partitionConfigFields(config(configJson));
        return fields === undefined || fields === null ? undefined : fields.map(String);
      }),
  };
  return { source: exportSource(SourceClass), asyncJobs, resume, steppedPages, stateShape, partitionConfig };
}
