"""HttpClient with the CDK's constructor. Its send_request is the host's job: in the sandbox it
sends once through the requests shim (no retries here: the host retries and paces)."""

import logging
from typing import Any, Mapping, Optional, Tuple

import requests

from airbyte_cdk.sources.streams.http.exceptions import DefaultBackoffException  # noqa: F401


class HttpClient:
    def __init__(self, name: str, logger: logging.Logger, error_handler: Optional[Any] = None, api_budget: Optional[Any] = None,
                 session: Optional[requests.Session] = None, authenticator: Optional[Any] = None, use_cache: bool = False,
                 backoff_strategy: Optional[Any] = None, error_message_parser: Optional[Any] = None, disable_retries: bool = False,
                 message_repository: Optional[Any] = None, request_timeout: Optional[Any] = None, use_tcp_keepalive: bool = False):
        self._name = name
        self._logger = logger
        self._error_handler = error_handler
        self._api_budget = api_budget
        self._session = session or requests.Session()
        self._authenticator = authenticator
        self._backoff_strategy = backoff_strategy
        self._disable_retries = disable_retries
        self._message_repository = message_repository
        self._request_timeout = request_timeout

    @property
    def name(self) -> str:
        return self._name

    def send_request(self, http_method: str, url: str, request_kwargs: Mapping[str, Any], headers: Optional[Mapping[str, str]] = None,
                     params: Optional[Mapping[str, str]] = None, json: Optional[Mapping[str, Any]] = None, data: Optional[Any] = None,
                     dedupe_query_params: bool = False, log_formatter: Optional[Any] = None, exit_on_rate_limit: Optional[bool] = False) -> Tuple[requests.PreparedRequest, requests.Response]:
        request = requests.Request(method=http_method, url=url, headers=headers, params=params, json=json, data=data, auth=self._authenticator)
        prepared = self._session.prepare_request(request)
        response = self._session.send(prepared, **request_kwargs)
        return prepared, response
