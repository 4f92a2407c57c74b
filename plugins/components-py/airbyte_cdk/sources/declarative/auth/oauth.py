"""DeclarativeOauth2Authenticator following the CDK's AbstractOauth2Authenticator: the access token
is refreshed when expired by POSTing grant_type/client_id/client_secret/refresh_token (plus
refresh_request_body) as a form to token_refresh_endpoint, through the requests shim (so the host
sees it); the header is `Authorization: Bearer <token>`. Not yet: profile assertion (JWT),
refresh_token_error_* handling, and the single-use refresh token rotation that writes the new
refresh token back into the config (refused with a message when it would run)."""

from dataclasses import InitVar, dataclass, field
from datetime import timedelta
from typing import Any, List, Mapping, Optional, Tuple, Union

import requests

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.auth.declarative_authenticator import DeclarativeAuthenticator
from airbyte_cdk.sources.declarative.interpolation.interpolated_mapping import InterpolatedMapping
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.message.repository import NoopMessageRepository
from airbyte_cdk.sources.types import Config
from airbyte_cdk.utils.datetime_helpers import AirbyteDateTime, ab_datetime_now, ab_datetime_parse


def _interp(value, parameters):
    return InterpolatedString.create(value, parameters=parameters) if value is not None else None


class BearerAccessToken(DeclarativeAuthenticator):
    """`Authorization: Bearer <access token>`, as the CDK's AbstractOauth2Authenticator sends it."""

    @property
    def auth_header(self) -> str:
        return "Authorization"

    @property
    def token(self) -> str:
        return f"Bearer {self.get_access_token()}"

    def get_access_token(self) -> str:
        raise NotImplementedError


@dataclass
class DeclarativeOauth2Authenticator(BearerAccessToken):
    config: Mapping[str, Any]
    parameters: InitVar[Mapping[str, Any]]
    client_id: Optional[Union[InterpolatedString, str]] = None
    client_secret: Optional[Union[InterpolatedString, str]] = None
    token_refresh_endpoint: Optional[Union[InterpolatedString, str]] = None
    refresh_token: Optional[Union[InterpolatedString, str]] = None
    scopes: Optional[List[str]] = None
    token_expiry_date: Optional[Union[InterpolatedString, str]] = None
    _token_expiry_date: Optional[AirbyteDateTime] = field(init=False, repr=False, default=None)
    token_expiry_date_format: Optional[str] = None
    token_expiry_is_time_of_expiration: bool = False
    access_token_name: Union[InterpolatedString, str] = "access_token"
    access_token_value: Optional[Union[InterpolatedString, str]] = None
    client_id_name: Union[InterpolatedString, str] = "client_id"
    client_secret_name: Union[InterpolatedString, str] = "client_secret"
    expires_in_name: Union[InterpolatedString, str] = "expires_in"
    refresh_token_name: Union[InterpolatedString, str] = "refresh_token"
    refresh_request_body: Optional[Mapping[str, Any]] = None
    refresh_request_headers: Optional[Mapping[str, Any]] = None
    send_refresh_request_as_query_params: bool = False
    grant_type_name: Union[InterpolatedString, str] = "grant_type"
    grant_type: Union[InterpolatedString, str] = "refresh_token"
    message_repository: Any = field(default_factory=NoopMessageRepository)
    profile_assertion: Optional[Any] = None
    use_profile_assertion: Optional[Union[InterpolatedString, str, bool]] = False
    refresh_token_error_status_codes: Tuple[int, ...] = ()
    refresh_token_error_key: str = ""
    refresh_token_error_values: Tuple[str, ...] = ()

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        p = parameters
        self._parameters = parameters
        self._client_id = _interp(self.client_id, p)
        self._client_secret = _interp(self.client_secret, p)
        self._token_refresh_endpoint = _interp(self.token_refresh_endpoint, p)
        self._refresh_token = _interp(self.refresh_token, p)
        self._access_token_name = _interp(self.access_token_name, p)
        self._client_id_name = _interp(self.client_id_name, p)
        self._client_secret_name = _interp(self.client_secret_name, p)
        self._expires_in_name = _interp(self.expires_in_name, p)
        self._refresh_token_name = _interp(self.refresh_token_name, p)
        self._grant_type_name = _interp(self.grant_type_name, p)
        self._grant_type = _interp(self.grant_type, p)
        self._refresh_request_body = InterpolatedMapping(self.refresh_request_body or {}, parameters=p)
        self._refresh_request_headers = InterpolatedMapping(self.refresh_request_headers or {}, parameters=p)
        expiry = _interp(self.token_expiry_date, p)
        expiry_value = expiry.eval(self.config) if expiry else None
        self._token_expiry_date = ab_datetime_parse(expiry_value) if expiry_value else ab_datetime_now() - timedelta(days=1)
        self._access_token_value = _interp(self.access_token_value, p).eval(self.config) if self.access_token_value else None
        self._access_token = self._access_token_value

    # -- values, as the CDK's getters
    def _eval(self, s):
        return s.eval(self.config) if s is not None else None

    def get_token_refresh_endpoint(self) -> Optional[str]:
        return self._eval(self._token_refresh_endpoint)

    def get_client_id(self) -> str:
        return self._eval(self._client_id)

    def get_client_secret(self) -> str:
        return self._eval(self._client_secret)

    def get_refresh_token(self) -> Optional[str]:
        return self._eval(self._refresh_token)

    def get_scopes(self) -> List[str]:
        return self.scopes or []

    def get_access_token_name(self) -> str:
        return self._eval(self._access_token_name)

    def get_expires_in_name(self) -> str:
        return self._eval(self._expires_in_name)

    def get_grant_type(self) -> str:
        return self._eval(self._grant_type)

    def get_refresh_request_body(self) -> Mapping[str, Any]:
        return self._refresh_request_body.eval(self.config)

    def get_refresh_request_headers(self) -> Mapping[str, Any]:
        return self._refresh_request_headers.eval(self.config)

    def get_token_expiry_date(self) -> AirbyteDateTime:
        return self._token_expiry_date

    def set_token_expiry_date(self, value: AirbyteDateTime) -> None:
        self._token_expiry_date = value

    @property
    def access_token(self) -> str:
        return self._access_token

    @access_token.setter
    def access_token(self, value: str) -> None:
        self._access_token = value

    # -- the flow
    def token_has_expired(self) -> bool:
        return ab_datetime_now() > self.get_token_expiry_date()

    def build_refresh_request_body(self) -> Mapping[str, Any]:
        payload = {self._eval(self._grant_type_name): self.get_grant_type()}
        if self.get_grant_type() == "refresh_token":
            payload[self._eval(self._client_id_name)] = self.get_client_id()
            payload[self._eval(self._client_secret_name)] = self.get_client_secret()
            payload[self._eval(self._refresh_token_name)] = self.get_refresh_token()
        if self.get_scopes():
            payload["scopes"] = self.get_scopes()
        for key, val in (self.get_refresh_request_body() or {}).items():
            payload.setdefault(key, val)
        return payload

    def build_refresh_request_headers(self) -> Optional[Mapping[str, Any]]:
        headers = self.get_refresh_request_headers()
        return headers if headers else None

    def refresh_access_token(self) -> Tuple[str, Any]:
        body = self.build_refresh_request_body()
        if self.send_refresh_request_as_query_params:
            response = requests.request("POST", self.get_token_refresh_endpoint(), params=body, headers=self.build_refresh_request_headers())
        else:
            response = requests.request("POST", self.get_token_refresh_endpoint(), data=body, headers=self.build_refresh_request_headers())
        response.raise_for_status()
        response_json = response.json()
        return response_json[self.get_access_token_name()], response_json.get(self.get_expires_in_name())

    def _expiry_from(self, expires_in: Any) -> AirbyteDateTime:
        if expires_in is None:
            return ab_datetime_now() + timedelta(hours=1)
        if self.token_expiry_is_time_of_expiration:
            if self.token_expiry_date_format:
                from airbyte_cdk.sources.declarative.datetime.datetime_parser import DatetimeParser

                return AirbyteDateTime.from_datetime(DatetimeParser().parse(str(expires_in), self.token_expiry_date_format))
            return ab_datetime_parse(str(expires_in))
        return ab_datetime_now() + timedelta(seconds=float(expires_in))

    def get_access_token(self) -> str:
        if self._access_token_value is not None and self.get_token_refresh_endpoint() is None:
            return self._access_token_value
        if self.token_has_expired():
            token, expires_in = self.refresh_access_token()
            self.access_token = token
            self.set_token_expiry_date(self._expiry_from(expires_in))
        return self.access_token


class DeclarativeSingleUseRefreshTokenOauth2Authenticator(BearerAccessToken):
    """The CDK's single-use refresh token flow writes each new refresh token back into the config
    (a control message). Constructing it works; refreshing is refused until the host can take the
    config update."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._args = args
        self._kwargs = kwargs
        self._connector_config = kwargs.get("connector_config", args[0] if args else {})

    def get_access_token(self) -> str:
        raise unsupported("DeclarativeSingleUseRefreshTokenOauth2Authenticator (single-use refresh token rotation written back to the config)")
