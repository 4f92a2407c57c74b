//! One run, described: which plugin with which config, what to do with it, under which policy,
//! and where its output goes. The CLI builds one from its arguments, an embedder by hand; both
//! hand it to [`crate::Runtime::run`].

use super::policy::{Policy, PolicySource};
use super::read::StreamSummary;
use super::schedule::Concurrency;
use super::stop::Stop;
use crate::data::catalog::Selected;
use crate::data::protocol::{FailureType, Format, OutputClosed};
use crate::data::state::InputState;
use crate::guest::connector::CallError;
use crate::net::{HttpHooks, HttpOptions};
use crate::storage::replay::StorageOptions;
use serde_json::Value;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What a run does with its connector.
#[derive(Debug, Clone)]
pub enum Action {
    /// Print the config specification (SPEC).
    Spec,
    /// Try the config against the API (CONNECTION_STATUS).
    Check,
    /// List the streams (CATALOG, or a Singer catalog in Singer format).
    Discover,
    /// Read streams: RECORD, STATE, TRACE.
    Read {
        selection: Selection,
        /// Read every selected stream in full, ignoring cursors and state.
        full_refresh: bool,
    },
}

impl Action {
    /// The command's name: `spec`, `check`, `discover` or `read`.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Spec => "spec",
            Action::Check => "check",
            Action::Discover => "discover",
            Action::Read { .. } => "read",
        }
    }
}

/// Which streams a read selects.
#[derive(Debug, Clone, Default)]
pub enum Selection {
    /// Every stream, incrementally wherever it has a cursor.
    #[default]
    All,
    /// These streams, incrementally wherever they have a cursor.
    Streams(Vec<String>),
    /// What a catalog selects, with its sync modes (see [`crate::data::catalog::parse`]).
    Catalog(Vec<Selected>),
}

/// One run. [`RunRequest::new`] reads every stream with safe defaults; set the fields to change
/// them.
pub struct RunRequest {
    /// The connector, a `.wasm` component or a declarative manifest (`.yaml`).
    pub plugin: PathBuf,
    /// Its config: a JSON object.
    pub config: Value,
    pub action: Action,
    /// Grants and limits.
    pub policy: Policy,
    /// Where the policy came from, named in the run's first LOG line; its warnings (a policy
    /// file passed over) are the run's WARNs.
    pub policy_source: PolicySource,
    pub http: HttpOptions,
    /// Answer every HTTP request from the recording of this kept run (`--http-replay`):
    /// nothing goes to the network.
    pub http_replay: Option<String>,
    /// Hooks of the embedder's own around every HTTP attempt (after recording and replay).
    pub http_hooks: Vec<Arc<dyn HttpHooks>>,
    /// Replay storage, HTTP recording and BATCH files.
    pub storage: StorageOptions,
    pub state: InputState,
    pub concurrency: Concurrency,
    pub format: Format,
    /// Draw the progress display on stderr (only when it is a terminal).
    pub progress: bool,
    /// Stops the run when asked.
    pub stop: Stop,
    /// Where the protocol messages go.
    pub sink: Box<dyn Write + Send>,
}

impl RunRequest {
    pub fn new(plugin: impl Into<PathBuf>, config: Value, sink: Box<dyn Write + Send>) -> Self {
        RunRequest {
            plugin: plugin.into(),
            config,
            action: Action::Read { selection: Selection::All, full_refresh: false },
            policy: Policy::default(),
            policy_source: PolicySource::default(),
            http: HttpOptions::default(),
            http_replay: None,
            http_hooks: Vec::new(),
            storage: StorageOptions::default(),
            state: InputState::default(),
            concurrency: Concurrency::default(),
            format: Format::Airbyte,
            progress: false,
            stop: Stop::default(),
            sink,
        }
    }

    /// Reads these streams only.
    pub fn streams(mut self, names: impl IntoIterator<Item = impl Into<String>>) -> Self {
        let selection = Selection::Streams(names.into_iter().map(Into::into).collect());
        self.action = Action::Read { selection, full_refresh: false };
        self
    }

    pub(crate) fn is_read(&self) -> bool {
        matches!(self.action, Action::Read { .. })
    }
}

/// A failure that ends a run before or instead of reading, with whose fault it is. Its message
/// never holds a secret of the config.
#[derive(Debug, Clone)]
pub struct RunError {
    pub message: String,
    pub failure: FailureType,
}

impl RunError {
    pub fn config(e: impl std::fmt::Display) -> Self {
        RunError { message: e.to_string(), failure: FailureType::Config }
    }
    pub fn system(e: impl std::fmt::Display) -> Self {
        RunError { message: e.to_string(), failure: FailureType::System }
    }
    pub(crate) fn call(what: &str, e: CallError) -> Self {
        RunError { message: format!("{what}: {}", e.message()), failure: e.failure_type() }
    }
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for RunError {}

impl From<OutputClosed> for RunError {
    fn from(e: OutputClosed) -> Self {
        RunError::system(e)
    }
}

/// What a run did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// The connector's config specification.
    Spec(Value),
    /// `Err` says why the config does not work (a failed check is not a failed run).
    Check(Result<(), String>),
    /// The names of the streams offered.
    Discover(Vec<String>),
    Read(ReadReport),
}

/// What the guests of one run used, and what they read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunUsage {
    /// Time spent in guest code, in the CPU time of the threads that ran it: HTTP requests and
    /// throttling pauses excluded, lifting and lowering the values calls exchange included. The
    /// CPU budget is charged in the same measure.
    pub guest_cpu: Duration,
    /// Time busy guests were paused because other guests wanted the cores (only then is a guest
    /// slowed down).
    pub throttled: Duration,
    /// Time busy guests were paused because the policy throttles them always (`throttle:
    /// always`), whether others wanted the cores or not.
    pub policy_throttled: Duration,
    pub requests: u64,
    pub retries: u64,
    pub denied: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    pub records: u64,
    /// The most memory any one instance held: all its memories and tables together.
    pub peak_memory_bytes: u64,
    pub instances: u64,
    /// The most instances alive at once (a partition read in steps holds none while its
    /// requests are on their way).
    pub peak_live_instances: u64,
    /// HTTP attempts by how they were answered: `[0]` not at all (a connection error, a
    /// timeout), `[1]` to `[5]` with a 1xx to 5xx status.
    pub attempts_by_status: [u64; 6],
    /// Report job polls.
    pub job_polls: u64,
    /// The most partitions read at once.
    pub peak_partitions_in_flight: u64,
    /// Bytes of the STATE lines the run wrote (each with its line end), counted by the output
    /// writer once it is done.
    pub state_bytes: u64,
}

/// How a run ended.
#[derive(Debug)]
pub struct RunReport {
    pub result: Result<Outcome, RunError>,
    /// The run's folder in replay storage, when it is kept there.
    pub kept_at: Option<String>,
    /// Why the run was stopped, if it was.
    pub stopped: Option<String>,
    /// Whether every message reached the sink (a consumer that went away is an error here).
    pub output: std::io::Result<()>,
}

/// How a run ended, from its result and whether it was stopped (see [`RunReport::outcome`]).
pub(crate) fn outcome_of(stopped: bool, result: &Result<Outcome, RunError>) -> &'static str {
    match (stopped, result) {
        (true, _) => "interrupted",
        (false, Ok(Outcome::Read(read))) if !read.ok() => "failed",
        (false, Ok(_)) => "succeeded",
        (false, Err(_)) => "failed",
    }
}

impl RunReport {
    /// How the run ended: `succeeded`, `failed` (a read with a stream not read in full
    /// included) or `interrupted`.
    pub fn outcome(&self) -> &'static str {
        outcome_of(self.stopped.is_some(), &self.result)
    }

    /// The read's report; an error when the run failed, wrote incompletely or did not read.
    pub fn read(self) -> Result<ReadReport, RunError> {
        self.output.map_err(|e| RunError::system(format!("cannot write output: {e}")))?;
        match self.result? {
            Outcome::Read(report) => Ok(report),
            _ => Err(RunError::system("the run did not read")),
        }
    }
}

/// The outcome of reading.
#[derive(Debug, Clone)]
pub struct ReadReport {
    pub streams: Vec<StreamSummary>,
    pub usage: RunUsage,
    pub elapsed: Duration,
}

impl ReadReport {
    pub fn ok(&self) -> bool {
        self.streams.iter().all(StreamSummary::complete)
    }

    /// One line for the operator: records per stream, requests, guest usage.
    pub fn summary_line(&self) -> String {
        let streams: Vec<String> = self
            .streams
            .iter()
            .map(|s| {
                let skipped = match (s.skipped_partitions, s.other_shards) {
                    (0, 0) => String::new(),
                    (n, 0) => format!(" ({n} already finished)"),
                    (0, m) => format!(" ({m} read by other shards)"),
                    (n, m) => format!(" ({n} already finished, {m} read by other shards)"),
                };
                let status = match (s.failed, s.failed_partitions) {
                    (true, _) => ", FAILED".to_string(),
                    (false, 0) => String::new(),
                    (false, n) => format!(", INCOMPLETE: {n} partition(s) failed"),
                };
                let retried = match s.job_retries {
                    0 => String::new(),
                    n => format!(", {n} report job(s) created again"),
                };
                format!("{} {} records in {} partition(s){skipped}{retried}{status}", s.name, s.records, s.partitions)
            })
            .collect();
        let u = &self.usage;
        let mut pauses = Vec::new();
        if !u.throttled.is_zero() {
            pauses.push(format!("paused {:.2}s while other guests wanted the cores", u.throttled.as_secs_f64()));
        }
        if !u.policy_throttled.is_zero() {
            pauses.push(format!("paused {:.2}s as the policy throttles busy guests", u.policy_throttled.as_secs_f64()));
        }
        let throttled = match pauses.is_empty() {
            true => String::new(),
            false => format!(" ({})", pauses.join("; ")),
        };
        format!(
            "read {} records from {} stream(s) in {:.2}s ({}); {} requests, {} retries, {} denied, {} bytes in; \
             guest time {:.2}s{throttled}, peak guest memory {:.1} MiB, {} instances ({} at most at once)",
            u.records,
            self.streams.len(),
            self.elapsed.as_secs_f64(),
            streams.join("; "),
            u.requests,
            u.retries,
            u.denied,
            u.bytes_in,
            u.guest_cpu.as_secs_f64(),
            u.peak_memory_bytes as f64 / (1 << 20) as f64,
            u.instances,
            u.peak_live_instances,
        )
    }
}
