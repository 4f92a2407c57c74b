"""The components runtime's entry (componentize-py, world `runtime` of wit/components): the host
calls `custom.call`, and `requests` in custom code goes out through the host's `send` import (the
engine's egress policy, retries, recording and caps). Nothing else leaves: the component gets no
files, sockets, environment or clock of its own (WASI grants nothing)."""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host

import requests
from requests import exceptions as request_errors
from requests import transport

import sluice_components
from sluice_components.errors import ComponentError

# Everything custom code may import is imported here, while componentize-py builds the component:
# its snapshot keeps the imported modules, and the sandbox grants no files to import others from
# when a components.py runs. The standard library modules are those the 55 real components.py
# import (scripts/components-inventory.py), and their usual company.
STDLIB = (
    "abc", "base64", "binascii", "bisect", "calendar", "collections", "collections.abc", "contextlib", "copy",
    "csv", "dataclasses", "datetime", "decimal", "email.utils", "enum", "fnmatch", "functools", "gzip",
    "hashlib", "heapq", "hmac", "html", "http", "http.client", "inspect", "io", "itertools", "json", "logging",
    "math", "numbers", "operator", "random", "re", "secrets", "shlex", "statistics", "string", "struct",
    "textwrap", "time", "traceback", "types", "typing", "unicodedata", "urllib", "urllib.parse", "uuid",
    "xml.etree.ElementTree", "xml.parsers.expat", "zipfile", "zlib",
    # Imported by the standard library only when first needed (`datetime.strptime`, `str.encode`
    # of an IDNA host, `locale`-aware formatting).
    "_strptime", "encodings.idna", "locale",
)
# Modules whose effects the sandbox refuses, imported when the build's Python has them, so custom
# code that reaches for files, sockets, processes or threads gets the error it would get on a
# machine that refuses them (an OSError, a RuntimeError), which it can catch.
REFUSED_EFFECTS = ("os", "pathlib", "shutil", "signal", "socket", "subprocess", "tempfile", "threading",
                   "concurrent.futures", "ctypes", "multiprocessing", "urllib.request")
# The compatibility layer and the shims, every module of them.
LAYER = ("airbyte_cdk", "backoff", "dateparser", "dpath", "isodate", "pendulum", "requests", "requests_cache",
         "unidecode", "xmltodict")


def _import_all():
    import importlib
    import pkgutil

    for name in STDLIB:
        importlib.import_module(name)
    for name in REFUSED_EFFECTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    for name in LAYER:
        package = importlib.import_module(name)
        for info in pkgutil.walk_packages(getattr(package, "__path__", []), prefix=name + "."):
            importlib.import_module(info.name)


_import_all()

_FAILURES = {
    host.HttpError_Denied: request_errors.ConnectionError,
    host.HttpError_Timeout: request_errors.Timeout,
    host.HttpError_Connection: request_errors.ConnectionError,
    host.HttpError_TooLarge: request_errors.ContentDecodingError,
    host.HttpError_InvalidRequest: request_errors.InvalidURL,
}


def _send(request: dict):
    """The requests shim's transport: one host request; a refusal comes back as the exception
    requests would raise, naming the host's reason, so custom code can catch it."""
    body = request.get("body")
    try:
        answer = host.send(host.Request(
            request["method"], request["url"], [(k, v) for k, v in request["headers"]], body,
        ))
    except Err as e:
        failure = e.value
        kind = type(failure).__name__.split("_", 1)[-1].lower()
        return _FAILURES.get(type(failure), request_errors.ConnectionError)(
            f"the host refused the request ({kind}): {failure.value}"
        )
    return {"status": answer.status, "headers": [list(h) for h in answer.headers], "body": answer.body}


transport.set_transport(_send)


class Custom(exports.Custom):
    def call(self, component: int, method: str, args: str) -> str:
        try:
            return sluice_components.call(component, method, args)
        except ComponentError as e:
            raise Err(e.to_json()) from None
        except BaseException as e:  # SystemExit, KeyboardInterrupt: still the caller's error
            raise Err(json.dumps({"kind": "error", "method": method, "exception": type(e).__name__, "message": str(e)})) from None
