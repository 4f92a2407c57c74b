"""The single way out: every request custom code makes ends in `send()` here.

Sluice wires `set_transport` to the host's HTTP import, so a request from custom code is a host
request (egress policy, retries, recording). Not part of the real requests package. The transport is
a callable taking a dict {method, url, headers: [[name, value], ...], body: bytes or None, timeout}
and returning a dict {status, headers: [[name, value], ...], body: bytes, url?, reason?}.
"""

from . import exceptions

_transport = None


def set_transport(fn):
    """Install the function that performs HTTP (None: every request fails with ConnectionError)."""
    global _transport
    _transport = fn


def get_transport():
    return _transport


def send(prepared, timeout=None):
    from .models import Response

    if _transport is None:
        raise exceptions.ConnectionError(
            "no HTTP transport: custom code's requests go through the host, and none is wired",
            request=prepared,
        )
    body = prepared.body
    if isinstance(body, str):
        body = body.encode("utf-8")
    reply = _transport({
        "method": prepared.method,
        "url": prepared.url,
        "headers": [[k, str(v)] for k, v in prepared.headers.items()],
        "body": body,
        "timeout": timeout,
    })
    if isinstance(reply, BaseException):
        raise reply
    return Response.from_parts(
        reply["status"], reply.get("headers") or [], reply.get("body") or b"",
        url=reply.get("url") or prepared.url, request=prepared, reason=reply.get("reason"),
    )
