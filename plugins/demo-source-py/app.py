"""The demo connector in Python: reads the bundled demo API (`demo-api`), stream for stream the
same records as the Rust one (plugins/demo-source).

Streams:
- `items`: every item, cursor pagination (`next_cursor`);
- `accounts`: page-number pagination, ends on a short page;
- `account_items`: one partition per account, next-URL pagination, incremental on `updated_at`;
- `windowed_items`: every item, sliced into windows of `updated_at` (`window_minutes`) that the
  host reads concurrently and checkpoints window by window;
- `report_items` (with `report_jobs`): one partition per account, read through the API's report
  jobs, the result a JSON-lines download streamed a page at a time.
"""

import dataclasses
from dataclasses import dataclass
from typing import Optional

import sluice_guest as sluice
from sluice_guest import (
    CursorValue,
    Error,
    JobStatus,
    Page,
    Partition,
    PartitionBatch,
    Stream,
    context,
    http,
    paginate,
    slice,
)


@dataclass
class Config:
    base_url: str
    page_size: int
    # Read items updated after this RFC 3339 date-time only (incremental streams).
    start_date: Optional[str]
    window_minutes: int
    # Sent as `Authorization: Bearer ...` on every request when set.
    api_key: Optional[str]
    # Offer `report_items`, read through the API's report jobs (one per account).
    report_jobs: bool
    # Report jobs the API allows at once.
    max_jobs: int
    # Records per page of a report's result.
    report_page_size: int

    def url(self, path: str) -> str:
        return http.join(self.base_url, path)

    def authorized(self, request: http.Request) -> http.Request:
        """The request, authenticated when the config has a key."""
        return request.bearer_auth(self.api_key) if self.api_key is not None else request

    def get(self, url: str) -> http.Request:
        return self.authorized(http.get(url))


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


def accounts_request(config: Config, page: int) -> http.Request:
    return config.get(config.url("/accounts")).query("page", page).query("per_page", config.page_size)


def accounts_page(config: Config, page: int) -> list:
    return accounts_request(config, page).send().error_for_status().json()["data"]


def cursor_page(request: http.Request):
    # The host takes the records out of the answer: they are passed on as the API wrote them,
    # never parsed here (most of a Python connector's time otherwise).
    records, rest = (yield request.records(["data"])).error_for_status().parts()
    return Page(records, paginate.next_cursor(rest.get("next_cursor")))


def job_id(job) -> str:
    """The report id in a job handle `create_job` made."""
    if not isinstance(job, dict) or not isinstance(job.get("id"), str):
        raise Error.system(f"not a report job handle: {job!r}")
    return job["id"]


def reading_position(token) -> Optional[tuple[int, int]]:
    """Where a report download is being read, from `read_result`'s page token: the open body's
    handle and the lines read from it."""
    if token is None:
        return None
    if not isinstance(token, dict) or not all(isinstance(token.get(k), int) for k in ("body", "offset")):
        raise Error.system(f"not a report page token: {token!r}")
    return token["body"], token["offset"]


class DemoSource(sluice.Source, sluice.AsyncJobs):
    def partition_config_fields(self, config: Config) -> list[str]:
        # Every field Config reads (the host leaves out the rest, such as a long list only a
        # listing would read).
        return [f.name for f in dataclasses.fields(Config)]

    def parse_config(self, raw: dict) -> Config:
        return Config(
            base_url=sluice.field(raw, "base_url", str),
            page_size=sluice.field(raw, "page_size", int, 100),
            start_date=sluice.field(raw, "start_date", str, None),
            window_minutes=sluice.field(raw, "window_minutes", int, 60),
            api_key=sluice.field(raw, "api_key", str, None),
            report_jobs=sluice.field(raw, "report_jobs", bool, False),
            max_jobs=sluice.field(raw, "max_jobs", int, 2),
            report_page_size=sluice.field(raw, "report_page_size", int, 5000),
        )

    def spec(self) -> dict:
        return {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Demo API source",
            "documentationUrl": "https://example.com/sluice/demo-source",
            "type": "object",
            "required": ["base_url"],
            "additionalProperties": True,
            "properties": {
                "base_url": {
                    "type": "string",
                    "format": "uri",
                    "description": "Where the demo API listens, e.g. http://127.0.0.1:8080",
                },
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
                "api_key": {
                    "type": "string",
                    "airbyte_secret": True,
                    "description": "Sent as a bearer token, when the API requires one",
                },
                "report_jobs": {
                    "type": "boolean",
                    "default": False,
                    "description": "Offer report_items, read through report jobs (one per account)",
                },
                "max_jobs": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 2,
                    "description": "Report jobs the API allows at once",
                },
                "report_page_size": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 5000,
                    "description": "Records per page of a report's result",
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
        streams = [
            Stream("items", item_schema()).with_primary_key("id"),
            Stream("accounts", accounts_schema).with_primary_key("id"),
            Stream("account_items", item_schema()).with_primary_key("id").with_cursor_field("updated_at"),
            Stream("windowed_items", item_schema()).with_primary_key("id").with_cursor_field("updated_at"),
        ]
        if config.report_jobs:
            streams.append(Stream("report_items", item_schema()).with_primary_key("id").with_cursor_field("updated_at"))
        return streams

    def partitions(self, config: Config, stream: str, state) -> list[Partition]:
        if stream not in ("account_items", "report_items"):
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
            bounds = config.get(config.url("/items/bounds")).send().error_for_status().json()
        first, last = bounds.get("first_updated_at"), bounds.get("last_updated_at")
        if first is None or last is None:
            return PartitionBatch([], record_estimate=0)
        start = slice.parse_rfc3339(first) - 1
        if config.start_date is not None:
            start = max(start, slice.parse_rfc3339(config.start_date))
        windows = slice.datetime_windows(stream, start, slice.parse_rfc3339(last), config.window_minutes * 60)
        estimate = bounds["count"] if config.start_date is None else None
        return PartitionBatch(windows, record_estimate=estimate)

    def read_page(self, config: Config, partition: Partition, token):
        """A generator: it yields its request and the host sends it between two steps, so a
        partition waiting on the API keeps no interpreter (see `export_stepped_connector`)."""
        stream = partition.stream
        if stream == "items":
            request = config.get(config.url("/items")).query("limit", config.page_size)
            cursor = paginate.cursor(token)
            if cursor is not None:
                request.query("cursor", cursor)
            return (yield from cursor_page(request))
        if stream == "accounts":
            page = paginate.page_number(token, 1)
            answer = yield accounts_request(config, page)
            records = answer.error_for_status().json()["data"]
            return Page.from_values(records, paginate.next_page_number(page, len(records), config.page_size))
        if stream == "account_items":
            next_url = paginate.cursor(token)
            if next_url is not None:
                request = config.get(config.url(next_url))
            else:
                account_id = partition.key["account_id"]
                request = config.get(config.url(f"/accounts/{account_id}/items")).query("limit", config.page_size)
                start = partition.cursor_start()
                if start is not None:
                    request.query("updated_after", start.to_query_value())
            # Passed on unchanged: the host keeps them (`forwarded`), only the rest comes in here.
            _, rest = (yield request.forwarded(["data"])).error_for_status().parts()
            return Page([], paginate.next_cursor(rest.get("next")))
        if stream == "windowed_items":
            request = config.get(config.url("/items")).query("limit", config.page_size)
            start, end = partition.cursor_start(), partition.cursor_end()
            if start is not None:
                request.query("updated_after", start.to_query_value())
            if end is not None:
                request.query("updated_until", end.to_query_value())
            cursor = paginate.cursor(token)
            if cursor is not None:
                request.query("cursor", cursor)
            return (yield from cursor_page(request))
        if stream == "report_items":
            raise Error.system("report_items is read through report jobs")
        raise Error.config(f"unknown stream {stream!r}")

    def warm_up(self) -> list:
        # A first page and a next one of `items` and of `account_items`, and the listing of
        # `account_items`' partitions, read while the component is built: every instance then
        # starts with the code of a step, and of the listing, already run.
        config = {"base_url": "http://127.0.0.1:8080", "page_size": 100}
        record = {"id": 1, "name": "item 1", "account_id": 1, "amount": 1, "updated_at": "2024-01-01T00:00:00Z"}
        items = Partition.whole("items")
        item_page = sluice.WarmAnswer({"next_cursor": "1"}, records=[record])
        account = Partition.keyed("account_items", {"account_id": 1})
        next_url = "/accounts/1/items?cursor=1&limit=100"
        account_page = sluice.WarmAnswer({"next": next_url}, forwarded=1)
        # A short page of accounts ends the listing.
        accounts = sluice.WarmAnswer({"data": [{"id": 1, "name": "account 1"}, {"id": 2, "name": "account 2"}]})
        return [
            sluice.WarmListing(config, "account_items", [accounts]),
            sluice.WarmUp(config, items, None, [item_page]),
            sluice.WarmUp(config, items, "1", [item_page]),
            sluice.WarmUp(config, account, None, [account_page]),
            sluice.WarmUp(config, account, next_url, [account_page]),
        ]

    def resumable_streams(self, config: Config) -> list[str]:
        # The demo API's tokens are stable: cursors encode a position, next links are plain URLs,
        # pages are numbers. (A report's result pages are the orchestrator's business.)
        return ["items", "accounts", "account_items", "windowed_items"]

    # `report_items`: one report job per account on the demo API's `/reports` endpoints.

    def job_streams(self, config: Config) -> list[str]:
        return ["report_items"] if config.report_jobs else []

    def max_jobs(self, config: Config) -> int:
        return config.max_jobs

    def create_job(self, config: Config, partition: Partition):
        body = {"account_id": partition.key["account_id"]}
        start = partition.cursor_start()
        if start is not None:
            body["updated_after"] = start.to_query_value()
        request = config.authorized(http.post(config.url("/reports")).json_body(body))
        job = request.send().error_for_status().json()
        if not isinstance(job, dict) or not isinstance(job.get("id"), str):
            raise Error.system(f"POST /reports answered without a report id: {job!r}")
        return {"id": job["id"]}

    def poll_job(self, config: Config, job) -> JobStatus:
        answer = config.get(config.url(f"/reports/{job_id(job)}")).send()
        if answer.status == 404:
            return JobStatus.unknown()
        view = answer.error_for_status().json()
        if view["status"] == "completed":
            return JobStatus.completed({"url": view.get("download_url")})
        if view["status"] == "failed":
            error = view.get("error")
            return JobStatus.failed(error if error is not None else "the report failed")
        return JobStatus.running()

    def read_result(self, config: Config, job, download, token) -> Page:
        """The download is one JSONL body, streamed: each call hands on the next lines of it, and
        the token names the open body (and how far it got, to open it again from there when the
        partition is retried in a new instance)."""
        url = download.get("url") if isinstance(download, dict) else None
        if not isinstance(url, str):
            raise Error.system(f"the report's download names no URL: {download!r}")

        def open_at(offset: int) -> http.Body:
            request = config.get(config.url(url))
            if offset > 0:
                request.query("offset", offset)
            return request.open().error_for_status().body

        position = reading_position(token)
        if position is None:
            body, offset = open_at(0), 0
        else:
            body, offset = http.Body.from_handle(position[0]), position[1]
        lines = body.read_lines(config.report_page_size)
        if lines is None:
            # The host no longer holds the body (a new instance reads the partition): reopen it
            # where the token got to.
            body = open_at(offset)
            lines = body.read_lines(config.report_page_size)
            if lines is None:
                raise Error.system("the body closed")
        records = [line for line in lines.lines() if line.strip()]
        next_token = None if lines.end else {"body": body.handle, "offset": offset + lines.count}
        return Page(records, next_token)

    def delete_job(self, config: Config, job) -> None:
        answer = config.authorized(http.delete(config.url(f"/reports/{job_id(job)}"))).send()
        # Gone already is as good as deleted.
        if answer.status != 404:
            answer.error_for_status()


Source, AsyncJobs, Resume, SteppedPages, StateShape, PartitionConfig = sluice.export_partition_config_connector(
    DemoSource
)
