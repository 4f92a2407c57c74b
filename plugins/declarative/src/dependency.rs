//! `ParentStreamConfig.incremental_dependency` as the Airbyte CDK 7.39 runs it: a substream's
//! parent that has its own cursor is read incrementally, from the parent state kept inside the
//! child's state (`"parent_state": {parent_stream_name: {cursor_field: value}}`), so a later sync
//! lists only the partitions of parent records at or after the parent's bookmark (the child's
//! known partitions keep their own cursors), and the parent state the listing reached is written
//! into the child's state once the child's partitions are read.
//!
//! The host's form of a state has no room for a parent state (docs/state.md: partition cursors,
//! a low-water mark, the bookmark), so it travels in partition keys, which the host keeps as they
//! are:
//!
//! - The parent states a sync starts from, and the global cursor a new partition starts from,
//!   are an entry `{"partition": {"__parent_state": S, "__global": g, "__new_from": v}, "cursor":
//!   v}` that `to_host` adds; the host keeps it through the sync, and `from_host` writes `S` back
//!   while the sync is under way.
//! - A listing tags each partition it lists with `"__listing": {"id": id, "of": n,
//!   "parent_state": S'}`: a digest of what it listed, how many partitions, and the parent states
//!   it reached. The host records a partition's key only once it was read to its end, so once
//!   all `n` partitions of a listing are recorded, `from_host` writes `S'`; before that it writes
//!   `S`. A sync stopped part-way therefore never hands on a parent state past a partition it did
//!   not read (the CDK commits its parent state the same way, in the order it listed the
//!   partitions). A listing of no partition leaves `S` (its parent read nothing new).
//!
//! Since the tags make the keys differ from the saved ones, the listing starts each partition
//! itself (its own saved cursor, else the global cursor less the lookback window, else
//! `start_datetime`), `to_host` sets the low-water mark at `start_datetime` (the host raises a
//! partition it does not know to the mark, and records one that read nothing at it), and
//! `from_host` writes one state per partition: the newest of its saved cursor (or, for a new
//! one, the global cursor it started from) and what it read.
//!
//! The host records an open-ended partition that read nothing only at the low-water mark, and a
//! first sync has none: when a partition of a first sync reads no record, its listing's parent
//! states are not written, and the next sync reads the parent from the child's global cursor, as
//! the CDK reads a state without `parent_state`.

use crate::datetime::{self, DateTime};
use crate::engine::{Engine, kind};
use crate::slicing::{self, Cursor};
use serde_json::{Map, Value, json};
use sluice_guest::{CursorValue, Result};
use std::collections::HashMap;

pub const PARENT_STATE: &str = "__parent_state";
pub const GLOBAL: &str = "__global";
pub const NEW_FROM: &str = "__new_from";
pub const LISTING: &str = "__listing";

/// Whether a parent config has `incremental_dependency`.
pub fn depends(parent: &Value) -> bool {
    match parent.get("incremental_dependency") {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s.eq_ignore_ascii_case("true"),
        _ => false,
    }
}

/// The parent configs of a stream's SubstreamPartitionRouters with `incremental_dependency`.
pub fn dependent_parents(stream: &Value) -> Vec<&Value> {
    slicing::routers(&stream["retriever"])
        .into_iter()
        .filter(|r| kind(r) == "SubstreamPartitionRouter")
        .flat_map(|r| r.get("parent_stream_configs").and_then(Value::as_array).into_iter().flatten())
        .filter(|p| depends(p))
        .collect()
}

/// Whether the engine follows a stream's `incremental_dependency`: a SimpleRetriever stream with
/// a DatetimeBasedCursor of its own (without one the CDK keeps no parent state either) and a
/// dependent parent.
pub fn follows(engine: &Engine, stream: &Value) -> Result<bool> {
    Ok(kind(&stream["retriever"]) == "SimpleRetriever"
        && !dependent_parents(stream).is_empty()
        && Cursor::of(engine, stream)?.is_some())
}

pub fn parent_name(parent: &Value) -> String {
    parent["stream"].get("name").map(crate::engine::plain).unwrap_or_default()
}

/// The state each dependent parent starts from, from a child state in the CDK's shape, as the
/// CDK's `_instantiate_parent_stream_state_manager` finds it: `parent_state[name]`, else the
/// child's global `state`, else a legacy state of one value, as `{parent cursor field: value}`.
pub fn saved_parent_states(engine: &Engine, stream: &Value, object: &Map<String, Value>) -> Result<Map<String, Value>> {
    let mut out = Map::new();
    let child: Map<String, Value> = object
        .iter()
        .filter(|(k, _)| *k != "__ab_no_cursor_state_message")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if child.is_empty() {
        return Ok(out);
    }
    for parent in dependent_parents(stream) {
        let name = parent_name(parent);
        let own = child.get("parent_state").and_then(Value::as_object).and_then(|p| p.get(&name));
        let found = match (own, child.get("state")) {
            (Some(state), _) => Some(state.clone()),
            (None, Some(global)) => Some(global.clone()),
            (None, None) => {
                let values: Vec<&Value> = child.values().collect();
                match values.as_slice() {
                    [v @ (Value::String(_) | Value::Number(_))] => match Cursor::of(engine, &parent["stream"])? {
                        Some(c) => Some(json!({c.field: v})),
                        None => None,
                    },
                    _ => None,
                }
            }
        };
        if let Some(found) = found {
            out.insert(name, found);
        }
    }
    Ok(out)
}

/// The carrier entry of the host's form: the parent states a sync starts from, the global
/// cursor and where a new partition starts.
pub fn carrier(states: Map<String, Value>, global: Option<Value>, new_from: Option<Value>, cursor: Value) -> Value {
    json!({"partition": {PARENT_STATE: states, GLOBAL: global, NEW_FROM: new_from}, "cursor": cursor})
}

/// Whether a key is the carrier's.
pub fn is_carrier(key: &Value) -> bool {
    key.get(PARENT_STATE).is_some()
}

/// What a host's form says for a followed stream.
#[derive(Default)]
pub struct Saved {
    /// Each partition's newest cursor, by its router slice ([`canonical`]), with the slice.
    pub own: HashMap<String, (Value, Value)>,
    /// The partitions the state knew when the sync began (untagged keys).
    pub known: std::collections::HashSet<String>,
    /// The parent states: those a finished listing reached, else those the sync started from.
    pub parent_states: Option<Map<String, Value>>,
    /// The global cursor the sync started from.
    pub global: Option<Value>,
    /// Where a partition without a cursor of its own starts.
    pub new_from: Option<Value>,
}

/// Reads the host's form of a followed stream's state.
pub fn read_host(cursor: &Cursor, host: &Value) -> Saved {
    let mut saved = Saved::default();
    let entries: Vec<&Value> = host.get("partitions").and_then(Value::as_array).into_iter().flatten().collect();
    // Each listing: how many of its partitions are recorded, how many it listed, what it reached.
    let mut listings: HashMap<String, (u64, u64, &Map<String, Value>)> = HashMap::new();
    for entry in &entries {
        let (Some(key), Some(value)) = (entry.get("partition"), entry.get("cursor")) else { continue };
        if is_carrier(key) {
            if let Some(states) = key.get(PARENT_STATE).and_then(Value::as_object) {
                saved.parent_states.get_or_insert_with(|| states.clone());
            }
            saved.global = key.get(GLOBAL).filter(|v| !v.is_null()).cloned();
            saved.new_from = key.get(NEW_FROM).filter(|v| !v.is_null()).cloned();
            continue;
        }
        let slice = key.get("partition").cloned().unwrap_or_else(|| key.clone());
        let text = canonical(&slice);
        match key.get(LISTING) {
            Some(listing) => {
                let id = listing.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
                let of = listing.get("of").and_then(Value::as_u64).unwrap_or(u64::MAX);
                if let Some(states) = listing.get("parent_state").and_then(Value::as_object) {
                    listings.entry(id).or_insert((0, of, states)).0 += 1;
                }
            }
            None => drop(saved.known.insert(text.clone())),
        }
        let newer = match saved.own.get(&text) {
            Some((_, old)) => later(cursor, value, old),
            None => true,
        };
        if newer {
            saved.own.insert(text, (slice, value.clone()));
        }
    }
    // A listing whose partitions were all read; the newest, should a resumed sync hold two.
    let mut best: Option<&Map<String, Value>> = None;
    for (count, of, states) in listings.into_values() {
        if count >= of && best.is_none_or(|b| newest_of(states) >= newest_of(b)) {
            best = Some(states);
        }
    }
    if let Some(best) = best {
        saved.parent_states = Some(best.clone());
    }
    saved
}

/// The cursor a followed stream's partition is written with: the newest of what it read and
/// its saved cursor, or for a partition the state did not know, the global cursor it started
/// from (the CDK's cursor of a new partition starts as the global one).
pub fn written_cursor<'v>(cursor: &Cursor, saved: &'v Saved, text: &str) -> Option<&'v Value> {
    let (_, value) = saved.own.get(text)?;
    match (&saved.global, saved.known.contains(text)) {
        (Some(global), false) if later(cursor, global, value) => Some(global),
        _ => Some(value),
    }
}

/// A JSON value as text with every object's keys in order, so two spellings of one partition
/// (the CDK's state and a listing may order a slice's keys differently) are one.
pub fn canonical(v: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(m) => {
                let mut keys: Vec<&String> = m.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&m[k]))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(v).to_string()
}

/// Whether cursor value `a` is after `b` (both as the host keeps them).
fn later(cursor: &Cursor, a: &Value, b: &Value) -> bool {
    match (crate::state::read_value(cursor, a, ""), crate::state::read_value(cursor, b, "")) {
        (Ok(a), Ok(b)) => a > b,
        _ => false,
    }
}

/// The newest date-time among parent states' values, to order two listings' parent states.
fn newest_of(states: &Map<String, Value>) -> Option<DateTime> {
    states
        .values()
        .filter_map(Value::as_object)
        .flat_map(|s| s.values())
        .filter_map(|v| match v {
            Value::String(s) => datetime::parse_any(s).ok(),
            Value::Number(n) => n.as_i64().and_then(|n| DateTime::from_timestamp(n, 0)),
            _ => None,
        })
        .max()
}

/// A host cursor value (JSON) as the contract's, of the kind the host reads it as.
pub fn cursor_value(v: &Value) -> Option<CursorValue> {
    match v {
        Value::Number(n) => n.as_i64().map(CursorValue::Integer),
        Value::String(s) if sluice_guest::slice::parse_rfc3339(s).is_ok() => Some(CursorValue::Datetime(s.clone())),
        Value::String(s) => Some(CursorValue::Text(s.clone())),
        _ => None,
    }
}

/// A listing's id: a digest (FNV-1a) of the parent states it reached and the keys it listed.
pub fn listing_id(states: &Map<String, Value>, keys: &[Value]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |text: &str| {
        for b in text.bytes().chain(std::iter::once(0)) {
            hash ^= b as u64;
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&Value::Object(states.clone()).to_string());
    keys.iter().for_each(|k| eat(&k.to_string()));
    format!("{hash:016x}")
}

/// A parent's reading: where it starts from its saved state, and the state it reaches.
pub struct ParentRead<'c> {
    pub cursor: &'c Cursor,
    /// The bookmark it starts from: the saved value (as written) when at or after the start,
    /// else the start.
    bookmark: (DateTime, Value),
    newest: Option<(DateTime, Value)>,
}

impl<'c> ParentRead<'c> {
    pub fn new(engine: &Engine, cursor: &'c Cursor, saved: Option<&Value>, name: &str) -> Result<Self> {
        let start = cursor.start(engine)?;
        let text = |at: &DateTime| Value::from(datetime::format(at, &cursor.format));
        let bookmark = match saved.and_then(|s| s.get(&cursor.field)) {
            Some(v) => {
                let at = crate::state::read_value(cursor, v, name)?;
                match at >= start {
                    true => (at, crate::state::state_text(cursor, v).map(Value::from).unwrap_or_else(|_| v.clone())),
                    false => (start, text(&start)),
                }
            }
            None => (start, text(&start)),
        };
        Ok(ParentRead { cursor, bookmark, newest: None })
    }

    /// A parent record read: its cursor value moves the state (one that does not parse does
    /// not, as the CDK skips it).
    pub fn observe(&mut self, record: &Value) {
        let Some(v) = record.get(&self.cursor.field).filter(|v| v.is_string() || v.is_number()) else { return };
        let Ok(at) = crate::state::read_value(self.cursor, v, "") else { return };
        if self.newest.as_ref().is_none_or(|(n, _)| at > *n) {
            self.newest = Some((at, v.clone()));
        }
    }

    /// The parent's state: `{cursor_field: value}`, the newest value read, never before the
    /// bookmark it started from, in `datetime_format`.
    pub fn state(&self) -> Value {
        let value = match &self.newest {
            Some((at, v)) if *at > self.bookmark.0 => crate::state::state_text(self.cursor, v)
                .map(Value::from)
                .unwrap_or_else(|_| Value::from(datetime::format(at, &self.cursor.format))),
            _ => self.bookmark.1.clone(),
        };
        json!({self.cursor.field.clone(): value})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{from_host, to_host};

    fn engine() -> std::rc::Rc<Engine> {
        let cursor = json!({"type": "DatetimeBasedCursor", "cursor_field": "updated",
            "datetime_format": "%Y-%m-%dT%H:%M:%SZ", "start_datetime": "2024-01-01T00:00:00Z"});
        let requester = json!({"type": "HttpRequester", "url_base": "http://api.test", "path": "/x"});
        let parent = json!({"type": "DeclarativeStream", "name": "accounts", "incremental_sync": cursor,
            "retriever": {"type": "SimpleRetriever", "requester": requester}});
        let child = json!({"type": "DeclarativeStream", "name": "events", "incremental_sync": cursor,
            "retriever": {"type": "SimpleRetriever", "requester": requester, "partition_router": {
                "type": "SubstreamPartitionRouter", "parent_stream_configs": [{"type": "ParentStreamConfig",
                    "stream": parent, "parent_key": "id", "partition_field": "account_id",
                    "incremental_dependency": true}]}}});
        let manifest = json!({"version": "6.44.0", "type": "DeclarativeSource", "streams": [parent, child],
            "check": {"type": "CheckStream", "stream_names": ["accounts"]}});
        crate::engine::for_config(&json!({crate::engine::MANIFEST_KEY: manifest}).to_string()).unwrap()
    }

    fn entry(partition: Value, cursor: &str) -> Value {
        json!({"partition": partition, "cursor": cursor})
    }

    /// A CDK state read into the host's form and written back: the parent state travels in the
    /// carrier entry, the low-water mark is the start, and nothing is lost.
    #[test]
    fn a_cdk_state_goes_through_the_hosts_form_unchanged() {
        let engine = engine();
        let cdk = json!({"use_global_cursor": false,
            "states": [{"partition": {"account_id": 1, "parent_slice": {}}, "cursor": {"updated": "2024-03-01T00:00:00Z"}}],
            "state": {"updated": "2024-03-02T00:00:00Z"}, "lookback_window": 0,
            "parent_state": {"accounts": {"updated": "2024-02-01T00:00:00Z"}}});
        let host = to_host(&engine, "events", &cdk).unwrap().unwrap();
        assert_eq!(host["low_water"], json!("2024-01-01T00:00:00Z"));
        let carrier = host["partitions"].as_array().unwrap().iter().find(|e| is_carrier(&e["partition"])).unwrap();
        assert_eq!(carrier["partition"][PARENT_STATE], cdk["parent_state"]);
        assert_eq!(carrier["partition"][GLOBAL], json!("2024-03-02T00:00:00Z"));
        assert_eq!(from_host(&engine, "events", &host).unwrap(), cdk);
    }

    /// The parent states a listing reached are written once every partition it listed is
    /// recorded; until then, those the sync started from. A partition recorded twice (its saved
    /// key and the listing's) is written once, with the newer cursor; a new partition that read
    /// nothing (recorded at the low-water mark) with the global cursor it started from.
    #[test]
    fn a_listings_parent_state_is_written_once_all_its_partitions_are_read() {
        let engine = engine();
        let old = json!({"accounts": {"updated": "2024-02-01T00:00:00Z"}});
        let reached = json!({"accounts": {"updated": "2024-03-05T00:00:00Z"}});
        let tag = json!({"id": "abc", "of": 2, "parent_state": reached});
        let p1 = json!({"account_id": 1, "parent_slice": {}});
        let p2 = json!({"account_id": 2, "parent_slice": {}});
        let mut host = json!({"cursor_field": ["updated"], "low_water": "2024-01-01T00:00:00Z", "newest": "2024-03-02T00:00:00Z",
        "partitions": [
            carrier(old.as_object().unwrap().clone(), Some(json!("2024-03-02T00:00:00Z")), Some(json!("2024-03-02T00:00:00Z")), json!("2024-03-02T00:00:00Z")),
            entry(json!({"partition": p1}), "2024-03-01T00:00:00Z"),
            entry(json!({"partition": p1, LISTING: tag}), "2024-03-04T00:00:00Z"),
        ]});
        let shaped = from_host(&engine, "events", &host).unwrap();
        assert_eq!(shaped["parent_state"], old, "one of two partitions read");
        assert_eq!(shaped["states"].as_array().unwrap().len(), 1);
        assert_eq!(shaped["states"][0]["cursor"]["updated"], json!("2024-03-04T00:00:00Z"));
        host["partitions"]
            .as_array_mut()
            .unwrap()
            .push(entry(json!({"partition": p2, LISTING: tag}), "2024-01-01T00:00:00Z"));
        let shaped = from_host(&engine, "events", &host).unwrap();
        assert_eq!(shaped["parent_state"], reached, "both read");
        assert_eq!(shaped["states"][1], json!({"partition": p2, "cursor": {"updated": "2024-03-02T00:00:00Z"}}));
    }

    /// Where a parent starts, as the CDK finds it: `parent_state[name]`, else the child's global
    /// `state`, else a legacy state of one value under the parent's cursor field.
    #[test]
    fn a_parent_state_is_found_as_the_cdk_finds_it() {
        let engine = engine();
        let node = engine.stream("events").unwrap().clone();
        let find = |state: Value| saved_parent_states(&engine, &node, state.as_object().unwrap()).unwrap();
        let own = json!({"updated": "2024-02-01T00:00:00Z"});
        assert_eq!(find(json!({"parent_state": {"accounts": own}, "state": {"updated": "x"}}))["accounts"], own);
        assert_eq!(find(json!({"parent_state": {}, "state": {"updated": "y"}}))["accounts"], json!({"updated": "y"}));
        assert_eq!(find(json!({"updated": "z"}))["accounts"], json!({"updated": "z"}));
        assert!(find(json!({"__ab_no_cursor_state_message": true})).is_empty());
        assert!(find(json!({"states": []})).is_empty());
    }

    /// A parent's state: the newest cursor value read, in `datetime_format`, never before the
    /// saved bookmark (kept as it was when nothing newer is read) or the start.
    #[test]
    fn a_parent_reaches_the_newest_value_it_read() {
        let engine = engine();
        let cursor = Cursor::of(&engine, engine.stream("accounts").unwrap()).unwrap().unwrap();
        let saved = json!({"updated": "2024-02-01T00:00:00Z"});
        let mut read = ParentRead::new(&engine, &cursor, Some(&saved), "accounts").unwrap();
        assert_eq!(read.state(), saved);
        read.observe(&json!({"id": 1, "updated": "2024-01-15T00:00:00Z"}));
        read.observe(&json!({"id": 2, "updated": "not a date"}));
        assert_eq!(read.state(), saved);
        read.observe(&json!({"id": 3, "updated": "2024-02-03T00:00:00Z"}));
        assert_eq!(read.state(), json!({"updated": "2024-02-03T00:00:00Z"}));
        let early = json!({"updated": "2023-01-01T00:00:00Z"});
        let read = ParentRead::new(&engine, &cursor, Some(&early), "accounts").unwrap();
        assert_eq!(read.state(), json!({"updated": "2024-01-01T00:00:00Z"}), "the start");
    }
}
