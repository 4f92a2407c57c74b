"""SubstreamPartitionRouter and ParentStreamConfig with the CDK's fields. Reading the parent stream
is the engine's job: it reads the parents as for the built-in router and hands a custom subclass
the slices they make, which `stream_slices` yields (for a subclass's super().stream_slices());
custom code reading a parent stream itself is not supported."""

from dataclasses import InitVar, dataclass
from typing import Any, Iterable, List, Mapping, Optional, Union

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.partition_routers.partition_router import PartitionRouter
from airbyte_cdk.sources.declarative.requesters.request_options.request_options_provider import NoRequestOptions
from airbyte_cdk.sources.types import Config, StreamSlice, StreamState


@dataclass
class ParentStreamConfig:
    stream: Any
    parent_key: Union[InterpolatedString, str]
    partition_field: Union[InterpolatedString, str]
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    extra_fields: Optional[Union[List[List[str]], List[List[InterpolatedString]]]] = None
    request_option: Optional[Any] = None
    incremental_dependency: bool = False
    lazy_read_pointer: Optional[List[Union[InterpolatedString, str]]] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self.parent_key = InterpolatedString.create(self.parent_key, parameters=parameters)
        self.partition_field = InterpolatedString.create(self.partition_field, parameters=parameters)


@dataclass
class SubstreamPartitionRouter(NoRequestOptions, PartitionRouter):
    parent_stream_configs: List[ParentStreamConfig]
    config: Config
    parameters: InitVar[Mapping[str, Any]]

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if not self.parent_stream_configs:
            raise ValueError("SubstreamPartitionRouter needs at least 1 parent stream")
        self._parameters = parameters

    def stream_slices(self) -> Iterable[StreamSlice]:
        """The slices the engine made of the parents' records, as the CDK's router makes them
        (one per parent record: the partition field and `parent_slice`, the extra fields), of the
        parents `parent_stream_configs` names now: a subclass may narrow the list between calls
        (source-jira's SprintIssuesSubstreamPartitionRouter reads its first parent, then the
        others), so a slice is yielded when its partition has the partition field of one of them."""
        slices = getattr(self, "_sluice_parent_slices", None)
        if slices is None:
            raise unsupported("SubstreamPartitionRouter.stream_slices outside a listing of partitions")
        fields = {str(c.partition_field.eval(self.config)) for c in self.parent_stream_configs}
        for stream_slice in slices:
            if any(field in stream_slice.partition for field in fields):
                yield stream_slice

    def set_initial_state(self, stream_state: StreamState) -> None:
        self._state = stream_state

    def get_stream_state(self) -> Optional[Mapping[str, StreamState]]:
        return None
