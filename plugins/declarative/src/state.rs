//! Stream states in the Airbyte CDK's shape (contract 0.1.6, `state-shape`), so a connection
//! moves from the CDK to Sluice and back with nothing lost and nothing read again. The host
//! tracks progress in its own form (docs/state.md); this module translates at the edges, as the
//! CDK 7.39's concurrent declarative engine reads and writes its states:
//!
//! - A DatetimeBasedCursor without a router (`ConcurrentCursor`): `{cursor_field: value}`, the
//!   newest cursor value read in the first unbroken run of finished windows (or where the sync
//!   started, when it read nothing), in `datetime_format` (`%s` as text). The next sync starts at
//!   `max(value - lookback_window, start_datetime)`, the value itself read again.
//! - With a router (`ConcurrentPerPartitionCursor`): `{"use_global_cursor": false, "states":
//!   [{"partition": P, "cursor": {cursor_field: value}}], "state": {cursor_field: value},
//!   "lookback_window": seconds, "parent_state": {...}}`. A partition in `states` starts at its
//!   own value (less the manifest's lookback), a new one at the global `state` less
//!   `lookback_window` seconds, or at `start_datetime`. `parent_state` is `{}`, or with
//!   `incremental_dependency` the parent states (see `crate::dependency`, which also says how
//!   they travel through the host's form).
//!
//! - An IncrementingCountCursor: `{cursor_field: number}` (see `crate::counting`).
//!
//! The host's form comes back in `to_host` with `low_water` (where windows or new partitions
//! start, exclusive for windows), `newest` (the bookmark) and `partitions`.

use crate::counting::Counter;
use crate::datetime::{self, DateTime};
use crate::engine::Engine;
use crate::slicing::{self, Cursor};
use serde_json::{Map, Value, json};
use sluice_guest::{CursorValue, Error, Result};

/// Keys only the host's own form has: such a state is not the CDK's.
const HOST_KEYS: [&str; 6] = ["cursor_field", "low_water", "newest", "partitions", "completed", "in_progress"];

/// Whether a stream has no saved state, as the CDK tells (`not stream_state`); the host's
/// resume data beside a shaped state does not count.
pub fn is_empty(state: Option<&Value>) -> bool {
    match state {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.keys().all(|k| k.starts_with("__sluice")),
        Some(_) => false,
    }
}

/// Every incremental stream's state is the CDK's.
pub fn shaped_streams(engine: &Engine) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for stream in engine.manifest()?.streams() {
        let name = stream.get("name").and_then(Value::as_str).unwrap_or_default();
        if engine.cursor(name)?.is_some() || Counter::of(engine, stream)?.is_some() {
            names.push(name.to_string());
        }
    }
    Ok(names)
}

fn routed(engine: &Engine, stream: &str) -> Result<bool> {
    Ok(!slicing::routers(&engine.stream(stream)?["retriever"]).is_empty())
}

fn cursor_of(engine: &Engine, stream: &str) -> Result<std::rc::Rc<Cursor>> {
    engine.cursor(stream)?.ok_or_else(|| Error::system(format!("stream {stream} has no cursor")))
}

/// A state handed in, through the stream's `state_migrations` as the CDK applies them: each in
/// turn, when it says the state is its to migrate (`None`: none did).
fn migrated(engine: &Engine, stream: &str, state: &Value, cursor_field: &str) -> Result<Option<Value>> {
    let node = engine.stream(stream)?;
    let mut migrated: Option<Value> = None;
    for migration in node.get("state_migrations").and_then(Value::as_array).into_iter().flatten() {
        if crate::custom::is_custom_node(migration) {
            if let Some(new) = crate::custom::migrate(engine, migration, node, migrated.as_ref().unwrap_or(state))? {
                migrated = Some(new);
            }
            continue;
        }
        if crate::engine::kind(migration) == "LegacyToPerPartitionStateMigration"
            && let Some(new) = legacy_to_per_partition(engine, node, migrated.as_ref().unwrap_or(state), cursor_field)?
        {
            migrated = Some(new);
        }
    }
    Ok(migrated)
}

/// `LegacyToPerPartitionStateMigration`: a state of `{partition id: {cursor_field: value}}` (as
/// Python connectors kept it) becomes `{"states": [{"partition": {partition_field: id}, "cursor":
/// {cursor_field: value}}]}`, for a substream of exactly one parent; any other state is left as
/// it is (the CDK's `should_migrate`).
fn legacy_to_per_partition(engine: &Engine, node: &Value, state: &Value, cursor_field: &str) -> Result<Option<Value>> {
    let Some(object) = state.as_object().filter(|o| !o.is_empty() && !o.contains_key("states")) else {
        return Ok(None);
    };
    let parents = node["retriever"]["partition_router"].get("parent_stream_configs").and_then(Value::as_array);
    let [parent] = parents.map(Vec::as_slice).unwrap_or_default() else { return Ok(None) };
    let legacy = |v: &Value| v.as_object().is_some_and(|m| m.len() == 1 && m.contains_key(cursor_field));
    if !object.values().all(legacy) {
        return Ok(None);
    }
    let ctx = engine.context(parent, &crate::engine::Scope::default(), Vec::new());
    let field = engine.text(parent.get("partition_field"), &ctx)?;
    let states: Vec<Value> =
        object.iter().map(|(id, cursor)| json!({"partition": {field.clone(): id}, "cursor": cursor})).collect();
    Ok(Some(json!({"states": states})))
}

/// A CDK state as the host's form; `None` for a state in the host's own form.
pub fn to_host(engine: &Engine, stream: &str, state: &Value) -> Result<Option<Value>> {
    let Some(object) = state.as_object() else { return Ok(None) };
    if HOST_KEYS.iter().any(|k| object.contains_key(*k)) {
        return Ok(None);
    }
    // Past the API's retention, a StateDelegatingStream's state is dropped as the CDK drops it
    // (the sync reads in full, see `crate::delegation`).
    if let Some(delegating) = engine.delegating(stream)?
        && crate::delegation::past_retention(engine, delegating, state)?
    {
        return Ok(Some(json!({})));
    }
    if let Some(counter) = Counter::of(engine, engine.stream(stream)?)? {
        return counter.to_host(state, stream).map(Some);
    }
    let cursor = cursor_of(engine, stream)?;
    let migrated = migrated(engine, stream, state, &cursor.field)?;
    let object = migrated.as_ref().and_then(Value::as_object).unwrap_or(object);
    let mut host = json!({"cursor_field": [cursor.field]});
    if routed(engine, stream)? {
        let per_partition = ["states", "state", "use_global_cursor"].iter().any(|k| object.contains_key(*k));
        let global = match per_partition {
            true => object.get("state").and_then(|s| s.get(&cursor.field)),
            // A sequential `{cursor_field: value}` is the global cursor.
            false => object.get(&cursor.field),
        };
        let mut partitions = Vec::new();
        for (i, entry) in object.get("states").and_then(Value::as_array).into_iter().flatten().enumerate() {
            let value = entry.get("cursor").and_then(|c| c.get(&cursor.field));
            let (Some(partition), Some(value)) = (entry.get("partition"), value) else {
                return Err(Error::config(format!(
                    "the state of stream {stream}: states[{i}] has no partition or no {:?} cursor",
                    cursor.field
                )));
            };
            let at = read_value(&cursor, value, stream)?;
            partitions
                .push(json!({"partition": {"partition": partition}, "cursor": host_json(&cursor, &at, Some(value))}));
        }
        // With one cursor for all partitions, every partition starts from the global one.
        if cursor.global {
            partitions.clear();
        }
        let mut new_from = None;
        if let Some(value) = global {
            let at = read_value(&cursor, value, stream)?;
            let lookback = object.get("lookback_window").and_then(Value::as_i64).unwrap_or(0);
            let from = at - chrono::Duration::seconds(lookback.max(0));
            new_from = Some(host_json(&cursor, &from, (lookback == 0).then_some(value)));
            host["newest"] = host_json(&cursor, &at, Some(value));
        }
        let node = engine.stream(stream)?;
        if crate::dependency::follows(engine, node)? {
            // The parent states, the global cursor and where a new partition starts travel in an
            // entry of their own, and the low-water mark is the start (see `crate::dependency`).
            let parents = crate::dependency::saved_parent_states(engine, node, state.as_object().unwrap_or(object))?;
            let start = host_json(&cursor, &cursor.start(engine)?, None);
            let global = host.get("newest").cloned();
            let at = new_from.clone().unwrap_or_else(|| start.clone());
            partitions.push(crate::dependency::carrier(parents, global, new_from, at));
            host["low_water"] = start;
        } else if let Some(from) = new_from {
            host["low_water"] = from;
        }
        if !partitions.is_empty() {
            host["partitions"] = Value::Array(partitions);
        }
        return Ok(Some(host));
    }
    let Some(value) = object.get(&cursor.field) else {
        // `{}` and the CDK's finished-full-read marks save nothing; other shapes are not this one.
        return Ok(object.keys().all(|k| k.starts_with("__ab_")).then(|| json!({})));
    };
    let at = read_value(&cursor, value, stream)?;
    let start = cursor.start(engine)?;
    let (from, bookmark) = sync_start(engine, &cursor, at, start)?;
    // The host's windows start after `low_water`: one granularity before the first value read.
    host["low_water"] = host_json(&cursor, &cursor.granularity.sub_from(&from), None);
    host["newest"] = match bookmark == at {
        true => host_json(&cursor, &at, Some(value)),
        false => host_json(&cursor, &bookmark, None),
    };
    Ok(Some(host))
}

/// Where a sync starts from a saved value, and the bookmark it keeps if it reads nothing: the
/// later of the value and `start_datetime`, less the lookback window (never before the start).
fn sync_start(engine: &Engine, cursor: &Cursor, saved: DateTime, start: DateTime) -> Result<(DateTime, DateTime)> {
    let bookmark = saved.max(start);
    let from = match cursor.lookback(engine)? {
        Some(back) => back.sub_from(&bookmark).max(start),
        None => bookmark,
    };
    Ok((from, bookmark))
}

/// Where the windows of a stream without a router start, given the state the host was handed:
/// as the CDK's `ConcurrentCursor` starts them.
/// With the offset the saved value was written with, which the windows keep.
pub fn windows_from(
    engine: &Engine,
    cursor: &Cursor,
    state: Option<&Value>,
    stream: &str,
) -> Result<(DateTime, Option<chrono::FixedOffset>)> {
    let start = cursor.start(engine)?;
    let saved = state
        .and_then(|s| s.get(&cursor.field))
        .filter(|_| !state.is_some_and(|s| HOST_KEYS.iter().any(|k| s.get(*k).is_some())));
    match saved {
        Some(value) => {
            let at = read_value(cursor, value, stream)?;
            let offset = value.as_str().and_then(|t| cursor.offset_of(t)).filter(|_| at >= start);
            Ok((sync_start(engine, cursor, at, start)?.0, offset))
        }
        None => Ok((start, None)),
    }
}

/// The host's form of a stream as the CDK writes it.
pub fn from_host(engine: &Engine, stream: &str, state: &Value) -> Result<Value> {
    if let Some(counter) = Counter::of(engine, engine.stream(stream)?)? {
        return Ok(counter.from_host(state));
    }
    let cursor = cursor_of(engine, stream)?;
    let field = cursor.field.clone();
    let newest = state.get("newest").filter(|v| !v.is_null());
    if routed(engine, stream)? {
        let node = engine.stream(stream)?;
        // A stream that follows `incremental_dependency`: one state per partition (a listing
        // tags its keys), without the parent states' entries, and the parent states.
        let dependent = match crate::dependency::follows(engine, node)? {
            true => Some(crate::dependency::read_host(&cursor, state)),
            false => None,
        };
        let mut states = Vec::new();
        let mut written = std::collections::HashSet::new();
        for entry in state.get("partitions").and_then(Value::as_array).into_iter().flatten() {
            let (Some(key), Some(mut value)) = (entry.get("partition"), entry.get("cursor")) else { continue };
            let partition = key.get("partition").cloned().unwrap_or_else(|| key.clone());
            if let Some(saved) = &dependent {
                if crate::dependency::is_carrier(key) {
                    continue;
                }
                let text = crate::dependency::canonical(&partition);
                if !written.insert(text.clone()) {
                    continue;
                }
                value = crate::dependency::written_cursor(&cursor, saved, &text).unwrap_or(value);
            }
            states.push(json!({"partition": partition, "cursor": {&field: state_text(&cursor, value)?}}));
        }
        let mut out = Map::new();
        out.insert("use_global_cursor".into(), Value::Bool(cursor.global));
        if !cursor.global {
            out.insert("states".into(), Value::Array(states));
        }
        if let Some(value) = newest {
            out.insert("state".into(), json!({&field: state_text(&cursor, value)?}));
        }
        out.insert("lookback_window".into(), json!(0));
        let substream = slicing::routers(&engine.stream(stream)?["retriever"]).iter().any(|r| {
            // A custom router with parents subclasses SubstreamPartitionRouter, whose
            // `get_stream_state` the CDK asks for the parents' state.
            let kind = crate::engine::kind(r);
            kind == "SubstreamPartitionRouter"
                || (kind == "CustomPartitionRouter" && r.get("parent_stream_configs").is_some())
        });
        if substream {
            let parents = dependent.and_then(|d| d.parent_states).unwrap_or_default();
            out.insert("parent_state".into(), Value::Object(parents));
        }
        return Ok(Value::Object(out));
    }
    let text = match (newest, state.get("low_water").filter(|v| !v.is_null())) {
        (Some(value), _) => state_text(&cursor, value)?,
        (None, Some(low_water)) => {
            let at = cursor.granularity.add_to(&read_value(&cursor, low_water, stream)?);
            datetime::format(&at, &cursor.format)
        }
        (None, None) => return Ok(json!({})),
    };
    Ok(json!({ field: text }))
}

/// A cursor value (a record's, the host's, or a state's) as a date-time.
pub(crate) fn read_value(cursor: &Cursor, value: &Value, stream: &str) -> Result<DateTime> {
    let text = match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        other => return Err(Error::config(format!("the state of stream {stream}: {other} is not a cursor value"))),
    };
    std::iter::once(&cursor.format)
        .chain(cursor.record_formats.iter())
        .find_map(|f| datetime::parse(&text, f).ok())
        .map(Ok)
        .unwrap_or_else(|| {
            cursor.from_host(&CursorValue::Text(text.clone())).map_err(|e| {
                Error::config(format!("the state of stream {stream}: the cursor value {text:?} cannot be read: {e}"))
            })
        })
}

/// A value as the CDK writes it in a state: in `datetime_format`, as text; a value already
/// written in that format is written again in it with its own offset, as the CDK's state
/// converter does (`%f` as six digits even where the record's value had three).
pub(crate) fn state_text(cursor: &Cursor, value: &Value) -> Result<String> {
    // A record's value (the host keeps it as written) parsed with the offset it was written
    // with, in the cursor's format or a record format, and written in the cursor's format with
    // that offset: the CDK's state converter formats the parsed value as it is.
    if let Value::String(s) = value
        && let Some(at) = std::iter::once(&cursor.format)
            .chain(cursor.record_formats.iter())
            .find_map(|f| datetime::parse_with_offset(s, f).ok())
    {
        return Ok(datetime::format_with_offset(&at, &cursor.format));
    }
    let at = read_value(cursor, value, "")?;
    Ok(datetime::format(&at, &cursor.format))
}

/// A date-time as the host orders it, of the kind the records' cursor values are; `raw` (a
/// state's own text) when it is text the records' kind shares, so its offset is kept.
fn host_json(cursor: &Cursor, at: &DateTime, raw: Option<&Value>) -> Value {
    match cursor.host_value(at) {
        CursorValue::Integer(n) => json!(n),
        CursorValue::Datetime(s) => json!(s),
        CursorValue::Text(s) => match raw {
            Some(Value::String(r)) => json!(r),
            _ => json!(s),
        },
    }
}
