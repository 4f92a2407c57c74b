// The values a connector hands to the host, in plain JavaScript.

/** JSON text with object keys sorted, as the Rust SDK writes them: a key is the same text in every language. */
export function canonicalJson(value) {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).filter((k) => value[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

/** A stream: its name, the JSON Schema of one record, its primary key and (incremental streams) cursor field. */
export class Stream {
  constructor(name, jsonSchema) {
    this.name = name;
    this.jsonSchema = jsonSchema;
    this.primaryKey = [];
    this.cursorField = undefined;
  }

  /** Adds a top-level field to the primary key (call again for composite keys). */
  withPrimaryKey(field) {
    this.primaryKey.push([field]);
    return this;
  }

  /** Makes the stream incremental on a top-level field that grows as records change. */
  withCursorField(field) {
    this.cursorField = [field];
    return this;
  }
}

/** A cursor value the host can order: `integer`, `datetime` (RFC 3339) or `text`. */
export class CursorValue {
  constructor(kind, value) {
    this.kind = kind;
    this.value = value;
  }

  static integer(value) {
    return new CursorValue('integer', value);
  }

  static datetime(value) {
    return new CursorValue('datetime', value);
  }

  static text(value) {
    return new CursorValue('text', value);
  }

  /** The value as text, as an API query parameter wants it. */
  toQueryValue() {
    return String(this.value);
  }
}

/** An independent slice of a stream, read in its own instance. */
export class Partition {
  constructor(stream, key = null, cursorRange = undefined) {
    this.stream = stream;
    this.key = key;
    // `{start, end}`: records after `start`, up to and including `end` (each optional).
    this.cursorRange = cursorRange;
  }

  /** The one partition of an unpartitioned stream (key `null`). */
  static whole(stream) {
    return new Partition(stream);
  }

  /** A partition identified by `key` (any JSON value), the same in every run. */
  static keyed(stream, key) {
    return new Partition(stream, key);
  }

  /** Where the partition starts; the host raises it to the saved cursor on incremental runs. */
  startingAt(start) {
    this.cursorRange = { ...(this.cursorRange ?? {}), start: start ?? undefined };
    return this;
  }

  /** Where it ends (inclusive): a bounded partition the host checkpoints as a finished range. */
  endingAt(end) {
    this.cursorRange = { ...(this.cursorRange ?? {}), end: end ?? undefined };
    return this;
  }

  cursorStart() {
    return this.cursorRange?.start;
  }

  cursorEnd() {
    return this.cursorRange?.end;
  }
}

/** One page of records (JSON text) and the token of the next page (`undefined` ends the partition). */
export class Page {
  constructor(records = [], nextToken = undefined) {
    this.records = records;
    this.nextToken = nextToken;
  }

  /** A page of records given as values (objects). */
  static fromValues(records, nextToken = undefined) {
    return new Page(records.map((r) => JSON.stringify(r)), nextToken);
  }

  next(token) {
    this.nextToken = token ?? undefined;
    return this;
  }
}

/** Some partitions of a stream, the token of the next batch, and the stream's record count when known. */
export class PartitionBatch {
  constructor(partitions, nextToken = undefined, recordEstimate = undefined) {
    this.partitions = partitions;
    this.nextToken = nextToken;
    this.recordEstimate = recordEstimate;
  }

  next(token) {
    this.nextToken = token ?? undefined;
    return this;
  }

  withRecordEstimate(records) {
    this.recordEstimate = records ?? undefined;
    return this;
  }
}

const JOB_STATUSES = ['running', 'completed', 'failed', 'unknown'];

/**
 * Where a report job is, as `pollJob` answers: `JobStatus.running()` (poll again later),
 * `JobStatus.completed(download)` (what to read, handed to `readResult`: a download URL, a result
 * id; any JSON value), `JobStatus.failed(message)` (the host may create a new job) or
 * `JobStatus.unknown()` (the API does not know the job: the host creates a new one).
 */
export class JobStatus {
  constructor(kind, value = undefined) {
    if (!JOB_STATUSES.includes(kind)) throw new TypeError(`unknown job status ${JSON.stringify(kind)}`);
    this.kind = kind;
    // The download of a completed job, the message of a failed one, else undefined.
    this.value = value;
  }

  static running() {
    return new JobStatus('running');
  }

  static completed(download) {
    return new JobStatus('completed', download);
  }

  static failed(message) {
    return new JobStatus('failed', String(message));
  }

  static unknown() {
    return new JobStatus('unknown');
  }
}

/**
 * Lines of a streamed body (`Body.readLines`), as one text, and whether it ended: `text` holds
 * `count` complete lines, each with its line ending as sent (the body's last line may have none),
 * to split with `lines()` or hand to a CSV reader as it is; `end` is true when the body has no
 * more (the host has closed it).
 */
export class Lines {
  constructor(text, count, end) {
    this.text = text;
    this.count = count;
    this.end = end;
  }

  /** The lines, without their `\n` or `\r\n` (a trailing line ending starts no empty line). */
  lines() {
    const lines = this.text.split('\n');
    if (lines[lines.length - 1] === '') lines.pop();
    return lines.map((line) => (line.endsWith('\r') ? line.slice(0, -1) : line));
  }
}
