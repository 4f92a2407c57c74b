from typing import Optional, Union

import requests

from airbyte_cdk.sources.declarative.requesters.error_handlers.http_response_filter import HttpResponseFilter
from airbyte_cdk.sources.streams.http.error_handlers.default_error_mapping import DEFAULT_ERROR_MAPPING
from airbyte_cdk.sources.streams.http.error_handlers.response_models import ErrorResolution, create_fallback_error_resolution


class DefaultHttpResponseFilter(HttpResponseFilter):
    """The CDK's fallback filter: the default error mapping for the status (or exception class)."""

    def matches(self, response_or_exception: Optional[Union[requests.Response, Exception]]) -> Optional[ErrorResolution]:
        mapped = None
        if isinstance(response_or_exception, (requests.Response, Exception)):
            key = response_or_exception.status_code if isinstance(response_or_exception, requests.Response) else response_or_exception.__class__
            mapped = DEFAULT_ERROR_MAPPING.get(key)
        return mapped if mapped else create_fallback_error_resolution(response_or_exception)
