"""Unit tests of report jobs, resume and streamed-body helpers, outside a component
(`just test-guest-sdks`): the exported classes are called as the host would call them, with JSON
text, against the bindings `componentize-py bindings` generates for `resumable-connector`."""

import json
import unittest

from componentize_py_types import Err
from wit_world.exports import async_jobs as wit_jobs
from wit_world.imports import types as wit

import sluice_guest as sluice
from sluice_guest import Error, JobStatus, Page, http
from sluice_guest._export import _job_status_to_wit

CONFIG = json.dumps({"reports": True})


class Plain(sluice.Source):
    """A connector without report jobs."""

    def spec(self):
        return {"type": "object"}


class Reports(sluice.Source, sluice.AsyncJobs):
    """A connector with one job stream when `reports` is set; it records what it was called with."""

    calls = []

    def parse_config(self, raw):
        return sluice.field(raw, "reports", bool, False)

    def job_streams(self, reports):
        return ["report"] if reports else []

    def create_job(self, config, partition):
        return {"id": "j1", "account": partition.key["account"]}

    def poll_job(self, config, job):
        if job == "boom":
            raise Error.transient("the API is overloaded")
        if job == "bug":
            return {}["missing"]
        return JobStatus.completed({"url": f"/download/{job['id']}"})

    def read_result(self, config, job, download, token):
        return Page.from_values([{"id": 1}], {"offset": 1})

    def delete_job(self, config, job):
        Reports.calls.append(("delete", job))

    def resumable_streams(self, config):
        return ["items"]


def error_of(call):
    """The WIT error a call raised, as (kind, message)."""
    try:
        call()
    except Err as e:
        kind = {wit.Error_Config: "config", wit.Error_Transient: "transient", wit.Error_System: "system"}[type(e.value)]
        return kind, e.value.value
    raise AssertionError("no error")


class JobStatuses(unittest.TestCase):
    def test_constructors_give_kind_and_value(self):
        self.assertEqual((JobStatus.running().kind, JobStatus.running().value), ("running", None))
        self.assertEqual(JobStatus.completed({"url": "/d"}).value, {"url": "/d"})
        self.assertEqual(JobStatus.failed("no data").kind, "failed")
        self.assertEqual(JobStatus.unknown(), JobStatus("unknown"))
        self.assertNotEqual(JobStatus.completed(1), JobStatus.completed(2))
        with self.assertRaises(ValueError):
            JobStatus("done")

    def test_conversion_to_the_wit_variant(self):
        self.assertEqual(_job_status_to_wit(JobStatus.running(), wit_jobs), wit_jobs.JobStatus_Running())
        self.assertEqual(_job_status_to_wit(JobStatus.unknown(), wit_jobs), wit_jobs.JobStatus_Unknown())
        self.assertEqual(_job_status_to_wit(JobStatus.failed("gone"), wit_jobs), wit_jobs.JobStatus_Failed("gone"))
        # The download is JSON text, keys sorted as every SDK writes them.
        completed = _job_status_to_wit(JobStatus.completed({"url": "/d", "format": "jsonl"}), wit_jobs)
        self.assertEqual(completed, wit_jobs.JobStatus_Completed('{"format":"jsonl","url":"/d"}'))
        with self.assertRaises(Error) as caught:
            _job_status_to_wit("completed", wit_jobs)
        self.assertEqual(caught.exception.kind, "system")
        self.assertIn("not a JobStatus", caught.exception.message)


class Defaults(unittest.TestCase):
    def test_async_jobs_defaults(self):
        jobs = sluice.AsyncJobs()
        self.assertEqual(jobs.job_streams(None), [])
        self.assertEqual(jobs.max_jobs(None), 4)
        self.assertIsNone(jobs.delete_job(None, {"id": 1}))
        for call in (lambda: jobs.create_job(None, None), lambda: jobs.poll_job(None, None)):
            with self.assertRaises(NotImplementedError):
                call()

    def test_abort_deletes_by_default(self):
        Reports.calls.clear()
        Reports().abort_job(True, {"id": "j1"})
        self.assertEqual(Reports.calls, [("delete", {"id": "j1"})])

    def test_no_stream_resumes_by_default(self):
        self.assertEqual(Plain().resumable_streams({}), [])


class ExportConnector(unittest.TestCase):
    def test_three_classes_named_as_the_world_wants(self):
        classes = sluice.export_connector(Plain)
        self.assertEqual([c.__name__ for c in classes], ["Source", "AsyncJobs", "Resume"])
        # The plain `connector` world's export is unchanged.
        self.assertEqual(sluice.export(Plain).__name__, "Source")
        self.assertEqual(json.loads(sluice.export(Plain)().spec()), {"type": "object"})

    def test_six_classes_in_the_partition_config_world(self):
        classes = sluice.export_partition_config_connector(Plain)
        names = [c.__name__ for c in classes]
        self.assertEqual(names, ["Source", "AsyncJobs", "Resume", "SteppedPages", "StateShape", "PartitionConfig"])
        shape, partition_config = classes[4], classes[5]
        # No field named (the whole config), no state shaped.
        self.assertIsNone(partition_config().partition_fields("{}"))
        self.assertEqual(shape().shaped_streams("{}"), [])
        self.assertEqual(shape().from_host("{}", "s", '{"a":1}'), '{"a":1}')

        class Named(Plain):
            def partition_config_fields(self, config):
                return ["base_url"]

        named = sluice.export_partition_config_connector(Named)[5]
        self.assertEqual(named().partition_fields("{}"), ["base_url"])

    def test_a_connector_without_jobs_names_no_job_streams(self):
        _, jobs, resume = sluice.export_connector(Plain)
        self.assertEqual(jobs().settings("{}"), wit_jobs.JobSettings([], 0))
        self.assertEqual(resume().resumable_streams("{}"), [])
        kind, message = error_of(lambda: jobs().poll_job("{}", '{"id":1}'))
        self.assertEqual((kind, message), ("system", "this connector reads no stream through report jobs"))

    def test_settings_of_a_connector_with_jobs(self):
        _, jobs, resume = sluice.export_connector(Reports)
        self.assertEqual(jobs().settings(CONFIG), wit_jobs.JobSettings(["report"], 4))
        # No job streams for this config: none named, and no job slots asked for.
        self.assertEqual(jobs().settings("{}"), wit_jobs.JobSettings([], 0))
        self.assertEqual(resume().resumable_streams(CONFIG), ["items"])
        self.assertEqual(error_of(lambda: jobs().settings('{"reports": "yes"}'))[0], "config")

    def test_max_jobs_must_be_a_number_of_jobs(self):
        class Negative(Reports):
            def max_jobs(self, config):
                return -1

        _, jobs, _ = sluice.export_connector(Negative)
        kind, message = error_of(lambda: jobs().settings(CONFIG))
        self.assertEqual(kind, "system")
        self.assertIn("max_jobs answered -1", message)

    def test_job_calls_take_and_give_json_text(self):
        _, jobs, _ = sluice.export_connector(Reports)
        partition = wit.Partition("report", '{"account":7}', None)
        self.assertEqual(jobs().create_job(CONFIG, partition), '{"account":7,"id":"j1"}')
        self.assertEqual(jobs().poll_job(CONFIG, '{"id":"j1"}'), wit_jobs.JobStatus_Completed('{"url":"/download/j1"}'))
        page = jobs().read_result(CONFIG, '{"id":"j1"}', '{"url":"/d"}', None)
        self.assertEqual((page.records, page.next_token), (['{"id":1}'], '{"offset":1}'))
        Reports.calls.clear()
        jobs().abort_job(CONFIG, '{"id":"j1"}')
        jobs().delete_job(CONFIG, '{"id":"j2"}')
        self.assertEqual(Reports.calls, [("delete", {"id": "j1"}), ("delete", {"id": "j2"})])

    def test_bad_input_from_the_host_is_a_system_error_naming_it(self):
        _, jobs, _ = sluice.export_connector(Reports)
        for call, what in (
            (lambda: jobs().poll_job(CONFIG, "job-1"), "job handle"),
            (lambda: jobs().delete_job(CONFIG, "{"), "job handle"),
            (lambda: jobs().read_result(CONFIG, '{"id":"j1"}', "/d", None), "job download"),
            (lambda: jobs().read_result(CONFIG, '{"id":"j1"}', '{"url":"/d"}', "{offset"), "page token"),
            (lambda: jobs().create_job(CONFIG, wit.Partition("report", "{", None)), "partition key"),
        ):
            kind, message = error_of(call)
            self.assertEqual(kind, "system")
            self.assertIn(f"the host sent invalid {what} JSON", message)

    def test_errors_in_job_calls_keep_their_kind(self):
        _, jobs, _ = sluice.export_connector(Reports)
        self.assertEqual(error_of(lambda: jobs().poll_job(CONFIG, '"boom"')), ("transient", "the API is overloaded"))
        kind, message = error_of(lambda: jobs().poll_job(CONFIG, '"bug"'))
        self.assertEqual(kind, "system")
        self.assertIn("the connector raised KeyError", message)


class StreamedBodies(unittest.TestCase):
    def test_lines_split_on_line_endings_only(self):
        self.assertEqual(http.Lines('{"a":1}\n{"a":2}\r\n', 2, False).lines(), ['{"a":1}', '{"a":2}'])
        # The body's last line may have no line ending; an empty line inside stays.
        self.assertEqual(http.Lines("a\n\nb", 3, True).lines(), ["a", "", "b"])
        self.assertEqual(http.Lines("", 0, True).lines(), [])
        # JSON may hold U+2028 unescaped; it ends no line (str.splitlines would split there).
        self.assertEqual(http.Lines('{"t":"x\u2028y"}\n', 1, False).lines(), ['{"t":"x\u2028y"}'])

    def test_body_handles_come_back_from_tokens(self):
        self.assertEqual(http.Body.from_handle(7).handle, 7)
        self.assertEqual(http.Body.from_handle(7), http.Body(7))
        for bad in (-1, 2**32, "7", 7.0, True, None):
            with self.assertRaises(Error) as caught:
                http.Body.from_handle(bad)
            self.assertEqual(caught.exception.kind, "system", bad)
            self.assertIn("not a body handle", caught.exception.message)


if __name__ == "__main__":
    unittest.main()
