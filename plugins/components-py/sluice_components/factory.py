"""Building components from manifest definitions, the way the CDK's ModelToComponentFactory does.

create_custom_component (CDK): resolve `class_name` (source_declarative_manifest.components.X or
components.X), take the definition's fields plus `config` (and `parameters` from `$parameters`),
build nested components first, then pass only the keys that are type hints of the class.
$parameters follow ManifestComponentTransformer: a parent's parameters flow to children, the
child's own win, and each parameter also fills the same-named field when that field is empty.
Nested non-custom components are built from this package's versions of the CDK classes; a type
this package does not build stays an UnbuiltComponent that names itself when used.
"""

import copy
import importlib
import sys
import typing
from typing import Any, Dict, Mapping, Optional

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.models.declarative_component_schema import BaseModel

PARAMETERS = "$parameters"
# Types whose nested definitions are built only when custom code uses them as models (the CDK
# passes pydantic models for these when they are not components; e.g. a state migration's stream).
MODEL_TYPES = {"DeclarativeStream"}


class UnbuiltComponent:
    """A declarative component this package does not construct; its fields read as attributes."""

    def __init__(self, type_name: str, definition: Mapping[str, Any]):
        self._type = type_name
        self._definition = definition

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        if name in self._definition:
            return self._definition[name]
        raise unsupported(f"{self._type}.{name} (a declarative {self._type} built inside custom code)")

    def get(self, key: str, default: Any = None) -> Any:
        return self._definition.get(key, default)

    def __repr__(self) -> str:
        return f"UnbuiltComponent({self._type})"


def propagate_parameters(definition: Mapping[str, Any], parent_parameters: Mapping[str, Any]) -> Dict[str, Any]:
    """ManifestComponentTransformer's parameter rule for one component (children get theirs when built)."""
    component = copy.deepcopy(dict(definition))
    own = component.pop(PARAMETERS, {}) or {}
    parameters = {**parent_parameters, **own}
    if "type" in component or "class_name" in component:
        for key, value in parameters.items():
            component[key] = component.get(key) or value
    component[PARAMETERS] = parameters
    return component


def resolve_class(class_name: str):
    """importlib the module part, getattr the class part; source_declarative_manifest.X falls back to X."""
    module_name, _, attr = class_name.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if module_name.startswith("source_declarative_manifest."):
            module = importlib.import_module(module_name[len("source_declarative_manifest."):])
        else:
            raise ValueError(f"Could not load module `{module_name}`.") from e
    try:
        return getattr(module, attr)
    except AttributeError as e:
        raise ValueError(f"Could not load class `{attr}` from module `{module_name}`.") from e


def type_hints(cls) -> Dict[str, Any]:
    """typing.get_type_hints(cls), as the CDK; names that do not resolve still count as fields."""
    try:
        return typing.get_type_hints(cls)
    except Exception:
        hints: Dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            hints.update(getattr(klass, "__annotations__", {}) or {})
        return hints


class Factory:
    def __init__(self, refused: Optional[Dict[str, str]] = None):
        self.refused = refused if refused is not None else {}

    def is_component(self, value: Any) -> bool:
        return isinstance(value, Mapping) and ("type" in value or "class_name" in value)

    def create(self, definition: Mapping[str, Any], config: Mapping[str, Any], parent_parameters: Mapping[str, Any] = None, **kwargs: Any) -> Any:
        component = propagate_parameters(definition, parent_parameters or {})
        type_name = component.get("type", "")
        if "class_name" in component:
            return self.create_custom(component, config, **kwargs)
        builder = BUILTINS.get(type_name)
        if type_name in MODEL_TYPES:
            return BaseModel(**component)
        if builder is None:
            return UnbuiltComponent(type_name, component)
        return builder(self, component, config)

    def create_custom(self, component: Dict[str, Any], config: Mapping[str, Any], **kwargs: Any) -> Any:
        class_name = component["class_name"]
        short = class_name.rsplit(".", 1)[-1]
        for name in (class_name, short):
            if name in self.refused:
                from sluice_components.errors import refused

                raise refused(short, self.refused[name])
        cls = resolve_class(class_name)
        fields = type_hints(cls)
        parameters = component.get(PARAMETERS, {})
        model_args = {k: v for k, v in component.items() if k not in ("type", "class_name", PARAMETERS)}
        model_args["parameters"] = parameters
        model_args["config"] = config
        model_args.update(kwargs)
        for key, value in list(model_args.items()):
            if key in ("config", "parameters") or key in kwargs:
                continue
            model_args[key] = self._nested(key, value, config, parameters)
        args = {k: model_args[k] for k in fields if k in model_args}
        return cls(**args)

    def _nested(self, field: str, value: Any, config: Mapping[str, Any], parameters: Mapping[str, Any]) -> Any:
        # a parameter named like the field is not passed down into it (the CDK avoids the cycle)
        child_parameters = {k: v for k, v in parameters.items() if k != field}
        if self.is_component(value):
            return self.create(value, config, child_parameters)
        if isinstance(value, list):
            return [self.create(v, config, child_parameters) if self.is_component(v) else v for v in value]
        return value

    def build(self, cls, component: Mapping[str, Any], config: Mapping[str, Any], renames: Mapping[str, str] = None, **extra: Any) -> Any:
        """Construct one of this package's CDK classes from a definition: fields by type hints."""
        parameters = component.get(PARAMETERS, {})
        values = {}
        for key, value in component.items():
            if key in ("type", PARAMETERS):
                continue
            values[(renames or {}).get(key, key)] = self._nested(key, value, config, parameters)
        values.update(extra)
        values["config"] = config
        values["parameters"] = parameters
        hints = type_hints(cls)
        return cls(**{k: v for k, v in values.items() if k in hints})


def _simple(path: str, class_name: str, **renames: str):
    def builder(factory: Factory, component, config):
        cls = getattr(importlib.import_module(path), class_name)
        return factory.build(cls, component, config, renames)

    return builder


def _bearer(factory, component, config):
    from airbyte_cdk.sources.declarative.auth.token import BearerAuthenticator
    from airbyte_cdk.sources.declarative.auth.token_provider import InterpolatedStringTokenProvider

    provider = InterpolatedStringTokenProvider(config=config, api_token=component.get("api_token", ""), parameters=component.get(PARAMETERS, {}))
    return BearerAuthenticator(token_provider=provider, config=config, parameters=component.get(PARAMETERS, {}))


def _api_key(factory, component, config):
    from airbyte_cdk.sources.declarative.auth.token import ApiKeyAuthenticator
    from airbyte_cdk.sources.declarative.auth.token_provider import InterpolatedStringTokenProvider
    from airbyte_cdk.sources.declarative.requesters.request_option import RequestOption

    parameters = component.get(PARAMETERS, {})
    option = component.get("inject_into") or {"inject_into": "header", "field_name": component.get("header", "")}
    request_option = RequestOption(inject_into=option["inject_into"], field_name=option.get("field_name"), field_path=option.get("field_path"), parameters=parameters)
    provider = InterpolatedStringTokenProvider(config=config, api_token=component.get("api_token", ""), parameters=parameters)
    return ApiKeyAuthenticator(request_option=request_option, token_provider=provider, config=config, parameters=parameters)


def _add_fields(factory, component, config):
    from airbyte_cdk.sources.declarative.transformations.add_fields import AddedFieldDefinition, AddFields

    parameters = component.get(PARAMETERS, {})
    types = {"string": str, "number": float, "integer": int, "boolean": bool}
    fields = [AddedFieldDefinition(path=f["path"], value=f["value"], value_type=types.get(f.get("value_type")), parameters=parameters)
              for f in component.get("fields", [])]
    return AddFields(fields=fields, condition=component.get("condition", ""), parameters=parameters)


def _response_filter(factory, component, config):
    from airbyte_cdk.sources.declarative.requesters.error_handlers.http_response_filter import HttpResponseFilter

    component = dict(component)
    if component.get("http_codes") is not None:
        component["http_codes"] = set(component["http_codes"])
    return factory.build(HttpResponseFilter, component, config)


_D = "airbyte_cdk.sources.declarative."
BUILTINS = {
    "DpathExtractor": _simple(_D + "extractors.dpath_extractor", "DpathExtractor"),
    "RecordFilter": _simple(_D + "extractors.record_filter", "RecordFilter"),
    "RecordSelector": _simple(_D + "extractors.record_selector", "RecordSelector"),
    "JsonDecoder": lambda f, c, config: importlib.import_module(_D + "decoders.json_decoder").JsonDecoder(parameters=c.get(PARAMETERS, {})),
    "AddFields": _add_fields,
    "InlineSchemaLoader": _simple(_D + "schema.inline_schema_loader", "InlineSchemaLoader"),
    "JsonFileSchemaLoader": _simple(_D + "schema.json_file_schema_loader", "JsonFileSchemaLoader"),
    "RequestOption": _simple(_D + "requesters.request_option", "RequestOption"),
    "HttpResponseFilter": _response_filter,
    "DefaultErrorHandler": _simple(_D + "requesters.error_handlers.default_error_handler", "DefaultErrorHandler"),
    "WaitTimeFromHeader": _simple(_D + "requesters.error_handlers.backoff_strategies.wait_time_from_header_backoff_strategy", "WaitTimeFromHeaderBackoffStrategy"),
    "ExponentialBackoffStrategy": _simple(_D + "requesters.error_handlers.backoff_strategies.exponential_backoff_strategy", "ExponentialBackoffStrategy"),
    "NoAuth": lambda f, c, config: importlib.import_module(_D + "auth.declarative_authenticator").NoAuth(parameters=c.get(PARAMETERS, {})),
    "BasicHttpAuthenticator": _simple(_D + "auth.token", "BasicHttpAuthenticator"),
    "BearerAuthenticator": _bearer,
    "ApiKeyAuthenticator": _api_key,
    "OAuthAuthenticator": _simple(_D + "auth.oauth", "DeclarativeOauth2Authenticator"),
    "SelectiveAuthenticator": _simple(_D + "auth.selective_authenticator", "SelectiveAuthenticator"),
    "SinglePartitionRouter": lambda f, c, config: importlib.import_module(_D + "partition_routers.single_partition_router").SinglePartitionRouter(parameters=c.get(PARAMETERS, {})),
    "ListPartitionRouter": _simple(_D + "partition_routers.list_partition_router", "ListPartitionRouter"),
    "ParentStreamConfig": _simple(_D + "partition_routers.substream_partition_router", "ParentStreamConfig"),
    "SubstreamPartitionRouter": _simple(_D + "partition_routers.substream_partition_router", "SubstreamPartitionRouter"),
    "PageIncrement": _simple(_D + "requesters.paginators.strategies.page_increment", "PageIncrement"),
    "HttpRequester": _simple(_D + "requesters.http_requester", "HttpRequester"),
}

__all__ = ["BUILTINS", "Factory", "UnbuiltComponent", "propagate_parameters", "resolve_class", "sys"]
