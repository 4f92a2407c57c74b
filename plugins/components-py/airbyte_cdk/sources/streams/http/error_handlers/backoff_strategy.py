from abc import ABC, abstractmethod
from typing import Optional, Union

import requests


class BackoffStrategy(ABC):
    """Seconds to wait before a retry, or None for the default (CDK interface)."""

    @abstractmethod
    def backoff_time(self, response_or_exception: Optional[Union[requests.Response, requests.RequestException]], attempt_count: int) -> Optional[float]:
        pass


class DefaultBackoffStrategy(BackoffStrategy):
    def backoff_time(self, response_or_exception, attempt_count: int) -> Optional[float]:
        return None
