"""The CDK's pydantic models of manifest components, as plain attribute views of the definition.

Custom code receives some of them (a state migration gets `declarative_stream`) and reads fields
as attributes (`declarative_stream.incremental_sync.cursor_field`, `.parameters` for $parameters).
Model names the corpus imports are defined; others resolve to the same generic model.
"""

from typing import Any, Mapping


class BaseModel:
    def __init__(self, **data: Any) -> None:
        for key, value in data.items():
            setattr(self, "parameters" if key == "$parameters" else key, _wrap(value))

    def dict(self, **kwargs: Any) -> dict:
        return {k: _unwrap(v) for k, v in self.__dict__.items()}

    def get(self, key: str, default: Any = None) -> Any:
        return getattr(self, key, default)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return None  # pydantic models have every schema field, unset ones are None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dict()!r})"


def _wrap(value: Any) -> Any:
    if isinstance(value, Mapping) and "type" in value:
        return BaseModel(**value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _unwrap(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.dict()
    if isinstance(value, list):
        return [_unwrap(v) for v in value]
    return value


class DeclarativeStream(BaseModel):
    pass


def __getattr__(name: str) -> Any:
    if name[:1].isupper():
        return type(name, (BaseModel,), {})
    raise AttributeError(name)
