from abc import ABC, abstractmethod
from typing import Iterable

from airbyte_cdk.sources.declarative.requesters.request_options.request_options_provider import RequestOptionsProvider
from airbyte_cdk.sources.types import StreamSlice


class StreamSlicer(RequestOptionsProvider, ABC):
    """Yields the slices of a stream and the request options for each (CDK interface)."""

    @abstractmethod
    def stream_slices(self) -> Iterable[StreamSlice]:
        pass
