"""Errors that cross the boundary to the host, as JSON: what failed, where, and why.

kind: "custom_code" (an exception raised in or under a custom class's method), "unsupported" (the
compatibility layer does not provide what the class asked for), "refused" (the class is refused
outright, e.g. it needs a native extension), "bad_request" (the host's call was malformed).
"""

import json
import sys
import traceback
from typing import Any, Dict, List, Optional

from airbyte_cdk._unsupported import NotSupportedInSandbox


class ComponentError(Exception):
    def __init__(self, payload: Dict[str, Any]):
        self.payload = payload
        super().__init__(payload.get("message", ""))

    def to_json(self) -> str:
        return json.dumps(self.payload, default=str)

    def __str__(self) -> str:
        p = self.payload
        where = f" at {p['location']}" if p.get("location") else ""
        who = ".".join(x for x in (p.get("class"), p.get("method")) if x)
        return f"{p.get('kind')}: {who}{where}: {p.get('exception', '')}: {p.get('message', '')}"


def bad_request(message: str, method: Optional[str] = None) -> ComponentError:
    return ComponentError({"kind": "bad_request", "method": method, "message": message})


def refused(class_name: str, reason: str) -> ComponentError:
    return ComponentError({"kind": "refused", "class": class_name, "message": f"{class_name} is refused: {reason}"})


def _frames(tb) -> List[Dict[str, Any]]:
    return [{"file": f.filename, "line": f.lineno, "function": f.name} for f in traceback.extract_tb(tb)]


def from_exception(exc: BaseException, class_name: str, method: str, custom_files: List[str]) -> ComponentError:
    """Name the class, the method, and the innermost line of custom code in the traceback."""
    frames = _frames(exc.__traceback__)
    custom = [f for f in frames if f["file"] in custom_files]
    where = custom[-1] if custom else (frames[-1] if frames else None)
    kind = "unsupported" if isinstance(exc, NotSupportedInSandbox) else "custom_code"
    payload = {
        "kind": kind,
        "class": class_name,
        "method": method,
        "exception": type(exc).__name__,
        "message": str(exc),
        "location": f"{_short(where['file'])}:{where['line']}" if where else None,
        "traceback": [f"{_short(f['file'])}:{f['line']} in {f['function']}" for f in frames],
    }
    failure_type = getattr(exc, "failure_type", None)
    if failure_type is not None:
        payload["failure_type"] = getattr(failure_type, "value", str(failure_type))
    return ComponentError(payload)


def _short(path: str) -> str:
    # components.py by its file name; the layer's files relative to the package root
    for marker in ("/airbyte_cdk/", "/requests/", "/dpath/", "/sluice_components/"):
        i = path.rfind(marker)
        if i >= 0:
            return path[i + 1:]
    return path.rsplit("/", 1)[-1]


def describe(exc: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


__all__ = ["ComponentError", "bad_request", "describe", "from_exception", "refused", "sys"]
