from abc import abstractmethod
from typing import Any, Mapping

from requests.auth import AuthBase


class AbstractHeaderAuthenticator(AuthBase):
    """An auth that sets one header: auth_header: token (CDK behaviour: __call__ updates headers)."""

    def __call__(self, request):
        request.headers.update(self.get_auth_header())
        return request

    def get_auth_header(self) -> Mapping[str, Any]:
        return {self.auth_header: self.token} if self.auth_header else {}

    @property
    @abstractmethod
    def auth_header(self) -> str:
        pass

    @property
    @abstractmethod
    def token(self) -> str:
        pass
