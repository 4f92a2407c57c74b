from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Dict, Optional

from airbyte_cdk.sources.types import Config, StreamSlice, StreamState


@dataclass
class RecordTransformation:
    """Edits a record in place (CDK: transform(record, config, stream_state, stream_slice) -> None)."""

    @abstractmethod
    def transform(self, record: Dict[str, Any], config: Optional[Config] = None,
                  stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return other.__dict__ == self.__dict__
