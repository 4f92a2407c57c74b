"""RecordSelector as in the CDK: extract, (transform,) filter, transform, normalize, wrap as Record."""

from dataclasses import InitVar, dataclass, field
from typing import Any, Iterable, List, Mapping, Optional

import requests

from airbyte_cdk.sources.declarative.extractors.http_selector import HttpSelector
from airbyte_cdk.sources.declarative.extractors.record_extractor import RecordExtractor
from airbyte_cdk.sources.declarative.extractors.record_filter import RecordFilter
from airbyte_cdk.sources.types import Config, Record, StreamSlice, StreamState


@dataclass
class RecordSelector(HttpSelector):
    extractor: RecordExtractor
    config: Config
    parameters: InitVar[Mapping[str, Any]]
    schema_normalization: Any = None
    name: str = ""
    record_filter: Optional[RecordFilter] = None
    transformations: List[Any] = field(default_factory=list)
    transform_before_filtering: bool = False
    file_uploader: Optional[Any] = None

    def __post_init__(self, parameters: Mapping[str, Any]) -> None:
        self._parameters = parameters

    def select_records(self, response: requests.Response, stream_state: StreamState, records_schema: Mapping[str, Any],
                       stream_slice: Optional[StreamSlice] = None, next_page_token: Optional[Mapping[str, Any]] = None) -> Iterable[Record]:
        records = self.extractor.extract_records(response)
        yield from self.filter_and_transform(records, stream_state, records_schema, stream_slice, next_page_token)

    def filter_and_transform(self, all_data, stream_state, records_schema, stream_slice=None, next_page_token=None):
        data = list(all_data)
        if self.transform_before_filtering:
            data = list(self._transform(data, stream_state, stream_slice))
            data = list(self._filter(data, stream_state, stream_slice, next_page_token))
        else:
            data = list(self._filter(data, stream_state, stream_slice, next_page_token))
            data = list(self._transform(data, stream_state, stream_slice))
        if self.schema_normalization is not None and records_schema:
            for d in data:
                self.schema_normalization.transform(d, records_schema)
        for d in data:
            yield Record(data=d, stream_name=self.name, associated_slice=stream_slice)

    def _filter(self, records, stream_state, stream_slice, next_page_token):
        if self.record_filter:
            yield from self.record_filter.filter_records(records, stream_state=stream_state, stream_slice=stream_slice, next_page_token=next_page_token)
        else:
            yield from records

    def _transform(self, records, stream_state, stream_slice):
        for record in records:
            for t in self.transformations:
                t.transform(record, config=self.config, stream_state=stream_state, stream_slice=stream_slice)
            yield record
