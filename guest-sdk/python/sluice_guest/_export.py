"""Glue between the WIT bindings componentize-py generates and `Source`; not part of the API."""

import json
import traceback

from componentize_py_types import Err
from wit_world.imports import types as wit

from .errors import CONFIG, TRANSIENT, Error
from .types import CursorRange, CursorValue, Partition, _compact, parse_json

_CURSOR_TO_WIT = {"integer": wit.CursorValue_Integer, "datetime": wit.CursorValue_Datetime, "text": wit.CursorValue_Text}


def _cursor_to_wit(value):
    return None if value is None else _CURSOR_TO_WIT[value.kind](value.value)


def _cursor_from_wit(value):
    if value is None:
        return None
    if isinstance(value, wit.CursorValue_Integer):
        return CursorValue.integer(value.value)
    if isinstance(value, wit.CursorValue_Datetime):
        return CursorValue.datetime(value.value)
    return CursorValue.text(value.value)


def _partition_to_wit(p: Partition):
    r = p.cursor_range
    cursor_range = None if r is None else wit.CursorRange(_cursor_to_wit(r.start), _cursor_to_wit(r.end))
    return wit.Partition(p.stream, _compact(p.key), cursor_range)


def _partition_from_wit(p) -> Partition:
    r = p.cursor_range
    cursor_range = None if r is None else CursorRange(_cursor_from_wit(r.start), _cursor_from_wit(r.end))
    return Partition(p.stream, parse_json("partition key", p.key), cursor_range)


def _token(value):
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _to_wit_error(e: Error):
    if e.kind == CONFIG:
        return wit.Error_Config(e.message)
    if e.kind == TRANSIENT:
        return wit.Error_Transient(e.message)
    return wit.Error_System(e.message)


def _guard(call):
    """Runs a call into the connector; its errors become WIT errors. Any other exception is a
    bug: a system error naming the exception and where it was raised."""
    try:
        return call()
    except Error as e:
        raise Err(_to_wit_error(e)) from None
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}, line {frames[-1].lineno}, in {frames[-1].name})" if frames else ""
        raise Err(wit.Error_System(f"the connector raised {type(e).__name__}: {e}{where}")) from None


def exporter(source_cls):
    def config(text: str):
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise Error.config(f"invalid config: {e}") from None
        if not isinstance(raw, dict):
            raise Error.config("invalid config: expected a JSON object")
        return source_cls().parse_config(raw)

    class Export:
        def spec(self) -> str:
            return json.dumps(source_cls().spec(), separators=(",", ":"))

        def capabilities(self, config_json: str):
            return _guard(lambda: wit.CapabilitySet(list(source_cls().hosts(config(config_json)))))

        def check(self, config_json: str) -> None:
            return _guard(lambda: source_cls().check(config(config_json)))

        def discover(self, config_json: str):
            def run():
                streams = source_cls().streams(config(config_json))
                return [
                    wit.Stream(s.name, json.dumps(s.json_schema, separators=(",", ":")), s.primary_key, s.cursor_field)
                    for s in streams
                ]

            return _guard(run)

        def partitions(self, config_json: str, stream: str, state, token):
            def run():
                parsed = config(config_json)
                batch = source_cls().partition_batch(
                    parsed, stream, parse_json("state", state), parse_json("partition token", token)
                )
                return wit.PartitionBatch(
                    [_partition_to_wit(p) for p in batch.partitions], _token(batch.next_token), batch.record_estimate
                )

            return _guard(run)

        def read_page(self, config_json: str, partition, token):
            def run():
                parsed = config(config_json)
                page = source_cls().read_page(parsed, _partition_from_wit(partition), parse_json("page token", token))
                return wit.Page(list(page.records), _token(page.next_token))

            return _guard(run)

    Export.__name__ = Export.__qualname__ = "Source"
    return Export
