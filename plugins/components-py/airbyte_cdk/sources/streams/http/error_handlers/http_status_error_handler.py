"""HttpStatusErrorHandler as in the CDK: the error mapping decides; 2xx is success; else fallback."""

import logging
from datetime import timedelta
from typing import Mapping, Optional, Union

import requests

from airbyte_cdk.sources.streams.http.error_handlers.default_error_mapping import DEFAULT_ERROR_MAPPING
from airbyte_cdk.sources.streams.http.error_handlers.error_handler import ErrorHandler
from airbyte_cdk.sources.streams.http.error_handlers.response_models import ErrorResolution, ResponseAction, create_fallback_error_resolution
from airbyte_cdk.models import FailureType


class HttpStatusErrorHandler(ErrorHandler):
    def __init__(self, logger: logging.Logger, error_mapping: Optional[Mapping] = None, max_retries: int = 5, max_time: timedelta = timedelta(seconds=600)) -> None:
        self._logger = logger
        self._error_mapping = error_mapping or DEFAULT_ERROR_MAPPING
        self._max_retries = max_retries
        self._max_time = int(max_time.total_seconds())

    @property
    def max_retries(self) -> Optional[int]:
        return self._max_retries

    @property
    def max_time(self) -> Optional[int]:
        return self._max_time

    def interpret_response(self, response_or_exception: Optional[Union[requests.Response, Exception]] = None) -> ErrorResolution:
        if isinstance(response_or_exception, Exception):
            mapped = self._error_mapping.get(response_or_exception.__class__)
            if mapped is not None:
                return mapped
            return ErrorResolution(ResponseAction.RETRY, FailureType.system_error, f"Unexpected exception in error handler: {response_or_exception}")
        if isinstance(response_or_exception, requests.Response):
            if response_or_exception.status_code is None:
                return ErrorResolution(ResponseAction.FAIL, FailureType.system_error, "Response does not include an HTTP status code.")
            if response_or_exception.ok:
                return ErrorResolution(ResponseAction.SUCCESS, None, None)
            mapped = self._error_mapping.get(response_or_exception.status_code)
            if mapped is not None:
                return mapped
            return ErrorResolution(ResponseAction.RETRY, FailureType.system_error, f"Unexpected HTTP Status Code in error handler: {response_or_exception.status_code}")
        return create_fallback_error_resolution(response_or_exception)
