//! AsyncRetriever on the host's job orchestrator: creating, polling, downloading, aborting and
//! deleting are the manifest's requesters; when to poll, how many jobs run at once and what is
//! retried are the host's. A job handle carries what the later requests need (the creation
//! answer and the partition's slice), so nothing is kept between calls.

use crate::engine::{Engine, Scope, kind};
use crate::records::{self, Shaper};
use crate::requester::{self, Answer, Options};
use crate::retrieve::scope_of;
use crate::slicing::Cursor;
use serde_json::{Value, json};
use sluice_guest::{Error, JobStatus, Page, Partition, Result};

pub fn is_async(stream: &Value) -> bool {
    kind(&stream["retriever"]) == "AsyncRetriever"
}

fn response_json(response: &sluice_guest::http::Response) -> Value {
    let (mut body, headers) = requester::response_context(response);
    if let Value::Object(map) = &mut body {
        map.entry("headers").or_insert(headers);
    }
    body
}

fn scope_from(job: &Value) -> Scope {
    let slice = &job["slice"];
    let take = |k: &str| slice.get(k).and_then(Value::as_object).cloned().unwrap_or_default();
    Scope { partition: take("partition"), interval: take("interval"), extra: take("extra"), next_page_token: None }
}

fn send(
    engine: &Engine,
    name: &str,
    retriever: &Value,
    field: &str,
    scope: &Scope,
    more: Vec<(&str, Value)>,
) -> Result<Option<sluice_guest::http::Response>> {
    let Some(requester) = retriever.get(field).filter(|r| !r.is_null()) else { return Ok(None) };
    let path = format!("streams.{name}.retriever.{field}");
    // The job's answers are in the context of every template of the requester.
    match requester::send(engine, requester, scope, &Options::default(), &path, &more)? {
        Answer::Ok(r) => Ok(Some(r)),
        Answer::Ignored => Ok(None),
        // A job's requests are not paginated: nothing to reset.
        Answer::ResetPagination(error) => Err(error),
    }
}

pub fn create_job(engine: &Engine, partition: &Partition) -> Result<Value> {
    let stream = engine.stream(&partition.stream)?;
    let retriever = &stream["retriever"];
    let mut scope = scope_of(partition);
    if let Some(cursor) = Cursor::of(engine, stream)? {
        let start = match partition.cursor_start() {
            Some(v) => cursor.granularity.add_to(&cursor.from_host(v)?),
            None => cursor.start(engine)?,
        };
        let end = match partition.cursor_end() {
            Some(v) => cursor.from_host(v)?,
            None => cursor.end(engine)?,
        };
        scope.interval = cursor.interval(&start, &end);
    }
    let response = send(engine, &partition.stream, retriever, "creation_requester", &scope, Vec::new())?
        .ok_or_else(|| Error::system(format!("stream {}: the job's creation answer was ignored", partition.stream)))?;
    Ok(json!({
        "stream": partition.stream,
        "creation_response": response_json(&response),
        "slice": {"partition": scope.partition, "interval": scope.interval, "extra": scope.extra},
    }))
}

fn job_stream<'e>(engine: &'e Engine, job: &Value) -> Result<(&'e Value, String)> {
    let name =
        job["stream"].as_str().ok_or_else(|| Error::system(format!("a job handle without its stream: {job}")))?;
    Ok((engine.stream(name)?, name.to_string()))
}

pub fn poll_job(engine: &Engine, job: &Value) -> Result<JobStatus> {
    let (stream, name) = job_stream(engine, job)?;
    let retriever = &stream["retriever"];
    let scope = scope_from(job);
    let creation = job["creation_response"].clone();
    let response =
        send(engine, &name, retriever, "polling_requester", &scope, vec![("creation_response", creation.clone())])?;
    let Some(response) = response else { return Ok(JobStatus::Unknown) };
    let polling = response_json(&response);
    let ctx = engine.context(
        retriever,
        &scope,
        vec![("creation_response", creation.clone()), ("polling_response", polling.clone())],
    );
    let mut found = Vec::new();
    records::extract(engine, retriever.get("status_extractor"), polling.clone(), &ctx, &mut found)?;
    let status = found.first().map(crate::engine::plain).unwrap_or_default();
    let mapping = &retriever["status_mapping"];
    let is = |state: &str| {
        mapping
            .get(state)
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(|s| crate::engine::plain(s) == status))
    };
    if is("completed") {
        // Where the results are: the download targets, extracted now from the polling answer.
        let mut targets = Vec::new();
        if let Some(target_requester) = retriever.get("download_target_requester").filter(|r| !r.is_null()) {
            let _ = target_requester;
            let answer = send(
                engine,
                &name,
                retriever,
                "download_target_requester",
                &scope,
                vec![("creation_response", creation.clone()), ("polling_response", polling.clone())],
            )?;
            if let Some(answer) = answer {
                records::extract(
                    engine,
                    retriever.get("download_target_extractor"),
                    response_json(&answer),
                    &ctx,
                    &mut targets,
                )?;
            }
        } else if retriever.get("download_target_extractor").is_some_and(|e| !e.is_null()) {
            records::extract(engine, retriever.get("download_target_extractor"), polling.clone(), &ctx, &mut targets)?;
        } else {
            targets.push(Value::Null);
        }
        return Ok(JobStatus::Completed(json!({"targets": targets, "polling_response": polling})));
    }
    if is("failed") {
        return Ok(JobStatus::Failed(format!("the job's status is {status:?}")));
    }
    if is("timeout") {
        return Ok(JobStatus::Failed(format!("the job timed out on the API's side (status {status:?})")));
    }
    if is("running") {
        return Ok(JobStatus::Running);
    }
    if is("skipped") {
        return Ok(JobStatus::Completed(json!({"targets": [], "polling_response": polling})));
    }
    Err(Error::system(format!("stream {name}: the job's status {status:?} is in none of status_mapping's lists")))
}

/// One download target per call (with its pages when there is a download paginator).
pub fn read_result(engine: &Engine, job: &Value, download: &Value, token: Option<Value>) -> Result<Page> {
    let (stream, name) = job_stream(engine, job)?;
    let retriever = &stream["retriever"];
    let scope = scope_from(job);
    let targets = download["targets"].as_array().cloned().unwrap_or_default();
    let index = token.as_ref().and_then(|t| t.get("target")).and_then(Value::as_u64).unwrap_or(0) as usize;
    let Some(target) = targets.get(index) else { return Ok(Page { records: Vec::new(), next_token: None }) };
    let creation = job["creation_response"].clone();
    let polling = download["polling_response"].clone();
    let more = vec![
        ("creation_response", creation.clone()),
        ("polling_response", polling.clone()),
        ("download_target", target.clone()),
    ];
    let decoder = retriever.get("download_decoder").or(retriever.get("decoder"));
    if let Some(lines) = by_lines(decoder, retriever.get("download_extractor")) {
        let reading = Reading { index, last: index + 1 >= targets.len(), token: token.as_ref() };
        return read_streamed(engine, (stream, &name), &scope, &more, decoder, lines, reading);
    }
    let response = send(engine, &name, retriever, "download_requester", &scope, more.clone())?;
    let mut records = Vec::new();
    if let Some(response) = response {
        let docs = records::decode(decoder, &response.body, &response.url)?;
        let ctx = engine.context(retriever, &scope, more);
        for doc in docs {
            records::extract(engine, retriever.get("download_extractor"), doc, &ctx, &mut records)?;
        }
    }
    let shaper = Shaper::of(engine, stream, &name)?;
    let next = (index + 1 < targets.len()).then(|| json!({"target": index + 1}));
    Ok(Page { records: shaper.texts(records, &scope, &name)?, next_token: next })
}

/// Lines of a download handed on per `read_result` call.
const LINES_PER_PAGE: u32 = 5000;

/// Which line format a download is read in a piece at a time: JSON lines or CSV taken whole (no
/// gzip, no field path). Others are read whole, under the host's response cap.
#[derive(Clone, Copy, PartialEq)]
enum LineFormat {
    Jsonl,
    Csv,
}

fn by_lines(decoder: Option<&Value>, extractor: Option<&Value>) -> Option<LineFormat> {
    let whole = extractor.is_none_or(|e| e.get("field_path").and_then(Value::as_array).is_none_or(Vec::is_empty));
    match decoder.map(kind) {
        Some("JsonlDecoder") if whole => Some(LineFormat::Jsonl),
        Some("CsvDecoder") if whole => Some(LineFormat::Csv),
        _ => None,
    }
}

/// Where a streamed download is: which target, and the page token of the last call.
struct Reading<'t> {
    index: usize,
    last: bool,
    token: Option<&'t Value>,
}

/// The next lines of a download target, read from the body the host holds open (the token names
/// it, with the lines read so far and, for CSV, the header). A new instance (a retry) finds the
/// body gone and opens it again, skipping what was read.
fn read_streamed(
    engine: &Engine,
    (stream, name): (&Value, &str),
    scope: &Scope,
    more: &[(&str, Value)],
    decoder: Option<&Value>,
    format: LineFormat,
    reading: Reading,
) -> Result<Page> {
    use sluice_guest::http::Body;
    let retriever = &stream["retriever"];
    let requester = &retriever["download_requester"];
    let path = format!("streams.{name}.retriever.download_requester");
    let token = reading.token.filter(|t| t.get("body").is_some());
    let mut read = token.and_then(|t| t.get("lines")).and_then(Value::as_u64).unwrap_or(0);
    let mut header = token.and_then(|t| t.get("header")).and_then(Value::as_str).map(str::to_string);
    let open = || -> Result<Body> { Ok(requester::open(engine, requester, scope, &path, more)?.body) };
    let mut body = match token.and_then(|t| t.get("body")).and_then(Value::as_u64) {
        Some(handle) => Body::from_handle(handle as u32),
        None => open()?,
    };
    let mut lines = body.read_lines(LINES_PER_PAGE)?;
    if lines.is_none() {
        // Opened again: the lines already handed on are skipped (and the CSV header with them).
        body = open()?;
        let mut skip = read + u64::from(header.is_some());
        lines = body.read_lines(LINES_PER_PAGE)?;
        while let Some(l) = &lines {
            if skip < u64::from(l.count) || l.end {
                break;
            }
            skip -= u64::from(l.count);
            lines = body.read_lines(LINES_PER_PAGE)?;
        }
        if let Some(l) = lines.as_mut() {
            let rest: String = l.text.split_inclusive('\n').skip(skip as usize).collect();
            l.count -= skip.min(u64::from(l.count)) as u32;
            l.text = rest;
        }
    }
    let lines = lines.ok_or_else(|| Error::system(format!("stream {name}: the download closed before its end")))?;
    let url = format!("streams.{name} download");
    let mut text = lines.text.as_str();
    let mut count = u64::from(lines.count);
    if format == LineFormat::Csv && header.is_none() {
        let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
        header = Some(first.trim_end_matches('\r').to_string());
        text = rest;
        count = count.saturating_sub(1);
    }
    let docs = match format {
        LineFormat::Jsonl => records::jsonl(text, &url)?,
        LineFormat::Csv => {
            let with_header = format!("{}\n{text}", header.as_deref().unwrap_or_default());
            records::decode(decoder, with_header.as_bytes(), &url)?
        }
    };
    read += count;
    let shaper = Shaper::of(engine, stream, name)?;
    let out = shaper.texts(docs, scope, name)?;
    let next = match (lines.end, reading.last) {
        (false, _) => Some(json!({"target": reading.index, "body": body.handle(), "lines": read, "header": header})),
        (true, false) => Some(json!({"target": reading.index + 1})),
        (true, true) => None,
    };
    Ok(Page { records: out, next_token: next })
}

pub fn end_job(engine: &Engine, job: &Value, abort: bool) -> Result<()> {
    let (stream, name) = job_stream(engine, job)?;
    let retriever = &stream["retriever"];
    let scope = scope_from(job);
    let field = if abort { "abort_requester" } else { "delete_requester" };
    send(engine, &name, retriever, field, &scope, vec![("creation_response", job["creation_response"].clone())])?;
    Ok(())
}

/// `max_concurrent_async_job_count`, or one job at a time.
pub fn max_jobs(engine: &Engine) -> u32 {
    let ctx = engine.context(&engine.loaded().root, &Scope::default(), Vec::new());
    match engine.value(engine.loaded().root.get("max_concurrent_async_job_count"), &ctx) {
        Ok(Value::Number(n)) => n.as_u64().map_or(1, |n| n.clamp(1, 1000) as u32),
        Ok(Value::String(s)) => s.parse().unwrap_or(1),
        _ => 1,
    }
}
