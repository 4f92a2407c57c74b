from abc import abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping


@dataclass
class SchemaLoader:
    """Provides a stream's JSON schema (CDK: get_json_schema() -> Mapping)."""

    @abstractmethod
    def get_json_schema(self) -> Mapping[str, Any]:
        pass
