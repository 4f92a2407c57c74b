//! The steps of a run, which the pipeline puts together: announce the plugin (the run's first
//! LOG line), open it with a config under a policy, discover, select streams, read them, and
//! account for what the guests used.

use super::asked::{self, Answers};
use super::logs::emit_logs;
use super::policy::Policy;
use super::progress::Progress;
use super::read::{SelectedStream, StreamSummary};
use super::request::{ReadReport, RunError, RunUsage};
use super::schedule::{self, Concurrency};
use super::stop::Stop;
use crate::bindings::Stream;
use crate::data::catalog::Selected;
use crate::data::config::Verdict;
use crate::data::protocol::{self, FailureType, Output, OutputClosed, StreamStatus};
use crate::data::state::InputState;
use crate::guest::cache::SpecMemo;
use crate::guest::connector::{Connector, Instance};
use crate::guest::engine::Plugin;
use crate::net::{Egress, EgressPolicy, HostPort, HttpHooks, HttpOptions};
use crate::storage::recording::{Cassette, Recorder};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What the guests of a run used, read off its connector's counters.
fn usage_of(connector: &Connector, summaries: &[StreamSummary]) -> RunUsage {
    let stats = &connector.egress.stats;
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    RunUsage {
        guest_cpu: connector.usage.guest_cpu(),
        throttled: Duration::from_nanos(load(&connector.usage.throttled_nanos)),
        policy_throttled: Duration::from_nanos(load(&connector.usage.policy_throttled_nanos)),
        requests: load(&stats.requests),
        retries: load(&stats.retries),
        denied: load(&stats.denied),
        bytes_in: load(&stats.bytes_in),
        bytes_out: load(&stats.bytes_out),
        records: summaries.iter().map(|s| s.records).sum(),
        peak_memory_bytes: load(&connector.usage.peak_memory_bytes),
        instances: load(&connector.usage.instances),
        peak_live_instances: load(&connector.usage.peak_live_instances),
        attempts_by_status: stats.by_status.each_ref().map(load),
        job_polls: load(&connector.usage.job_polls),
        peak_partitions_in_flight: load(&connector.usage.peak_partitions_in_flight),
        // Filled in when the output writer is done (`pipeline::execute`).
        state_bytes: 0,
    }
}

/// The operator's grants, as `--allow-host` takes them.
pub fn grants<'a>(hosts: impl IntoIterator<Item = &'a String>) -> Result<Vec<HostPort>, RunError> {
    hosts
        .into_iter()
        .map(|h| HostPort::parse(h).map_err(|e| RunError::config(format!("invalid --allow-host: {e:#}"))))
        .collect()
}

/// The hosts a connector declared for its config.
pub fn declared(hosts: &[String]) -> Result<Vec<HostPort>, RunError> {
    hosts
        .iter()
        .map(|h| {
            HostPort::parse(h).map_err(|e| RunError::system(format!("the connector declared an invalid host: {e:#}")))
        })
        .collect()
}

pub fn no_egress() -> Result<Egress, RunError> {
    Egress::new(EgressPolicy::default(), HttpOptions::default()).map_err(|e| RunError::system(format!("{e:#}")))
}

/// The run's first LOG line: which plugin (sha256, contract version), how it was loaded, and
/// the policy in force with where it came from; `reused` says it was already loaded in this
/// process.
pub async fn announce(plugin: &Plugin, reused: Option<&str>, policy: &str, out: &Output) -> Result<(), RunError> {
    let how = match reused {
        Some(how) => how.to_string(),
        None if plugin.load.from_package => format!(
            "loaded the compiled code packaged with it in {} ms (now cached at {})",
            plugin.load.elapsed.as_millis(),
            plugin.load.cache_file.display()
        ),
        None if plugin.load.cache_hit => {
            format!("loaded compiled code from cache in {} ms", plugin.load.elapsed.as_millis())
        }
        None => format!(
            "compiled in {} ms and cached at {}",
            plugin.load.elapsed.as_millis(),
            plugin.load.cache_file.display()
        ),
    };
    let policy = if policy.is_empty() { String::new() } else { format!("; policy: {policy}") };
    let message = format!(
        "sluice {}: plugin {} sha256 {} built for {}@{}; {how}{policy}",
        env!("CARGO_PKG_VERSION"),
        plugin.path.display(),
        plugin.sha256,
        crate::bindings::WIT_PACKAGE,
        plugin.wit_version,
    );
    out.log("INFO", &message).await?;
    Ok(())
}

/// How a run's HTTP is made: the client's options, and the hooks around every attempt.
#[derive(Default)]
pub struct HttpSetup {
    pub options: HttpOptions,
    /// Answer every request from this recording, with no network.
    pub replay: Option<Arc<Cassette>>,
    /// Record every attempt into the run's replay storage.
    pub record: bool,
    /// The embedder's own hooks, after recording and replay.
    pub hooks: Vec<Arc<dyn HttpHooks>>,
}

/// Binds a plugin to a config under a policy: learns the secrets to mask, asks the plugin
/// which hosts it needs, and checks them against the grant. A run (`is_run`) refuses to start
/// when a needed host is not granted, unless the policy says to deny instead. With
/// `check_config` a config the spec rejects is a config error before the connector sees it (the
/// conformance kit reports that itself, then goes on testing the connector).
pub async fn open(
    plugin: Arc<Plugin>,
    config: String,
    policy: &Policy,
    http: HttpSetup,
    out: &Output,
    is_run: bool,
    check_config: bool,
) -> Result<Connector, RunError> {
    let granted = grants(&policy.allow_hosts)?;
    let probe = Connector::new(plugin.clone(), config.clone(), Arc::new(no_egress()?), policy.limits.clone());
    let remembered = plugin.spec_memo();
    let (mut instance, spec, verdict) = match remembered.and_then(SpecMemo::read) {
        // Secrets first, so nothing said after this can leak them; the config is checked on
        // another thread while the first instance is made, and the instance is given up unused
        // if the config is refused.
        Some(spec) => {
            learn_secrets(out, &spec, &config).await?;
            let checking = check_config.then(|| {
                let (spec, config) = (spec.clone(), config.clone());
                tokio::task::spawn_blocking(move || config_against_spec(false, &spec, &config))
            });
            let instance = probe.instance().await;
            let verdict = match checking {
                Some(checking) => {
                    Some(checking.await.map_err(|e| RunError::system(format!("the config check failed: {e}")))?)
                }
                None => None,
            };
            if let Some(Verdict::Invalid(why)) = verdict {
                return Err(RunError::config(why));
            }
            (instance.map_err(|e| RunError::call("cannot start the connector", e))?, Ok(spec), verdict)
        }
        None => {
            let mut instance = probe.instance().await.map_err(|e| RunError::call("cannot start the connector", e))?;
            let spec = instance.spec().await;
            if let Ok(spec) = &spec {
                learn_secrets(out, spec, &config).await?;
                if let Some(memo) = remembered {
                    memo.write(spec);
                }
            }
            let verdict = match (&spec, check_config) {
                (Ok(spec), true) => Some(config_against_spec(plugin.manifest.is_some(), spec, &config)),
                _ => None,
            };
            (instance, spec, verdict)
        }
    };
    // The config against the spec before the connector sees it (check, discover, read alike).
    match verdict {
        Some(Verdict::Invalid(why)) => {
            emit_logs(out, instance.take_logs()).await?;
            return Err(RunError::config(why));
        }
        Some(Verdict::Unchecked(why)) => {
            out.log("WARN", &format!("{why}; the config is not checked against it")).await?;
        }
        Some(Verdict::Valid) | None => {}
    }
    let caps = instance.capabilities(&probe.config).await;
    emit_logs(out, instance.take_logs()).await?;
    spec.map_err(|e| RunError::call("spec failed", e))?;
    let caps = caps.map_err(|e| RunError::call("the connector cannot say what it needs for this config", e))?;
    let declared = declared(&caps.hosts)?;
    let egress_policy = match &http.replay {
        // Nothing leaves the machine: what the connector declares is all it may ask for.
        Some(cassette) => {
            let message = format!(
                "HTTP is replayed from the recording at {} ({} exchanges): no network access",
                cassette.uri, cassette.exchanges
            );
            out.log("INFO", &message).await?;
            EgressPolicy::new(declared.clone(), declared)
        }
        None => EgressPolicy::new(declared, granted),
    };
    refuse_ungranted(&egress_policy, is_run && !policy.deny_ungranted, out).await?;
    let mut egress = Egress::new(egress_policy, http.options).map_err(|e| RunError::system(format!("{e:#}")))?;
    if let Some(cassette) = http.replay {
        egress = egress.with_hook(Arc::new(cassette.replayer(out.secrets.clone())));
    }
    if http.record {
        egress = egress.with_hook(Arc::new(Recorder::new(out.clone())));
    }
    for hook in http.hooks {
        egress = egress.with_hook(hook);
    }
    out.describe_run(crate::storage::replay::PluginInfo {
        sha256: plugin.sha256.clone(),
        wit: format!("{}@{}", crate::bindings::WIT_PACKAGE, plugin.wit_version),
        config_sha256: crate::storage::replay::manifest::sha256_hex(config.as_bytes()),
    })
    .await?;
    let egress = Arc::new(egress);
    egress.prepare();
    Ok(Connector::new(plugin, config, egress, policy.limits.clone()).adopt(probe, instance))
}

/// Learns which config values are secrets (to mask them in everything written after this),
/// warning of secrets too short to mask.
async fn learn_secrets(out: &Output, spec: &str, config: &str) -> Result<(), OutputClosed> {
    let (Ok(spec), Ok(config)) = (serde_json::from_str::<Value>(spec), serde_json::from_str::<Value>(config)) else {
        return Ok(());
    };
    out.secrets.set_from(&spec, &config);
    let short = out.secrets.too_short();
    if !short.is_empty() {
        let message = format!(
            "config field(s) {} are marked secret but shorter than {} characters: too short to mask \
             reliably, so they are not masked in logs and errors",
            short.join(", "),
            crate::data::secrets::MIN_MASKED_CHARS
        );
        out.log("WARN", &message).await?;
    }
    Ok(())
}

/// The config checked against the connector's spec (`manifest`: the plugin runs a manifest).
fn config_against_spec(manifest: bool, spec: &str, config: &str) -> Verdict {
    match (serde_json::from_str::<Value>(spec), serde_json::from_str::<Value>(config)) {
        // A manifest carried in the config is the engine's input, not a setting the spec describes.
        (Ok(spec), Ok(config)) if manifest => {
            crate::data::config::check(&spec, &crate::guest::manifest::without_manifest(&config))
        }
        (Ok(spec), Ok(config)) => crate::data::config::check(&spec, &config),
        (Err(e), _) => Verdict::Unchecked(format!("the connector's spec is not JSON: {e}")),
        (_, Err(e)) => Verdict::Invalid(format!("the config is not JSON: {e}")),
    }
}

/// Hosts the connector needs and the operator did not grant: a refusal when `refuse`, else a
/// warning that its requests there will be denied.
async fn refuse_ungranted(egress_policy: &EgressPolicy, refuse: bool, out: &Output) -> Result<(), RunError> {
    let missing: Vec<String> = egress_policy.ungranted().iter().map(|h| h.to_string()).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let grants: Vec<String> = missing.iter().map(|h| format!("--allow-host {h}")).collect();
    if refuse {
        return Err(RunError::config(format!(
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
    Ok(())
}

pub fn parse_guest_json(what: &str, text: &str) -> Result<Value, RunError> {
    serde_json::from_str(text).map_err(|e| {
        RunError::system(format!("the connector's {what} is not valid JSON ({e}): {}", protocol::preview(text)))
    })
}

/// [`discover`], then the questions a read asks ([`asked::ask`]), of one instance: the spec
/// probe's ([`Connector::adopt`]). It is warm, where an instance beside it would take a pool
/// slot no instance has used yet and its page faults (for an interpreter, 3-4 ms of a run's
/// start against 1.5-2.5 for both calls in the warm one).
pub async fn discover_and_ask(connector: &Connector, out: &Output) -> Result<(Vec<Stream>, Answers), RunError> {
    let (streams, instance) = discover_in(connector, out, run_level_instance(connector).await?).await?;
    Ok((streams, asked::ask(connector, out, instance).await?))
}

/// The connector's streams, checked: valid schemas, no name twice.
pub async fn discover(connector: &Connector, out: &Output) -> Result<Vec<Stream>, RunError> {
    Ok(discover_in(connector, out, run_level_instance(connector).await?).await?.0)
}

/// [`Connector::run_level_instance`], its failure the run's.
pub async fn run_level_instance(connector: &Connector) -> Result<Instance, RunError> {
    connector.run_level_instance().await.map_err(|e| RunError::call("cannot start the connector", e))
}

/// [`discover`] in `instance`, handed back with the streams.
async fn discover_in(
    connector: &Connector,
    out: &Output,
    mut instance: Instance,
) -> Result<(Vec<Stream>, Instance), RunError> {
    let streams = instance.discover(&connector.config).await;
    emit_logs(out, instance.take_logs()).await?;
    let streams = streams.map_err(|e| RunError::call("discover failed", e))?;
    let mut names = std::collections::HashSet::new();
    for s in &streams {
        let schema = parse_guest_json(&format!("schema of stream {}", s.name), &s.json_schema)?;
        if !schema.is_object() {
            return Err(RunError::system(format!("the schema of stream {} is not a JSON object", s.name)));
        }
        if !names.insert(s.name.as_str()) {
            return Err(RunError::system(format!("the connector offers stream {} twice", s.name)));
        }
        // Names and schemas go out in every kind of message (and into the lake): one that holds a
        // secret is refused rather than masked, which would change the stream's identity.
        let fields = s.primary_key.iter().chain(s.cursor_field.iter()).flatten();
        if [&s.name, &s.json_schema].into_iter().chain(fields).any(|text| out.secrets.appear_in(text)) {
            return Err(RunError::system(format!(
                "stream {} holds a secret value from the config in its name, schema or fields",
                out.secrets.mask(&s.name)
            )));
        }
    }
    Ok((streams, instance))
}

/// What a selection resolved to: the streams to read, and what the operator must be told.
#[derive(Default)]
pub struct Resolved {
    pub streams: Vec<SelectedStream>,
    /// Streams a catalog names that the connector does not have (each fails, the others are read).
    pub missing: Vec<String>,
    /// Streams a catalog asks to read incrementally that have no cursor: read in full.
    pub in_full: Vec<String>,
}

/// Resolves a selection against the discovered streams: incremental where asked, or, where the
/// selection leaves it open, wherever the stream has a cursor. As the Airbyte CDK does, a
/// catalog's stream that the connector lacks is reported and skipped (`lenient`; a name given on
/// the command line is an error), and one asked for incrementally without a cursor is read in
/// full.
pub fn select(
    streams: &[Stream],
    selection: &[Selected],
    full_refresh: bool,
    state: &InputState,
    lenient: bool,
) -> Result<Resolved, RunError> {
    let mut resolved = Resolved::default();
    for wanted in selection {
        let Some(stream) = streams.iter().find(|s| s.name == wanted.name) else {
            if lenient {
                resolved.missing.push(wanted.name.clone());
                continue;
            }
            let offered: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
            return Err(RunError::config(format!(
                "the connector has no stream {:?} (it offers: {})",
                wanted.name,
                offered.join(", ")
            )));
        };
        let cursor_field = match (full_refresh, wanted.incremental) {
            (true, _) | (false, Some(false)) => None,
            (false, None) => stream.cursor_field.clone(),
            (false, Some(true)) => {
                if stream.cursor_field.is_none() {
                    resolved.in_full.push(stream.name.clone());
                }
                stream.cursor_field.clone()
            }
        };
        let saved = state.streams.get(&stream.name);
        let saved_state = match &cursor_field {
            // A copy: the input's states go whole to the run's whole-tap STATE (`read`). Its
            // partition cursors were folded as the file was parsed, so it is at most the limit
            // of them (`InputState::parse_with_limit`).
            Some(_) => saved.cloned(),
            // A stream read in full keeps no cursor, but what a previous read left unfinished is
            // resumed: its report jobs in flight (polled, or aborted when not needed), and, for
            // a resumable stream, its part-read and finished partitions.
            None => saved.and_then(|s| {
                let kept: serde_json::Map<String, Value> = ["jobs", "in_progress", "done"]
                    .into_iter()
                    .filter_map(|k| Some((k.to_string(), s.get(k)?.clone())))
                    .collect();
                (!kept.is_empty()).then_some(Value::Object(kept))
            }),
        };
        // Keys and the cursor are always read (Singer's `automatic`), whatever the catalog says.
        let automatic = |name: &String| {
            stream.primary_key.iter().chain(stream.cursor_field.iter()).any(|path| path.first() == Some(name))
        };
        let excluded: Vec<String> = wanted.excluded.iter().filter(|f| !automatic(f)).cloned().collect();
        resolved.streams.push(SelectedStream {
            stream: stream.clone(),
            cursor_field,
            saved_state,
            excluded: excluded.into(),
        });
    }
    if resolved.streams.is_empty() && resolved.missing.is_empty() {
        return Err(RunError::config("nothing to read: no stream is selected".to_string()));
    }
    Ok(resolved)
}

/// A catalog's stream the connector does not have, reported as the Airbyte CDK does: a config
/// error naming it, and the stream INCOMPLETE.
pub async fn report_missing(out: &Output, name: &str) -> Result<(), OutputClosed> {
    let internal = format!(
        "The stream '{name}' in your connection configuration was not found in the source. Refresh the schema \
         in your replication settings and remove this stream from future sync attempts."
    );
    let message = format!("stream {name} is in the catalog but the connector has no such stream");
    out.error_with(&message, Some(&internal), FailureType::Config, Some(name)).await?;
    out.status(name, StreamStatus::Incomplete).await
}

/// Reads the selected streams and ends with the summary LOG line.
#[allow(clippy::too_many_arguments)]
pub async fn read(
    connector: Arc<Connector>,
    answers: Answers,
    out: &Output,
    selected: Vec<SelectedStream>,
    concurrency: Concurrency,
    progress: Arc<Progress>,
    state: InputState,
    stop: &Stop,
) -> Result<ReadReport, RunError> {
    let started = Instant::now();
    let folded: HashMap<String, (usize, usize)> = selected
        .iter()
        .filter_map(|s| Some((s.stream.name.clone(), state.folded_partition_cursors(&s.stream.name)?)))
        .collect();
    // Singer's whole-tap STATE starts from the input: streams not read now keep their state,
    // and one a run does not change (no new records) is still in the run's last STATE. Moved
    // there, not copied.
    out.seed_states(state.streams.into_iter().collect()).await?;
    let limits = connector.limits.clone();
    let streams = schedule::read_streams(
        connector.clone(),
        answers,
        out.clone(),
        limits,
        progress.clone(),
        concurrency,
        selected,
        folded,
        stop,
    )
    .await?;
    progress.finish();
    let report = ReadReport { usage: usage_of(&connector, &streams), streams, elapsed: started.elapsed() };
    out.log(if report.ok() { "INFO" } else { "ERROR" }, &report.summary_line()).await?;
    Ok(report)
}

/// The recording a run's HTTP is replayed from, if any (blocking I/O, off the workers).
pub(crate) async fn load_recording(uri: Option<String>) -> Result<Option<Arc<Cassette>>, RunError> {
    let Some(uri) = uri else { return Ok(None) };
    let cassette = tokio::task::spawn_blocking(move || Cassette::load(&uri))
        .await
        .map_err(|e| RunError::system(format!("cannot load the HTTP recording: {e}")))?
        .map_err(|e| RunError::config(format!("cannot load the HTTP recording: {e:#}")))?;
    Ok(Some(Arc::new(cassette)))
}
