"""ExponentialBackoffStrategy as in the CDK: factor * 2**attempt_count seconds (plus jitter)."""

import random
from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Union

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.streams.http.error_handlers.backoff_strategy import BackoffStrategy
from airbyte_cdk.sources.types import Config


@dataclass
class ExponentialBackoffStrategy(BackoffStrategy):
    parameters: InitVar[Mapping[str, Any]]
    config: Config
    factor: Union[float, InterpolatedString, str] = 5
    jitter_range_in_seconds: Optional[float] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if not isinstance(self.factor, InterpolatedString):
            self.factor = str(self.factor)
        self._factor = InterpolatedString.create(self.factor, parameters=parameters)

    @property
    def _retry_factor(self) -> float:
        return float(self._factor.eval(self.config))

    def backoff_time(self, response_or_exception, attempt_count: int) -> Optional[float]:
        backoff_time = float(self._retry_factor * 2**attempt_count)
        if self.jitter_range_in_seconds is None:
            return backoff_time
        return random.uniform(backoff_time, backoff_time + (self.jitter_range_in_seconds * 2))
