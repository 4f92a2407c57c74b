"""requests_cache names custom code imports as types: the cache is the host's business."""

from requests import Response, Session

CachedResponse = Response
CachedSession = Session

__all__ = ["CachedResponse", "CachedSession", "Response"]
