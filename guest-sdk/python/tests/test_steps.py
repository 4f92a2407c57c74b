"""Unit tests of pages read in steps (`stepped-pages`, contract 0.1.5), outside a component: the
exported `SteppedPages` class is called as the host calls it, with the answers the host got."""

import json
import unittest

from componentize_py_types import Err, Ok
from wit_world.exports import stepped_pages as wit_steps
from wit_world.imports import http as wit_http
from wit_world.imports import types as wit

import sluice_guest as sluice
from sluice_guest import Error, Page, http

CONFIG = json.dumps({})
PARTITION = wit.Partition("items", "null", None)


class Stepped(sluice.Source, sluice.AsyncJobs):
    """Two requests a page: a count, then the records; `report` is a job stream."""

    def spec(self):
        return {"type": "object"}

    def streams(self, config):
        return [sluice.Stream("items", {}), sluice.Stream("report", {})]

    def job_streams(self, config):
        return ["report"]

    def read_page(self, config, partition, token):
        count = (yield http.get("https://api.example.com/count")).error_for_status().json()["count"]
        try:
            records, rest = (yield http.get(f"https://api.example.com/items?n={count}").records(["data"])).parts()
        except Error as e:
            return Page.from_values([{"failed": e.message}])
        return Page(records, rest.get("next"))


class Whole(sluice.Source):
    """A `read_page` that is not a generator: not read in steps."""

    def spec(self):
        return {"type": "object"}

    def streams(self, config):
        return [sluice.Stream("items", {})]

    def read_page(self, config, partition, token):
        return Page.from_values([{"id": 1}])


def answer(body: bytes, records=None, status=200):
    return Ok(wit_steps.Answer(status, [], records, None, body))


def step(cls, answers):
    _, _, _, exported = sluice.export_stepped_connector(cls)
    return exported().read_step(CONFIG, PARTITION, None, answers)


class SteppedPagesTest(unittest.TestCase):
    def test_the_first_step_asks_for_the_first_request(self):
        first = step(Stepped, [])
        self.assertIsInstance(first, wit_steps.Step_Send)
        self.assertEqual(first.value.request.url, "https://api.example.com/count")
        self.assertIsInstance(first.value.body, wit_steps.BodyUse_Whole)

    def test_each_step_runs_the_page_again_with_the_answers_so_far(self):
        second = step(Stepped, [answer(b'{"count": 2}')])
        self.assertEqual(second.value.request.url, "https://api.example.com/items?n=2")
        self.assertEqual(second.value.body, wit_steps.BodyUse_Records(["data"]))
        last = step(Stepped, [answer(b'{"count": 2}'), answer(b'{"next": "t"}', ['{"id":1}', '{"id":2}'])])
        self.assertIsInstance(last, wit_steps.Step_Page)
        self.assertEqual(last.value.records, ['{"id":1}', '{"id":2}'])
        self.assertEqual(last.value.next_token, '"t"')

    def test_an_http_error_is_raised_at_the_yield(self):
        failed = Err(wit_http.HttpError_Denied("not granted"))
        last = step(Stepped, [answer(b'{"count": 2}'), failed])
        records = [json.loads(r) for r in last.value.records]
        self.assertEqual(records, [{"failed": "GET https://api.example.com/items?n=2 denied: not granted"}])

    def test_an_error_the_page_does_not_catch_fails_the_step(self):
        with self.assertRaises(Err) as raised:
            step(Stepped, [answer(b"", status=404)])
        self.assertIsInstance(raised.exception.value, wit.Error_Config)
        self.assertIn("https://api.example.com/count answered 404", raised.exception.value.value)

    def test_a_plain_read_page_ends_in_one_step_and_is_not_stepped(self):
        self.assertIsInstance(step(Whole, []), wit_steps.Step_Page)
        _, _, _, exported = sluice.export_stepped_connector(Whole)
        self.assertEqual(exported().stepped_streams(CONFIG), [])

    def test_every_stream_but_job_streams_is_stepped_by_default(self):
        _, _, _, exported = sluice.export_stepped_connector(Stepped)
        self.assertEqual(exported().stepped_streams(CONFIG), ["items"])

    def test_yielding_anything_but_a_request_is_a_system_error(self):
        class Wrong(Whole):
            def read_page(self, config, partition, token):
                yield "https://api.example.com/"

        with self.assertRaises(Err) as raised:
            step(Wrong, [])
        self.assertIsInstance(raised.exception.value, wit.Error_System)
        self.assertIn("yield a Request", raised.exception.value.value)


if __name__ == "__main__":
    unittest.main()
