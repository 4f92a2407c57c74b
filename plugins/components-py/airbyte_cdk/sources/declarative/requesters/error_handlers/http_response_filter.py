"""HttpResponseFilter as in the CDK: a response matches by http_codes, predicate (response, headers,
request_url in context) or error_message_contains; the match gives action, failure type, message."""

from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Set, Union
from urllib.parse import urlsplit, urlunsplit

import requests

from airbyte_cdk.models import FailureType
from airbyte_cdk.sources.declarative.interpolation.interpolated_boolean import InterpolatedBoolean
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.streams.http.error_handlers.default_error_mapping import DEFAULT_ERROR_MAPPING
from airbyte_cdk.sources.streams.http.error_handlers.json_error_message_parser import JsonErrorMessageParser
from airbyte_cdk.sources.streams.http.error_handlers.response_models import ErrorResolution, ResponseAction
from airbyte_cdk.sources.types import Config


@dataclass
class HttpResponseFilter:
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    action: Optional[Union[ResponseAction, str]] = None
    failure_type: Optional[Union[FailureType, str]] = None
    http_codes: Optional[Set[int]] = None
    error_message_contains: Optional[str] = None
    predicate: Union[InterpolatedBoolean, str] = ""
    error_message: Union[InterpolatedString, str] = ""

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if self.action is not None:
            if self.http_codes is None and self.predicate is None and self.error_message_contains is None:
                raise ValueError("HttpResponseFilter requires a filter condition if an action is specified")
            elif isinstance(self.action, str):
                self.action = ResponseAction[self.action]
        self.http_codes = self.http_codes or set()
        if isinstance(self.predicate, str):
            self.predicate = InterpolatedBoolean(condition=self.predicate, parameters=parameters)
        self.error_message = InterpolatedString.create(string_or_interpolated=self.error_message, parameters=parameters)
        self._error_message_parser = JsonErrorMessageParser()
        if self.failure_type and isinstance(self.failure_type, str):
            self.failure_type = FailureType[self.failure_type]

    def matches(self, response_or_exception: Optional[Union[requests.Response, Exception]]) -> Optional[ErrorResolution]:
        filter_action = self._matches_filter(response_or_exception)
        mapped_key = response_or_exception.status_code if isinstance(response_or_exception, requests.Response) else response_or_exception.__class__
        default_mapped = DEFAULT_ERROR_MAPPING.get(mapped_key) if isinstance(mapped_key, (int, Exception)) else None
        if filter_action is not None:
            default_error_message = default_mapped.error_message if default_mapped else ""
            error_message = self._create_error_message(response_or_exception) if isinstance(response_or_exception, requests.Response) else None
            error_message = error_message or default_error_message
            if self.failure_type and filter_action == ResponseAction.FAIL:
                failure_type = self.failure_type
            elif default_mapped:
                failure_type = default_mapped.failure_type
            else:
                failure_type = FailureType.system_error
            return ErrorResolution(response_action=filter_action, failure_type=failure_type, error_message=error_message)
        return None

    def _matches_filter(self, response_or_exception) -> Optional[ResponseAction]:
        if isinstance(response_or_exception, requests.Response) and (
            response_or_exception.status_code in self.http_codes
            or self._response_matches_predicate(response_or_exception)
            or self._response_contains_error_message(response_or_exception)
        ):
            return self.action
        return None

    @staticmethod
    def _request_url(response: requests.Response) -> str:
        url = response.url
        if not isinstance(url, str) or not url:
            return ""
        parts = urlsplit(url)
        return urlunsplit((parts.scheme, parts.netloc.rsplit("@", 1)[-1], parts.path, "", ""))

    @staticmethod
    def _safe_response_json(response: requests.Response):
        try:
            return response.json()
        except requests.exceptions.JSONDecodeError:
            return {}

    def _create_error_message(self, response: requests.Response) -> Optional[str]:
        return self.error_message.eval(self.config, response=self._safe_response_json(response), headers=response.headers, request_url=self._request_url(response))

    def _response_matches_predicate(self, response: requests.Response) -> bool:
        if not self.predicate or not self.predicate.condition:
            return False
        return bool(self.predicate.eval(None, response=self._safe_response_json(response), headers=response.headers, request_url=self._request_url(response)))

    def _response_contains_error_message(self, response: requests.Response) -> bool:
        if not self.error_message_contains:
            return False
        error_message = self._error_message_parser.parse_response_error_message(response=response)
        return bool(error_message and self.error_message_contains in error_message)
