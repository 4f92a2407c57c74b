from airbyte_cdk.sources.declarative.incremental.concurrent_partition_cursor import (
    ConcurrentCursorFactory,
    ConcurrentPerPartitionCursor,
)
from airbyte_cdk.sources.declarative.incremental.datetime_based_cursor import DatetimeBasedCursor

__all__ = ["ConcurrentCursorFactory", "ConcurrentPerPartitionCursor", "DatetimeBasedCursor"]
