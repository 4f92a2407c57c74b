//! The `host` command line.

use crate::data::protocol::Format;
use crate::net::HttpOptions;
use crate::run::jobs::JobOptions;
use crate::run::policy::{Policy, PolicySource};
use crate::storage::replay::{Cadence, Compression, LakeOptions, StorageOptions};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// The largest size flag in MiB (or KiB) taken: 16 TiB. A larger one would wrap to nothing once
/// shifted into bytes.
const MAX_MIB: u64 = 1 << 24;

/// The longest time flag taken, seconds (ten years): `Duration` cannot hold infinity.
const MAX_SECONDS: f64 = 10.0 * 365.0 * 24.0 * 3600.0;

/// A time flag in seconds: a finite number from 0 to ten years, or a clear error (infinity, NaN
/// and negative numbers used to panic the host when turned into a `Duration`).
fn seconds(text: &str) -> Result<f64, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if s.is_finite() && (0.0..=MAX_SECONDS).contains(&s) => Ok(s),
        Ok(_) => Err(format!("{text} is not a number of seconds from 0 to {MAX_SECONDS}")),
        Err(e) => Err(format!("{text} is not a number of seconds: {e}")),
    }
}

/// `--max-record-depth`: from 1 to the host's own parser limit.
fn record_depth(text: &str) -> Result<usize, String> {
    let max = crate::guest::limits::MAX_RECORD_DEPTH;
    match text.trim().parse::<usize>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{text} is not a depth from 1 to {max} (the host's own parser reads records {max} levels deep)"
        )),
    }
}

/// Runs data-source connectors compiled to WebAssembly components, sandboxed, speaking the
/// Airbyte protocol on stdout (one JSON message per line).
#[derive(Debug, Parser)]
#[command(name = "host", version, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the connector's config specification (SPEC).
    Spec(PluginArgs),
    /// Try a config against the API (CONNECTION_STATUS). Exits 0 either way, as in Airbyte;
    /// the status says whether the check passed.
    Check(ConfiguredArgs),
    /// List the streams a config can read (CATALOG).
    Discover(ConfiguredArgs),
    /// Read the streams an Airbyte configured catalog selects (RECORD, STATE, LOG, TRACE).
    Read(ReadArgs),
    /// Read every stream (or those named) without writing a catalog: incrementally where the
    /// stream supports it, unless --full-refresh.
    Run(RunArgs),
    /// Show what a plugin is and may do: its WIT version, sha256, the hosts it declares for a
    /// config, and the effective grant.
    Inspect(InspectArgs),
    /// Package one connector for the platforms that run it: a folder with the host as
    /// source-NAME (Airbyte: spec, check, discover, read) and tap-NAME (a Singer tap), the
    /// plugin pinned by its sha256, its policy (grants and limits), and a Meltano plugin
    /// definition. See docs/platforms.md.
    Package(PackageArgs),
    /// Re-emit a run kept with --replay-to: byte-identical in Singer format. Every segment's
    /// checksum is verified first.
    Replay(ReplayArgs),
    /// Look at a run's HTTP recording (made with --record-http).
    #[command(subcommand)]
    Recording(RecordingCommand),
    /// Declarative manifests: which of a folder's the engine can run.
    #[command(subcommand)]
    Manifests(ManifestsCommand),
    /// Saved states: the states of a sharded sync's shards merged into one.
    #[command(subcommand)]
    State(StateCommand),
    /// Run the conformance kit on a connector: spec, check, discover, a full read, pagination,
    /// partitions and an incremental read, checked against the contract. Prints a report (or
    /// JSON with --json); exits 0 only when every check passes.
    Test(TestArgs),
    /// Write a new connector project: a one-stream connector against a configurable base URL,
    /// its build file, the SDK and WIT contract it builds against, and a README with the build
    /// and test commands (it passes `host test` against the demo API as written).
    Init(InitArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The connector's name: its package and its .wasm (a-z, 0-9, - and _).
    pub name: String,
    /// The language to write it in.
    #[arg(long, value_enum)]
    pub lang: super::init::Lang,
    /// Where to write it; must not exist or be empty [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct PluginArgs {
    /// The connector: a WebAssembly component (.wasm), or a declarative manifest (.yaml, run in the
    /// declarative engine).
    pub plugin: PathBuf,
    /// Where compiled components are cached [default: the user's cache dir, sluice/components].
    #[arg(long, env = "SLUICE_CACHE_DIR", value_name = "DIR")]
    pub cache_dir: Option<PathBuf>,
    /// Largest plugin file accepted, MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub max_plugin_mb: u64,
    /// Functions a plugin may have, across its modules (counted before compiling).
    #[arg(long, default_value_t = 200_000, value_name = "N")]
    pub max_plugin_functions: u64,
    /// Largest function a plugin may have, KiB (checked before compiling).
    #[arg(long, default_value_t = 2048, value_name = "KIB", value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub max_function_kib: u64,
    /// Longest compiling a plugin may take (in a child process), seconds.
    #[arg(long, default_value_t = 300, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub compile_timeout_s: u64,
    /// Memory compiling a plugin may use (in a child process), MiB.
    #[arg(long, default_value_t = 4096, value_name = "MIB", value_parser = clap::value_parser!(u64).range(16..=MAX_MIB))]
    pub compile_memory_mb: u64,
    /// The compiled code a package ships (set by a packaged connector's `source-NAME` and
    /// `tap-NAME`): taken when the cache has none for the plugin, if its sha256 is this.
    #[arg(long, hide = true, value_name = "FILE", requires = "packaged_code_sha256")]
    pub packaged_code: Option<PathBuf>,
    #[arg(long, hide = true, value_name = "SHA256")]
    pub packaged_code_sha256: Option<String>,
    #[command(flatten)]
    pub sandbox: SandboxArgs,
}

impl PluginArgs {
    /// Compiling in a child process of this program when it is a compile helper (the `host`
    /// binary), bounded as the flags say.
    pub fn compile_limits(&self) -> crate::guest::compile::CompileLimits {
        crate::guest::compile::CompileLimits {
            max_component_bytes: self.max_plugin_mb << 20,
            max_functions: self.max_plugin_functions,
            max_function_bytes: self.max_function_kib << 10,
            timeout: Duration::from_secs(self.compile_timeout_s),
            memory_bytes: self.compile_memory_mb << 20,
            packaged: self
                .packaged_code
                .clone()
                .zip(self.packaged_code_sha256.clone())
                .map(|(file, sha256)| crate::guest::compile::PackagedCode { file, sha256 }),
            ..crate::guest::compile::CompileLimits::in_child_process()
        }
    }
}

/// Limits on what the connector may consume; flags override the policy file, which overrides
/// the defaults.
#[derive(Debug, Args, Default)]
pub struct SandboxArgs {
    /// A policy file (JSON): `{"allow_hosts": [...], "deny_ungranted": bool, "limits": {...}}`;
    /// see docs/sandbox.md [default: PLUGIN.policy.json beside the plugin, when there is one].
    #[arg(long, env = "SLUICE_POLICY", value_name = "FILE")]
    pub policy: Option<PathBuf>,
    /// Memory one instance may use, MiB [default: 256].
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub memory_mb: Option<u64>,
    /// Guest CPU time one call may use, milliseconds [default: 30000].
    #[arg(long, value_name = "MS")]
    pub cpu_ms_per_call: Option<u64>,
    /// When a guest that keeps computing is paused between ticks: only while other guests want
    /// the cores, or always (a tenant kept to a small share of a core) [default: when-contended].
    #[arg(long, value_enum, value_name = "WHEN")]
    pub throttle: Option<crate::guest::limits::Throttle>,
    /// Steps of pages read in steps one connector computes at once, each holding an instance
    /// (fewer: less memory; more: more cores) [default: the number of cores, one fewer while the
    /// run waits on a slow API and its steps need no more].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    pub steps_at_once: Option<u64>,
    /// How long a step's instance waits, while its request is out and the next step waits for a
    /// core, to run the partition's next step, milliseconds (0: a fresh instance for every step;
    /// at most 1000) [default: 5].
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=1000))]
    pub step_grace_ms: Option<u64>,
    /// Wall-clock time one call may take, HTTP waits included, milliseconds [default: 600000].
    #[arg(long, value_name = "MS")]
    pub call_timeout_ms: Option<u64>,
    /// Largest record accepted, bytes [default: 16 MiB].
    #[arg(long, value_name = "BYTES")]
    pub max_record_bytes: Option<usize>,
    /// Deepest nesting of objects and arrays a record may have, at most 128 (the host's own
    /// parser limit) [default: 64].
    #[arg(long, value_name = "N", value_parser = record_depth)]
    pub max_record_depth: Option<usize>,
    /// Records one page may hold [default: 100000].
    #[arg(long, value_name = "N")]
    pub max_records_per_page: Option<usize>,
    /// Pages one partition may take before it counts as endless [default: 10000000].
    #[arg(long, value_name = "N")]
    pub max_pages_per_partition: Option<u64>,
    /// Partitions one stream may list [default: 1000000].
    #[arg(long, value_name = "N")]
    pub max_partitions_per_stream: Option<u64>,
    /// Calls one stream's partition listing may take [default: 1000000].
    #[arg(long, value_name = "N")]
    pub max_listing_calls_per_stream: Option<u64>,
    /// Partition cursors one stream's state keeps before it falls back to one stream-level cursor,
    /// a saved state's too, and partitions in progress taken from a saved state [default: 10000].
    #[arg(long, value_name = "N")]
    pub max_partition_cursors: Option<usize>,
    /// Longest page or listing token a connector may hand back, KiB of JSON, at most 16384; a
    /// saved state's tokens too (each travels in every STATE of its stream) [default: 64].
    #[arg(long, value_name = "KIB", value_parser = clap::value_parser!(u64).range(1..=16384))]
    pub max_token_kib: Option<u64>,
    /// Longest log message kept, bytes; longer ones are cut [default: 65536].
    #[arg(long, value_name = "BYTES")]
    pub max_log_bytes: Option<usize>,
    /// Log messages kept per call; the rest are counted and dropped [default: 1000].
    #[arg(long, value_name = "N")]
    pub max_logs_per_call: Option<usize>,
    /// The guest's WebAssembly stack, KiB [default: 512].
    #[arg(long, value_name = "KIB", value_parser = clap::value_parser!(u64).range(16..=65536))]
    pub wasm_stack_kib: Option<u64>,
}

#[derive(Debug, Args)]
pub struct ConfiguredArgs {
    #[command(flatten)]
    pub plugin: PluginArgs,
    /// The connector's config (JSON); required, but for `run --about`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Allow requests to [http://]HOST[:PORT] (repeatable). The connector may reach only hosts it
    /// declares for its config *and* that are granted here. HOST may be a pattern (`*.example.com`)
    /// or an address; plain http needs the `http://` prefix; loopback, private and link-local
    /// addresses are reachable only when granted by address.
    /// Several may be given at once, separated by commas (as SLUICE_ALLOW_HOSTS does, for
    /// platforms that pass only the standard arguments).
    #[arg(long = "allow-host", env = "SLUICE_ALLOW_HOSTS", value_delimiter = ',', value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Start even when the connector needs hosts that are not granted; its requests to them are
    /// denied. Without it, such a run refuses to start and names what is missing.
    #[arg(long, env = "SLUICE_DENY_UNGRANTED")]
    pub deny_ungranted: bool,
    #[command(flatten)]
    pub http: HttpArgs,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    #[command(flatten)]
    pub plugin: PluginArgs,
    /// A config, to ask the plugin which hosts it needs for it.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Grants to compare with what the plugin needs (as for `run`).
    #[arg(long = "allow-host", env = "SLUICE_ALLOW_HOSTS", value_delimiter = ',', value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct PackageArgs {
    #[command(flatten)]
    pub plugin: PluginArgs,
    /// The connector's name: the executables are source-NAME and tap-NAME.
    #[arg(long, value_name = "NAME")]
    pub name: String,
    /// Grants the packaged connector gets (as for `run`; added to those of --policy).
    #[arg(long = "allow-host", value_delimiter = ',', value_name = "HOST")]
    pub allow_hosts: Vec<String>,
    /// Let the packaged connector start without every host it needs granted.
    #[arg(long)]
    pub deny_ungranted: bool,
    /// The folder to write (created if missing; files of the same names are replaced).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Also write an OCI image of it for the Airbyte platform, as an image layout in DIR/image
    /// (`podman load -i DIR/image`, `skopeo copy oci:DIR/image ...`).
    #[arg(long)]
    pub oci: bool,
    /// The image's version (its tag and `io.airbyte.version`) [default: the host's version].
    #[arg(long, value_name = "VERSION", requires = "oci")]
    pub image_version: Option<String>,
}

#[derive(Debug, Args)]
pub struct TestArgs {
    #[command(flatten)]
    pub common: ConfiguredArgs,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check only these streams (comma-separated) [default: all].
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    pub streams: Option<Vec<String>>,
    /// Pages a partition may take before its pagination counts as endless.
    #[arg(long, default_value_t = 10_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_pages: u64,
}

#[derive(Debug, Args)]
pub struct ReadArgs {
    #[command(flatten)]
    pub common: ConfiguredArgs,
    /// The catalog (JSON) selecting streams and sync modes: an Airbyte configured catalog, or a
    /// Singer catalog with `selected` metadata.
    #[arg(long, value_name = "FILE")]
    pub catalog: PathBuf,
    /// Saved state: Airbyte per-stream, global or legacy form, Singer bookmarks, or a previous
    /// run's output (the last STATE per stream wins).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    #[command(flatten)]
    pub options: ReadOptions,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub common: ConfiguredArgs,
    /// Read only these streams (comma-separated) [default: all, or what --catalog selects].
    #[arg(long, value_delimiter = ',', value_name = "NAMES", conflicts_with = "catalog")]
    pub streams: Option<Vec<String>>,
    /// Select streams with a catalog (Airbyte configured catalog or Singer catalog), as a tap's
    /// --catalog (or --properties, the older name Meltano still passes to some taps).
    #[arg(long, visible_alias = "properties", value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// Print the catalog (a CATALOG message, or a Singer catalog with --format singer) and exit.
    #[arg(long)]
    pub discover: bool,
    /// Print what the connector is and takes, as a Singer tap's `--about` does (`--about` or
    /// `--about=json`; `--about=markdown`: its settings in a table), and exit; needs no config.
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, require_equals = true, default_missing_value = "json", value_parser = ["json", "markdown"])]
    pub about: Option<String>,
    /// Test the connection, as a Singer tap's `--test` does: the connector's check against the
    /// API; exits 0 when it passes, 1 (saying why on stderr) when not.
    #[arg(long, conflicts_with_all = ["discover", "about"])]
    pub test: bool,
    /// Saved state: Airbyte per-stream, global or legacy form, Singer bookmarks, or a previous
    /// run's output (the last STATE per stream wins).
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Read every stream in full, ignoring cursors and state.
    #[arg(long, conflicts_with = "state")]
    pub full_refresh: bool,
    /// The protocol on stdout.
    #[arg(long, value_enum, default_value_t = Format::Airbyte)]
    pub format: Format,
    #[command(flatten)]
    pub options: ReadOptions,
}

/// How a read runs.
#[derive(Debug, Args)]
pub struct ReadOptions {
    /// Partitions read at once across all streams.
    #[arg(long, default_value_t = 8, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub concurrency: u32,
    /// Partitions read at once within one stream [default: no limit beyond --concurrency].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub stream_concurrency: Option<u32>,
    /// Read only shard I (0 to N-1) of N: the partitions whose stable hash of stream and
    /// partition key falls there, so N processes read a sync between them, each partition once;
    /// combine their final states with `host state merge`.
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::run::shard::Shard>,
    /// When the read ends, write its metrics to FILE in the Prometheus text format (records,
    /// partitions by outcome, HTTP requests, retries, denials and bytes, guest CPU, throttling,
    /// instances, peak memory, duration).
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
    /// Send the run's spans (the run, each stream, partition and HTTP request; the host's log
    /// lines as their events) and its metrics to the OpenTelemetry collector at URL, over
    /// OTLP/HTTP with protobuf (URL/v1/traces, URL/v1/metrics; a collector's default is
    /// http://127.0.0.1:4318).
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Never draw the progress display (it is drawn only when stderr is a terminal anyway).
    #[arg(long)]
    pub no_progress: bool,
    #[command(flatten)]
    pub jobs: JobArgs,
    #[command(flatten)]
    pub storage: StorageArgs,
}

/// Report jobs (streams a connector reads through its async-jobs export).
#[derive(Debug, Args)]
pub struct JobArgs {
    /// Report jobs in flight at once in the run [default: what the connector says].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_jobs: Option<u32>,
    /// Report jobs in flight at once in one stream [default: no limit beyond --max-jobs].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub max_jobs_per_stream: Option<u32>,
    /// Wait between a job's first poll (made at once) and its second, milliseconds; later waits
    /// grow by half up to
    /// --job-poll-max-ms.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    pub job_poll_ms: u64,
    /// Longest wait between two polls of a job, milliseconds.
    #[arg(long, default_value_t = 30_000, value_name = "MS")]
    pub job_poll_max_ms: u64,
    /// Jobs tried per partition, the first included (a failed or timed-out job is retried as a
    /// new job).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub job_attempts: u32,
    /// Wait before creating a job again after one failed, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub job_retry_delay_ms: u64,
    /// A job running longer is aborted and retried, seconds.
    #[arg(long, default_value_t = 3600.0, value_name = "SECS", value_parser = seconds)]
    pub job_timeout: f64,
    /// While report jobs run, repeat the stream's STATE this often, seconds, so a platform that
    /// gives up on a silent sync (Airbyte: after 3 hours) sees it is alive.
    #[arg(long, default_value_t = 600.0, value_name = "SECS", value_parser = seconds)]
    pub job_heartbeat: f64,
}

impl JobArgs {
    pub fn options(&self) -> JobOptions {
        JobOptions {
            max_jobs: self.max_jobs.map(|n| n as usize),
            per_stream: self.max_jobs_per_stream.map(|n| n as usize),
            poll_interval: Duration::from_millis(self.job_poll_ms),
            max_poll_interval: Duration::from_millis(self.job_poll_max_ms.max(self.job_poll_ms)),
            attempts: self.job_attempts,
            retry_delay: Duration::from_millis(self.job_retry_delay_ms),
            timeout: Duration::from_secs_f64(self.job_timeout.max(0.001)),
            heartbeat: Duration::from_secs_f64(self.job_heartbeat.max(0.01)),
        }
    }
}

/// Keeping the run: its Singer message stream in replay storage, records in BATCH files.
#[derive(Debug, Args, Default)]
pub struct StorageArgs {
    /// Keep the run's Singer message stream under URI, in a folder per run named by a ULID:
    /// a local path or file://, s3://, gs://, az:// (credentials from the usual environment
    /// variables). See docs/replay.md.
    #[arg(long, value_name = "URI")]
    pub replay_to: Option<String>,
    /// continual: append as the run goes (local files); batched: upload at STATE boundaries
    /// after --replay-interval, on the size threshold and at exit.
    #[arg(long, value_enum, default_value_t = Cadence::Auto, value_name = "MODE")]
    pub replay_cadence: Cadence,
    /// Least time between uploads at STATE boundaries, seconds.
    #[arg(long, default_value_t = 120.0, value_name = "SECS", value_parser = seconds)]
    pub replay_interval: f64,
    /// Cut a segment once it holds this many MiB.
    #[arg(long, default_value_t = 64, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=MAX_MIB))]
    pub replay_segment_mib: u64,
    /// Gzip segments (`.singer.jsonl.gz`; batched cadence).
    #[arg(long)]
    pub replay_gzip: bool,
    /// Hold each STATE on stdout until the segment holding it is durable, so no checkpoint gets
    /// ahead of the lake.
    #[arg(long)]
    pub replay_hold_state: bool,
    /// Store every HTTP exchange of the run (every attempt: request, response, timing, partition)
    /// next to its replay segments, without credentials; re-run it offline with --http-replay.
    #[arg(long)]
    pub record_http: bool,
    /// Write records to data files and BATCH messages naming them, instead of RECORD lines
    /// (Singer format).
    #[arg(long)]
    pub batch: bool,
    /// Where BATCH data files go [default: the --replay-to root].
    #[arg(long, value_name = "URI")]
    pub batch_to: Option<String>,
    /// Compression of BATCH data files.
    #[arg(long, value_enum, default_value_t = Compression::Gzip, value_name = "KIND")]
    pub batch_compression: Compression,
    /// Records per BATCH data file, at most (a STATE also ends the files before it).
    #[arg(long, default_value_t = 100_000, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_records: u64,
}

impl StorageArgs {
    pub fn options(&self) -> StorageOptions {
        StorageOptions {
            replay_to: self.replay_to.clone(),
            record_http: self.record_http,
            lake: LakeOptions {
                cadence: self.replay_cadence,
                min_interval: Duration::from_secs_f64(self.replay_interval.max(0.0)),
                max_segment_bytes: self.replay_segment_mib << 20,
                gzip: self.replay_gzip,
            },
            hold_state: self.replay_hold_state,
            batch: self.batch,
            batch_to: self.batch_to.clone(),
            compression: self.batch_compression,
            batch_max_records: self.batch_records,
        }
    }
}

#[derive(Debug, Clone, Subcommand)]
pub enum RecordingCommand {
    /// Summarise a recording: requests per host and status, bytes, retries, the slowest.
    Show {
        /// The run's folder (as printed when the run started).
        uri: String,
        /// Print every exchange as JSON lines instead.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum StateCommand {
    /// Merge the final states of one sync's shards (`read`/`run --shard I/N`; each a state file
    /// or the shard's output, whose last STATE per stream counts) into the state the next sync
    /// resumes from, sharded the same way, another way or not at all. Prints it as Airbyte
    /// per-stream STATE messages (a JSON array `--state` reads).
    Merge {
        /// The shards' states.
        #[arg(required = true, value_name = "STATE")]
        states: Vec<PathBuf>,
        /// Partition cursors kept per stream before its state falls back to one stream-level
        /// cursor (as the runs' --max-partition-cursors).
        #[arg(long, default_value_t = crate::data::state::DEFAULT_MAX_PARTITION_CURSORS, value_name = "N")]
        max_partition_cursors: usize,
    },
}

#[derive(Debug, Subcommand)]
pub enum ManifestsCommand {
    /// Load every manifest under DIR (`manifest.yaml` files, and YAML files of a
    /// `type: DeclarativeSource`) and discover its streams in the sandboxed engine, without a
    /// config and with no network: a line each says whether all its streams can be read, which
    /// cannot and why, or why the manifest cannot; then a summary. Exits 0 when every manifest
    /// is read in full.
    Check {
        /// The folder (walked 6 levels deep, 10,000 manifests at most).
        dir: PathBuf,
        /// Where compiled components are cached [default: the user's cache dir, sluice/components].
        #[arg(long, env = "SLUICE_CACHE_DIR", value_name = "DIR")]
        cache_dir: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The run's folder (as printed when the run started), e.g. file:///data/lake/01J...
    pub uri: String,
    /// The protocol to re-emit: singer (as stored) or airbyte.
    #[arg(long, value_enum, default_value_t = Format::Singer)]
    pub format: Format,
    /// Turn BATCH messages into the RECORDs of their data files (for targets that cannot read
    /// BATCH; always so for --format airbyte).
    #[arg(long)]
    pub expand_batch: bool,
    /// Start at this segment (file name or ULID); it starts with the SCHEMA of its streams.
    #[arg(long, value_name = "SEGMENT")]
    pub from: Option<String>,
    /// Print the run's manifest (JSON) instead: segments in replay order with checksums and
    /// counts, and what produced the run. Segments it does not list yet are added, unverified.
    #[arg(long, conflicts_with = "rebuild_manifest")]
    pub manifest: bool,
    /// Rewrite the run's manifest from its segments (after a kill, or if it was lost) and exit.
    #[arg(long)]
    pub rebuild_manifest: bool,
}

/// HTTP behaviour; the defaults suit public APIs.
#[derive(Debug, Args)]
pub struct HttpArgs {
    /// Connect timeout, seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECS", value_parser = seconds)]
    pub http_connect_timeout: f64,
    /// Longest wait for response bytes, seconds.
    #[arg(long, default_value_t = 60.0, value_name = "SECS", value_parser = seconds)]
    pub http_read_timeout: f64,
    /// Attempts per request, the first included. 429 answers and failures to connect are retried
    /// for any method; 5xx answers and timeouts only for GET, HEAD, PUT, DELETE and OPTIONS.
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub http_max_attempts: u32,
    /// Retries allowed in the whole run.
    #[arg(long, default_value_t = 1000, value_name = "N")]
    pub http_retry_budget: u64,
    /// First backoff delay in milliseconds; doubles per attempt, with jitter.
    #[arg(long, default_value_t = 500, value_name = "MS")]
    pub http_backoff_ms: u64,
    /// Largest response body accepted, bytes; for a body the connector streams (`open`), the
    /// largest piece it is handed at once, and so the longest line.
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES")]
    pub http_max_response_bytes: u64,
    /// Requests in flight at once in the whole run.
    #[arg(long, default_value_t = 32, value_name = "N")]
    pub http_max_in_flight: u32,
    /// Requests per second to any one host [default: no limit].
    #[arg(long, value_name = "N")]
    pub http_max_rate: Option<f64>,
    /// Keep the connector's own headers when a response redirects to another origin (scheme,
    /// host or port). Without it they are dropped there, so an API key meant for one API never
    /// reaches another.
    #[arg(long)]
    pub http_forward_headers_on_redirect: bool,
    /// Answer the connector's requests from the HTTP recording of a run (its folder, as
    /// printed when it ran with --record-http) instead of the network; nothing leaves the
    /// machine, and a request the recording cannot answer is denied.
    #[arg(long, value_name = "URI")]
    pub http_replay: Option<String>,
}

impl HttpArgs {
    pub fn options(&self) -> HttpOptions {
        HttpOptions {
            connect_timeout: Duration::from_secs_f64(self.http_connect_timeout.max(0.001)),
            read_timeout: Duration::from_secs_f64(self.http_read_timeout.max(0.001)),
            max_attempts: self.http_max_attempts.max(1),
            retry_budget: self.http_retry_budget,
            backoff_base: Duration::from_millis(self.http_backoff_ms),
            max_response_bytes: self.http_max_response_bytes,
            max_in_flight: self.http_max_in_flight.max(1) as usize,
            max_rate_per_host: self.http_max_rate.filter(|r| *r > 0.0),
            forward_headers_on_redirect: self.http_forward_headers_on_redirect,
            ..HttpOptions::default()
        }
    }
}

impl PluginArgs {
    /// The policy: the file given, or else the one beside the plugin when its package pins it,
    /// with the flags over it.
    pub fn policy(&self) -> anyhow::Result<Policy> {
        self.sandbox.policy(Some(&self.plugin))
    }

    /// The policy and where it came from (for the run's first LOG line and its warnings).
    pub fn policy_with_source(&self) -> anyhow::Result<(Policy, PolicySource)> {
        self.sandbox.policy_with_source(Some(&self.plugin))
    }
}

impl SandboxArgs {
    /// The policy file (if any; else `PLUGIN.policy.json` beside `plugin` when the package
    /// pins it, see [`crate::run::policy::resolve`]) with the limit flags applied over it.
    pub fn policy(&self, plugin: Option<&std::path::Path>) -> anyhow::Result<Policy> {
        self.policy_with_source(plugin).map(|(policy, _)| policy)
    }

    pub fn policy_with_source(&self, plugin: Option<&std::path::Path>) -> anyhow::Result<(Policy, PolicySource)> {
        use crate::run::policy::Given;
        let given = self.policy.as_deref().map(|path| {
            let from_env = std::env::var_os("SLUICE_POLICY").is_some_and(|v| std::path::Path::new(&v) == path);
            (path, if from_env { Given::Environment } else { Given::Flag })
        });
        let (mut policy, mut source) = crate::run::policy::resolve(given, plugin)?;
        let limits = &mut policy.limits;
        // A flag that is given wins over the file.
        fn set<T>(flag: Option<T>, limit: &mut T) {
            if let Some(value) = flag {
                *limit = value;
            }
        }
        set(self.memory_mb.map(|mb| mb << 20), &mut limits.memory_bytes);
        set(self.cpu_ms_per_call, &mut limits.cpu_ms_per_call);
        set(self.call_timeout_ms, &mut limits.call_timeout_ms);
        set(self.throttle, &mut limits.throttle);
        set(self.steps_at_once.map(|n| Some(n as usize)), &mut limits.steps_at_once);
        set(self.step_grace_ms, &mut limits.step_grace_ms);
        set(self.max_record_bytes, &mut limits.max_record_bytes);
        set(self.max_logs_per_call, &mut limits.max_logs_per_call);
        set(self.max_record_depth, &mut limits.max_record_depth);
        set(self.max_records_per_page, &mut limits.max_records_per_page);
        set(self.max_pages_per_partition, &mut limits.max_pages_per_partition);
        set(self.max_partitions_per_stream, &mut limits.max_partitions_per_stream);
        set(self.max_listing_calls_per_stream, &mut limits.max_listing_calls_per_stream);
        set(self.max_log_bytes, &mut limits.max_log_bytes);
        set(self.max_partition_cursors, &mut limits.max_partition_cursors);
        set(self.max_token_kib.map(|kib| (kib as usize) << 10), &mut limits.max_token_bytes);
        set(self.wasm_stack_kib.map(|kib| (kib as usize) << 10), &mut limits.wasm_stack_bytes);
        limits.check().map_err(|e| anyhow::anyhow!("{e}"))?;
        let flags = [
            self.memory_mb.is_some(),
            self.cpu_ms_per_call.is_some(),
            self.call_timeout_ms.is_some(),
            self.throttle.is_some(),
            self.steps_at_once.is_some(),
            self.step_grace_ms.is_some(),
            self.max_record_bytes.is_some(),
            self.max_logs_per_call.is_some(),
            self.max_record_depth.is_some(),
            self.max_records_per_page.is_some(),
            self.max_pages_per_partition.is_some(),
            self.max_partitions_per_stream.is_some(),
            self.max_listing_calls_per_stream.is_some(),
            self.max_log_bytes.is_some(),
            self.max_partition_cursors.is_some(),
            self.max_token_kib.is_some(),
            self.wasm_stack_kib.is_some(),
        ];
        if flags.contains(&true) {
            source.described.push_str(", limit flags over it");
        }
        Ok((policy, source))
    }
}

impl ConfiguredArgs {
    /// The config file, which every configured command needs.
    pub fn config_path(&self) -> anyhow::Result<&std::path::Path> {
        self.config.as_deref().ok_or_else(|| anyhow::anyhow!("--config FILE is required (the connector's config)"))
    }

    /// The whole policy of a configured command: file, then flags.
    pub fn policy(&self) -> anyhow::Result<Policy> {
        self.policy_with_source().map(|(policy, _)| policy)
    }

    pub fn policy_with_source(&self) -> anyhow::Result<(Policy, PolicySource)> {
        let (mut policy, mut source) = self.plugin.policy_with_source()?;
        if !self.allow_hosts.is_empty() {
            source.described.push_str(", with --allow-host grants");
        }
        policy.allow_hosts.extend(self.allow_hosts.iter().cloned());
        policy.deny_ungranted |= self.deny_ungranted;
        Ok((policy, source))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(["host"].iter().chain(args))
    }

    /// Infinity, NaN and negative seconds used to panic in `Duration::from_secs_f64`; sizes in MiB
    /// past 2^44 wrapped to 0 bytes; a record depth past 128 passed the check, then panicked.
    #[test]
    fn flags_out_of_range_are_clear_errors_not_panics_or_wraps() {
        for flag in
            ["--http-connect-timeout", "--http-read-timeout", "--job-timeout", "--job-heartbeat", "--replay-interval"]
        {
            for value in ["inf", "NaN", "-1", "1e300", "x"] {
                let error = parse(&["run", "p.wasm", &format!("{flag}={value}")]).unwrap_err().to_string();
                assert!(error.contains("seconds"), "{flag} {value}: {error}");
            }
        }
        let ok = parse(&["run", "p.wasm", "--http-read-timeout", "2.5", "--job-timeout", "0"]).unwrap();
        let Command::Run(args) = ok.command else { panic!() };
        assert_eq!(args.common.http.options().read_timeout, Duration::from_millis(2500));
        for flag in
            ["--memory-mb", "--max-plugin-mb", "--compile-memory-mb", "--max-function-kib", "--replay-segment-mib"]
        {
            for value in ["17592186044416", "18446744073709551615"] {
                let error = parse(&["run", "p.wasm", flag, value]).unwrap_err().to_string();
                assert!(error.contains("is not in"), "{flag} {value}: {error}");
            }
        }
        let Command::Run(args) = parse(&["run", "p.wasm", "--memory-mb", "16777216"]).unwrap().command else {
            panic!()
        };
        assert_eq!(args.common.plugin.sandbox.memory_mb, Some(1 << 24));
        for value in ["129", "100000", "0"] {
            let error = parse(&["run", "p.wasm", "--max-record-depth", value]).unwrap_err().to_string();
            assert!(error.contains("not a depth from 1 to 128"), "{value}: {error}");
        }
        let Command::Run(args) = parse(&["run", "p.wasm", "--max-record-depth", "128"]).unwrap().command else {
            panic!()
        };
        assert_eq!(args.common.plugin.sandbox.max_record_depth, Some(128));
    }

    #[test]
    fn a_policy_file_past_the_record_depth_bound_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("p.json");
        std::fs::write(&file, r#"{"limits": {"max_record_depth": 1000}}"#).unwrap();
        let args = SandboxArgs { policy: Some(file), ..Default::default() };
        let error = args.policy(None).unwrap_err().to_string();
        assert!(error.contains("max_record_depth") && error.contains("128"), "{error}");
    }
}
