"""ConcurrentCursorFactory and ConcurrentPerPartitionCursor: names custom code imports (source-notion's
BlocksRetriever); cursors are the engine's and the host's in Sluice, so building one is refused.
CDK 7.39.1: airbyte_cdk/sources/declarative/incremental/concurrent_partition_cursor.py."""

from airbyte_cdk._unsupported import unsupported


class ConcurrentCursorFactory:
    def __init__(self, *args, **kwargs):
        raise unsupported("ConcurrentCursorFactory (cursors are the engine's)")


class ConcurrentPerPartitionCursor:
    def __init__(self, *args, **kwargs):
        raise unsupported("ConcurrentPerPartitionCursor (cursors are the engine's)")
