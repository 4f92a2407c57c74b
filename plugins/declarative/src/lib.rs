//! The declarative engine: a Sluice connector that runs an Airbyte low-code manifest (the
//! `declarative_component_schema` format that `source-declarative-manifest` runs).
//!
//! The manifest arrives in the config under `__injected_declarative_manifest` (the host puts it
//! there for `host run manifest.yaml`). It is loaded once per instance ([`engine::for_config`])
//! and runs sandboxed like any plugin: its requests go through the host's HTTP (egress grants,
//! retries, rate limits), its partitions and cursors are the host's, and its report jobs run on
//! the host's orchestrator. `docs/declarative.md` lists what is supported.

pub mod auth;
pub mod config;
pub mod config_check;
pub mod counting;
pub mod custom;
pub mod datetime;
pub mod delegation;
pub mod dependency;
pub mod dpath;
pub mod dynamic;
pub mod engine;
pub mod interpolation;
pub mod jobs;
pub mod manifest;
pub mod normalize;
pub mod pagination_reset;
pub mod partition_fields;
pub mod records;
pub mod requester;
pub mod retrieve;
pub mod schema;
pub mod slicing;
pub mod state;
pub mod xml;

use engine::{Engine, Scope, kind};
use serde_json::value::RawValue;
use sluice_guest::{
    AsyncJobs, JobStatus, Page, Partition, PartitionBatch, Result, ResultExt, Source, Stream, Value, json,
};

pub struct Declarative;

fn stream_of(engine: &Engine, node: &Value) -> Result<Stream> {
    let name = node.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let inline = node.get("schema_loader").filter(|l| kind(l) == "InlineSchemaLoader");
    let primary_key = match node.get("primary_key") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::String(s)) if s.is_empty() => Vec::new(),
        Some(Value::String(s)) => vec![vec![s.clone()]],
        Some(Value::Array(keys)) => keys
            .iter()
            .map(|k| match k {
                Value::Array(path) => path.iter().map(engine::plain).collect(),
                other => vec![engine::plain(other)],
            })
            .collect(),
        Some(other) => {
            return Err(sluice_guest::Error::config(format!(
                "stream {name}: primary_key {other} is not a field or a list"
            )));
        }
    };
    let cursor_field = match slicing::Cursor::of(engine, node)? {
        Some(cursor) => Some(vec![cursor.field]),
        None => counting::Counter::of(engine, node)?.map(|c| vec![c.field]),
    };
    let json_schema = match inline {
        Some(loader) => loader.get("schema").cloned().unwrap_or_else(|| json!({})),
        // Read from the API, as the CDK reads it at discover.
        None if node
            .get("schema_loader")
            .is_some_and(|l| kind(l) == "DynamicSchemaLoader" || custom::is_custom_node(l)) =>
        {
            schema::of(engine, node, &name)?.unwrap_or_else(|| json!({}))
        }
        // Without a schema the records are taken as they come; the fields the stream is keyed
        // and ordered by are named, so a catalog can point at them.
        None => {
            let mut properties = serde_json::Map::new();
            for path in primary_key.iter().chain(cursor_field.iter()) {
                if let Some(top) = path.first() {
                    properties.insert(top.clone(), json!({}));
                }
            }
            json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "additionalProperties": true, "properties": properties})
        }
    };
    Ok(Stream { name, json_schema, primary_key, cursor_field })
}

/// The config as the host sent it: the engine keeps what it built from it between calls, so the
/// text is only hashed, and parsed once per instance (see [`engine::for_config`]).
pub struct ConfigText(String);

impl<'de> serde::Deserialize<'de> for ConfigText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let raw = Box::<RawValue>::deserialize(d)?;
        Ok(ConfigText(raw.get().to_string()))
    }
}

impl Source for Declarative {
    type Config = ConfigText;

    fn parse_config(text: &str) -> Result<ConfigText> {
        Ok(ConfigText(text.to_string()))
    }

    /// Without its manifest the engine knows no config but the manifest itself; `host spec
    /// manifest.yaml` gives the manifest's own spec.
    fn spec() -> Value {
        json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "title": "Sluice declarative manifest engine",
            "type": "object",
            "required": [engine::MANIFEST_KEY],
            "additionalProperties": true,
            "properties": {
                engine::MANIFEST_KEY: {"type": "object", "description": "The manifest (a DeclarativeSource), as source-declarative-manifest takes it"}
            }
        })
    }

    /// Every requester's base URL (and token endpoints) rendered with the config; the operator
    /// must grant them too.
    fn hosts(config: &Self::Config) -> Result<Vec<String>> {
        let engine = engine::for_config(&config.0)?;
        // From the manifest as loaded (no request is made before the hosts are granted): the
        // streams an API lists are its resolvers' and their template's requesters.
        let manifest = engine.loaded();
        let mut hosts = Vec::new();
        collect_hosts(&engine, &manifest.root, &mut hosts);
        for delegating in &manifest.delegating {
            collect_hosts(&engine, &delegating.full_refresh, &mut hosts);
        }
        for deferred in &manifest.deferred {
            collect_hosts(&engine, &deferred.resolver, &mut hosts);
            collect_hosts(&engine, &deferred.template, &mut hosts);
        }
        hosts.sort();
        hosts.dedup();
        Ok(hosts)
    }

    fn check(config: &Self::Config) -> Result<()> {
        let engine = engine::for_config(&config.0)?;
        let check = engine.loaded().root.get("check").cloned().unwrap_or(Value::Null);
        // The CDK checks the streams each names by its definition's `name`; the manifests seen
        // carry an empty list. Refused rather than a check that passes without reading them.
        if check.get("dynamic_streams_check_configs").and_then(Value::as_array).is_some_and(|c| !c.is_empty()) {
            return Err(sluice_guest::Error::config(
                "the manifest: check.dynamic_streams_check_configs: checking dynamic streams by their definition's name is not supported; use CheckDynamicStream or name the streams in stream_names",
            ));
        }
        let names: Vec<String> = match (kind(&check), check.get("stream_names")) {
            (_, Some(Value::Array(names))) => names.iter().map(engine::plain).collect(),
            // The first `stream_count` streams, the manifest's own then the dynamic ones.
            ("CheckDynamicStream", _) => {
                let count = check.get("stream_count").and_then(Value::as_u64).unwrap_or(0) as usize;
                let streams = engine.manifest()?.streams();
                if streams.is_empty() {
                    return Err(sluice_guest::Error::config("No streams to connect to from the source"));
                }
                if check.get("use_check_availability") == Some(&Value::Bool(false)) {
                    return Ok(());
                }
                streams
                    .iter()
                    .take(count)
                    .filter_map(|s| s.get("name").and_then(Value::as_str))
                    .map(str::to_string)
                    .collect()
            }
            _ => Vec::new(),
        };
        for name in names {
            let stream = engine.stream(&name)?;
            if jobs::is_async(stream) {
                continue;
            }
            let partitions = slicing::partitions(&engine, &name, None).context(format!("check stream {name}"))?;
            if let Some(first) = partitions.first() {
                retrieve::read_page(&engine, first, None).context(format!("check stream {name}"))?;
            }
        }
        Ok(())
    }

    fn streams(config: &Self::Config) -> Result<Vec<Stream>> {
        let engine = engine::for_config(&config.0)?;
        // `host manifests check` has no config and no network: the streams an API lists are
        // said, not read.
        let manifest = match engine.is_reach_check() {
            true => {
                for deferred in &engine.loaded().deferred {
                    sluice_guest::log::info(format!(
                        "the manifest: dynamic_streams[{}] lists its streams from the API when a sync runs",
                        deferred.index
                    ));
                }
                engine.loaded()
            }
            false => engine.manifest()?,
        };
        for ignored in &manifest.ignored {
            sluice_guest::log::warn(format!("the manifest: {ignored}"));
        }
        let mut streams = Vec::new();
        for node in manifest.streams() {
            let name = node.get("name").and_then(Value::as_str).unwrap_or_default();
            streams.push(match manifest.delegating(name) {
                // Discovered as the CDK discovers it, with no state: the full-refresh stream, whose
                // cursor is the incremental one's when it has none of its own.
                Some(delegating) => {
                    let mut stream = stream_of(&engine, &delegating.full_refresh)?;
                    if stream.cursor_field.is_none() {
                        stream.cursor_field = stream_of(&engine, node)?.cursor_field;
                    }
                    stream
                }
                None => stream_of(&engine, node)?,
            });
        }
        // A refused stream is discovered (a catalog may name it) and fails alone when read.
        for (name, node, why) in &manifest.refused {
            sluice_guest::log::warn(format!("the manifest: stream {name} cannot be read: {why}"));
            let schema = node
                .get("schema_loader")
                .or_else(|| node.get("full_refresh_stream").and_then(|s| s.get("schema_loader")))
                .filter(|l| kind(l) == "InlineSchemaLoader")
                .and_then(|l| l.get("schema"))
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "additionalProperties": true}));
            streams.push(Stream {
                name: name.clone(),
                json_schema: schema,
                primary_key: Vec::new(),
                cursor_field: None,
            });
        }
        Ok(streams)
    }

    fn partition_batch(
        config: &Self::Config,
        stream: &str,
        state: Option<&Value>,
        _: Option<Value>,
    ) -> Result<PartitionBatch> {
        let engine = engine::for_config(&config.0)?;
        Ok(PartitionBatch::new(slicing::partitions(&engine, stream, state)?))
    }

    fn read_page(config: &Self::Config, partition: &Partition, token: Option<Value>) -> Result<Page> {
        let engine = engine::for_read(&config.0)?;
        let mut page = retrieve::read_page(&engine, partition, token)?;
        records::omit_top_level_nulls(&mut page.records);
        Ok(page)
    }

    /// The config fields the manifest's templates read outside the listing, and the manifest.
    fn partition_config_fields(config: &Self::Config) -> Option<Vec<String>> {
        let engine = engine::for_config(&config.0).ok()?;
        partition_fields::of(engine.source(), &[engine::MANIFEST_KEY])
    }

    /// Every incremental stream's state is written as the Airbyte CDK writes it.
    fn shaped_streams(config: &Self::Config) -> Result<Vec<String>> {
        state::shaped_streams(&*engine::for_config(&config.0)?)
    }

    fn state_to_host(config: &Self::Config, stream: &str, saved: &Value) -> Result<Option<Value>> {
        state::to_host(&*engine::for_read(&config.0)?, stream, saved)
    }

    fn state_from_host(config: &Self::Config, stream: &str, host: &Value) -> Result<Value> {
        state::from_host(&*engine::for_read(&config.0)?, stream, host)
    }

    /// Offsets and page numbers stay valid across runs; cursors an API hands out may not.
    fn resumable_streams(config: &Self::Config) -> Result<Vec<String>> {
        let engine = engine::for_config(&config.0)?;
        let manifest = engine.manifest()?;
        Ok(manifest
            .streams()
            .iter()
            .filter(|s| {
                let name = s.get("name").and_then(Value::as_str).unwrap_or_default();
                let full_refresh = manifest.delegating(name).map(|d| &d.full_refresh);
                std::iter::once(*s).chain(full_refresh).all(|s| {
                    let p = &s["retriever"]["paginator"];
                    let strategy = kind(&p["pagination_strategy"]);
                    kind(&s["retriever"]) == "SimpleRetriever"
                        && (p.is_null()
                            || kind(p) == "NoPagination"
                            || matches!(strategy, "OffsetIncrement" | "PageIncrement"))
                })
            })
            .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
            .collect())
    }
}

fn collect_hosts(engine: &Engine, node: &Value, out: &mut Vec<String>) {
    match node {
        Value::Object(map) => {
            let ctx = engine.context(node, &Scope::default(), Vec::new());
            let urls: &[&str] = match kind(node) {
                "HttpRequester" => &["url_base", "url"],
                "OAuthAuthenticator" => &["token_refresh_endpoint"],
                _ => &[],
            };
            for field in urls {
                if let Ok(url) = engine.text(node.get(*field), &ctx)
                    && let Ok(host) = sluice_guest::http::host_port(&url)
                {
                    out.push(host);
                }
            }
            for (k, v) in map {
                if !matches!(k.as_str(), "schema" | "connection_specification" | "definitions" | "schemas" | "metadata")
                {
                    collect_hosts(engine, v, out);
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| collect_hosts(engine, v, out)),
        _ => {}
    }
}

impl AsyncJobs for Declarative {
    fn job_streams(config: &Self::Config) -> Result<Vec<String>> {
        let engine = engine::for_config(&config.0)?;
        Ok(engine
            .manifest()?
            .streams()
            .iter()
            .filter(|s| jobs::is_async(s))
            .filter_map(|s| s.get("name").and_then(Value::as_str).map(str::to_string))
            .collect())
    }

    fn max_jobs(config: &Self::Config) -> u32 {
        engine::for_config(&config.0).map(|e| jobs::max_jobs(&e)).unwrap_or(1)
    }

    fn create_job(config: &Self::Config, partition: &Partition) -> Result<Value> {
        jobs::create_job(&*engine::for_read(&config.0)?, partition)
    }

    fn poll_job(config: &Self::Config, job: &Value) -> Result<JobStatus> {
        jobs::poll_job(&*engine::for_read(&config.0)?, job)
    }

    fn read_result(config: &Self::Config, job: &Value, download: &Value, token: Option<Value>) -> Result<Page> {
        let mut page = jobs::read_result(&*engine::for_read(&config.0)?, job, download, token)?;
        records::omit_top_level_nulls(&mut page.records);
        Ok(page)
    }

    fn abort_job(config: &Self::Config, job: &Value) -> Result<()> {
        jobs::end_job(&*engine::for_read(&config.0)?, job, true)
    }

    fn delete_job(config: &Self::Config, job: &Value) -> Result<()> {
        jobs::end_job(&*engine::for_read(&config.0)?, job, false)
    }
}

// Exported in the component only: on the host the crate is built for its unit tests, and a
// native shared library cannot carry the component's export names.
#[cfg(target_arch = "wasm32")]
sluice_guest::export_async_source!(Declarative);
