"""DatetimeBasedCursor with the fields of CDK 6.x (removed in 7.x, still imported by connectors
pinned to 6.x). The Sluice engine runs incremental sync; a custom subclass that changes how the
cursor slices or reads state is refused when those methods are called."""

from dataclasses import InitVar, dataclass, field
from typing import Any, List, Mapping, Optional, Union

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.types import Config


@dataclass
class DatetimeBasedCursor:
    start_datetime: Any
    cursor_field: Union[InterpolatedString, str]
    datetime_format: str
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    end_datetime: Optional[Any] = None
    step: Optional[str] = None
    cursor_granularity: Optional[str] = None
    start_time_option: Optional[Any] = None
    end_time_option: Optional[Any] = None
    partition_field_start: Optional[str] = None
    partition_field_end: Optional[str] = None
    lookback_window: Optional[Union[InterpolatedString, str]] = None
    message_repository: Optional[Any] = None
    is_compare_strictly: Optional[bool] = False
    cursor_datetime_formats: List[str] = field(default_factory=lambda: [])

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._parameters = parameters
        self.cursor_field = InterpolatedString.create(self.cursor_field, parameters=parameters)
        self._partition_field_start = InterpolatedString.create(self.partition_field_start or "start_time", parameters=parameters)
        self._partition_field_end = InterpolatedString.create(self.partition_field_end or "end_time", parameters=parameters)

    def stream_slices(self):
        raise unsupported(f"{type(self).__name__}.stream_slices (a custom DatetimeBasedCursor)")

    def get_request_params(self, **kwargs: Any) -> Mapping[str, Any]:
        raise unsupported(f"{type(self).__name__}.get_request_params (a custom DatetimeBasedCursor)")
