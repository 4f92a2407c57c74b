import base64

from airbyte_cdk.sources.streams.http.requests_native_auth.abstract_token import AbstractHeaderAuthenticator


class TokenAuthenticator(AbstractHeaderAuthenticator):
    """`Authorization: Bearer <token>` (auth_method and auth_header configurable), as in the CDK."""

    def __init__(self, token: str, auth_method: str = "Bearer", auth_header: str = "Authorization"):
        self._auth_header = auth_header
        self._auth_method = auth_method
        self._token = token

    @property
    def auth_header(self) -> str:
        return self._auth_header

    @property
    def token(self) -> str:
        return f"{self._auth_method} {self._token}"


class BasicHttpAuthenticator(TokenAuthenticator):
    def __init__(self, username: str, password: str = "", auth_method: str = "Basic", auth_header: str = "Authorization"):
        auth_string = f"{username}:{password}".encode("utf8")
        super().__init__(base64.b64encode(auth_string).decode("utf8"), auth_method, auth_header)
