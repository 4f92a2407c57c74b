"""PageIncrement as in the CDK: page numbers from start_from_page; stop on a short or empty page."""

from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Union

import requests

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.requesters.paginators.strategies.pagination_strategy import PaginationStrategy
from airbyte_cdk.sources.types import Config, Record


@dataclass
class PageIncrement(PaginationStrategy):
    config: Config
    page_size: Optional[Union[str, int]]
    parameters: InitVar[Mapping[str, Any]]
    start_from_page: int = 0
    inject_on_first_request: bool = False
    extractor: Optional[Any] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if isinstance(self.page_size, int) or self.page_size is None:
            self._page_size = self.page_size
        else:
            page_size = InterpolatedString(self.page_size, parameters=parameters).eval(self.config)
            if not isinstance(page_size, int):
                raise Exception(f"{page_size} is of type {type(page_size)}. Expected {int}")
            self._page_size = page_size

    @property
    def initial_token(self) -> Optional[Any]:
        return self.start_from_page if self.inject_on_first_request else None

    def next_page_token(self, response: requests.Response, last_page_size: int, last_record: Optional[Record], last_page_token_value: Optional[Any], page_size_override: Optional[int] = None, stream_slice: Optional[Any] = None) -> Optional[Any]:
        if page_size_override is not None:
            raise ValueError("PageIncrement does not support reducing the page size while paginating")
        if self.extractor is not None:
            last_page_size = len(list(self.extractor.extract_records(response)))
        if (self._page_size and last_page_size < self._page_size) or last_page_size == 0:
            return None
        if last_page_token_value is None:
            return self.start_from_page + 1
        if not isinstance(last_page_token_value, int):
            raise ValueError(f"Last page token value {last_page_token_value} for PageIncrement pagination strategy was not an integer")
        return last_page_token_value + 1

    def get_page_size(self) -> Optional[int]:
        return self._page_size
