"""HttpRequester with the CDK's fields and its request-building getters (url_base/path
interpolation, options from the request_options_provider, the authenticator's options). Sending
goes through the requests shim once (the host retries); custom subclasses usually override a getter."""

import logging
from dataclasses import InitVar, dataclass, field
from typing import Any, Callable, Mapping, MutableMapping, Optional, Union
from urllib.parse import urljoin

import requests

from airbyte_cdk.sources.declarative.auth.declarative_authenticator import DeclarativeAuthenticator, NoAuth
from airbyte_cdk.sources.declarative.decoders.json_decoder import JsonDecoder
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.requesters.request_options.interpolated_request_options_provider import InterpolatedRequestOptionsProvider
from airbyte_cdk.sources.declarative.requesters.requester import HttpMethod, Requester
from airbyte_cdk.sources.message.repository import NoopMessageRepository
from airbyte_cdk.sources.streams.http.http_client import HttpClient
from airbyte_cdk.sources.types import Config

__all__ = ["HttpClient", "HttpMethod", "HttpRequester"]


@dataclass
class HttpRequester(Requester):
    name: str
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    url: Optional[Union[InterpolatedString, str]] = None
    url_base: Optional[Union[InterpolatedString, str]] = None
    path: Optional[Union[InterpolatedString, str]] = None
    authenticator: Optional[DeclarativeAuthenticator] = None
    http_method: Union[str, HttpMethod] = HttpMethod.GET
    request_options_provider: Optional[InterpolatedRequestOptionsProvider] = None
    error_handler: Optional[Any] = None
    api_budget: Optional[Any] = None
    disable_retries: bool = False
    message_repository: Any = field(default_factory=NoopMessageRepository)
    use_cache: bool = False
    connect_timeout_in_seconds: Optional[int] = None
    read_timeout_in_seconds: Optional[int] = None
    use_tcp_keepalive: bool = False
    _exit_on_rate_limit: bool = False
    stream_response: bool = False
    decoder: Any = field(default_factory=lambda: JsonDecoder(parameters={}))

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._url = InterpolatedString.create(self.url if self.url else "", parameters=parameters)
        self._url_base = InterpolatedString.create(self.url_base if self.url_base else "", parameters=parameters)
        self._path = InterpolatedString.create(self.path if self.path else "", parameters=parameters)
        if self.request_options_provider is None:
            self._request_options_provider = InterpolatedRequestOptionsProvider(config=self.config, parameters=parameters)
        elif isinstance(self.request_options_provider, dict):
            self._request_options_provider = InterpolatedRequestOptionsProvider(config=self.config, **self.request_options_provider, parameters=parameters)
        else:
            self._request_options_provider = self.request_options_provider
        self._authenticator = self.authenticator or NoAuth(parameters=parameters)
        self._http_method = HttpMethod[self.http_method] if isinstance(self.http_method, str) else self.http_method
        self._parameters = parameters
        self._http_client = HttpClient(name=self.name, logger=logging.getLogger(f"airbyte.HttpRequester.{self.name}"),
                                       authenticator=self._authenticator)

    def get_authenticator(self) -> DeclarativeAuthenticator:
        return self._authenticator

    def _kwargs(self, stream_slice, next_page_token):
        return {"stream_slice": stream_slice, "next_page_token": next_page_token}

    def get_url(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> str:
        return str(self._url.eval(self.config, **self._kwargs(stream_slice, next_page_token)) or "")

    def get_url_base(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> str:
        return str(self._url_base.eval(self.config, **self._kwargs(stream_slice, next_page_token)) or "")

    def get_path(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> str:
        path = str(self._path.eval(self.config, **self._kwargs(stream_slice, next_page_token)) or "")
        return path.lstrip("/")

    def get_method(self) -> HttpMethod:
        return self._http_method

    def get_request_params(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        return self._request_options_provider.get_request_params(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)

    def get_request_headers(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> Mapping[str, Any]:
        return self._request_options_provider.get_request_headers(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)

    def get_request_body_data(self, *, stream_state=None, stream_slice=None, next_page_token=None):
        return self._request_options_provider.get_request_body_data(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token) or {}

    def get_request_body_json(self, *, stream_state=None, stream_slice=None, next_page_token=None):
        return self._request_options_provider.get_request_body_json(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token) or {}

    def _join_url(self, url_base: str, path: str) -> str:
        # the CDK joins with urljoin after making sure the base ends with "/"
        if not path:
            return url_base
        return urljoin(url_base if url_base.endswith("/") else url_base + "/", path)

    def send_request(self, stream_state=None, stream_slice=None, next_page_token=None, path=None, request_headers=None,
                     request_params=None, request_body_data=None, request_body_json=None, log_formatter=None) -> Optional[requests.Response]:
        kw = dict(stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)
        url = self.get_url(**kw) or self._join_url(self.get_url_base(**kw), path if path is not None else self.get_path(**kw))
        headers = {**self.get_request_headers(**kw), **(request_headers or {})}  # the authenticator adds its header as requests auth
        params = {**self._authenticator.get_request_params(), **self.get_request_params(**kw), **(request_params or {})}
        body_json = {**self.get_request_body_json(**kw), **(request_body_json or {})} or None
        body_data = self.get_request_body_data(**kw) if request_body_data is None else request_body_data
        _, response = self._http_client.send_request(http_method=self._http_method.value, url=url, request_kwargs={},
                                                     headers=headers, params=params, json=body_json, data=body_data or None)
        return response
