"""LegacyToPerPartitionStateMigration as in the CDK: {"<id>": {"<cursor>": v}} ->
{"states": [{"partition": {"<partition_field>": "<id>"}, "cursor": {...}}]}. The partition router
and cursor may be components or (as the Sluice engine hands them) their manifest definitions."""

from typing import Any, Mapping

from airbyte_cdk.sources.declarative.interpolation.interpolated_string import InterpolatedString
from airbyte_cdk.sources.declarative.migrations.state_migration import StateMigration


def _get(obj, name):
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name)


def _is_already_migrated(stream_state: Mapping[str, Any]) -> bool:
    return "states" in stream_state


class LegacyToPerPartitionStateMigration(StateMigration):
    def __init__(self, partition_router: Any, cursor: Any, config: Mapping[str, Any], parameters: Mapping[str, Any]):
        self._partition_router = partition_router
        self._cursor = cursor
        self._config = config
        self._parameters = parameters
        self._partition_key_field = InterpolatedString.create(self._get_partition_field(partition_router), parameters=parameters).eval(config)
        self._cursor_field = InterpolatedString.create(_get(cursor, "cursor_field"), parameters=parameters).eval(config)

    def _get_partition_field(self, partition_router: Any) -> str:
        if _get(partition_router, "type") == "UnionPartitionRouter" if isinstance(partition_router, Mapping) else False:
            return partition_router["partition_field"]
        parent_stream_config = _get(partition_router, "parent_stream_configs")[0]
        return _get(parent_stream_config, "partition_field")

    def should_migrate(self, stream_state: Mapping[str, Any]) -> bool:
        if _is_already_migrated(stream_state):
            return False
        configs = _get(self._partition_router, "parent_stream_configs")
        if configs is not None and len(configs) != 1:
            return False
        if not stream_state:
            return False
        for value in stream_state.values():
            if not isinstance(value, dict):
                return False
            keys = list(value.keys())
            if len(keys) != 1 or keys[0] != self._cursor_field:
                return False
        return True

    def migrate(self, stream_state: Mapping[str, Any]) -> Mapping[str, Any]:
        states = [{"partition": {self._partition_key_field: key}, "cursor": value} for key, value in stream_state.items()]
        return {"states": states}
