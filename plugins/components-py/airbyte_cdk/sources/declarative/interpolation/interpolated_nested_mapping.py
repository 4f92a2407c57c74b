"""InterpolatedNestedMapping as in the CDK: every string at any depth is interpolated."""

from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Union

from airbyte_cdk.sources.declarative.interpolation.jinja import JinjaInterpolation
from airbyte_cdk.sources.types import Config

NestedMapping = Union[Mapping[str, Any], list, str, int, float, bool, None]


@dataclass
class InterpolatedNestedMapping:
    mapping: NestedMapping
    parameters: InitVar[Mapping[str, Any]]

    def __post_init__(self, parameters: Optional[Mapping[str, Any]]) -> None:
        self._interpolation = JinjaInterpolation()
        self._parameters = parameters

    def eval(self, config: Config, **additional_parameters: Any) -> Any:
        return self._eval(self.mapping, config, **additional_parameters)

    def _eval(self, value, config, **kwargs):
        if isinstance(value, str):
            return self._interpolation.eval(value, config, parameters=self._parameters, **kwargs)
        if isinstance(value, dict):
            return {self._eval(k, config, **kwargs): self._eval(v, config, **kwargs) for k, v in value.items()}
        if isinstance(value, list):
            return [self._eval(v, config, **kwargs) for v in value]
        return value
