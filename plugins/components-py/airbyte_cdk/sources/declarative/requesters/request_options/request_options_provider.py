from abc import abstractmethod
from typing import Any, Mapping, Optional, Union

from airbyte_cdk.sources.types import StreamSlice, StreamState


class RequestOptionsProvider:
    """Request parameters, headers and bodies for a slice and page (CDK interface)."""

    @abstractmethod
    def get_request_params(self, *, stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None,
                           next_page_token: Optional[Mapping[str, Any]] = None) -> Mapping[str, Any]:
        pass

    @abstractmethod
    def get_request_headers(self, *, stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None,
                            next_page_token: Optional[Mapping[str, Any]] = None) -> Mapping[str, Any]:
        pass

    @abstractmethod
    def get_request_body_data(self, *, stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None,
                              next_page_token: Optional[Mapping[str, Any]] = None) -> Union[Mapping[str, Any], str]:
        pass

    @abstractmethod
    def get_request_body_json(self, *, stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None,
                              next_page_token: Optional[Mapping[str, Any]] = None) -> Mapping[str, Any]:
        pass


class NoRequestOptions:
    """Empty request options, for the components of this layer that add none to a request (the
    partition routers: their `request_option` injection is not done here)."""

    def get_request_params(self, **kwargs) -> Mapping[str, Any]:
        return {}

    def get_request_headers(self, **kwargs) -> Mapping[str, Any]:
        return {}

    def get_request_body_data(self, **kwargs):
        return {}

    def get_request_body_json(self, **kwargs) -> Mapping[str, Any]:
        return {}
