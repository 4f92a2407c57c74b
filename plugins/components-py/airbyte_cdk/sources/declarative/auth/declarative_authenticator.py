from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Union

from airbyte_cdk.sources.streams.http.requests_native_auth.abstract_token import AbstractHeaderAuthenticator


@dataclass
class DeclarativeAuthenticator(AbstractHeaderAuthenticator):
    """An authenticator that may also add request parameters or body fields (CDK: all empty)."""

    def get_request_params(self) -> Mapping[str, Any]:
        return {}

    def get_request_body_data(self) -> Union[Mapping[str, Any], str]:
        return {}

    def get_request_body_json(self) -> Mapping[str, Any]:
        return {}


@dataclass
class NoAuth(DeclarativeAuthenticator):
    parameters: InitVar[Mapping[str, Any]]

    @property
    def auth_header(self) -> str:
        return ""

    @property
    def token(self) -> str:
        return ""
