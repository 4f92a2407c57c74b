from airbyte_cdk.sources.streams.http.error_handlers.backoff_strategy import BackoffStrategy

__all__ = ["BackoffStrategy"]
