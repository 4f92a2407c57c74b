"""InterpolatedRequestOptionsProvider as in the CDK: each of request_parameters, request_headers,
request_body_data and request_body_json is interpolated with stream_slice and next_page_token in
context; None values are dropped from mappings. query_properties is not supported yet."""

from dataclasses import InitVar, dataclass, field
from typing import Any, Mapping, MutableMapping, Optional, Union

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.interpolation.interpolated_mapping import InterpolatedMapping
from airbyte_cdk.sources.declarative.interpolation.interpolated_nested_mapping import InterpolatedNestedMapping
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.requesters.request_options.request_options_provider import RequestOptionsProvider
from airbyte_cdk.sources.types import Config

RequestInput = Union[str, Mapping[str, str]]


def _eval_inputs(provider, config, stream_slice, next_page_token, nested=False):
    if provider is None:
        return {}
    kwargs = {"stream_slice": stream_slice, "next_page_token": next_page_token}
    if isinstance(provider, InterpolatedString):
        return provider.eval(config, **kwargs)
    value = provider.eval(config, **kwargs) if nested else provider.eval(config, **kwargs)
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if v is not None}
    return value


@dataclass
class InterpolatedRequestOptionsProvider(RequestOptionsProvider):
    parameters: InitVar[Mapping[str, Any]]
    config: Config = field(default_factory=dict)
    request_parameters: Optional[RequestInput] = None
    request_headers: Optional[RequestInput] = None
    request_body: Optional[Any] = None
    request_body_data: Optional[RequestInput] = None
    request_body_json: Optional[Any] = None
    query_properties_key: Optional[str] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if self.request_body is not None:
            raise unsupported("InterpolatedRequestOptionsProvider.request_body (typed request bodies)")
        if self.request_body_json and self.request_body_data:
            raise ValueError("RequestOptionsProvider should only contain either 'request_body_data' or 'request_body_json' not both")

        def flat(v):
            if v is None:
                return None
            if isinstance(v, str):
                return InterpolatedString.create(v, parameters=parameters)
            return InterpolatedMapping(mapping=v, parameters=parameters)

        self._params = flat(self.request_parameters)
        self._headers = flat(self.request_headers)
        self._body_data = flat(self.request_body_data)
        if isinstance(self.request_body_json, str):
            self._body_json = InterpolatedString.create(self.request_body_json, parameters=parameters)
        elif self.request_body_json is not None:
            self._body_json = InterpolatedNestedMapping(mapping=self.request_body_json, parameters=parameters)
        else:
            self._body_json = None

    def get_request_params(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> MutableMapping[str, Any]:
        value = _eval_inputs(self._params, self.config, stream_slice, next_page_token)
        return value if isinstance(value, dict) else {}

    def get_request_headers(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> Mapping[str, Any]:
        return _eval_inputs(self._headers, self.config, stream_slice, next_page_token)

    def get_request_body_data(self, *, stream_state=None, stream_slice=None, next_page_token=None):
        return _eval_inputs(self._body_data, self.config, stream_slice, next_page_token)

    def get_request_body_json(self, *, stream_state=None, stream_slice=None, next_page_token=None) -> Mapping[str, Any]:
        return _eval_inputs(self._body_json, self.config, stream_slice, next_page_token, nested=True)
