//! The one pipeline: every run, from the CLI or an embedder, is executed here. It opens the
//! run's storage, starts the single writer with the storage as its sinks, loads the plugin
//! through the runtime's cache, opens it with the HTTP hooks the request asks for (recording,
//! offline replay, the embedder's own), does the request's action, and ends the output: a
//! TRACE for a failure, the lake sealed with the run's outcome, every byte flushed.

use super::plugins::Plugins;
use super::policy::Policy;
use super::progress::Progress;
use super::request::{Action, Outcome, RunError, RunReport, RunRequest, Selection};
use super::schedule::Concurrency;
use super::session::{self, HttpSetup};
use super::stop::Stop;
use crate::data::catalog::{self, Selected};
use crate::data::protocol::{FailureType, Format, Output, airbyte};
use crate::data::state::InputState;
use crate::guest::connector::Connector;
use crate::guest::engine::{POOLED_MAX_MEMORY, Plugin};
use crate::net::budget::CallBudget;
use crate::run::hints::RunHints;
use crate::run::logs::emit_logs;
use crate::run::read::StreamSummary;
use crate::storage::replay::{Opened, StorageOptions};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;

/// How long a stopping read may take to clean up (abort its report jobs, one at a time).
pub const STOP_GRACE: Duration = Duration::from_secs(15);

/// Runs `request` to the end; see [`crate::Runtime::run`].
pub(crate) async fn execute(plugins: &Plugins, mut request: RunRequest) -> RunReport {
    let (format, stop, is_read) = (request.format, request.stop.clone(), request.is_read());
    let storage = std::mem::take(&mut request.storage);
    let record_http = storage.record_http;
    let opened = match open_storage(storage, format).await {
        Ok(opened) => opened,
        Err(e) => return RunReport { result: Err(e), kept_at: None, stopped: None, output: Ok(()) },
    };
    let kept_at = opened.kept_at.clone();
    let sink = std::mem::replace(&mut request.sink, Box::new(std::io::sink()));
    let (out, writer) = Output::spawn_with(format, sink, opened.sinks);
    let work_out = out.clone();
    let kept = kept_at.clone();
    let mut work = Box::pin(async move {
        if let Some(uri) = &kept {
            // The first LOG line names the policy, as the plugin's announcement does otherwise.
            let policy = &request.policy_source.described;
            work_out.log("INFO", &format!("policy: {policy}; replay storage: this run is kept at {uri}")).await?;
        }
        act(plugins, &work_out, request, record_http).await
    });
    let stopped_by = |reason: &str| RunError { message: reason.to_string(), failure: FailureType::Transient };
    let (result, stopped) = tokio::select! {
        biased;
        reason = stop.requested() => {
            // A read stops itself (ending its partitions, aborting its report jobs) within a
            // bounded grace; anything else just ends.
            if is_read {
                let _ = tokio::time::timeout(STOP_GRACE, &mut work).await;
            }
            (Err(stopped_by(&reason)), Some(reason))
        }
        // The read watches the stop too, and may see it first: its error is then the stop's.
        result = &mut work => match (result, stop.reason()) {
            (Err(_), Some(reason)) => (Err(stopped_by(&reason)), Some(reason)),
            (result, _) => (result, None),
        },
    };
    drop(work);
    let result = result.map_err(|e| RunError { message: out.secrets.mask_text(&e.message), ..e });
    if let Err(e) = &result
        && format == Format::Airbyte
    {
        let _ = out.error(&e.message, e.failure, None).await;
    }
    let outcome = super::request::outcome_of(stopped.is_some(), &result);
    // Cancelled reads may still hold handles to the output: close it rather than wait for them.
    out.close(outcome).await;
    let written = out.clone();
    drop(out);
    let output = tokio::task::spawn_blocking(move || writer.finish())
        .await
        .unwrap_or_else(|e| Err(std::io::Error::other(format!("the writer failed: {e}"))));
    let mut result = result;
    if let Ok(Outcome::Read(read)) = &mut result {
        read.usage.state_bytes = written.state_bytes();
    }
    RunReport { result, kept_at, stopped, output }
}

/// A manifest's `concurrency_level` and `api_budget`, as far as they lower the run's own limits.
async fn apply_hints(
    mut hints: RunHints,
    hooks: &mut Vec<Arc<dyn crate::net::hooks::HttpHooks>>,
    concurrency: &mut crate::run::schedule::Concurrency,
    out: &Output,
) -> Result<(), RunError> {
    if let Some(n) = hints.concurrency.filter(|n| *n < concurrency.partitions) {
        concurrency.partitions = n;
        out.log("INFO", &format!("the manifest's concurrency_level: {n} partitions at once")).await?;
    }
    if !hints.budget.is_empty() {
        let policies = hints.budget.len();
        let policies_read = std::mem::take(&mut hints.budget);
        hooks.push(Arc::new(CallBudget::with_responses(policies_read, hints.budget_responses.clone())));
        out.log("INFO", &format!("the manifest's api_budget: {policies} policies, applied as the CDK applies them"))
            .await?;
    }
    for field in &hints.unread {
        out.log(
            "WARN",
            &format!(
                "the manifest's {field} cannot be read by the host (a template other than config[...], or a number, \
                 duration or pattern it cannot parse): it is left out, and the host's own settings apply"
            ),
        )
        .await?;
    }
    Ok(())
}

/// Opens replay storage and BATCH files for a run, if asked (blocking I/O, off the workers).
async fn open_storage(storage: StorageOptions, format: Format) -> Result<Opened, RunError> {
    if storage.batch && format != Format::Singer {
        return Err(RunError::config("--batch writes Singer BATCH messages: use it with `run --format singer`"));
    }
    match tokio::task::spawn_blocking(move || storage.open()).await {
        Ok(Ok(opened)) => Ok(opened),
        Ok(Err(e)) => Err(RunError::config(format!("cannot open replay storage: {e:#}"))),
        Err(e) => Err(RunError::system(format!("cannot open replay storage: {e}"))),
    }
}

/// The request's action, on a plugin loaded through the runtime.
async fn act(plugins: &Plugins, out: &Output, request: RunRequest, record_http: bool) -> Result<Outcome, RunError> {
    let RunRequest {
        plugin: path,
        config,
        action,
        policy,
        policy_source,
        http,
        http_replay,
        http_hooks,
        state,
        concurrency,
        format,
        progress,
        stop,
        ..
    } = request;
    if !config.is_object() {
        return Err(RunError::config("the config must be a JSON object"));
    }
    policy.limits.check().map_err(RunError::config)?;
    let engine = plugins.engine();
    if policy.limits.wasm_stack_bytes != engine.wasm_stack_bytes() {
        return Err(RunError::config(format!(
            "this runtime's guests have a {} KiB stack; a run cannot ask for {} KiB (the stack is an engine setting)",
            engine.wasm_stack_bytes() >> 10,
            policy.limits.wasm_stack_bytes >> 10
        )));
    }
    if engine.pooling() && policy.limits.memory_bytes > POOLED_MAX_MEMORY as u64 {
        return Err(RunError::config(format!(
            "a memory limit of {} MiB is above what pooled instances can have ({} MiB); use a runtime without pooling",
            policy.limits.memory_bytes >> 20,
            POOLED_MAX_MEMORY >> 20
        )));
    }
    let replay = session::load_recording(http_replay).await?;
    let plugin = plugins.plugin(&path, &policy_source.described, out).await?;
    let plugin = plugins.with_injected_components(plugin, &config, out).await?;
    for warning in &policy_source.warnings {
        out.log("WARN", warning).await?;
    }
    let (mut http_hooks, mut concurrency) = (http_hooks, concurrency);
    if let Some(manifest) = &plugin.manifest {
        apply_hints(RunHints::of(&manifest.json, &config), &mut http_hooks, &mut concurrency, out).await?;
    }
    let http = HttpSetup { options: http, replay, record: record_http, hooks: http_hooks };
    let config = config.to_string();
    match action {
        Action::Spec => spec(plugin, &policy, out).await,
        Action::Check => check(plugin, config, &policy, http, out).await,
        Action::Discover => {
            let connector = session::open(plugin, config, &policy, http, out, false, true).await?;
            let streams = session::discover(&connector, out).await?;
            let catalog = match format {
                Format::Airbyte => airbyte::catalog(streams.iter().map(airbyte_stream).collect()),
                Format::Singer => catalog::singer_catalog(&streams),
            };
            out.message(&catalog).await?;
            Ok(Outcome::Discover(streams.into_iter().map(|s| s.name).collect()))
        }
        Action::Read { selection, full_refresh } => {
            let connector = session::open(plugin, config, &policy, http, out, true, true).await?;
            let read = Read { selection, full_refresh, state, concurrency, progress, stop };
            read.run(connector, out).await
        }
    }
}

/// SPEC: the plugin's config specification, asked with no config and no egress.
async fn spec(plugin: Arc<Plugin>, policy: &Policy, out: &Output) -> Result<Outcome, RunError> {
    let connector = Connector::new(plugin, "{}".into(), Arc::new(session::no_egress()?), policy.limits.clone());
    let mut instance = connector.instance().await.map_err(|e| RunError::call("cannot start the connector", e))?;
    let spec = instance.spec().await;
    emit_logs(out, instance.take_logs()).await?;
    let spec = spec.map_err(|e| RunError::call("spec failed", e))?;
    // Remembered for the runs that follow (`session::open`), as a platform asks for it first.
    if let Some(memo) = connector.plugin.spec_memo() {
        memo.write(&spec);
    }
    let spec = session::parse_guest_json("spec", &spec)?;
    out.message(&airbyte::spec(spec.clone())).await?;
    Ok(Outcome::Spec(spec))
}

/// CONNECTION_STATUS: the connector's own check, with the config and egress a read would have.
async fn check(
    plugin: Arc<Plugin>,
    config: String,
    policy: &Policy,
    http: HttpSetup,
    out: &Output,
) -> Result<Outcome, RunError> {
    let connector = match session::open(plugin, config, policy, http, out, false, true).await {
        Ok(c) => c,
        // A config the connector cannot take, or a connector that crashes in `spec` or
        // `capabilities`, is a failed check (as the Airbyte CDK reports it), not a crash.
        Err(e) => {
            let message = out.secrets.mask_text(&e.message);
            out.message(&airbyte::connection_status(Err(message.clone()))).await?;
            return Ok(Outcome::Check(Err(message)));
        }
    };
    let mut instance = session::run_level_instance(&connector).await?;
    let result = instance.check(&connector.config).await;
    emit_logs(out, instance.take_logs()).await?;
    let result = result.map_err(|e| out.secrets.mask_text(&e.message()));
    out.message(&airbyte::connection_status(result.clone())).await?;
    Ok(Outcome::Check(result))
}

/// What a read was asked for, beyond the connector it reads with.
struct Read {
    selection: Selection,
    full_refresh: bool,
    state: InputState,
    concurrency: Concurrency,
    /// Whether progress lines are written.
    progress: bool,
    stop: Stop,
}

impl Read {
    /// Discovers, selects the asked streams (warning of those read in full or missing), and reads.
    async fn run(self, connector: Connector, out: &Output) -> Result<Outcome, RunError> {
        let connector = Arc::new(connector);
        let (streams, answers) = session::discover_and_ask(&connector, out).await?;
        let by_name = |name: &str| Selected { name: name.to_string(), ..Default::default() };
        let lenient = matches!(self.selection, Selection::Catalog(_));
        let selection: Vec<Selected> = match self.selection {
            Selection::All => streams.iter().map(|s| by_name(&s.name)).collect(),
            Selection::Streams(names) => {
                names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()).map(by_name).collect()
            }
            Selection::Catalog(selected) => selected,
        };
        let resolved = session::select(&streams, &selection, self.full_refresh, &self.state, lenient)?;
        for name in &resolved.in_full {
            let message = format!(
                "stream {name} has no cursor field, so it cannot be read incrementally: it is read in full \
                 (full_refresh), as the catalog's incremental sync mode allows no other way"
            );
            out.log("WARN", &message).await?;
        }
        for name in &resolved.missing {
            session::report_missing(out, name).await?;
        }
        let progress = Arc::new(Progress::new(self.progress));
        let mut report = session::read(
            connector,
            answers,
            out,
            resolved.streams,
            self.concurrency,
            progress,
            self.state,
            &self.stop,
        )
        .await?;
        report.streams.extend(resolved.missing.into_iter().map(|name| StreamSummary {
            name,
            failed: true,
            ..Default::default()
        }));
        Ok(Outcome::Read(report))
    }
}

/// A discovered stream as an Airbyte CATALOG entry.
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
