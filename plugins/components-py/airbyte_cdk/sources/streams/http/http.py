"""HttpStream (the CDK's Python-stream base class) exists so imports work; the declarative engine
runs streams, so a custom HttpStream subclass is refused when it is read."""

from abc import ABC
from typing import Any, Optional

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.streams.core import Stream

BODY_REQUEST_METHODS = ("GET", "POST", "PUT", "PATCH")


class HttpStream(Stream, ABC):
    page_size: Optional[int] = None

    def __init__(self, authenticator: Optional[Any] = None, api_budget: Optional[Any] = None):
        self._authenticator = authenticator
        self._api_budget = api_budget

    def read_records(self, *args: Any, **kwargs: Any):
        raise unsupported(f"{type(self).__name__}: a Python HttpStream (the declarative engine reads streams)")
