// The demo connector in JavaScript: reads the bundled demo API (`demo-api`), stream for stream
// the same records as the Rust one (plugins/demo-source).
//
// Streams:
// - `items`: every item, cursor pagination (`next_cursor`);
// - `accounts`: page-number pagination, ends on a short page;
// - `account_items`: one partition per account, next-URL pagination, incremental on `updated_at`;
// - `windowed_items`: every item, sliced into windows of `updated_at` (`window_minutes`) that the
//   host reads concurrently and checkpoints window by window.

import {
  CursorValue,
  Page,
  Partition,
  PartitionBatch,
  SluiceError,
  Source,
  Stream,
  exportSource,
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

function accountsPage(config, page) {
  return http.get(url(config, '/accounts')).query('page', page).query('per_page', config.pageSize).send().errorForStatus().json().data;
}

function cursorPage(request) {
  const answer = request.send().errorForStatus().json();
  return Page.fromValues(answer.data, paginate.nextCursor(answer.next_cursor));
}

class DemoSource extends Source {
  parseConfig(raw) {
    return {
      baseUrl: field(raw, 'base_url', 'string'),
      pageSize: field(raw, 'page_size', 'integer', 100),
      startDate: field(raw, 'start_date', 'string', undefined),
      windowMinutes: field(raw, 'window_minutes', 'integer', 60),
    };
  }

  spec() {
    return {
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: 'Demo API source',
      type: 'object',
      required: ['base_url'],
      additionalProperties: true,
      properties: {
        base_url: { type: 'string', description: 'Where the demo API listens, e.g. http://127.0.0.1:8080' },
        page_size: { type: 'integer', minimum: 1, maximum: 10000, default: 100 },
        start_date: { type: 'string', format: 'date-time', description: 'Read items updated after this time (incremental streams)' },
        window_minutes: { type: 'integer', minimum: 1, default: 60, description: 'Width of the windows of windowed_items' },
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

  streams(_config) {
    const accountsSchema = {
      type: 'object',
      properties: { id: { type: 'integer' }, name: { type: 'string' }, created_at: { type: 'string', format: 'date-time' } },
      required: ['id'],
    };
    return [
      new Stream('items', itemSchema()).withPrimaryKey('id'),
      new Stream('accounts', accountsSchema).withPrimaryKey('id'),
      new Stream('account_items', itemSchema()).withPrimaryKey('id').withCursorField('updated_at'),
      new Stream('windowed_items', itemSchema()).withPrimaryKey('id').withCursorField('updated_at'),
    ];
  }

  partitions(config, stream, _state) {
    if (stream !== 'account_items') return [Partition.whole(stream)];
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
    const bounds = withContext('reading item bounds', () => http.getJson(url(config, '/items/bounds')));
    if (!bounds.first_updated_at || !bounds.last_updated_at) return new PartitionBatch([]).withRecordEstimate(0);
    let from = slice.parseRfc3339(bounds.first_updated_at) - 1;
    if (config.startDate !== undefined) from = Math.max(from, slice.parseRfc3339(config.startDate));
    const windows = slice.datetimeWindows(stream, from, slice.parseRfc3339(bounds.last_updated_at), config.windowMinutes * 60);
    return new PartitionBatch(windows).withRecordEstimate(config.startDate === undefined ? bounds.count : undefined);
  }

  readPage(config, partition, token) {
    switch (partition.stream) {
      case 'items': {
        const request = http.get(url(config, '/items')).query('limit', config.pageSize);
        const cursor = paginate.cursor(token);
        if (cursor !== undefined) request.query('cursor', cursor);
        return cursorPage(request);
      }
      case 'accounts': {
        const page = paginate.pageNumber(token, 1);
        const records = accountsPage(config, page);
        return Page.fromValues(records, paginate.nextPageNumber(page, records.length, config.pageSize));
      }
      case 'account_items': {
        const nextUrl = paginate.cursor(token);
        let request;
        if (nextUrl !== undefined) {
          request = http.get(url(config, nextUrl));
        } else {
          request = http.get(url(config, `/accounts/${partition.key.account_id}/items`)).query('limit', config.pageSize);
          const start = partition.cursorStart();
          if (start !== undefined) request.query('updated_after', start.toQueryValue());
        }
        const answer = request.send().errorForStatus().json();
        return Page.fromValues(answer.data, paginate.nextCursor(answer.next));
      }
      case 'windowed_items': {
        const request = http.get(url(config, '/items')).query('limit', config.pageSize);
        const [start, end] = [partition.cursorStart(), partition.cursorEnd()];
        if (start !== undefined) request.query('updated_after', start.toQueryValue());
        if (end !== undefined) request.query('updated_until', end.toQueryValue());
        const cursor = paginate.cursor(token);
        if (cursor !== undefined) request.query('cursor', cursor);
        return cursorPage(request);
      }
      default:
        throw SluiceError.config(`unknown stream ${JSON.stringify(partition.stream)}`);
    }
  }
}

export const source = exportSource(DemoSource);
