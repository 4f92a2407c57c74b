from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Optional

import requests

from airbyte_cdk.sources.types import Record


@dataclass
class PaginationStrategy:
    """Computes the next page token from the last response (CDK interface)."""

    @property
    @abstractmethod
    def initial_token(self) -> Optional[Any]:
        pass

    @abstractmethod
    def next_page_token(self, response: requests.Response, last_page_size: int, last_record: Optional[Record], last_page_token_value: Optional[Any]) -> Optional[Any]:
        pass

    @abstractmethod
    def get_page_size(self) -> Optional[int]:
        pass
