//! Reading one partition: the pagination loop in a fresh instance, and the checks every page
//! passes. Listing a stream's partitions, batch by batch. The scheduler decides what runs when.

use crate::bindings::{CursorRange, CursorValue, Partition, PartitionBatch, Stream};
use crate::data::protocol::{self, Output, OutputClosed, PageLines};
use crate::data::state::{self, StreamCursor};
use crate::guest::connector::{CallError, Connector, Instance, ReadPage};
use crate::guest::limits::Limits;
use crate::run::logs::emit_logs;
use crate::run::progress::Progress;
use crate::run::steps::{self, Steps};
use serde_json::Value;
use std::cmp::Ordering;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use tokio::sync::mpsc;

/// A stream chosen for reading.
#[derive(Debug, Clone)]
pub struct SelectedStream {
    pub stream: Stream,
    /// `Some(path)` reads incrementally on that cursor field.
    pub cursor_field: Option<Vec<String>>,
    pub saved_state: Option<Value>,
    /// Top-level fields left out of every record (and the SCHEMA): a Singer catalog's
    /// deselected properties, never a key or the cursor.
    pub excluded: Arc<[String]>,
}

impl SelectedStream {
    /// The stream as its SCHEMA describes it: without the excluded properties.
    pub fn described(&self) -> Stream {
        let mut stream = self.stream.clone();
        if !self.excluded.is_empty()
            && let Ok(mut schema) = serde_json::from_str::<Value>(&stream.json_schema)
            && let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut)
        {
            properties.retain(|name, _| !self.excluded.contains(name));
            stream.json_schema = schema.to_string();
        }
        stream
    }
}

/// What the read path does with each record besides checking it: the cursor field whose largest
/// value it tracks, and the fields it leaves out.
#[derive(Clone, Copy, Default)]
pub struct RecordRules<'a> {
    pub cursor_field: Option<&'a [String]>,
    pub excluded: &'a [String],
}

#[derive(Debug, Clone, Default)]
pub struct StreamSummary {
    pub name: String,
    pub records: u64,
    pub partitions: u64,
    pub failed_partitions: u64,
    /// Partitions a previous run had finished (bounded ranges in the saved state).
    pub skipped_partitions: u64,
    /// The stream could not even start (bad state, partition listing failed).
    pub failed: bool,
    /// Report jobs created again after one failed, timed out or was lost.
    pub job_retries: u64,
    /// Partitions another shard reads (`--shard`).
    pub other_shards: u64,
}

impl StreamSummary {
    pub fn complete(&self) -> bool {
        !self.failed && self.failed_partitions == 0
    }

    /// The partitions listed by what became of them: `read`, `failed`, `already_finished` (by
    /// a previous run), `other_shard`.
    pub fn partitions_by_outcome(&self) -> [(&'static str, u64); 4] {
        let read = self.partitions - self.failed_partitions - self.skipped_partitions - self.other_shards;
        [
            ("read", read),
            ("failed", self.failed_partitions),
            ("already_finished", self.skipped_partitions),
            ("other_shard", self.other_shards),
        ]
    }
}

/// How a partition ended, when the guest did not fail it.
#[derive(Debug, Clone, Default)]
pub struct PartitionDone {
    pub records: u64,
    /// The largest cursor value written, when asked to track one.
    pub max_cursor: Option<Value>,
}

/// Calls that reach the guest and forward what it logged.
async fn forward_logs<T>(
    out: &Output,
    instance: &mut Instance,
    result: Result<T, CallError>,
) -> Result<Result<T, CallError>, OutputClosed> {
    emit_logs(out, instance.take_logs()).await?;
    Ok(result)
}

/// What the listing of a stream's partitions hands to the scheduler.
#[derive(Debug)]
pub enum Listed {
    Partition(Partition),
    /// The connector's estimate of the records in the whole stream.
    Estimate(u64),
}

/// Lists a stream's partitions batch by batch, sending each batch on as soon as it is checked,
/// so reading can start before the listing ends.
pub async fn list_partitions(
    connector: &Connector,
    out: &Output,
    limits: &Limits,
    selected: &SelectedStream,
    partitions: mpsc::Sender<Listed>,
) -> Result<Result<(), CallError>, OutputClosed> {
    let name = &selected.stream.name;
    // The run-level calls' instance when it is spare (the first listing), else a fresh one.
    let mut instance = match connector.run_level_instance().await {
        Ok(i) => i,
        Err(e) => return Ok(Err(e)),
    };
    let state = selected.saved_state.as_ref().map(Value::to_string);
    let mut token: Option<String> = None;
    let mut seen = TokenGuard::new(limits.max_token_bytes);
    let mut keys = KeyGuard::default();
    for _ in 0..limits.max_listing_calls_per_stream {
        let result = instance.partitions(&connector.config, name, state.as_ref(), token.as_ref()).await;
        let mut batch = match forward_logs(out, &mut instance, result).await? {
            Ok(b) => b,
            Err(e) => return Ok(Err(e)),
        };
        let Some(next) = batch.next_token.take() else {
            // The last batch: the listing's instance is let go before its partitions are
            // handed over, so the pool slot it held is free for their first instances.
            drop(instance);
            return hand_over(batch, name, limits, &mut keys, &partitions).await.map(|r| r.map(|_| ()));
        };
        match hand_over(batch, name, limits, &mut keys, &partitions).await? {
            Ok(true) => {}
            done => return Ok(done.map(|_| ())),
        }
        if let Err(e) = seen.check(&next) {
            return Ok(Err(e));
        }
        token = Some(next);
    }
    Ok(Err(contract(format!("the partition listing did not end after {} calls", limits.max_listing_calls_per_stream))))
}

/// Checks a batch's partitions and hands them to the scheduler, then its estimate; `false` once
/// the stream stopped listening (it is shutting down: nothing more to list).
async fn hand_over(
    batch: PartitionBatch,
    name: &str,
    limits: &Limits,
    keys: &mut KeyGuard,
    partitions: &mpsc::Sender<Listed>,
) -> Result<Result<bool, CallError>, OutputClosed> {
    for mut p in batch.partitions {
        if p.stream != name {
            return Ok(Err(contract(format!("a partition of stream {name} names stream {:?}", p.stream))));
        }
        let key = match serde_json::from_str::<Value>(&p.key) {
            Ok(key) => key,
            Err(e) => {
                return Ok(Err(contract(format!(
                    "partition key is not valid JSON ({e}): {}",
                    protocol::preview(&p.key)
                ))));
            }
        };
        // From here on the key is in one spelling (compact, in the guest's order of fields): the
        // state, the resumption and the scheduler match keys by their text without parsing
        // them again, once or more for every partition.
        let text = key.to_string();
        if let Err(e) = keys.check(&text, limits.max_partitions_per_stream) {
            return Ok(Err(e));
        }
        p.key = text;
        if let Err(e) = check_range(&p) {
            return Ok(Err(e));
        }
        if partitions.send(Listed::Partition(p)).await.is_err() {
            return Ok(Ok(false));
        }
    }
    if let Some(estimate) = batch.record_estimate
        && partitions.send(Listed::Estimate(estimate)).await.is_err()
    {
        return Ok(Ok(false));
    }
    Ok(Ok(true))
}

/// A bounded partition's range must run forward in one kind of cursor value: the host saves
/// it as a finished range, and a range it could not read back would break every later run.
fn check_range(partition: &Partition) -> Result<(), CallError> {
    let Some(CursorRange { start: Some(start), end: Some(end) }) = &partition.cursor_range else { return Ok(()) };
    let (start, end) = (cursor_to_json(start), cursor_to_json(end));
    let why = if state::CursorKind::of(&start) != state::CursorKind::of(&end) {
        "starts and ends in different kinds of cursor value"
    } else if state::compare(&start, &end) == Ordering::Greater {
        "ends before it starts"
    } else {
        return Ok(());
    };
    Err(contract(format!(
        "partition {} of stream {} has a cursor range ({start}, {end}] that {why}",
        partition.key, partition.stream
    )))
}

/// Catches a listing that repeats itself: each partition key once per stream, and at most the
/// policy's number of partitions. It keeps a 64-bit hash per key (8 bytes, a million keys at
/// most by default).
#[derive(Default)]
struct KeyGuard(HashSet<u64>);

impl KeyGuard {
    /// `key` in its compact spelling, so keys spaced differently are the same key.
    fn check(&mut self, key: &str, max: u64) -> Result<(), CallError> {
        if self.0.len() as u64 >= max {
            return Err(contract(format!("the stream listed more than {max} partitions")));
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        key.hash(&mut h);
        if !self.0.insert(h.finish()) {
            return Err(contract(format!(
                "the listing returned partition {} twice: each partition key may appear once per stream",
                protocol::preview(key)
            )));
        }
        Ok(())
    }
}

/// The pagination loop of one partition in a fresh instance (or, for a stream read in steps,
/// [`steps::read_page`] for each page, an instance per step). `cursor_field` asks for the largest
/// cursor value written; `on_first_records` runs once, before the first records are sent. With
/// `job` (a completed report job's handle and download), its result is read instead of pages.
/// `done` says what was written, also when the partition fails part way.
pub async fn read_partition(
    source: Source<'_>,
    partition: &Partition,
    job: Option<(&String, &String)>,
    rules: RecordRules<'_>,
    done: &mut PartitionDone,
    resuming: Resuming<'_>,
    on_first_records: impl AsyncFnOnce() -> Result<(), OutputClosed>,
) -> Result<Result<(), CallError>, OutputClosed> {
    let Source { connector, steps, out, limits, progress } = source;
    let mut reader = match Reader::open(connector, steps, out, partition, job).await? {
        Ok(reader) => reader,
        Err(e) => return Ok(Err(e)),
    };
    let rendering = PageRendering {
        stream_json: serde_json::to_string(&partition.stream).expect("a string serializes").into(),
        cursor_field: rules.cursor_field.map(Arc::from),
        excluded: Arc::from(rules.excluded),
        bounds: (limits.max_record_bytes, limits.max_record_depth),
    };
    let mut token: Option<String> = resuming.from.as_ref().map(|(token, _)| token.to_string());
    if let Some((_, cursor)) = resuming.from {
        done.max_cursor = cursor.cloned();
    }
    let mut sending = Sending { out, partition, progress, done, on_first_records: Some(on_first_records) };
    let mut seen = TokenGuard::new(limits.max_token_bytes);
    // The previous page is checked and rendered on a blocking thread while the guest fetches
    // the next one; pages are still sent in order, each before anything after it.
    let mut previous: Option<Rendering> = None;
    for _ in 0..limits.max_pages_per_partition {
        let result = reader.page(connector, out, partition, job, token.as_ref()).await?;
        if let Some(previous) = previous.take() {
            if let Err(e) = sending.send(previous).await? {
                return Ok(Err(e));
            }
            // Everything before the page just fetched is written: a resumed run may start there.
            if let (Some(save), Some(token)) = (resuming.save, token.as_deref()) {
                save(token, sending.done.max_cursor.as_ref());
            }
        }
        let ReadPage { page, forwarded } = match reader.logs(out, result).await? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        if page.records.len() > limits.max_records_per_page {
            return Ok(Err(contract(format!(
                "a page of {} records exceeds the limit of {} records per page",
                page.records.len(),
                limits.max_records_per_page
            ))));
        }
        let job = rendering.start(out, page.records, forwarded);
        let Some(next) = page.next_token else { return sending.send(job).await };
        if let Err(e) = seen.check(&next) {
            // The page before the repeated token is still written.
            return Ok(sending.send(job).await?.and(Err(e)));
        }
        previous = Some(job);
        token = Some(next);
    }
    if let Some(previous) = previous.take()
        && let Err(e) = sending.send(previous).await?
    {
        return Ok(Err(e));
    }
    Ok(Err(contract(format!("the partition did not end after {} pages", limits.max_pages_per_partition))))
}

/// How a partition's pages are rendered: the same for every page.
struct PageRendering {
    stream_json: Arc<str>,
    cursor_field: Option<Arc<[String]>>,
    excluded: Arc<[String]>,
    /// The largest record, in bytes, and the deepest.
    bounds: (usize, usize),
}

impl PageRendering {
    /// Starts checking and rendering a page's records (on a blocking thread when they are large),
    /// the first `forwarded` of them taken out of answers by the host.
    fn start(&self, out: &Output, records: Vec<String>, forwarded: usize) -> Rendering {
        let (out, stream_json, field) = (out.clone(), self.stream_json.clone(), self.cursor_field.clone());
        let (excluded, bounds) = (self.excluded.clone(), self.bounds);
        let bytes = records.iter().map(String::len).sum();
        Rendering::start_sized(bytes, move || {
            let rules = RecordRules { cursor_field: field.as_deref(), excluded: &excluded };
            render_page(&out, &records, forwarded, &stream_json, rules, bounds)
        })
    }
}

/// Where a partition's rendered pages go, in order, and what is counted of them.
struct Sending<'a, F> {
    out: &'a Output,
    partition: &'a Partition,
    progress: &'a Progress,
    done: &'a mut PartitionDone,
    on_first_records: Option<F>,
}

impl<F: AsyncFnOnce() -> Result<(), OutputClosed>> Sending<'_, F> {
    async fn send(&mut self, job: Rendering) -> Result<Result<(), CallError>, OutputClosed> {
        send_rendered(job, self.out, self.partition, self.progress, self.done, &mut self.on_first_records).await
    }
}

/// What every partition of a run is read with: the connector, the run's steps, the output,
/// the limits and the progress counters.
#[derive(Clone, Copy)]
pub struct Source<'a> {
    pub connector: &'a Connector,
    pub steps: &'a Steps,
    pub out: &'a Output,
    pub limits: &'a Limits,
    pub progress: &'a Progress,
}

/// What reads a partition's pages: its instance, or (a stream read in steps) an instance per
/// step, or the partition's own kept between steps.
enum Reader<'c> {
    Instance(Instance),
    Steps(steps::Stepping<'c>),
}

impl<'c> Reader<'c> {
    /// Steps for a stream the connector reads in steps (never for a job's result), else a fresh instance.
    async fn open(
        connector: &'c Connector,
        steps: &'c Steps,
        out: &Output,
        partition: &Partition,
        job: Option<(&String, &String)>,
    ) -> Result<Result<Self, CallError>, OutputClosed> {
        let in_steps = job.is_none() && steps.streams(connector, Some(out)).await?.contains(&partition.stream);
        Ok(match in_steps {
            true => Ok(Reader::Steps(steps::Stepping::new(connector, steps))),
            false => connector.instance().await.map(Reader::Instance),
        })
    }

    /// The page at `token` (of the job's result, with `job`); its logs wait for [`Reader::logs`].
    async fn page(
        &mut self,
        connector: &Connector,
        out: &Output,
        partition: &Partition,
        job: Option<(&String, &String)>,
        token: Option<&String>,
    ) -> Result<Result<ReadPage, CallError>, OutputClosed> {
        let config = connector.partition_config();
        Ok(match (self, job) {
            (Reader::Steps(stepping), _) => steps::read_page(stepping, Some(out), partition, token).await?,
            (Reader::Instance(instance), None) => instance.read_page(config, partition, token).await,
            (Reader::Instance(instance), Some((handle, download))) => {
                instance.read_result(config, partition, handle, download, token).await
            }
        })
    }

    /// Emits the logs of the last page's call, after the page before it is written (steps
    /// forward their logs as they end).
    async fn logs<T>(
        &mut self,
        out: &Output,
        result: Result<T, CallError>,
    ) -> Result<Result<T, CallError>, OutputClosed> {
        match self {
            Reader::Instance(instance) => forward_logs(out, instance, result).await,
            Reader::Steps(_) => Ok(result),
        }
    }
}

/// Resuming a partition inside it: where it continues (the token of its next page, as JSON,
/// and the largest cursor written before), and what to tell once a page is written (the next
/// page's token and the largest cursor so far).
#[derive(Default, Clone, Copy)]
pub struct Resuming<'a> {
    pub from: Option<(&'a Value, Option<&'a Value>)>,
    pub save: Option<&'a SaveCheckpoint<'a>>,
}

/// Told the next page's token and the largest cursor so far, once a page is written.
pub type SaveCheckpoint<'a> = dyn Fn(&str, Option<&Value>) + Send + Sync + 'a;

/// Pages up to this many bytes of records are checked and rendered at once: for them a hand-off
/// to a blocking thread costs more than the work (100k one-record partitions spent most of their
/// time waking threads).
const RENDER_INLINE_BYTES: usize = 16 << 10;

/// A page being checked and rendered: a large one on a blocking thread, while the guest fetches
/// the next; a small one at once.
enum Rendering {
    Done(Result<Rendered, String>),
    Running(tokio::task::JoinHandle<Result<Rendered, String>>),
}

impl Rendering {
    fn start_sized(bytes: usize, render: impl FnOnce() -> Result<Rendered, String> + Send + 'static) -> Self {
        if bytes <= RENDER_INLINE_BYTES {
            Rendering::Done(render())
        } else {
            Rendering::Running(tokio::task::spawn_blocking(render))
        }
    }

    async fn finish(self) -> Result<Rendered, String> {
        match self {
            Rendering::Done(result) => result,
            Rendering::Running(job) => job.await.unwrap_or_else(|e| Err(format!("checking a page failed: {e}"))),
        }
    }
}

/// A page's records, checked and rendered into output lines.
struct Rendered {
    lines: PageLines,
    records: u64,
    max_cursor: Option<Value>,
}

/// A checked record (a JSON object) without the `excluded` top-level fields, keys in order.
fn without(record: &str, excluded: &[String]) -> String {
    match serde_json::from_str::<serde_json::Map<String, Value>>(record) {
        Ok(mut fields) => {
            fields.retain(|name, _| !excluded.contains(name));
            Value::Object(fields).to_string()
        }
        // Checked already, so always an object; kept whole otherwise.
        Err(_) => record.to_string(),
    }
}

/// Checks and renders a page's records; the first record that fails its checks fails the page.
fn render_page(
    out: &Output,
    records: &[String],
    forwarded: usize,
    stream_json: &str,
    rules: RecordRules<'_>,
    (max_bytes, max_depth): (usize, usize),
) -> Result<Rendered, String> {
    let stamp = out.stamp();
    let mut lines = out.page(records.iter().map(|r| r.len() + 80).sum());
    let mut max_cursor = state::RunningMax::default();
    let field = rules.cursor_field.unwrap_or_default();
    for (i, record) in records.iter().enumerate() {
        // With no cursor field (empty), each check is its record check alone.
        let (checked, cursor) = match i < forwarded {
            true => protocol::split_record_with_cursor(record, max_bytes, max_depth, field)?,
            false => protocol::checked_record_with_cursor(record, max_bytes, max_depth, field)?,
        };
        if let Some(v) = cursor {
            max_cursor.raise(v).map_err(|e| format!("{e}, in record {}", protocol::preview(record)))?;
        }
        if rules.excluded.is_empty() {
            out.push_record(&mut lines, stream_json, &checked, &stamp);
        } else {
            out.push_record(&mut lines, stream_json, &without(&checked, rules.excluded), &stamp);
        }
    }
    Ok(Rendered { lines, records: records.len() as u64, max_cursor: max_cursor.into_value() })
}

/// Waits for a rendered page and sends it (running `on_first_records` before the first
/// records); a page that failed its checks fails the partition, and nothing of it is sent.
async fn send_rendered(
    job: Rendering,
    out: &Output,
    partition: &Partition,
    progress: &Progress,
    done: &mut PartitionDone,
    on_first_records: &mut Option<impl AsyncFnOnce() -> Result<(), OutputClosed>>,
) -> Result<Result<(), CallError>, OutputClosed> {
    let rendered = match job.finish().await {
        Ok(rendered) => rendered,
        Err(e) => return Ok(Err(contract(e))),
    };
    if rendered.records == 0 {
        return Ok(Ok(()));
    }
    if let Some(first) = on_first_records.take() {
        first().await?;
    }
    if let Some(v) = rendered.max_cursor
        && let Err(e) = state::raise_max(&mut done.max_cursor, v)
    {
        return Ok(Err(contract(format!("{e}, on a later page"))));
    }
    done.records += rendered.records;
    out.records(&partition.stream, rendered.lines, rendered.records).await?;
    progress.records(rendered.records);
    Ok(Ok(()))
}

/// A guest answer the host refuses, reported as the connector's system error.
fn contract(message: String) -> CallError {
    CallError::Guest(crate::bindings::GuestError::System(message))
}

/// Catches a pagination loop: a token must be valid JSON and never repeat within a partition.
/// Memory is bounded: the first [`EXACT_TOKENS`] tokens are remembered exactly (any repeat is
/// caught); after that Brent's cycle detection keeps one token, which catches a loop of any
/// period within two periods of its start. A token sequence that never repeats is stopped by the
/// page limit.
pub(crate) struct TokenGuard {
    /// The longest token, bytes (`Limits::max_token_bytes`).
    max_bytes: usize,
    exact: HashSet<u64>,
    /// Brent's checkpoint: a token, and how many more tokens to compare with it before the next
    /// checkpoint (twice as many each time).
    checkpoint: Option<u64>,
    left: u64,
    power: u64,
}

/// The longest page or listing token by default (`--max-token-kib`, policy `max_token_bytes`).
pub const MAX_TOKEN_BYTES: usize = crate::guest::limits::DEFAULT_MAX_TOKEN_BYTES;

impl Default for TokenGuard {
    fn default() -> Self {
        TokenGuard::new(MAX_TOKEN_BYTES)
    }
}

/// Tokens remembered exactly: 64 KiB of hashes per partition or listing.
const EXACT_TOKENS: usize = 4096;

impl TokenGuard {
    pub(crate) fn new(max_bytes: usize) -> Self {
        TokenGuard { max_bytes, exact: HashSet::new(), checkpoint: None, left: 0, power: 0 }
    }

    pub(crate) fn check(&mut self, token: &str) -> Result<(), CallError> {
        if token.len() > self.max_bytes {
            return Err(contract(format!(
                "next token is {} bytes, more than the {} a token may have (a partition's token is saved in every \
                 STATE of its stream while the partition is read; --max-token-kib)",
                token.len(),
                self.max_bytes
            )));
        }
        // Parsed whole, not skimmed: a string the host could not read back (a lone surrogate,
        // `"\ud800"`) would be saved as null, and a resumed run would skip its page.
        if let Err(e) = serde_json::from_str::<Value>(token) {
            return Err(contract(format!("next token is not valid JSON ({e}): {}", protocol::preview(token))));
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        token.hash(&mut h);
        let hash = h.finish();
        let repeated = if self.exact.len() < EXACT_TOKENS {
            !self.exact.insert(hash)
        } else if self.exact.contains(&hash) || self.checkpoint == Some(hash) {
            true
        } else {
            if self.left == 0 {
                self.power = (self.power * 2).max(EXACT_TOKENS as u64);
                self.left = self.power;
                self.checkpoint = Some(hash);
            }
            self.left -= 1;
            false
        };
        if repeated {
            return Err(contract(format!(
                "pagination repeated the token {}: the connector would loop forever",
                protocol::preview(token)
            )));
        }
        Ok(())
    }
}

/// Raises an open-ended partition's cursor start to the saved cursor for its key.
/// The key is in its compact text, as the listing hands keys over.
pub fn raise_start(partition: &mut Partition, cursor: &StreamCursor) {
    let Some(saved) = cursor.start_for_key(&partition.key) else { return };
    let range = partition.cursor_range.get_or_insert(CursorRange { start: None, end: None });
    let keep_guest =
        range.start.as_ref().is_some_and(|s| state::compare(&cursor_to_json(s), saved) == Ordering::Greater);
    if !keep_guest {
        range.start = json_to_cursor(saved);
    }
}

pub fn cursor_to_json(v: &CursorValue) -> Value {
    match v {
        CursorValue::Integer(i) => Value::from(*i),
        CursorValue::Datetime(s) | CursorValue::Text(s) => Value::from(s.as_str()),
    }
}

pub fn json_to_cursor(v: &Value) -> Option<CursorValue> {
    match v {
        Value::Number(n) => n.as_i64().map(CursorValue::Integer).or_else(|| Some(CursorValue::Text(n.to_string()))),
        Value::String(s) if state::parse_datetime(s).is_some() => Some(CursorValue::Datetime(s.clone())),
        Value::String(s) => Some(CursorValue::Text(s.clone())),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_guard_catches_repeats_and_bad_json() {
        let mut g = TokenGuard::default();
        assert!(g.check("\"a\"").is_ok());
        assert!(g.check("2").is_ok());
        assert!(g.check("\"a\"").unwrap_err().message().contains("repeated"));
        assert!(g.check("{").unwrap_err().message().contains("not valid JSON"));
        // A lone surrogate skims as JSON but does not read back: refused, never saved as null.
        let surrogate = g.check(r#""\ud800x""#).unwrap_err().message();
        assert!(surrogate.contains("not valid JSON"), "{surrogate}");
        let long = format!("\"{}\"", "a".repeat(MAX_TOKEN_BYTES));
        assert!(g.check(&long).unwrap_err().message().contains("more than the 65536"));
        assert!(g.check(&format!("\"{}\"", "a".repeat(MAX_TOKEN_BYTES - 2))).is_ok());
        // The operator's cap.
        let mut wide = TokenGuard::new(1 << 20);
        assert!(wide.check(&long).is_ok());
        assert!(
            wide.check(&format!("\"{}\"", "b".repeat(1 << 20)))
                .unwrap_err()
                .message()
                .contains("more than the 1048576")
        );
    }

    #[test]
    fn token_guard_catches_long_loops_in_bounded_memory() {
        // A loop with a period far beyond the exact set, entered after 10,000 distinct tokens.
        let mut g = TokenGuard::default();
        let token = |n: u64| if n < 10_000 { n } else { 10_000 + (n - 10_000) % 50_000 };
        let caught = (0..1_000_000u64).find(|&n| g.check(&token(n).to_string()).is_err());
        let caught = caught.expect("the loop is caught");
        assert!(caught < 10_000 + 3 * 50_000, "caught after {caught} tokens");
        assert_eq!(g.exact.len(), EXACT_TOKENS);
        // Distinct tokens are never refused.
        let mut g = TokenGuard::default();
        assert!((0..200_000u64).all(|n| g.check(&n.to_string()).is_ok()));
    }

    /// Keys leave the listing in one spelling, whatever the guest's: the scheduler, the state
    /// and the resumption match them by their text.
    #[tokio::test]
    async fn the_listing_hands_its_keys_over_compact() {
        let (tx, mut rx) = mpsc::channel(4);
        let spaced =
            Partition { stream: "s".into(), key: r#"{ "b" : 1, "a": [ 2, "\u0041" ] }"#.into(), cursor_range: None };
        let batch = PartitionBatch { partitions: vec![spaced], next_token: None, record_estimate: None };
        let handed = hand_over(batch, "s", &Limits::default(), &mut KeyGuard::default(), &tx).await;
        assert!(matches!(handed, Ok(Ok(true))));
        match rx.recv().await {
            Some(Listed::Partition(p)) => assert_eq!(p.key, r#"{"b":1,"a":[2,"A"]}"#),
            other => panic!("expected the partition, got {other:?}"),
        }
    }

    #[test]
    fn a_listing_may_not_repeat_a_key_or_run_past_its_cap() {
        let mut keys = KeyGuard::default();
        assert!(keys.check(r#"{"p":1}"#, 3).is_ok());
        let twice = keys.check(r#"{"p":1}"#, 3).unwrap_err().message();
        assert!(twice.contains("partition {\"p\":1} twice"), "{twice}");
        assert!(keys.check(r#"{"p":2}"#, 3).is_ok());
        assert!(keys.check(r#"{"p":3}"#, 3).is_ok());
        assert!(keys.check(r#"{"p":4}"#, 3).unwrap_err().message().contains("more than 3 partitions"));
    }

    #[test]
    fn saved_cursor_raises_start() {
        let field = vec!["updated_at".to_string()];
        let mut cursor = StreamCursor::new("s", field, None).unwrap();
        cursor.complete(&serde_json::json!({"a": 1}), Some(Value::from("2024-01-05T00:00:00Z")));
        let mut p = Partition { stream: "s".into(), key: r#"{"a":1}"#.into(), cursor_range: None };
        raise_start(&mut p, &cursor);
        assert_eq!(p.cursor_range.unwrap().start, Some(CursorValue::Datetime("2024-01-05T00:00:00Z".into())));
        // A guest start later than the saved cursor wins.
        let mut p = Partition {
            stream: "s".into(),
            key: r#"{"a":1}"#.into(),
            cursor_range: Some(CursorRange {
                start: Some(CursorValue::Datetime("2025-01-01T00:00:00Z".into())),
                end: None,
            }),
        };
        raise_start(&mut p, &cursor);
        assert_eq!(p.cursor_range.unwrap().start, Some(CursorValue::Datetime("2025-01-01T00:00:00Z".into())));
    }
}
