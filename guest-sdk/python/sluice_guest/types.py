"""The values a connector hands to the host, in plain Python."""

import json
from typing import Any, Iterable, Optional

from .errors import Error


def _compact(value: Any) -> str:
    # Object keys sorted, as the Rust SDK writes them, so a key is the same text in every language.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


class Stream:
    """A stream the connector can read: its name, the JSON Schema of one record, its primary key
    and, for incremental streams, its cursor field."""

    def __init__(self, name: str, json_schema: dict):
        self.name = name
        self.json_schema = json_schema
        self.primary_key: list[list[str]] = []
        self.cursor_field: Optional[list[str]] = None

    def with_primary_key(self, field: str) -> "Stream":
        """Adds a top-level field to the primary key (call again for composite keys)."""
        self.primary_key.append([field])
        return self

    def with_cursor_field(self, field: str) -> "Stream":
        """Makes the stream incremental on a top-level field that grows as records change."""
        self.cursor_field = [field]
        return self


class CursorValue:
    """A cursor value the host can order: `integer`, `datetime` (RFC 3339) or `text`."""

    __slots__ = ("kind", "value")

    def __init__(self, kind: str, value):
        self.kind = kind
        self.value = value

    @classmethod
    def integer(cls, value: int) -> "CursorValue":
        return cls("integer", int(value))

    @classmethod
    def datetime(cls, value: str) -> "CursorValue":
        return cls("datetime", value)

    @classmethod
    def text(cls, value: str) -> "CursorValue":
        return cls("text", value)

    def to_query_value(self) -> str:
        """The value as text, as an API query parameter wants it."""
        return str(self.value)

    def __eq__(self, other) -> bool:
        return isinstance(other, CursorValue) and (self.kind, self.value) == (other.kind, other.value)

    def __repr__(self) -> str:
        return f"CursorValue.{self.kind}({self.value!r})"


class CursorRange:
    """Records after `start`, up to and including `end`."""

    __slots__ = ("start", "end")

    def __init__(self, start: Optional[CursorValue] = None, end: Optional[CursorValue] = None):
        self.start = start
        self.end = end


class Partition:
    """An independent slice of a stream, read in its own instance."""

    def __init__(self, stream: str, key: Any = None, cursor_range: Optional[CursorRange] = None):
        self.stream = stream
        self.key = key
        self.cursor_range = cursor_range

    @classmethod
    def whole(cls, stream: str) -> "Partition":
        """The one partition of an unpartitioned stream (key `None`)."""
        return cls(stream)

    @classmethod
    def keyed(cls, stream: str, key: Any) -> "Partition":
        """A partition identified by `key` (any JSON value), the same in every run."""
        return cls(stream, key)

    def starting_at(self, start: Optional[CursorValue]) -> "Partition":
        """Where the partition starts; the host raises it to the saved cursor on incremental runs."""
        self.cursor_range = self.cursor_range or CursorRange()
        self.cursor_range.start = start
        return self

    def ending_at(self, end: Optional[CursorValue]) -> "Partition":
        """Where it ends (inclusive): a bounded partition the host checkpoints as a finished range."""
        self.cursor_range = self.cursor_range or CursorRange()
        self.cursor_range.end = end
        return self

    def cursor_start(self) -> Optional[CursorValue]:
        return self.cursor_range.start if self.cursor_range else None

    def cursor_end(self) -> Optional[CursorValue]:
        return self.cursor_range.end if self.cursor_range else None


class Page:
    """One page of records and the token of the next page (`None` ends the partition)."""

    def __init__(self, records: Optional[list[str]] = None, next_token: Any = None):
        self.records = records if records is not None else []
        self.next_token = next_token

    @classmethod
    def from_values(cls, records: Iterable[Any], next_token: Any = None) -> "Page":
        """A page of records given as Python values (dicts)."""
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
        return cls([dumps(r) for r in records], next_token)

    def next(self, token: Any) -> "Page":
        self.next_token = token
        return self


class WarmAnswer:
    """A sample answer to a request of a page read at build time (see `WarmUp`): what the host
    hands the step after it. `body` is the answer's body (a JSON value, or `bytes`/`str` as
    they are) or, with `records` (taken out, as `request.records(path)` would) or `forwarded`
    (how many the host kept, as `request.forwarded(path)`), what is left of it."""

    def __init__(
        self,
        body: Any = None,
        status: int = 200,
        headers: Iterable[tuple[str, str]] = (),
        records: Optional[Iterable[Any]] = None,
        forwarded: Optional[int] = None,
    ):
        self.body = body
        self.status = status
        self.headers = list(headers)
        self.records = None if records is None else list(records)
        self.forwarded = forwarded


class WarmUp:
    """A page of a stream read in steps that the SDK reads while the component is built, before
    the interpreter's snapshot is taken (see `Source.warm_up`): `config` (a dict, as the operator
    would write it), the `partition`, the page `token` (`None`: the first page) and one sample
    answer for each request its steps yield, in order."""

    def __init__(self, config: dict, partition: "Partition", token: Any = None, answers: Iterable[WarmAnswer] = ()):
        self.config = config
        self.partition = partition
        self.token = token
        self.answers = list(answers)


class WarmListing:
    """A stream's partition listing that the SDK runs while the component is built, before the
    interpreter's snapshot is taken (see `Source.warm_up`): `partition_batch` (so `partitions`)
    of `stream` with `config` (a dict, as the operator would write it) and `state`, each
    `send()` it makes answered by the next sample answer (`WarmAnswer`, its `body` the whole
    answer), in order. Only `send()` is answered; anything else the listing asks of the host
    ends it."""

    def __init__(self, config: dict, stream: str, answers: Iterable[WarmAnswer] = (), state: Any = None):
        self.config = config
        self.stream = stream
        self.answers = list(answers)
        self.state = state


class PartitionBatch:
    """Some partitions of a stream, the token of the next batch, and how many records the whole
    stream holds when the API says."""

    def __init__(self, partitions: list[Partition], next_token: Any = None, record_estimate: Optional[int] = None):
        self.partitions = partitions
        self.next_token = next_token
        self.record_estimate = record_estimate

    def next(self, token: Any) -> "PartitionBatch":
        self.next_token = token
        return self

    def with_record_estimate(self, records: Optional[int]) -> "PartitionBatch":
        self.record_estimate = records
        return self


def parse_json(what: str, text: Optional[str]) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as e:
        raise Error.system(f"the host sent invalid {what} JSON: {e}") from e


class JobStatus:
    """Where a report job is, as `AsyncJobs.poll_job` answers: `JobStatus.running()` (poll again
    later), `JobStatus.completed(download)` (what to read, handed to `read_result`: a download
    URL, a result id; any JSON value), `JobStatus.failed(message)` (the host may create a new
    job) or `JobStatus.unknown()` (the API does not know the job: the host creates a new one)."""

    __slots__ = ("kind", "value")

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    UNKNOWN = "unknown"

    def __init__(self, kind: str, value: Any = None):
        if kind not in (self.RUNNING, self.COMPLETED, self.FAILED, self.UNKNOWN):
            raise ValueError(f"unknown job status {kind!r}")
        self.kind = kind
        # The download of a completed job, the message of a failed one, else None.
        self.value = value

    @classmethod
    def running(cls) -> "JobStatus":
        return cls(cls.RUNNING)

    @classmethod
    def completed(cls, download: Any) -> "JobStatus":
        return cls(cls.COMPLETED, download)

    @classmethod
    def failed(cls, message: str) -> "JobStatus":
        return cls(cls.FAILED, str(message))

    @classmethod
    def unknown(cls) -> "JobStatus":
        return cls(cls.UNKNOWN)

    def __eq__(self, other) -> bool:
        return isinstance(other, JobStatus) and (self.kind, self.value) == (other.kind, other.value)

    def __repr__(self) -> str:
        return f"JobStatus.{self.kind}({'' if self.value is None else repr(self.value)})"
