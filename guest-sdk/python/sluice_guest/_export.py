"""Glue between the WIT bindings componentize-py generates and `Source`; not part of the API.

The `async-jobs` bindings exist only in the worlds that export that interface, so they are
imported by `connector_exporter` alone: `exporter` keeps working in the plain `connector` world."""

import inspect
import json
import sys
import traceback

from componentize_py_types import Err, Ok
from wit_world.imports import types as wit

from . import _warming
from .errors import CONFIG, TRANSIENT, Error
from .http import Later
from .types import CursorRange, CursorValue, JobStatus, Page, Partition, WarmAnswer, WarmListing, _compact, parse_json

_CURSOR_TO_WIT = {"integer": wit.CursorValue_Integer, "datetime": wit.CursorValue_Datetime, "text": wit.CursorValue_Text}


def _cursor_to_wit(value):
    return None if value is None else _CURSOR_TO_WIT[value.kind](value.value)


def _cursor_from_wit(value):
    if value is None:
        return None
    if isinstance(value, wit.CursorValue_Integer):
        return CursorValue.integer(value.value)
    if isinstance(value, wit.CursorValue_Datetime):
        return CursorValue.datetime(value.value)
    return CursorValue.text(value.value)


def _partition_to_wit(p: Partition):
    r = p.cursor_range
    cursor_range = None if r is None else wit.CursorRange(_cursor_to_wit(r.start), _cursor_to_wit(r.end))
    return wit.Partition(p.stream, _compact(p.key), cursor_range)


def _partition_from_wit(p) -> Partition:
    r = p.cursor_range
    cursor_range = None if r is None else CursorRange(_cursor_from_wit(r.start), _cursor_from_wit(r.end))
    return Partition(p.stream, parse_json("partition key", p.key), cursor_range)


def _token(value):
    return None if value is None else json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _page_to_wit(page: Page):
    return wit.Page(list(page.records), _token(page.next_token))


def _checked_page(page) -> Page:
    if not isinstance(page, Page):
        raise Error.system(f"read_page returned {page!r}, not a Page")
    return page


def _read_page(source_cls, config, config_json: str, partition, token):
    """What the connector's `read_page` returns for the host's arguments: a page, or a generator."""
    parsed = config(config_json)
    return source_cls().read_page(parsed, _partition_from_wit(partition), parse_json("page token", token))


def _page_now(result) -> Page:
    """What `read_page` returned; for a generator, run with each request it yields sent now."""
    if not inspect.isgenerator(result):
        return _checked_page(result)
    try:
        later = Later.of(next(result))
        while True:
            try:
                answer = later.send_now()
            except Error as e:
                later = Later.of(result.throw(e))
                continue
            later = Later.of(result.send(answer))
    except StopIteration as stop:
        return _checked_page(stop.value)


def _step(result, answers, stepped_pages):
    """One step of a `read_page` generator: run again from its start, each request it yields
    answered by the host's answers so far; the next request it yields, or its page. A
    `read_page` that is not a generator ends the page at once."""
    if not inspect.isgenerator(result):
        return stepped_pages.Step_Page(_page_to_wit(_checked_page(result)))
    try:
        later = Later.of(next(result))
        for answer in answers:
            if isinstance(answer, Err):
                later = Later.of(result.throw(later.failed(answer.value)))
            else:
                later = Later.of(result.send(later.answered(answer.value)))
    except StopIteration as stop:
        return stepped_pages.Step_Page(_page_to_wit(_checked_page(stop.value)))
    result.close()
    if later.use == Later.RECORDS:
        use = stepped_pages.BodyUse_Records(later.path)
    elif later.use == Later.FORWARD:
        use = stepped_pages.BodyUse_Forward(later.path)
    else:
        use = stepped_pages.BodyUse_Whole()
    return stepped_pages.Step_Send(stepped_pages.Outgoing(later.wit_request(), use))


def _job_status_to_wit(status: JobStatus, async_jobs):
    """The WIT `job-status` of what `poll_job` answered (`async_jobs`: the generated bindings)."""
    if not isinstance(status, JobStatus):
        raise Error.system(f"poll_job answered {status!r}, not a JobStatus")
    if status.kind == JobStatus.RUNNING:
        return async_jobs.JobStatus_Running()
    if status.kind == JobStatus.COMPLETED:
        return async_jobs.JobStatus_Completed(_compact(status.value))
    if status.kind == JobStatus.FAILED:
        return async_jobs.JobStatus_Failed(str(status.value))
    return async_jobs.JobStatus_Unknown()


_MAX_U32 = 2**32 - 1


def _job_settings(source, config, async_jobs):
    """What `settings` answers: the job streams and how many jobs at once. A connector without
    `AsyncJobs`, or with no job streams for this config, names none and asks for no job slots,
    as the Rust SDK's `export_source!` does."""
    from . import AsyncJobs

    streams = list(source.job_streams(config)) if isinstance(source, AsyncJobs) else []
    if not streams:
        return async_jobs.JobSettings([], 0)
    max_jobs = source.max_jobs(config)
    if not isinstance(max_jobs, int) or isinstance(max_jobs, bool) or not 0 <= max_jobs <= _MAX_U32:
        raise Error.system(f"max_jobs answered {max_jobs!r}, not a number of jobs")
    return async_jobs.JobSettings(streams, max_jobs)


def _to_wit_error(e: Error):
    if e.kind == CONFIG:
        return wit.Error_Config(e.message)
    if e.kind == TRANSIENT:
        return wit.Error_Transient(e.message)
    return wit.Error_System(e.message)


def _guard(call):
    """Runs a call into the connector; its errors become WIT errors. Any other exception is a
    bug: a system error naming the exception and where it was raised."""
    try:
        return call()
    except Error as e:
        raise Err(_to_wit_error(e)) from None
    except Exception as e:
        frames = traceback.extract_tb(e.__traceback__)
        where = f" ({frames[-1].filename.rsplit('/', 1)[-1]}, line {frames[-1].lineno}, in {frames[-1].name})" if frames else ""
        raise Err(wit.Error_System(f"the connector raised {type(e).__name__}: {e}{where}")) from None


def _config_parser(source_cls):
    """Reads the config text the host passes to every call into what the connector wants."""

    def config(text: str):
        try:
            raw = json.loads(text)
        except ValueError as e:
            raise Error.config(f"invalid config: {e}") from None
        if not isinstance(raw, dict):
            raise Error.config("invalid config: expected a JSON object")
        return source_cls().parse_config(raw)

    return config


def exporter(source_cls):
    config = _config_parser(source_cls)

    class Export:
        def spec(self) -> str:
            return json.dumps(source_cls().spec(), separators=(",", ":"))

        def capabilities(self, config_json: str):
            return _guard(lambda: wit.CapabilitySet(list(source_cls().hosts(config(config_json)))))

        def check(self, config_json: str) -> None:
            return _guard(lambda: source_cls().check(config(config_json)))

        def discover(self, config_json: str):
            def run():
                streams = source_cls().streams(config(config_json))
                return [
                    wit.Stream(s.name, json.dumps(s.json_schema, separators=(",", ":")), s.primary_key, s.cursor_field)
                    for s in streams
                ]

            return _guard(run)

        def partitions(self, config_json: str, stream: str, state, token):
            def run():
                parsed = config(config_json)
                batch = source_cls().partition_batch(
                    parsed, stream, parse_json("state", state), parse_json("partition token", token)
                )
                return wit.PartitionBatch(
                    [_partition_to_wit(p) for p in batch.partitions], _token(batch.next_token), batch.record_estimate
                )

            return _guard(run)

        def read_page(self, config_json: str, partition, token):
            def run():
                return _page_to_wit(_page_now(_read_page(source_cls, config, config_json, partition, token)))

            return _guard(run)

    Export.__name__ = Export.__qualname__ = "Source"
    return Export


def connector_exporter(source_cls):
    """The `Source`, `AsyncJobs` and `Resume` classes of the `resumable-connector` world."""
    from wit_world.exports import async_jobs

    from . import AsyncJobs as AsyncJobsMixin

    config = _config_parser(source_cls)

    def with_jobs():
        # Checked before each call, so a connector without job streams says so plainly.
        source = source_cls()
        if not isinstance(source, AsyncJobsMixin):
            raise Error.system("this connector reads no stream through report jobs")
        return source

    class AsyncJobsExport:
        def settings(self, config_json: str):
            return _guard(lambda: _job_settings(source_cls(), config(config_json), async_jobs))

        def create_job(self, config_json: str, partition) -> str:
            def run():
                parsed = config(config_json)
                return _compact(with_jobs().create_job(parsed, _partition_from_wit(partition)))

            return _guard(run)

        def poll_job(self, config_json: str, job: str):
            def run():
                parsed = config(config_json)
                status = with_jobs().poll_job(parsed, parse_json("job handle", job))
                return _job_status_to_wit(status, async_jobs)

            return _guard(run)

        def read_result(self, config_json: str, job: str, download: str, token):
            def run():
                parsed = config(config_json)
                handle, download_value = parse_json("job handle", job), parse_json("job download", download)
                page = with_jobs().read_result(parsed, handle, download_value, parse_json("page token", token))
                return _page_to_wit(page)

            return _guard(run)

        def abort_job(self, config_json: str, job: str) -> None:
            return _guard(lambda: with_jobs().abort_job(config(config_json), parse_json("job handle", job)))

        def delete_job(self, config_json: str, job: str) -> None:
            return _guard(lambda: with_jobs().delete_job(config(config_json), parse_json("job handle", job)))

    class ResumeExport:
        def resumable_streams(self, config_json: str) -> list[str]:
            return _guard(lambda: list(source_cls().resumable_streams(config(config_json))))

    AsyncJobsExport.__name__ = AsyncJobsExport.__qualname__ = "AsyncJobs"
    ResumeExport.__name__ = ResumeExport.__qualname__ = "Resume"
    return exporter(source_cls), AsyncJobsExport, ResumeExport


def stepped_connector_exporter(source_cls):
    """The classes of the `stepped-connector` world: those of `connector_exporter` and
    `SteppedPages`."""
    from wit_world.exports import stepped_pages

    config = _config_parser(source_cls)

    class SteppedPagesExport:
        def stepped_streams(self, config_json: str) -> list[str]:
            return _guard(lambda: list(source_cls().stepped_streams(config(config_json))))

        def read_step(self, config_json: str, partition, token, answers):
            def run():
                return _step(_read_page(source_cls, config, config_json, partition, token), answers, stepped_pages)

            return _guard(run)

    SteppedPagesExport.__name__ = SteppedPagesExport.__qualname__ = "SteppedPages"
    exported = connector_exporter(source_cls)
    _warm_up(source_cls, SteppedPagesExport().read_step, exported[0]().partitions, stepped_pages)
    return (*exported, SteppedPagesExport)


#: How many times each warm-up page is read: enough for CPython's adaptive interpreter to
#: specialise the instructions it runs (it rewrites one after a few runs).
WARM_UP_ROUNDS = 16


def _warm_body(answer: WarmAnswer) -> bytes:
    """A sample answer's body as the host hands it over."""
    body = answer.body
    if body is None:
        # Nothing given: an empty body, or with records taken out, the rest of an object.
        body = b"" if answer.records is None and answer.forwarded is None else b"{}"
    elif not isinstance(body, (bytes, str)):
        body = _compact(body)
    return body.encode() if isinstance(body, str) else body


def _warm_answer(answer: WarmAnswer, stepped_pages):
    body = _warm_body(answer)
    records = None if answer.records is None else [r if isinstance(r, str) else _compact(r) for r in answer.records]
    return Ok(stepped_pages.Answer(answer.status, list(answer.headers), records, answer.forwarded, body))


def _warm_up(source_cls, read_step, partitions, stepped_pages):
    """Reads the pages and runs the listings `Source.warm_up` names, with their sample answers,
    as the host would: the app module is imported while the component is built, so this runs
    before the snapshot every instance starts from. A page or listing that fails stops there;
    nothing is raised (it only warms)."""
    try:
        warm = source_cls().warm_up()
        pages = [
            (
                json.dumps(page.config),
                _partition_to_wit(page.partition),
                _token(page.token),
                [_warm_answer(answer, stepped_pages) for answer in page.answers],
            )
            for page in warm
            if not isinstance(page, WarmListing)
        ]
        listings = [
            (json.dumps(listing.config), listing.stream, _token(listing.state), [_sent(a) for a in listing.answers])
            for listing in warm
            if isinstance(listing, WarmListing)
        ]
    except Exception as e:
        print(f"sluice_guest: warm_up() failed, nothing is warmed up: {type(e).__name__}: {e}", file=sys.stderr)
        return
    _warming.active = True
    try:
        for _ in range(WARM_UP_ROUNDS if pages or listings else 0):
            for config, partition, token, answers in pages:
                for taken in range(len(answers) + 1):
                    try:
                        step = read_step(config, partition, token, answers[:taken])
                    except Exception:
                        break
                    if not isinstance(step, stepped_pages.Step_Send):
                        break
            for config, stream, state, answers in listings:
                _warming.samples = list(answers)
                try:
                    partitions(config, stream, state, None)
                except Exception:
                    pass
    finally:
        _warming.active = False
        _warming.samples = []


def _sent(answer: WarmAnswer):
    """A listing's sample answer as `send()` gives it: status, headers, the whole body's bytes."""
    return answer.status, list(answer.headers), _warm_body(answer)


def partition_config_connector_exporter(source_cls):
    """The classes of the `partition-config-connector` world: those of
    `stepped_connector_exporter`, `StateShape` (no stream's state is shaped) and
    `PartitionConfig`."""
    config = _config_parser(source_cls)

    class StateShapeExport:
        def shaped_streams(self, config_json: str) -> list[str]:
            return []

        def to_host(self, config_json: str, stream: str, state: str):
            return None

        def from_host(self, config_json: str, stream: str, state: str) -> str:
            return state

    class PartitionConfigExport:
        def partition_fields(self, config_json: str):
            def run():
                fields = source_cls().partition_config_fields(config(config_json))
                return None if fields is None else [str(f) for f in fields]

            return _guard(run)

    StateShapeExport.__name__ = StateShapeExport.__qualname__ = "StateShape"
    PartitionConfigExport.__name__ = PartitionConfigExport.__qualname__ = "PartitionConfig"
    return (*stepped_connector_exporter(source_cls), StateShapeExport, PartitionConfigExport)
