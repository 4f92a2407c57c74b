"""Sluice's side of custom components: the host calls `call(component, method, args)`.

`call` returns a JSON string, or raises ComponentError whose `.to_json()` is the error the host
gets (componentize-py turns a raised exception into the WIT result's error)."""

from sluice_components.dispatcher import METHODS, Dispatcher
from sluice_components.errors import ComponentError

_dispatcher = Dispatcher()


def call(component: int, method: str, args: str) -> str:
    return _dispatcher.call(component, method, args)


def reset() -> None:
    """A fresh dispatcher (tests; the component is instantiated once per run in Sluice)."""
    global _dispatcher
    _dispatcher = Dispatcher()


__all__ = ["METHODS", "ComponentError", "Dispatcher", "call", "reset"]
