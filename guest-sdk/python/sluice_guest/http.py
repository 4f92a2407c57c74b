"""HTTP through the host. The host enforces the egress grant, timeouts, retries with backoff
(429, 5xx, connection errors; `Retry-After` honoured) and size caps, so a connector just sends.

`Request.send` answers with the whole body; `Request.open` leaves the body with the host, to be
read a piece at a time (`Body.read_lines`, `Body.read_bytes`) for downloads too large to hold."""

import json
import re
from typing import Any, Optional, Union

from componentize_py_types import Err
from wit_world.imports import http as wit

from . import _warming
from .errors import Error


# What the WHATWG application/x-www-form-urlencoded serializer leaves as it is (Rust's
# `form_urlencoded`, JavaScript's `URLSearchParams`). `urllib.parse.urlencode` differs: it
# encodes `*` and leaves `~`.
_FORM_SAFE = frozenset(b"*-._0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _form_urlencode(text: str) -> str:
    """`text` as an HTML form encodes it: UTF-8, a space as `+`, every other byte but
    `_FORM_SAFE` as `%XX`."""
    # A lone surrogate (a Python str may hold one, a Rust str may not) is sent as U+FFFD, as
    # `URLSearchParams` sends it, rather than failing to encode.
    data = _SURROGATE.sub("\ufffd", text).encode()
    return "".join(chr(b) if b in _FORM_SAFE else "+" if b == 0x20 else f"%{b:02X}" for b in data)


class Request:
    """A request being built: `http.get(url).query("limit", 100).bearer_auth(key).send()`."""

    def __init__(self, method: str, url: str):
        self.method = method
        self.url = url
        self.headers: list[tuple[str, str]] = []
        self.body: Optional[bytes] = None

    def query(self, name: str, value: Any) -> "Request":
        """Appends a query parameter, percent-encoded as an HTML form encodes it (as the Rust and
        JavaScript SDKs do: guest-sdk/cases/requests.json)."""
        if isinstance(value, bool):
            value = "true" if value else "false"
        pair = f"{_form_urlencode(name)}={_form_urlencode(str(value))}"
        self.url += ("&" if "?" in self.url else "?") + pair
        return self

    def header(self, name: str, value: str) -> "Request":
        self.headers.append((name, value))
        return self

    def bearer_auth(self, token: str) -> "Request":
        return self.header("authorization", f"Bearer {token}")

    def json_body(self, value: Any) -> "Request":
        # Compact and UTF-8, not `\u` escapes: the bytes serde_json and JSON.stringify send. A
        # lone surrogate (in a string only) is escaped, as JSON.stringify escapes it, since
        # UTF-8 cannot hold it.
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        self.body = _SURROGATE.sub(lambda m: f"\\u{ord(m[0]):04x}", text).encode()
        return self.header("content-type", "application/json")

    def with_body(self, body: bytes) -> "Request":
        self.body = body
        return self

    def send(self) -> "Response":
        """Sends the request through the host. Any status is a response; see
        `Response.error_for_status`."""
        if _warming.active:
            status, headers, body = _warming.sample(f"{self.method} {self.url}")
            return Response(self.url, status, headers, body)
        answer = self._host(wit.send)
        return Response(self.url, answer.status, answer.headers, answer.body)

    def send_records(self, path: list[str]) -> "RecordsResponse":
        """Sends the request, and has the host take the records out of a successful JSON answer:
        those of the list at `path` (`["data"]`, `["result", "items"]`), each as the API wrote
        it, never parsed here; the rest of the answer stays JSON text for the paginator. The
        fastest way to pass records on unchanged (contract 0.1.4):

            records, rest = request.send_records(["data"]).error_for_status().parts()
            return Page(records, paginate.next_cursor(rest.get("next_cursor")))
        """
        answer = self._host(wit.send_records, list(path))
        return RecordsResponse(self.url, ".".join(path), answer.status, answer.headers, answer.records, answer.rest)

    def forward_records(self, path: list[str]) -> "RecordsResponse":
        """As `send_records`, but the records never come into Python: the host keeps them and
        puts them at the start of the page this `read_page` (or job result read) returns, before
        the page's own records. The answer's `records` is how many were kept. Only in those
        calls; the records count against the limit of records per page:

            _, rest = request.forward_records(["data"]).error_for_status().parts()
            return Page([], paginate.next_cursor(rest.get("next_cursor")))
        """
        answer = self._host(wit.forward_records, list(path))
        return RecordsResponse(self.url, ".".join(path), answer.status, answer.headers, answer.forwarded, answer.rest)

    def records(self, path: list[str]) -> "Later":
        """This request for a `read_page` that is read in steps to yield: the host sends it
        between two steps and the generator gets what `send_records(path)` answers."""
        return Later(self, Later.RECORDS, list(path))

    def forwarded(self, path: list[str]) -> "Later":
        """This request for a `read_page` that is read in steps to yield: the host sends it
        between two steps, keeps the records for the page and the generator gets what
        `forward_records(path)` answers."""
        return Later(self, Later.FORWARD, list(path))

    def _wit(self):
        """The request as the host's `http` interface takes it."""
        return wit.Request(self.method, self.url, self.headers, self.body)

    def _host(self, call, *args):
        """A call of the host's `http` import with this request; its error names the method and URL."""
        _warming.refuse_host(f"{self.method} {self.url}")
        try:
            return call(self._wit(), *args)
        except Err as e:
            raise _http_error(self.method, self.url, e.value) from None

    def open(self) -> "StreamedResponse":
        """Sends the request, but leaves the body with the host, to be read a piece at a time with
        `Body.read_lines` or `Body.read_bytes`: for downloads too large to hold (a report of a
        million rows). Retries, redirects and the egress policy work as for `send`."""
        head = self._host(wit.open)
        return StreamedResponse(self.url, head.status, head.headers, Body(head.body))


class Later:
    """A request a `read_page` written as a generator yields, for the host to send: between two
    steps when the stream is read in steps (no interpreter is kept while the answer is on its
    way), at once otherwise. Yield a `Request` for its whole answer (as `send`), or
    `request.records(path)` / `request.forwarded(path)` (as `send_records` / `forward_records`):

        answer = yield config.get(url).records(["data"])
        records, rest = answer.error_for_status().parts()

    An HTTP error is raised at the `yield`, as `send` raises it."""

    WHOLE, RECORDS, FORWARD = "whole", "records", "forward"
    __slots__ = ("request", "use", "path")

    def __init__(self, request: "Request", use: str, path: Optional[list[str]] = None):
        self.request = request
        self.use = use
        self.path = path

    @classmethod
    def of(cls, value: Any) -> "Later":
        """What a generator yielded, as a `Later`; anything but a request is a system error."""
        if isinstance(value, Later):
            return value
        if isinstance(value, Request):
            return cls(value, cls.WHOLE)
        raise Error.system(f"read_page yielded {value!r}: yield a Request, or request.records(path) or .forwarded(path)")

    def send_now(self) -> "_Answer":
        """Sends it now, in this call."""
        if self.use == Later.RECORDS:
            return self.request.send_records(self.path)
        if self.use == Later.FORWARD:
            return self.request.forward_records(self.path)
        return self.request.send()

    def answered(self, answer) -> "_Answer":
        """The answer the host got for it between two steps (the WIT `answer`)."""
        url, status, headers = self.request.url, answer.status, answer.headers
        if self.use == Later.RECORDS:
            return RecordsResponse(url, ".".join(self.path), status, headers, answer.records, answer.rest)
        if self.use == Later.FORWARD:
            return RecordsResponse(url, ".".join(self.path), status, headers, answer.forwarded, answer.rest)
        return Response(url, status, headers, answer.rest)

    def failed(self, error) -> Error:
        """The error `send` would raise for the host's WIT `http-error`."""
        return _http_error(self.request.method, self.request.url, error)

    def wit_request(self):
        return self.request._wit()


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


class _Answer:
    """What every kind of answer has: `url`, `status` and `headers`."""

    url: str
    status: int
    headers: list[tuple[str, str]]

    def header(self, name: str) -> Optional[str]:
        """The first header called `name` (case-insensitive)."""
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def is_success(self) -> bool:
        return 200 <= self.status < 300


class Response(_Answer):
    """An HTTP answer: `url`, `status`, `headers` and `body` (bytes)."""

    def __init__(self, url: str, status: int, headers: list[tuple[str, str]], body: bytes):
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body

    def text(self) -> str:
        try:
            return self.body.decode()
        except UnicodeDecodeError as e:
            raise Error.system(f"{self.url}: body is not UTF-8: {e}") from None

    def json(self) -> Any:
        """Parses the body as JSON, naming the URL when it is not."""
        try:
            # Decoded as UTF-8 first: `json.loads` of bytes would also take UTF-16 and a leading
            # BOM, which the Rust and JavaScript SDKs refuse.
            return json.loads(self.body.decode())
        except ValueError as e:
            raise Error.system(f"{self.url} answered {self.status} with unexpected JSON: {e}") from None

    def error_for_status(self) -> "Response":
        """Turns a non-2xx answer into an error of the right kind: 401/403/404 are the config's
        fault, 429 and 5xx are passing (the host has already retried them), anything else is a
        system error."""
        if self.is_success():
            return self
        raise _status_error(self.url, self.status, self.body)


class RecordsResponse(_Answer):
    """An answer whose records the host took out (see `Request.send_records`): `url`, `status`,
    `headers`, `records` (a list of JSON texts, or for `forward_records` how many the host kept;
    None when the answer was not a success or held no list of objects at the path, and then
    `rest` is the whole body) and `rest` (bytes)."""

    def __init__(self, url: str, path: str, status: int, headers, records: Union[list[str], int, None], rest: bytes):
        self.url = url
        self.path = path
        self.status = status
        self.headers = headers
        self.records = records
        self.rest = rest

    def error_for_status(self) -> "RecordsResponse":
        """As `Response.error_for_status`, the body being `rest`."""
        if self.is_success():
            return self
        raise _status_error(self.url, self.status, self.rest)

    def parts(self) -> tuple[Union[list[str], int], Any]:
        """The records and the rest of the answer parsed; a system error naming the URL and the
        path when the answer had no list of records there."""
        if self.records is None:
            start = self.rest[:200].decode(errors="replace")
            raise Error.system(f"{self.url} answered {self.status} without a list of records at `{self.path}`: {start}")
        try:
            rest = json.loads(self.rest.decode())
        except ValueError as e:
            raise Error.system(f"{self.url} answered {self.status} with unexpected JSON: {e}") from None
        return self.records, rest


def _status_error(url: str, status: int, body: bytes) -> Error:
    message = f"{url} answered {status}: {body[:500].decode(errors='replace')}"
    if status in (401, 403, 404):
        return Error.config(message)
    if status == 429 or 500 <= status <= 599:
        return Error.transient(message)
    return Error.system(message)


class StreamedResponse(_Answer):
    """An HTTP answer whose body is still with the host (see `Request.open`): `url`, `status`,
    `headers` and `body` (a `Body`)."""

    def __init__(self, url: str, status: int, headers: list[tuple[str, str]], body: "Body"):
        self.url = url
        self.status = status
        self.headers = headers
        self.body = body

    def error_for_status(self) -> "StreamedResponse":
        """As `Response.error_for_status`; the message quotes the start of the body, and the body
        is closed."""
        if self.is_success():
            return self
        try:
            start = self.body.read_bytes(500) or b""
        except Error:
            start = b""  # The status says enough; a body that fails to read adds nothing.
        self.body.close()
        raise _status_error(self.url, self.status, start)


_MAX_U32 = 2**32 - 1


class Body:
    """An open response body, held by the host for as long as it reads the partition that
    opened it. Its `handle` may go into a page token (and back with `Body.from_handle`) so that
    the next `read_page` or `read_result` call of the partition goes on reading where this one
    stopped; a body read to its end is closed by the host."""

    __slots__ = ("handle",)

    def __init__(self, handle: int):
        self.handle = handle

    @classmethod
    def from_handle(cls, handle: Any) -> "Body":
        """The body a handle names, as kept in a page token; anything but a handle (a token
        that was tampered with, or written by another connector) is a system error."""
        if not isinstance(handle, int) or isinstance(handle, bool) or not 0 <= handle <= _MAX_U32:
            raise Error.system(f"not a body handle: {handle!r}")
        return cls(handle)

    def read_lines(self, max_lines: int) -> Optional["Lines"]:
        """Up to `max_lines` more lines. `None` when the host holds no such body: it was closed,
        or the partition is read by a new instance now (a retry, a resumed run), so open it again
        (from a position the token kept, say)."""
        _warming.refuse_host("reading a body")
        try:
            read = wit.read_lines(self.handle, max_lines)
        except Err as e:
            return _unknown_body_or_raise(e.value)
        return Lines(read.text, read.count, read.end)

    def read_bytes(self, max_bytes: int) -> Optional[bytes]:
        """Up to `max_bytes` more bytes; empty at the end. `None` as for `read_lines`."""
        _warming.refuse_host("reading a body")
        try:
            return wit.read_bytes(self.handle, max_bytes)
        except Err as e:
            return _unknown_body_or_raise(e.value)

    def close(self) -> None:
        """Closes the body before its end."""
        _warming.refuse_host("closing a body")
        wit.close_body(self.handle)

    def __eq__(self, other) -> bool:
        return isinstance(other, Body) and self.handle == other.handle

    def __repr__(self) -> str:
        return f"Body({self.handle})"


def _unknown_body_or_raise(error) -> None:
    if isinstance(error, wit.BodyError_UnknownBody):
        return None
    if isinstance(error, wit.BodyError_Connection):
        raise Error.transient(error.value)
    raise Error.system(error.value)


class Lines:
    """Lines of a body, as one text, and whether it ended: `text` holds `count` complete lines,
    each with its line ending as sent (the body's last line may have none), to split with
    `lines()` or hand to a CSV reader as it is; `end` is true when the body has no more (the
    host has closed it)."""

    __slots__ = ("text", "count", "end")

    def __init__(self, text: str, count: int, end: bool):
        self.text = text
        self.count = count
        self.end = end

    def lines(self) -> list[str]:
        """The lines, without their `\\n` or `\\r\\n`. Only those end a line: not the other
        characters `str.splitlines` splits on, which a JSON string may hold unescaped."""
        lines = self.text.split("\n")
        if lines[-1] == "":
            lines.pop()
        return [line[:-1] if line.endswith("\r") else line for line in lines]

    def __repr__(self) -> str:
        return f"Lines(count={self.count}, end={self.end}, text={self.text[:60]!r})"


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
