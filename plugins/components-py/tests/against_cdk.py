#!/usr/bin/env python3
"""Differential test: real components.py classes through the real CDK and through this layer.

For each case, the CDK side runs under target/tools/airbyte-cdk/bin/python with
AIRBYTE_ENABLE_UNSAFE_CODE=true, importing the class from the connector's components.py and
constructing it directly (the fields of the definition that are type hints of the class, plus
config and parameters, as the CDK's factory does). The compat side runs under plain `python3 -I`
with only plugins/components-py and the connector folder on sys.path, through the dispatcher
(load, create, then one batched call). The JSON outputs must be equal.

Usage: against_cdk.py [--corpus /tmp/components-corpus] [--cdk-python PATH]
"""

import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
COMPAT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(COMPAT))

CASES = [
    {"connector": "source-chargebee", "class": "CustomFieldTransformation", "kind": "transform",
     "definition": {}, "records": [{"id": 1, "cf_a": "x", "cf_b": 2, "name": "n"}, {"id": 2}]},
    {"connector": "source-amplitude", "class": "ActiveUsersRecordExtractor", "kind": "extract",
     "definition": {}, "response": {"data": {"series": [[1, 2], [3, 4]], "seriesLabels": ["a", "b"], "xValues": ["2023-01-01", "2023-01-02"]}}},
    {"connector": "source-amplitude", "class": "AverageSessionLengthRecordExtractor", "kind": "extract",
     "definition": {}, "response": {"data": {"series": [[10.5, 20.25]], "xValues": ["2023-01-01", "2023-01-02"]}}},
    {"connector": "source-amplitude", "class": "TransformDatetimesToRFC3339", "kind": "transform", "definition": {},
     "records": [{"event_time": "2023-01-01 10:00:00.123456", "server_upload_time": "2023-01-01T10:00:00Z", "processed_time": "2023-02-03", "other": "x"}]},
    {"connector": "source-jira", "class": "LabelsRecordExtractor", "kind": "extract",
     "definition": {"field_path": ["{{ parameters.data_field }}"], "$parameters": {"data_field": "values"}},
     "response": {"values": ["label 1", "label 2"], "total": 2}},
    {"connector": "source-jira", "class": "RemoveEmptyFields", "kind": "transform", "definition": {"field_pointers": ["fields"]},
     "records": [{"id": "1", "fields": {"a": None, "b": 1}, "x": None}]},
    {"connector": "source-mailchimp", "class": "MailChimpRecordExtractorEmailActivity", "kind": "extract",
     "definition": {"field_path": ["emails"]},
     "response": {"emails": [{"email_id": "e1", "activity": [{"action": "open"}, {"action": "click"}]}, {"email_id": "e2", "activity": []}]}},
    {"connector": "source-google-search-console", "class": "CustomReportExtractDimensionsFromKeys", "kind": "transform",
     "definition": {"dimensions": ["date", "country"]}, "records": [{"keys": ["2023-01-01", "usa"], "clicks": 1}]},
    {"connector": "source-bing-ads", "class": "DuplicatedRecordsFilter", "kind": "filter",
     "definition": {"condition": ""}, "config": {"account_names": [{"name": "A", "operator": "Contains"}]},
     "records": [{"Id": 1, "Name": "A"}, {"Id": 1, "Name": "A"}, {"Id": 2, "Name": "AB"}]},
    {"connector": "source-notion", "class": "NotionUserTransformation", "kind": "transform", "definition": {},
     "records": [{"object": "user", "type": "bot", "bot": {"owner": {"type": "user", "user": {"object": "user", "id": "u1"}}}}, {"object": "user", "type": "person"}]},
]

# The same worker source runs on both sides; `side` decides how the component is built and called.
WORKER = r'''
import json, sys, typing
side, compat, folder = sys.argv[1], sys.argv[2], sys.argv[3]
cases = json.loads(sys.stdin.read())
if side == "compat":
    sys.path[:] = [compat, folder] + [p for p in sys.path if "site-packages" not in p]
else:
    sys.path.insert(0, folder)
out = []
if side == "compat":
    from sluice_components import Dispatcher
    d = Dispatcher()
    d.call(0, "load", json.dumps({"module": "components"}))
else:
    import components, requests
    from airbyte_cdk.sources.types import StreamSlice
for case in cases:
    definition = dict(case["definition"])
    config = case.get("config", {})
    try:
        if side == "compat":
            definition.update(type="Custom", class_name="source_declarative_manifest.components." + case["class"])
            h = json.loads(d.call(0, "create", json.dumps({"definition": definition, "config": config})))["handle"]
            if case["kind"] == "transform":
                r = json.loads(d.call(h, "transform", json.dumps({"records": case["records"], "config": config})))["records"]
            elif case["kind"] == "filter":
                r = json.loads(d.call(h, "filter_records", json.dumps({"records": case["records"]})))["records"]
            else:
                r = json.loads(d.call(h, "extract_records", json.dumps({"response": {"status": 200, "headers": {"Content-Type": "application/json"}, "body": json.dumps(case["response"])}})))["records"]
        else:
            cls = getattr(components, case["class"])
            hints = typing.get_type_hints(cls)
            params = definition.pop("$parameters", {})
            args = {**definition, "config": config, "parameters": params}
            obj = cls(**{k: v for k, v in args.items() if k in hints})
            if case["kind"] == "transform":
                r = case["records"]
                for rec in r:
                    obj.transform(rec, config=config, stream_state={}, stream_slice=None)
            elif case["kind"] == "filter":
                r = list(obj.filter_records(case["records"], stream_state={}, stream_slice=None, next_page_token=None))
            else:
                resp = requests.Response()
                resp.status_code = 200
                resp.headers["Content-Type"] = "application/json"
                resp._content = json.dumps(case["response"]).encode()
                r = [dict(x) for x in obj.extract_records(resp)]
        out.append({"ok": json.loads(json.dumps(r, default=str))})
    except Exception as e:
        out.append({"error": type(e).__name__, "message": str(e)[:300]})
print(json.dumps(out))
'''


def run_side(side, python, folder, cases):
    env = dict(os.environ)
    cmd = [python, "-c", WORKER, side, COMPAT, folder]
    if side == "compat":
        cmd = [python, "-I", "-S", "-c", WORKER, side, COMPAT, folder]
        env = {"PATH": os.environ.get("PATH", "")}
    else:
        env["AIRBYTE_ENABLE_UNSAFE_CODE"] = "true"
    proc = subprocess.run(cmd, input=json.dumps(cases), capture_output=True, text=True, env=env, cwd=folder, timeout=300)
    if proc.returncode != 0:
        raise SystemExit(f"{side} worker failed for {folder}:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/tmp/components-corpus")
    ap.add_argument("--cdk-python", default=os.path.join(REPO, "target/tools/airbyte-cdk/bin/python"))
    args = ap.parse_args()
    by_connector = {}
    for case in CASES:
        by_connector.setdefault(case["connector"], []).append(case)
    failures = 0
    for connector, cases in by_connector.items():
        folder = os.path.join(args.corpus, connector)
        cdk = run_side("cdk", args.cdk_python, folder, cases)
        compat = run_side("compat", sys.executable, folder, cases)
        for case, a, b in zip(cases, cdk, compat):
            same = a == b
            failures += not same
            print(f"{'same' if same else 'DIFF'}  {connector} {case['class']} ({case['kind']})")
            if not same:
                print(f"      cdk:    {json.dumps(a)[:400]}\n      compat: {json.dumps(b)[:400]}")
    print(f"{len(CASES) - failures} of {len(CASES)} cases give the same output")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
