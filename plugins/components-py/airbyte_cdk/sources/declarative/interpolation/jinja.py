"""A small Jinja subset for interpolated strings, following airbyte_cdk's JinjaInterpolation.eval.

Supported: text with `{{ expression }}` parts, where an expression is a name from the context
(config, parameters, record, stream_slice, next_page_token, ... plus the aliases stream_interval and
stream_partition), attribute and item access, literals, `and`/`or`/`not`, comparisons, `in`,
arithmetic, `x if c else y` and method calls on values (`config.get('a')`, `"a".split()`). As in
the CDK: an undefined value renders as "", an empty result falls back to the default, the result
is passed through ast.literal_eval (so "5" becomes 5), and `stream_state` is refused.
Not yet: `{% %}` statements, filters (`|`), tests (`is`), `~`, and the CDK's macros (now_utc,
format_datetime, ...): each raises NotImplementedError naming what is missing.
"""

import ast
import operator
from typing import Any, Mapping, Optional, Tuple, Type

_ALIASES = {"stream_interval": "stream_slice", "stream_partition": "stream_slice"}
_UNSUPPORTED_VARIABLES = {
    "stream_state": "`stream_state` is no longer supported for interpolation. We recommend using `stream_interval` instead. Please reference the CDK Migration Guide for more information.",
}
_CDK_MACROS = {
    "now_utc", "today_utc", "timestamp", "max", "min", "day_delta", "duration", "format_datetime",
    "today_with_timezone", "str_to_datetime", "sanitize_url", "camel_case_to_snake_case", "generate_uuid",
}


class UndefinedError(Exception):
    """Jinja's UndefinedError: an undefined value was used as more than a string."""


class Undefined:
    """Jinja's default Undefined: renders as "", is falsy, fails when looked into."""

    def __init__(self, name):
        self._name = name

    def __str__(self):
        return ""

    def __bool__(self):
        return False

    def __iter__(self):
        return iter(())

    def __len__(self):
        return 0

    def __eq__(self, other):
        return isinstance(other, Undefined)

    def __hash__(self):
        return 0


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
           ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow}
_CMPOPS = {ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
           ast.Gt: operator.gt, ast.GtE: operator.ge, ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b}
_CONSTANTS = {"true": True, "True": True, "false": False, "False": False, "none": None, "None": None}


def _getattr(obj, name):
    # jinja2 Environment.getattr: attribute first, then item; the sandbox hides underscore names
    if isinstance(obj, Undefined):
        raise UndefinedError(f"{obj._name!r} is undefined")
    if not name.startswith("_"):
        try:
            return getattr(obj, name)
        except AttributeError:
            pass
    try:
        return obj[name]
    except (TypeError, LookupError):
        return Undefined(name)


def _getitem(obj, key):
    # jinja2 Environment.getitem: item first, then attribute for string keys
    if isinstance(obj, Undefined):
        raise UndefinedError(f"{obj._name!r} is undefined")
    try:
        return obj[key]
    except (AttributeError, TypeError, LookupError):
        if isinstance(key, str) and not key.startswith("_"):
            try:
                return getattr(obj, key)
            except AttributeError:
                pass
        return Undefined(str(key))


class _Evaluator:
    def __init__(self, context, source):
        self.context = context
        self.source = source

    def eval(self, node):
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise NotImplementedError(f"interpolation: {type(node).__name__} in {{{{ {self.source} }}}} is not supported yet")
        return method(node)

    def _Expression(self, n):
        return self.eval(n.body)

    def _Constant(self, n):
        return n.value

    def _Name(self, n):
        if n.id in self.context:
            return self.context[n.id]
        if n.id in _CONSTANTS:
            return _CONSTANTS[n.id]
        if n.id in _CDK_MACROS:
            raise NotImplementedError(f"interpolation: the CDK macro {n.id}() is not supported yet")
        raise ValueError(f"Jinja macro has undeclared variables: {{'{n.id}'}}. Context: {self.context}")

    def _Attribute(self, n):
        return _getattr(self.eval(n.value), n.attr)

    def _Subscript(self, n):
        return _getitem(self.eval(n.value), self.eval(n.slice))

    def _Slice(self, n):
        return slice(*(self.eval(x) if x is not None else None for x in (n.lower, n.upper, n.step)))

    def _BoolOp(self, n):
        value = None
        for v in n.values:
            value = self.eval(v)
            if isinstance(n.op, ast.And) and not value:
                return value
            if isinstance(n.op, ast.Or) and value:
                return value
        return value

    def _UnaryOp(self, n):
        v = self.eval(n.operand)
        if isinstance(n.op, ast.Not):
            return not v
        if isinstance(n.op, ast.USub):
            return -v
        if isinstance(n.op, ast.UAdd):
            return +v
        raise NotImplementedError(f"interpolation: the operator ~ in {{{{ {self.source} }}}} is not supported yet")

    def _BinOp(self, n):
        if isinstance(n.op, ast.BitOr):
            raise NotImplementedError(f"interpolation: Jinja filters (|) in {{{{ {self.source} }}}} are not supported yet")
        op = _BINOPS.get(type(n.op))
        if op is None:
            raise NotImplementedError(f"interpolation: operator {type(n.op).__name__} is not supported yet")
        return op(self.eval(n.left), self.eval(n.right))

    def _Compare(self, n):
        left = self.eval(n.left)
        for op, comp in zip(n.ops, n.comparators):
            if type(op) not in _CMPOPS:
                raise NotImplementedError(f"interpolation: Jinja tests (is ...) in {{{{ {self.source} }}}} are not supported yet")
            right = self.eval(comp)
            if not _CMPOPS[type(op)](left, right):
                return False
            left = right
        return True

    def _IfExp(self, n):
        return self.eval(n.body) if self.eval(n.test) else self.eval(n.orelse)

    def _List(self, n):
        return [self.eval(e) for e in n.elts]

    def _Tuple(self, n):
        return tuple(self.eval(e) for e in n.elts)

    def _Dict(self, n):
        return {self.eval(k): self.eval(v) for k, v in zip(n.keys, n.values)}

    def _Call(self, n):
        if isinstance(n.func, ast.Name):
            raise NotImplementedError(f"interpolation: the CDK macro {n.func.id}() is not supported yet")
        fn = self.eval(n.func)
        if isinstance(fn, Undefined) or not callable(fn):
            raise UndefinedError(f"{ast.unparse(n.func)} is not callable")
        args = [self.eval(a) for a in n.args]
        kwargs = {k.arg: self.eval(k.value) for k in n.keywords}
        return fn(*args, **kwargs)


def _render_value(value):
    if isinstance(value, Undefined):
        return ""
    return str(value)


def render(template: str, context: Mapping[str, Any]) -> str:
    """Render `text {{ expr }} text` against context."""
    if "{%" in template or "{#" in template:
        raise NotImplementedError(f"interpolation: Jinja statements ({{% %}}) are not supported yet: {template!r}")
    out = []
    pos = 0
    while True:
        start = template.find("{{", pos)
        if start < 0:
            out.append(template[pos:])
            break
        end = template.find("}}", start + 2)
        if end < 0:
            raise ValueError(f"unterminated '{{{{' in {template!r}")
        out.append(template[pos:start])
        source = template[start + 2:end].strip()
        try:
            tree = ast.parse(source, mode="eval")
        except SyntaxError:
            raise NotImplementedError(f"interpolation: {{{{ {source} }}}} is beyond the supported Jinja subset")
        out.append(_render_value(_Evaluator(context, source).eval(tree)))
        pos = end + 2
    return "".join(out)


class JinjaInterpolation:
    def eval(self, input_str: str, config, default: Optional[str] = None,
             valid_types: Optional[Tuple[Type[Any]]] = None, **additional_parameters: Any) -> Any:
        context = {"config": config, **additional_parameters}
        for alias, equivalent in _ALIASES.items():
            if alias in context:
                raise ValueError(f"Found reserved keyword {alias} in interpolation context. This is unexpected and indicative of a bug in the CDK.")
            elif equivalent in context:
                context[alias] = context[equivalent]
        if isinstance(input_str, str):
            for name, message in _UNSUPPORTED_VARIABLES.items():
                if name in input_str:
                    from airbyte_cdk.models import FailureType
                    from airbyte_cdk.utils.traced_exception import AirbyteTracedException

                    raise AirbyteTracedException(message=message, internal_message=message, failure_type=FailureType.config_error)
        try:
            if isinstance(input_str, str):
                result = self._eval(input_str, context)
                if result:
                    return self._literal_eval(result, valid_types)
            else:
                raise Exception(f"Expected a string, got {input_str}")
        except UndefinedError:
            pass
        return self._literal_eval(self._eval(default, context), valid_types)

    @staticmethod
    def _literal_eval(result, valid_types):
        try:
            evaluated = ast.literal_eval(result)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return result
        if (not valid_types and not isinstance(evaluated, complex)) or (valid_types and isinstance(evaluated, valid_types)):
            return evaluated
        return result

    @staticmethod
    def _eval(s, context):
        if not isinstance(s, str):
            return s  # a static value (the CDK's TypeError path)
        return render(s, context)
