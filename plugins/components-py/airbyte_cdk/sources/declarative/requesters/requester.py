from abc import abstractmethod
from enum import Enum
from typing import Any, Mapping, Optional

from airbyte_cdk.sources.declarative.requesters.request_options.request_options_provider import RequestOptionsProvider


class HttpMethod(Enum):
    GET = "GET"
    PATCH = "PATCH"
    POST = "POST"
    PUT = "PUT"
    DELETE = "DELETE"


class Requester(RequestOptionsProvider):
    """Builds and sends a stream's request (CDK interface)."""

    @abstractmethod
    def get_authenticator(self) -> Any:
        pass

    @abstractmethod
    def get_url_base(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> str:
        pass

    @abstractmethod
    def get_path(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> str:
        pass

    @abstractmethod
    def get_method(self) -> HttpMethod:
        pass

    @abstractmethod
    def send_request(self, stream_state=None, stream_slice=None, next_page_token=None, path=None, request_headers=None,
                     request_params=None, request_body_data=None, request_body_json=None, log_formatter=None) -> Optional[Any]:
        pass
