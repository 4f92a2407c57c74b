"""WaitTimeFromHeaderBackoffStrategy as in the CDK: wait what the header says; past
max_waiting_time_in_seconds, stop the stream with a transient error."""

import re
from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Union

import requests

from airbyte_cdk.models import FailureType
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.requesters.error_handlers.backoff_strategies.header_helper import get_numeric_value_from_header
from airbyte_cdk.sources.streams.http.error_handlers.backoff_strategy import BackoffStrategy
from airbyte_cdk.sources.types import Config
from airbyte_cdk.utils.traced_exception import AirbyteTracedException


@dataclass
class WaitTimeFromHeaderBackoffStrategy(BackoffStrategy):
    header: Union[InterpolatedString, str]
    parameters: InitVar[Mapping[str, Any]]
    config: Config
    regex: Optional[Union[InterpolatedString, str]] = None
    max_waiting_time_in_seconds: Optional[Union[float, InterpolatedString, str]] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self.regex = InterpolatedString.create(self.regex, parameters=parameters) if self.regex else None
        self.header = InterpolatedString.create(self.header, parameters=parameters)
        m = self.max_waiting_time_in_seconds
        self._max_waiting_time_in_seconds = InterpolatedString.create(str(m), parameters=parameters) if m is not None else None

    def _max_wait(self) -> Optional[float]:
        if self._max_waiting_time_in_seconds is None:
            return None
        return float(self._max_waiting_time_in_seconds.eval(self.config))

    def backoff_time(self, response_or_exception: Optional[Union[requests.Response, requests.RequestException]], attempt_count: int) -> Optional[float]:
        header = self.header.eval(config=self.config)
        regex = re.compile(self.regex.eval(self.config)) if self.regex else None
        header_value = None
        if isinstance(response_or_exception, requests.Response):
            header_value = get_numeric_value_from_header(response_or_exception, header, regex)
            max_wait = self._max_wait()
            if max_wait is not None and header_value and header_value >= max_wait:
                raise AirbyteTracedException(
                    internal_message=f"Rate limit wait time {header_value}s is greater than or equal to the maximum of {max_wait}s this stream is allowed to wait. Stopping the stream...",
                    message="The rate limit wait time is longer than the connector is allowed to wait.",
                    failure_type=FailureType.transient_error,
                )
        return header_value
