"""A `requests`-shaped layer for custom components inside the sandbox.

Same public names as the requests package (Response, Session, Request, PreparedRequest, the
exceptions, status codes, get/post/...), no sockets: every call ends in requests.transport.send,
which Sluice wires to the host's HTTP import.
"""

from . import exceptions, status_codes, structures
from .auth import AuthBase, HTTPBasicAuth
from .exceptions import (
    ConnectionError,
    ConnectTimeout,
    HTTPError,
    JSONDecodeError,
    ReadTimeout,
    RequestException,
    Timeout,
    TooManyRedirects,
    URLRequired,
)
from .models import PreparedRequest, Request, Response
from .sessions import Session, session
from .status_codes import codes

__version__ = "2.32.3+sluice"


def request(method, url, **kwargs):
    with Session() as s:
        return s.request(method=method, url=url, **kwargs)


def get(url, params=None, **kwargs):
    return request("get", url, params=params, **kwargs)


def options(url, **kwargs):
    return request("options", url, **kwargs)


def head(url, **kwargs):
    kwargs.setdefault("allow_redirects", False)
    return request("head", url, **kwargs)


def post(url, data=None, json=None, **kwargs):
    return request("post", url, data=data, json=json, **kwargs)


def put(url, data=None, **kwargs):
    return request("put", url, data=data, **kwargs)


def patch(url, data=None, **kwargs):
    return request("patch", url, data=data, **kwargs)


def delete(url, **kwargs):
    return request("delete", url, **kwargs)
