from dataclasses import InitVar, dataclass
from typing import Any, Mapping

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.schema.schema_loader import SchemaLoader
from airbyte_cdk.sources.types import Config


@dataclass
class JsonFileSchemaLoader(SchemaLoader):
    """The CDK reads schemas/<stream>.json from the connector package; the sandbox has no files."""

    config: Config
    parameters: InitVar[Mapping[str, Any]]
    file_path: str = ""

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._parameters = parameters

    def get_json_schema(self) -> Mapping[str, Any]:
        raise unsupported("JsonFileSchemaLoader (schema files from the connector package)")
