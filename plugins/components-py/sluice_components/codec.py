"""JSON <-> the Python objects custom code expects (requests.Response, StreamSlice, ...)."""

import base64
import json
from typing import Any, Mapping, Optional

import requests

from airbyte_cdk.sources.types import Record, StreamSlice


def response_from_json(obj: Mapping[str, Any]) -> requests.Response:
    """{status, headers: {..} or [[k, v]..], body (text) or body_base64, url?, request?}"""
    if "body_base64" in obj:
        body = base64.b64decode(obj["body_base64"])
    else:
        body = obj.get("body", "")
        if not isinstance(body, (str, bytes)):
            body = json.dumps(body)  # a parsed JSON body, re-serialized
        body = body.encode("utf-8") if isinstance(body, str) else body
    headers = obj.get("headers") or {}
    headers = list(headers.items()) if isinstance(headers, Mapping) else [tuple(h) for h in headers]
    request = None
    if obj.get("request"):
        r = obj["request"]
        request = requests.PreparedRequest()
        request.method = r.get("method", "GET")
        request.url = r.get("url")
        request.headers = requests.structures.CaseInsensitiveDict(dict(r.get("headers") or {}))
        request.body = r.get("body")
    return requests.Response.from_parts(obj.get("status", 200), headers, body, url=obj.get("url") or (request.url if request else None), request=request)


def slice_from_json(obj: Optional[Mapping[str, Any]]) -> Optional[StreamSlice]:
    """{partition, cursor_slice, extra_fields} or a flat mapping (taken as the partition)."""
    if obj is None:
        return None
    if isinstance(obj, StreamSlice):
        return obj
    if "partition" in obj or "cursor_slice" in obj:
        return StreamSlice(partition=obj.get("partition") or {}, cursor_slice=obj.get("cursor_slice") or {}, extra_fields=obj.get("extra_fields"))
    return StreamSlice(partition=dict(obj), cursor_slice={})


def slice_to_json(s: Any) -> Any:
    if isinstance(s, StreamSlice):
        return {"partition": dict(s.partition), "cursor_slice": dict(s.cursor_slice), "extra_fields": dict(s.extra_fields)}
    return to_json(s)


def to_json(value: Any) -> Any:
    """Plain JSON values out of what custom code returns (Records, StreamSlices, mappings, enums, dates)."""
    if isinstance(value, Record):
        return to_json(value.data)
    if isinstance(value, StreamSlice):
        return slice_to_json(value)
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)) or (hasattr(value, "__iter__") and hasattr(value, "__next__")):
        return [to_json(v) for v in value]
    if hasattr(value, "value") and type(value).__class__.__name__ == "EnumMeta":
        return value.value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def dumps(value: Any) -> str:
    return json.dumps(to_json(value), default=str)
