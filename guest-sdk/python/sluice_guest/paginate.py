"""Pagination helpers. A page token is any JSON value; these give the common kinds a fixed shape,
so a connector reads the token and builds the next one in one line each."""

from typing import Any, Optional

from .errors import Error


def page_number(token: Any, first: int = 1) -> int:
    """Page numbers (`?page=N`), starting at `first`. The token is the next page's number."""
    return _number(token, first, "page number")


def next_page_number(current: int, records_on_page: int, page_size: int) -> Optional[int]:
    """The token for the page after `current`, or `None` after a short page (the last one)."""
    return current + 1 if records_on_page >= page_size and records_on_page > 0 else None


def offset(token: Any) -> int:
    """Offsets (`?offset=N`). The token is the next offset."""
    return _number(token, 0, "offset")


def next_offset(current: int, records_on_page: int, page_size: int) -> Optional[int]:
    """The token for the page after one that started at `current`, or `None` after a short page."""
    return current + records_on_page if records_on_page >= page_size and records_on_page > 0 else None


def cursor(token: Any) -> Optional[str]:
    """Opaque cursors or next-page URLs handed out by the API. The token is that string."""
    if token is None or isinstance(token, str):
        return token
    raise Error.system(f"expected a cursor string as page token, got {token!r}")


def next_cursor(value: Optional[str]) -> Optional[str]:
    """The token for an API's next cursor or URL; `None` or an empty string ends the partition."""
    return value or None


def _number(token: Any, default: int, what: str) -> int:
    if token is None:
        return default
    if isinstance(token, int) and not isinstance(token, bool) and token >= 0:
        return token
    raise Error.system(f"expected a {what} as page token, got {token!r}")
