//! Listing and reading a stream the way the scheduler does (fresh instance per partition, saved
//! cursors raised into partitions, finished windows skipped, state kept by [`StreamCursor`]), but
//! one partition at a time, handing every page and record to the checks with where it came from.
//! A stream read through report jobs is read job by job: created, polled, its result read page by
//! page, deleted.

use crate::bindings::{JobStatus, Partition};
use crate::data::protocol::{self, preview};
use crate::data::state::{self, Resume, StreamCursor};
use crate::guest::connector::{CallError, Connector, Instance};
use crate::run::steps::{self, Stepping, Steps};
use crate::run::{read, resume};
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// A stream's partitions as listed, or why the listing failed.
pub struct Listing {
    pub partitions: Vec<Partition>,
    /// Batches the listing took.
    pub batches: u64,
}

/// Lists every partition of `stream` (all batches) in a fresh instance.
pub async fn list(connector: &Connector, stream: &str, state: Option<&Value>) -> Result<Listing, String> {
    let state = state.map(Value::to_string);
    let mut instance = connector.instance().await.map_err(|e| e.message())?;
    let mut token: Option<String> = None;
    let mut seen = HashMap::new();
    let mut listing = Listing { partitions: Vec::new(), batches: 0 };
    loop {
        let result = instance.partitions(&connector.config, &stream.to_string(), state.as_ref(), token.as_ref()).await;
        instance.take_logs();
        listing.batches += 1;
        let batch = result.map_err(|e| format!("batch {}: {}", listing.batches, describe(&e)))?;
        for p in batch.partitions {
            if p.stream != stream {
                return Err(format!("batch {}: a partition names stream {:?}", listing.batches, p.stream));
            }
            if let Err(e) = serde_json::from_str::<Value>(&p.key) {
                return Err(format!(
                    "batch {}: partition key is not valid JSON ({e}): {}",
                    listing.batches,
                    preview(&p.key)
                ));
            }
            listing.partitions.push(p);
        }
        match batch.next_token {
            None => return Ok(listing),
            Some(next) => {
                if let Some(batch) = seen.insert(next.clone(), listing.batches) {
                    return Err(format!(
                        "batch {}: the partition token {} was already returned by batch {batch}: the listing would loop forever",
                        listing.batches,
                        preview(&next)
                    ));
                }
                token = Some(next);
            }
        }
    }
}

/// A call error as the report shows it: its kind and message.
pub fn describe(e: &CallError) -> String {
    match e {
        CallError::Trap(_) => e.message(),
        CallError::Guest(_) => format!("{}: {}", e.failure_type().as_str(), e.message()),
    }
}

/// Where a record came from.
pub struct Place<'a> {
    pub stream: &'a str,
    pub partition: &'a Partition,
    /// 1-based.
    pub page: u64,
    /// 0-based, within the page.
    pub record: usize,
}

impl Place<'_> {
    pub fn partition_text(&self) -> String {
        partition_label(self.stream, self.partition)
    }

    pub fn page_text(&self) -> String {
        format!("{}, page {}", self.partition_text(), self.page)
    }

    pub fn record_text(&self) -> String {
        format!("{}, record {}", self.page_text(), self.record)
    }
}

pub fn partition_label(stream: &str, partition: &Partition) -> String {
    format!("stream {stream}, partition {}", preview(&partition.key))
}

/// What reading a partition, or its pagination, did wrong.
pub enum Problem {
    /// The connector failed a call or a page broke the host's rules.
    Read(String),
    /// The pagination did not end: a token repeated, was not JSON, or the page cap was reached.
    Pagination(String),
}

/// Receives what a read finds.
pub trait Visitor {
    /// A partition is about to be read; `start` is where it starts (after the saved state).
    fn partition(&mut self, _partition: &Partition, _start: Option<&Value>) {}
    /// A record that passed the host's own checks (valid JSON object, size).
    fn record(&mut self, place: &Place, record: &Value, start: Option<&Value>);
    /// A partition ended, after `pages` pages, cleanly or with a problem on `page`.
    fn partition_done(&mut self, partition: &Partition, pages: u64, problem: Option<(u64, Problem)>);
    /// A partition the state says is finished, not read.
    fn skipped(&mut self, _partition: &Partition) {}
}

/// Reads `partitions` one after another, each in a fresh instance, with state when `cursor` is
/// given (as the scheduler does for incremental streams), and returns the final state.
pub async fn read_stream(
    connector: &Connector,
    stream: &str,
    mut partitions: Vec<Partition>,
    mut cursor: Option<StreamCursor>,
    max_pages: u64,
    visitor: &mut dyn Visitor,
) -> Option<Value> {
    // Bounded partitions (windows) resume from what the state says is finished; open-ended
    // ones start after their saved cursor. Once all are listed, nothing below the lowest start
    // is the stream's to read.
    let mut lowest: Option<Option<Value>> = None;
    let mut plans = Vec::new();
    for mut partition in partitions.drain(..) {
        let range = bounded_range(&partition);
        if let Some((start, _)) = &range {
            lowest = Some(match (lowest.take(), start) {
                (None, s) => s.clone(),
                (Some(None), _) | (Some(Some(_)), None) => None,
                (Some(Some(l)), Some(s)) => Some(if state::compare(s, &l).is_lt() { s.clone() } else { l }),
            });
        }
        let plan = match (cursor.as_ref(), range) {
            (Some(c), Some((start, end))) => match c.resume(start.as_ref(), &end) {
                Resume::Skip => {
                    visitor.skipped(&partition);
                    continue;
                }
                Resume::From(from) => {
                    if let Some(r) = partition.cursor_range.as_mut() {
                        r.start = read::json_to_cursor(&from);
                    }
                    Some((Some(from), end))
                }
                Resume::Read => Some((start, end)),
            },
            (Some(c), None) => {
                read::raise_start(&mut partition, c);
                None
            }
            (None, range) => range,
        };
        plans.push((partition, plan));
    }
    if let Some(c) = cursor.as_mut() {
        c.listing_complete(lowest.flatten().as_ref());
    }
    let field = cursor.as_ref().map(|c| c.field().to_vec());
    let through_jobs = is_job_stream(connector, stream).await;
    let steps = Steps::new(&connector.limits);
    for (partition, bounds) in plans {
        let start = partition.cursor_range.as_ref().and_then(|r| r.start.as_ref()).map(read::cursor_to_json);
        visitor.partition(&partition, start.as_ref());
        let outcome = read_partition(
            connector,
            &steps,
            stream,
            &partition,
            through_jobs,
            field.as_deref(),
            start.as_ref(),
            max_pages,
            visitor,
        )
        .await;
        if let (Some(c), Ok(max_cursor)) = (cursor.as_mut(), outcome) {
            match &bounds {
                Some((start, end)) => c.complete_range(start.as_ref(), end, max_cursor),
                None => {
                    c.complete_from(&resume::key_text(&partition.key), start.as_ref(), max_cursor);
                }
            }
        }
    }
    cursor.map(|c| c.to_state())
}

/// `(start, end]` of a partition whose cursor range has an end.
fn bounded_range(partition: &Partition) -> Option<(Option<Value>, Value)> {
    let range = partition.cursor_range.as_ref()?;
    let end = read::cursor_to_json(range.end.as_ref()?);
    Some((range.start.as_ref().map(read::cursor_to_json), end))
}

/// Whether the connector reads `stream` through report jobs (its `async-jobs` settings say so).
pub async fn is_job_stream(connector: &Connector, stream: &str) -> bool {
    let Ok(mut instance) = connector.instance().await else { return false };
    let settings = instance.job_settings(&connector.config).await;
    instance.take_logs();
    matches!(settings, Ok(Some(s)) if s.streams.iter().any(|s| s == stream))
}

/// Polls a job is given before the kit gives up on it, and the waits between them.
const MAX_POLLS: u32 = 600;
const FIRST_POLL_WAIT: Duration = Duration::from_millis(20);
const LONGEST_POLL_WAIT: Duration = Duration::from_secs(1);

/// A report job for the partition, created and polled (as the orchestrator does, on a growing
/// timer) until it completes: the job's handle and its download.
async fn run_job(
    instance: &mut Instance,
    connector: &Connector,
    partition: &Partition,
) -> Result<(String, String), String> {
    let job = instance
        .create_job(connector.partition_config(), partition)
        .await
        .map_err(|e| format!("create-job: {}", describe(&e)))?;
    let mut wait = FIRST_POLL_WAIT;
    for _ in 0..MAX_POLLS {
        let status = instance.poll_job(connector.partition_config(), partition, &job).await;
        instance.take_logs();
        match status.map_err(|e| format!("poll-job: {}", describe(&e)))? {
            JobStatus::Completed(download) => return Ok((job, download)),
            JobStatus::Running => {}
            JobStatus::Failed(why) => return Err(format!("the job {} failed: {why}", preview(&job))),
            JobStatus::Unknown => {
                return Err(format!("the API does not know the job {} it just created", preview(&job)));
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 3 / 2).min(LONGEST_POLL_WAIT);
    }
    Err(format!("the job {} did not complete in {MAX_POLLS} polls", preview(&job)))
}

/// The pagination loop of one partition: its pages, or for a job stream the pages of its job's
/// result (the job created, polled, read and deleted). Returns the largest cursor value seen when
/// it ended cleanly.
#[allow(clippy::too_many_arguments)]
async fn read_partition(
    connector: &Connector,
    steps: &Steps,
    stream: &str,
    partition: &Partition,
    through_jobs: bool,
    cursor_field: Option<&[String]>,
    start: Option<&Value>,
    max_pages: u64,
    visitor: &mut dyn Visitor,
) -> Result<Option<Value>, ()> {
    let mut instance = match connector.instance().await {
        Ok(i) => i,
        Err(e) => {
            visitor.partition_done(partition, 0, Some((1, Problem::Read(describe(&e)))));
            return Err(());
        }
    };
    // Read as a run reads it: a stream read in steps, step by step.
    let in_steps = !through_jobs && steps.streams(connector, None).await.is_ok_and(|stepped| stepped.contains(stream));
    let job = match through_jobs {
        false => None,
        true => match run_job(&mut instance, connector, partition).await {
            Ok(job) => Some(job),
            Err(problem) => {
                visitor.partition_done(partition, 0, Some((1, Problem::Read(problem))));
                return Err(());
            }
        },
    };
    let reading = Reading { in_steps: in_steps.then_some(steps), job: job.as_ref(), cursor_field, start, max_pages };
    let outcome = read_pages(&mut instance, connector, stream, partition, reading, visitor).await;
    if let Some((handle, _)) = &job {
        // A job the kit is done with is deleted, as the orchestrator deletes it.
        if let Err(e) = instance.end_job(connector.partition_config(), partition, handle, false).await
            && outcome.is_ok()
        {
            let message = format!("delete-job: {}", describe(&e));
            visitor.partition_done(partition, 0, Some((0, Problem::Read(message))));
            return Err(());
        }
    }
    outcome
}

/// How a partition's pages are read: in steps, from a job's result, or page by page; where the
/// cursor is and where it started; how many pages at most.
struct Reading<'a> {
    /// The stream is read in steps.
    in_steps: Option<&'a Steps>,
    job: Option<&'a (String, String)>,
    cursor_field: Option<&'a [String]>,
    start: Option<&'a Value>,
    max_pages: u64,
}

async fn read_pages(
    instance: &mut Instance,
    connector: &Connector,
    stream: &str,
    partition: &Partition,
    reading: Reading<'_>,
    visitor: &mut dyn Visitor,
) -> Result<Option<Value>, ()> {
    let Reading { in_steps, job, cursor_field, start, max_pages } = reading;
    let mut stepping = in_steps.map(|steps| Stepping::new(connector, steps));
    let limits = &connector.limits;
    let mut token: Option<String> = None;
    let mut tokens: HashMap<String, u64> = HashMap::new();
    let mut max_cursor: Option<Value> = None;
    let mut page_no = 0;
    loop {
        page_no += 1;
        if page_no > max_pages {
            let problem = Problem::Pagination(format!(
                "the partition did not end after {max_pages} pages (the last token was {}); raise --max-pages if it really is that long",
                token.as_deref().map(preview).unwrap_or_default()
            ));
            visitor.partition_done(partition, max_pages, Some((max_pages, problem)));
            return Err(());
        }
        let result = match job {
            None if let Some(stepping) = stepping.as_mut() => {
                match steps::read_page(stepping, None, partition, token.as_ref()).await {
                    Ok(result) => result,
                    Err(crate::data::protocol::OutputClosed) => unreachable!("no output to close"),
                }
            }
            None => instance.read_page(connector.partition_config(), partition, token.as_ref()).await,
            Some((handle, download)) => {
                instance.read_result(connector.partition_config(), partition, handle, download, token.as_ref()).await
            }
        };
        instance.take_logs();
        // The kit checks every record as a guest's (forwarded ones too).
        let page = match result {
            Ok(read) => read.page,
            Err(e) => {
                visitor.partition_done(partition, page_no - 1, Some((page_no, Problem::Read(describe(&e)))));
                return Err(());
            }
        };
        if page.records.len() > limits.max_records_per_page {
            let message =
                format!("{} records exceed the limit of {} per page", page.records.len(), limits.max_records_per_page);
            visitor.partition_done(partition, page_no, Some((page_no, Problem::Read(message))));
            return Err(());
        }
        for (index, text) in page.records.iter().enumerate() {
            let place = Place { stream, partition, page: page_no, record: index };
            let checked = match protocol::checked_record(text, limits.max_record_bytes, limits.max_record_depth) {
                Ok(c) => c,
                Err(e) => {
                    let message = format!("record {index} is refused by the host: {e}");
                    visitor.partition_done(partition, page_no, Some((page_no, Problem::Read(message))));
                    return Err(());
                }
            };
            let record: Value = serde_json::from_str(&checked).expect("checked records parse");
            if let Some(field) = cursor_field
                && let Some(v) = state::cursor_of(&record, field)
                && max_cursor.as_ref().is_none_or(|m| state::compare(&v, m).is_gt())
            {
                max_cursor = Some(v);
            }
            visitor.record(&place, &record, start);
        }
        match page.next_token {
            None => {
                visitor.partition_done(partition, page_no, None);
                return Ok(max_cursor);
            }
            Some(next) => {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(&next) {
                    let problem =
                        Problem::Pagination(format!("the next token is not valid JSON ({e}): {}", preview(&next)));
                    visitor.partition_done(partition, page_no, Some((page_no, problem)));
                    return Err(());
                }
                if let Some(first) = tokens.insert(next.clone(), page_no) {
                    let problem = Problem::Pagination(format!(
                        "the next token {} was already returned by page {first}: pagination would loop forever",
                        preview(&next)
                    ));
                    visitor.partition_done(partition, page_no, Some((page_no, problem)));
                    return Err(());
                }
                token = Some(next);
            }
        }
    }
}
