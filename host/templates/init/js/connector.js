// {{name}}: a Sluice connector (written by `host init`). It reads one stream, `items`, from
// `{base_url}/items`: cursor pagination (`next_cursor`), incremental on `updated_at`. Change it
// to fit your API; README.md has the build and test commands.

import { Page, Partition, Source, Stream, exportConnector, field, http, paginate } from './sluice/js/src/sluice.js';

class Connector extends Source {
  parseConfig(raw) {
    return { baseUrl: field(raw, 'base_url', 'string'), pageSize: field(raw, 'page_size', 'integer', 100) };
  }

  spec() {
    return {
      $schema: 'http://json-schema.org/draft-07/schema#',
      title: '{{name}}',
      type: 'object',
      required: ['base_url'],
      properties: {
        base_url: { type: 'string', description: 'Where the API listens, e.g. http://127.0.0.1:8080' },
        page_size: { type: 'integer', minimum: 1, maximum: 10000, default: 100 },
      },
    };
  }

  /** What the operator must grant (`--allow-host`). */
  hosts(config) {
    return [http.hostPort(config.baseUrl)];
  }

  check(config) {
    http.get(http.join(config.baseUrl, '/items')).query('limit', 1).send().errorForStatus();
  }

  streams(_config) {
    const schema = {
      type: 'object',
      required: ['id', 'updated_at'],
      properties: {
        id: { type: 'integer' },
        name: { type: 'string' },
        updated_at: { type: 'string', format: 'date-time' },
      },
    };
    return [new Stream('items', schema).withPrimaryKey('id').withCursorField('updated_at')];
  }

  // A generator: it yields its request and the host sends it between two steps of the page, so a
  // partition waiting on the API keeps no instance. (`yield request.forwarded(['data'])` has the
  // host keep the records for the page, never handed to JavaScript: faster.)
  *readPage(config, partition, token) {
    const request = http.get(http.join(config.baseUrl, '/items')).query('limit', config.pageSize);
    // Incremental: the host sets the partition's start from the saved state.
    const start = partition.cursorStart();
    if (start !== undefined) request.query('updated_after', start.toQueryValue());
    const cursor = paginate.cursor(token);
    if (cursor !== undefined) request.query('cursor', cursor);
    const answer = (yield request).errorForStatus().json();
    return Page.fromValues(answer.data, paginate.nextCursor(answer.next_cursor));
  }

  // Pages read while the component is built, with answers shaped like the API's: every instance
  // then starts with the code of a page already compiled. They run with no host (no `send()`, no
  // logging).
  warmUp() {
    const config = { base_url: 'http://127.0.0.1:8080', page_size: 100 };
    const record = { id: 1, name: 'one', updated_at: '2024-01-01T00:00:00Z' };
    const answer = { body: { data: [record], next_cursor: '1' } };
    const items = Partition.whole('items');
    return [
      { config, partition: items, answers: [answer] },
      { config, partition: items, token: '1', answers: [answer] },
    ];
  }
}

export const { source, asyncJobs, resume, steppedPages } = exportConnector(Connector);
