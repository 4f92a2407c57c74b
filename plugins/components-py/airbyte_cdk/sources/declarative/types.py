from airbyte_cdk.sources.types import (  # noqa: F401
    Config,
    ConnectionDefinition,
    EmptyString,
    FieldPointer,
    Record,
    StreamSlice,
    StreamState,
)
