// Write Sluice data-source connectors in JavaScript.
//
// A connector extends `Source`, overriding at least `spec`, `streams` and `readPage`, and exports
// the component's interfaces from its module:
//
//   import { Source, Stream, Page, exportConnector, http } from '../../guest-sdk/js/src/sluice.js';
//
//   class MySource extends Source {
//     spec() { return { type: 'object', required: ['base_url'] }; }
//     streams(config) { return [new Stream('items', { type: 'object' }).withPrimaryKey('id')]; }
//     readPage(config, partition, token) {
//       return Page.fromValues(http.getJson(`${config.base_url}/items`).data);
//     }
//   }
//
//   export const { source, asyncJobs, resume } = exportConnector(MySource);
//
// Build it in the `resumable-connector` world, as the Rust SDK builds every connector:
// `componentize-js connector.js --wit wit -n resumable-connector -d http fetch-event -o x.wasm`.
// Streams read through report jobs are methods of the same class (`jobStreams`, `createJob`,
// `pollJob`, `readResult`, ...; see `Source`), and streams whose page tokens stay valid across
// runs are named by `resumableStreams`. (`export const source = exportSource(MySource);` exports
// the `source` interface alone, for the plain `connector` world: `-n connector`.)
//
// Every method is called with everything it needs: the host keeps page tokens, partitions,
// cursors and job handles between calls, so a connector holds no state of its own (each call
// gets a fresh object).

import * as http from './http.js';
import * as log from './log.js';
import * as paginate from './paginate.js';
import * as slice from './slice.js';

export { SluiceError, withContext } from './errors.js';
export { field } from './config.js';
export { CursorValue, JobStatus, Lines, Page, Partition, PartitionBatch, Stream } from './types.js';
export { Source } from './source.js';
export { exportConnector, exportSource } from './export.js';
export { http, log, paginate, slice };
