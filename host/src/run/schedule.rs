//! The scheduler: reads all selected streams at once, with a bounded number of partitions in
//! flight (run-wide, and optionally per stream). Each stream lists its partitions in its own task
//! while its partitions are read, and owns its cursor state: a partition's STATE is sent only
//! after the partition's task has sent every one of its records, and both go through the same
//! ordered channel to the single writer, so no STATE ever claims a record not yet written.

use crate::bindings::Partition;
use crate::data::protocol::{FailureType, Format, Output, OutputClosed, StreamStatus};
use crate::data::state::{self, Resume, StreamCursor};
use crate::guest::connector::{CallError, Connector, Usage};
use crate::guest::limits::Limits;
use crate::run::asked::Answers;
use crate::run::fair::{FairShareTicket, FairSlot};
use crate::run::jobs::{JobEvent, JobOptions, Orchestrator};
use crate::run::progress::Progress;
use crate::run::read::{self, Listed, PartitionDone, SelectedStream, StreamSummary};
use crate::run::resume::{Checkpoint, Resumption};
use crate::run::shape::Shaper;
use crate::run::shard::Shard;
use crate::run::steps::Steps;
use crate::run::stop::Stop;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;

/// How much runs at once.
#[derive(Debug, Clone)]
pub struct Concurrency {
    /// Partitions read at once across the run.
    pub partitions: usize,
    /// Partitions read at once within one stream.
    pub per_stream: Option<usize>,
    /// Report jobs: slots, polling, attempts, timeout.
    pub jobs: JobOptions,
    /// Read only the partitions of this shard ([`crate::run::shard`]).
    pub shard: Option<Shard>,
    /// A tenant's share of the runtime's partition slots ([`crate::run::fair`]): set by
    /// `Runtime::run_for` when the runtime shares its slots.
    pub fair_share: Option<FairShareTicket>,
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency { partitions: 8, per_stream: None, jobs: JobOptions::default(), shard: None, fair_share: None }
    }
}

/// Everything a stream task shares with the others.
#[derive(Clone)]
pub struct Shared {
    pub connector: Arc<Connector>,
    /// The streams read in steps, and the steps computing now.
    steps: Arc<Steps>,
    pub out: Output,
    pub limits: Arc<Limits>,
    pub progress: Arc<Progress>,
    permits: Arc<Semaphore>,
    concurrency: Concurrency,
    /// The run's job orchestrator, when the plugin reads streams through report jobs.
    jobs: Option<Arc<Orchestrator>>,
    /// Streams whose page tokens stay valid across runs: checkpointed inside partitions.
    resumable: Arc<HashSet<String>>,
    /// Shapes the states of the streams whose state the connector shapes ([`crate::run::shape`]).
    shaper: Arc<Shaper>,
    /// Streams whose saved partition cursors were folded as the state file was parsed: the
    /// limit, and how many the file had ([`crate::data::state::InputState::parse_with_limit`]).
    folded: Arc<HashMap<String, (usize, usize)>>,
}

/// Reads every selected stream to the end, or as far as it can, with the answers to the questions
/// asked before the read ([`crate::run::asked::ask`]). Only a closed output stops early.
#[allow(clippy::too_many_arguments)]
pub async fn read_streams(
    connector: Arc<Connector>,
    answers: Answers,
    out: Output,
    limits: Limits,
    progress: Arc<Progress>,
    concurrency: Concurrency,
    streams: Vec<SelectedStream>,
    folded: HashMap<String, (usize, usize)>,
    stop: &Stop,
) -> Result<Vec<StreamSummary>, OutputClosed> {
    let jobs = match answers.jobs {
        Ok(settings) => Orchestrator::for_run(connector.clone(), out.clone(), concurrency.jobs, settings),
        Err(e) => {
            let message = format!("the connector cannot say which streams it reads through jobs: {}", e.message());
            out.error(&message, e.failure_type(), None).await?;
            None
        }
    };
    let unless = async |answer: Result<HashSet<String>, CallError>, instead: &str, what: &str| match answer {
        Ok(streams) => Ok(streams),
        Err(e) => {
            let message = format!("the connector cannot say {what} ({}): {instead}", e.message());
            out.log("WARN", &message).await.map(|_| HashSet::new())
        }
    };
    let resumable =
        unless(answers.resumable, "partitions resume from their start", "which streams resume inside a partition")
            .await?;
    let shaped =
        unless(answers.shaped, "states are written in Sluice's form", "which streams' states it shapes").await?;
    let stepped = unless(answers.stepped, "pages are read whole", "which streams it reads in steps").await?;
    // The instance that answered shapes states when a stream's are shaped; else the first
    // listing takes it, warm, rather than a fresh instance after dropping this one.
    let shaping = match shaped.is_empty() {
        true => {
            if let Some(instance) = answers.instance {
                connector.put_spare(instance);
            }
            None
        }
        false => answers.instance,
    };
    let shared = Shared {
        steps: Arc::new(Steps::known(&connector.limits, stepped)),
        resumable: Arc::new(resumable),
        // A shard's state speaks for its partitions only: it always carries the host's form, so
        // the shards' states can be merged.
        shaper: Arc::new(Shaper::new(shaped, shaping, concurrency.shard.is_some())),
        folded: Arc::new(folded),
        connector,
        out,
        limits: Arc::new(limits),
        progress,
        permits: Arc::new(Semaphore::new(concurrency.partitions.max(1))),
        concurrency,
        jobs: jobs.clone(),
    };
    let mut tasks = JoinSet::new();
    let mut streams_by_task = std::collections::HashMap::new();
    for (index, stream) in streams.into_iter().enumerate() {
        let (task_shared, name) = (shared.clone(), stream.stream.name.clone());
        let span = tracing::info_span!("stream", stream = %name);
        let reading = async move { (index, read_stream(task_shared, stream).await) };
        let handle = tasks.spawn(tracing::Instrument::instrument(reading, span));
        streams_by_task.insert(handle.id(), (index, name));
    }
    let mut summaries = Vec::new();
    loop {
        tokio::select! {
            joined = tasks.join_next_with_id() => {
                let Some(joined) = joined else { break };
                match joined {
                    Ok((_, (index, result))) => summaries.push((index, result?)),
                    // A stream task that panicked fails its stream; the others go on.
                    Err(e) => {
                        let (index, name) = streams_by_task.remove(&e.id()).unwrap_or_default();
                        let message = format!("stream {name}: the host failed while reading it: {e}");
                        shared.out.error(&message, FailureType::System, Some(&name)).await?;
                        shared.out.status(&name, StreamStatus::Incomplete).await?;
                        summaries.push((index, StreamSummary { name, failed: true, ..Default::default() }));
                    }
                }
            }
            // Asked to stop (SIGINT/SIGTERM, or the embedder): stop reading, and let no report
            // job outlive the run.
            _ = stop.requested() => {
                tasks.abort_all();
                if let Some(jobs) = &jobs {
                    jobs.abort_all().await;
                }
                return Err(OutputClosed);
            }
        }
    }
    summaries.sort_by_key(|(i, _)| *i);
    Ok(summaries.into_iter().map(|(_, s)| s).collect())
}

/// `(start, end]` of a bounded partition: a cursor range with an end.
type Bounds = (Option<Value>, Value);

/// What a partition's task reports to its stream: the end of the partition, or (report jobs)
/// a job handle to keep in the stream's state.
enum TaskEvent {
    Finished(Box<Result<Finished, OutputClosed>>),
    Job(JobEvent),
    /// A resumable partition's pages before `checkpoint.token` are written.
    Checkpoint {
        key: String,
        checkpoint: Checkpoint,
    },
}

/// What a partition task reports back to its stream.
struct Finished {
    partition: Partition,
    /// The cursor range it was read with, for bounded partitions: `(start, end]`.
    range: Option<Bounds>,
    result: Result<PartitionDone, CallError>,
}

/// Entries of a state small enough to write at every change.
const SMALL_STATE: u64 = 64;

/// The longest a finished partition waits for its STATE while others keep finishing.
const STATE_INTERVAL: std::time::Duration = std::time::Duration::from_secs(5);

/// One stream being read: its cursor, its report jobs, and the partitions in flight.
struct StreamRead {
    shared: Shared,
    name: String,
    summary: StreamSummary,
    cursor: Option<StreamCursor>,
    /// Read through report jobs: a partition takes a slot only to read its job's result.
    through_jobs: bool,
    /// Jobs a previous run left, by partition key, until their partition is read.
    saved_jobs: std::collections::HashMap<String, Value>,
    /// Report jobs in flight, by partition key: kept in the state so a resumed run polls them.
    jobs_in_flight: std::collections::BTreeMap<String, Value>,
    /// Its state is written in the connector's shape ([`shape`]).
    shaped: bool,
    /// The digest of the last state written, in the host's form (not the state: a stream of many
    /// partitions has a state of megabytes, and keeping it beside the next one doubled it).
    last_state: Option<blake3::Hash>,
    /// Partitions finished since the last STATE, and when that was: see [`StreamRead::state_due`].
    unsaved: u64,
    saved_at: std::time::Instant,
    /// Checkpoints inside partitions, for a resumable stream.
    resume: Option<Resumption>,
    /// The next partition to start, once there is room, and where it resumes.
    next: Option<(Partition, Option<Bounds>, Option<Checkpoint>)>,
    in_flight: usize,
    lowest_start: Option<Option<Value>>,
    /// The stream is RUNNING (from its first record).
    running: Arc<AtomicBool>,
    /// Records its partitions wrote, failed ones included.
    written: Arc<AtomicU64>,
    stream_permits: Option<Arc<Semaphore>>,
    done_tx: mpsc::UnboundedSender<TaskEvent>,
    /// Fields left out of its records.
    excluded: Arc<[String]>,
}

/// The state a listing is handed for a saved state whose partition cursors were folded into the
/// stream-level cursor: the cursor's state in place of the saved cursor keys, every other key
/// (jobs, partitions in progress, ...) as saved.
fn folded_for_listing(saved: Option<&Value>, cursor: &StreamCursor) -> Value {
    let mut state = cursor.to_state();
    const CURSOR_KEYS: [&str; 5] = ["cursor_field", "partitions", "low_water", "newest", "completed"];
    if let (Some(saved), Some(into)) = (saved.and_then(Value::as_object), state.as_object_mut()) {
        for (key, value) in saved.iter().filter(|(k, _)| !CURSOR_KEYS.contains(&k.as_str())) {
            into.insert(key.clone(), value.clone());
        }
    }
    state
}

async fn read_stream(shared: Shared, selected: SelectedStream) -> Result<StreamSummary, OutputClosed> {
    let out = shared.out.clone();
    let name = selected.stream.name.clone();
    let summary = StreamSummary { name: name.clone(), ..Default::default() };
    out.schema(&selected.described()).await?;
    out.status(&name, StreamStatus::Started).await?;

    // The saved state in the host's form (the connector reads a state in its own shape).
    // Borrowed when it is the saved state itself: a state may be tens of MiB of JSON, and
    // several times that parsed.
    let shaped = selected.cursor_field.is_some() && shared.shaper.shapes(&name);
    let host_form;
    let saved = match shaped {
        true => match shared.shaper.host_form(&shared.connector, &name, selected.saved_state.as_ref()).await {
            Ok(saved) => {
                host_form = saved;
                host_form.as_ref()
            }
            Err(e) => return stream_refused(&out, summary, &e).await,
        },
        false => selected.saved_state.as_ref(),
    };
    // A state folded as it was parsed under a lower limit than this run's is folded again
    // under that one: its kept cursors are not the whole list, and the partitions it no longer
    // names may resume only from the lowest of them, as in a run's own fallback.
    let max_cursors = match shared.folded.get(&name) {
        Some(&(parse_limit, _)) => shared.limits.max_partition_cursors.min(parse_limit),
        None => shared.limits.max_partition_cursors,
    };
    let cursor = match &selected.cursor_field {
        Some(field) => match saved_cursor(&shared, &name, field, saved, max_cursors).await? {
            Ok(cursor) => Some(cursor),
            Err(e) => return stream_refused(&out, summary, &e).await,
        },
        None => None,
    };
    // The listing runs beside the reads and hands partitions over a bounded channel.
    let (partition_tx, partition_rx) = mpsc::channel::<Listed>(256);
    let lister = spawn_listing(&shared, &selected, cursor.as_ref().filter(|_| !shaped), saved, partition_tx);
    let (done_tx, done_rx) = mpsc::unbounded_channel::<TaskEvent>();
    let mut stream = StreamRead {
        through_jobs: shared.jobs.as_ref().is_some_and(|j| j.reads_through_jobs(&name)),
        stream_permits: shared.concurrency.per_stream.map(|n| Arc::new(Semaphore::new(n.max(1)))),
        saved_jobs: saved_job_handles(saved, &name, shared.concurrency.shard),
        shaped,
        jobs_in_flight: Default::default(),
        last_state: None,
        unsaved: 0,
        saved_at: std::time::Instant::now(),
        resume: None,
        next: None,
        in_flight: 0,
        lowest_start: None,
        running: Arc::new(AtomicBool::new(false)),
        written: Arc::default(),
        excluded: selected.excluded.clone(),
        shared,
        name,
        summary,
        cursor,
        done_tx,
    };
    if stream.shared.resumable.contains(&stream.name) && !stream.through_jobs {
        match stream.resumption(saved, max_cursors).await? {
            Ok(resumption) => stream.resume = Some(resumption),
            Err(e) => return stream_refused(&out, stream.summary, &e).await,
        }
    }
    stream.last_state = stream.state().as_ref().map(state_digest);
    stream.run(partition_rx, done_rx, lister).await
}

/// A stream that cannot start (its saved state is refused): an error naming it, INCOMPLETE.
async fn stream_refused(out: &Output, summary: StreamSummary, message: &str) -> Result<StreamSummary, OutputClosed> {
    out.error(message, FailureType::Config, Some(&summary.name)).await?;
    out.status(&summary.name, StreamStatus::Incomplete).await?;
    Ok(StreamSummary { failed: true, ..summary })
}

/// The stream's cursor from its saved state, taken in under the run's bounds: partition
/// cursors past the limit are folded into one stream-level cursor as they are read, as the
/// run itself falls back (with a warning saying so).
async fn saved_cursor(
    shared: &Shared,
    name: &str,
    field: &[String],
    saved: Option<&Value>,
    max_cursors: usize,
) -> Result<Result<StreamCursor, String>, OutputClosed> {
    let cursor = match StreamCursor::with_limit(name, field.to_vec(), saved, max_cursors) {
        Ok(cursor) => cursor,
        Err(e) => return Ok(Err(format!("{e:#}"))),
    };
    // Folded as the file was parsed (at most the limit and one more were kept), or here, or
    // both: the count is the file's.
    let at_parse = shared.folded.get(name).copied();
    let message = match (cursor.saved_fell_back(), at_parse) {
        (Some(kept), at_parse) => Some((max_cursors, at_parse.map_or(kept, |(_, n)| n), true)),
        (None, Some((limit, n))) => Some((limit, n, false)),
        (None, None) => None,
    };
    if let Some((limit, saved_cursors, all)) = message {
        let message = match all {
            true => format!(
                "stream {name} has more than {limit} partition cursors ({saved_cursors} in its saved \
                 state): its state falls back to one stream-level cursor (the lowest of them), from \
                 which every partition resumes"
            ),
            false => format!(
                "stream {name} has more than {limit} partition cursors ({saved_cursors} in its saved \
                 state): the first {limit} keep their own, and every other partition resumes from the \
                 lowest of them"
            ),
        };
        shared.out.log("WARN", &message).await?;
    }
    Ok(Ok(cursor))
}

/// Starts listing the stream's partitions. A saved state folded past the limit (`cursor`, for a
/// state in the host's own shape) is handed to the listing as the host now holds it (the
/// stream-level cursor, not the saved cursors): the guest parses no more of it than the host
/// keeps, and no copy of the saved cursors is made for it.
fn spawn_listing(
    shared: &Shared,
    selected: &SelectedStream,
    cursor: Option<&StreamCursor>,
    saved: Option<&Value>,
    partition_tx: mpsc::Sender<Listed>,
) -> tokio::task::JoinHandle<Result<Result<(), CallError>, OutputClosed>> {
    let shared = shared.clone();
    let selected = match cursor.filter(|c| c.saved_fell_back().is_some()) {
        Some(cursor) => SelectedStream {
            stream: selected.stream.clone(),
            cursor_field: selected.cursor_field.clone(),
            saved_state: Some(folded_for_listing(saved, cursor)),
            excluded: selected.excluded.clone(),
        },
        None => selected.clone(),
    };
    // In the stream's span: the listing's requests are the stream's.
    let listing = async move {
        read::list_partitions(&shared.connector, &shared.out, &shared.limits, &selected, partition_tx).await
    };
    tokio::spawn(tracing::Instrument::in_current_span(listing))
}

impl StreamRead {
    /// Where the stream's partitions in progress resume, from its saved state (at most
    /// `max_cursors` of them; the others are read again from their start, with a warning).
    async fn resumption(
        &self,
        saved: Option<&Value>,
        max_cursors: usize,
    ) -> Result<Result<Resumption, String>, OutputClosed> {
        let full_read = self.cursor.is_none();
        let max_token_bytes = self.shared.limits.max_token_bytes;
        let mut resumption = match Resumption::with_limit(&self.name, saved, full_read, max_cursors, max_token_bytes) {
            Ok(resumption) => resumption,
            Err(e) => return Ok(Err(format!("{e:#}"))),
        };
        // Another shard's part-read partitions are its own to continue and carry on.
        if let Some(shard) = self.shared.concurrency.shard {
            resumption.retain_in_progress(|key| shard.owns(&self.name, key));
        }
        if resumption.dropped() > 0 {
            let message = format!(
                "stream {}: its saved state has more than {max_cursors} partitions in progress; the other {} \
                 are read again from their start (nothing is lost; their records may be written again)",
                self.name,
                resumption.dropped()
            );
            self.shared.out.log("WARN", &message).await?;
        }
        Ok(Ok(resumption))
    }

    /// Reads the listed partitions as room allows, until the listing has ended and every
    /// partition and job with it.
    async fn run(
        mut self,
        mut partition_rx: mpsc::Receiver<Listed>,
        mut done_rx: mpsc::UnboundedReceiver<TaskEvent>,
        lister: tokio::task::JoinHandle<Result<Result<(), CallError>, OutputClosed>>,
    ) -> Result<StreamSummary, OutputClosed> {
        let mut lister = Some(lister);
        let mut listing_open = true;
        loop {
            tokio::select! {
                biased;
                Some(event) = done_rx.recv(), if self.in_flight > 0 => self.task_event(event).await?,
                received = partition_rx.recv(), if listing_open && self.next.is_none() => match received {
                    Some(listed) => self.listed(listed).await?,
                    None => {
                        listing_open = false;
                        let lister = lister.take().expect("the listing ends once");
                        let listing = match lister.await {
                            Ok(result) => result?,
                            Err(e) => Err(CallError::Trap(format!("the partition listing failed: {e}"))),
                        };
                        self.listing_ended(listing).await?;
                    }
                },
                permits = self.room(), if self.next.is_some() => self.start(permits),
                _ = tokio::time::sleep_until(self.heartbeat_at()), if !self.jobs_in_flight.is_empty() => {
                    self.heartbeat().await?
                }
                else => break,
            }
        }
        self.finish().await
    }
}

/// The permits a partition holds while it reads: its stream's (when capped) and the run's. Its
/// tenant's slot of the runtime's (when shared) it takes in its own task ([`fair_slot`]), so
/// each of a run's partitions waits there and the slots go by weight.
type Permits = (Option<tokio::sync::OwnedSemaphorePermit>, tokio::sync::OwnedSemaphorePermit);

impl StreamRead {
    /// Room for the next partition: its permits, or (report jobs) nothing at once, since a job
    /// partition takes its slot only to read its result.
    async fn room(&self) -> Option<Permits> {
        match self.through_jobs {
            true => None,
            false => Some(acquire(&self.shared, self.stream_permits.as_ref()).await),
        }
    }

    /// Starts the next partition in its own task.
    fn start(&mut self, permits: Option<Permits>) {
        let (partition, range, resume_from) = self.next.take().expect("started only when there is a next partition");
        self.in_flight += 1;
        let saved = match self.through_jobs {
            true => self.saved_jobs.remove(&partition.key),
            false => None,
        };
        // The newest cursor value read: an open-ended partition's cursor, a window's bookmark.
        let track = self.cursor.as_ref().map(|c| c.field().to_vec());
        let checkpoints = self.resume.is_some().then(|| self.done_tx.clone());
        let task = PartitionTask {
            shared: self.shared.clone(),
            partition,
            range,
            track,
            excluded: self.excluded.clone(),
            running: self.running.clone(),
            written: self.written.clone(),
            resume_from,
            checkpoints,
        };
        let (done_tx, stream_permits) = (self.done_tx.clone(), self.stream_permits.clone());
        let (partition, range) = (task.partition.clone(), task.range.clone());
        // Opened here, in the stream's span, so the partition's task carries it as its parent.
        let span = tracing::info_span!(
            "partition",
            stream = %partition.stream,
            partition = %partition.key,
            records = tracing::field::Empty,
            failed = tracing::field::Empty,
        );
        // Boxed: the reading future is about 12 KB, and a task's future is moved into its cell
        // when spawned (10,000 partitions moved 120 MB more; memmove was 6% of such a run).
        let reading = tracing::Instrument::instrument(
            Box::pin({
                let done_tx = done_tx.clone();
                async move {
                    let finished = match permits {
                        Some(permits) => {
                            let slot = fair_slot(&task.shared).await;
                            let reading = InFlight::new(task.shared.connector.usage.clone());
                            let finished = task.run().await;
                            drop((reading, slot, permits));
                            finished
                        }
                        None => task.run_job(saved, stream_permits, &done_tx).await,
                    };
                    note_in_span(&finished);
                    finished
                }
            }),
            span,
        );
        // A partition task that panics still reports back (as a failed partition), so its
        // stream does not wait for it forever. Caught in the task itself: a second task per
        // partition to await the first was 2% of a run of one-record partitions.
        tokio::spawn(async move {
            let finished = CatchUnwind(reading).await.unwrap_or_else(|panic| {
                let message = panic_message(panic.as_ref());
                let result = Err(CallError::Trap(format!("the host failed while reading this partition: {message}")));
                Ok(Finished { partition, range, result })
            });
            let _ = done_tx.send(TaskEvent::Finished(Box::new(finished)));
        });
    }

    /// A partition task's news: a job handle to keep in the state, or the partition's end.
    async fn task_event(&mut self, event: TaskEvent) -> Result<(), OutputClosed> {
        let finished = match event {
            TaskEvent::Job(JobEvent::Retried) => {
                self.summary.job_retries += 1;
                return Ok(());
            }
            TaskEvent::Job(JobEvent::Handle { key, handle }) => {
                match handle {
                    Some(handle) => self.jobs_in_flight.insert(key, handle),
                    None => self.jobs_in_flight.remove(&key),
                };
                return self.emit_state().await;
            }
            TaskEvent::Checkpoint { key, checkpoint } => {
                if let Some(resume) = self.resume.as_mut() {
                    resume.save(&key, checkpoint);
                    self.unsaved += 1;
                    if self.state_due() {
                        self.emit_state().await?;
                    }
                }
                return Ok(());
            }
            TaskEvent::Finished(finished) => (*finished)?,
        };
        if let Some(resume) = self.resume.as_mut() {
            resume.finished(&finished.partition.key, finished.result.is_ok());
        }
        self.in_flight -= 1;
        let (out, name) = (&self.shared.out, &self.name);
        self.shared.progress.partition_done(name);
        // A partition whose cursor is of another kind than the stream's fails: its values
        // cannot be ordered against the saved ones.
        let kind_error = match (&finished.result, self.cursor.as_ref()) {
            (Ok(done), Some(cursor)) => done.max_cursor.as_ref().and_then(|v| cursor.check_kind(v).err()),
            _ => None,
        };
        let result = match kind_error {
            Some(e) => Err(CallError::Guest(crate::bindings::GuestError::System(e))),
            None => finished.result,
        };
        match result {
            Ok(done) => {
                if let Some(cursor) = self.cursor.as_mut() {
                    match &finished.range {
                        Some((start, end)) => cursor.complete_range(start.as_ref(), end, done.max_cursor.clone()),
                        None => {
                            let range = finished.partition.cursor_range.as_ref();
                            let start = range.and_then(|r| r.start.as_ref()).map(read::cursor_to_json);
                            let key = &finished.partition.key;
                            if cursor.complete_from(key, start.as_ref(), done.max_cursor) {
                                let message = format!(
                                    "stream {name} has more than {} partition cursors: its state falls back to one \
                                     stream-level cursor (the lowest of them), from which every partition resumes",
                                    cursor.max_partitions()
                                );
                                out.log("WARN", &message).await?;
                            }
                        }
                    }
                }
                self.unsaved += 1;
                if self.state_due() {
                    self.emit_state().await?;
                }
            }
            Err(e) => {
                self.summary.failed_partitions += 1;
                let message = format!("stream {name}, partition {}: {}", finished.partition.key, e.message());
                out.error(&message, e.failure_type(), Some(name)).await?;
            }
        }
        Ok(())
    }

    /// What the listing found: an estimate, or a partition to read (or skip, when a previous
    /// run finished it).
    async fn listed(&mut self, listed: Listed) -> Result<(), OutputClosed> {
        let (shared, name) = (&self.shared, &self.name);
        let mut partition = match listed {
            Listed::Estimate(records) => {
                shared.progress.estimate(name, records);
                return shared.out.estimate(name, records).await;
            }
            Listed::Partition(partition) => partition,
        };
        self.summary.partitions += 1;
        shared.progress.partition_listed(name);
        let range = bounded_range(&partition);
        if let Some((start, _)) = &range {
            track_lowest(&mut self.lowest_start, start.as_ref());
        }
        if let Some(shard) = shared.concurrency.shard
            && !shard.owns(name, &partition.key)
        {
            self.summary.other_shards += 1;
            shared.progress.partition_done(name);
            return Ok(());
        }
        if let Some(resume) = &self.resume {
            // The listing made the key compact (`read::hand_over`), as the saved keys are.
            let key = &partition.key;
            if resume.is_done(key) {
                // A full read being resumed finished it already.
                self.summary.skipped_partitions += 1;
                shared.progress.partition_done(name);
                return Ok(());
            }
            if let Some(checkpoint) = resume.checkpoint(key).cloned() {
                // It continues where it stopped, with the start its token belongs to.
                let start = checkpoint.start.as_ref().and_then(read::json_to_cursor);
                partition.cursor_range.get_or_insert(crate::bindings::CursorRange { start: None, end: None }).start =
                    start;
                let range = range.map(|(_, end)| (checkpoint.start.clone(), end));
                self.next = Some((partition, range, Some(checkpoint)));
                return Ok(());
            }
        }
        match (self.cursor.as_ref(), range) {
            (Some(cursor), Some((start, end))) => match cursor.resume(start.as_ref(), &end) {
                Resume::Skip => {
                    self.summary.skipped_partitions += 1;
                    shared.progress.partition_done(name);
                }
                Resume::From(from) => {
                    set_start(&mut partition, &from);
                    self.next = Some((partition, Some((Some(from), end)), None));
                }
                Resume::Read => self.next = Some((partition, Some((start, end)), None)),
            },
            (Some(cursor), None) => {
                read::raise_start(&mut partition, cursor);
                self.next = Some((partition, None, None));
            }
            (None, range) => self.next = Some((partition, range, None)),
        }
        Ok(())
    }

    /// The listing ended: the cursor learns where the partitions start, and saved jobs of
    /// partitions this run does not read are discarded (or kept, when the listing failed).
    async fn listing_ended(&mut self, listing: Result<(), CallError>) -> Result<(), OutputClosed> {
        let (shared, name) = (&self.shared, &self.name);
        match listing {
            Ok(()) => {
                if let Some(cursor) = self.cursor.as_mut() {
                    cursor.listing_complete(self.lowest_start.clone().flatten().as_ref());
                }
                for (key, handle) in self.saved_jobs.drain() {
                    match &shared.jobs {
                        Some(jobs) => jobs.discard(name, &key, &handle).await?,
                        None => {
                            let message = format!(
                                "job {handle} of stream {name} saved in the state is left on the API: the plugin no longer reads {name} through jobs"
                            );
                            shared.out.log("WARN", &message).await?;
                        }
                    }
                }
            }
            Err(e) => {
                self.summary.failed = true;
                let message = format!("cannot list the partitions of stream {name}: {}", e.message());
                shared.out.error(&message, e.failure_type(), Some(name)).await?;
                // Partitions the listing did not reach keep their saved jobs for the next run.
                self.jobs_in_flight.extend(self.saved_jobs.drain());
            }
        }
        Ok(())
    }

    /// The stream's state now: its cursor's, its report jobs', its checkpoints.
    fn state(&self) -> Option<Value> {
        let mut state = stream_state(self.cursor.as_ref(), &self.jobs_in_flight);
        if let Some(resume) = &self.resume {
            resume.add_to(&mut state);
        }
        state
    }

    /// When the STATE is repeated while jobs run and nothing is said.
    fn heartbeat_at(&self) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.saved_at) + self.shared.concurrency.jobs.heartbeat
    }

    /// The stream's STATE again, unchanged: the sync is alive while its jobs run.
    async fn heartbeat(&mut self) -> Result<(), OutputClosed> {
        if let Some(state) = self.state() {
            self.write_state(Some(state), true).await?;
        }
        self.saved_at = std::time::Instant::now();
        Ok(())
    }

    async fn emit_state(&mut self) -> Result<(), OutputClosed> {
        let state = self.state();
        self.write_state(state, false).await?;
        self.unsaved = 0;
        self.saved_at = std::time::Instant::now();
        Ok(())
    }

    /// Sends the stream's state when it changed since the last one sent (or always, with
    /// `again`), in the connector's shape for a shaped stream. Once a stream had jobs in its
    /// state, a state of nothing is sent as `{}`.
    async fn write_state(&mut self, state: Option<Value>, again: bool) -> Result<(), OutputClosed> {
        let state = match state {
            Some(state) => state,
            None if self.last_state.is_some() => serde_json::json!({}),
            None => return Ok(()),
        };
        let digest = state_digest(&state);
        if !again && self.last_state == Some(digest) {
            return Ok(());
        }
        let written = match self.shaped {
            true => match self.shared.shaper.shaped(&self.shared.connector, &self.name, &state).await {
                Ok(shaped) => shaped,
                Err(e) => {
                    // Written in the host's form: Sluice resumes from it, nothing is lost.
                    self.shared.out.log("WARN", &e).await?;
                    state
                }
            },
            false => state,
        };
        self.shared.out.state(&self.name, written).await?;
        self.last_state = Some(digest);
        Ok(())
    }

    /// Whether the STATE after a change (a finished partition, a checkpoint) goes out now. Each
    /// STATE holds the whole stream's state, so writing one per partition made a run's STATE
    /// bytes grow with the square of its partitions. A STATE is written at every change while
    /// the state is small, else once the changes since the last one are half the state's entries
    /// (so the bytes of all STATEs stay within about three times the final state's: linear; with
    /// a quarter they were five times it, and building them a twentieth of a 10,000-partition
    /// run; what a crash reads again, the partitions finished since the last STATE, stays under
    /// a third of the state's entries),
    /// or when `STATE_INTERVAL` has passed; the stream's end writes the last one whatever these
    /// say.
    fn state_due(&self) -> bool {
        let entries =
            self.cursor.as_ref().map_or(0, StreamCursor::entries) + self.resume.as_ref().map_or(0, Resumption::entries);
        let entries = entries as u64;
        // A small state goes out at every change: it costs little, and a crash repeats less.
        self.unsaved > 0
            && (entries <= SMALL_STATE || self.unsaved * 2 >= entries || self.saved_at.elapsed() >= STATE_INTERVAL)
    }

    /// The stream's last state and its final status.
    async fn finish(mut self) -> Result<StreamSummary, OutputClosed> {
        self.summary.records = self.written.load(Ordering::Relaxed);
        // What a finished sync hands the next one is decided once every partition is read: by
        // the run itself, or for a shard, which read only some, by `host state merge`.
        let sync_complete = self.summary.complete() && self.shared.concurrency.shard.is_none();
        if let Some(cursor) = self.cursor.as_mut() {
            cursor.stream_finished(sync_complete);
        }
        if let Some(resume) = self.resume.as_mut() {
            resume.stream_finished(self.summary.complete());
        }
        // A stream read in full that finished says so, as the Airbyte CDK's do, so a platform sees a
        // STATE for every stream (Singer keeps the stream's plain state). An incremental stream
        // ends with its state even when nothing changed: a platform that keeps only this sync's
        // states keeps its bookmark.
        if self.cursor.is_none() && self.summary.complete() && self.shared.out.format() == Format::Airbyte {
            self.write_state(Some(state::no_cursor_state()), false).await?;
        } else {
            let state = self.state();
            let again = self.cursor.is_some();
            self.write_state(state, again).await?;
        }
        let status = if self.summary.complete() { StreamStatus::Complete } else { StreamStatus::Incomplete };
        self.shared.out.status(&self.name, status).await?;
        Ok(self.summary)
    }
}

/// A future whose panic is caught and returned, as a spawned task's join handle would.
struct CatchUnwind<F>(F);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn std::any::Any + Send>>;

    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        // A future that panicked is not polled again: the task ends with the panic.
        let inner = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| std::pin::Pin::new(inner).poll(cx))) {
            Ok(poll) => poll.map(Ok),
            Err(panic) => std::task::Poll::Ready(Err(panic)),
        }
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<&str>(), panic.downcast_ref::<String>()) {
        (Some(text), _) => format!("it panicked: {text}"),
        (_, Some(text)) => format!("it panicked: {text}"),
        _ => "it panicked".to_string(),
    }
}

/// A stream's state: its cursor's, plus the report jobs in flight (`"jobs"`).
fn stream_state(cursor: Option<&StreamCursor>, jobs: &std::collections::BTreeMap<String, Value>) -> Option<Value> {
    let mut state = cursor.map(StreamCursor::to_state);
    if !jobs.is_empty() {
        let list: Vec<Value> = jobs
            .iter()
            .map(|(key, handle)| {
                let partition: Value = serde_json::from_str(key).unwrap_or(Value::Null);
                serde_json::json!({"partition": partition, "job": handle})
            })
            .collect();
        state.get_or_insert_with(|| serde_json::json!({}))["jobs"] = Value::Array(list);
    }
    state
}

/// Jobs a previous run left in flight, by partition key (compact JSON text, so a key matches
/// however the guest spaced it).
/// The report jobs saved in a stream's state, by partition key; in a sharded read, only this
/// shard's (another shard polls, reads or aborts its own, and carries them on).
fn saved_job_handles(
    saved: Option<&Value>,
    stream: &str,
    shard: Option<Shard>,
) -> std::collections::HashMap<String, Value> {
    let entries = saved.and_then(|s| s.get("jobs")).and_then(Value::as_array).cloned().unwrap_or_default();
    entries
        .into_iter()
        .filter_map(|e| Some((e.get("partition")?.to_string(), e.get("job")?.clone())))
        .filter(|(key, _)| shard.is_none_or(|s| s.owns(stream, key)))
        .collect()
}

/// The permits a partition needs: its stream's (when capped) and the run's.
async fn acquire(shared: &Shared, stream: Option<&Arc<Semaphore>>) -> Permits {
    let stream_permit = match stream {
        Some(s) => Some(s.clone().acquire_owned().await.expect("semaphores are never closed")),
        None => None,
    };
    (stream_permit, shared.permits.clone().acquire_owned().await.expect("semaphores are never closed"))
}

/// The tenant's slot of the runtime's shared partition slots, when the run has a share.
async fn fair_slot(shared: &Shared) -> Option<FairSlot> {
    match &shared.concurrency.fair_share {
        Some(ticket) => Some(ticket.slot().await),
        None => None,
    }
}

/// `(start, end]` of a partition whose cursor range has an end.
fn bounded_range(partition: &Partition) -> Option<Bounds> {
    let range = partition.cursor_range.as_ref()?;
    let end = read::cursor_to_json(range.end.as_ref()?);
    Some((range.start.as_ref().map(read::cursor_to_json), end))
}

fn set_start(partition: &mut Partition, start: &Value) {
    if let Some(range) = partition.cursor_range.as_mut() {
        range.start = read::json_to_cursor(start);
    }
}

/// The lowest start among bounded partitions; `Some(None)` once one starts at the beginning.
fn track_lowest(lowest: &mut Option<Option<Value>>, start: Option<&Value>) {
    *lowest = match (lowest.take(), start) {
        (None, s) => Some(s.cloned()),
        (Some(None), _) | (Some(Some(_)), None) => Some(None),
        (Some(Some(l)), Some(s)) => {
            Some(Some(if state::compare(s, &l) == std::cmp::Ordering::Less { s.clone() } else { l }))
        }
    };
}

struct PartitionTask {
    shared: Shared,
    partition: Partition,
    range: Option<Bounds>,
    /// Track the largest value of this cursor field (open-ended incremental partitions).
    track: Option<Vec<String>>,
    excluded: Arc<[String]>,
    running: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
    /// Where a resumed partition continues.
    resume_from: Option<Checkpoint>,
    /// Where a resumable partition's checkpoints go (its stream).
    checkpoints: Option<mpsc::UnboundedSender<TaskEvent>>,
}

/// A partition being read, counted in the run's partitions in flight while it lives.
struct InFlight(Arc<Usage>);

impl InFlight {
    fn new(usage: Arc<Usage>) -> Self {
        let now = usage.partitions_in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        usage.peak_partitions_in_flight.fetch_max(now, Ordering::Relaxed);
        InFlight(usage)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.partitions_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What became of a partition, on its span.
fn note_in_span(finished: &Result<Finished, OutputClosed>) {
    let span = tracing::Span::current();
    match finished.as_ref().map(|f| &f.result) {
        Ok(Ok(done)) => span.record("records", done.records),
        Ok(Err(e)) => span.record("failed", tracing::field::display(e)),
        Err(_) => span.record("failed", "the output was closed"),
    };
}

impl PartitionTask {
    /// A partition read through report jobs: no slot is held while its job runs; the partition
    /// slot is taken to read the result.
    async fn run_job(
        self,
        saved: Option<Value>,
        stream_permits: Option<Arc<Semaphore>>,
        done_tx: &mpsc::UnboundedSender<TaskEvent>,
    ) -> Result<Finished, OutputClosed> {
        let shared = &self.shared;
        let jobs = shared.jobs.clone().expect("job partitions exist only with an orchestrator");
        let (events_tx, mut events_rx) = mpsc::unbounded_channel::<JobEvent>();
        let forward = {
            let done_tx = done_tx.clone();
            tokio::spawn(async move {
                while let Some(event) = events_rx.recv().await {
                    let _ = done_tx.send(TaskEvent::Job(event));
                }
            })
        };
        let result = match jobs.completed_job(&self.partition, saved, &events_tx).await? {
            Err(e) => Err(e),
            Ok(job) => {
                let permits = acquire(shared, stream_permits.as_ref()).await;
                let slot = fair_slot(shared).await;
                let reading = InFlight::new(shared.connector.usage.clone());
                let result = self.read(Some((&job.handle, &job.download))).await?;
                drop((reading, slot, permits));
                jobs.finish(&self.partition, &job, &events_tx).await?;
                result
            }
        };
        drop(events_tx);
        // Every job event reaches the stream before the partition's end.
        let _ = forward.await;
        Ok(Finished { partition: self.partition, range: self.range, result })
    }

    async fn run(self) -> Result<Finished, OutputClosed> {
        let result = self.read(None).await?;
        Ok(Finished { partition: self.partition, range: self.range, result })
    }

    /// Reads the partition's pages (or, with `job`, a completed job's result); the stream is
    /// RUNNING from its first record.
    async fn read(&self, job: Option<(&String, &String)>) -> Result<Result<PartitionDone, CallError>, OutputClosed> {
        let mut done = PartitionDone::default();
        let result = self.read_into(job, &mut done).await?;
        self.written.fetch_add(done.records, Ordering::Relaxed);
        Ok(result.map(|()| done))
    }

    async fn read_into(
        &self,
        job: Option<(&String, &String)>,
        done: &mut PartitionDone,
    ) -> Result<Result<(), CallError>, OutputClosed> {
        let shared = &self.shared;
        let name = &self.partition.stream;
        let running = &self.running;
        let key = &self.partition.key;
        let start = self.partition.cursor_range.as_ref().and_then(|r| r.start.as_ref()).map(read::cursor_to_json);
        let save = |token: &str, cursor: Option<&Value>| {
            if let Some(events) = &self.checkpoints {
                let token = serde_json::from_str(token).unwrap_or(Value::Null);
                let checkpoint = Checkpoint { start: start.clone(), token, cursor: cursor.cloned() };
                let _ = events.send(TaskEvent::Checkpoint { key: key.clone(), checkpoint });
            }
        };
        let resuming = read::Resuming {
            from: self.resume_from.as_ref().map(|c| (&c.token, c.cursor.as_ref())),
            save: self.checkpoints.as_ref().map(|_| &save as &read::SaveCheckpoint),
        };
        let source = read::Source {
            connector: &shared.connector,
            steps: &shared.steps,
            out: &shared.out,
            limits: &shared.limits,
            progress: &shared.progress,
        };
        read::read_partition(
            source,
            &self.partition,
            job,
            read::RecordRules { cursor_field: self.track.as_deref(), excluded: &self.excluded },
            done,
            resuming,
            async || {
                if !running.swap(true, Ordering::SeqCst) {
                    shared.out.status(name, StreamStatus::Running).await?;
                }
                Ok(())
            },
        )
        .await
    }
}

/// What tells one state from another without keeping it: blake3 of its JSON text (serde_json
/// writes a value's text the same way every time), hashed as it is written, never built.
fn state_digest(state: &Value) -> blake3::Hash {
    let mut hasher = blake3::Hasher::new();
    // Writing into the hasher cannot fail.
    let _ = serde_json::to_writer(&mut hasher, state);
    hasher.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A partition task's panic is caught with what it said (a `&str` or a `String`); a task
    /// that does not panic ends with its output.
    #[tokio::test]
    async fn a_partition_task_that_panics_reports_what_it_said() {
        let fine = CatchUnwind(Box::pin(async { 7 })).await;
        assert_eq!(fine.ok(), Some(7));
        let panicked = CatchUnwind(Box::pin(async {
            if true {
                panic!("on purpose");
            }
        }))
        .await;
        let message = panic_message(panicked.expect_err("the panic is caught").as_ref());
        assert_eq!(message, "it panicked: on purpose");
        let text = String::from("formatted");
        let panicked = CatchUnwind(Box::pin(async move { std::panic::panic_any(text) })).await;
        assert_eq!(panic_message(panicked.err().unwrap().as_ref()), "it panicked: formatted");
    }

    /// A listing handed a folded state sees the stream-level cursor, not the saved cursors; what
    /// else the state holds (jobs, partitions in progress) is as saved.
    #[test]
    fn a_folded_state_reaches_the_listing_without_its_cursors() {
        let partitions: Vec<Value> = (0..5).map(|p| json!({"partition": {"p": p}, "cursor": 10 + p})).collect();
        let in_progress = json!([{"partition": {"p": 9}, "start": null, "token": "t", "cursor": null}]);
        let saved = json!({"cursor_field": ["c"], "partitions": partitions, "in_progress": in_progress, "jobs": []});
        let cursor = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 3).unwrap();
        assert_eq!(
            folded_for_listing(Some(&saved), &cursor),
            json!({"cursor_field": ["c"], "low_water": 10, "in_progress": in_progress, "jobs": []})
        );
    }
}
