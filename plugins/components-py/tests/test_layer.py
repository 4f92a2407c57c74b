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


if __name__ == "__main__":
    unittest.main()
