//! `host test`: the conformance kit. Standard checks any connector can run against its own API,
//! reported readably (or as JSON), each failure saying what and where:
//!
//! - `spec`: the spec is a valid JSON Schema and the config validates against it;
//! - `check`: succeeds with the given config; `check-broken`: fails cleanly, with a config
//!   error, for configs the spec rejects (a required field removed, a field of the wrong type);
//! - `discover`: streams with unique names, valid JSON Schemas and primary keys;
//! - per stream, `partitions`: two listings give the same partitions, each key once;
//!   `read`: a full read ends, and every record validates against the stream's schema, carries
//!   its primary key (once per stream), its cursor field, and lies in its partition's cursor
//!   range; `pagination`: every partition ends, no page token repeats;
//!   `incremental` (streams with a cursor): a read from the full read's final state emits
//!   nothing older than that state.

mod reading;
mod report;

use crate::bindings::{Partition, Stream};
use crate::data::protocol::{Format, Output, preview};
use crate::data::secrets::Secrets;
use crate::data::state::{self, StreamCursor};
use crate::guest::connector::{CallError, Connector};
use crate::net::HttpOptions;
use crate::run::policy::Policy;
use crate::run::runtime::Runtime;
use jsonschema::Validator;
use reading::{Listing, Place, Problem, Visitor, describe, partition_label};
use report::Check;
use serde_json::{Map, Value, json};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use report::{CheckResult, Report};

/// What the kit tests: a plugin with a config, under a policy.
pub struct TestRequest {
    pub plugin: PathBuf,
    pub config: Value,
    pub policy: Policy,
    /// Where the policy came from (named in what the host says while opening the connector).
    pub policy_source: crate::run::policy::PolicySource,
    pub http: HttpOptions,
    /// Answer HTTP from the recording of a kept run instead of the network.
    pub http_replay: Option<String>,
    /// Check only these streams (all when `None`).
    pub streams: Option<Vec<String>>,
    /// Pages a partition may take before its pagination counts as endless.
    pub max_pages: u64,
}

/// The report of a kit that could not even load the plugin or read its config.
pub fn cannot_start(plugin: &Path, message: String) -> Report {
    let mut report = Report { plugin: plugin.display().to_string(), ..Report::default() };
    let mut check = Check::new("load", None);
    check.fail("opening the connector", message);
    report.push(check.finish("the connector cannot be started with this config"));
    report
}

/// A sink that keeps what the host said while opening the connector.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs the kit on a plugin loaded through `runtime`; the report says what passed and failed.
pub async fn test(runtime: &Runtime, request: TestRequest) -> Report {
    let mut report = Report { plugin: request.plugin.display().to_string(), ..Report::default() };

    // Open the connector exactly as `check` and `discover` do; keep what the host said.
    let captured = Captured::default();
    let (quiet, writer) = Output::spawn(Format::Airbyte, Box::new(captured.clone()));
    let opened = runtime
        .open(
            &request.plugin,
            request.config.to_string(),
            &request.policy,
            &request.policy_source,
            request.http,
            request.http_replay,
            &quiet,
        )
        .await
        .map_err(|e| quiet.secrets.mask_text(&e.message));
    report.secrets = quiet.secrets.clone();
    drop(quiet);
    let _ = writer.finish();
    let said = String::from_utf8_lossy(&captured.0.lock().unwrap_or_else(|e| e.into_inner())).into_owned();
    for line in said.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()) {
        if let Some(message) = line.pointer("/log/message").and_then(Value::as_str) {
            report.notes.push(message.to_string());
        }
    }
    let connector = match opened {
        Ok(c) => c,
        Err(message) => {
            let mut check = Check::new("load", None);
            check.fail("opening the connector", message);
            report.push(check.finish("the connector cannot be started with this config"));
            return report;
        }
    };
    let config: Value = serde_json::from_str(&connector.config).unwrap_or(Value::Null);
    narrow_partition_config(&connector, &mut report).await;

    let secrets = report.secrets.clone();
    let spec = check_spec(&connector, &config, &secrets, &mut report).await;
    report.push(check_config(&connector).await);
    report.push(check_broken_configs(&connector, spec.as_ref(), &config).await);
    let streams = check_discover(&connector, request.streams.as_deref(), &mut report).await;
    for stream in &streams {
        check_stream(&connector, stream, request.max_pages, &mut report).await;
    }
    report
}

/// Partitions are read as a run reads them: with only the config fields the connector names
/// (contract 0.1.7), so a connector that names too few fails its reading checks here.
async fn narrow_partition_config(connector: &Connector, report: &mut Report) {
    if connector.plugin.partition_config.is_none() {
        return;
    }
    let fields = match connector.instance().await {
        Ok(mut instance) => instance.partition_fields(&connector.config).await,
        Err(e) => Err(e),
    };
    match fields {
        Ok(Some(fields)) => {
            let left_out = connector.narrow_partition_config(&fields);
            if !left_out.is_empty() {
                report.notes.push(crate::run::asked::left_out_said(&left_out));
            }
        }
        Ok(None) => {}
        Err(e) => {
            report.notes.push(format!("partition-fields failed ({}): partitions get the whole config", describe(&e)))
        }
    }
}

/// A discovered stream and what the checks need of it.
struct StreamUnderTest {
    stream: Stream,
    validator: Option<Validator>,
}

async fn check_spec(connector: &Connector, config: &Value, secrets: &Secrets, report: &mut Report) -> Option<Value> {
    let mut check = Check::new("spec", None);
    let spec = match connector.instance().await {
        Ok(mut instance) => instance.spec().await,
        Err(e) => Err(e),
    };
    let spec = match spec {
        Ok(text) => text,
        Err(e) => {
            check.fail("spec", describe(&e));
            report.push(check.finish("the connector cannot give its spec"));
            return None;
        }
    };
    let spec: Value = match serde_json::from_str(&spec) {
        Ok(v) => v,
        Err(e) => {
            check.fail("spec", format!("not valid JSON ({e}): {}", preview(&spec)));
            report.push(check.finish("the spec is not JSON"));
            return None;
        }
    };
    secrets.set_from(&spec, config);
    let Some(validator) = schema_validator(&spec, "spec", &mut check) else {
        report.push(check.finish("the spec is not a valid JSON Schema"));
        return Some(spec);
    };
    for error in validator.iter_errors(config) {
        check.fail(format!("config{}", pointer(&error.instance_path().to_string())), error.to_string());
    }
    let summary = if check.failed() {
        "the config does not validate against the spec"
    } else {
        "a valid JSON Schema, and the config validates against it"
    };
    report.push(check.finish(summary));
    Some(spec)
}

/// Compiles a schema, recording why it is not a valid JSON Schema.
fn schema_validator(schema: &Value, what: &str, check: &mut Check) -> Option<Validator> {
    if !schema.is_object() {
        check.fail(what, format!("a JSON Schema must be an object, got {}", preview(&schema.to_string())));
        return None;
    }
    if let Err(why) = crate::data::schema::check_bounds(schema) {
        check.fail(what, format!("not a usable JSON Schema: {why}"));
        return None;
    }
    if let Err(error) = jsonschema::meta::validate(schema) {
        check.fail(
            format!("{what}{}", pointer(&error.instance_path().to_string())),
            format!("not a valid JSON Schema: {error}"),
        );
        return None;
    }
    match crate::data::schema::validator(schema, false) {
        Ok(v) => Some(v),
        Err(error) => {
            check.fail(what, format!("not a usable JSON Schema: {error}"));
            None
        }
    }
}

/// A JSON pointer as a location suffix (` at /a/b`), nothing for the root.
fn pointer(path: &str) -> String {
    if path.is_empty() { String::new() } else { format!(" at {path}") }
}

async fn check_config(connector: &Connector) -> CheckResult {
    let mut check = Check::new("check", None);
    let result = match connector.instance().await {
        Ok(mut instance) => instance.check(&connector.config).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => check.finish("succeeds with the given config"),
        Err(e) => {
            check.fail("check with the given config", describe(&e));
            check.finish("fails with the given config")
        }
    }
}

/// Configs the spec rejects, derived from the given one: each required field removed, and a
/// few fields given a value of the wrong type.
fn broken_configs(spec: &Value, config: &Value) -> Vec<(String, Value)> {
    let Some(base) = config.as_object() else { return Vec::new() };
    let mut variants = Vec::new();
    for name in spec.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        let mut broken = base.clone();
        if broken.remove(name).is_some() {
            variants.push((format!("without `{name}`"), Value::Object(broken)));
        }
    }
    let properties = spec.get("properties").and_then(Value::as_object).map(Map::iter).into_iter().flatten();
    let mut typed = 0;
    for (name, schema) in properties {
        let wrong = match schema.get("type").and_then(Value::as_str) {
            Some("string") => json!(12345),
            Some("integer" | "number") => json!("not a number"),
            Some("boolean") => json!("not a boolean"),
            Some("object" | "array") => json!(12345),
            _ => continue,
        };
        let mut broken = base.clone();
        broken.insert(name.clone(), wrong.clone());
        variants.push((format!("`{name}` set to {wrong}"), Value::Object(broken)));
        typed += 1;
        if typed == 3 {
            break;
        }
    }
    variants
}

async fn check_broken_configs(connector: &Connector, spec: Option<&Value>, config: &Value) -> CheckResult {
    let mut check = Check::new("check-broken", None);
    let Some(spec) = spec else { return check.skip("no spec to derive broken configs from") };
    let validator = crate::data::schema::validator(spec, false).ok();
    // Only configs the spec itself rejects count as broken.
    let variants: Vec<(String, Value)> = broken_configs(spec, config)
        .into_iter()
        .filter(|(_, v)| validator.as_ref().is_none_or(|val| !val.is_valid(v)))
        .collect();
    if variants.is_empty() {
        return check.skip("the spec has no required or typed field to break");
    }
    for (what, broken) in &variants {
        let text = broken.to_string();
        let result = match connector.instance().await {
            Ok(mut instance) => instance.check(&text).await,
            Err(e) => Err(e),
        };
        let location = format!("check with a broken config ({what})");
        match result {
            Ok(()) => check.fail(location, "succeeded: it should fail with a config error"),
            Err(e @ CallError::Trap(_)) => {
                check.fail(location, format!("crashed instead of failing cleanly: {}", e.message()))
            }
            Err(e) if e.failure_type() != crate::data::protocol::FailureType::Config => check.fail(
                location,
                format!("failed with a {}, not a config error: {}", e.failure_type().as_str(), e.message()),
            ),
            Err(e) => check.detail(format!("{what}: {}", e.message())),
        }
    }
    let n = variants.len();
    check.fact("broken_configs", n);
    if check.failed() {
        let bad = check.failure_count();
        check.finish(format!("{bad} of {n} broken configs were not refused with a config error"))
    } else {
        check.finish(format!("{n} broken configs, each refused with a config error"))
    }
}

async fn check_discover(connector: &Connector, only: Option<&[String]>, report: &mut Report) -> Vec<StreamUnderTest> {
    let mut check = Check::new("discover", None);
    let result = match connector.instance().await {
        Ok(mut instance) => instance.discover(&connector.config).await,
        Err(e) => Err(e),
    };
    let streams = match result {
        Ok(s) => s,
        Err(e) => {
            check.fail("discover", describe(&e));
            report.push(check.finish("discover fails"));
            return Vec::new();
        }
    };
    if streams.is_empty() {
        check.fail("discover", "no streams");
    }
    let mut names = HashSet::new();
    let mut found = Vec::new();
    for stream in streams {
        let name = stream.name.clone();
        let at = format!("stream {name}");
        if name.is_empty() {
            check.fail("discover", "a stream has an empty name");
        }
        if !names.insert(name.clone()) {
            check.fail(&at, "the stream is offered twice");
            continue;
        }
        let schema = match serde_json::from_str::<Value>(&stream.json_schema) {
            Ok(s) => Some(s),
            Err(e) => {
                check.fail(&at, format!("the schema is not valid JSON ({e}): {}", preview(&stream.json_schema)));
                None
            }
        };
        let validator = schema.as_ref().and_then(|s| schema_validator(s, &format!("{at}, schema"), &mut check));
        if stream.primary_key.is_empty() {
            check.fail(&at, "no primary key");
        }
        let paths = stream
            .primary_key
            .iter()
            .map(|p| ("primary key", p))
            .chain(stream.cursor_field.iter().map(|p| ("cursor field", p)));
        for (what, path) in paths {
            if path.is_empty() || path.iter().any(String::is_empty) {
                check.fail(&at, format!("the {what} has an empty path: {path:?}"));
            } else if let Some(schema) = &schema
                && !declared(schema, path)
            {
                check.fail(&at, format!("the {what} `{}` is not a property of the schema", path.join(".")));
            }
        }
        found.push(StreamUnderTest { stream, validator });
    }
    if let Some(only) = only {
        for name in only {
            if !found.iter().any(|s| &s.stream.name == name) {
                check.fail("--streams", format!("the connector has no stream {name:?}"));
            }
        }
        found.retain(|s| only.contains(&s.stream.name));
    }
    let summary = if check.failed() {
        "streams are missing, or their schemas or keys are invalid".to_string()
    } else {
        format!("{} stream(s), each with a valid JSON Schema and a primary key", names.len())
    };
    report.push(check.finish(summary));
    found
}

/// Whether a schema declares the field at `path` (walking `properties`). A schema that lists
/// no properties at some level allows anything there.
fn declared(schema: &Value, path: &[String]) -> bool {
    let mut at = schema;
    for part in path {
        match at.get("properties").and_then(Value::as_object) {
            Some(props) => match props.get(part) {
                Some(next) => at = next,
                None => return false,
            },
            None => return true,
        }
    }
    true
}

async fn check_stream(connector: &Connector, under: &StreamUnderTest, max_pages: u64, report: &mut Report) {
    let name = under.stream.name.as_str();

    // Partitions: two listings, compared.
    let mut check = Check::new("partitions", Some(name));
    let first = reading::list(connector, name, None).await;
    let second = reading::list(connector, name, None).await;
    let listing = match (first, second) {
        (Ok(a), Ok(b)) => {
            compare_listings(name, &a, &b, &mut check);
            check.fact("partitions", a.partitions.len());
            let summary = if check.failed() {
                "two listings of the partitions differ, or a key repeats".to_string()
            } else {
                format!("deterministic: {} partition(s), the same in two listings", a.partitions.len())
            };
            report.push(check.finish(summary));
            a
        }
        (Err(e), _) | (_, Err(e)) => {
            check.fail(format!("stream {name}, listing partitions"), e);
            report.push(check.finish("the partitions cannot be listed"));
            for what in ["read", "pagination", "incremental"] {
                report.push(Check::new(what, Some(name)).skip("the partitions cannot be listed"));
            }
            return;
        }
    };

    // A full read: incremental from no state where the stream has a cursor, so that it ends
    // with the state the next check starts from.
    let cursor = match &under.stream.cursor_field {
        Some(field) => match StreamCursor::new(name, field.clone(), None) {
            Ok(c) => Some(c),
            Err(e) => {
                report.push(Check::new("read", Some(name)).skip(format!("no cursor state: {e:#}")));
                None
            }
        },
        None => None,
    };
    let mut full = FullRead::new(under);
    let state = reading::read_stream(connector, name, listing.partitions.clone(), cursor, max_pages, &mut full).await;
    let (read, pagination) = full.finish();
    report.push(read);
    report.push(pagination);

    if let Some(field) = &under.stream.cursor_field {
        report.push(check_incremental(connector, name, field, state, max_pages).await);
    }
}

fn compare_listings(name: &str, a: &Listing, b: &Listing, check: &mut Check) {
    // A partition as the report shows it: its key, and its cursor range when it has one.
    let identity = |p: &Partition| {
        let key: Value = serde_json::from_str(&p.key).unwrap_or(Value::Null);
        let show = |v: &Option<crate::bindings::CursorValue>| {
            v.as_ref().map(|v| crate::run::read::cursor_to_json(v).to_string()).unwrap_or_else(|| "none".into())
        };
        match &p.cursor_range {
            Some(r) => format!("{} with cursor range ({}, {}]", canonical(&key), show(&r.start), show(&r.end)),
            None => canonical(&key),
        }
    };
    let mut counts: HashMap<String, i64> = HashMap::new();
    let mut keys = HashSet::new();
    for p in &a.partitions {
        *counts.entry(identity(p)).or_default() += 1;
        let key: Value = serde_json::from_str(&p.key).unwrap_or(Value::Null);
        if !keys.insert(canonical(&key)) {
            check.fail(
                partition_label(name, p),
                "the key is listed twice: state is kept by key, so keys must be unique",
            );
        }
    }
    for p in &b.partitions {
        *counts.entry(identity(p)).or_default() -= 1;
    }
    let mut differences: Vec<(&String, &i64)> = counts.iter().filter(|(_, n)| **n != 0).collect();
    differences.sort();
    for (partition, n) in differences {
        let (from, not) = if *n > 0 { ("first", "second") } else { ("second", "first") };
        check.fail(
            format!("stream {name}"),
            format!("the {from} listing has partition {partition}, the {not} does not"),
        );
    }
    if a.partitions.len() != b.partitions.len() {
        check.fail(
            format!("stream {name}"),
            format!("the first listing has {} partitions, the second {}", a.partitions.len(), b.partitions.len()),
        );
    }
}

/// JSON text with object keys sorted, to compare values whatever their key order.
fn canonical(value: &Value) -> String {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(k, _)| *k);
            let inner: Vec<String> =
                entries.iter().map(|(k, v)| format!("{}:{}", Value::from(k.as_str()), canonical(v))).collect();
            format!("{{{}}}", inner.join(","))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(canonical).collect::<Vec<_>>().join(",")),
        other => other.to_string(),
    }
}

/// The checks of a full read: records (`read`) and pagination.
struct FullRead<'a> {
    under: &'a StreamUnderTest,
    read: Check,
    pagination: Check,
    records: u64,
    bad_records: u64,
    partitions: u64,
    pages: u64,
    keys: HashSet<String>,
}

impl<'a> FullRead<'a> {
    fn new(under: &'a StreamUnderTest) -> Self {
        let name = under.stream.name.as_str();
        FullRead {
            under,
            read: Check::new("read", Some(name)),
            pagination: Check::new("pagination", Some(name)),
            records: 0,
            bad_records: 0,
            partitions: 0,
            pages: 0,
            keys: HashSet::new(),
        }
    }

    fn finish(mut self) -> (CheckResult, CheckResult) {
        let (records, partitions, pages) = (self.records, self.partitions, self.pages);
        self.read.fact("records", records);
        self.read.fact("partitions", partitions);
        self.pagination.fact("partitions", partitions);
        self.pagination.fact("pages", pages);
        let read = if self.read.failed() {
            let bad = self.bad_records;
            self.read.finish(format!("{bad} of {records} records are invalid, or partitions failed"))
        } else {
            let what = if self.under.validator.is_some() {
                "valid against the schema"
            } else {
                "unvalidated (no usable schema)"
            };
            self.read.finish(format!(
                "{records} records in {partitions} partition(s), each {what}, with its primary key, once"
            ))
        };
        let pagination = if self.pagination.failed() {
            self.pagination.finish("a partition's pagination does not end")
        } else {
            self.pagination
                .finish(format!("{partitions} partition(s) ended after {pages} page(s) in all; no token repeated"))
        };
        (read, pagination)
    }
}

impl Visitor for FullRead<'_> {
    fn record(&mut self, place: &Place, record: &Value, _start: Option<&Value>) {
        self.records += 1;
        let before = self.read.failure_count();
        let stream = &self.under.stream;
        if let Some(validator) = &self.under.validator {
            for error in validator.iter_errors(record).take(3) {
                let at = pointer(&error.instance_path().to_string());
                self.read.fail(format!("{}{at}", place.record_text()), format!("violates the schema: {error}"));
            }
        }
        let mut key = Vec::new();
        for path in &stream.primary_key {
            match lookup(record, path) {
                Some(v) if !v.is_null() => key.push(v.clone()),
                _ => self.read.fail(place.record_text(), format!("the primary key `{}` is missing", path.join("."))),
            }
        }
        if key.len() == stream.primary_key.len() && !key.is_empty() {
            let key = canonical(&Value::Array(key));
            if !self.keys.insert(key.clone()) {
                self.read.fail(place.record_text(), format!("primary key {key} was already read in this stream"));
            }
        }
        if let Some(field) = &stream.cursor_field {
            match state::cursor_of(record, field) {
                None => self.read.fail(
                    place.record_text(),
                    format!("the cursor field `{}` is missing (or not a number or string)", field.join(".")),
                ),
                Some(value) => {
                    if let Some(range) = &place.partition.cursor_range
                        && let Some(end) = &range.end
                    {
                        let end = crate::run::read::cursor_to_json(end);
                        let start = range.start.as_ref().map(crate::run::read::cursor_to_json);
                        let after_end = state::compare(&value, &end).is_gt();
                        let not_after_start = start.as_ref().is_some_and(|s| !state::compare(&value, s).is_gt());
                        if after_end || not_after_start {
                            let shown = start.map(|s| s.to_string()).unwrap_or_else(|| "the beginning".into());
                            self.read.fail(
                                place.record_text(),
                                format!("cursor {value} lies outside the partition's range ({shown}, {end}]"),
                            );
                        }
                    }
                }
            }
        }
        if self.read.failure_count() > before {
            self.bad_records += 1;
        }
    }

    fn partition_done(&mut self, partition: &Partition, pages: u64, problem: Option<(u64, Problem)>) {
        self.partitions += 1;
        self.pages += pages;
        let name = &self.under.stream.name;
        match problem {
            None => {}
            Some((page, Problem::Read(message))) => {
                self.read.fail(format!("{}, page {page}", partition_label(name, partition)), message)
            }
            Some((page, Problem::Pagination(message))) => {
                self.pagination.fail(format!("{}, page {page}", partition_label(name, partition)), message)
            }
        }
    }
}

fn lookup<'v>(record: &'v Value, path: &[String]) -> Option<&'v Value> {
    path.iter().try_fold(record, |v, part| v.get(part))
}

async fn check_incremental(
    connector: &Connector,
    name: &str,
    field: &[String],
    state: Option<Value>,
    max_pages: u64,
) -> CheckResult {
    let mut check = Check::new("incremental", Some(name));
    let Some(state) = state else { return check.skip("the full read kept no state") };
    let cursor = match StreamCursor::new(name, field.to_vec(), Some(&state)) {
        Ok(c) => c,
        Err(e) => {
            check.fail(format!("stream {name}"), format!("the final state cannot be read back: {e:#}"));
            return check.finish("the final state is unusable");
        }
    };
    // The listing is asked again with the state, as a run would.
    let partitions = match reading::list(connector, name, Some(&state)).await {
        Ok(listing) => listing.partitions,
        Err(e) => {
            check.fail(format!("stream {name}, listing partitions with the final state"), e);
            return check.finish("the partitions cannot be listed with the final state");
        }
    };
    let mut visitor = Incremental { check, field, records: 0, older: 0, partitions: 0, skipped: 0 };
    reading::read_stream(connector, name, partitions, Some(cursor), max_pages, &mut visitor).await;
    let Incremental { mut check, records, older, partitions, skipped, .. } = visitor;
    check.fact("records", records);
    check.fact("partitions", partitions);
    check.fact("skipped_partitions", skipped);
    check.detail(format!("state: {}", preview(&state.to_string())));
    let done = if skipped > 0 { format!(", {skipped} skipped as finished") } else { String::new() };
    if check.failed() {
        check.finish(format!("from the final state: {older} of {records} records are older than the state"))
    } else {
        check.finish(format!(
            "from the final state: {records} record(s) in {partitions} partition(s){done}, none older than the state"
        ))
    }
}

/// Checks a read from saved state: nothing before where the state says each partition starts.
struct Incremental<'a> {
    check: Check,
    field: &'a [String],
    records: u64,
    older: u64,
    partitions: u64,
    skipped: u64,
}

impl Visitor for Incremental<'_> {
    fn record(&mut self, place: &Place, record: &Value, start: Option<&Value>) {
        self.records += 1;
        let (Some(start), Some(value)) = (start, state::cursor_of(record, self.field)) else { return };
        if state::compare(&value, start).is_lt() {
            self.older += 1;
            self.check.fail(
                place.record_text(),
                format!(
                    "`{}` {value} is older than the state's cursor {start}: the connector ignores the cursor range it is given",
                    self.field.join(".")
                ),
            );
        }
    }

    fn partition_done(&mut self, partition: &Partition, _pages: u64, problem: Option<(u64, Problem)>) {
        self.partitions += 1;
        if let Some((page, Problem::Read(message) | Problem::Pagination(message))) = problem {
            self.check.fail(format!("{}, page {page}", partition_label(&partition.stream, partition)), message);
        }
    }

    fn skipped(&mut self, _partition: &Partition) {
        self.skipped += 1;
    }
}
