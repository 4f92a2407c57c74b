from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

import requests


@dataclass
class RecordExtractor:
    """Turns a response into records (CDK: extract_records(response) -> Iterable[Mapping])."""

    @abstractmethod
    def extract_records(self, response: requests.Response) -> Iterable[Mapping[str, Any]]:
        pass
