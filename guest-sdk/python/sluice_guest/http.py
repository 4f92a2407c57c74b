"""HTTP through the host. The host enforces the egress grant, timeouts, retries with backoff
(429, 5xx, connection errors; `Retry-After` honoured) and size caps, so a connector just sends."""

import json
from typing import Any, Optional
from urllib.parse import urlencode

from componentize_py_types import Err
from wit_world.imports import http as wit

from .errors import Error


class Request:
    """A request being built: `http.get(url).query("limit", 100).bearer_auth(key).send()`."""

    def __init__(self, method: str, url: str):
        self.method = method
        self.url = url
        self.headers: list[tuple[str, str]] = []
        self.body: Optional[bytes] = None

    def query(self, name: str, value: Any) -> "Request":
        """Appends a query parameter, percent-encoded."""
        if isinstance(value, bool):
            value = "true" if value else "false"
        self.url += ("&" if "?" in self.url else "?") + urlencode([(name, str(value))])
        return self

    def header(self, name: str, value: str) -> "Request":
        self.headers.append((name, value))
        return self

    def bearer_auth(self, token: str) -> "Request":
        return self.header("authorization", f"Bearer {token}")

    def json_body(self, value: Any) -> "Request":
        self.body = json.dumps(value, separators=(",", ":")).encode()
        return self.header("content-type", "application/json")

    def with_body(self, body: bytes) -> "Request":
        self.body = body
        return self

    def send(self) -> "Response":
        """Sends the request through the host. Any status is a response; see
        `Response.error_for_status`."""
        try:
            answer = wit.send(wit.Request(self.method, self.url, self.headers, self.body))
        except Err as e:
            raise _http_error(self.method, self.url, e.value) from None
        return Response(self.url, answer.status, answer.headers, answer.body)


def _http_error(method: str, url: str, error) -> Error:
    what = f"{method} {url}"
    if isinstance(error, wit.HttpError_Denied):
        return Error.config(f"{what} denied: {error.value}")
    if isinstance(error, wit.HttpError_Timeout):
        return Error.transient(f"{what} timed out: {error.value}")
    if isinstance(error, wit.HttpError_Connection):
        return Error.transient(f"{what} failed: {error.value}")
    if isinstance(error, wit.HttpError_TooLarge):
        return Error.system(f"{what}: response too large: {error.value}")
    return Error.system(f"{what}: invalid request: {error.value}")


class Response:
    """An HTTP answer: `url`, `status`, `headers` and `body` (bytes)."""

    def __init__(self, url: str, status: int, headers: list[tuple[str, str]], body: bytes):
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body

    def header(self, name: str) -> Optional[str]:
        """The first header called `name` (case-insensitive)."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def is_success(self) -> bool:
        return 200 <= self.status < 300

    def text(self) -> str:
        try:
            return self.body.decode()
        except UnicodeDecodeError as e:
            raise Error.system(f"{self.url}: body is not UTF-8: {e}") from None

    def json(self) -> Any:
        """Parses the body as JSON, naming the URL when it is not."""
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise Error.system(f"{self.url} answered {self.status} with unexpected JSON: {e}") from None

    def error_for_status(self) -> "Response":
        """Turns a non-2xx answer into an error of the right kind: 401/403/404 are the config's
        fault, 429 and 5xx are passing (the host has already retried them), anything else is a
        system error."""
        if self.is_success():
            return self
        body = self.body[:500].decode(errors="replace")
        message = f"{self.url} answered {self.status}: {body}"
        if self.status in (401, 403, 404):
            raise Error.config(message)
        if self.status == 429 or 500 <= self.status <= 599:
            raise Error.transient(message)
        raise Error.system(message)


def get(url: str) -> Request:
    return Request("GET", url)


def post(url: str) -> Request:
    return Request("POST", url)


def delete(url: str) -> Request:
    return Request("DELETE", url)


def get_json(url: str) -> Any:
    """GETs `url` and parses a successful JSON answer."""
    return get(url).send().error_for_status().json()


def join(base_url: str, link: str) -> str:
    """Resolves a link from an API answer (absolute, or a path) against the base URL."""
    if link.startswith(("http://", "https://")):
        return link
    return base_url.rstrip("/") + "/" + link.lstrip("/")


def host_port(url: str) -> str:
    """The `host:port` of a URL, as `Source.hosts` wants it: prefixed with `http://` when the URL is
    plain http (which the operator must grant explicitly), the scheme's port when none is given. The
    same answers as the Rust and JavaScript SDKs (guest-sdk/cases/host_port.json)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        raise Error.config(f"not an absolute URL: {url}")
    authority = rest
    for stop in "/?#":
        authority = authority.split(stop, 1)[0]
    authority = authority.rsplit("@", 1)[-1]
    if not authority:
        raise Error.config(f"URL has no host: {url}")
    schemes = {"https": ("", 443), "http": ("http://", 80)}
    if scheme not in schemes:
        raise Error.config(f"unsupported URL scheme {scheme!r} in {url}")
    prefix, default_port = schemes[scheme]
    _, colon, port = authority.rpartition(":")
    if colon and "]" not in port:
        return f"{prefix}{authority}"
    return f"{prefix}{authority}:{default_port}"
