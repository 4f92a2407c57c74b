from abc import abstractmethod
from typing import Any, Iterable, Mapping, Optional

import requests


class HttpSelector:
    """Selects records from a response (CDK interface; RecordSelector implements it)."""

    @abstractmethod
    def select_records(self, response: requests.Response, stream_state: Mapping[str, Any],
                       records_schema: Mapping[str, Any], stream_slice: Optional[Mapping[str, Any]] = None,
                       next_page_token: Optional[Mapping[str, Any]] = None) -> Iterable[Any]:
        pass
