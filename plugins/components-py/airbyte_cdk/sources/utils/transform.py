"""TypeTransformer as in the CDK, without jsonschema: the CDK builds a Draft 7 validator whose only
keywords are type, array, $ref, properties and items, normalizing each property value (and each
array item) before descending into it. This walk does the same in schema-key order; `$ref` is not
resolved (not supported yet) and type mismatches are not logged."""

import logging
from enum import Flag, auto
from typing import Any, Callable, Dict, Mapping, Optional

MAX_NESTING_DEPTH = 3
json_to_python_simple = {"string": str, "number": float, "integer": int, "boolean": bool, "null": type(None)}
json_to_python = {**json_to_python_simple, **{"object": dict, "array": list}}
python_to_json = {v: k for k, v in json_to_python.items()}
logger = logging.getLogger("airbyte")
_TRUTHY_STRINGS = ("y", "yes", "t", "true", "on", "1")
_FALSEY_STRINGS = ("n", "no", "f", "false", "off", "0")


def _strtobool(value: str, /) -> int:
    normalized_str = value.lower().strip()
    if normalized_str in _TRUTHY_STRINGS:
        return 1
    if normalized_str in _FALSEY_STRINGS:
        return 0
    raise ValueError(f"Invalid boolean value: {normalized_str}")


class TransformConfig(Flag):
    NoTransform = auto()
    DefaultSchemaNormalization = auto()
    CustomSchemaNormalization = auto()


class TypeTransformer:
    _custom_normalizer: Optional[Callable[[Any, Dict[str, Any]], Any]] = None

    def __init__(self, config: TransformConfig):
        if TransformConfig.NoTransform in config and config != TransformConfig.NoTransform:
            raise Exception("NoTransform option cannot be combined with other flags.")
        self._config = config

    def registerCustomTransform(self, normalization_callback: Callable[[Any, Dict[str, Any]], Any]) -> Callable:
        if TransformConfig.CustomSchemaNormalization not in self._config:
            raise Exception("Please set TransformConfig.CustomSchemaNormalization config before registering custom normalizer")
        self._custom_normalizer = normalization_callback
        return normalization_callback

    def _normalize(self, original_item: Any, subschema: Dict[str, Any]) -> Any:
        if TransformConfig.DefaultSchemaNormalization in self._config:
            original_item = self.default_convert(original_item, subschema)
        if self._custom_normalizer:
            original_item = self._custom_normalizer(original_item, subschema)
        return original_item

    @staticmethod
    def default_convert(original_item: Any, subschema: Dict[str, Any]) -> Any:
        target_type = subschema.get("type", [])
        if original_item is None and "null" in target_type:
            return None
        if isinstance(target_type, list):
            target_type = [t for t in target_type if t != "null"]
            if len(target_type) != 1:
                return original_item
            target_type = target_type[0]
        try:
            if target_type == "string":
                return str(original_item)
            elif target_type == "number":
                return float(original_item)
            elif target_type == "integer":
                return int(original_item)
            elif target_type == "boolean":
                if isinstance(original_item, str):
                    return _strtobool(original_item) == 1
                return bool(original_item)
            elif target_type == "array":
                item_types = set(subschema.get("items", {}).get("type", set()))
                if item_types.issubset(json_to_python_simple) and type(original_item) in json_to_python_simple.values():
                    return [original_item]
        except (ValueError, TypeError):
            return original_item
        return original_item

    def _walk(self, instance: Any, schema: Any) -> None:
        if not isinstance(schema, Mapping):
            return
        for key, value in schema.items():
            if key == "properties" and isinstance(instance, dict) and isinstance(value, Mapping):
                for k, subschema in value.items():
                    if k in instance:
                        instance[k] = self._normalize(instance[k], subschema)
                for k, subschema in value.items():
                    if k in instance:
                        self._walk(instance[k], subschema)
            elif key == "items" and isinstance(instance, list):
                for index, item in enumerate(instance):
                    instance[index] = self._normalize(item, value)
                if isinstance(value, list):
                    for item, subschema in zip(instance, value):
                        self._walk(item, subschema)
                else:
                    for item in instance:
                        self._walk(item, value)

    def transform(self, record: Dict[str, Any], schema: Mapping[str, Any]) -> None:
        if TransformConfig.NoTransform in self._config:
            return
        self._walk(record, schema)

    def _get_type_structure(self, input_data: Any, current_depth: int = 0) -> Any:
        if input_data is None:
            return "null"
        if current_depth >= MAX_NESTING_DEPTH:
            return "object" if isinstance(input_data, dict) else python_to_json[type(input_data)]
        if isinstance(input_data, dict):
            return {key: self._get_type_structure(v, current_depth + 1) for key, v in input_data.items()}
        return python_to_json[type(input_data)]
