from airbyte_cdk.sources.streams.http.requests_native_auth.abstract_token import AbstractHeaderAuthenticator
from airbyte_cdk.sources.streams.http.requests_native_auth.token import BasicHttpAuthenticator, TokenAuthenticator

__all__ = ["AbstractHeaderAuthenticator", "BasicHttpAuthenticator", "TokenAuthenticator"]
