"""InterpolatedString as in the CDK: default falls back to the string itself; create() wraps str."""

from dataclasses import InitVar, dataclass
from typing import Any, Mapping, Optional, Union

from airbyte_cdk.sources.declarative.interpolation.jinja import JinjaInterpolation
from airbyte_cdk.sources.types import Config


@dataclass
class InterpolatedString:
    string: str
    parameters: InitVar[Mapping[str, Any]]
    default: Optional[str] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self.default = self.default or self.string
        self._interpolation = JinjaInterpolation()
        self._parameters = parameters
        self._is_plain_string = None

    def eval(self, config: Config, **kwargs: Any) -> Any:
        if self._is_plain_string:
            return self.string
        evaluated = self._interpolation.eval(self.string, config, self.default, parameters=self._parameters, **kwargs)
        if self._is_plain_string is None:
            self._is_plain_string = self.string == evaluated
        return evaluated

    def __eq__(self, other: Any) -> bool:
        if not isinstance(other, InterpolatedString):
            return False
        return self.string == other.string and self.default == other.default

    @classmethod
    def create(cls, string_or_interpolated: Union["InterpolatedString", str], *, parameters: Mapping[str, Any]) -> "InterpolatedString":
        if isinstance(string_or_interpolated, str):
            return InterpolatedString(string=string_or_interpolated, parameters=parameters)
        return string_or_interpolated
