from abc import ABC, abstractmethod
from typing import Optional, Union

import requests

from airbyte_cdk.sources.streams.http.error_handlers.response_models import ErrorResolution


class ErrorHandler(ABC):
    """Decides what a response or exception means: retry, fail, ignore... (CDK interface)."""

    @property
    @abstractmethod
    def max_retries(self) -> Optional[int]:
        pass

    @property
    @abstractmethod
    def max_time(self) -> Optional[int]:
        pass

    @abstractmethod
    def interpret_response(self, response: Optional[Union[requests.Response, Exception]]) -> ErrorResolution:
        pass
