"""SimpleRetriever with the CDK's fields. Paging through requests is the Sluice engine's job; a
custom subclass is refused when its read is called (until the engine hands it pages)."""

from dataclasses import InitVar, dataclass, field
from typing import Any, List, Mapping, Optional, Union

from airbyte_cdk._unsupported import unsupported
from airbyte_cdk.sources.declarative.retrievers.retriever import Retriever
from airbyte_cdk.sources.types import Config


# The CDK's key of a full-refresh stream's final state (CDK 7.39.1).
FULL_REFRESH_SYNC_COMPLETE_KEY = "__ab_full_refresh_sync_complete"


@dataclass
class SimpleRetriever(Retriever):
    requester: Any
    record_selector: Any
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    name: str = ""
    primary_key: Optional[Union[str, List[str], List[List[str]]]] = ""
    paginator: Optional[Any] = None
    stream_slicer: Optional[Any] = None
    request_option_provider: Optional[Any] = None
    ignore_stream_slicer_parameters_on_paginated_requests: bool = False
    additional_query_properties: Optional[Any] = None
    log_formatter: Optional[Any] = None
    pagination_tracker_factory: Optional[Any] = None
    post_pagination_filter: Optional[Any] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._parameters = parameters

    def read_records(self, records_schema: Mapping[str, Any], stream_slice: Optional[Any] = None):
        raise unsupported(f"{type(self).__name__}.read_records (a custom retriever)")
