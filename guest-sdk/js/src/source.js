// The class a connector extends. It imports nothing from the host, so its defaults are
// unit-tested outside a component.

import { PartitionBatch, Partition } from './types.js';

/**
 * A data-source connector. Only `spec`, `streams` and `readPage` have no default.
 *
 * Streams read through report jobs (the `async-jobs` interface) are methods of the same class:
 * a connector with job streams names them in `jobStreams` and implements `createJob`, `pollJob`
 * and `readResult`; `maxJobs`, `abortJob` and `deleteJob` have defaults. The host decides when
 * each is called: it keeps job slots, polls on timers, retries failed jobs as new ones, and keeps
 * handles in its state so a resumed run polls the same jobs.
 */
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

  /**
   * The streams whose page tokens stay valid across runs (an offset, a page number, a cursor or
   * next-page URL the API keeps): the host may then save a partition's next token after each page
   * and resume the partition there after a crash, instead of reading it again from its start.
   * The default is none.
   */
  resumableStreams(_config) {
    return [];
  }

  /**
   * The top-level config fields reading a partition uses (contract 0.1.7, the
   * `partition-config-connector` world): the host then hands `readPage` and the job calls a
   * config with only those, so a field only `partitions` reads (a list of the accounts to read,
   * as long as the run has partitions) is not parsed again in every partition's fresh instance;
   * `parseConfig` must accept the config without the others. The default is `undefined`: every
   * call gets the whole config.
   */
  partitionConfigFields(_config) {
    return undefined;
  }

  /**
   * The streams read in steps (contract 0.1.5): a `readPage` written as a generator
   * (`*readPage(config, partition, token)`) yields its requests instead of sending them
   * (`const answer = yield request`, or `yield request.records(path)`), and the host sends each
   * between two steps of the page, with no instance kept while the answer is on its way. Each
   * step runs `readPage` again from its start with the answers so far, so it must ask for the
   * same requests given the same answers (it does when it keeps no state, as every connector
   * must). The default: every stream but job streams when `readPage` is a generator.
   */
  steppedStreams(config) {
    if (this.readPage?.constructor?.name !== 'GeneratorFunction') return [];
    const jobs = new Set(this.jobStreams(config));
    return this.streams(config).map((s) => s.name).filter((name) => !jobs.has(name));
  }

  /**
   * Pages of streams read in steps to read while the component is built, with sample answers:
   * `[{ config, partition, token, answers: [{ body, status, headers, records, forwarded }] }]`
   * (`config` as the operator would write it, `partition` a `Partition`, `token` undefined for
   * a first page; an answer's `body` a JSON value or text, with `records` taken out or
   * `forwarded` records kept, as `yield request.records(path)` / `.forwarded(path)` answer). The
   * SDK reads each a few times before the engine's snapshot is taken, so every instance starts
   * with the code that reads pages already compiled and its caches filled, instead of warming
   * them up again in each step. They run with no host: their steps may only compute (no
   * `send()`, no logging), and what they leave behind is in every instance, so keep nothing at
   * module level. A page that fails is skipped. The default is none.
   */
  warmUp() {
    return [];
  }

  /** The streams read through report jobs; their partitions come from `partitions`. The default is none. */
  jobStreams(_config) {
    return [];
  }

  /** Report jobs the API allows at once (the operator may override it with `--max-jobs`). */
  maxJobs(_config) {
    return 4;
  }

  /** Starts a job for a partition (its cursor range filled as for `readPage`); returns its
   * handle: any JSON value later calls need (an id, a URL). */
  createJob(_config, _partition) {
    throw new Error('a connector with job streams must implement createJob()');
  }

  /** Where the job is now: a `JobStatus`. */
  pollJob(_config, _job) {
    throw new Error('a connector with job streams must implement pollJob()');
  }

  /** One page of a completed job's result: `download` is what `pollJob` answered with
   * `JobStatus.completed`; `token` is `undefined` first, then the previous page's next token. */
  readResult(_config, _job, _download, _token) {
    throw new Error('a connector with job streams must implement readResult()');
  }

  /** Stops a running job (it timed out, or the run was cancelled); by default, deletes it. */
  abortJob(config, job) {
    return this.deleteJob(config, job);
  }

  /** Removes a job once its result was read; by default, nothing. */
  deleteJob(_config, _job) {}
}
