"""Unit tests of the compatibility layer: python3 -I -m unittest discover -s plugins/components-py/tests"""

import json
import os
import tempfile
import unittest

import _path  # noqa: F401

import dpath
import requests
from requests import transport
from airbyte_cdk.sources.declarative.interpolation import InterpolatedBoolean, InterpolatedString
from airbyte_cdk.sources.declarative.extractors import DpathExtractor
from airbyte_cdk.sources.declarative.requesters.error_handlers import DefaultErrorHandler
from airbyte_cdk.sources.types import StreamSlice
from sluice_components import ComponentError, Dispatcher


def reply(status=200, body=b"{}", headers=(("Content-Type", "application/json"),)):
    return lambda req: {"status": status, "headers": [list(h) for h in headers], "body": body}


class RequestsShim(unittest.TestCase):
    def tearDown(self):
        transport.set_transport(None)

    def test_no_transport_is_a_connection_error(self):
        with self.assertRaises(requests.ConnectionError):
            requests.get("https://example.test/")

    def test_request_goes_through_the_one_transport(self):
        seen = []
        transport.set_transport(lambda r: seen.append(r) or {"status": 404, "headers": [], "body": b"nope"})
        r = requests.Session().post("https://a.test/x", params={"q": "1 2"}, data={"k": "v"}, headers={"H": "1"})
        self.assertEqual(seen[0]["url"], "https://a.test/x?q=1+2")
        self.assertEqual(seen[0]["body"], b"k=v")
        self.assertFalse(r.ok)
        with self.assertRaises(requests.HTTPError) as cm:
            r.raise_for_status()
        self.assertIn("404 Client Error: Not Found for url: https://a.test/x?q=1+2", str(cm.exception))

    def test_json_error_is_both_kinds(self):
        transport.set_transport(reply(body=b"not json"))
        with self.assertRaises(json.JSONDecodeError):
            requests.get("https://a.test/").json()
        with self.assertRaises(requests.exceptions.JSONDecodeError):
            requests.get("https://a.test/").json()


class DpathShim(unittest.TestCase):
    def test_get_values_new(self):
        obj = {"a": {"b": [{"c": 1}, {"c": 2}]}}
        self.assertEqual(dpath.get(obj, ["a", "b", "0", "c"]), 1)
        self.assertEqual(dpath.values(obj, ["a", "b", "*", "c"]), [1, 2])
        self.assertEqual(dpath.get(obj, ["x"], default=[]), [])
        with self.assertRaises(KeyError):
            dpath.get(obj, ["x"])
        dpath.new(obj, ["n", "m"], 3)
        self.assertEqual(obj["n"], {"m": 3})


class PendulumShim(unittest.TestCase):
    def test_datetime_is_aware_and_sorts_beside_parse(self):
        import pendulum

        # source-zendesk-chat's bans: a missing created_at sorts as pendulum.datetime(1970, 1, 1).
        epoch = pendulum.datetime(1970, 1, 1)
        self.assertEqual(epoch.isoformat(), "1970-01-01T00:00:00+00:00")
        dates = [pendulum.parse("2024-02-03T10:00:00Z"), epoch, pendulum.parse("2024-02-03T10:30:00+01:00")]
        self.assertEqual([d.isoformat() for d in sorted(dates)], ["1970-01-01T00:00:00+00:00", "2024-02-03T10:30:00+01:00", "2024-02-03T10:00:00+00:00"])


class Interpolation(unittest.TestCase):
    def test_subset(self):
        s = InterpolatedString.create("{{ config['a'] }}-{{ parameters.p }}", parameters={"p": "x"})
        self.assertEqual(s.eval({"a": 1}), "1-x")
        self.assertEqual(InterpolatedString.create("{{ config.n }}", parameters={}).eval({"n": "5"}), 5)
        self.assertEqual(InterpolatedString("{{ config.missing }}", default="d", parameters={}).eval({}), "d")
        self.assertTrue(InterpolatedBoolean("{{ record.x > 1 and stream_slice.k == 'v' }}", parameters={}).eval(
            {}, record={"x": 2}, stream_slice=StreamSlice(partition={"k": "v"}, cursor_slice={})))

    def test_what_is_missing_says_so(self):
        with self.assertRaisesRegex(NotImplementedError, "filters"):
            InterpolatedString.create("{{ config.a | upper }}", parameters={}).eval({"a": "x"})
        with self.assertRaisesRegex(NotImplementedError, "now_utc"):
            InterpolatedString.create("{{ now_utc() }}", parameters={}).eval({})


class DeclarativePieces(unittest.TestCase):
    def test_dpath_extractor(self):
        r = requests.Response.from_parts(200, [("Content-Type", "application/json")], b'{"data": [{"id": 1}, {"id": 2}]}')
        self.assertEqual(list(DpathExtractor(field_path=["data"], config={}, parameters={}).extract_records(r)), [{"id": 1}, {"id": 2}])
        empty = requests.Response.from_parts(200, [], b"")
        self.assertEqual(list(DpathExtractor(field_path=["data"], config={}, parameters={}).extract_records(empty)), [])

    def test_default_error_handler(self):
        h = DefaultErrorHandler(config={}, parameters={})
        self.assertEqual(h.interpret_response(requests.Response.from_parts(429, [], b"")).response_action.value, "RATE_LIMITED")
        self.assertEqual(h.interpret_response(requests.Response.from_parts(200, [], b"")).response_action.value, "SUCCESS")


COMPONENTS = '''
from dataclasses import InitVar, dataclass
from typing import Any, Mapping
from airbyte_cdk.sources.declarative.transformations import RecordTransformation
from airbyte_cdk.sources.declarative.extractors.record_extractor import RecordExtractor


@dataclass
class AddPrefix(RecordTransformation):
    prefix: str
    parameters: InitVar[Mapping[str, Any]]

    def transform(self, record, config=None, stream_state=None, stream_slice=None):
        record["name"] = self.prefix + record["name"] + (stream_slice or {}).get("suffix", "")


class Broken(RecordExtractor):
    def extract_records(self, response):
        return [response.json()["missing"]]
'''


class DispatcherApi(unittest.TestCase):
    def setUp(self):
        self.d = Dispatcher()
        self.tmp = tempfile.mkdtemp()
        self.path = os.path.join(self.tmp, "components.py")
        with open(self.path, "w") as f:
            f.write(COMPONENTS)
        out = json.loads(self.d.call(0, "load", json.dumps({"module": "test_components_mod", "source": COMPONENTS, "filename": self.path})))
        self.assertEqual(out["classes"], ["AddPrefix", "Broken"])

    def create(self, cls, **fields):
        definition = {"type": "CustomTransformation", "class_name": f"test_components_mod.{cls}", **fields}
        return json.loads(self.d.call(0, "create", json.dumps({"definition": definition, "config": {}})))["handle"]

    def test_transformation_over_a_page_with_parameters(self):
        h = self.create("AddPrefix", **{"$parameters": {"prefix": "p-"}})
        out = json.loads(self.d.call(h, "transform", json.dumps({"records": [{"name": "a"}, {"name": "b"}], "stream_slice": {"partition": {"suffix": "!"}}})))
        self.assertEqual(out["records"], [{"name": "p-a!"}, {"name": "p-b!"}])

    def test_exception_names_class_method_and_line(self):
        h = self.create("Broken")
        with self.assertRaises(ComponentError) as cm:
            self.d.call(h, "extract_records", json.dumps({"response": {"status": 200, "body": "{}"}}))
        p = cm.exception.payload
        self.assertEqual((p["kind"], p["class"], p["method"], p["exception"]), ("custom_code", "Broken", "extract_records", "KeyError"))
        self.assertEqual(p["location"], "components.py:19")

    def test_refusal_names_class_and_reason(self):
        self.d.call(0, "refuse", json.dumps({"class": "AddPrefix", "reason": "needs a native extension"}))
        with self.assertRaises(ComponentError) as cm:
            self.create("AddPrefix", prefix="x")
        self.assertEqual(cm.exception.payload["kind"], "refused")
        self.assertIn("AddPrefix is refused: needs a native extension", cm.exception.payload["message"])

    def test_bad_requests(self):
        with self.assertRaises(ComponentError):
            self.d.call(99, "transform", "{}")
        with self.assertRaises(ComponentError):
            self.d.call(0, "nope", "{}")


ROUTERS = '''
from airbyte_cdk.sources.declarative.partition_routers.substream_partition_router import SubstreamPartitionRouter
from airbyte_cdk.sources.declarative.types import StreamSlice


class FirstParentThenOthers(SubstreamPartitionRouter):
    """As source-jira's SprintIssuesSubstreamPartitionRouter: the first parent's values, then the others' slices."""

    def __post_init__(self, parameters):
        super().__post_init__(parameters)
        first, *others = self.parent_stream_configs
        self.first, self.parent_stream_configs = first, others

    def stream_slices(self):
        self.parent_stream_configs, others = [self.first], self.parent_stream_configs
        fields = [s.partition[self.first.partition_field.eval(self.config)] for s in super().stream_slices()]
        self.parent_stream_configs = others
        for s in super().stream_slices():
            yield StreamSlice(partition=s.partition, cursor_slice=s.cursor_slice, extra_fields={"fields": fields})
'''


class SubstreamSubclasses(unittest.TestCase):
    def test_a_subclass_narrowing_its_parents_gets_their_slices_only(self):
        d = Dispatcher()
        d.call(0, "load", json.dumps({"module": "test_routers_mod", "source": ROUTERS}))
        parent = lambda name, field: {"type": "ParentStreamConfig", "stream": {"type": "DeclarativeStream", "name": name},
                                      "parent_key": "id", "partition_field": field}
        definition = {"type": "CustomPartitionRouter", "class_name": "test_routers_mod.FirstParentThenOthers",
                      "parent_stream_configs": [parent("fields", "field_id"), parent("sprints", "sprint_id")]}
        h = json.loads(d.call(0, "create", json.dumps({"definition": definition, "config": {}})))["handle"]
        made = [{"partition": {"field_id": "cf_1", "parent_slice": {}}}, {"partition": {"field_id": "cf_2", "parent_slice": {}}},
                {"partition": {"sprint_id": 11, "parent_slice": {"board_id": 1}}}, {"partition": {"sprint_id": 31, "parent_slice": {}}}]
        out = json.loads(d.call(h, "stream_slices", json.dumps({"parent_slices": made})))["slices"]
        self.assertEqual([s["partition"] for s in out], [made[2]["partition"], made[3]["partition"]])
        self.assertEqual([s["extra_fields"] for s in out], [{"fields": ["cf_1", "cf_2"]}] * 2)


if __name__ == "__main__":
    unittest.main()
