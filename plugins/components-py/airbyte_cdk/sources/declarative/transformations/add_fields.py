"""AddFields as in the CDK: each field's value is interpolated (record, stream_slice in context)
and set with dpath.new; `condition` (with value and path in context) gates each field."""

from dataclasses import InitVar, dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Type, Union

import dpath

from airbyte_cdk.sources.declarative.interpolation.interpolated_boolean import InterpolatedBoolean
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.transformations.transformation import RecordTransformation
from airbyte_cdk.sources.types import Config, FieldPointer, StreamSlice, StreamState


@dataclass(frozen=True)
class AddedFieldDefinition:
    path: FieldPointer
    value: Union[InterpolatedString, str]
    value_type: Optional[Type[Any]]
    parameters: InitVar[Mapping[str, Any]]


@dataclass(frozen=True)
class ParsedAddFieldDefinition:
    path: FieldPointer
    value: InterpolatedString
    value_type: Optional[Type[Any]]
    parameters: InitVar[Mapping[str, Any]]


@dataclass
class AddFields(RecordTransformation):
    fields: List[AddedFieldDefinition]
    parameters: InitVar[Mapping[str, Any]]
    condition: str = ""
    _parsed_fields: List[ParsedAddFieldDefinition] = field(init=False, repr=False, default_factory=list)

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._filter_interpolator = InterpolatedBoolean(condition=self.condition, parameters=parameters)
        for add_field in self.fields:
            if len(add_field.path) < 1:
                raise ValueError(f"Expected a non-zero-length path for the AddFields transformation {add_field}")
            if isinstance(add_field.value, InterpolatedString):
                self._parsed_fields.append(ParsedAddFieldDefinition(add_field.path, add_field.value, value_type=add_field.value_type, parameters={}))
            elif isinstance(add_field.value, str):
                self._parsed_fields.append(ParsedAddFieldDefinition(
                    add_field.path, InterpolatedString.create(add_field.value, parameters=parameters),
                    value_type=add_field.value_type, parameters=parameters))
            else:
                raise ValueError(f"Expected a string value for the AddFields transformation: {add_field}")

    def transform(self, record: Dict[str, Any], config: Optional[Config] = None,
                  stream_state: Optional[StreamState] = None, stream_slice: Optional[StreamSlice] = None) -> None:
        if config is None:
            config = {}
        kwargs = {"record": record, "stream_slice": stream_slice}
        for parsed_field in self._parsed_fields:
            valid_types = (parsed_field.value_type,) if parsed_field.value_type else None
            value = parsed_field.value.eval(config, valid_types=valid_types, **kwargs)
            if not self.condition or self._filter_interpolator.eval(config, value=value, path=parsed_field.path, **kwargs):
                dpath.new(record, parsed_field.path, value)

    def __eq__(self, other: Any) -> bool:
        return bool(self.__dict__ == other.__dict__)
