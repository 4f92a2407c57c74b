"""Stream and StreamData: names custom code imports; the engine, not Python, reads streams."""

from abc import ABC, abstractmethod
from typing import Any, Mapping, Union

from airbyte_cdk.models import AirbyteMessage

StreamData = Union[Mapping[str, Any], AirbyteMessage]


class Stream(ABC):
    @property
    def name(self) -> str:
        return type(self).__name__

    @property
    @abstractmethod
    def primary_key(self):
        pass

    @abstractmethod
    def read_records(self, sync_mode, cursor_field=None, stream_slice=None, stream_state=None):
        pass
