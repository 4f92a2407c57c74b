"""The one entry point the host calls: call(component, method, args) with JSON in and out.

Handle 0 is the dispatcher itself ("load", "create", "refuse", "drop", "handles"); other handles
are custom components made by "create". Each component method takes a whole page or batch, so
the engine crosses into Python once per page, not once per record. See README.md for the API.
"""

import importlib
import json
import sys
from typing import Any, Callable, Dict, List, Mapping, Optional

import requests

from sluice_components import codec
from sluice_components.errors import ComponentError, bad_request, from_exception
from sluice_components.factory import Factory


def _state(args):
    return args.get("stream_state") or {}


class Dispatcher:
    def __init__(self) -> None:
        self.components: Dict[int, Any] = {}
        self.kinds: Dict[int, str] = {}
        self.next_handle = 1
        self.refused: Dict[str, str] = {}
        self.factory = Factory(self.refused)
        self.custom_files: List[str] = []
        self.modules: Dict[str, Any] = {}

    # ------------------------------------------------------------------ the boundary
    def call(self, component: int, method: str, args: str) -> str:
        """JSON string in, JSON string out; raises ComponentError (its .to_json() for the host)."""
        try:
            parsed = json.loads(args) if args else {}
        except json.JSONDecodeError as e:
            raise bad_request(f"args are not JSON: {e}", method)
        if not isinstance(parsed, dict):
            raise bad_request("args must be a JSON object", method)
        if component == 0:
            handler = getattr(self, "op_" + method, None)
            if handler is None:
                raise bad_request(f"unknown dispatcher method {method!r}", method)
            return codec.dumps(handler(parsed))
        obj = self.components.get(component)
        if obj is None:
            raise bad_request(f"no component with handle {component}", method)
        handler = METHODS.get(method)
        if handler is None:
            raise bad_request(f"unknown component method {method!r}", method)
        try:
            return codec.dumps(handler(obj, parsed))
        except ComponentError:
            raise
        except Exception as exc:
            raise from_exception(exc, type(obj).__name__, method, self.custom_files)

    # ------------------------------------------------------------------ handle 0
    def op_load(self, args: Mapping[str, Any]) -> Any:
        """Import the components module (by name, or from source text) as the CDK registers it:
        under its own name, `components` and `source_declarative_manifest.components`."""
        name = args.get("module", "components")
        try:
            if "source" in args:
                module = _module_from_source(name, args["source"], args.get("filename", f"{name}.py"))
            else:
                module = importlib.import_module(name)
        except Exception as exc:
            raise from_exception(exc, None, "load", [args.get("filename", f"{name}.py")] + self.custom_files)
        sys.modules.setdefault("components", module)
        sys.modules.setdefault("source_declarative_manifest.components", module)
        if "source_declarative_manifest" not in sys.modules:
            import types

            pkg = types.ModuleType("source_declarative_manifest")
            pkg.__path__ = []
            pkg.components = module
            sys.modules["source_declarative_manifest"] = pkg
        self.custom_files.append(getattr(module, "__file__", None) or args.get("filename", f"{name}.py"))
        self.modules[name] = module
        classes = sorted(k for k, v in vars(module).items() if isinstance(v, type) and v.__module__ == module.__name__)
        return {"module": name, "classes": classes}

    def op_refuse(self, args: Mapping[str, Any]) -> Any:
        """Refuse a class by name, with the reason (e.g. it needs a native extension)."""
        self.refused[args["class"]] = args["reason"]
        return {"refused": sorted(self.refused)}

    def op_create(self, args: Mapping[str, Any]) -> Any:
        """Build a custom component from its manifest definition (type, class_name, fields, $parameters)."""
        definition = args.get("definition")
        if not isinstance(definition, Mapping) or "class_name" not in definition:
            raise bad_request("create needs a definition with class_name", "create")
        config = args.get("config") or {}
        extra = {k: self.factory.create(v, config) if self.factory.is_component(v) else v for k, v in (args.get("kwargs") or {}).items()}
        class_name = definition["class_name"].rsplit(".", 1)[-1]
        try:
            obj = self.factory.create(definition, config, args.get("parent_parameters") or {}, **extra)
        except ComponentError:
            raise
        except Exception as exc:
            raise from_exception(exc, class_name, "__init__", self.custom_files)
        handle = self.next_handle
        self.next_handle += 1
        self.components[handle] = obj
        self.kinds[handle] = definition.get("type", "")
        return {"handle": handle, "class": type(obj).__name__, "type": definition.get("type")}

    def op_drop(self, args: Mapping[str, Any]) -> Any:
        self.components.pop(args["handle"], None)
        self.kinds.pop(args["handle"], None)
        return {}

    def op_handles(self, args: Mapping[str, Any]) -> Any:
        return {"handles": {str(h): {"class": type(o).__name__, "type": self.kinds[h]} for h, o in self.components.items()}}


def _module_from_source(name: str, source: str, filename: str):
    import types

    module = types.ModuleType(name)
    module.__file__ = filename
    sys.modules[name] = module
    try:
        exec(compile(source, filename, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


# ---------------------------------------------------------------------- component methods
# Each takes the component and the parsed args and returns something JSON can carry. Batches:
# records in, records out; one response in, all its records out.


def _transform(obj, args):
    """RecordTransformation.transform over a batch: each record edited in place, as the CDK does."""
    config = args.get("config") or getattr(obj, "config", None) or {}
    stream_slice = codec.slice_from_json(args.get("stream_slice"))
    records = args.get("records", [])
    for record in records:
        obj.transform(record, config=config, stream_state=_state(args), stream_slice=stream_slice)
    return {"records": records}


def _filter_records(obj, args):
    stream_slice = codec.slice_from_json(args.get("stream_slice"))
    kept = obj.filter_records(args.get("records", []), stream_state=_state(args), stream_slice=stream_slice, next_page_token=args.get("next_page_token"))
    return {"records": list(kept)}


def _extract_records(obj, args):
    return {"records": list(obj.extract_records(codec.response_from_json(args["response"])))}


def _decode(obj, args):
    return {"items": list(obj.decode(codec.response_from_json(args["response"])))}


def _response_or_exception(args):
    if "response" in args:
        return codec.response_from_json(args["response"])
    exc = args.get("exception") or {}
    cls = getattr(requests.exceptions, exc.get("type", "RequestException"), requests.exceptions.RequestException)
    return cls(exc.get("message", ""))


def _interpret_response(obj, args):
    resolution = obj.interpret_response(_response_or_exception(args))
    return {
        "response_action": resolution.response_action.value if resolution.response_action else None,
        "failure_type": resolution.failure_type.value if resolution.failure_type else None,
        "error_message": resolution.error_message,
    }


def _backoff_time(obj, args):
    return {"seconds": obj.backoff_time(_response_or_exception(args), attempt_count=args.get("attempt_count", 0))}


def _should_migrate(obj, args):
    return {"should_migrate": bool(obj.should_migrate(args.get("state") or {}))}


def _migrate(obj, args):
    state = args.get("state") or {}
    if args.get("check", True) and not obj.should_migrate(state):
        return {"migrated": False, "state": state}
    return {"migrated": True, "state": obj.migrate(state)}


def _get_json_schema(obj, args):
    return {"schema": obj.get_json_schema()}


def _next_page_token(obj, args):
    token = obj.next_page_token(codec.response_from_json(args["response"]), args.get("last_page_size", 0),
                                args.get("last_record"), args.get("last_page_token_value"))
    return {"token": token}


def _initial_token(obj, args):
    return {"token": obj.initial_token}


def _request_option(getter: str) -> Callable:
    def call(obj, args):
        kwargs = {}
        if getter in ("get_request_params", "get_request_headers", "get_request_body_data", "get_request_body_json") and not _is_authenticator(obj):
            kwargs = {"stream_state": _state(args), "stream_slice": codec.slice_from_json(args.get("stream_slice")), "next_page_token": args.get("next_page_token")}
        return {"value": getattr(obj, getter)(**kwargs)}

    return call


def _is_authenticator(obj) -> bool:
    from airbyte_cdk.sources.declarative.auth.declarative_authenticator import DeclarativeAuthenticator

    return isinstance(obj, DeclarativeAuthenticator)


def _get_auth_header(obj, args):
    return {"headers": dict(obj.get_auth_header())}


def _stream_slices(obj, args):
    """PartitionRouter.stream_slices; a SubstreamPartitionRouter's subclass gets the slices its base
    class makes (the engine read the parents) as `parent_slices`, for its super().stream_slices()."""
    if args.get("parent_slices") is not None:
        obj._sluice_parent_slices = [codec.slice_from_json(s) for s in args["parent_slices"]]
    return {"slices": [codec.slice_to_json(s) for s in obj.stream_slices()]}


def _transform_config(obj, args):
    config = dict(args.get("config") or {})
    obj.transform(config)
    return {"config": config}


def _validate(obj, args):
    obj.validate(args.get("value"))
    return {"valid": True}


def _normalize(obj, args):
    """Schema normalization (a custom TypeTransformer) over a batch of records."""
    records = args.get("records", [])
    for record in records:
        obj.transform(record, args.get("schema") or {})
    return {"records": records}


def _invoke(obj, args):
    """Any other method with JSON arguments, for kinds not listed here yet."""
    name = args.get("name", "")
    if name.startswith("_"):
        raise bad_request("invoke cannot call private methods", "invoke")
    result = getattr(obj, name)(*args.get("args", []), **args.get("kwargs", {}))
    return {"result": result}


METHODS: Dict[str, Callable[[Any, Mapping[str, Any]], Any]] = {
    "transform": _transform,
    "filter_records": _filter_records,
    "extract_records": _extract_records,
    "decode": _decode,
    "interpret_response": _interpret_response,
    "backoff_time": _backoff_time,
    "should_migrate": _should_migrate,
    "migrate": _migrate,
    "get_json_schema": _get_json_schema,
    "next_page_token": _next_page_token,
    "initial_token": _initial_token,
    "get_request_params": _request_option("get_request_params"),
    "get_request_headers": _request_option("get_request_headers"),
    "get_request_body_data": _request_option("get_request_body_data"),
    "get_request_body_json": _request_option("get_request_body_json"),
    "get_auth_header": _get_auth_header,
    "stream_slices": _stream_slices,
    "transform_config": _transform_config,
    "validate": _validate,
    "normalize": _normalize,
    "invoke": _invoke,
}
