from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Generator, MutableMapping

import requests

DECODER_OUTPUT_TYPE = Generator[MutableMapping[str, Any], None, None]


@dataclass
class Decoder:
    """Turns a response into mappings (CDK: is_stream_response(), decode(response))."""

    @abstractmethod
    def is_stream_response(self) -> bool:
        pass

    @abstractmethod
    def decode(self, response: requests.Response) -> DECODER_OUTPUT_TYPE:
        pass
