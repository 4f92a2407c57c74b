//! What each `host` command does, on top of the library.

use crate::catalog;
use crate::cli::{Cli, Command, ConfiguredArgs, PluginArgs, ReadOptions, RecordingCommand, ReplayArgs};
use crate::connector::Connector;
use crate::egress::{EgressPolicy, HostPort};
use crate::engine::{ComponentCache, Engine, Plugin};
use crate::policy::Policy;
use crate::progress::Progress;
use crate::protocol::{FailureType, Format, Output, airbyte};
use crate::read::{SelectedStream, emit_logs};
use crate::replay::{ReplayOptions, Tee, TeeOptions};
use crate::schedule::Concurrency;
use crate::session::{self, RunError};
use crate::state::InputState;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// A failure that ends the command: reported as a TRACE error (Airbyte) and one line on stderr.
type Fatal = RunError;

/// How long a stopping run may take to clean up (abort its report jobs) after SIGINT/SIGTERM.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(15);

/// Runs a parsed command line, writing protocol messages to `sink`.
pub async fn execute(cli: Cli, sink: Box<dyn Write + Send>) -> ExitCode {
    let (format, storage) = match &cli.command {
        Command::Run(args) => (args.format, Some(args.options.storage.options())),
        Command::Read(args) => (Format::Airbyte, Some(args.options.storage.options())),
        Command::Replay(args) => return replay(args, sink).await,
        Command::Recording(command) => return recording(command.clone()).await,
        _ => (Format::Airbyte, None),
    };
    let tee = match open_storage(storage, format).await {
        Ok(tee) => tee,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::FAILURE;
        }
    };
    // Reads stop themselves on a signal (aborting report jobs); other commands just end.
    let stops_itself = matches!(cli.command, Command::Run(_) | Command::Read(_));
    let kept_at = tee.as_ref().and_then(|t| t.lake.as_ref()).map(|lake| lake.run().uri.clone());
    let (out, writer) = Output::spawn_with(format, sink, tee);
    let run_out = out.clone();
    let mut run = Box::pin(async move {
        if let Some(uri) = &kept_at {
            run_out.log("INFO", &format!("replay storage: this run is kept at {uri}")).await?;
        }
        dispatch(cli.command, &run_out).await
    });
    let (code, outcome) = tokio::select! {
        result = &mut run => match result {
            Ok(code) => (code, if code == ExitCode::SUCCESS { "succeeded" } else { "failed" }),
            Err(fatal) => {
                eprintln!("error: {}", out.secrets.mask(&fatal.message));
                if format == Format::Airbyte {
                    let _ = out.error(&fatal.message, fatal.failure, None).await;
                }
                (ExitCode::FAILURE, "failed")
            }
        },
        signal = crate::signals::shutdown() => {
            let message = format!("interrupted by {}: stopping; what was written so far is kept", signal.name());
            eprintln!("{message}");
            // The run stops itself (aborting report jobs in flight); it gets a bounded grace.
            crate::signals::request_stop();
            if stops_itself {
                let _ = tokio::time::timeout(STOP_GRACE, &mut run).await;
            }
            if format == Format::Airbyte {
                let _ = out.error(&message, FailureType::Transient, None).await;
            }
            (ExitCode::from(signal.exit_code()), "interrupted")
        }
    };
    drop(run);
    // Cancelled reads may still hold handles to the output: close it rather than wait for them.
    out.close(outcome).await;
    drop(out);
    if let Err(e) = writer.finish() {
        // A consumer that went away (broken pipe) is not worth a second error line.
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            eprintln!("error: cannot write output: {e}");
        }
        return ExitCode::FAILURE;
    }
    code
}

/// Opens replay storage and BATCH files for a run, if asked (blocking I/O, off the workers).
async fn open_storage(storage: Option<TeeOptions>, format: Format) -> Result<Option<Tee>, String> {
    let Some(storage) = storage else { return Ok(None) };
    if storage.batch && format != Format::Singer {
        return Err("--batch writes Singer BATCH messages: use it with `run --format singer`".into());
    }
    match tokio::task::spawn_blocking(move || storage.open()).await {
        Ok(Ok(tee)) => Ok(tee),
        Ok(Err(e)) => Err(format!("cannot open replay storage: {e:#}")),
        Err(e) => Err(format!("cannot open replay storage: {e}")),
    }
}

/// `host recording show`: a run's HTTP recording, summarised (or as JSON lines).
async fn recording(command: RecordingCommand) -> ExitCode {
    let RecordingCommand::Show { uri, json } = command;
    let result = tokio::task::spawn_blocking(move || {
        let exchanges = crate::recording::load_exchanges(&uri)?;
        let mut stdout = std::io::stdout().lock();
        if json {
            for exchange in &exchanges {
                serde_json::to_writer(&mut stdout, exchange)?;
                stdout.write_all(b"\n")?;
            }
        } else {
            write!(stdout, "{}", crate::recording::summary(&exchanges))?;
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
            let manifest = crate::replay::rebuild_manifest(&uri)?;
            eprintln!("rebuilt {}/manifest.json: {} segment(s)", uri.trim_end_matches('/'), manifest.segments.len());
            return Ok(());
        }
        if show {
            let manifest = crate::replay::current_manifest(&uri)?;
            serde_json::to_writer_pretty(&mut sink, &manifest)?;
            sink.write_all(b"\n")?;
            return Ok(());
        }
        let report = crate::replay::replay(&uri, &options, &mut sink)?;
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

async fn dispatch(command: Command, out: &Output) -> Result<ExitCode, Fatal> {
    match command {
        Command::Spec(args) => {
            let plugin = load_plugin(&args, out).await?;
            let policy = Policy::from_sandbox_args(&args.sandbox).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let connector = Connector::new(plugin, "{}".into(), Arc::new(session::no_egress()?), policy.limits);
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let spec = instance.spec().await;
            emit_logs(out, instance.take_logs(), &connector.limits).await?;
            let spec = spec.map_err(|e| Fatal::call("spec failed", e))?;
            out.message(&airbyte::spec(session::parse_guest_json("spec", &spec)?)).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => {
            let connector = match open(&args, out, false).await {
                Ok(c) => c,
                // A config that cannot even be read is a failed check, not a crash.
                Err(fatal) if fatal.failure == FailureType::Config => {
                    out.message(&airbyte::connection_status(Err(out.secrets.mask(&fatal.message)))).await?;
                    return Ok(ExitCode::SUCCESS);
                }
                Err(fatal) => return Err(fatal),
            };
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let result = instance.check(&connector.config).await;
            emit_logs(out, instance.take_logs(), &connector.limits).await?;
            out.message(&airbyte::connection_status(result.map_err(|e| out.secrets.mask(&e.message())))).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect(args) => inspect(args).await,
        Command::Replay(_) | Command::Recording(_) => unreachable!("these run without a plugin (see execute)"),
        Command::Test(args) => Ok(crate::conformance::run(args, out).await),
        Command::Discover(args) => {
            let connector = open(&args, out, false).await?;
            let streams = session::discover(&connector, out).await?;
            out.message(&airbyte::catalog(streams.iter().map(airbyte_stream).collect())).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Read(args) => {
            let selection = catalog::load(&args.catalog).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let state = load_state(args.state.as_deref())?;
            let connector = open_recorded(&args.common, out, true, args.options.storage.record_http).await?;
            let streams = session::discover(&connector, out).await?;
            let selected = session::select(&streams, &selection, false, &state)?;
            read(connector, out, selected, &args.options, &state).await
        }
        Command::Run(args) => {
            let state = load_state(args.state.as_deref())?;
            let selection = match &args.catalog {
                Some(path) => Some(catalog::load(path).map_err(|e| Fatal::config(format!("{e:#}")))?),
                None => None,
            };
            let connector = open_recorded(&args.common, out, !args.discover, args.options.storage.record_http).await?;
            let streams = session::discover(&connector, out).await?;
            if args.discover {
                let catalog = match args.format {
                    Format::Airbyte => airbyte::catalog(streams.iter().map(airbyte_stream).collect()),
                    Format::Singer => catalog::singer_catalog(&streams),
                };
                out.message(&catalog).await?;
                return Ok(ExitCode::SUCCESS);
            }
            let by_name = |name: &str| catalog::Selected { name: name.to_string(), incremental: None };
            let selection = match (selection, &args.streams) {
                (Some(selection), _) => selection,
                (None, Some(names)) => names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).map(by_name).collect(),
                (None, None) => streams.iter().map(|s| by_name(&s.name)).collect(),
            };
            let selected = session::select(&streams, &selection, args.full_refresh, &state)?;
            read(connector, out, selected, &args.options, &state).await
        }
    }
}

/// `host inspect`: identity, declared needs and the effective grant, on stdout for a person (or
/// as JSON).
async fn inspect(args: crate::cli::InspectArgs) -> Result<ExitCode, Fatal> {
    let (quiet, _writer) = Output::spawn(Format::Airbyte, Box::new(std::io::sink()));
    let plugin = load_plugin(&args.plugin, &quiet).await?;
    let policy = Policy::from_sandbox_args(&args.plugin.sandbox).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let granted = session::grants(policy.allow_hosts.iter().chain(&args.allow_hosts))?;
    let declared = match &args.config {
        Some(path) => {
            let config = read_config(path).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let connector =
                Connector::new(plugin.clone(), config.clone(), Arc::new(session::no_egress()?), policy.limits.clone());
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let caps = instance.capabilities(&config).await.map_err(|e| Fatal::call("capabilities failed", e))?;
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
        "limits": {
            "memory_bytes": policy.limits.memory_bytes,
            "cpu_ms_per_call": policy.limits.cpu_ms_per_call,
            "call_timeout_ms": policy.limits.call_timeout_ms,
            "max_record_bytes": policy.limits.max_record_bytes,
            "max_records_per_page": policy.limits.max_records_per_page,
            "max_log_bytes": policy.limits.max_log_bytes,
            "max_logs_per_call": policy.limits.max_logs_per_call,
            "max_pages_per_partition": policy.limits.max_pages_per_partition,
        },
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

fn load_state(path: Option<&std::path::Path>) -> Result<InputState, Fatal> {
    let Some(path) = path else { return Ok(InputState::default()) };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::config(format!("cannot read state {}: {e}", path.display())))?;
    InputState::parse(&text).map_err(|e| Fatal::config(format!("invalid state {}: {e:#}", path.display())))
}

async fn read(
    connector: Connector,
    out: &Output,
    selected: Vec<SelectedStream>,
    options: &ReadOptions,
    state: &InputState,
) -> Result<ExitCode, Fatal> {
    let concurrency = Concurrency {
        partitions: options.concurrency as usize,
        per_stream: options.stream_concurrency.map(|n| n as usize),
        jobs: options.jobs.options(),
    };
    let progress = Arc::new(Progress::new(!options.no_progress));
    let report = session::read(connector, out, selected, concurrency, progress, state).await?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && out.format() == Format::Airbyte {
        eprintln!("{}", report.summary_line());
    }
    Ok(if report.ok() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// The engine for a command (one per process), then the plugin.
async fn load_plugin(args: &PluginArgs, out: &Output) -> Result<Arc<Plugin>, Fatal> {
    let cache_dir = args.cache_dir.clone().unwrap_or_else(ComponentCache::default_dir);
    let policy = Policy::from_sandbox_args(&args.sandbox).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let engine = Engine::with_options(cache_dir, false, policy.limits.wasm_stack_bytes)
        .map_err(|e| Fatal::system(format!("cannot start the engine: {e:#}")))?;
    session::load_plugin(&engine, &args.plugin, out).await
}

/// [`open`] for `host test`, which reports a connector that cannot be opened as a failed check.
pub(crate) async fn open_for_test(args: &ConfiguredArgs, out: &Output) -> Result<Connector, String> {
    open(args, out, false).await.map_err(|e| e.message)
}

/// Loads plugin and config under the command line's policy; see [`session::open`].
async fn open(args: &ConfiguredArgs, out: &Output, is_run: bool) -> Result<Connector, Fatal> {
    open_recorded(args, out, is_run, false).await
}

/// [`open`], recording every HTTP exchange when `record_http`.
async fn open_recorded(
    args: &ConfiguredArgs,
    out: &Output,
    is_run: bool,
    record_http: bool,
) -> Result<Connector, Fatal> {
    let policy = Policy::from_args(args).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let config = read_config(&args.config).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let mut http = args.http.options();
    http.record = record_http;
    if let Some(uri) = args.http.http_replay.clone() {
        let cassette = tokio::task::spawn_blocking(move || crate::recording::Cassette::load(&uri))
            .await
            .map_err(|e| Fatal::system(format!("cannot load the HTTP recording: {e}")))?
            .map_err(|e| Fatal::config(format!("cannot load the HTTP recording: {e:#}")))?;
        http.replay = Some(Arc::new(cassette));
    }
    let plugin = load_plugin(&args.plugin, out).await?;
    session::open(plugin, config, &policy, http, out, is_run).await
}

fn read_config(path: &std::path::Path) -> Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).with_context(|| format!("config {} is not valid JSON", path.display()))?;
    if !value.is_object() {
        bail!("config {} must be a JSON object", path.display());
    }
    Ok(value.to_string())
}

fn airbyte_stream(s: &crate::bindings::Stream) -> Value {
    let schema: Value = serde_json::from_str(&s.json_schema).unwrap_or(json!({}));
    let mut modes = vec!["full_refresh"];
    let mut stream = json!({
        "name": s.name,
        "json_schema": schema,
        "source_defined_primary_key": s.primary_key,
    });
    if let Some(cursor) = &s.cursor_field {
        modes.push("incremental");
        stream["source_defined_cursor"] = json!(true);
        stream["default_cursor_field"] = json!(cursor);
    }
    stream["supported_sync_modes"] = json!(modes);
    stream
}
