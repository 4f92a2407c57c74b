//! What each `host` command does, on top of the library.

use crate::catalog;
use crate::cli::{Cli, Command, ConfiguredArgs, PluginArgs, ReadOptions};
use crate::connector::{CallError, Connector};
use crate::egress::{Egress, EgressPolicy, HostPort, HttpOptions};
use crate::engine::{ComponentCache, Engine, Plugin};
use crate::limits::Limits;
use crate::policy::Policy;
use crate::progress::Progress;
use crate::protocol::{self, FailureType, Format, Output, OutputClosed, airbyte};
use crate::read::{SelectedStream, StreamSummary, emit_logs};
use crate::schedule::{self, Concurrency};
use crate::state::InputState;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// A failure that ends the command: reported as a TRACE error (Airbyte) and one line on stderr.
struct Fatal {
    message: String,
    failure: FailureType,
}

impl Fatal {
    fn config(e: impl std::fmt::Display) -> Self {
        Fatal { message: e.to_string(), failure: FailureType::Config }
    }
    fn system(e: impl std::fmt::Display) -> Self {
        Fatal { message: e.to_string(), failure: FailureType::System }
    }
    fn call(what: &str, e: CallError) -> Self {
        Fatal { message: format!("{what}: {}", e.message()), failure: e.failure_type() }
    }
}

impl From<OutputClosed> for Fatal {
    fn from(e: OutputClosed) -> Self {
        Fatal::system(e)
    }
}

/// Runs a parsed command line, writing protocol messages to `sink`.
pub async fn execute(cli: Cli, sink: Box<dyn Write + Send>) -> ExitCode {
    let format = match &cli.command {
        Command::Run(args) => args.format,
        _ => Format::Airbyte,
    };
    let (out, writer) = Output::spawn(format, sink);
    let code = match dispatch(cli.command, &out).await {
        Ok(code) => code,
        Err(fatal) => {
            eprintln!("error: {}", out.secrets.mask(&fatal.message));
            if format == Format::Airbyte {
                let _ = out.error(&fatal.message, fatal.failure, None).await;
            }
            ExitCode::FAILURE
        }
    };
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

async fn dispatch(command: Command, out: &Output) -> Result<ExitCode, Fatal> {
    match command {
        Command::Spec(args) => {
            let plugin = load_plugin(&args, out).await?;
            let policy = Policy::from_sandbox_args(&args.sandbox).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let connector = Connector::new(plugin, "{}".into(), Arc::new(no_egress()?), policy.limits);
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let spec = instance.spec().await;
            emit_logs(out, instance.take_logs(), &Limits::default()).await?;
            let spec = spec.map_err(|e| Fatal::call("spec failed", e))?;
            out.message(&airbyte::spec(parse_guest_json("spec", &spec)?)).await?;
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
            emit_logs(out, instance.take_logs(), &Limits::default()).await?;
            out.message(&airbyte::connection_status(result.map_err(|e| out.secrets.mask(&e.message())))).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Inspect(args) => inspect(args).await,
        Command::Discover(args) => {
            let connector = open(&args, out, false).await?;
            let streams = discover(&connector, out).await?;
            out.message(&airbyte::catalog(streams.iter().map(airbyte_stream).collect())).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Read(args) => {
            let selection = catalog::load(&args.catalog).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let state = load_state(args.state.as_deref())?;
            let connector = open(&args.common, out, true).await?;
            let streams = discover(&connector, out).await?;
            let selected = select(&streams, &selection, false, &state)?;
            read(connector, out, selected, &args.options, &state).await
        }
        Command::Run(args) => {
            let state = load_state(args.state.as_deref())?;
            let selection = match &args.catalog {
                Some(path) => Some(catalog::load(path).map_err(|e| Fatal::config(format!("{e:#}")))?),
                None => None,
            };
            let connector = open(&args.common, out, !args.discover).await?;
            let streams = discover(&connector, out).await?;
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
            let selected = select(&streams, &selection, args.full_refresh, &state)?;
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
    let granted = args
        .allow_hosts
        .iter()
        .map(|h| HostPort::parse(h).context("invalid --allow-host"))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| Fatal::config(format!("{e:#}")))?;
    let declared = match &args.config {
        Some(path) => {
            let config = read_config(path).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let connector =
                Connector::new(plugin.clone(), config.clone(), Arc::new(no_egress()?), policy.limits.clone());
            let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
            let caps = instance.capabilities(&config).await.map_err(|e| Fatal::call("capabilities failed", e))?;
            let hosts = caps.hosts.iter().map(|h| HostPort::parse(h).map_err(|e| Fatal::system(format!("{e:#}"))));
            Some(hosts.collect::<Result<Vec<_>, _>>()?)
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

/// Resolves a selection against the discovered streams: incremental where asked, or, where the
/// selection leaves it open, wherever the stream has a cursor.
fn select(
    streams: &[crate::bindings::Stream],
    selection: &[catalog::Selected],
    full_refresh: bool,
    state: &InputState,
) -> Result<Vec<SelectedStream>, Fatal> {
    let mut selected = Vec::new();
    for wanted in selection {
        let stream = find_stream(streams, &wanted.name)?;
        let cursor_field = match (full_refresh, wanted.incremental) {
            (true, _) | (false, Some(false)) => None,
            (false, None) => stream.cursor_field.clone(),
            (false, Some(true)) => Some(stream.cursor_field.clone().ok_or_else(|| {
                Fatal::config(format!("stream {} cannot be read incrementally: it has no cursor field", stream.name))
            })?),
        };
        let saved_state = cursor_field.as_ref().and_then(|_| state.streams.get(&stream.name).cloned());
        selected.push(SelectedStream { stream: stream.clone(), cursor_field, saved_state });
    }
    Ok(selected)
}

fn find_stream<'a>(streams: &'a [crate::bindings::Stream], name: &str) -> Result<&'a crate::bindings::Stream, Fatal> {
    streams.iter().find(|s| s.name == name).ok_or_else(|| {
        let offered: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
        Fatal::config(format!("the connector has no stream {name:?} (it offers: {})", offered.join(", ")))
    })
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
    let started = Instant::now();
    // Streams not read now keep their state in Singer's whole-tap STATE.
    let unread = state.streams.iter().filter(|(name, _)| !selected.iter().any(|s| &s.stream.name == *name));
    out.seed_states(unread.map(|(k, v)| (k.clone(), v.clone())).collect()).await?;
    let concurrency = Concurrency {
        partitions: options.concurrency as usize,
        per_stream: options.stream_concurrency.map(|n| n as usize),
    };
    let progress = Arc::new(Progress::new(!options.no_progress));
    let connector = Arc::new(connector);
    let summaries = schedule::read_streams(
        connector.clone(),
        out.clone(),
        connector.limits.clone(),
        progress.clone(),
        concurrency,
        selected,
    )
    .await?;
    progress.finish();
    let ok = summaries.iter().all(StreamSummary::complete);
    let message = summary_line(&summaries, &connector, started.elapsed());
    out.log(if ok { "INFO" } else { "ERROR" }, &message).await?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) && out.format() == Format::Airbyte {
        eprintln!("{message}");
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn summary_line(summaries: &[StreamSummary], connector: &Connector, elapsed: std::time::Duration) -> String {
    let total: u64 = summaries.iter().map(|s| s.records).sum();
    let streams: Vec<String> = summaries
        .iter()
        .map(|s| {
            let skipped = match s.skipped_partitions {
                0 => String::new(),
                n => format!(" ({n} already finished)"),
            };
            let status = match (s.failed, s.failed_partitions) {
                (true, _) => ", FAILED".to_string(),
                (false, 0) => String::new(),
                (false, n) => format!(", INCOMPLETE: {n} partition(s) failed"),
            };
            format!("{} {} records in {} partition(s){skipped}{status}", s.name, s.records, s.partitions)
        })
        .collect();
    let stats = &connector.egress.stats;
    let load = std::sync::atomic::Ordering::Relaxed;
    format!(
        "read {total} records from {} stream(s) in {:.2}s ({}); {} requests, {} retries, {} denied",
        summaries.len(),
        elapsed.as_secs_f64(),
        streams.join("; "),
        stats.requests.load(load),
        stats.retries.load(load),
        stats.denied.load(load),
    )
}

fn no_egress() -> Result<Egress, Fatal> {
    Egress::new(EgressPolicy::default(), HttpOptions::default()).map_err(|e| Fatal::system(format!("{e:#}")))
}

/// Loads the plugin and says so in the run's first LOG line.
async fn load_plugin(args: &PluginArgs, out: &Output) -> Result<Arc<Plugin>, Fatal> {
    let cache_dir = args.cache_dir.clone().unwrap_or_else(ComponentCache::default_dir);
    let engine = Engine::new(cache_dir).map_err(|e| Fatal::system(format!("cannot start the engine: {e:#}")))?;
    let plugin = engine.load(&args.plugin).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let how = if plugin.load.cache_hit {
        format!("loaded compiled code from cache in {} ms", plugin.load.elapsed.as_millis())
    } else {
        format!("compiled in {} ms and cached at {}", plugin.load.elapsed.as_millis(), plugin.load.cache_file.display())
    };
    let message = format!(
        "sluice {}: plugin {} sha256 {} built for {}@{}; {how}",
        env!("CARGO_PKG_VERSION"),
        plugin.path.display(),
        plugin.sha256,
        crate::bindings::WIT_PACKAGE,
        plugin.wit_version,
    );
    out.log("INFO", &message).await?;
    Ok(Arc::new(plugin))
}

/// Loads plugin and config, asks the plugin what it needs, checks that against the grant, and
/// sets up egress and the secrets to mask.
/// A run (`read`, `run`) refuses to start when a needed host is not granted, unless the policy
/// says to deny instead; `check` and `discover` always start and deny.
async fn open(args: &ConfiguredArgs, out: &Output, is_run: bool) -> Result<Connector, Fatal> {
    let policy = Policy::from_args(args).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let config = read_config(&args.config).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let plugin = load_plugin(&args.plugin, out).await?;
    let granted = policy
        .allow_hosts
        .iter()
        .map(|h| HostPort::parse(h).context("invalid --allow-host"))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| Fatal::config(format!("{e:#}")))?;
    let probe = Connector::new(plugin.clone(), config.clone(), Arc::new(no_egress()?), policy.limits.clone());
    let mut instance = probe.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
    // Secrets first, so nothing said after this can leak them.
    let spec = instance.spec().await;
    if let Ok(spec) = &spec
        && let (Ok(spec), Ok(config)) = (serde_json::from_str::<Value>(spec), serde_json::from_str::<Value>(&config))
    {
        out.secrets.set_from(&spec, &config);
    }
    let caps = instance.capabilities(&config).await;
    emit_logs(out, instance.take_logs(), &policy.limits).await?;
    spec.map_err(|e| Fatal::call("spec failed", e))?;
    let caps = caps.map_err(|e| Fatal::call("the connector cannot say what it needs for this config", e))?;
    let declared = caps
        .hosts
        .iter()
        .map(|h| {
            HostPort::parse(h).map_err(|e| Fatal::system(format!("the connector declared an invalid host: {e:#}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let egress_policy = EgressPolicy::new(declared, granted);
    let missing: Vec<String> = egress_policy.ungranted().iter().map(|h| h.to_string()).collect();
    if !missing.is_empty() {
        let grants: Vec<String> = missing.iter().map(|h| format!("--allow-host {h}")).collect();
        if is_run && !policy.deny_ungranted {
            return Err(Fatal::config(format!(
                "the connector needs {} for this config, which is not granted: grant it with {} \
                 (or start anyway with --deny-ungranted, and its requests there are denied)",
                missing.join(", "),
                grants.join(" ")
            )));
        }
        let message = format!(
            "the connector needs {}, which is not granted: its requests there will be denied (grant with {})",
            missing.join(", "),
            grants.join(" ")
        );
        out.log("WARN", &message).await?;
    }
    let egress = Egress::new(egress_policy, args.http.options()).map_err(|e| Fatal::system(format!("{e:#}")))?;
    Ok(Connector::new(plugin, config, Arc::new(egress), policy.limits))
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

fn parse_guest_json(what: &str, text: &str) -> Result<Value, Fatal> {
    serde_json::from_str(text).map_err(|e| {
        Fatal::system(format!("the connector's {what} is not valid JSON ({e}): {}", protocol::preview(text)))
    })
}

async fn discover(connector: &Connector, out: &Output) -> Result<Vec<crate::bindings::Stream>, Fatal> {
    let mut instance = connector.instance().await.map_err(|e| Fatal::call("cannot start the connector", e))?;
    let streams = instance.discover(&connector.config).await;
    emit_logs(out, instance.take_logs(), &Limits::default()).await?;
    let streams = streams.map_err(|e| Fatal::call("discover failed", e))?;
    let mut names = std::collections::HashSet::new();
    for s in &streams {
        let schema = parse_guest_json(&format!("schema of stream {}", s.name), &s.json_schema)?;
        if !schema.is_object() {
            return Err(Fatal::system(format!("the schema of stream {} is not a JSON object", s.name)));
        }
        if !names.insert(s.name.as_str()) {
            return Err(Fatal::system(format!("the connector offers stream {} twice", s.name)));
        }
    }
    Ok(streams)
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
