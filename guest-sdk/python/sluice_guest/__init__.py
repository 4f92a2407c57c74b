"""Write Sluice data-source connectors in Python.

A connector subclasses `Source`, overriding at least `spec`, `streams` and `read_page`, and
exports it from its app module:

    import sluice_guest as sluice

    class MySource(sluice.Source):
        def spec(self):
            return {"type": "object", "required": ["base_url"]}

        def streams(self, config):
            return [sluice.Stream("items", {"type": "object"}).with_primary_key("id")]

        def read_page(self, config, partition, token):
            body = sluice.http.get_json(config["base_url"] + "/items")
            return sluice.Page.from_values(body["data"])

    Source, AsyncJobs, Resume = sluice.export_connector(MySource)

Build it in the `resumable-connector` world, as the Rust SDK builds every connector:
`componentize-py -d wit -w resumable-connector componentize -p guest-sdk/python app -o x.wasm`.
A connector some of whose streams are read through report jobs mixes in `AsyncJobs`
(`class MySource(sluice.Source, sluice.AsyncJobs)`); one whose page tokens stay valid across runs
names those streams in `resumable_streams`. (`Source = sluice.export(MySource)` exports the
`source` interface alone, for the plain `connector` world: `-w connector`.)

Every method is called with everything it needs: the host keeps page tokens, partitions, cursors
and job handles between calls, so a connector holds no state of its own (each call gets a fresh
object).
"""

import inspect
import json
from typing import Any, Optional

from . import http, log, paginate, slice
from .errors import Error, context
from .types import (
    CursorRange,
    CursorValue,
    JobStatus,
    Page,
    Partition,
    PartitionBatch,
    Stream,
    WarmAnswer,
    WarmListing,
    WarmUp,
)

__all__ = [
    "Source", "AsyncJobs", "export", "export_connector", "export_stepped_connector", "field", "Error", "context", "Stream", "Partition",
    "CursorValue", "CursorRange", "Page", "PartitionBatch", "JobStatus", "WarmUp", "WarmListing", "WarmAnswer", "http", "log", "paginate", "slice",
]


class Source:
    """A data-source connector. Only `spec`, `streams` and `read_page` have no default."""

    def parse_config(self, raw: dict) -> Any:
        """The connector's configuration, from the operator's config JSON (a dict). Raise
        `Error.config` (or use `field`) for a config that is not usable; the default keeps the dict."""
        return raw

    def spec(self) -> dict:
        """The JSON Schema of the config. Mark secret fields with `"airbyte_secret": True`."""
        raise NotImplementedError("a connector must implement spec()")

    def hosts(self, config) -> list[str]:
        """The `host:port` pairs this config needs to reach (see `http.host_port`)."""
        return []

    def check(self, config) -> None:
        """Tries the config against the API. The default accepts any config that parses."""

    def streams(self, config) -> list[Stream]:
        """The streams this config can read."""
        raise NotImplementedError("a connector must implement streams()")

    def partitions(self, config, stream: str, state: Optional[dict]) -> list[Partition]:
        """Slicing: the partitions of `stream`. The default is one partition covering it."""
        return [Partition.whole(stream)]

    def partition_batch(self, config, stream: str, state: Optional[dict], token: Any) -> PartitionBatch:
        """Like `partitions`, a batch at a time (set the batch's `next_token` to be called again),
        or to report how many records the stream holds."""
        return PartitionBatch(self.partitions(config, stream, state))

    def read_page(self, config, partition: Partition, token: Any) -> Page:
        """One page of `partition`: `token` is `None` for the first page, then the previous
        page's next token."""
        raise NotImplementedError("a connector must implement read_page()")

    def stepped_streams(self, config) -> list[str]:
        """The streams read in steps (see `export_stepped_connector`). The default: every
        stream when `read_page` is a generator (it yields its requests), but for job streams."""
        if not inspect.isgeneratorfunction(type(self).read_page):
            return []
        jobs = set(self.job_streams(config)) if isinstance(self, AsyncJobs) else set()
        return [s.name for s in self.streams(config) if s.name not in jobs]

    def partition_config_fields(self, config) -> Optional[list[str]]:
        """The top-level config fields reading a partition uses (contract 0.1.7, with
        `export_partition_config_connector`): the host then hands `read_page` and the job calls
        a config with only those, so a field only `partitions` reads (a list of the accounts to
        read, as long as the run has partitions) is not parsed again in every partition's fresh
        interpreter; `parse_config` must accept the config without the others. The default is
        None: every call gets the whole config."""
        return None

    def resumable_streams(self, config) -> list[str]:
        """The streams whose page tokens stay valid across runs (an offset, a page number, a cursor
        or next-page URL the API keeps): the host may then save a partition's next token after
        each page and resume the partition there after a crash, instead of reading it again from
        its start. The default is none."""
        return []

    def warm_up(self) -> list:
        """Pages of streams read in steps to read while the component is built, with sample
        answers (`WarmUp`), and partition listings (`WarmListing`): the SDK reads each a few
        times before the interpreter's snapshot is taken, so every instance starts with the code
        that reads pages and lists partitions already run (its bytecode specialised, its caches
        filled) instead of warming it up again in each step, or in the listing every run waits
        for before its first partition (2 ms of a run's start for the demo connector). They run
        with no host: their steps may only compute (no logging; a listing's `send()` is answered
        from its samples), and what they leave behind is in every instance, so keep nothing at
        module level. A page or listing that fails is skipped. The default is none."""
        return []


class AsyncJobs:
    """Streams read through report jobs, mixed into a `Source` subclass
    (`class MySource(sluice.Source, sluice.AsyncJobs)`) and exported with `export_connector`:
    the host creates a job for a partition, polls it, reads its result a page at a time and
    deletes it. It decides when: it keeps job slots, polls on timers, retries failed jobs as new
    ones, and keeps handles in its state so a resumed run polls the same jobs. A connector with
    job streams implements `create_job`, `poll_job` and `read_result`; the rest have defaults."""

    def job_streams(self, config) -> list[str]:
        """The streams read through jobs; their partitions come from `Source.partitions`."""
        return []

    def max_jobs(self, config) -> int:
        """Jobs the API allows at once (the operator may override it with `--max-jobs`)."""
        return 4

    def create_job(self, config, partition: Partition) -> Any:
        """Starts a job for a partition (its cursor range filled as for `read_page`); returns its
        handle: any JSON value later calls need (an id, a URL)."""
        raise NotImplementedError("a connector with job streams must implement create_job()")

    def poll_job(self, config, job: Any) -> JobStatus:
        """Where the job is now: a `JobStatus`."""
        raise NotImplementedError("a connector with job streams must implement poll_job()")

    def read_result(self, config, job: Any, download: Any, token: Any) -> Page:
        """One page of a completed job's result: `download` is what `poll_job` answered with
        `JobStatus.completed`; `token` is `None` first, then the previous page's next token."""
        raise NotImplementedError("a connector with job streams must implement read_result()")

    def abort_job(self, config, job: Any) -> None:
        """Stops a running job (it timed out, or the run was cancelled); by default, deletes it."""
        self.delete_job(config, job)

    def delete_job(self, config, job: Any) -> None:
        """Removes a job once its result was read; by default, nothing."""


_REQUIRED = object()
_TYPE_NAMES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", list: "an array", dict: "an object"}


def field(raw: dict, name: str, kind: type, default: Any = _REQUIRED) -> Any:
    """A config field of the given type (`str`, `int`, `float`, `bool`, `list` or `dict`), or
    `default` when absent or null; a missing required field or a wrong type is a config error."""
    value = raw.get(name)
    if value is None:
        if default is _REQUIRED:
            raise Error.config(f"invalid config: missing field `{name}`")
        return default
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if not ok:
        raise Error.config(f"invalid config: `{name}` must be {_TYPE_NAMES.get(kind, kind.__name__)}, got {json.dumps(value)}")
    return value


def export(source: type) -> type:
    """Makes the class the component exports as its `source` interface from a `Source` subclass,
    for the plain `connector` world. Assign it to `Source` in the app module:
    `Source = sluice.export(MySource)`."""
    from ._export import exporter

    return exporter(source)


def export_connector(source: type) -> tuple[type, type, type]:
    """Makes the three classes the component exports in the `resumable-connector` world (its
    `source`, `async-jobs` and `resume` interfaces) from a `Source` subclass, with or without
    `AsyncJobs` mixed in. Assign them in the app module:
    `Source, AsyncJobs, Resume = sluice.export_connector(MySource)`."""
    from ._export import connector_exporter

    return connector_exporter(source)


def export_partition_config_connector(source: type) -> tuple[type, type, type, type, type, type]:
    """As `export_stepped_connector`, and the `state-shape` (no stream shaped) and
    `partition-config` interfaces as well, for the `partition-config-connector` world (contract
    0.1.7), so the host hands partitions only the config fields `partition_config_fields` names:
    `Source, AsyncJobs, Resume, SteppedPages, StateShape, PartitionConfig =
    sluice.export_partition_config_connector(MySource)`."""
    from ._export import partition_config_connector_exporter

    return partition_config_connector_exporter(source)


def export_stepped_connector(source: type) -> tuple[type, type, type, type]:
    """As `export_connector`, and the `stepped-pages` interface as well, for the
    `stepped-connector` world (contract 0.1.5):
    `Source, AsyncJobs, Resume, SteppedPages = sluice.export_stepped_connector(MySource)`.

    A `read_page` written as a generator yields its requests instead of sending them
    (`answer = yield request`, or `yield request.records(path)`), and the host sends each one
    between two steps of the page, with no interpreter kept while the answer is on its way; each
    step runs `read_page` again from its start with the answers so far, so it must ask for the
    same requests given the same answers (it does when it keeps no state, as every connector
    must). Sixteen partitions waiting on an API then need no sixteen interpreters."""
    from ._export import stepped_connector_exporter

    return stepped_connector_exporter(source)
