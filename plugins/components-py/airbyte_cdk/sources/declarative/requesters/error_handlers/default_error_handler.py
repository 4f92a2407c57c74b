"""DefaultErrorHandler as in the CDK: the first matching response filter decides; else 2xx is
success; else the default mapping. backoff_time asks each backoff strategy in turn."""

from dataclasses import InitVar, dataclass
from typing import Any, List, Mapping, Optional, Union

import requests

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.requesters.error_handlers.default_http_response_filter import DefaultHttpResponseFilter
from airbyte_cdk.sources.declarative.requesters.error_handlers.http_response_filter import HttpResponseFilter
from airbyte_cdk.sources.streams.http.error_handlers import BackoffStrategy, ErrorHandler
from airbyte_cdk.sources.streams.http.error_handlers.response_models import SUCCESS_RESOLUTION, ErrorResolution, create_fallback_error_resolution
from airbyte_cdk.sources.types import Config


@dataclass
class DefaultErrorHandler(ErrorHandler):
    parameters: InitVar[Mapping[str, Any]]
    config: Config
    response_filters: Optional[List[HttpResponseFilter]] = None
    max_retries: Optional[Union[int, str]] = 5
    max_time: int = 60 * 10
    backoff_strategies: Optional[List[BackoffStrategy]] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if not self.response_filters:
            self.response_filters = [HttpResponseFilter(config=self.config, parameters={})]
        self._last_request_to_attempt_count = {}
        if isinstance(self.max_retries, str):
            evaluated = InterpolatedString(string=self.max_retries, default="5", parameters=parameters).eval(config=self.config)
            try:
                self.max_retries = int(evaluated)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"DefaultErrorHandler.max_retries did not evaluate to an integer (got {evaluated!r})") from exc

    def interpret_response(self, response_or_exception: Optional[Union[requests.Response, Exception]]) -> ErrorResolution:
        for response_filter in self.response_filters or []:
            matched = response_filter.matches(response_or_exception=response_or_exception)
            if matched:
                return matched
        if isinstance(response_or_exception, requests.Response) and response_or_exception.ok:
            return SUCCESS_RESOLUTION
        default = DefaultHttpResponseFilter(parameters={}, config=self.config).matches(response_or_exception)
        return default if default else create_fallback_error_resolution(response_or_exception)

    def backoff_time(self, response_or_exception, attempt_count: int = 0) -> Optional[float]:
        backoff = None
        for strategy in self.backoff_strategies or []:
            backoff = strategy.backoff_time(response_or_exception=response_or_exception, attempt_count=attempt_count)
            if backoff:
                return backoff
        return backoff
