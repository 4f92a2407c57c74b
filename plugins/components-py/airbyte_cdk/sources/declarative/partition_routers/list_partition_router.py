"""ListPartitionRouter as in the CDK: one partition {cursor_field: value} per value (values may be
an interpolated string that evaluates to a list); request_option injection is not done here."""

from dataclasses import InitVar, dataclass
from typing import Any, Iterable, List, Mapping, Optional, Union

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.partition_routers.partition_router import PartitionRouter
from airbyte_cdk.sources.declarative.requesters.request_options.request_options_provider import NoRequestOptions
from airbyte_cdk.sources.types import Config, StreamSlice, StreamState


@dataclass
class ListPartitionRouter(NoRequestOptions, PartitionRouter):
    values: Union[str, List[str]]
    cursor_field: Union[InterpolatedString, str]
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    request_option: Optional[Any] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if isinstance(self.values, str):
            self.values = InterpolatedString.create(self.values, parameters=parameters).eval(self.config)
        self._cursor_field = InterpolatedString(string=self.cursor_field, parameters=parameters) if isinstance(self.cursor_field, str) else self.cursor_field

    def stream_slices(self) -> Iterable[StreamSlice]:
        field = self._cursor_field.eval(self.config)
        return [StreamSlice(partition={field: v}, cursor_slice={}) for v in self.values]

    def set_initial_state(self, stream_state: StreamState) -> None:
        pass

    def get_stream_state(self) -> Optional[Mapping[str, StreamState]]:
        return None
