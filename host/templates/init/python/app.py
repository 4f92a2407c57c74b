"""{{name}}: a Sluice connector (written by `host init`). It reads one stream, `items`, from
`{base_url}/items`: cursor pagination (`next_cursor`), incremental on `updated_at`. Change it to
fit your API; README.md has the build and test commands."""

from dataclasses import dataclass

import sluice_guest as sluice
from sluice_guest import Page, Partition, Stream, http, paginate


@dataclass
class Config:
    base_url: str
    page_size: int


class Connector(sluice.Source):
    def parse_config(self, raw: dict) -> Config:
        return Config(base_url=sluice.field(raw, "base_url", str), page_size=sluice.field(raw, "page_size", int, 100))

    def spec(self) -> dict:
        return {
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "{{name}}",
            "type": "object",
            "required": ["base_url"],
            "properties": {
                "base_url": {"type": "string", "description": "Where the API listens, e.g. http://127.0.0.1:8080"},
                "page_size": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100},
            },
        }

    def hosts(self, config: Config) -> list[str]:
        """What the operator must grant (`--allow-host`)."""
        return [http.host_port(config.base_url)]

    def check(self, config: Config) -> None:
        http.get(http.join(config.base_url, "/items")).query("limit", 1).send().error_for_status()

    def streams(self, config: Config) -> list[Stream]:
        schema = {
            "type": "object",
            "required": ["id", "updated_at"],
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "updated_at": {"type": "string", "format": "date-time"},
            },
        }
        return [Stream("items", schema).with_primary_key("id").with_cursor_field("updated_at")]

    def read_page(self, config: Config, partition: Partition, token):
        """A generator: it yields its request and the host sends it between two steps of the page,
        so a partition waiting on the API keeps no interpreter. (`yield request.records(["data"])`
        has the host take the records out of the answer, unparsed: faster.)"""
        request = http.get(http.join(config.base_url, "/items")).query("limit", config.page_size)
        # Incremental: the host sets the partition's start from the saved state.
        start = partition.cursor_start()
        if start is not None:
            request.query("updated_after", start.to_query_value())
        cursor = paginate.cursor(token)
        if cursor is not None:
            request.query("cursor", cursor)
        answer = (yield request).error_for_status().json()
        return Page.from_values(answer["data"], paginate.next_cursor(answer.get("next_cursor")))

    def warm_up(self) -> list[sluice.WarmUp]:
        """Pages read while the component is built, with answers shaped like the API's: every
        instance then starts with the code of a page already run. They run with no host (no
        `send()`, no logging)."""
        config = {"base_url": "http://127.0.0.1:8080", "page_size": 100}
        record = {"id": 1, "name": "one", "updated_at": "2024-01-01T00:00:00Z"}
        answer = sluice.WarmAnswer({"data": [record], "next_cursor": "1"})
        items = Partition.whole("items")
        return [sluice.WarmUp(config, items, None, [answer]), sluice.WarmUp(config, items, "1", [answer])]


Source, AsyncJobs, Resume, SteppedPages = sluice.export_stepped_connector(Connector)
