from abc import ABC, abstractmethod
from typing import Optional

import requests


class ErrorMessageParser(ABC):
    @abstractmethod
    def parse_response_error_message(self, response: requests.Response) -> Optional[str]:
        pass
