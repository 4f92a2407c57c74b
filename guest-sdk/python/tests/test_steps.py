"""Unit tests of pages read in steps (`stepped-pages`, contract 0.1.5), outside a component: the
exported `SteppedPages` class is called as the host calls it, with the answers the host got."""

import contextlib
import io
import json
import unittest
from unittest import mock

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


@contextlib.contextmanager
def _warming_on():
    sluice._warming.active = True
    try:
        yield
    finally:
        sluice._warming.active = False


class WarmUpTest(unittest.TestCase):
    """`Source.warm_up`: the pages read when the app module is imported (while the component is
    built), with sample answers, before the snapshot every instance starts from."""

    def test_each_page_is_read_step_by_step_with_its_sample_answers(self):
        seen = []

        class Warmed(Stepped):
            def read_page(self, config, partition, token):
                seen.append(("start", config, partition.key, token))
                count = (yield http.get("https://api.example.com/count")).error_for_status().json()["count"]
                records, rest = (yield http.get(f"https://api.example.com/items?n={count}").records(["data"])).parts()
                seen.append(("page", count, records, rest))
                return Page(records, None)

            def warm_up(self):
                partition = sluice.Partition.keyed("items", {"id": 7})
                answers = [sluice.WarmAnswer({"count": 2}), sluice.WarmAnswer({"next": None}, records=[{"id": 1}])]
                return [sluice.WarmUp({"base_url": "x"}, partition, "t", answers)]

        sluice.export_stepped_connector(Warmed)
        rounds = sluice._export.WARM_UP_ROUNDS
        # Three steps a page (no answer, one, both); the last one ends it.
        self.assertEqual(len([s for s in seen if s[0] == "start"]), 3 * rounds)
        self.assertEqual(seen[0], ("start", {"base_url": "x"}, {"id": 7}, "t"))
        self.assertEqual(seen[-1], ("page", 2, ['{"id":1}'], {"next": None}))
        self.assertEqual(len([s for s in seen if s[0] == "page"]), rounds)

    def test_an_answer_with_records_and_no_body_leaves_an_empty_object(self):
        seen = []

        class Bare(Stepped):
            def read_page(self, config, partition, token):
                _, rest = (yield http.get("https://api.example.com/items").forwarded(["data"])).parts()
                seen.append(rest)
                return Page([], None)

            def warm_up(self):
                return [sluice.WarmUp({}, sluice.Partition.whole("items"), None, [sluice.WarmAnswer(forwarded=3)])]

        sluice.export_stepped_connector(Bare)
        self.assertEqual(seen[0], {})

    def test_a_failing_warm_up_is_skipped_and_the_connector_still_exports(self):
        calls = []

        class Failing(Stepped):
            def read_page(self, config, partition, token):
                calls.append(token)
                raise ValueError("not while building")
                yield

            def warm_up(self):
                return [sluice.WarmUp({}, sluice.Partition.whole("items"), "a"), sluice.WarmUp({}, sluice.Partition.whole("items"), "b")]

        class Broken(Stepped):
            def warm_up(self):
                raise RuntimeError("no samples")

        sluice.export_stepped_connector(Failing)
        # Each page fails at its first step, every round, and the next page is still read.
        self.assertEqual(calls, ["a", "b"] * sluice._export.WARM_UP_ROUNDS)
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            _, _, _, exported = sluice.export_stepped_connector(Broken)
        self.assertEqual(exported().stepped_streams(CONFIG), ["items"])
        # Said where the author builds the component.
        self.assertIn("warm_up() failed, nothing is warmed up: RuntimeError: no samples", said.getvalue())

    def test_a_warm_up_page_cannot_reach_the_host(self):
        reached = []

        class Chatty(Stepped):
            def read_page(self, config, partition, token):
                if token == "log":
                    sluice.log.info("warming")
                else:
                    http.get("https://api.example.com/count").send()
                reached.append(token)
                yield http.get("https://api.example.com/items")

            def warm_up(self):
                return [sluice.WarmUp({}, sluice.Partition.whole("items"), t) for t in ("log", "send")]

        imports = []
        with mock.patch.object(sluice.log.wit, "log", lambda *a: imports.append(a)):
            with mock.patch.object(sluice.http.wit, "send", lambda *a: imports.append(a)):
                sluice.export_stepped_connector(Chatty)
        # Refused before the import is called (in a build it fails the build), every page.
        self.assertEqual(imports, [])
        self.assertEqual(reached, [])
        self.assertFalse(sluice._warming.active)
        with self.assertRaises(Error) as raised:
            with _warming_on():
                sluice.log.info("x")
        self.assertIn("logging: a warm-up page runs with no host", raised.exception.message)

    def test_a_listing_is_run_with_its_sample_answers_for_send(self):
        seen = []

        class Listed(Stepped):
            def partitions(self, config, stream, state):
                accounts = http.get(f"{config['base_url']}/accounts").send().error_for_status().json()["data"]
                seen.append((stream, state, [a["id"] for a in accounts]))
                # No sample left for a second send: refused as with no host, the listing ends.
                http.get(f"{config['base_url']}/more").send()
                seen.append("past the samples")
                return []

            def warm_up(self):
                answers = [sluice.WarmAnswer({"data": [{"id": 1}, {"id": 2}]})]
                return [sluice.WarmListing({"base_url": "https://api.example.com"}, "items", answers, {"s": 1})]

        sent = []
        with mock.patch.object(sluice.http.wit, "send", lambda *a: sent.append(a)):
            sluice.export_stepped_connector(Listed)
        self.assertEqual(seen, [("items", {"s": 1}, [1, 2])] * sluice._export.WARM_UP_ROUNDS)
        self.assertEqual(sent, [], "no send reached the host")
        self.assertFalse(sluice._warming.active)
        self.assertEqual(sluice._warming.samples, [])

    def test_no_warm_up_by_default(self):
        calls = []

        class Cold(Stepped):
            def read_page(self, config, partition, token):
                calls.append(token)
                return Page([], None)

        sluice.export_stepped_connector(Cold)
        self.assertEqual(calls, [])


if __name__ == "__main__":
    unittest.main()
