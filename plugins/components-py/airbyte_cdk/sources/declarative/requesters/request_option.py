"""RequestOption as in the CDK: where to put a value (parameter, header, form or JSON body)."""

from dataclasses import InitVar, dataclass
from enum import Enum
from typing import Any, List, Mapping, MutableMapping, Optional, Union

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.types import Config


class RequestOptionType(Enum):
    request_parameter = "request_parameter"
    header = "header"
    body_data = "body_data"
    body_json = "body_json"


@dataclass
class RequestOption:
    inject_into: RequestOptionType
    parameters: InitVar[Mapping[str, Any]]
    field_name: Optional[Union[InterpolatedString, str]] = None
    field_path: Optional[List[Union[InterpolatedString, str]]] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        if isinstance(self.inject_into, str):
            self.inject_into = RequestOptionType(self.inject_into)
        if self.field_name is None and self.field_path is None:
            raise ValueError("RequestOption requires either a field_name or field_path")
        if self.field_name is not None and self.field_path is not None:
            raise ValueError("Only one of field_name or field_path can be provided to RequestOption")
        if self.field_path is not None and self.inject_into != RequestOptionType.body_json:
            raise ValueError("Nested field injection is only supported for body JSON injection. Please use a top-level field_name for other injection types.")
        if self.field_name is not None:
            self.field_name = InterpolatedString.create(self.field_name, parameters=parameters)
        else:
            self.field_path = [InterpolatedString.create(s, parameters=parameters) for s in self.field_path]

    @property
    def _is_field_path(self) -> bool:
        return self.field_path is not None

    def inject_into_request(self, target: MutableMapping[str, Any], value: Any, config: Config) -> None:
        if self._is_field_path:
            current = target
            *parts, final_key = [str(s.eval(config=config) if isinstance(s, InterpolatedString) else s) for s in self.field_path]
            for part in parts:
                current = current.setdefault(part, {})
            current[final_key] = value
        else:
            key = self.field_name.eval(config=config) if isinstance(self.field_name, InterpolatedString) else self.field_name
            target[str(key)] = value
