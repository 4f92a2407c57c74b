from abc import abstractmethod
from typing import Any, Iterable, Mapping, Optional


class Retriever:
    """Reads a stream's records for a slice (CDK interface)."""

    @abstractmethod
    def read_records(self, records_schema: Mapping[str, Any], stream_slice: Optional[Any] = None) -> Iterable[Any]:
        pass
