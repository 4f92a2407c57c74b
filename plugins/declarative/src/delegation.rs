//! `StateDelegatingStream` as the CDK 7.39 runs it: one stream name, two streams behind it. A
//! sync without a saved state reads `full_refresh_stream`; a sync with one reads
//! `incremental_stream` from it (source-stripe reads its objects in full once, then follows the
//! events API). With `api_retention_period`, a saved cursor older than the API keeps data for
//! is dropped and the stream read in full again, as the CDK does, so nothing past the API's
//! retention is silently skipped.
//!
//! The manifest keeps the incremental stream among its streams (the state's shape is its); the
//! full-refresh one is kept beside it. The choice is made once, when the partitions are listed,
//! and travels in the partition key ([`FULL_REFRESH_KEY`]), so a page read in another instance
//! reads the stream the partition was listed from. A parent stream is read in full (the engine
//! reads every parent in full, see `manifest::check_parents`).

use crate::datetime::{self, DateTime};
use crate::engine::{Engine, Scope, kind};
use serde_json::{Value, json};
use sluice_guest::{Error, Partition, Result};

/// The key field marking a partition of the full-refresh stream (only those carry it, so the
/// incremental stream's partitions keep the keys their saved states name).
pub const FULL_REFRESH_KEY: &str = "full_refresh";

/// A `StateDelegatingStream`'s full-refresh side.
pub struct Delegating {
    pub name: String,
    /// The `full_refresh_stream`, resolved and checked as any stream.
    pub full_refresh: Value,
    /// `api_retention_period`, a template (config and parameters).
    pub retention: Option<String>,
}

/// A `StateDelegatingStream` split into its incremental stream (kept among the streams) and
/// its full-refresh side; `None` for any other stream.
pub fn split(stream: &Value, at: &str) -> std::result::Result<Option<(Value, Delegating)>, String> {
    if kind(stream) != "StateDelegatingStream" {
        return Ok(None);
    }
    let name = stream.get("name").and_then(Value::as_str).unwrap_or_default().to_string();
    let side = |field: &str| match stream.get(field) {
        Some(s @ Value::Object(_)) => Ok(s),
        _ => Err(format!("{at}: the StateDelegatingStream {name} needs a {field} (a DeclarativeStream)")),
    };
    let (full_refresh, incremental) = (side("full_refresh_stream")?, side("incremental_stream")?);
    let names = [full_refresh, incremental].map(|s| s.get("name").and_then(Value::as_str).unwrap_or_default());
    if names.iter().any(|n| *n != name) {
        // The CDK's own words (`create_state_delegating_stream`).
        return Err(format!(
            "{at}: state_delegating_stream, full_refresh_stream name and incremental_stream must have equal names. \
             Instead has {name}, {} and {}.",
            names[0], names[1]
        ));
    }
    for (field, side) in [("full_refresh_stream", full_refresh), ("incremental_stream", incremental)] {
        if kind(&side["retriever"]) == "AsyncRetriever" {
            return Err(format!(
                "{at}.{field}: a StateDelegatingStream read through report jobs (AsyncRetriever) is not supported"
            ));
        }
    }
    let retention = match stream.get("api_retention_period") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => return Err(format!("{at}.api_retention_period: {other} is not an ISO 8601 duration")),
    };
    Ok(Some((incremental.clone(), Delegating { name, full_refresh: full_refresh.clone(), retention })))
}

/// Whether a sync from `state` reads the full-refresh stream: with no state (the CDK's `not
/// stream_state`; the host's resume data beside a shaped state does not count), or with a
/// cursor past the API's retention.
pub fn reads_in_full(engine: &Engine, delegating: &Delegating, state: Option<&Value>) -> Result<bool> {
    match state {
        Some(state) if !crate::state::is_empty(Some(state)) => past_retention(engine, delegating, state),
        _ => Ok(true),
    }
}

/// Whether a saved state's cursor is older than `api_retention_period` allows (a cursor that
/// cannot be read is too: the CDK falls back to a full refresh then, to be safe).
pub fn past_retention(engine: &Engine, delegating: &Delegating, state: &Value) -> Result<bool> {
    let Some(template) = &delegating.retention else { return Ok(false) };
    let ctx = engine.context(&delegating.full_refresh, &Scope::default(), Vec::new());
    let period = engine.text(Some(&Value::String(template.clone())), &ctx)?;
    if period.is_empty() {
        return Ok(false);
    }
    let period = datetime::parse_duration(&period)
        .map_err(|e| Error::config(format!("stream {}: api_retention_period {period:?}: {e}", delegating.name)))?;
    let cutoff = period.sub_from(&chrono::Utc::now());
    let stale = match cursor_datetime(engine, delegating, state)? {
        Some(at) => at < cutoff,
        None => true,
    };
    if stale {
        sluice_guest::log::warn(format!(
            "Stream '{}' has a cursor value older than the API's retention period of {template} (cutoff: {}). \
             Falling back to full refresh to avoid data loss.",
            delegating.name,
            cutoff.to_rfc3339()
        ));
    }
    Ok(stale)
}

/// The cursor of a saved state as the CDK reads it for the retention check: a finished full
/// refresh (`__ab_no_cursor_state_message`) is current; else the full-refresh stream's cursor,
/// then the incremental one's, each from `{field: value}` or a per-partition state's global one.
fn cursor_datetime(engine: &Engine, delegating: &Delegating, state: &Value) -> Result<Option<DateTime>> {
    if state.get("__ab_no_cursor_state_message").is_some_and(|v| v.as_bool() == Some(true)) {
        return Ok(Some(chrono::Utc::now()));
    }
    let cursors = [engine.cursor_for(&delegating.name, true)?, engine.cursor_for(&delegating.name, false)?];
    for cursor in cursors.iter().flatten() {
        let value = state
            .get("state")
            .filter(|s| s.is_object())
            .and_then(|s| s.get(&cursor.field))
            .or_else(|| state.get(&cursor.field))
            // The host's own form, for a stream whose state is not shaped.
            .or_else(|| state.get("newest"));
        if let Some(at) = value.and_then(|v| crate::state::read_value(cursor, v, &delegating.name).ok()) {
            return Ok(Some(at));
        }
    }
    Ok(None)
}

/// Marks a partition as one of the full-refresh stream.
pub fn mark_full_refresh(partition: &mut Partition) {
    match &mut partition.key {
        Value::Object(key) => {
            key.insert(FULL_REFRESH_KEY.into(), Value::Bool(true));
        }
        other => *other = json!({ FULL_REFRESH_KEY: true }),
    }
}

pub fn is_full_refresh(partition: &Partition) -> bool {
    partition.key.get(FULL_REFRESH_KEY) == Some(&Value::Bool(true))
}
