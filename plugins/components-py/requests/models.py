"""Request, PreparedRequest and Response, shaped like requests.models.

Only what custom components touch: a PreparedRequest carries method, url (with params encoded),
headers and body the way requests prepares them (json= becomes UTF-8 bytes with a JSON content
type, a dict data= becomes a form-encoded str); a Response holds a finished body (no streaming
from the network: the host hands the whole body in).
"""

import json as _json
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from . import exceptions
from .status_codes import codes
from .structures import CaseInsensitiveDict


def _encode_params(data):
    # requests.models.RequestEncodingMixin._encode_params: str/bytes pass, mappings and pair lists urlencode
    if isinstance(data, (str, bytes)):
        return data
    if hasattr(data, "read"):
        return data
    if hasattr(data, "__iter__"):
        pairs = []
        items = data.items() if hasattr(data, "items") else data
        for k, vs in items:
            if isinstance(vs, (str, bytes)) or not hasattr(vs, "__iter__"):
                vs = [vs]
            for v in vs:
                if v is not None:
                    pairs.append((k.encode("utf-8") if isinstance(k, str) else k, v.encode("utf-8") if isinstance(v, str) else v))
        return urlencode(pairs, doseq=True)
    return data


class Request:
    def __init__(self, method=None, url=None, headers=None, files=None, data=None, params=None,
                 auth=None, cookies=None, hooks=None, json=None):
        self.method = method
        self.url = url
        self.headers = headers or {}
        self.files = files
        self.data = [] if data is None else data
        self.json = json
        self.params = params or {}
        self.auth = auth
        self.cookies = cookies
        self.hooks = hooks or {}

    def __repr__(self):
        return f"<Request [{self.method}]>"

    def prepare(self):
        p = PreparedRequest()
        p.prepare(method=self.method, url=self.url, headers=self.headers, files=self.files,
                  data=self.data, params=self.params, auth=self.auth, cookies=self.cookies,
                  hooks=self.hooks, json=self.json)
        return p


class PreparedRequest:
    def __init__(self):
        self.method = None
        self.url = None
        self.headers = None
        self.body = None
        self.hooks = {}

    def prepare(self, method=None, url=None, headers=None, files=None, data=None, params=None,
                auth=None, cookies=None, hooks=None, json=None):
        self.prepare_method(method)
        self.prepare_url(url, params)
        self.prepare_headers(headers)
        self.prepare_body(data, files, json)
        self.prepare_auth(auth)

    def __repr__(self):
        return f"<PreparedRequest [{self.method}]>"

    def copy(self):
        p = PreparedRequest()
        p.method = self.method
        p.url = self.url
        p.headers = self.headers.copy() if self.headers is not None else None
        p.body = self.body
        p.hooks = self.hooks
        return p

    def prepare_method(self, method):
        self.method = method.upper() if method is not None else None

    def prepare_url(self, url, params):
        if isinstance(url, bytes):
            url = url.decode("utf8")
        url = str(url).strip()
        if ":" in url and not url.lower().startswith("http"):
            self.url = url
            return
        scheme, netloc, path, query, fragment = urlsplit(url)
        if not scheme:
            raise exceptions.MissingSchema(
                f"Invalid URL {url!r}: No scheme supplied. Perhaps you meant https://{url}?"
            )
        if not netloc:
            raise exceptions.InvalidURL(f"Invalid URL {url!r}: No host supplied")
        if not path:
            path = "/"
        enc_params = _encode_params(params or {})
        if isinstance(enc_params, bytes):
            enc_params = enc_params.decode("utf-8")
        if enc_params:
            query = f"{query}&{enc_params}" if query else enc_params
        self.url = urlunsplit((scheme, netloc, path, query, fragment))

    def prepare_headers(self, headers):
        self.headers = CaseInsensitiveDict()
        for name, value in (headers or {}).items():
            self.headers[name] = value

    def prepare_body(self, data, files, json=None):
        if files:
            raise NotImplementedError("requests shim: multipart file uploads (files=) are not supported")
        body = None
        content_type = None
        if not data and json is not None:
            content_type = "application/json"
            body = _json.dumps(json, allow_nan=False)
            if not isinstance(body, bytes):
                body = body.encode("utf-8")
        elif data:
            body = _encode_params(data)
            if not isinstance(data, (str, bytes)) and not hasattr(data, "read"):
                content_type = "application/x-www-form-urlencoded"
        if body is not None:
            self.headers["Content-Length"] = str(len(body))
        elif self.method not in ("GET", "HEAD"):
            self.headers["Content-Length"] = "0"
        if content_type and "content-type" not in self.headers:
            self.headers["Content-Type"] = content_type
        self.body = body

    def prepare_auth(self, auth, url=""):
        if auth:
            if isinstance(auth, tuple) and len(auth) == 2:
                from .auth import HTTPBasicAuth

                auth = HTTPBasicAuth(*auth)
            r = auth(self)
            self.__dict__.update(r.__dict__)

    @property
    def path_url(self):
        parts = urlsplit(self.url)
        return (parts.path or "/") + (f"?{parts.query}" if parts.query else "")


def _encoding_from_headers(headers):
    # requests.utils.get_encoding_from_headers: charset=..., else ISO-8859-1 for text/*, UTF-8 for JSON
    content_type = headers.get("content-type")
    if not content_type:
        return None
    parts = [p.strip() for p in content_type.split(";")]
    for p in parts[1:]:
        if p.lower().startswith("charset="):
            return p[8:].strip("'\"")
    if "text" in parts[0]:
        return "ISO-8859-1"
    if "application/json" in parts[0]:
        return "utf-8"
    return None


class Response:
    __attrs__ = ["_content", "status_code", "headers", "url", "history", "encoding", "reason", "cookies", "elapsed", "request"]

    def __init__(self):
        self._content = False
        self.status_code = None
        self.headers = CaseInsensitiveDict()
        self.raw = None
        self.url = None
        self.encoding = None
        self.history = []
        self.reason = None
        self.cookies = {}
        self.elapsed = None
        self.request = None

    @classmethod
    def from_parts(cls, status_code, headers, content, url=None, request=None, reason=None):
        """Build a finished response (what the host's HTTP import hands back)."""
        r = cls()
        r.status_code = int(status_code)
        r.headers = CaseInsensitiveDict(headers or {})
        r._content = content if isinstance(content, bytes) else (content or "").encode("utf-8")
        r.url = url
        r.request = request
        r.encoding = _encoding_from_headers(r.headers)
        if reason is None:
            try:
                from http import HTTPStatus

                reason = HTTPStatus(r.status_code).phrase
            except ValueError:
                reason = ""
        r.reason = reason
        return r

    def __repr__(self):
        return f"<Response [{self.status_code}]>"

    def __bool__(self):
        return self.ok

    def __iter__(self):
        return self.iter_content(128)

    def __enter__(self):
        return self

    def __exit__(self, *args):
        self.close()

    @property
    def ok(self):
        try:
            self.raise_for_status()
        except exceptions.HTTPError:
            return False
        return True

    @property
    def is_redirect(self):
        return "location" in self.headers and self.status_code in (301, 302, 303, 307, 308)

    @property
    def content(self):
        return self._content if self._content else b""

    @property
    def apparent_encoding(self):
        # requests asks charset_normalizer; without it, UTF-8 is the honest guess for API bodies
        return "utf-8"

    @property
    def text(self):
        if not self.content:
            return ""
        encoding = self.encoding or self.apparent_encoding
        try:
            return str(self.content, encoding, errors="replace")
        except (LookupError, TypeError):
            return str(self.content, errors="replace")

    def json(self, **kwargs):
        try:
            return _json.loads(self.text, **kwargs)
        except _json.JSONDecodeError as e:
            raise exceptions.JSONDecodeError(e.msg, e.doc, e.pos)

    @property
    def links(self):
        header = self.headers.get("link")
        resolved = {}
        if header:
            for part in header.split(","):
                url, _, params = part.partition(";")
                link = {"url": url.strip(" <>'\"")}
                for param in params.split(";"):
                    k, _, v = param.partition("=")
                    if k.strip():
                        link[k.strip(" '\"")] = v.strip(" '\"")
                resolved[link.get("rel") or link.get("url")] = link
        return resolved

    def iter_content(self, chunk_size=1, decode_unicode=False):
        data = self.content
        step = chunk_size or len(data) or 1
        for i in range(0, len(data), step):
            chunk = data[i:i + step]
            yield chunk.decode(self.encoding or "utf-8", errors="replace") if decode_unicode else chunk

    def iter_lines(self, chunk_size=512, decode_unicode=False, delimiter=None):
        data = self.content
        if decode_unicode:
            data = data.decode(self.encoding or "utf-8", errors="replace")
        lines = data.split(delimiter) if delimiter else data.splitlines()
        yield from lines

    def raise_for_status(self):
        reason = self.reason or ""
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", errors="replace")
        msg = ""
        if 400 <= self.status_code < 500:
            msg = f"{self.status_code} Client Error: {reason} for url: {self.url}"
        elif 500 <= self.status_code < 600:
            msg = f"{self.status_code} Server Error: {reason} for url: {self.url}"
        if msg:
            raise exceptions.HTTPError(msg, response=self)

    def close(self):
        pass


__all__ = ["Request", "PreparedRequest", "Response", "codes", "parse_qsl"]
