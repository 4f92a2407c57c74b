from abc import ABC, abstractmethod
from typing import Any


class ValidationStrategy(ABC):
    """Validates a value, raising ValueError when it is not valid (CDK: validate(value) -> None)."""

    @abstractmethod
    def validate(self, value: Any) -> None:
        pass
