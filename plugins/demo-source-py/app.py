"""The demo connector in Python: reads the bundled demo API (`demo-api`), stream for stream the
same records as the Rust one (plugins/demo-source).

Streams:
- `items`: every item, cursor pagination (`next_cursor`);
- `accounts`: page-number pagination, ends on a short page;
- `account_items`: one partition per account, next-URL pagination, incremental on `updated_at`;
- `windowed_items`: every item, sliced into windows of `updated_at` (`window_minutes`) that the
  host reads concurrently and checkpoints window by window.
"""

from dataclasses import dataclass
from typing import Optional

import sluice_guest as sluice
from sluice_guest import CursorValue, Error, Page, Partition, PartitionBatch, Stream, context, http, paginate, slice


@dataclass
class Config:
    base_url: str
    page_size: int
    start_date: Optional[str]
    window_minutes: int

    def url(self, path: str) -> str:
        return http.join(self.base_url, path)


def item_schema() -> dict:
    return {
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "name": {"type": "string"},
            "account_id": {"type": "integer"},
            "amount": {"type": "integer"},
            "updated_at": {"type": "string", "format": "date-time"},
        },
        "required": ["id", "updated_at"],
    }


def accounts_page(config: Config, page: int) -> list:
    answer = http.get(config.url("/accounts")).query("page", page).query("per_page", config.page_size).send()
    return answer.error_for_status().json()["data"]


def cursor_page(request: http.Request) -> Page:
    answer = request.send().error_for_status().json()
    return Page.from_values(answer["data"], paginate.next_cursor(answer.get("next_cursor")))


class DemoSource(sluice.Source):
    def parse_config(self, raw: dict) -> Config:
        return Config(
            base_url=sluice.field(raw, "base_url", str),
            page_size=sluice.field(raw, "page_size", int, 100),
            start_date=sluice.field(raw, "start_date", str, None),
            window_minutes=sluice.field(raw, "window_minutes", int, 60),
        )

    def spec(self) -> dict:
        return {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Demo API source",
            "type": "object",
            "required": ["base_url"],
            "additionalProperties": True,
            "properties": {
                "base_url": {"type": "string", "description": "Where the demo API listens, e.g. http://127.0.0.1:8080"},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
                "start_date": {
                    "type": "string",
                    "format": "date-time",
                    "description": "Read items updated after this time (incremental streams)",
                },
                "window_minutes": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 60,
                    "description": "Width of the windows of windowed_items",
                },
            },
        }

    def hosts(self, config: Config) -> list[str]:
        return [http.host_port(config.base_url)]

    def check(self, config: Config) -> None:
        if not 1 <= config.page_size <= 10_000:
            raise Error.config("page_size must be between 1 and 10000")
        if config.window_minutes < 1:
            raise Error.config("window_minutes must be at least 1")
        if config.start_date is not None:
            with context("start_date"):
                slice.parse_rfc3339(config.start_date)
        with context("cannot list accounts"):
            accounts_page(config, 1)

    def streams(self, config: Config) -> list[Stream]:
        accounts_schema = {
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "created_at": {"type": "string", "format": "date-time"},
            },
            "required": ["id"],
        }
        return [
            Stream("items", item_schema()).with_primary_key("id"),
            Stream("accounts", accounts_schema).with_primary_key("id"),
            Stream("account_items", item_schema()).with_primary_key("id").with_cursor_field("updated_at"),
            Stream("windowed_items", item_schema()).with_primary_key("id").with_cursor_field("updated_at"),
        ]

    def partitions(self, config: Config, stream: str, state) -> list[Partition]:
        if stream != "account_items":
            return [Partition.whole(stream)]
        # One partition per account; every page of accounts is listed (bounded by a short page).
        start = CursorValue.datetime(config.start_date) if config.start_date is not None else None
        partitions = []
        page = 1
        while True:
            with context("listing accounts"):
                accounts = accounts_page(config, page)
            for account in accounts:
                partitions.append(Partition.keyed(stream, {"account_id": account["id"]}).starting_at(start))
            if paginate.next_page_number(page, len(accounts), config.page_size) is None:
                return partitions
            page += 1

    def partition_batch(self, config: Config, stream: str, state, token) -> PartitionBatch:
        if stream != "windowed_items":
            return PartitionBatch(self.partitions(config, stream, state))
        # Windows from the first item (or start_date) to the last; the host skips finished ones.
        with context("reading item bounds"):
            bounds = http.get_json(config.url("/items/bounds"))
        first, last = bounds.get("first_updated_at"), bounds.get("last_updated_at")
        if first is None or last is None:
            return PartitionBatch([], record_estimate=0)
        start = slice.parse_rfc3339(first) - 1
        if config.start_date is not None:
            start = max(start, slice.parse_rfc3339(config.start_date))
        windows = slice.datetime_windows(stream, start, slice.parse_rfc3339(last), config.window_minutes * 60)
        estimate = bounds["count"] if config.start_date is None else None
        return PartitionBatch(windows, record_estimate=estimate)

    def read_page(self, config: Config, partition: Partition, token) -> Page:
        stream = partition.stream
        if stream == "items":
            request = http.get(config.url("/items")).query("limit", config.page_size)
            cursor = paginate.cursor(token)
            if cursor is not None:
                request.query("cursor", cursor)
            return cursor_page(request)
        if stream == "accounts":
            page = paginate.page_number(token, 1)
            records = accounts_page(config, page)
            return Page.from_values(records, paginate.next_page_number(page, len(records), config.page_size))
        if stream == "account_items":
            next_url = paginate.cursor(token)
            if next_url is not None:
                request = http.get(config.url(next_url))
            else:
                account_id = partition.key["account_id"]
                request = http.get(config.url(f"/accounts/{account_id}/items")).query("limit", config.page_size)
                start = partition.cursor_start()
                if start is not None:
                    request.query("updated_after", start.to_query_value())
            answer = request.send().error_for_status().json()
            return Page.from_values(answer["data"], paginate.next_cursor(answer.get("next")))
        if stream == "windowed_items":
            request = http.get(config.url("/items")).query("limit", config.page_size)
            start, end = partition.cursor_start(), partition.cursor_end()
            if start is not None:
                request.query("updated_after", start.to_query_value())
            if end is not None:
                request.query("updated_until", end.to_query_value())
            cursor = paginate.cursor(token)
            if cursor is not None:
                request.query("cursor", cursor)
            return cursor_page(request)
        raise Error.config(f"unknown stream {stream!r}")


Source = sluice.export(DemoSource)
