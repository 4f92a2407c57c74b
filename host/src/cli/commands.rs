//! What each `host` command does, on top of the library: spec, check, discover, read and run
//! build a [`RunRequest`] and hand it to the same [`Runtime::run`] an embedder calls; replay,
//! recording, inspect and test are tools around it.

use super::args::{
    Cli, Command, ConfiguredArgs, InspectArgs, ManifestsCommand, PluginArgs, ReadOptions, RecordingCommand, ReplayArgs,
    StateCommand,
};
use crate::data::catalog;
use crate::data::files;
use crate::data::protocol::{Format, Output, airbyte, printable};
use crate::data::state::InputState;
use crate::guest::cache::ComponentCache;
use crate::guest::connector::Connector;
use crate::guest::engine::{POOLED_INSTANCES, POOLED_MAX_MEMORY};
use crate::net::{EgressPolicy, HostPort};
use crate::run::policy::Policy;
use crate::run::request::{Action, Outcome, ReadReport, RunError, RunRequest, Selection};
use crate::run::runtime::{Runtime, RuntimeOptions};
use crate::run::schedule::Concurrency;
use crate::run::session;
use crate::storage::replay::ReplayOptions;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// A failure that ends the command: reported as a TRACE error (Airbyte) and one line on stderr.
type Fatal = RunError;

/// Whether the process ends with the command (see [`end_with_process`]).
static ENDS_WITH_PROCESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Says that the process ends when the command does (the `host` binary does): what a run
/// built, the engine with its pool and the plugins, is then left to the process's exit rather
/// than taken apart, which took 1-1.5 ms of every run (slots reset, the plugins' tables freed).
/// An embedder running many commands in one process (the bench does) leaves it unset.
pub fn end_with_process() {
    ENDS_WITH_PROCESS.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// Runs a parsed command line, writing protocol messages to `sink`.
pub async fn execute(cli: Cli, sink: Box<dyn Write + Send>) -> ExitCode {
    match cli.command {
        Command::Replay(args) => replay(&args, sink).await,
        Command::Recording(command) => recording(command).await,
        Command::Manifests(ManifestsCommand::Check { dir, cache_dir }) => manifests_check(&dir, cache_dir).await,
        Command::State(StateCommand::Merge { states, max_partition_cursors }) => {
            state_merge(&states, max_partition_cursors, sink)
        }
        Command::Inspect(args) => match inspect(args).await {
            Ok(code) => code,
            Err(fatal) => early_failure(&fatal, Format::Airbyte, sink).await,
        },
        Command::Test(args) => test(args).await,
        Command::Package(args) => package(&args).await,
        Command::Init(args) => init(&args),
        Command::Spec(args) => {
            let request =
                args.policy_with_source().map_err(|e| Fatal::config(format!("{e:#}"))).map(|(policy, source)| {
                    let mut request = RunRequest::new(&args.plugin, json!({}), Box::new(std::io::sink()));
                    request.policy = policy;
                    request.policy_source = source;
                    request.action = Action::Spec;
                    request
                });
            run_request(&args, request, Format::Airbyte, sink).await
        }
        Command::Check(args) => {
            // A config or policy that cannot even be read is a failed check, not a crash.
            match configured(&args, Action::Check) {
                Ok(request) => run_request(&args.plugin, Ok(request), Format::Airbyte, sink).await,
                Err(fatal) => match write_alone(sink, &airbyte::connection_status(Err(fatal.message))).await {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(_) => ExitCode::FAILURE,
                },
            }
        }
        Command::Discover(args) => {
            let request = configured(&args, Action::Discover);
            run_request(&args.plugin, request, Format::Airbyte, sink).await
        }
        Command::Read(args) => {
            let request =
                catalog::load(&args.catalog).map_err(|e| Fatal::config(format!("{e:#}"))).and_then(|selected| {
                    let action = Action::Read { selection: Selection::Catalog(selected), full_refresh: false };
                    let mut request = configured(&args.common, action)?;
                    request.state = load_state(args.state.as_deref(), &request)?;
                    read_options(&mut request, &args.options);
                    Ok(request)
                });
            let observers = Observers::of(&args.options);
            run_request_with_metrics(&args.common.plugin, request, Format::Airbyte, sink, observers).await
        }
        Command::Run(args) if args.about.is_some() => about(&args, sink).await,
        Command::Run(args) if args.test => connection_test(&args).await,
        Command::Run(args) => {
            let request = (|| {
                let action = if args.discover {
                    Action::Discover
                } else {
                    let selection = match (&args.catalog, &args.streams) {
                        (Some(path), _) => {
                            Selection::Catalog(catalog::load(path).map_err(|e| Fatal::config(format!("{e:#}")))?)
                        }
                        (None, Some(names)) => Selection::Streams(names.clone()),
                        (None, None) => Selection::All,
                    };
                    Action::Read { selection, full_refresh: args.full_refresh }
                };
                let mut request = configured(&args.common, action)?;
                request.state = load_state(args.state.as_deref(), &request)?;
                request.format = args.format;
                read_options(&mut request, &args.options);
                Ok(request)
            })();
            let observers = Observers::of(&args.options);
            run_request_with_metrics(&args.common.plugin, request, args.format, sink, observers).await
        }
    }
}

/// `host init`: the project, and what to do next.
fn init(args: &super::args::InitArgs) -> ExitCode {
    let dir = args.dir.clone().unwrap_or_else(|| std::path::PathBuf::from(&args.name));
    match super::init::write(&args.name, args.lang, &dir) {
        Ok(files) => {
            println!(
                "wrote {} ({} files); build and test it as {} says",
                dir.display(),
                files.len(),
                dir.join("README.md").display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}", printable(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

/// A request for a command with a config, under the command line's policy and HTTP options.
fn configured(args: &ConfiguredArgs, action: Action) -> Result<RunRequest, Fatal> {
    let (policy, source) = args.policy_with_source().map_err(|e| Fatal::config(format!("{e:#}")))?;
    let config = args.config_path().and_then(read_config).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let mut request = RunRequest::new(&args.plugin.plugin, config, Box::new(std::io::sink()));
    request.action = action;
    request.policy = policy;
    request.policy_source = source;
    request.http = args.http.options();
    request.http_replay = args.http.http_replay.clone();
    Ok(request)
}

/// The read options of `read` and `run`.
fn read_options(request: &mut RunRequest, options: &ReadOptions) {
    request.concurrency = Concurrency {
        partitions: options.concurrency as usize,
        per_stream: options.stream_concurrency.map(|n| n as usize),
        jobs: options.jobs.options(),
        shard: options.shard,
        fair_share: None,
    };
    request.progress = !options.no_progress;
    request.storage = options.storage.options();
}

/// The runtime of a command: one run in this process, with the policy's guest stack. Instances
/// come from the pooling allocator unless the memory limit is above what a pooled instance may
/// have: a run throws an instance away after every partition, and on-demand allocation pays
/// for each with mmap, munmap and TLB shootdowns (100k one-record partitions: 36 s, pooled 12.5 s).
///
/// The pool holds what the run's `partitions` in flight need (each holds one instance; report
/// job polls and the run's own calls take short-lived ones), with room to spare: reserving
/// slots is most of a short command's start-up.
fn runtime_for(args: &PluginArgs, policy: &Policy, partitions: usize) -> Result<Runtime, Fatal> {
    let cache_dir = args.cache_dir.clone().unwrap_or_else(ComponentCache::default_dir);
    let pooled_instances = (partitions.saturating_mul(4).saturating_add(64)).min(POOLED_INSTANCES as usize) as u32;
    let options = RuntimeOptions {
        cache_dir,
        pooling: pooled(&policy.limits),
        wasm_stack_bytes: policy.limits.wasm_stack_bytes,
        pooled_instances,
        compile: args.compile_limits(),
    };
    Runtime::with_options(options).map_err(|e| Fatal::system(format!("cannot start the engine: {e:#}")))
}

/// Whether a run's instances come from the pooling allocator: unless the memory limit is above
/// what a pooled instance may have.
fn pooled(limits: &crate::guest::limits::Limits) -> bool {
    limits.memory_bytes <= POOLED_MAX_MEMORY as u64
}

/// Runs one request through the runtime: SIGINT/SIGTERM stop it, the exit status says how it
/// went (a read is a failure when a stream did not complete; a signal exits 128 + its number).
async fn run_request(
    args: &PluginArgs,
    request: Result<RunRequest, Fatal>,
    format: Format,
    sink: Box<dyn Write + Send>,
) -> ExitCode {
    run_request_with_metrics(args, request, format, sink, Observers::default()).await
}

/// What watches a read besides its output: `--metrics-file` and `--otlp-endpoint`.
#[derive(Default, Clone, Copy)]
struct Observers<'a> {
    metrics_file: Option<&'a std::path::Path>,
    otlp_endpoint: Option<&'a str>,
}

impl<'a> Observers<'a> {
    fn of(options: &'a ReadOptions) -> Self {
        Observers { metrics_file: options.metrics_file.as_deref(), otlp_endpoint: options.otlp_endpoint.as_deref() }
    }
}

/// [`run_request`], with a read's metrics written to `--metrics-file` when it ends and its spans
/// and metrics sent to `--otlp-endpoint`.
async fn run_request_with_metrics(
    args: &PluginArgs,
    request: Result<RunRequest, Fatal>,
    format: Format,
    sink: Box<dyn Write + Send>,
    observers: Observers<'_>,
) -> ExitCode {
    let runtime =
        request.and_then(|request| Ok((runtime_for(args, &request.policy, request.concurrency.partitions)?, request)));
    let telemetry = runtime.and_then(|both| {
        let telemetry = observers.otlp_endpoint.map(super::telemetry::start).transpose();
        Ok((both, telemetry.map_err(|e| Fatal::config(format!("{e:#}")))?))
    });
    let ((runtime, mut request), telemetry) = match telemetry {
        Ok(all) => all,
        Err(fatal) => return early_failure(&fatal, format, sink).await,
    };
    request.sink = sink;
    let stop = request.stop.clone();
    let watcher = tokio::spawn(async move {
        let received = super::signals::shutdown().await;
        let message = format!("interrupted by {}: stopping; what was written so far is kept", received.name());
        eprintln!("{message}");
        stop.request(message);
        received
    });
    let report = runtime.run(request).await;
    // Only the watcher stops a command's run: when it did, it is ending with its signal.
    let received = match report.stopped {
        Some(_) => watcher.await.ok(),
        None => {
            watcher.abort();
            None
        }
    };
    let code = match (&report.stopped, &report.result) {
        (Some(_), _) => received.map_or(ExitCode::FAILURE, |s| ExitCode::from(s.exit_code())),
        (None, Err(fatal)) => {
            eprintln!("error: {}", printable(&fatal.message));
            ExitCode::FAILURE
        }
        (None, Ok(Outcome::Read(read))) => {
            if let Some(telemetry) = &telemetry {
                telemetry.record(read);
            }
            read_ended(read, format, observers.metrics_file)
        }
        (None, Ok(_)) => ExitCode::SUCCESS,
    };
    if let Some(telemetry) = telemetry {
        // The exporters' last sends block: off the runtime's workers, which carry them out.
        let failures = tokio::task::spawn_blocking(move || telemetry.finish()).await.unwrap_or_default();
        for failure in failures {
            eprintln!("WARN {}", printable(&failure));
        }
    }
    if let Err(e) = report.output {
        // A consumer that went away (broken pipe) is not worth a second error line.
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: cannot write output: {e}");
        }
        return ExitCode::FAILURE;
    }
    if ENDS_WITH_PROCESS.load(std::sync::atomic::Ordering::Relaxed) {
        std::mem::forget(runtime);
    }
    code
}

/// A read that ran: its summary on a terminal, its metrics to `metrics` (`--metrics-file`), and
/// whether every stream was read.
fn read_ended(read: &ReadReport, format: Format, metrics: Option<&std::path::Path>) -> ExitCode {
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && format == Format::Airbyte {
        eprintln!("{}", printable(&read.summary_line()));
    }
    let written = metrics.map_or(Ok(()), |path| std::fs::write(path, read.prometheus_text(&[])));
    match written {
        Err(e) => {
            let path = metrics.map(|p| p.display().to_string()).unwrap_or_default();
            eprintln!("error: cannot write the metrics to {}: {e}", printable(&path));
            ExitCode::FAILURE
        }
        Ok(()) if read.ok() => ExitCode::SUCCESS,
        Ok(()) => ExitCode::FAILURE,
    }
}

/// A command that fails before its run starts (an unreadable config, catalog or state), or
/// outside a run (`inspect`): one line on stderr and, in Airbyte format, a TRACE error.
async fn early_failure(fatal: &Fatal, format: Format, sink: Box<dyn Write + Send>) -> ExitCode {
    eprintln!("error: {}", printable(&fatal.message));
    if format == Format::Airbyte {
        let _ = write_alone(sink, &airbyte::trace_error(&fatal.message, None, fatal.failure, None)).await;
    }
    ExitCode::FAILURE
}

/// One protocol message written to `sink` when no run is there to write it.
async fn write_alone(sink: Box<dyn Write + Send>, message: &Value) -> std::io::Result<()> {
    let (out, writer) = Output::spawn(Format::Airbyte, sink);
    out.message(message).await.map_err(std::io::Error::other)?;
    drop(out);
    tokio::task::spawn_blocking(move || writer.finish()).await.map_err(std::io::Error::other)?
}

/// `host package`: the connector's spec (for the Meltano settings), then the folder.
async fn package(args: &super::args::PackageArgs) -> ExitCode {
    let result: Result<Vec<std::path::PathBuf>, Fatal> = async {
        let mut policy = args.plugin.policy().map_err(|e| Fatal::config(format!("{e:#}")))?;
        policy.allow_hosts.extend(args.allow_hosts.iter().cloned());
        policy.deny_ungranted |= args.deny_ungranted;
        session::grants(&policy.allow_hosts)?;
        let spec = spec_of(&args.plugin, &policy).await?;
        let policy_limits = policy.limits.clone();
        let policy = serde_json::to_value(&policy).map_err(|e| Fatal::system(e.to_string()))?;
        let max_plugin_bytes = args.plugin.max_plugin_mb << 20;
        let compiled = compiled_entry(&args.plugin, &policy_limits)?;
        let mut files = super::package::write(
            &args.plugin.plugin,
            &args.name,
            (&policy, &spec),
            Some(&compiled),
            &args.out,
            max_plugin_bytes,
        )
        .map_err(|e| Fatal::config(format!("{e:#}")))?;
        if args.oci {
            let version = args.image_version.as_deref().unwrap_or(env!("CARGO_PKG_VERSION"));
            let image = super::oci::write(&args.out, &args.name, version, &args.out.join("image"))
                .map_err(|e| Fatal::system(format!("cannot write the image: {e:#}")))?;
            files.push(image);
        }
        Ok(files)
    }
    .await;
    match result {
        Ok(files) => {
            for file in files {
                println!("{}", file.display());
            }
            ExitCode::SUCCESS
        }
        Err(fatal) => {
            eprintln!("error: {}", printable(&fatal.message));
            ExitCode::FAILURE
        }
    }
}

/// The connector's spec, from a run of its own with no output.
async fn spec_of(plugin: &PluginArgs, policy: &Policy) -> Result<Value, Fatal> {
    let runtime = runtime_for(plugin, policy, 1)?;
    let mut request = RunRequest::new(&plugin.plugin, json!({}), Box::new(std::io::sink()));
    request.policy = policy.clone();
    request.action = Action::Spec;
    match runtime.run(request).await.result {
        Ok(Outcome::Spec(spec)) => Ok(spec),
        Ok(_) => unreachable!("a spec request answers with the spec"),
        Err(fatal) => Err(fatal),
    }
}

/// The cache entry of the plugin's compiled code (the engine's, for a manifest), as a packaged
/// run's engine looks for it: [`spec_of`] has just compiled it into the cache.
fn compiled_entry(plugin: &PluginArgs, limits: &crate::guest::limits::Limits) -> Result<std::path::PathBuf, Fatal> {
    let cache_dir = plugin.cache_dir.clone().unwrap_or_else(ComponentCache::default_dir);
    let engine = crate::guest::engine::Engine::with_options(cache_dir, pooled(limits), limits.wasm_stack_bytes, 1)
        .map_err(|e| Fatal::system(format!("cannot start the engine: {e:#}")))?;
    let component = match crate::guest::manifest::is_manifest(&plugin.plugin) {
        true => crate::guest::manifest::engine_path().map_err(|e| Fatal::config(format!("{e:#}")))?,
        false => plugin.plugin.clone(),
    };
    let loaded = engine.load(&component).map_err(|e| Fatal::config(format!("{e:#}")))?;
    Ok(loaded.load.cache_file)
}

/// `run --test`: the check, its verdict in the exit status (a Singer tap's `--test`).
async fn connection_test(args: &super::args::RunArgs) -> ExitCode {
    let request = configured(&args.common, Action::Check);
    let (runtime, request) = match request.and_then(|r| Ok((runtime_for(&args.common.plugin, &r.policy, 1)?, r))) {
        Ok(both) => both,
        Err(fatal) => {
            eprintln!("error: {}", printable(&fatal.message));
            return ExitCode::FAILURE;
        }
    };
    match runtime.run(request).await.result {
        Ok(Outcome::Check(Ok(()))) => {
            eprintln!("INFO connection test passed");
            ExitCode::SUCCESS
        }
        Ok(Outcome::Check(Err(why))) => {
            eprintln!("ERROR connection test failed: {}", printable(&why));
            ExitCode::FAILURE
        }
        Ok(_) => unreachable!("a check request answers with its verdict"),
        Err(fatal) => {
            eprintln!("error: {}", printable(&fatal.message));
            ExitCode::FAILURE
        }
    }
}

/// `run --about`: the connector's name, capabilities and settings (its spec), as a Singer tap
/// describes itself for Meltano.
async fn about(args: &super::args::RunArgs, sink: Box<dyn Write + Send>) -> ExitCode {
    let plugin = &args.common.plugin;
    let policy = plugin.policy().map_err(|e| Fatal::config(format!("{e:#}")));
    let spec = match policy {
        Ok(policy) => spec_of(plugin, &policy).await,
        Err(fatal) => Err(fatal),
    };
    let spec = match spec {
        Ok(spec) => spec,
        Err(fatal) => return early_failure(&fatal, Format::Singer, sink).await,
    };
    let name = plugin.plugin.file_stem().map_or("connector".into(), |s| s.to_string_lossy().into_owned());
    let text = match args.about.as_deref() {
        Some("markdown") => crate::data::about::markdown(&name, &spec),
        _ => format!("{}\n", crate::data::about::json(&name, &spec)),
    };
    let mut sink = sink;
    match sink.write_all(text.as_bytes()).and_then(|()| sink.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) => ExitCode::FAILURE,
    }
}

/// `host test`: the conformance kit, through the library.
async fn test(args: super::args::TestArgs) -> ExitCode {
    let opened = (|| {
        let (policy, source) = args.common.policy_with_source().map_err(|e| format!("{e:#}"))?;
        let config = args.common.config_path().and_then(read_config).map_err(|e| format!("{e:#}"))?;
        let runtime =
            runtime_for(&args.common.plugin, &policy, Concurrency::default().partitions).map_err(|e| e.message)?;
        Ok::<_, String>((runtime, policy, source, config))
    })();
    let report = match opened {
        Ok((runtime, policy, policy_source, config)) => {
            let request = crate::conformance::TestRequest {
                plugin: args.common.plugin.plugin.clone(),
                config,
                policy,
                policy_source,
                http: args.common.http.options(),
                http_replay: args.common.http.http_replay.clone(),
                streams: args.streams.clone(),
                max_pages: args.max_pages,
            };
            crate::conformance::test(&runtime, request).await
        }
        Err(message) => crate::conformance::cannot_start(&args.common.plugin.plugin, message),
    };
    let text = report.render(args.json);
    let mut stdout = std::io::stdout().lock();
    if stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).is_err() {
        return ExitCode::FAILURE;
    }
    if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}

/// `host manifests check DIR` (see [`super::manifests`]).
async fn manifests_check(dir: &std::path::Path, cache_dir: Option<std::path::PathBuf>) -> ExitCode {
    if !dir.is_dir() {
        eprintln!("error: {} is not a folder", printable(&dir.display().to_string()));
        return ExitCode::from(2);
    }
    let options =
        RuntimeOptions { cache_dir: cache_dir.unwrap_or_else(ComponentCache::default_dir), ..Default::default() };
    let runtime = match Runtime::with_options(options) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the engine: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    match super::manifests::report(&runtime, dir, &mut std::io::stdout()).await {
        Ok([_, 0, 0]) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `host recording show`: a run's HTTP recording, summarised (or as JSON lines).
async fn recording(command: RecordingCommand) -> ExitCode {
    let RecordingCommand::Show { uri, json } = command;
    let result = tokio::task::spawn_blocking(move || {
        let exchanges = crate::storage::recording::load_exchanges(&uri)?;
        let mut stdout = std::io::stdout().lock();
        if json {
            for exchange in &exchanges {
                serde_json::to_writer(&mut stdout, exchange)?;
                stdout.write_all(b"\n")?;
            }
        } else {
            write!(stdout, "{}", crate::storage::recording::summary(&exchanges))?;
        }
        anyhow::Ok(())
    })
    .await;
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `host replay`: a stored run to `sink`, or its manifest rebuilt.
async fn replay(args: &ReplayArgs, mut sink: Box<dyn Write + Send>) -> ExitCode {
    let (uri, rebuild, show) = (args.uri.clone(), args.rebuild_manifest, args.manifest);
    let options = ReplayOptions { format: args.format, expand_batch: args.expand_batch, from: args.from.clone() };
    let result = tokio::task::spawn_blocking(move || {
        if rebuild {
            let manifest = crate::storage::replay::rebuild_manifest(&uri)?;
            eprintln!("rebuilt {}/manifest.json: {} segment(s)", uri.trim_end_matches('/'), manifest.segments.len());
            return Ok(());
        }
        if show {
            let manifest = crate::storage::replay::current_manifest(&uri)?;
            serde_json::to_writer_pretty(&mut sink, &manifest)?;
            sink.write_all(b"\n")?;
            return Ok(());
        }
        let report = crate::storage::replay::replay(&uri, &options, &mut sink)?;
        if report.manifest_rebuilt {
            eprintln!("WARN the run has no manifest: segments were read in name order, unverified");
        }
        if !report.unsealed.is_empty() {
            eprintln!(
                "WARN the run did not seal {} (killed?): read without a checksum, up to its last complete line",
                report.unsealed.join(", ")
            );
        }
        eprintln!("replayed {} segment(s): {} lines, {} records", report.segments, report.lines, report.records);
        anyhow::Ok(())
    })
    .await;
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            let broken_pipe =
                e.downcast_ref::<std::io::Error>().is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe);
            if !broken_pipe {
                eprintln!("error: {e:#}");
            }
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `host inspect`: identity, declared needs and the effective grant, on stdout for a person (or
/// as JSON).
async fn inspect(args: InspectArgs) -> Result<ExitCode, Fatal> {
    let (quiet, _writer) = Output::spawn(Format::Airbyte, Box::new(std::io::sink()));
    let policy = args.plugin.policy().map_err(|e| Fatal::config(format!("{e:#}")))?;
    let runtime = runtime_for(&args.plugin, &policy, 1)?;
    let plugin = runtime.plugin(&args.plugin.plugin, "", &quiet).await?;
    let granted = session::grants(policy.allow_hosts.iter().chain(&args.allow_hosts))?;
    let declared = match &args.config {
        Some(path) => {
            let config = read_config(path).map_err(|e| Fatal::config(format!("{e:#}")))?.to_string();
            let connector =
                Connector::new(plugin.clone(), config.clone(), Arc::new(session::no_egress()?), policy.limits.clone());
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let caps =
                instance.capabilities(&connector.config).await.map_err(|e| Fatal::call("capabilities failed", e))?;
            Some(session::declared(&caps.hosts)?)
        }
        None => None,
    };
    let egress = EgressPolicy::new(declared.clone().unwrap_or_default(), granted.clone());
    let missing: Vec<String> = egress.ungranted().iter().map(|h| h.to_string()).collect();
    let show = |hosts: &[HostPort]| hosts.iter().map(|h| h.to_string()).collect::<Vec<_>>();
    let report = json!({
        "plugin": plugin.path.display().to_string(),
        "sha256": plugin.sha256,
        "wit": format!("{}@{}", crate::bindings::WIT_PACKAGE, plugin.wit_version),
        "declared_hosts": declared.as_deref().map(show),
        "granted_hosts": show(&granted),
        "missing_grants": if declared.is_some() { json!(missing) } else { Value::Null },
        "limits": serde_json::to_value(&policy.limits).expect("limits serialize"),
        "sandbox": "no files, no environment, no sockets; HTTP only through the host's egress policy",
    });
    if args.json {
        println!("{report:#}");
    } else {
        println!("plugin:   {}", plugin.path.display());
        println!("sha256:   {}", plugin.sha256);
        println!("contract: {}@{}", crate::bindings::WIT_PACKAGE, plugin.wit_version);
        match &declared {
            Some(hosts) => println!("declares: {}", show(hosts).join(", ")),
            None => println!("declares: (pass --config to ask which hosts it needs)"),
        }
        println!("granted:  {}", if granted.is_empty() { "nothing".to_string() } else { show(&granted).join(", ") });
        if declared.is_some() {
            if missing.is_empty() {
                println!("effective: everything it declares is granted");
            } else {
                println!(
                    "effective: NOT granted: {} (a run refuses to start without --deny-ungranted)",
                    missing.join(", ")
                );
            }
        }
        println!(
            "limits:   {} MiB memory per instance, {} ms CPU and {} ms wall-clock per call, records up to {} bytes",
            policy.limits.memory_bytes >> 20,
            policy.limits.cpu_ms_per_call,
            policy.limits.call_timeout_ms,
            policy.limits.max_record_bytes
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The largest state file read, bytes.
const MAX_STATE_BYTES: u64 = 64 << 20;

/// The largest config file read, bytes: a config is a few fields (a service account's key file
/// inlined is a few KiB).
const MAX_CONFIG_BYTES: u64 = 16 << 20;

/// The state file, parsed under the run's `max_partition_cursors` (its partition cursors past
/// it are folded as they are read: [`InputState::parse_with_limit`]).
fn load_state(path: Option<&std::path::Path>, request: &RunRequest) -> Result<InputState, Fatal> {
    let Some(path) = path else { return Ok(InputState::default()) };
    parse_state_file(path, request.policy.limits.max_partition_cursors)
}

/// `host state merge`: the shards' states merged, as Airbyte per-stream STATE messages.
fn state_merge(paths: &[std::path::PathBuf], max_cursors: usize, mut sink: Box<dyn Write + Send>) -> ExitCode {
    let merged = paths
        .iter()
        .map(|path| parse_state_file(path, max_cursors).map_err(|e| anyhow::anyhow!(e.message)))
        .collect::<Result<Vec<_>>>()
        .and_then(|states| crate::run::shard::merge(states, max_cursors));
    let written = merged.and_then(|streams| {
        let messages: Vec<Value> = streams
            .into_iter()
            .map(|(name, state)| {
                json!({"type": "STREAM", "stream": {"stream_descriptor": {"name": name}, "stream_state": state}})
            })
            .collect();
        serde_json::to_writer(&mut sink, &messages)?;
        sink.write_all(b"\n")?;
        sink.flush()?;
        Ok(())
    });
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// A state file read and parsed, keeping at most `max_cursors` partition cursors per stream.
fn parse_state_file(path: &std::path::Path, max_cursors: usize) -> Result<InputState, Fatal> {
    // Bounded before it is read: a state file is parsed whole, and a hostile one of a million
    // partition cursors cost 12 GiB before it failed.
    let limit = format!(
        "{} MiB, the most a state file may be (a stream's state is a few entries per partition in flight \
         and at most {} partition cursors)",
        MAX_STATE_BYTES >> 20,
        crate::data::state::DEFAULT_MAX_PARTITION_CURSORS
    );
    let cap = files::Cap::new("state", MAX_STATE_BYTES).said(&limit);
    let bytes = files::read_capped(path, cap).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let text =
        String::from_utf8(bytes).map_err(|e| Fatal::config(format!("cannot read state {}: {e}", path.display())))?;
    // An empty file is no state, said out loud: a state file emptied by a pipeline that failed
    // must not turn into a silent full re-read.
    if text.trim().is_empty() {
        eprintln!(
            "warning: state file {} is empty: there is no state, so every stream is read from its start",
            printable(&path.display().to_string())
        );
    }
    InputState::parse_with_limit(&text, max_cursors)
        .map_err(|e| Fatal::config(format!("invalid state {}: {e:#}", path.display())))
}

/// The config file, at most [`MAX_CONFIG_BYTES`] of it (it may be a pipe: `--config <(...)`).
fn read_config(path: &std::path::Path) -> Result<Value> {
    let bytes = files::read_capped(path, files::Cap::new("config", MAX_CONFIG_BYTES))?;
    let text = String::from_utf8(bytes).with_context(|| format!("cannot read config {}: not UTF-8", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("config {} is not valid JSON", path.display()))?;
    if !value.is_object() {
        bail!("config {} must be a JSON object", path.display());
    }
    Ok(value)
}
