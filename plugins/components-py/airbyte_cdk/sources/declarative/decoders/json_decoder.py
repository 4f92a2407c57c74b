"""JsonDecoder as in the CDK: a JSON list yields its items, an object yields itself; an empty or
unparseable body yields one {} (the CDK swallows the parse error the same way)."""

import json
from typing import Any, Generator, Mapping, MutableMapping

import requests

from airbyte_cdk.sources.declarative.decoders.decoder import Decoder


def parse_json_body(raw: bytes, encoding: str = "utf-8"):
    """The CDK's JsonParser: list -> items, anything else -> [it]; unparseable -> error."""
    body = json.loads(raw.decode(encoding))
    return body if isinstance(body, list) else [body]


class JsonDecoder(Decoder):
    # Hashable so it can be a dataclass field default (pipedrive's components.py does that; CDK
    # 7.x's JsonDecoder inherits __hash__ = None from the Decoder dataclass and refuses it).
    __hash__ = object.__hash__

    def __init__(self, parameters: Mapping[str, Any]):
        self._parameters = parameters

    def is_stream_response(self) -> bool:
        return False

    def decode(self, response: requests.Response) -> Generator[MutableMapping[str, Any], None, None]:
        has_yielded = False
        try:
            for element in parse_json_body(response.content):
                yield element
                has_yielded = True
        except Exception:
            yield {}
        if not has_yielded:
            yield {}
