// The demo connector in JavaScript: reads the bundled demo API (`demo-api`), stream for stream
// the same records as the Rust one (plugins/demo-source).
//
// Streams:
// - `items`: every item, cursor pagination (`next_cursor`);
// - `accounts`: page-number pagination, ends on a short page;
// - `account_items`: one partition per account, next-URL pagination, incremental on `updated_at`;
// - `windowed_items`: every item, sliced into windows of `updated_at` (`window_minutes`) that the
//   host reads concurrently and checkpoints window by window;
// - `report_items` (with `report_jobs`): one partition per account, read through the API's report
//   jobs, the result a JSON-lines download streamed a page at a time.

import {
  CursorValue,
  JobStatus,
  Page,
  Partition,
  PartitionBatch,
  SluiceError,
  Source,
  Stream,
  exportConnector,
  field,
  http,
  paginate,
  slice,
  withContext,
} from '../../guest-sdk/js/src/sluice.js';

const itemSchema = () => ({
  type: 'object',
  properties: {
    id: { type: 'integer' },
    name: { type: 'string' },
    account_id: { type: 'integer' },
    amount: { type: 'integer' },
    updated_at: { type: 'string', format: 'date-time' },
  },
  required: ['id', 'updated_at'],
});

const url = (config, path) => http.join(config.baseUrl, path);

/** The request, authenticated when the config has a key. */
const authorized = (config, request) => (config.apiKey !== undefined ? request.bearerAuth(config.apiKey) : request);
const get = (config, target) => authorized(config, http.get(target));

const accountsRequest = (config, page) => get(config, url(config, '/accounts')).query('page', page).query('per_page', config.pageSize);

function accountsPage(config, page) {
  return accountsRequest(config, page).send().errorForStatus().json().data;
}

/** The report id in a job handle `createJob` made. */
function jobId(job) {
  if (typeof job?.id !== 'string') throw SluiceError.system(`not a report job handle: ${JSON.stringify(job)}`);
  return job.id;
}

/**
 * Where a report download is being read, from `readResult`'s page token: the open body's handle
 * and the lines read from it.
 */
function readingPosition(token) {
  if (token === undefined) return undefined;
  if (!Number.isInteger(token?.body) || !Number.isInteger(token?.offset)) {
    throw SluiceError.system(`not a report page token: ${JSON.stringify(token)}`);
  }
  return token;
}

// The host takes the records out of the answer and keeps them for the page: they are passed on as
// the API wrote them, never handed to JavaScript (most of a JavaScript connector's time otherwise).
function* cursorPage(request) {
  const { rest } = (yield request.forwarded(['data'])).errorForStatus().parts();
  return new Page([], paginate.nextCursor(rest.next_cursor));
}

class DemoSource extends Source {
  /** Every field `parseConfig` reads (the host leaves out the rest). */
  partitionConfigFields(_config) {
    return ['base_url', 'page_size', 'start_date', 'window_minutes', 'api_key', 'report_jobs', 'max_jobs', 'report_page_size'];
  }

  parseConfig(raw) {
    return {
      baseUrl: field(raw, 'base_url', 'string'),
      pageSize: field(raw, 'page_size', 'integer', 100),
      startDate: field(raw, 'start_date', 'string', undefined),
      windowMinutes: field(raw, 'window_minutes', 'integer', 60),
      apiKey: field(raw, 'api_key', 'string', undefined),
      reportJobs: field(raw, 'report_jobs', 'boolean', false),
      maxJobs: field(raw, 'max_jobs', 'integer', 2),
      reportPageSize: field(raw, 'report_page_size', 'integer', 5000),
    };
  }

  spec() {
    return {
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: 'Demo API source',
      documentationUrl: 'https://example.com/sluice/demo-source',
      type: 'object',
      required: ['base_url'],
      additionalProperties: true,
      properties: {
        base_url: { type: 'string', format: 'uri', description: 'Where the demo API listens, e.g. http://127.0.0.1:8080' },
        page_size: { type: 'integer', minimum: 1, maximum: 10000, default: 100 },
        start_date: { type: 'string', format: 'date-time', description: 'Read items updated after this time (incremental streams)' },
        window_minutes: { type: 'integer', minimum: 1, default: 60, description: 'Width of the windows of windowed_items' },
        api_key: { type: 'string', airbyte_secret: true, description: 'Sent as a bearer token, when the API requires one' },
        report_jobs: { type: 'boolean', default: false, description: 'Offer report_items, read through report jobs (one per account)' },
        max_jobs: { type: 'integer', minimum: 1, default: 2, description: 'Report jobs the API allows at once' },
        report_page_size: { type: 'integer', minimum: 1, default: 5000, description: "Records per page of a report's result" },
      },
    };
  }

  hosts(config) {
    return [http.hostPort(config.baseUrl)];
  }

  check(config) {
    if (config.pageSize < 1 || config.pageSize > 10000) throw SluiceError.config('page_size must be between 1 and 10000');
    if (config.windowMinutes < 1) throw SluiceError.config('window_minutes must be at least 1');
    if (config.startDate !== undefined) withContext('start_date', () => slice.parseRfc3339(config.startDate));
    withContext('cannot list accounts', () => accountsPage(config, 1));
  }

  streams(config) {
    const accountsSchema = {
      type: 'object',
      properties: { id: { type: 'integer' }, name: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } },
      required: ['id'],
    };
    const streams = [
      new Stream('items', itemSchema()).withPrimaryKey('id'),
      new Stream('accounts', accountsSchema).withPrimaryKey('id'),
      new Stream('account_items', itemSchema()).withPrimaryKey('id').withCursorField('updated_at'),
      new Stream('windowed_items', itemSchema()).withPrimaryKey('id').withCursorField('updated_at'),
    ];
    if (config.reportJobs) streams.push(new Stream('report_items', itemSchema()).withPrimaryKey('id').withCursorField('updated_at'));
    return streams;
  }

  partitions(config, stream, _state) {
    if (stream !== 'account_items' && stream !== 'report_items') return [Partition.whole(stream)];
    // One partition per account; every page of accounts is listed (bounded by a short page).
    const start = config.startDate !== undefined ? CursorValue.datetime(config.startDate) : undefined;
    const partitions = [];
    for (let page = 1; ; page++) {
      const accounts = withContext('listing accounts', () => accountsPage(config, page));
      for (const account of accounts) partitions.push(Partition.keyed(stream, { account_id: account.id }).startingAt(start));
      if (paginate.nextPageNumber(page, accounts.length, config.pageSize) === undefined) return partitions;
    }
  }

  partitionBatch(config, stream, state, _token) {
    if (stream !== 'windowed_items') return new PartitionBatch(this.partitions(config, stream, state));
    // Windows from the first item (or start_date) to the last; the host skips finished ones.
    const bounds = withContext('reading item bounds', () => get(config, url(config, '/items/bounds')).send().errorForStatus().json());
    if (!bounds.first_updated_at || !bounds.last_updated_at) return new PartitionBatch([]).withRecordEstimate(0);
    let from = slice.parseRfc3339(bounds.first_updated_at) - 1;
    if (config.startDate !== undefined) from = Math.max(from, slice.parseRfc3339(config.startDate));
    const windows = slice.datetimeWindows(stream, from, slice.parseRfc3339(bounds.last_updated_at), config.windowMinutes * 60);
    return new PartitionBatch(windows).withRecordEstimate(config.startDate === undefined ? bounds.count : undefined);
  }

  // A generator: it yields its request and the host sends it between two steps, so a partition
  // waiting on the API keeps no instance (see `Source.steppedStreams`).
  *readPage(config, partition, token) {
    switch (partition.stream) {
      case 'items': {
        const request = get(config, url(config, '/items')).query('limit', config.pageSize);
        const cursor = paginate.cursor(token);
        if (cursor !== undefined) request.query('cursor', cursor);
        return yield* cursorPage(request);
      }
      case 'accounts': {
        const page = paginate.pageNumber(token, 1);
        const records = (yield accountsRequest(config, page)).errorForStatus().json().data;
        return Page.fromValues(records, paginate.nextPageNumber(page, records.length, config.pageSize));
      }
      case 'account_items': {
        const nextUrl = paginate.cursor(token);
        let request;
        if (nextUrl !== undefined) {
          request = get(config, url(config, nextUrl));
        } else {
          request = get(config, url(config, `/accounts/${partition.key.account_id}/items`)).query('limit', config.pageSize);
          const start = partition.cursorStart();
          if (start !== undefined) request.query('updated_after', start.toQueryValue());
        }
        const { rest } = (yield request.forwarded(['data'])).errorForStatus().parts();
        return new Page([], paginate.nextCursor(rest.next));
      }
      case 'windowed_items': {
        const request = get(config, url(config, '/items')).query('limit', config.pageSize);
        const [start, end] = [partition.cursorStart(), partition.cursorEnd()];
        if (start !== undefined) request.query('updated_after', start.toQueryValue());
        if (end !== undefined) request.query('updated_until', end.toQueryValue());
        const cursor = paginate.cursor(token);
        if (cursor !== undefined) request.query('cursor', cursor);
        return yield* cursorPage(request);
      }
      case 'report_items':
        throw SluiceError.system('report_items is read through report jobs');
      default:
        throw SluiceError.config(`unknown stream ${JSON.stringify(partition.stream)}`);
    }
  }

  // A first page and a next one of `items` and of `account_items`, read while the component is
  // built: every instance then starts with the code of a step already compiled.
  warmUp() {
    const config = { base_url: 'http://127.0.0.1:8080', page_size: 100 };
    const items = Partition.whole('items');
    const itemPage = { body: { next_cursor: '1' }, forwarded: 1 };
    const account = Partition.keyed('account_items', { account_id: 1 });
    const nextUrl = '/accounts/1/items?cursor=1&limit=100';
    const accountPage = { body: { next: nextUrl }, forwarded: 1 };
    return [
      { config, partition: items, answers: [itemPage] },
      { config, partition: items, token: '1', answers: [itemPage] },
      { config, partition: account, answers: [accountPage] },
      { config, partition: account, token: nextUrl, answers: [accountPage] },
    ];
  }

  // The demo API's tokens are stable: cursors encode a position, next links are plain URLs, pages
  // are numbers. (A report's result pages are the orchestrator's business.)
  resumableStreams(_config) {
    return ['items', 'accounts', 'account_items', 'windowed_items'];
  }

  // `report_items`: one report job per account on the demo API's `/reports` endpoints.

  jobStreams(config) {
    return config.reportJobs ? ['report_items'] : [];
  }

  maxJobs(config) {
    return config.maxJobs;
  }

  createJob(config, partition) {
    const body = { account_id: partition.key.account_id };
    const start = partition.cursorStart();
    if (start !== undefined) body.updated_after = start.toQueryValue();
    const job = authorized(config, http.post(url(config, '/reports')).jsonBody(body)).send().errorForStatus().json();
    if (typeof job?.id !== 'string') throw SluiceError.system(`POST /reports answered without a report id: ${JSON.stringify(job)}`);
    return { id: job.id };
  }

  pollJob(config, job) {
    const answer = get(config, url(config, `/reports/${jobId(job)}`)).send();
    if (answer.status === 404) return JobStatus.unknown();
    const view = answer.errorForStatus().json();
    if (view.status === 'completed') return JobStatus.completed({ url: view.download_url ?? null });
    if (view.status === 'failed') return JobStatus.failed(view.error ?? 'the report failed');
    return JobStatus.running();
  }

  /**
   * The download is one JSONL body, streamed: each call hands on the next lines of it, and the
   * token names the open body (and how far it got, to open it again from there when the partition
   * is retried in a new instance).
   */
  readResult(config, _job, download, token) {
    if (typeof download?.url !== 'string') throw SluiceError.system(`the report's download names no URL: ${JSON.stringify(download)}`);
    const openAt = (offset) => {
      const request = get(config, url(config, download.url));
      if (offset > 0) request.query('offset', offset);
      return request.open().errorForStatus().body;
    };
    const position = readingPosition(token);
    let body = position === undefined ? openAt(0) : http.Body.fromHandle(position.body);
    const offset = position?.offset ?? 0;
    let lines = body.readLines(config.reportPageSize);
    if (lines === undefined) {
      // The host no longer holds the body (a new instance reads the partition): reopen it where
      // the token got to.
      body = openAt(offset);
      lines = body.readLines(config.reportPageSize);
      if (lines === undefined) throw SluiceError.system('the body closed');
    }
    const records = lines.lines().filter((line) => line.trim() !== '');
    return new Page(records, lines.end ? undefined : { body: body.handle, offset: offset + lines.count });
  }

  deleteJob(config, job) {
    const answer = authorized(config, http.del(url(config, `/reports/${jobId(job)}`))).send();
    // Gone already is as good as deleted.
    if (answer.status !== 404) answer.errorForStatus();
  }
}

export const { source, asyncJobs, resume, steppedPages, stateShape, partitionConfig } = exportConnector(DemoSource);
