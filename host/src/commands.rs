//! What each `host` command does, on top of the library.

use crate::catalog::{ConfiguredCatalog, SyncMode};
use crate::cli::{Cli, Command, ConfiguredArgs, PluginArgs};
use crate::connector::{CallError, Connector};
use crate::egress::{Egress, EgressPolicy, HostPort, HttpOptions};
use crate::engine::{ComponentCache, Engine, Plugin};
use crate::protocol::{self, FailureType, Output, OutputClosed};
use crate::read::{OutputLimits, Reader, SelectedStream, StreamSummary, emit_logs};
use crate::state::InputState;
use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

/// A failure that ends the command: reported as a TRACE error and one line on stderr.
struct Fatal {
    message: String,
    failure: FailureType,
}

impl Fatal {
    fn config(e: impl std::fmt::Display) -> Self {
        Fatal {
            message: e.to_string(),
            failure: FailureType::Config,
        }
    }
    fn system(e: impl std::fmt::Display) -> Self {
        Fatal {
            message: e.to_string(),
            failure: FailureType::System,
        }
    }
    fn call(what: &str, e: CallError) -> Self {
        Fatal {
            message: format!("{what}: {}", e.message()),
            failure: e.failure_type(),
        }
    }
}

impl From<OutputClosed> for Fatal {
    fn from(e: OutputClosed) -> Self {
        Fatal::system(e)
    }
}

/// Runs a parsed command line, writing protocol messages to `sink`.
pub async fn execute(cli: Cli, sink: Box<dyn Write + Send>) -> ExitCode {
    let (out, writer) = Output::spawn(sink);
    let result = dispatch(cli.command, &out).await;
    let code = match result {
        Ok(code) => code,
        Err(fatal) => {
            eprintln!("error: {}", fatal.message);
            let _ = out
                .message(&protocol::trace_error(&fatal.message, None, fatal.failure, None))
                .await;
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
            let connector = Connector {
                plugin,
                config: "{}".into(),
                egress: Arc::new(no_egress()?),
            };
            let mut instance = connector
                .instance()
                .await
                .map_err(|e| Fatal::call("cannot start the connector", e))?;
            let spec = instance.spec().await;
            emit_logs(out, instance.take_logs(), &OutputLimits::default()).await?;
            let spec = spec.map_err(|e| Fatal::call("spec failed", e))?;
            let spec = parse_guest_json("spec", &spec)?;
            out.message(&protocol::spec(spec)).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Check(args) => {
            let connector = match open(&args, out).await {
                Ok(c) => c,
                // A config that cannot even be read is a failed check, not a crash.
                Err(fatal) if fatal.failure == FailureType::Config => {
                    out.message(&protocol::connection_status(Err(fatal.message))).await?;
                    return Ok(ExitCode::SUCCESS);
                }
                Err(fatal) => return Err(fatal),
            };
            let mut instance = connector
                .instance()
                .await
                .map_err(|e| Fatal::call("cannot start the connector", e))?;
            let result = instance.check(&connector.config).await;
            emit_logs(out, instance.take_logs(), &OutputLimits::default()).await?;
            out.message(&protocol::connection_status(result.map_err(|e| e.message())))
                .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Discover(args) => {
            let connector = open(&args, out).await?;
            let streams = discover(&connector, out).await?;
            out.message(&protocol::catalog(streams.iter().map(airbyte_stream).collect()))
                .await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Read(args) => {
            let catalog = ConfiguredCatalog::load(&args.catalog).map_err(|e| Fatal::config(format!("{e:#}")))?;
            let state = load_state(args.state.as_deref())?;
            let connector = open(&args.common, out).await?;
            let streams = discover(&connector, out).await?;
            let mut selected = Vec::new();
            for configured in &catalog.streams {
                let stream = find_stream(&streams, &configured.stream.name)?;
                let cursor_field = match configured.sync_mode {
                    SyncMode::FullRefresh => None,
                    SyncMode::Incremental => Some(stream.cursor_field.clone().ok_or_else(|| {
                        Fatal::config(format!(
                            "stream {} cannot be read incrementally: it has no cursor field",
                            stream.name
                        ))
                    })?),
                };
                selected.push(select(stream, cursor_field, &state));
            }
            read(&connector, out, selected).await
        }
        Command::Run(args) => {
            let state = load_state(args.state.as_deref())?;
            let connector = open(&args.common, out).await?;
            let streams = discover(&connector, out).await?;
            let names: Vec<String> = match &args.streams {
                Some(names) => names
                    .iter()
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .collect(),
                None => streams.iter().map(|s| s.name.clone()).collect(),
            };
            let mut selected = Vec::new();
            for name in &names {
                let stream = find_stream(&streams, name)?;
                let cursor_field = if args.full_refresh {
                    None
                } else {
                    stream.cursor_field.clone()
                };
                selected.push(select(stream, cursor_field, &state));
            }
            read(&connector, out, selected).await
        }
    }
}

fn select(stream: &crate::bindings::Stream, cursor_field: Option<Vec<String>>, state: &InputState) -> SelectedStream {
    let saved_state = cursor_field
        .as_ref()
        .and_then(|_| state.streams.get(&stream.name).cloned());
    SelectedStream {
        stream: stream.clone(),
        cursor_field,
        saved_state,
    }
}

fn find_stream<'a>(streams: &'a [crate::bindings::Stream], name: &str) -> Result<&'a crate::bindings::Stream, Fatal> {
    streams.iter().find(|s| s.name == name).ok_or_else(|| {
        let offered: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
        Fatal::config(format!(
            "the connector has no stream {name:?} (it offers: {})",
            offered.join(", ")
        ))
    })
}

fn load_state(path: Option<&std::path::Path>) -> Result<InputState, Fatal> {
    let Some(path) = path else {
        return Ok(InputState::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| Fatal::config(format!("cannot read state {}: {e}", path.display())))?;
    InputState::parse(&text).map_err(|e| Fatal::config(format!("invalid state {}: {e:#}", path.display())))
}

async fn read(connector: &Connector, out: &Output, selected: Vec<SelectedStream>) -> Result<ExitCode, Fatal> {
    let started = Instant::now();
    let limits = OutputLimits::default();
    let reader = Reader {
        connector,
        out,
        limits: &limits,
    };
    let mut summaries = Vec::new();
    for stream in &selected {
        summaries.push(reader.read_stream(stream).await?);
    }
    let ok = summaries.iter().all(StreamSummary::complete);
    let message = summary_line(&summaries, connector, started.elapsed());
    out.message(&protocol::log(if ok { "INFO" } else { "ERROR" }, &message))
        .await?;
    if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        eprintln!("{message}");
    }
    Ok(if ok { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn summary_line(summaries: &[StreamSummary], connector: &Connector, elapsed: std::time::Duration) -> String {
    let total: u64 = summaries.iter().map(|s| s.records).sum();
    let streams: Vec<String> = summaries
        .iter()
        .map(|s| {
            let status = match (s.failed, s.failed_partitions) {
                (true, _) => ", FAILED before reading".to_string(),
                (false, 0) => String::new(),
                (false, n) => format!(", INCOMPLETE: {n} partition(s) failed"),
            };
            format!(
                "{} {} records in {} partition(s){status}",
                s.name, s.records, s.partitions
            )
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
        format!(
            "loaded compiled code from cache in {} ms",
            plugin.load.elapsed.as_millis()
        )
    } else {
        format!(
            "compiled in {} ms and cached at {}",
            plugin.load.elapsed.as_millis(),
            plugin.load.cache_file.display()
        )
    };
    let message = format!(
        "sluice {}: plugin {} sha256 {} built for {}@{}; {how}",
        env!("CARGO_PKG_VERSION"),
        plugin.path.display(),
        plugin.sha256,
        crate::bindings::WIT_PACKAGE,
        plugin.wit_version,
    );
    out.message(&protocol::log("INFO", &message)).await?;
    Ok(Arc::new(plugin))
}

/// Loads plugin and config, asks the plugin what it needs, and sets up egress.
async fn open(args: &ConfiguredArgs, out: &Output) -> Result<Connector, Fatal> {
    let config = read_config(&args.config).map_err(|e| Fatal::config(format!("{e:#}")))?;
    let plugin = load_plugin(&args.plugin, out).await?;
    let granted = args
        .allow_hosts
        .iter()
        .map(|h| HostPort::parse(h).with_context(|| "invalid --allow-host".to_string()))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| Fatal::config(format!("{e:#}")))?;
    let probe = Connector {
        plugin: plugin.clone(),
        config: config.clone(),
        egress: Arc::new(no_egress()?),
    };
    let mut instance = probe
        .instance()
        .await
        .map_err(|e| Fatal::call("cannot start the connector", e))?;
    let caps = instance.capabilities(&config).await;
    emit_logs(out, instance.take_logs(), &OutputLimits::default()).await?;
    let caps = caps.map_err(|e| Fatal::call("the connector cannot say what it needs for this config", e))?;
    let declared = caps
        .hosts
        .iter()
        .map(|h| {
            HostPort::parse(h).map_err(|e| Fatal::system(format!("the connector declared an invalid host: {e:#}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = EgressPolicy::new(declared, granted);
    for host in policy.ungranted() {
        let message = format!(
            "the connector needs {host}, which is not granted: its requests will be denied (grant it with --allow-host {host})"
        );
        out.message(&protocol::log("WARN", &message)).await?;
    }
    let egress = Egress::new(policy, args.http.options()).map_err(|e| Fatal::system(format!("{e:#}")))?;
    Ok(Connector {
        plugin,
        config,
        egress: Arc::new(egress),
    })
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
        Fatal::system(format!(
            "the connector's {what} is not valid JSON ({e}): {}",
            protocol::preview(text)
        ))
    })
}

async fn discover(connector: &Connector, out: &Output) -> Result<Vec<crate::bindings::Stream>, Fatal> {
    let mut instance = connector
        .instance()
        .await
        .map_err(|e| Fatal::call("cannot start the connector", e))?;
    let streams = instance.discover(&connector.config).await;
    emit_logs(out, instance.take_logs(), &OutputLimits::default()).await?;
    let streams = streams.map_err(|e| Fatal::call("discover failed", e))?;
    let mut names = std::collections::HashSet::new();
    for s in &streams {
        let schema = parse_guest_json(&format!("schema of stream {}", s.name), &s.json_schema)?;
        if !schema.is_object() {
            return Err(Fatal::system(anyhow!(
                "the schema of stream {} is not a JSON object",
                s.name
            )));
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
