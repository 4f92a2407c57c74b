from airbyte_cdk.sources.declarative.incremental.datetime_based_cursor import DatetimeBasedCursor

__all__ = ["DatetimeBasedCursor"]
