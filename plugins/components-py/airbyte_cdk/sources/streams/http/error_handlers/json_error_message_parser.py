"""JsonErrorMessageParser as in the CDK: the first of message/error/errors/... found, lists joined."""

from typing import Optional

import requests

from airbyte_cdk.sources.streams.http.error_handlers.error_message_parser import ErrorMessageParser

_KEYS = ("message", "messages", "error", "errors", "failures", "failure", "detail", "err", "error_message", "msg", "reason", "status_message")


class JsonErrorMessageParser(ErrorMessageParser):
    def _try_get_error(self, value) -> Optional[str]:
        if isinstance(value, str):
            return value
        if isinstance(value, list):
            errors = [self._try_get_error(v) for v in value]
            return ", ".join(v for v in errors if v is not None)
        if isinstance(value, dict):
            new_value = None
            for k in _KEYS:
                new_value = new_value or value.get(k)
            return self._try_get_error(new_value)
        return None

    def parse_response_error_message(self, response: requests.Response) -> Optional[str]:
        try:
            return self._try_get_error(response.json())
        except requests.exceptions.JSONDecodeError:
            try:
                return response.content.decode("utf-8")
            except Exception:
                return None
