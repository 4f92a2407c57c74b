from abc import ABC, abstractmethod
from typing import Any, MutableMapping


class ConfigTransformation(ABC):
    """Edits the config in place before the source uses it (CDK: transform(config) -> None)."""

    @abstractmethod
    def transform(self, config: MutableMapping[str, Any]) -> None:
        pass
