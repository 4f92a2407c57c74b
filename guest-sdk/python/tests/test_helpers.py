"""Unit tests of the SDK's helpers, outside a component (`just test-guest-sdks`). The WIT bindings
come from `componentize-py bindings`; nothing here calls the host."""

import json
import pathlib
import unittest

import sluice_guest as sluice
from sluice_guest import Error, http, paginate, slice
from sluice_guest.types import _compact


def SHARED_CASES(name):
    """A table of cases every SDK's tests run (guest-sdk/cases)."""
    return json.loads((pathlib.Path(__file__).parents[2] / "cases" / name).read_text())


class Slicing(unittest.TestCase):
    def test_rfc3339_round_trips(self):
        self.assertEqual(slice.parse_rfc3339("1970-01-01T00:00:00Z"), 0)
        self.assertEqual(slice.parse_rfc3339("2024-01-01T00:00:00Z"), 1_704_067_200)
        self.assertEqual(slice.parse_rfc3339("2024-01-01T02:00:00+02:00"), 1_704_067_200)
        self.assertEqual(slice.parse_rfc3339("2024-02-29T12:30:45.123Z"), 1_709_209_845)
        for secs in (0, 951_782_400, 1_704_067_200, 4_102_444_800):
            self.assertEqual(slice.parse_rfc3339(slice.format_rfc3339(secs)), secs)
        for bad in ("", "2024-01-01", "2024-13-01T00:00:00Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00.Z"):
            with self.assertRaises(Error) as caught:
                slice.parse_rfc3339(bad)
            self.assertEqual(caught.exception.kind, "config")

    def test_windows_are_aligned_and_end_at_the_end(self):
        w = slice.datetime_windows("s", 1_704_067_200 + 60, 1_704_067_200 + 7200, 3600)
        self.assertEqual(len(w), 2)
        self.assertEqual(w[0].cursor_start(), sluice.CursorValue.datetime("2024-01-01T00:01:00Z"))
        self.assertEqual(w[1].cursor_start(), sluice.CursorValue.datetime("2024-01-01T01:00:00Z"))
        self.assertEqual(w[1].cursor_end(), sluice.CursorValue.datetime("2024-01-01T02:00:00Z"))
        self.assertEqual(_compact(w[0].key), '{"end":"2024-01-01T01:00:00Z","start":"2024-01-01T00:01:00Z"}')
        self.assertEqual(slice.datetime_windows("s", 10, 10, 5), [])
        self.assertEqual(slice.datetime_windows("s", 0, 90, 60)[1].cursor_end().value, slice.format_rfc3339(90))
        with self.assertRaises(Error):
            slice.datetime_windows("s", 0, 10, 0)


class Pagination(unittest.TestCase):
    def test_page_numbers_stop_on_a_short_page(self):
        self.assertEqual(paginate.page_number(None, 1), 1)
        self.assertEqual(paginate.next_page_number(1, 10, 10), 2)
        self.assertIsNone(paginate.next_page_number(2, 3, 10))
        self.assertIsNone(paginate.next_page_number(2, 0, 0))
        with self.assertRaises(Error):
            paginate.page_number("x", 1)

    def test_offsets_and_cursors(self):
        self.assertEqual(paginate.next_offset(20, 10, 10), 30)
        self.assertIsNone(paginate.next_offset(20, 9, 10))
        self.assertEqual(paginate.cursor("abc"), "abc")
        self.assertIsNone(paginate.next_cursor(""))
        with self.assertRaises(Error):
            paginate.cursor(3)


class Http(unittest.TestCase):
    def test_slicing_answers_the_shared_cases(self):
        cases = SHARED_CASES("slice.json")
        for c in cases["parse_rfc3339"]:
            if "error" in c:
                with self.assertRaises(Error) as raised:
                    slice.parse_rfc3339(c["text"])
                self.assertEqual(raised.exception.kind, c["error"])
            else:
                self.assertEqual(slice.parse_rfc3339(c["text"]), c["secs"], c)
        for c in cases["datetime_windows"]:
            if "error" in c:
                with self.assertRaises(Error) as raised:
                    slice.datetime_windows("s", c["from"], c["to"], c["step"])
                self.assertEqual(raised.exception.kind, c["error"])
            else:
                windows = slice.datetime_windows("s", c["from"], c["to"], c["step"])
                self.assertEqual([w.key for w in windows], c["keys"], c)

    def test_pagination_answers_the_shared_cases(self):
        cases = SHARED_CASES("paginate.json")
        for c in cases["next_page_number"]:
            self.assertEqual(paginate.next_page_number(c["current"], c["records_on_page"], c["page_size"]), c["next"], c)
        for c in cases["next_offset"]:
            self.assertEqual(paginate.next_offset(c["current"], c["records_on_page"], c["page_size"]), c["next"], c)
        for c in cases["page_number"]:
            if "error" in c:
                with self.assertRaises(Error) as raised:
                    paginate.page_number(c["token"], c["first"])
                self.assertEqual(raised.exception.kind, c["error"])
            else:
                self.assertEqual(paginate.page_number(c["token"], c["first"]), c["page"], c)
        for c in cases["next_cursor"]:
            self.assertEqual(paginate.next_cursor(c["next"]), c["token"], c)

    def test_host_port_answers_the_shared_cases(self):
        # The same table the Rust and JavaScript SDKs' tests run.
        for case in SHARED_CASES("host_port.json"):
            with self.subTest(url=case["url"]):
                if "error" in case:
                    with self.assertRaises(Error) as raised:
                        http.host_port(case["url"])
                    self.assertEqual(raised.exception.kind, case["error"])
                else:
                    self.assertEqual(http.host_port(case["url"]), case["host_port"])

    def test_query_is_encoded_and_appended(self):
        self.assertEqual(http.get("http://h/p").query("a", "x y&z").query("b", 2).url, "http://h/p?a=x+y%26z&b=2")
        self.assertEqual(http.get("http://h/p?c=1").query("a", True).url, "http://h/p?c=1&a=true")

    def test_statuses_become_errors_of_the_right_kind(self):
        kinds = {401: "config", 404: "config", 429: "transient", 503: "transient", 418: "system"}
        for status, kind in kinds.items():
            with self.assertRaises(Error) as caught:
                http.Response("http://h/x", status, [], b"nope").error_for_status()
            self.assertEqual(caught.exception.kind, kind, status)
        self.assertEqual(http.Response("u", 200, [("Content-Type", "x")], b"{}").header("content-type"), "x")

    def test_error_for_status_answers_the_shared_cases(self):
        table = SHARED_CASES("status_errors.json")

        def answer(status, body):
            return http.Response(table["url"], status, [], body.encode())

        for c in table["statuses"]:
            with self.subTest(status=c["status"]):
                if c["kind"] is None:
                    self.assertEqual(answer(c["status"], "oops").error_for_status().status, c["status"])
                else:
                    with self.assertRaises(Error) as raised:
                        answer(c["status"], "oops").error_for_status()
                    self.assertEqual(raised.exception.kind, c["kind"])
        for c in table["messages"]:
            body = c["body_repeat"][0] * c["body_repeat"][1] if "body_repeat" in c else c["body"]
            prefix, unit, times = c.get("message_repeat", [c.get("message"), "", 0])
            with self.assertRaises(Error) as raised:
                answer(c["status"], body).error_for_status()
            self.assertEqual(raised.exception.message, prefix + unit * times)

    def test_requests_are_built_as_the_shared_cases_say(self):
        for c in SHARED_CASES("requests.json")["requests"]:
            with self.subTest(case=c):
                # Values as a connector passes them (numbers, booleans), not as text: the SDK writes them.
                request = http.get(c["url"])
                for name, value in c.get("query", []):
                    request.query(name, value)
                if "bearer" in c:
                    request.bearer_auth(c["bearer"])
                if "json_body" in c:
                    request.json_body(c["json_body"])
                self.assertEqual(request.url, c["expect_url"])
                self.assertEqual([list(h) for h in request.headers], c.get("expect_headers", []))
                self.assertEqual(None if request.body is None else request.body.decode(), c.get("expect_body"))

    def test_bodies_are_read_as_utf8_as_the_rust_sdk_reads_them(self):
        def answer(body):
            return http.Response("http://h/x", 500, [], body)

        # A BOM is kept in the text and refused by `json`; bytes that are not UTF-8 are a system error.
        self.assertEqual(answer(b"\xef\xbb\xbfA").text(), "\ufeffA")
        for call in (answer(b"\xef\xbb\xbf{}").json, answer('{}'.encode("utf-16")).json, answer(b'"\xff"').json, answer(b'"\xff"').text):
            with self.assertRaises(Error) as raised:
                call()
            self.assertEqual(raised.exception.kind, "system")
        # The 500th byte cuts a character in two: the message ends with one U+FFFD.
        with self.assertRaises(Error) as raised:
            answer(("x" * 499 + "\u20ac").encode()).error_for_status()
        self.assertTrue(raised.exception.message.endswith(": " + "x" * 499 + "\ufffd"))

    def test_a_json_body_is_compact_utf8(self):
        request = http.post("http://h/r").json_body({"name": "été", "n": [1, None], "odd": "\ud800"})
        self.assertEqual(request.body, '{"name":"été","n":[1,null],"odd":"\\ud800"}'.encode())

    def test_lone_surrogates_in_a_query_are_sent_as_replacement_characters(self):
        # What URLSearchParams sends for one (a JavaScript string may hold it too).
        self.assertEqual(http.get("http://h/p").query("q", "a\ud800").url, "http://h/p?q=a%EF%BF%BD")

    def test_an_answer_whose_records_the_host_took_out_or_kept(self):
        rest = b'{"next_cursor":"c2"}'
        taken = http.RecordsResponse("http://h/x", "data", 200, [], ['{"id":1}', '{"id":2}'], rest)
        self.assertEqual(taken.parts(), (['{"id":1}', '{"id":2}'], {"next_cursor": "c2"}))
        # Kept by the host (`forward_records`): a count.
        self.assertEqual(http.RecordsResponse("http://h/x", "data", 200, [], 2, rest).parts()[0], 2)
        # No list at the path: a system error naming the URL and the path; not a success: the status's error.
        with self.assertRaises(Error) as raised:
            http.RecordsResponse("http://h/x", "result.items", 200, [], None, rest).parts()
        self.assertEqual(raised.exception.kind, "system")
        self.assertIn("`result.items`", raised.exception.message)
        with self.assertRaises(Error) as raised:
            http.RecordsResponse("http://h/x", "data", 401, [], None, b"no").error_for_status()
        self.assertEqual(raised.exception.kind, "config")

    def test_join_links(self):
        self.assertEqual(http.join("http://h:1/", "/next?p=2"), "http://h:1/next?p=2")
        self.assertEqual(http.join("http://h:1", "https://other/x"), "https://other/x")


class Config(unittest.TestCase):
    def test_fields_are_typed(self):
        raw = {"base_url": "http://h", "page_size": 5, "flag": True}
        self.assertEqual(sluice.field(raw, "base_url", str), "http://h")
        self.assertEqual(sluice.field(raw, "limit", int, 100), 100)
        for name, kind, text in (("missing", str, "missing field `missing`"), ("flag", int, "must be an integer"), ("page_size", str, "must be a string")):
            with self.assertRaises(Error) as caught:
                sluice.field(raw, name, kind)
            self.assertEqual(caught.exception.kind, "config")
            self.assertIn(text, caught.exception.message)

    def test_config_fields_answer_the_shared_cases(self):
        table = SHARED_CASES("config_fields.json")
        types = {"string": str, "integer": int, "boolean": bool}

        def read(config):
            return {
                f["name"]: sluice.field(config, f["name"], types[f["type"]], *([f["default"]] if "default" in f else []))
                for f in table["fields"]
            }

        for c in table["cases"]:
            with self.subTest(config=c["config"]):
                if "error_names" in c:
                    with self.assertRaises(Error) as raised:
                        read(c["config"])
                    self.assertEqual(raised.exception.kind, "config")
                    self.assertIn(c["error_names"], raised.exception.message)
                else:
                    self.assertEqual(read(c["config"]), c["values"])

    def test_context_keeps_the_kind(self):
        with self.assertRaises(Error) as caught:
            with sluice.context("listing accounts"):
                raise Error.transient("overloaded")
        self.assertEqual((caught.exception.kind, caught.exception.message), ("transient", "listing accounts: overloaded"))


if __name__ == "__main__":
    unittest.main()
