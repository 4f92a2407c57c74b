//! The async-job orchestrator: one per run, shared by every stream of the plugin. For each
//! partition of a stream the plugin reads through report jobs it creates a job, polls it on a
//! timer, reads its result, and deletes it:
//!
//! - slots: at most `max_jobs` jobs in flight in the run (and `per_stream` per stream); a job
//!   frees its slot when it completes, before its result is read;
//! - no instance and no partition slot is held while a job runs: polling is a timer, and each
//!   poll is one short call in a fresh instance; only reading the result takes a partition slot,
//!   like any other partition, so ordinary streams keep flowing;
//! - a failed job is retried as a new job, up to `attempts`, after `retry_delay`; a job running
//!   past `timeout` is aborted and retried the same way;
//! - handles of jobs created but not yet read go into the stream's state (through
//!   [`JobEvent`]s), so a resumed run polls them instead of creating new ones;
//! - on SIGINT/SIGTERM ([`Orchestrator::abort_all`]) every job in flight is aborted; a saved job
//!   whose partition a resumed run does not read is aborted too ([`Orchestrator::discard`]).

use crate::bindings::{self, JobStatus, Partition};
use crate::data::protocol::{Output, OutputClosed};
use crate::guest::connector::{CallError, Connector, Instance};
use crate::run::logs::emit_logs;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::{OwnedSemaphorePermit, RwLock, Semaphore};

/// The operator's knobs; `None` means the plugin's or the default.
#[derive(Debug, Clone, Copy)]
pub struct JobOptions {
    /// Jobs in flight at once in the run [default: what the plugin says].
    pub max_jobs: Option<usize>,
    /// Jobs in flight at once in one stream [default: no limit beyond `max_jobs`].
    pub per_stream: Option<usize>,
    /// A job is polled at once, then after this wait; later waits grow by half, up to
    /// `max_poll_interval`.
    pub poll_interval: Duration,
    pub max_poll_interval: Duration,
    /// Jobs tried per partition (the first included).
    pub attempts: u32,
    /// Wait before creating a job again after one failed.
    pub retry_delay: Duration,
    /// A job running longer is aborted (and retried).
    pub timeout: Duration,
    /// While a stream's jobs run and nothing else is written, its STATE is repeated this often,
    /// so a platform that fails a sync after hours without RECORD or STATE (the Airbyte platform:
    /// 3 hours) sees it is alive.
    pub heartbeat: Duration,
}

impl Default for JobOptions {
    fn default() -> Self {
        JobOptions {
            max_jobs: None,
            per_stream: None,
            poll_interval: Duration::from_secs(2),
            max_poll_interval: Duration::from_secs(30),
            attempts: 3,
            retry_delay: Duration::from_secs(1),
            timeout: Duration::from_secs(3600),
            heartbeat: Duration::from_secs(600),
        }
    }
}

/// What a job task tells its stream, for the stream's state.
pub enum JobEvent {
    /// `partition` (its key, as JSON text) has a job in flight: `Some(handle)`; or no more.
    Handle { key: String, handle: Option<Value> },
    /// A job failed (or timed out, or was lost) and a new one is being created.
    Retried,
}

/// A job in flight, for cleanup.
struct Active {
    partition: Partition,
    handle: String,
}

pub struct Orchestrator {
    connector: Arc<Connector>,
    out: Output,
    options: JobOptions,
    /// Streams read through jobs.
    streams: HashSet<String>,
    slots: Arc<Semaphore>,
    stream_slots: Mutex<HashMap<String, Arc<Semaphore>>>,
    active: Mutex<HashMap<u64, Active>>,
    next_id: AtomicU64,
    /// Held (read) while a job is being created and registered; `abort_all` takes it (write),
    /// so no job appears after the cleanup.
    creating: RwLock<bool>,
}

/// Why a job handle cannot be kept, if it cannot: it goes into every STATE of its stream as
/// JSON, as a page token does, so it is bounded as one, and parsed whole (a lone surrogate,
/// `"\ud800"`, skims as JSON but reads back as nothing, and the job would be lost on resume).
fn refused_handle(handle: &str, max: usize) -> Option<String> {
    if handle.len() > max {
        return Some(format!(
            "the job handle is {} bytes, more than the {max} a token may have (--max-token-kib)",
            handle.len()
        ));
    }
    let invalid = serde_json::from_str::<serde_json::Value>(handle).err();
    invalid.map(|e| format!("the job handle is not valid JSON ({e}): {}", crate::data::protocol::preview(handle)))
}

/// A job that completed: what to read.
pub struct CompletedJob {
    id: u64,
    pub handle: String,
    pub download: String,
}

/// Why a job attempt did not give a result.
enum Attempt {
    /// Give up on the partition: a connector or config error, or the output closed.
    Fatal(CallError),
    /// Try a new job (if attempts remain).
    Retry(String),
}

impl Orchestrator {
    /// The run's orchestrator, when the plugin reads any stream through jobs (`settings`: what
    /// the connector answered, see [`crate::run::asked`]).
    pub fn for_run(
        connector: Arc<Connector>,
        out: Output,
        options: JobOptions,
        settings: Option<bindings::JobSettings>,
    ) -> Option<Arc<Orchestrator>> {
        let settings = settings.filter(|s| !s.streams.is_empty())?;
        let max_jobs = options.max_jobs.unwrap_or(settings.max_jobs as usize).max(1);
        Some(Arc::new(Orchestrator {
            connector,
            out,
            options,
            streams: settings.streams.into_iter().collect(),
            slots: Arc::new(Semaphore::new(max_jobs)),
            stream_slots: Mutex::new(HashMap::new()),
            active: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(0),
            creating: RwLock::new(false),
        }))
    }

    pub fn reads_through_jobs(&self, stream: &str) -> bool {
        self.streams.contains(stream)
    }

    /// A job slot: the run's, and the stream's when capped.
    async fn slot(&self, stream: &str) -> (OwnedSemaphorePermit, Option<OwnedSemaphorePermit>) {
        let stream_slots = self.options.per_stream.map(|n| {
            let mut slots = self.stream_slots.lock().unwrap_or_else(|e| e.into_inner());
            slots.entry(stream.to_string()).or_insert_with(|| Arc::new(Semaphore::new(n.max(1)))).clone()
        });
        let stream_permit = match stream_slots {
            Some(s) => Some(s.acquire_owned().await.expect("slots are never closed")),
            None => None,
        };
        (self.slots.clone().acquire_owned().await.expect("slots are never closed"), stream_permit)
    }

    /// A fresh instance for one call.
    async fn instance(&self) -> Result<Instance, CallError> {
        self.connector.instance().await
    }

    /// Forwards what the instance logged.
    async fn logs(&self, instance: &mut Instance) -> Result<(), OutputClosed> {
        emit_logs(&self.out, instance.take_logs()).await
    }

    /// Ends a job in a fresh instance: abort or delete.
    async fn end_call(
        &self,
        partition: &Partition,
        handle: &str,
        abort: bool,
    ) -> Result<Result<(), CallError>, OutputClosed> {
        let mut instance = match self.instance().await {
            Ok(i) => i,
            Err(e) => return Ok(Err(e)),
        };
        let ended = instance.end_job(self.connector.partition_config(), partition, &handle.to_string(), abort).await;
        self.logs(&mut instance).await?;
        Ok(ended)
    }

    fn register(&self, partition: &Partition, handle: &str) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let active = Active { partition: partition.clone(), handle: handle.to_string() };
        self.active.lock().unwrap_or_else(|e| e.into_inner()).insert(id, active);
        id
    }

    fn unregister(&self, id: u64) {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
    }

    /// Creates a job for `partition`, unless the run is being stopped.
    async fn create(&self, partition: &Partition) -> Result<Result<(u64, String), CallError>, OutputClosed> {
        let closed = self.creating.read().await;
        if *closed {
            return Ok(Err(CallError::Trap("the run is stopping".into())));
        }
        let mut instance = match self.instance().await {
            Ok(i) => i,
            Err(e) => return Ok(Err(e)),
        };
        let created = instance.create_job(self.connector.partition_config(), partition).await;
        self.logs(&mut instance).await?;
        let handle = match created {
            Ok(handle) => handle,
            Err(e) => return Ok(Err(e)),
        };
        if let Some(message) = refused_handle(&handle, self.connector.limits.max_token_bytes) {
            return Ok(Err(CallError::Guest(crate::bindings::GuestError::System(message))));
        }
        Ok(Ok((self.register(partition, &handle), handle)))
    }

    /// Ends a job: abort (timeout, cancellation) or delete (done with it). Failures are logged:
    /// the data is safe either way.
    async fn end(&self, id: u64, partition: &Partition, handle: &str, abort: bool) -> Result<(), OutputClosed> {
        self.unregister(id);
        if let Err(e) = self.end_call(partition, handle, abort).await? {
            let what = if abort { "abort" } else { "delete" };
            let message = format!("cannot {what} job {handle} of stream {}: {}", partition.stream, e.message());
            self.out.log("WARN", &message).await?;
        }
        Ok(())
    }

    /// Aborts every job in flight and lets no new one start (SIGINT, SIGTERM).
    pub async fn abort_all(&self) {
        *self.creating.write().await = true;
        let active: Vec<Active> =
            self.active.lock().unwrap_or_else(|e| e.into_inner()).drain().map(|(_, a)| a).collect();
        for job in active {
            let (handle, stream) = (&job.handle, &job.partition.stream);
            let message = match self.end_call(&job.partition, handle, true).await {
                Ok(Ok(())) => format!("aborted job {handle} of stream {stream} (the run is stopping)"),
                Ok(Err(e)) => format!("cannot abort job {handle} of stream {stream}: {}", e.message()),
                Err(_) => format!("cannot abort job {handle} of stream {stream}: the output is closed"),
            };
            let _ = self.out.log("WARN", &message).await;
        }
    }

    /// Ends a job a previous run saved in the state for a partition this run will not read
    /// (no longer listed, or read completely already), so it does not linger on the API.
    pub async fn discard(&self, stream: &str, key: &str, handle: &Value) -> Result<(), OutputClosed> {
        let partition = Partition { stream: stream.to_string(), key: key.to_string(), cursor_range: None };
        let handle = handle.to_string();
        let message = match self.end_call(&partition, &handle, true).await? {
            Ok(()) => format!(
                "aborted job {handle} of stream {stream} saved in the state: this run does not read its partition {key}"
            ),
            Err(e) => format!("cannot abort job {handle} of stream {stream} saved in the state: {}", e.message()),
        };
        self.out.log("INFO", &message).await
    }

    /// A completed job for `partition`, after as many attempts as allowed: its slot is freed
    /// already; read its result, then [`Orchestrator::finish`] it. `saved` is the handle of a job
    /// a previous run created for it.
    pub async fn completed_job(
        &self,
        partition: &Partition,
        saved: Option<Value>,
        events: &tokio::sync::mpsc::UnboundedSender<JobEvent>,
    ) -> Result<Result<CompletedJob, CallError>, OutputClosed> {
        let say = |handle: Option<Value>| {
            let _ = events.send(JobEvent::Handle { key: partition.key.clone(), handle });
        };
        let mut saved = saved.map(|h| h.to_string());
        let mut last = String::new();
        for attempt in 1..=self.options.attempts.max(1) {
            if attempt > 1 {
                tokio::time::sleep(self.options.retry_delay).await;
            }
            let slot = self.slot(&partition.stream).await;
            let outcome = self.one_job(partition, saved.take(), &say).await?;
            drop(slot);
            match outcome {
                Ok((id, handle, download)) => return Ok(Ok(CompletedJob { id, handle, download })),
                Err(Attempt::Fatal(e)) => {
                    say(None);
                    return Ok(Err(e));
                }
                Err(Attempt::Retry(why)) => {
                    say(None);
                    let attempts = self.options.attempts.max(1);
                    let next = if attempt < attempts { "creating a new job" } else { "no attempts left" };
                    let message = format!(
                        "report job attempt {attempt} of {attempts} for stream {}, partition {}: {why}; {next}",
                        partition.stream, partition.key
                    );
                    self.out.log("WARN", &message).await?;
                    if attempt < attempts {
                        let _ = events.send(JobEvent::Retried);
                    }
                    last = why;
                }
            }
        }
        let attempts = self.options.attempts.max(1);
        Ok(Err(CallError::Guest(crate::bindings::GuestError::Transient(format!(
            "no report job succeeded in {attempts} attempt(s); the last: {last}"
        )))))
    }

    /// Deletes a job whose result was read (whether or not reading succeeded: its records were
    /// written, so it is never tried again).
    pub async fn finish(
        &self,
        partition: &Partition,
        job: &CompletedJob,
        events: &tokio::sync::mpsc::UnboundedSender<JobEvent>,
    ) -> Result<(), OutputClosed> {
        self.end(job.id, partition, &job.handle, false).await?;
        let _ = events.send(JobEvent::Handle { key: partition.key.clone(), handle: None });
        Ok(())
    }

    /// Creates (or resumes) a job and polls it until it completes: its id, handle and download.
    async fn one_job(
        &self,
        partition: &Partition,
        resumed: Option<String>,
        say: &impl Fn(Option<Value>),
    ) -> Result<Result<(u64, String, String), Attempt>, OutputClosed> {
        let (mut id, mut handle, mut is_resumed) = match resumed {
            Some(handle) => (self.register(partition, &handle), handle, true),
            None => match self.create(partition).await? {
                Ok((id, handle)) => (id, handle, false),
                Err(e) => return Ok(Err(classify(e, "creating the job"))),
            },
        };
        say(Some(serde_json::from_str(&handle).unwrap_or(Value::Null)));
        let mut started = Instant::now();
        let mut interval = self.options.poll_interval;
        // The first poll goes at once (a saved job, or a quick report, may be done already);
        // the waits between the next ones grow.
        let mut wait = Duration::ZERO;
        loop {
            let remaining = self.options.timeout.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                self.end(id, partition, &handle, true).await?;
                let timeout = self.options.timeout.as_secs_f64();
                return Ok(Err(Attempt::Retry(format!(
                    "job {handle} ran past its timeout of {timeout:.1}s and was aborted"
                ))));
            }
            tokio::time::sleep(wait.min(remaining)).await;
            wait = interval;
            interval = (interval.mul_f64(1.5)).min(self.options.max_poll_interval);
            let polled = match self.instance().await {
                Ok(mut instance) => {
                    self.connector.usage.job_polls.fetch_add(1, Ordering::Relaxed);
                    let polled = instance.poll_job(self.connector.partition_config(), partition, &handle).await;
                    self.logs(&mut instance).await?;
                    polled
                }
                Err(e) => Err(e),
            };
            match polled {
                Ok(JobStatus::Running) => {}
                Ok(JobStatus::Completed(download)) => return Ok(Ok((id, handle, download))),
                Ok(JobStatus::Failed(reason)) => {
                    self.end(id, partition, &handle, false).await?;
                    return Ok(Err(Attempt::Retry(format!("job {handle} failed: {reason}"))));
                }
                Ok(JobStatus::Unknown) if is_resumed => {
                    // A saved job the API has forgotten: start over with a new one.
                    self.unregister(id);
                    let message = format!(
                        "the API no longer knows job {handle} of stream {} saved in the state; creating a new one",
                        partition.stream
                    );
                    self.out.log("INFO", &message).await?;
                    (id, handle) = match self.create(partition).await? {
                        Ok(created) => created,
                        Err(e) => return Ok(Err(classify(e, "creating the job"))),
                    };
                    is_resumed = false;
                    say(Some(serde_json::from_str(&handle).unwrap_or(Value::Null)));
                    started = Instant::now();
                    wait = Duration::ZERO;
                    interval = self.options.poll_interval;
                }
                Ok(JobStatus::Unknown) => {
                    self.unregister(id);
                    return Ok(Err(Attempt::Retry(format!("the API lost job {handle}"))));
                }
                Err(e) => {
                    self.end(id, partition, &handle, true).await?;
                    return Ok(Err(classify(e, &format!("polling job {handle}"))));
                }
            }
        }
    }
}

/// Config errors end the partition; anything else is worth a new job.
fn classify(e: CallError, doing: &str) -> Attempt {
    match e.failure_type() {
        crate::data::protocol::FailureType::Config => Attempt::Fatal(e),
        _ => Attempt::Retry(format!("{doing}: {}", e.message())),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_job_handle_is_kept_only_when_it_reads_back_whole_within_the_token_bound() {
        assert_eq!(super::refused_handle(r#"{"id":"job-1"}"#, 64), None);
        let lone = super::refused_handle(r#""\ud800x""#, 64).unwrap();
        assert!(lone.contains("not valid JSON"), "{lone}");
        let long = super::refused_handle(&format!("\"{}\"", "j".repeat(100)), 64).unwrap();
        assert!(long.contains("102 bytes, more than the 64"), "{long}");
    }
}
