from airbyte_cdk.sources.declarative.interpolation.interpolated_boolean import InterpolatedBoolean
from airbyte_cdk.sources.declarative.interpolation.interpolated_mapping import InterpolatedMapping
from airbyte_cdk.sources.declarative.interpolation.interpolated_nested_mapping import InterpolatedNestedMapping
from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString

__all__ = ["InterpolatedBoolean", "InterpolatedMapping", "InterpolatedNestedMapping", "InterpolatedString"]
