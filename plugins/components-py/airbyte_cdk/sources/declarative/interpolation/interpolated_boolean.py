"""InterpolatedBoolean as in the CDK: false when the result is one of FALSE_VALUES, else true."""

from dataclasses import InitVar, dataclass
from typing import Any, Final, List, Mapping

from airbyte_cdk.sources.declarative.interpolation.jinja import JinjaInterpolation
from airbyte_cdk.sources.types import Config

FALSE_VALUES: Final[List[Any]] = ["False", "false", "{}", "[]", "()", "", "0", "0.0", {}, False, None, [], (), set()]


@dataclass
class InterpolatedBoolean:
    condition: str
    parameters: InitVar[Mapping[str, Any]]

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._default = "False"
        self._interpolation = JinjaInterpolation()
        self._parameters = parameters

    def eval(self, config: Config, **additional_parameters: Any) -> bool:
        if isinstance(self.condition, bool):
            return self.condition
        evaluated = self._interpolation.eval(self.condition, config, self._default, parameters=self._parameters, **additional_parameters)
        return evaluated not in FALSE_VALUES
