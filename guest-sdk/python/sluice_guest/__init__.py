"""Write Sluice data-source connectors in Python.

A connector subclasses `Source`, overriding at least `spec`, `streams` and `read_page`, and
exports it as the component's `source` interface from its app module:

    import sluice_guest as sluice

    class MySource(sluice.Source):
        def spec(self):
            return {"type": "object", "required": ["base_url"]}

        def streams(self, config):
            return [sluice.Stream("items", {"type": "object"}).with_primary_key("id")]

        def read_page(self, config, partition, token):
            body = sluice.http.get_json(config["base_url"] + "/items")
            return sluice.Page.from_values(body["data"])

    Source = sluice.export(MySource)

Build it with `componentize-py -d wit -w connector componentize -p guest-sdk/python app -o x.wasm`.

Every method is called with everything it needs: the host keeps page tokens, partitions and
cursors between calls, so a connector holds no state of its own (each call gets a fresh object).
"""

import json
from typing import Any, Optional

from . import http, log, paginate, slice
from .errors import Error, context
from .types import CursorRange, CursorValue, Page, Partition, PartitionBatch, Stream

__all__ = [
    "Source", "export", "field", "Error", "context", "Stream", "Partition", "CursorValue", "CursorRange",
    "Page", "PartitionBatch", "http", "log", "paginate", "slice",
]


class Source:
    """A data-source connector. Only `spec`, `streams` and `read_page` have no default."""

    def parse_config(self, raw: dict) -> Any:
        """The connector's configuration, from the operator's config JSON (a dict). Raise
        `Error.config` (or use `field`) for a config that is not usable; the default keeps the dict."""
        return raw

    def spec(self) -> dict:
        """The JSON Schema of the config. Mark secret fields with `"airbyte_secret": True`."""
        raise NotImplementedError("a connector must implement spec()")

    def hosts(self, config) -> list[str]:
        """The `host:port` pairs this config needs to reach (see `http.host_port`)."""
        return []

    def check(self, config) -> None:
        """Tries the config against the API. The default accepts any config that parses."""

    def streams(self, config) -> list[Stream]:
        """The streams this config can read."""
        raise NotImplementedError("a connector must implement streams()")

    def partitions(self, config, stream: str, state: Optional[dict]) -> list[Partition]:
        """Slicing: the partitions of `stream`. The default is one partition covering it."""
        return [Partition.whole(stream)]

    def partition_batch(self, config, stream: str, state: Optional[dict], token: Any) -> PartitionBatch:
        """Like `partitions`, a batch at a time (set the batch's `next_token` to be called again),
        or to report how many records the stream holds."""
        return PartitionBatch(self.partitions(config, stream, state))

    def read_page(self, config, partition: Partition, token: Any) -> Page:
        """One page of `partition`: `token` is `None` for the first page, then the previous
        page's next token."""
        raise NotImplementedError("a connector must implement read_page()")


_REQUIRED = object()
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array", dict: "an object"}


def field(raw: dict, name: str, kind: type, default: Any = _REQUIRED) -> Any:
    """A config field of the given type (`str`, `int`, `float`, `bool`, `list` or `dict`), or
    `default` when absent or null; a missing required field or a wrong type is a config error."""
    value = raw.get(name)
    if value is None:
        if default is _REQUIRED:
            raise Error.config(f"invalid config: missing field `{name}`")
        return default
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise Error.config(f"invalid config: `{name}` must be {_TYPE_NAMES.get(kind, kind.__name__)}, got {json.dumps(value)}")
    return value


def export(source: type) -> type:
    """Makes the class the component exports as its `source` interface from a `Source` subclass.
    Assign it to `Source` in the app module: `Source = sluice.export(MySource)`."""
    from ._export import exporter

    return exporter(source)
