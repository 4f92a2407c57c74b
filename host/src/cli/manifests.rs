//! `host manifests check DIR`: the reach of the declarative engine over a folder of manifests
//! (Airbyte's connectors folder, say), before anyone commits to it. Each manifest is loaded as a
//! run would load it and its streams discovered without the operator's config (one made of the
//! spec's defaults and examples): a line per manifest says
//! whether every stream can be read, which streams cannot and why, or why the manifest cannot.

use crate::data::protocol::{Format, Output};
use crate::guest::connector::Connector;
use crate::guest::limits::Limits;
use crate::run::runtime::Runtime;
use crate::run::session;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Manifests looked at in one folder tree, and how deep it is walked.
const MAX_MANIFESTS: usize = 10_000;
const MAX_DEPTH: usize = 6;

/// Marks the config a reach check discovers with: the engine reads the manifest without checking
/// the config against its spec (it is made up, see [`sample_config`]). The engine's
/// `engine::REACH_CHECK_KEY` (plugins/declarative) is the same key.
pub const REACH_KEY: &str = "__sluice_reach_check";

/// A config for discovering without one: each top-level field of the manifest's spec that gives
/// a `default`, an example or an `enum` takes the first of them (a stream's `step` may be
/// `"{{ config['step'] }}"`, which renders to nothing without it).
pub fn sample_config(manifest: &Value) -> Value {
    let mut config = Map::new();
    let properties = manifest.pointer("/spec/connection_specification/properties").and_then(Value::as_object);
    for (name, field) in properties.into_iter().flatten() {
        let first = |key: &str| field.get(key).and_then(|v| v.as_array()).and_then(|v| v.first());
        if let Some(value) = field.get("default").or_else(|| first("examples")).or_else(|| first("enum")) {
            config.insert(name.clone(), value.clone());
        }
    }
    config.insert(REACH_KEY.into(), Value::Bool(true));
    Value::Object(config)
}

/// What one manifest came to.
#[derive(Debug)]
pub enum Reach {
    /// Every stream discovered, none refused; `from_api`: the `dynamic_streams` definitions
    /// whose streams the API lists when a sync runs (not counted in `streams`).
    Full { streams: usize, from_api: usize },
    /// Some streams cannot be read: (stream, why).
    Partial { streams: usize, from_api: usize, refused: Vec<(String, String)> },
    /// The manifest cannot be run: why.
    Refused(String),
}

/// The manifests under `dir`: files named `manifest.yaml` (Airbyte's connector folders) and any
/// other `.yaml`/`.yml` whose top level is a DeclarativeSource, in path order.
pub fn find(dir: &Path) -> Vec<PathBuf> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if out.len() >= MAX_MANIFESTS {
                return;
            }
            let meta = match std::fs::symlink_metadata(&path) {
                Ok(meta) => meta,
                Err(_) => continue,
            };
            if meta.is_dir() && depth < MAX_DEPTH {
                walk(&path, depth + 1, out);
            } else if meta.is_file() && crate::guest::manifest::is_manifest(&path) && looks_declarative(&path) {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, 0, &mut out);
    out
}

/// `manifest.yaml`, or a YAML file that says `type: DeclarativeSource` at its top level (a
/// connector folder's metadata.yaml and test configs are not manifests).
fn looks_declarative(path: &Path) -> bool {
    if path.file_name().is_some_and(|n| n == "manifest.yaml") {
        return true;
    }
    use std::io::Read;
    let mut head = String::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(64 << 10).read_to_string(&mut head));
    read.is_ok() && head.lines().any(|l| l.trim_end() == "type: DeclarativeSource")
}

/// Loads the manifest and discovers its streams in the sandboxed engine, with no config and no
/// egress. `quiet` takes the loading's log lines.
pub async fn check(runtime: &Runtime, path: &Path, quiet: &Output) -> Reach {
    let plugin = match runtime.plugin(path, "", quiet).await {
        Ok(plugin) => plugin,
        Err(e) => return Reach::Refused(e.message),
    };
    // A components.py beside it is not refused as such: the engine refuses the streams whose
    // components name one of its classes (`class_name`), and reads the others, as it runs them.
    let egress = match session::no_egress() {
        Ok(egress) => Arc::new(egress),
        Err(e) => return Reach::Refused(e.message),
    };
    let config = match &plugin.manifest {
        Some(manifest) => sample_config(&manifest.json),
        None => return Reach::Refused("it is not a manifest".into()),
    };
    let connector = Connector::new(plugin, config.to_string(), egress, Limits::default());
    let mut instance = match connector.instance().await {
        Ok(instance) => instance,
        Err(e) => return Reach::Refused(e.message()),
    };
    let streams = instance.discover(&connector.config).await;
    let logs = instance.take_logs();
    let refused: Vec<(String, String)> = logs
        .iter()
        .filter_map(|log| {
            let rest = log.message.strip_prefix("the manifest: stream ")?;
            let (name, why) = rest.split_once(" cannot be read: ")?;
            Some((name.to_string(), why.to_string()))
        })
        .collect();
    let from_api = logs
        .iter()
        .filter(|log| log.message.starts_with("the manifest: dynamic_streams[") && log.message.contains("from the API"))
        .count();
    match streams {
        Err(e) => Reach::Refused(e.message()),
        Ok(streams) if refused.is_empty() => Reach::Full { streams: streams.len(), from_api },
        Ok(streams) => Reach::Partial { streams: streams.len(), from_api, refused },
    }
}

/// What a report line adds for streams the API lists.
fn listed(from_api: usize) -> String {
    match from_api {
        0 => String::new(),
        1 => ", plus the streams that 1 dynamic_streams definition lists from the API".to_string(),
        n => format!(", plus the streams that {n} dynamic_streams definitions list from the API"),
    }
}

/// Checks every manifest under `dir`, printing a line each and a summary; the counts of
/// manifests read in full, in part, and refused.
pub async fn report(runtime: &Runtime, dir: &Path, out: &mut impl std::io::Write) -> std::io::Result<[usize; 3]> {
    let manifests = find(dir);
    let mut counts = [0usize; 3];
    let (quiet, _writer) = Output::spawn(Format::Airbyte, Box::new(std::io::sink()));
    for path in &manifests {
        let shown = path.strip_prefix(dir).unwrap_or(path).display().to_string();
        match check(runtime, path, &quiet).await {
            Reach::Full { streams, from_api } => {
                counts[0] += 1;
                writeln!(out, "ok       {shown}: {streams} streams{}", listed(from_api))?;
            }
            Reach::Partial { streams, from_api, refused } => {
                counts[1] += 1;
                let read = streams - refused.len();
                writeln!(out, "partial  {shown}: {read} of {streams} streams{}; cannot read:", listed(from_api))?;
                for (stream, why) in refused {
                    writeln!(out, "           {stream}: {why}")?;
                }
            }
            Reach::Refused(why) => {
                counts[2] += 1;
                writeln!(out, "refused  {shown}: {}", why.lines().next().unwrap_or_default())?;
            }
        }
    }
    let total = manifests.len().max(1) as f64;
    writeln!(
        out,
        "{} manifests: {} read in full ({:.0} %), {} in part, {} refused",
        manifests.len(),
        counts[0],
        100.0 * counts[0] as f64 / total,
        counts[1],
        counts[2]
    )?;
    Ok(counts)
}
