from airbyte_cdk.sources.streams.http.http import HttpStream
from airbyte_cdk.sources.streams.http.http_client import HttpClient

__all__ = ["HttpClient", "HttpStream"]
