// Unit tests of report jobs, resume and streamed-body helpers, outside a component
// (`just test-guest-sdks`): the exported interfaces are called as the host would call them, with
// JSON text, and answer in jco's shapes (`{tag, val}` variants, thrown `{tag, val}` errors).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SluiceError } from '../src/errors.js';
import { exportConnector, exportSource, jobStatusToWit } from '../src/export.js';
import { Source } from '../src/source.js';
import { JobStatus, Lines, Page } from '../src/types.js';

const CONFIG = JSON.stringify({ reports: true });

/** A connector without report jobs. */
class Plain extends Source {
  spec() {
    return { type: 'object' };
  }
}

/** A connector with one job stream when `reports` is set; it records what it was called with. */
class Reports extends Source {
  static calls = [];

  parseConfig(raw) {
    if (raw.reports !== undefined && typeof raw.reports !== 'boolean') throw SluiceError.config('reports must be a boolean');
    return raw.reports ?? false;
  }

  jobStreams(reports) {
    return reports ? ['report'] : [];
  }

  createJob(_config, partition) {
    return { id: 'j1', account: partition.key.account };
  }

  pollJob(_config, job) {
    if (job === 'boom') throw SluiceError.transient('the API is overloaded');
    if (job === 'bug') return job.missing.field;
    return JobStatus.completed({ url: `/download/${job.id}` });
  }

  readResult() {
    return Page.fromValues([{ id: 1 }], { offset: 1 });
  }

  deleteJob(_config, job) {
    Reports.calls.push(['delete', job]);
  }

  resumableStreams() {
    return ['items'];
  }
}

/** The WIT error a call threw, as `{tag, val}`. */
const errorOf = (call) => {
  try {
    call();
  } catch (e) {
    return e;
  }
  assert.fail('no error');
};

test('job statuses carry their kind and value', () => {
  assert.deepEqual([JobStatus.running().kind, JobStatus.running().value], ['running', undefined]);
  assert.deepEqual(JobStatus.completed({ url: '/d' }).value, { url: '/d' });
  assert.equal(JobStatus.failed('no data').kind, 'failed');
  assert.equal(JobStatus.unknown().kind, 'unknown');
  assert.throws(() => new JobStatus('done'), TypeError);
});

test('job statuses become the WIT variant', () => {
  assert.deepEqual(jobStatusToWit(JobStatus.running()), { tag: 'running' });
  assert.deepEqual(jobStatusToWit(JobStatus.unknown()), { tag: 'unknown' });
  assert.deepEqual(jobStatusToWit(JobStatus.failed('gone')), { tag: 'failed', val: 'gone' });
  // The download is JSON text, keys sorted as every SDK writes them.
  assert.deepEqual(jobStatusToWit(JobStatus.completed({ url: '/d', format: 'jsonl' })), { tag: 'completed', val: '{"format":"jsonl","url":"/d"}' });
  assert.throws(() => jobStatusToWit({ tag: 'running' }), (e) => e.kind === 'system' && /not a JobStatus/.test(e.detail));
});

test('defaults: no job streams, four jobs, abort deletes, delete does nothing, nothing resumes', () => {
  const plain = new Plain();
  assert.deepEqual(plain.jobStreams({}), []);
  assert.equal(plain.maxJobs({}), 4);
  assert.equal(plain.deleteJob({}, { id: 1 }), undefined);
  assert.deepEqual(plain.resumableStreams({}), []);
  assert.throws(() => plain.createJob({}, undefined), /must implement createJob/);
  Reports.calls.length = 0;
  new Reports().abortJob(true, { id: 'j1' });
  assert.deepEqual(Reports.calls, [['delete', { id: 'j1' }]]);
});

test('exportConnector gives the six interfaces; exportSource still gives one', () => {
  const exported = exportConnector(Plain);
  assert.deepEqual(Object.keys(exported).sort(), ['asyncJobs', 'partitionConfig', 'resume', 'source', 'stateShape', 'steppedPages']);
  // No field named: every call gets the whole config; no state shaped.
  assert.equal(exported.partitionConfig.partitionFields('{}'), undefined);
  assert.deepEqual(exported.stateShape.shapedStreams('{}'), []);
  class Named extends Plain {
    partitionConfigFields(_config) {
      return ['base_url'];
    }
  }
  assert.deepEqual(exportConnector(Named).partitionConfig.partitionFields('{}'), ['base_url']);
  assert.deepEqual(Object.keys(exported.steppedPages).sort(), ['readStep', 'steppedStreams']);
  assert.deepEqual(Object.keys(exported.asyncJobs).sort(), ['abortJob', 'createJob', 'deleteJob', 'pollJob', 'readResult', 'settings']);
  assert.deepEqual(Object.keys(exported.resume), ['resumableStreams']);
  assert.equal(exported.source.spec(), '{"type":"object"}');
  assert.equal(exportSource(Plain).spec(), '{"type":"object"}');
});

test('settings: none for a connector without job streams, its own with them', () => {
  const plain = exportConnector(Plain);
  assert.deepEqual(plain.asyncJobs.settings('{}'), { streams: [], maxJobs: 0 });
  assert.deepEqual(plain.resume.resumableStreams('{}'), []);
  const reports = exportConnector(Reports);
  assert.deepEqual(reports.asyncJobs.settings(CONFIG), { streams: ['report'], maxJobs: 4 });
  // No job streams for this config: none named, and no job slots asked for.
  assert.deepEqual(reports.asyncJobs.settings('{}'), { streams: [], maxJobs: 0 });
  assert.deepEqual(reports.resume.resumableStreams(CONFIG), ['items']);
  assert.equal(errorOf(() => reports.asyncJobs.settings('{"reports":"yes"}')).tag, 'config');
  class Fractional extends Reports {
    maxJobs() {
      return 1.5;
    }
  }
  const bad = errorOf(() => exportConnector(Fractional).asyncJobs.settings(CONFIG));
  assert.equal(bad.tag, 'system');
  assert.match(bad.val, /maxJobs answered 1.5/);
});

test('job calls take and give JSON text', () => {
  const { asyncJobs } = exportConnector(Reports);
  assert.equal(asyncJobs.createJob(CONFIG, { stream: 'report', key: '{"account":7}' }), '{"account":7,"id":"j1"}');
  assert.deepEqual(asyncJobs.pollJob(CONFIG, '{"id":"j1"}'), { tag: 'completed', val: '{"url":"/download/j1"}' });
  assert.deepEqual(asyncJobs.readResult(CONFIG, '{"id":"j1"}', '{"url":"/d"}', undefined), { records: ['{"id":1}'], nextToken: '{"offset":1}' });
  Reports.calls.length = 0;
  assert.equal(asyncJobs.abortJob(CONFIG, '{"id":"j1"}'), undefined);
  asyncJobs.deleteJob(CONFIG, '{"id":"j2"}');
  assert.deepEqual(Reports.calls, [['delete', { id: 'j1' }], ['delete', { id: 'j2' }]]);
});

test('bad input from the host is a system error naming it', () => {
  const { asyncJobs } = exportConnector(Reports);
  const cases = [
    [() => asyncJobs.pollJob(CONFIG, 'job-1'), 'job handle'],
    [() => asyncJobs.deleteJob(CONFIG, '{'), 'job handle'],
    [() => asyncJobs.readResult(CONFIG, '{"id":"j1"}', '/d', undefined), 'job download'],
    [() => asyncJobs.readResult(CONFIG, '{"id":"j1"}', '{"url":"/d"}', '{offset'), 'page token'],
    [() => asyncJobs.createJob(CONFIG, { stream: 'report', key: '{' }), 'partition key'],
  ];
  for (const [call, what] of cases) {
    const e = errorOf(call);
    assert.equal(e.tag, 'system', what);
    assert.ok(e.val.startsWith(`the host sent invalid ${what} JSON`), e.val);
  }
});

test('errors in job calls keep their kind', () => {
  const { asyncJobs } = exportConnector(Reports);
  assert.deepEqual(errorOf(() => asyncJobs.pollJob(CONFIG, '"boom"')), { tag: 'transient', val: 'the API is overloaded' });
  const bug = errorOf(() => asyncJobs.pollJob(CONFIG, '"bug"'));
  assert.equal(bug.tag, 'system');
  assert.match(bug.val, /^the connector threw TypeError/);
});

test('lines split on line endings only', () => {
  assert.deepEqual(new Lines('{"a":1}\n{"a":2}\r\n', 2, false).lines(), ['{"a":1}', '{"a":2}']);
  // The body's last line may have no line ending; an empty line inside stays.
  assert.deepEqual(new Lines('a\n\nb', 3, true).lines(), ['a', '', 'b']);
  assert.deepEqual(new Lines('', 0, true).lines(), []);
  assert.deepEqual(new Lines('{"t":"x\u2028y"}\n', 1, false).lines(), ['{"t":"x\u2028y"}']);
});
