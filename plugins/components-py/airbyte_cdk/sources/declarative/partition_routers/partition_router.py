from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping, Optional

from airbyte_cdk.sources.declarative.stream_slicers.stream_slicer import StreamSlicer


@dataclass
class PartitionRouter(StreamSlicer):
    """A StreamSlicer whose slices are partitions; it may carry parent state. As CDK 7.39.1's, only
    get_stream_state is abstract (set_initial_state is no longer part of the interface)."""

    def set_initial_state(self, stream_state: Mapping[str, Any]) -> None:
        pass

    @abstractmethod
    def get_stream_state(self) -> Optional[Mapping[str, Any]]:
        pass
