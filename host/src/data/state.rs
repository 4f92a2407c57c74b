//! Incremental state: reading the state a platform hands us, and keeping per-partition cursors.
//!
//! The host owns the state format of every stream (a guest never parses it):
//! `{"cursor_field": [...], "partitions": [{"partition": KEY, "cursor": VALUE}, ...]}`.
//! A partition's cursor is the largest cursor value among the records written for it; the next
//! run starts that partition after it. Older simple forms such as `{"updated_at": "..."}` are
//! accepted as a floor for every partition.

use anyhow::{Context, Result, anyhow, bail};
use serde::Deserialize;
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// The saved state of each stream, by stream name.
#[derive(Debug, Default, Clone)]
pub struct InputState {
    pub streams: HashMap<String, Value>,
    /// Streams whose partition cursors were folded as the file was parsed: the limit, and how
    /// many entries the saved list had.
    folded: HashMap<String, (usize, usize)>,
    /// The limit the file was parsed with.
    limit: usize,
}

impl InputState {
    /// Parses a state file: an array of Airbyte state messages (per-stream or global), one state
    /// message, a legacy `{stream: state}` object, or JSON lines of a previous run's output (the
    /// last STATE per stream wins; other messages are ignored). Partition cursors past
    /// [`DEFAULT_MAX_PARTITION_CURSORS`] are folded as they are read
    /// ([`InputState::parse_with_limit`]).
    pub fn parse(text: &str) -> Result<Self> {
        Self::parse_with_limit(text, DEFAULT_MAX_PARTITION_CURSORS)
    }

    /// [`InputState::parse`], folding each stream's partition cursors past `max_partition_cursors`
    /// (a run's `max_partition_cursors`) as the list is read, before the next entry is parsed: the
    /// first `max_partition_cursors` partitions are kept and one more, which carries the lowest
    /// cursor of the list, and the low-water mark is lowered to that lowest. A run with that limit
    /// or a lower one folds it as it would the whole list (every partition resumes from the lowest
    /// cursor, [`StreamCursor::with_limit`]); one with a higher limit resumes the partitions kept
    /// from their own cursors and every other from the lowest. No partition resumes past what it
    /// read, and the file is never held as a tree of all its cursors (a 13.5 MB state of 200,000
    /// of them was about 150 MiB parsed). Each stream's state is moved out of what was parsed,
    /// never copied.
    pub fn parse_with_limit(text: &str, max_partition_cursors: usize) -> Result<Self> {
        let mut state = InputState::default();
        if text.trim().is_empty() {
            return Ok(state);
        }
        let folds = std::cell::Cell::new(0);
        let parser = Folding { limit: max_partition_cursors, place: Place::Top, depth: 0, folds: &folds };
        let parsed = parser.parse(text);
        state.limit = max_partition_cursors;
        match parsed {
            Ok(Value::Array(messages)) => {
                for (i, m) in messages.into_iter().enumerate() {
                    state.add_message(m).with_context(|| format!("state message {i}"))?;
                }
            }
            Ok(Value::Object(map)) if map.contains_key("type") => state.add_message(Value::Object(map))?,
            Ok(Value::Object(mut map)) if map.get("bookmarks").is_some_and(Value::is_object) => {
                state.add_bookmarks(map.remove("bookmarks").unwrap_or_default())?
            }
            Ok(Value::Object(map)) => {
                for (stream, value) in map {
                    state.set(stream, value)?;
                }
            }
            Ok(Value::Null) => {}
            Ok(other) => bail!("state must be a JSON array or object, not {}", kind(&other)),
            Err(whole) => {
                // Perhaps JSON lines (a previous run's output).
                let content = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
                for (seen, (n, line)) in content.enumerate() {
                    let message: Value = parser.parse(line).map_err(|e| {
                        if seen == 0 {
                            anyhow!("state is not valid JSON: {whole}")
                        } else {
                            anyhow!("line {}: not valid JSON: {e}", n + 1)
                        }
                    })?;
                    if message.get("type").and_then(Value::as_str) == Some("STATE") {
                        state.add_message(message).with_context(|| format!("line {}", n + 1))?;
                    }
                }
            }
        }
        // A list folded where no stream's state was (a message's own keys) leaves its count.
        if folds.get() > state.folded.len() {
            state.streams.values_mut().for_each(strip_folded);
        }
        Ok(state)
    }

    /// When the partition cursors of `stream` were folded as its state was parsed
    /// ([`InputState::parse_with_limit`]): the limit they were folded past, and how many entries
    /// the saved list had.
    pub fn folded_partition_cursors(&self, stream: &str) -> Option<(usize, usize)> {
        self.folded.get(stream).copied()
    }

    fn set(&mut self, stream: String, value: Value) -> Result<()> {
        match value {
            Value::Null => {}
            Value::Object(mut map) => {
                match map.shift_remove(FOLDED_KEY).and_then(|n| n.as_u64()) {
                    Some(entries) => drop(self.folded.insert(stream.clone(), (self.limit, entries as usize))),
                    None => drop(self.folded.remove(&stream)),
                }
                self.streams.insert(stream, Value::Object(map));
            }
            other => bail!("the state of stream {stream:?} must be a JSON object, not {}", kind(&other)),
        }
        Ok(())
    }

    /// Singer's whole-tap state: `{"bookmarks": {stream: state}}`.
    fn add_bookmarks(&mut self, bookmarks: Value) -> Result<()> {
        let Value::Object(map) = bookmarks else { bail!("\"bookmarks\" must be an object, not {}", kind(&bookmarks)) };
        map.into_iter().try_for_each(|(k, v)| self.set(k, v))
    }

    /// One state message: Airbyte's, bare or wrapped in `{"type": "STATE", "state": ...}`, or
    /// Singer's `{"type": "STATE", "value": {"bookmarks": ...}}`.
    fn add_message(&mut self, mut message: Value) -> Result<()> {
        let wrapped = message.get("type").and_then(Value::as_str) == Some("STATE");
        if wrapped && let Some(value) = message.get_mut("value") {
            let bookmarks =
                value.get_mut("bookmarks").ok_or_else(|| anyhow!("a Singer STATE has no \"bookmarks\""))?.take();
            return self.add_bookmarks(bookmarks);
        }
        let message = match wrapped {
            true => message.get_mut("state").ok_or_else(|| anyhow!("a STATE message has no \"state\""))?.take(),
            false => message,
        };
        let Value::Object(mut obj) = message else {
            bail!("a state message must be an object, not {}", kind(&message))
        };
        let type_ = obj.get("type").and_then(Value::as_str).map(str::to_string);
        match type_.as_deref() {
            Some("STREAM") => {
                let stream = obj.remove("stream").ok_or_else(|| anyhow!("a STREAM state has no \"stream\""))?;
                self.add_stream_state(stream)
            }
            Some("GLOBAL") => {
                let mut global = obj.remove("global").ok_or_else(|| anyhow!("a GLOBAL state has no \"global\""))?;
                let Some(Value::Array(streams)) = global.get_mut("stream_states").map(Value::take) else {
                    bail!("a GLOBAL state has no \"stream_states\" array")
                };
                streams.into_iter().try_for_each(|s| self.add_stream_state(s))
            }
            Some("LEGACY") | None => match obj.remove("data") {
                Some(Value::Object(data)) => data.into_iter().try_for_each(|(k, v)| self.set(k, v)),
                Some(other) => bail!("a LEGACY state's \"data\" must be an object, not {}", kind(&other)),
                None => bail!(
                    "unrecognised state message (expected type STREAM, GLOBAL or LEGACY): {}",
                    crate::data::protocol::preview(&Value::Object(obj).to_string())
                ),
            },
            Some(other) => bail!("unknown state type {other:?} (expected STREAM, GLOBAL or LEGACY)"),
        }
    }

    fn add_stream_state(&mut self, mut stream: Value) -> Result<()> {
        let name = stream
            .pointer("/stream_descriptor/name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("a stream state has no stream_descriptor.name"))?
            .to_string();
        let state = stream.get_mut("stream_state").map(Value::take).unwrap_or(Value::Null);
        self.set(name, state)
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Where the parser of a state file is: what the value it reads may be.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// The file itself, a message in it, or one JSON line: its values may be messages, or (a
    /// legacy `{stream: state}` object) stream states.
    Top,
    /// Perhaps a stream's state (or a message wrapping one): its `partitions` are folded.
    Outer,
    /// Singer's `bookmarks` or a LEGACY state's `data`: each value is a stream's state.
    Streams,
    /// Inside a stream's state: parsed as it is.
    Plain,
}

impl Place {
    /// Where the value under `key` of an object here is. Only the keys a state message is made
    /// of lead further in, and never deeper than a GLOBAL state's stream states.
    fn of(self, key: &str, depth: usize) -> Place {
        if depth > 8 {
            return Place::Plain;
        }
        match (self, key) {
            (Place::Top | Place::Outer, "bookmarks" | "data") => Place::Streams,
            (Place::Top | Place::Streams, _) => Place::Outer,
            (Place::Outer, "stream_state" | "state" | "stream" | "global" | "stream_states" | "value") => Place::Outer,
            _ => Place::Plain,
        }
    }
}

/// The key under which the parser leaves, in a stream's state whose partition cursors it folded,
/// how many the list had; [`InputState::set`] takes it out. A key of the file's own with this
/// name is dropped as it is read.
const FOLDED_KEY: &str = "\u{0}sluice: partition cursors folded";

/// Parses one JSON value of a state file, folding the partition cursors of every stream state
/// in it past `limit` as they are read (see [`InputState::parse_with_limit`]).
#[derive(Clone, Copy)]
struct Folding<'a> {
    limit: usize,
    place: Place,
    depth: usize,
    /// Lists folded (each leaves a [`FOLDED_KEY`]).
    folds: &'a std::cell::Cell<usize>,
}

/// A folded `partitions` list: how many entries it had, and the lowest cursor among them.
struct Fold {
    entries: usize,
    lowest: Value,
}

impl<'a> Folding<'a> {
    fn at(self, place: Place) -> Self {
        Folding { place, depth: self.depth + 1, ..self }
    }

    fn parse(self, text: &str) -> serde_json::Result<Value> {
        let mut de = serde_json::Deserializer::from_str(text);
        let value = serde::de::DeserializeSeed::deserialize(self, &mut de)?;
        de.end()?;
        Ok(value)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Folding<'_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        match self.place {
            Place::Plain => Value::deserialize(d),
            _ => d.deserialize_any(self),
        }
    }
}

/// A `partitions` list as it is read: the first `limit` partitions (a partition given again
/// replaces its entry, as when the state is taken in), and past them one more entry, which
/// carries the lowest cursor of the whole list; every other entry is dropped as soon as its
/// cursor counted for the lowest. An entry that is not a partition cursor stops the folding:
/// it and every entry after it are kept as they are (the state is refused when it is taken
/// in, or is not in the host's form).
struct Partitions {
    limit: usize,
    /// False for the other lists of a stream's state (`in_progress`, `done`, `completed`):
    /// they keep their first `limit` entries and drop the rest as they are read (each dropped
    /// entry's partition or range is read again: nothing is lost).
    fold: bool,
}

impl<'de> serde::de::DeserializeSeed<'de> for Partitions {
    type Value = (Value, Option<Fold>);
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Partitions {
    type Value = (Value, Option<Fold>);
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of partition cursors")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut kept: Vec<Value> = Vec::new();
        if !self.fold {
            while kept.len() < self.limit.max(1) {
                let Some(entry) = seq.next_element::<Value>()? else { return Ok((Value::Array(kept), None)) };
                kept.push(entry);
            }
            while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
            return Ok((Value::Array(kept), None));
        }
        let mut index: HashMap<String, usize> = HashMap::new();
        let (mut entries, mut lowest, mut extra, mut foreign) = (0usize, None::<Value>, None::<usize>, false);
        while let Some(entry) = seq.next_element::<Value>()? {
            entries += 1;
            let cursor = entry.get("cursor").filter(|v| is_cursor(v));
            let Some(cursor) = cursor.filter(|_| !foreign) else {
                foreign = true;
                kept.push(entry);
                continue;
            };
            let cursor = cursor.clone();
            if lowest.as_ref().is_none_or(|l| greater(l, &cursor)) {
                lowest = Some(cursor);
            }
            let key = entry.get("partition").map_or_else(|| "null".to_string(), Value::to_string);
            if let Some(&i) = index.get(&key) {
                kept[i] = entry;
            } else if extra.is_none() {
                if index.len() == self.limit {
                    extra = Some(kept.len());
                }
                index.insert(key, kept.len());
                kept.push(entry);
            }
        }
        let (Some(extra), Some(lowest)) = (extra, lowest) else { return Ok((Value::Array(kept), None)) };
        kept[extra]["cursor"] = lowest.clone();
        Ok((Value::Array(kept), Some(Fold { entries, lowest })))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(|v| (v, None))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok((Value::Bool(v), None))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok((Value::from(v), None))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok((Value::String(v.to_string()), None))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok((Value::String(v), None))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok((Value::Null, None))
    }
}

impl<'de> serde::de::Visitor<'de> for Folding<'_> {
    type Value = Value;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        let inner = Folding { depth: self.depth + 1, ..self };
        while let Some(item) = seq.next_element_seed(inner)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = serde_json::Map::new();
        let mut fold = None;
        while let Some(key) = map.next_key::<String>()? {
            // A number, as serde_json's arbitrary precision hands it to a visitor.
            if object.is_empty() && key == "$serde_json::private::Number" {
                let digits: String = map.next_value()?;
                return digits.parse::<serde_json::Number>().map(Value::Number).map_err(serde::de::Error::custom);
            }
            if key == FOLDED_KEY {
                map.next_value::<serde::de::IgnoredAny>()?;
                continue;
            }
            let value = if self.place == Place::Outer && key == "partitions" {
                let (value, folded) = map.next_value_seed(Partitions { limit: self.limit, fold: true })?;
                fold = folded;
                value
            } else if self.place == Place::Outer && matches!(key.as_str(), "in_progress" | "done" | "completed") {
                map.next_value_seed(Partitions { limit: self.limit, fold: false })?.0
            } else {
                map.next_value_seed(self.at(self.place.of(&key, self.depth)))?
            };
            object.insert(key, value);
        }
        if let Some(Fold { entries, lowest }) = fold {
            // Partitions the list no longer names resume from the low-water mark: it is lowered
            // to the lowest cursor, so none resumes past what it read.
            match object.get("low_water") {
                None | Some(Value::Null) => drop(object.insert("low_water".into(), lowest)),
                Some(lw) if is_cursor(lw) && greater(lw, &lowest) => drop(object.insert("low_water".into(), lowest)),
                Some(_) => {}
            }
            object.insert(FOLDED_KEY.into(), Value::from(entries));
            self.folds.set(self.folds.get() + 1);
        }
        Ok(Value::Object(object))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
}

/// Takes every [`FOLDED_KEY`] out of `value` (one left where no stream's state was).
fn strip_folded(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.shift_remove(FOLDED_KEY);
            map.values_mut().for_each(strip_folded);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_folded),
        _ => {}
    }
}

/// Partition cursors a stream's state keeps by default before it falls back to one
/// stream-level cursor (as the Airbyte CDK does at 10,000).
pub const DEFAULT_MAX_PARTITION_CURSORS: usize = 10_000;

/// The kinds of cursor value a stream may use; one stream keeps to one kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CursorKind {
    Number,
    /// An RFC 3339 date-time, compared as an instant.
    DateTime,
    Text,
    /// Not a cursor value at all.
    Other,
}

impl CursorKind {
    pub fn of(v: &Value) -> Self {
        match v {
            Value::Number(_) => CursorKind::Number,
            Value::String(s) if is_datetime(s) => CursorKind::DateTime,
            Value::String(_) => CursorKind::Text,
            _ => CursorKind::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            CursorKind::Number => "a number",
            CursorKind::DateTime => "a date-time",
            CursorKind::Text => "text",
            CursorKind::Other => "not a cursor value",
        }
    }
}

/// Refuses a cursor value of another kind than the one seen before: values of different kinds
/// have no order, so a stream whose cursor changes kind cannot be resumed correctly.
pub fn same_kind(seen: &Value, new: &Value) -> Result<(), String> {
    let (a, b) = (CursorKind::of(seen), CursorKind::of(new));
    if a == b {
        return Ok(());
    }
    Err(format!(
        "the cursor value {new} is {} where earlier values (such as {seen}) were {}: a stream's cursor keeps one kind",
        b.name(),
        a.name()
    ))
}

/// Keeps in `max` the larger of it and `value`, refusing a value of another kind ([`same_kind`]);
/// on an error `max` stays as it was.
pub fn raise_max(max: &mut Option<Value>, value: Value) -> Result<(), String> {
    let mut running = RunningMax {
        max: max.take().map(|m| {
            let kind = CursorKind::of(&m);
            (m, kind)
        }),
    };
    let raised = running.raise(value);
    *max = running.into_value();
    raised
}

/// The state the Airbyte CDK (and Sluice, in Airbyte format) writes at the end of a stream read
/// in full: it says the stream finished, and saves nothing.
pub const NO_CURSOR_STATE_KEY: &str = "__ab_no_cursor_state_message";

/// The state of a stream read in full that finished.
pub fn no_cursor_state() -> Value {
    serde_json::json!({ NO_CURSOR_STATE_KEY: true })
}

/// True for a stream state that saves nothing: `{}`, or the CDK's marks of a finished full
/// read (`__ab_no_cursor_state_message`, `__ab_full_refresh_sync_complete`) alone.
pub fn is_nothing_saved(state: &Value) -> bool {
    state
        .as_object()
        .is_some_and(|o| o.keys().all(|k| k == NO_CURSOR_STATE_KEY || k == "__ab_full_refresh_sync_complete"))
}

/// The largest cursor value of many, with its kind worked out once (a page's records each
/// raise it).
#[derive(Default)]
pub struct RunningMax {
    max: Option<(Value, CursorKind)>,
}

impl RunningMax {
    /// As [`raise_max`].
    pub fn raise(&mut self, value: Value) -> Result<(), String> {
        let kind = CursorKind::of(&value);
        match &self.max {
            Some((max, max_kind)) if *max_kind != kind => same_kind(max, &value),
            Some((max, _)) if compare(&value, max) != Ordering::Greater => Ok(()),
            _ => {
                self.max = Some((value, kind));
                Ok(())
            }
        }
    }

    pub fn into_value(self) -> Option<Value> {
        self.max.map(|(value, _)| value)
    }
}

/// Orders cursor values: numbers by their exact decimal value (integers of any size, decimals
/// of any precision: the host's JSON keeps a number's digits), RFC 3339 date-times as instants
/// (whatever their offsets), other text as text (by code point). Values of different kinds are
/// equal here (so none replaces another); the read path refuses them before they reach a state
/// ([`same_kind`]).
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => compare_decimals(&x.to_string(), &y.to_string()),
        },
        (Value::String(x), Value::String(y)) if same_utc_shape(x, y) => x.cmp(y),
        (Value::String(x), Value::String(y)) => match (parse_datetime(x), parse_datetime(y)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x.cmp(y),
        },
        // Mixed kinds cannot be ordered meaningfully; keep the saved one.
        _ => Ordering::Equal,
    }
}

/// True when both are `YYYY-MM-DDTHH:MM:SS[.f…]Z` of one length: then their text order is their
/// order as instants (and, were either no valid date-time, the text order is the order anyway),
/// so the running max of a stream's cursor costs no parsing for the usual UTC values.
fn same_utc_shape(x: &str, y: &str) -> bool {
    x.len() == y.len() && utc_shape(x.as_bytes()) && utc_shape(y.as_bytes())
}

/// True for an RFC 3339 date-time; a UTC one in the usual shape is checked without parsing it
/// (every record of an incremental stream asks).
fn is_datetime(text: &str) -> bool {
    let t = text.as_bytes();
    if !utc_shape(t) || t.len() > 30 {
        return parse_datetime(text).is_some();
    }
    let number = |range: std::ops::Range<usize>| t[range].iter().fold(0u32, |n, &c| n * 10 + u32::from(c - b'0'));
    let (year, month, day) = (number(0..4), number(5..7), number(8..10));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    let valid = (1..=days).contains(&day) && number(11..13) < 24 && number(14..16) < 60;
    // A leap second (60) is left to the parser.
    match number(17..19) {
        s if s < 60 => valid,
        _ => valid && parse_datetime(text).is_some(),
    }
}

/// `YYYY-MM-DDTHH:MM:SS[.f…]Z`, digits where digits go.
fn utc_shape(t: &[u8]) -> bool {
    t.len() >= 20
        && t[t.len() - 1] == b'Z'
        && t.iter().take(19).enumerate().all(|(i, &c)| match i {
            4 | 7 => c == b'-',
            10 => c == b'T',
            13 | 16 => c == b':',
            _ => c.is_ascii_digit(),
        })
        && (t.len() == 20 || t.len() > 21 && t[19] == b'.' && t[20..t.len() - 1].iter().all(u8::is_ascii_digit))
}

/// Compares two JSON number texts by their exact values.
fn compare_decimals(a: &str, b: &str) -> Ordering {
    match (Decimal::parse(a), Decimal::parse(b)) {
        (Some(a), Some(b)) => a.cmp(&b),
        // Not JSON numbers (never, for parsed values): as text, so the order stays total.
        _ => a.cmp(b),
    }
}

/// A number as sign, significant digits and exponent: `0.DIGITS x 10^exponent`, the digits
/// without leading or trailing zeros (none for zero).
#[derive(PartialEq, Eq)]
struct Decimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i128,
}

impl Decimal {
    fn parse(text: &str) -> Option<Decimal> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
            Some(at) => (&unsigned[..at], unsigned[at + 1..].trim_start_matches('+')),
            None => (unsigned, "0"),
        };
        // An exponent too large for i64 is beyond any real cursor; saturate it.
        let exponent: i128 = match exponent.parse::<i64>() {
            Ok(e) => e.into(),
            Err(_) if exponent.starts_with('-') && exponent[1..].bytes().all(|c| c.is_ascii_digit()) => i64::MIN.into(),
            Err(_) if !exponent.is_empty() && exponent.bytes().all(|c| c.is_ascii_digit()) => i64::MAX.into(),
            Err(_) => return None,
        };
        let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
        if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
            return None;
        }
        let all: Vec<u8> = int.bytes().chain(frac.bytes()).collect();
        let leading = all.iter().take_while(|&&c| c == b'0').count();
        let mut digits = all[leading..].to_vec();
        while digits.last() == Some(&b'0') {
            digits.pop();
        }
        let exponent = if digits.is_empty() { 0 } else { int.len() as i128 - leading as i128 + exponent };
        Some(Decimal { negative: negative && !digits.is_empty(), digits, exponent })
    }
}

impl Ord for Decimal {
    fn cmp(&self, other: &Self) -> Ordering {
        let magnitude = |d: &Decimal| (!d.digits.is_empty(), d.exponent, d.digits.clone());
        match (self.negative, other.negative) {
            (false, true) => Ordering::Greater,
            (true, false) => Ordering::Less,
            (false, false) => magnitude(self).cmp(&magnitude(other)),
            (true, true) => magnitude(other).cmp(&magnitude(self)),
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An RFC 3339 date-time, or one whose offset has no colon (`+0000`, as Python's `%z` writes it:
/// a manifest's cursor format may write partition bounds so while its records say `+00:00`).
pub fn parse_datetime(text: &str) -> Option<time::OffsetDateTime> {
    let rfc3339 = |t: &str| time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok();
    rfc3339(text).or_else(|| {
        let b = text.as_bytes();
        let n = b.len();
        let basic_offset = n > 20 && matches!(b[n - 5], b'+' | b'-') && b[n - 4..].iter().all(u8::is_ascii_digit);
        basic_offset.then(|| rfc3339(&format!("{}:{}", &text[..n - 2], &text[n - 2..]))).flatten()
    })
}

/// The value at `path` in a record, if it is a usable cursor (a number or a string).
pub fn cursor_of(record: &Value, path: &[String]) -> Option<Value> {
    let mut v = record;
    for part in path {
        v = v.get(part)?;
    }
    matches!(v, Value::Number(_) | Value::String(_)).then(|| v.clone())
}

/// [`cursor_of`] on a record's JSON text, parsing only the objects on the path (records are
/// often large, and every record of an incremental stream goes through this).
pub fn cursor_in_text(text: &str, path: &[String]) -> Option<Value> {
    use serde_json::value::RawValue;
    let Some((first, rest)) = path.split_first() else {
        let value: Value = serde_json::from_str(text).ok()?;
        return matches!(value, Value::Number(_) | Value::String(_)).then_some(value);
    };
    // Keys with escapes cannot be borrowed: fall back to parsing the whole value.
    match serde_json::from_str::<std::collections::HashMap<&str, &RawValue>>(text) {
        Ok(fields) => cursor_in_text(fields.get(first.as_str())?.get(), rest),
        Err(_) => cursor_of(&serde_json::from_str(text).ok()?, path),
    }
}

/// The cursors of one incremental stream.
///
/// Partitions come in two kinds. An open-ended partition (a parent id, say) keeps its own
/// cursor: the largest value among its written records. A bounded partition, whose cursor range
/// has an end (a date window), is recorded as a finished range `(start, end]` when all its records
/// are written; ranges merge into a low-water mark below which everything is done, and finished
/// ranges beyond it are kept so a resumed run skips them. A failed partition's range is never
/// recorded, so the low-water mark stays behind it.
#[derive(Debug, Clone)]
pub struct StreamCursor {
    field: Vec<String>,
    partitions: BTreeMap<String, (Value, Value)>,
    /// Everything at or below it is finished. An older simple state (`{"updated_at": ...}`)
    /// becomes the low-water mark, so it also applies to every partition and is kept.
    low_water: Option<Value>,
    /// Finished ranges above the low-water mark: sorted, disjoint, not touching; each with the
    /// newest cursor value its records had.
    completed: Vec<(Value, Value, Option<Value>)>,
    /// The newest cursor value of the records below the low-water mark (bounded partitions),
    /// as the record wrote it: the bookmark a finished sync hands the next one, never past a
    /// record read (see [`StreamCursor::stream_finished`]).
    newest: Option<Value>,
    /// Where the bounded partitions started when this run began: the saved low-water mark, or
    /// the lowest start listed.
    floor: Option<Value>,
    /// The stream has bounded partitions (a range finished, or finished ranges were saved).
    bounded: bool,
    /// An open-ended partition of this run wrote a record with a cursor value.
    read_any: bool,
    /// Past this many partition cursors the state falls back to one stream-level cursor.
    max_partitions: usize,
    /// Set once the state fell back: the lowest cursor among this run's finished partitions,
    /// which becomes the stream-level cursor when every partition finished.
    collapsed: Option<Option<Value>>,
    /// The saved state had more partition cursors than `max_partitions` (how many entries its
    /// list had): they were folded into the stream-level cursor as they were read.
    folded_saved: Option<usize>,
}

/// What to do with a bounded partition, given what is already finished.
#[derive(Debug, Clone, PartialEq)]
pub enum Resume {
    /// Nothing of it is finished.
    Read,
    /// Everything up to this value is finished: start there.
    From(Value),
    /// All of it is finished.
    Skip,
}

fn is_cursor(v: &Value) -> bool {
    matches!(v, Value::Number(_) | Value::String(_))
}

fn greater(a: &Value, b: &Value) -> bool {
    compare(a, b) == Ordering::Greater
}

/// The newer of two optional cursor values (the first on a tie, so a record's own text stays).
fn newer(a: Option<Value>, b: Option<Value>) -> Option<Value> {
    match (a, b) {
        (Some(a), Some(b)) => Some(if greater(&b, &a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

impl StreamCursor {
    /// The cursors of `stream` from its saved state, keeping at most
    /// [`DEFAULT_MAX_PARTITION_CURSORS`] partition cursors (see [`StreamCursor::with_limit`]).
    pub fn new(stream: &str, field: Vec<String>, saved: Option<&Value>) -> Result<Self> {
        Self::with_limit(stream, field, saved, DEFAULT_MAX_PARTITION_CURSORS)
    }

    /// The cursors of `stream` from its saved state, keeping at most `max_partitions` partition
    /// cursors, in the saved state as in this run. A saved state with more is folded into one
    /// stream-level cursor as its list is read, the same way a run falls back when it passes the
    /// limit ([`StreamCursor::complete`]): the lowest of the saved cursors (and the saved
    /// low-water mark) becomes the low-water mark every partition resumes from, so no partition
    /// resumes past what it read, and no more than `max_partitions + 1` cursors are ever held (a
    /// hostile state of a million of them used to be kept whole, and written back in every
    /// STATE). [`StreamCursor::saved_fell_back`] says it happened.
    pub fn with_limit(stream: &str, field: Vec<String>, saved: Option<&Value>, max_partitions: usize) -> Result<Self> {
        let mut cursor = StreamCursor {
            field,
            partitions: BTreeMap::new(),
            low_water: None,
            completed: Vec::new(),
            newest: None,
            floor: None,
            bounded: false,
            read_any: false,
            max_partitions,
            collapsed: None,
            folded_saved: None,
        };
        // `{}` is the state of a stream with nothing saved yet (it is what a stream whose last
        // job was done with says), and so is the Airbyte CDK's mark of a finished full read.
        let Some(saved) = saved.filter(|s| !is_nothing_saved(s)) else { return Ok(cursor) };
        // `jobs` (report jobs in flight) is the scheduler's; a state holding only it has no cursor yet.
        // A state with only `cursor_field` (a stream that has not finished a partition yet) has no
        // cursor either.
        let known = ["partitions", "low_water", "completed", "newest", "jobs", "cursor_field"]
            .iter()
            .any(|k| saved.get(k).is_some());
        if !known {
            return match cursor_of(saved, &cursor.field) {
                Some(value) => {
                    cursor.low_water = Some(value);
                    cursor.floor = cursor.low_water.clone();
                    Ok(cursor)
                }
                None => bail!(
                    "state of stream {stream:?} is not in a form Sluice knows (expected \"partitions\", \"low_water\" \
                     or a \"{}\" cursor): {}",
                    cursor.field.join("."),
                    crate::data::protocol::preview(&saved.to_string())
                ),
            };
        }
        let fail = |what: String| anyhow!("state of stream {stream:?}: {what}");
        // The lowest saved partition cursor, for when there are too many to keep.
        let lowest = match saved.get("partitions") {
            Some(list) => cursor.take_saved_partitions(list).map_err(fail)?,
            None => None,
        };
        match saved.get("low_water") {
            None | Some(Value::Null) => {}
            Some(v) if is_cursor(v) => cursor.low_water = Some(v.clone()),
            Some(v) => return Err(fail(format!("\"low_water\" must be a number or a string, not {}", kind(v)))),
        }
        if cursor.folded_saved.is_some() {
            cursor.low_water = match (lowest.clone(), cursor.low_water.take()) {
                (Some(l), Some(lw)) => Some(if greater(&l, &lw) { lw } else { l }),
                (l, lw) => l.or(lw),
            };
        }
        match saved.get("newest") {
            None | Some(Value::Null) => {}
            Some(v) if is_cursor(v) => cursor.newest = Some(v.clone()),
            Some(v) => return Err(fail(format!("\"newest\" must be a number or a string, not {}", kind(v)))),
        }
        cursor.floor = cursor.low_water.clone();
        if let Some(list) = saved.get("completed") {
            cursor.take_saved_completed(list).map_err(fail)?;
        }
        // A finished range starting at the mark raises it to the range's end; a folded state's
        // mark must stay at or below its lowest partition cursor (a partition folded at 10 with
        // a range [0, 100] finished would resume from 100 and lose (10, 100]): re-read, never
        // skipped.
        if cursor.folded_saved.is_some()
            && let (Some(l), Some(lw)) = (lowest.as_ref(), cursor.low_water.as_ref())
            && greater(lw, l)
        {
            cursor.low_water = Some(l.clone());
        }
        // As when a run falls back: the stream-level cursor rises to the lowest cursor the
        // partitions reach once every one finished. A stream with finished ranges (bounded
        // partitions) never rises so (the low-water mark means everything below is finished
        // there): it keeps the lowest, and re-reads, never skips.
        if cursor.folded_saved.is_some() && cursor.completed.is_empty() {
            cursor.collapsed = Some(lowest);
        }
        Ok(cursor)
    }

    /// The saved `partitions` list, kept up to the limit (past it, folded: none kept, the count
    /// remembered); answers the lowest cursor among all of them.
    fn take_saved_partitions(&mut self, list: &Value) -> std::result::Result<Option<Value>, String> {
        let list = list.as_array().ok_or_else(|| "\"partitions\" must be an array".to_string())?;
        let mut lowest: Option<Value> = None;
        for (i, entry) in list.iter().enumerate() {
            let value = entry
                .get("cursor")
                .filter(|v| is_cursor(v))
                .ok_or_else(|| format!("partitions[{i}] has no \"cursor\" (a number or a string)"))?;
            let value = value.clone();
            if lowest.as_ref().is_none_or(|l| greater(l, &value)) {
                lowest = Some(value.clone());
            }
            if self.folded_saved.is_some() {
                continue;
            }
            let key = entry.get("partition").cloned().unwrap_or(Value::Null);
            self.partitions.insert(key.to_string(), (key, value));
            if self.partitions.len() > self.max_partitions {
                self.partitions.clear();
                self.folded_saved = Some(list.len());
            }
        }
        Ok(lowest)
    }

    /// The saved `completed` ranges, merged in. At most as many as partition cursors: each is
    /// merged into the sorted list (a hostile 64 MiB state of 10 million ranges cost hours).
    /// Dropping a finished range loses nothing: it is read again.
    fn take_saved_completed(&mut self, list: &Value) -> std::result::Result<(), String> {
        let list = list.as_array().ok_or_else(|| "\"completed\" must be an array".to_string())?;
        for (i, range) in list.iter().enumerate().take(self.max_partitions.max(1)) {
            match range.as_array().map(Vec::as_slice) {
                Some([a, b]) if is_cursor(a) && is_cursor(b) && !greater(a, b) => self.complete_range(Some(a), b, None),
                Some([a, b, n]) if is_cursor(a) && is_cursor(b) && is_cursor(n) && !greater(a, b) => {
                    self.complete_range(Some(a), b, Some(n.clone()))
                }
                _ => {
                    return Err(format!(
                        "completed[{i}] must be [start, end] or [start, end, newest] cursor values, got {range}"
                    ));
                }
            }
        }
        Ok(())
    }

    /// How many partition cursors the saved state had, when they were more than the limit and
    /// were folded into the stream-level cursor ([`StreamCursor::with_limit`]).
    pub fn saved_fell_back(&self) -> Option<usize> {
        self.folded_saved
    }

    pub fn field(&self) -> &[String] {
        &self.field
    }

    /// Where an open-ended partition resumes: its saved cursor, else the low-water mark.
    #[cfg(test)]
    pub fn start_for(&self, key: &Value) -> Option<&Value> {
        self.start_for_key(&key.to_string())
    }

    /// Where an open-ended partition resumes, by its key in compact text (as the listing hands
    /// keys over): its saved cursor, else the low-water mark.
    pub fn start_for_key(&self, key: &str) -> Option<&Value> {
        self.partitions.get(key).map(|(_, v)| v).or(self.low_water.as_ref())
    }

    /// Records that an open-ended partition was fully written up to `max_seen`, from its saved
    /// start. True when this made the state fall back to a stream-level cursor (more partition
    /// cursors than allowed). The tests' shorthand of [`StreamCursor::complete_from`].
    #[cfg(test)]
    pub fn complete(&mut self, key: &Value, max_seen: Option<Value>) -> bool {
        self.complete_from(&key.to_string(), None, max_seen)
    }

    /// [`StreamCursor::complete`] for a partition read from `start` (its cursor range's start
    /// as it was read: the saved cursor, or a later one the connector chose): a partition that
    /// wrote nothing keeps that start, so one listed with a start of its own is recorded even
    /// in a first sync. `key` is the partition's key in its compact text.
    pub fn complete_from(&mut self, key: &str, start: Option<&Value>, max_seen: Option<Value>) -> bool {
        self.read_any |= max_seen.is_some();
        let start = start.or(self.start_for_key(key)).cloned();
        let best = match (start, max_seen) {
            (Some(a), Some(b)) => Some(if greater(&b, &a) { b } else { a }),
            (a, b) => a.or(b),
        };
        let Some(best) = best else { return false };
        if let Some(lowest) = self.collapsed.as_mut() {
            if lowest.as_ref().is_none_or(|l| greater(l, &best)) {
                *lowest = Some(best);
            }
            return false;
        }
        let parsed = serde_json::from_str(key).unwrap_or(Value::Null);
        self.partitions.insert(key.to_string(), (parsed, best));
        // Bounded partitions' ranges rely on the low-water mark meaning "all finished below":
        // only a stream of open-ended partitions falls back.
        if self.partitions.len() <= self.max_partitions || !self.completed.is_empty() {
            return false;
        }
        let lowest_of =
            |values: &mut dyn Iterator<Item = Value>| values.reduce(|a, b| if greater(&a, &b) { b } else { a });
        // The lowest cursor this run's finished partitions reached, and (for what a STATE says
        // meanwhile) the lowest start of any partition, unfinished ones included.
        let reached = lowest_of(&mut self.partitions.values().map(|(_, v)| v.clone()));
        let lowest = lowest_of(&mut reached.clone().into_iter().chain(self.low_water.clone()));
        self.partitions.clear();
        self.collapsed = Some(reached);
        self.low_water = lowest;
        true
    }

    /// Partition cursors kept before the state falls back to a stream-level cursor.
    pub fn max_partitions(&self) -> usize {
        self.max_partitions
    }

    /// Entries of the state (partition cursors, finished ranges, the low-water mark): what one
    /// STATE of the stream costs.
    pub fn entries(&self) -> usize {
        self.partitions.len() + self.completed.len() + 1
    }

    /// The stream ended; `complete` when every partition was read. A state that fell back
    /// raises its stream-level cursor to the lowest that this run's partitions reached (only
    /// when all of them finished: a failed one must resume from where it was).
    ///
    /// A stream of bounded partitions (windows) that was read completely hands the next sync the
    /// newest cursor value it read, not the end of its last window: a record that becomes visible
    /// later with a cursor value between the two (late data, replication lag) is then still read,
    /// as the Airbyte CDK reads it. With no record read at all, the bookmark stays where this run
    /// started. The finished windows themselves only serve resuming inside a sync.
    pub fn stream_finished(&mut self, complete: bool) {
        if let (true, Some(Some(lowest))) = (complete, self.collapsed.take()) {
            self.raise_low_water(lowest, None);
        }
        // Open-ended partitions: `newest` is the newest cursor of every partition, once a run read
        // them all and something was read (the CDK's global cursor of a per-partition state).
        if complete && !self.bounded && self.read_any {
            let newest =
                self.partitions.values().map(|(_, v)| v.clone()).fold(self.newest.take(), |n, v| newer(n, Some(v)));
            self.newest = newest;
        }
        if complete && self.bounded && self.completed.is_empty() {
            let bookmark = match (&self.newest, &self.floor) {
                (Some(n), Some(f)) if greater(f, n) => Some(f.clone()),
                (Some(n), _) => Some(n.clone()),
                (None, f) => f.clone(),
            };
            if let Some(b) = bookmark
                && self.low_water.as_ref().is_some_and(|lw| greater(lw, &b))
            {
                self.low_water = Some(b);
            }
        }
    }

    /// What is already finished of the bounded partition `(start, end]`.
    pub fn resume(&self, start: Option<&Value>, end: &Value) -> Resume {
        let done_until = match start {
            None => self.low_water.clone(),
            Some(s) => self.covered_from(s),
        };
        match done_until {
            Some(d) if !greater(end, &d) => Resume::Skip,
            Some(d) if start.is_none_or(|s| greater(&d, s)) => Resume::From(d),
            _ => Resume::Read,
        }
    }

    /// The end of the finished run that covers the values just after `start`, if any. Ranges
    /// are disjoint and never touch each other or the low-water mark, so there is no chain.
    fn covered_from(&self, start: &Value) -> Option<Value> {
        if let Some(lw) = self.low_water.as_ref().filter(|lw| !greater(start, lw)) {
            return Some(lw.clone());
        }
        self.completed.iter().find(|(a, b, _)| !greater(a, start) && greater(b, start)).map(|(_, b, _)| b.clone())
    }

    /// Records that the bounded partition `(start, end]` was fully written, its newest record's
    /// cursor being `newest`. A `None` start means the range reaches down to everything.
    pub fn complete_range(&mut self, start: Option<&Value>, end: &Value, newest: Option<Value>) {
        self.bounded = true;
        self.add_range(start, end, newest);
    }

    fn add_range(&mut self, start: Option<&Value>, end: &Value, newest: Option<Value>) {
        let Some(start) = start else {
            self.raise_low_water(end.clone(), newest);
            return;
        };
        if self.low_water.as_ref().is_some_and(|lw| !greater(start, lw)) {
            // Within or touching the finished part below the mark.
            self.raise_low_water(end.clone(), newest);
            return;
        }
        let (mut a, mut b, mut n) = (start.clone(), end.clone(), newest);
        // The ranges are sorted and disjoint, so those it overlaps or touches are one run of
        // them, found by binary search (a scan and a sort per range made a saved state of many
        // ranges cost the square of their number).
        let first = self.completed.partition_point(|(_, y, _)| greater(&a, y));
        let last = self.completed.partition_point(|(x, _, _)| !greater(x, &b)).max(first);
        for (x, y, m) in self.completed.drain(first..last) {
            if greater(&a, &x) {
                a = x;
            }
            if greater(&y, &b) {
                b = y;
            }
            n = newer(n, m);
        }
        self.completed.insert(first, (a, b, n));
    }

    /// Everything up to `value` is finished, its records' newest cursor being `newest`; absorbs
    /// the ranges it reaches.
    fn raise_low_water(&mut self, value: Value, newest: Option<Value>) {
        let mut lw = match self.low_water.take() {
            Some(old) if greater(&old, &value) => old,
            _ => value,
        };
        let mut n = newer(self.newest.take(), newest);
        // Absorbs the ranges it reaches, in order (they are sorted), each reaching further;
        // taken out together at the end, not one shift of the list each.
        let mut reached = 0;
        for (a, b, m) in &self.completed {
            if greater(a, &lw) {
                break;
            }
            if greater(b, &lw) {
                lw = b.clone();
            }
            n = newer(n, m.clone());
            reached += 1;
        }
        self.completed.drain(..reached);
        self.low_water = Some(lw);
        self.newest = n;
    }

    /// Takes in what another shard's state of the same stream says is finished ([`crate::run::shard`]):
    /// each partition's cursor the larger of the two, the finished ranges and low-water marks
    /// together (each says a true thing of the sync, so their union does too).
    pub fn merge_from(&mut self, other: &StreamCursor) {
        for (text, (key, value)) in &other.partitions {
            match self.partitions.get_mut(text) {
                Some((_, mine)) if !greater(value, mine) => {}
                Some((_, mine)) => *mine = value.clone(),
                None => drop(self.partitions.insert(text.clone(), (key.clone(), value.clone()))),
            }
        }
        if let Some(lw) = &other.low_water {
            self.raise_low_water(lw.clone(), other.newest.clone());
        } else {
            self.newest = newer(self.newest.take(), other.newest.clone());
        }
        for (a, b, n) in &other.completed {
            self.add_range(Some(a), b, n.clone());
        }
        self.bounded |= other.bounded;
    }

    /// The shards' merged state is a finished sync's: as [`StreamCursor::stream_finished`] does
    /// for a run that read every partition, the bookmark is the newest cursor read: over every
    /// partition (open-ended partitions), or (windows read without a gap) the low-water mark
    /// comes down to it.
    pub fn merged_finished(&mut self) {
        if !self.partitions.is_empty() {
            let newest =
                self.partitions.values().map(|(_, v)| v.clone()).fold(self.newest.take(), |n, v| newer(n, Some(v)));
            self.newest = newest;
        } else if self.completed.is_empty()
            && let (Some(n), Some(lw)) = (&self.newest, &self.low_water)
            && greater(lw, n)
        {
            self.low_water = Some(n.clone());
        }
    }

    /// Once every bounded partition of this run is known, nothing below the lowest start is
    /// this stream's to read: the low-water mark can start there.
    pub fn listing_complete(&mut self, lowest_start: Option<&Value>) {
        if self.low_water.is_none()
            && let Some(start) = lowest_start
        {
            self.floor = Some(start.clone());
            self.raise_low_water(start.clone(), None);
        }
    }

    /// Refuses a value of another kind than the stream's saved cursor values.
    pub fn check_kind(&self, value: &Value) -> Result<(), String> {
        let seen = self
            .low_water
            .iter()
            .chain(self.partitions.values().map(|(_, v)| v))
            .chain(self.completed.iter().map(|(a, _, _)| a));
        match seen.into_iter().next() {
            Some(seen) => same_kind(seen, value),
            None => Ok(()),
        }
    }

    pub fn to_state(&self) -> Value {
        let mut state = json!({"cursor_field": self.field});
        if !self.partitions.is_empty() {
            // Built by hand, not with `json!`, which copies each value through a serializer: a
            // STATE may list 100,000 partitions.
            let entry = |(key, cursor): &(Value, Value)| {
                let mut entry = serde_json::Map::with_capacity(2);
                entry.insert("partition".to_string(), key.clone());
                entry.insert("cursor".to_string(), cursor.clone());
                Value::Object(entry)
            };
            state["partitions"] = Value::Array(self.partitions.values().map(entry).collect());
        }
        if let Some(lw) = &self.low_water {
            state["low_water"] = lw.clone();
        }
        if let Some(n) = &self.newest {
            state["newest"] = n.clone();
        }
        if !self.completed.is_empty() {
            let ranges = self.completed.iter().map(|(a, b, n)| match n {
                Some(n) => json!([a, b, n]),
                None => json!([a, b]),
            });
            state["completed"] = json!(ranges.collect::<Vec<_>>());
        }
        state
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Numbers in order by exact value, whatever their size or spelling, and the largest kept
    /// with its digits.
    #[test]
    fn numbers_compare_exactly_at_any_size() {
        let ascending = [
            "-1e400",
            "-9223372036854775809",
            "-9223372036854775808",
            "-1.5",
            "-0.0000001",
            "0",
            "1e-400",
            "0.1",
            "0.10000000000000001",
            "1",
            "9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "1.8446744073709551617e19",
            "1e400",
        ];
        let values: Vec<Value> = ascending.iter().map(|t| serde_json::from_str(t).unwrap()).collect();
        for (i, a) in values.iter().enumerate() {
            for (j, b) in values.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a} vs {b}");
            }
        }
        for (a, b) in [("100", "1e2"), ("-0", "0"), ("0.50", "5e-1"), ("1.0", "1")] {
            let (a, b): (Value, Value) = (serde_json::from_str(a).unwrap(), serde_json::from_str(b).unwrap());
            assert_eq!(compare(&a, &b), Ordering::Equal, "{a} vs {b}");
        }
        let mut max = None;
        for text in ["-9223372036854775809", "18446744073709551616", "12"] {
            raise_max(&mut max, serde_json::from_str(text).unwrap()).unwrap();
        }
        assert_eq!(max.unwrap().to_string(), "18446744073709551616");
        // A page's running max agrees, and refuses a change of kind the same way.
        let mut running = RunningMax::default();
        for text in ["-9223372036854775809", "18446744073709551616", "12"] {
            running.raise(serde_json::from_str(text).unwrap()).unwrap();
        }
        assert_eq!(running.into_value().unwrap().to_string(), "18446744073709551616");
        let mut running = RunningMax::default();
        running.raise(json!("2024-01-01T00:00:00Z")).unwrap();
        let err = running.raise(json!("2024-02-30T00:00:00Z")).unwrap_err();
        assert_eq!(err, same_kind(&json!("2024-01-01T00:00:00Z"), &json!("2024-02-30T00:00:00Z")).unwrap_err());
    }

    /// The check without parsing agrees with the parser.
    #[test]
    fn utc_date_times_are_recognised_as_the_parser_does() {
        let mut rng = fastrand::Rng::with_seed(7);
        let two = |rng: &mut fastrand::Rng, max: u32| format!("{:02}", rng.u32(0..=max));
        for _ in 0..20_000 {
            let year = [rng.u32(1900..2100), rng.u32(0..10_000), 2000, 1900][rng.usize(..4)];
            let fraction = ["", ".5", ".123456789", ".", ".1234567890123"][rng.usize(..5)];
            let text = format!(
                "{year:04}-{}-{}T{}:{}:{}{fraction}Z",
                two(&mut rng, 13),
                two(&mut rng, 32),
                two(&mut rng, 25),
                two(&mut rng, 61),
                two(&mut rng, 61)
            );
            assert_eq!(is_datetime(&text), parse_datetime(&text).is_some(), "{text}");
        }
        for text in ["2024-02-29T00:00:00Z", "2023-02-29T00:00:00Z", "2000-02-29T23:59:59Z", "1900-02-29T00:00:00Z"] {
            assert_eq!(is_datetime(text), parse_datetime(text).is_some(), "{text}");
        }
    }

    /// The text fast path for UTC date-times agrees with comparing them as instants.
    #[test]
    fn utc_date_times_compare_as_instants() {
        let texts = [
            "2024-01-01T00:00:00Z",
            "2024-01-01T00:00:01Z",
            "2024-01-01T00:00:00.5Z",
            "2024-01-01T00:00:00.25Z",
            "2024-02-01T09:00:00+09:00",
            "2023-12-31T23:59:59Z",
            "not a date at all, 20 c",
        ];
        for a in texts {
            for b in texts {
                let (va, vb) = (Value::from(a), Value::from(b));
                let expected = match (parse_datetime(a), parse_datetime(b)) {
                    (Some(x), Some(y)) => x.cmp(&y),
                    _ => a.cmp(b),
                };
                assert_eq!(compare(&va, &vb), expected, "{a} vs {b}");
            }
        }
    }

    #[test]
    fn cursors_in_text_match_cursors_in_values() {
        let path = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        for (text, field) in [
            (r#"{"id":1,"updated_at":"2024-01-01T00:00:00Z","big":[1,2,3]}"#, path(&["updated_at"])),
            (r#"{"meta":{"seq":42},"x":"y"}"#, path(&["meta", "seq"])),
            (r#"{"a\"b":{"c":7},"d":null}"#, path(&["a\"b", "c"])),
            (r#"{"d":null}"#, path(&["d"])),
            (r#"{"d":{"e":[1]}}"#, path(&["d", "e"])),
            (r#"{"d":1}"#, path(&["missing"])),
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(cursor_in_text(text, &field), cursor_of(&value, &field), "{text}");
        }
    }

    #[test]
    fn accepts_airbyte_forms() {
        let per_stream = r#"[{"type":"STREAM","stream":{"stream_descriptor":{"name":"a","namespace":null},"stream_state":{"x":1}},"extra":true}]"#;
        assert_eq!(InputState::parse(per_stream).unwrap().streams["a"], json!({"x": 1}));
        let global = r#"{"type":"GLOBAL","global":{"shared_state":{},"stream_states":[{"stream_descriptor":{"name":"b"},"stream_state":{"y":2}}]}}"#;
        assert_eq!(InputState::parse(global).unwrap().streams["b"], json!({"y": 2}));
        let legacy = r#"{"a":{"z":3},"n":null}"#;
        let s = InputState::parse(legacy).unwrap();
        assert_eq!(s.streams["a"], json!({"z": 3}));
        assert!(!s.streams.contains_key("n"));
        let lines = "{\"type\":\"RECORD\",\"record\":{}}\n{\"type\":\"STATE\",\"state\":{\"type\":\"STREAM\",\"stream\":{\"stream_descriptor\":{\"name\":\"a\"},\"stream_state\":{\"v\":1}}}}\n{\"type\":\"STATE\",\"state\":{\"type\":\"STREAM\",\"stream\":{\"stream_descriptor\":{\"name\":\"a\"},\"stream_state\":{\"v\":2}}}}\n";
        assert_eq!(InputState::parse(lines).unwrap().streams["a"], json!({"v": 2}));
        assert!(InputState::parse("").unwrap().streams.is_empty());
    }

    #[test]
    fn malformed_state_is_named() {
        let e = InputState::parse("[{\"type\":\"STREAM\",\"stream\":{}}]").unwrap_err();
        assert!(format!("{e:#}").contains("stream_descriptor.name"), "{e:#}");
        let e = InputState::parse("42").unwrap_err();
        assert!(e.to_string().contains("array or object"));
        let e = InputState::parse("{not json").unwrap_err();
        assert!(e.to_string().contains("not valid JSON"), "{e}");
        let e = InputState::parse(r#"{"a": [1]}"#).unwrap_err();
        assert!(e.to_string().contains("must be a JSON object"));
        let e = InputState::parse(r#"[{"type":"WEIRD"}]"#).unwrap_err();
        assert!(format!("{e:#}").contains("unknown state type"), "{e:#}");
    }

    /// Random partitions and cursor values, of each kind: every state the host writes parses back
    /// to the same state.
    #[test]
    fn every_saved_state_round_trips() {
        let mut rng = fastrand::Rng::with_seed(16);
        let value = |rng: &mut fastrand::Rng, kind: u8| -> Value {
            let n = rng.i64(-1_000_000..1_000_000);
            match kind {
                // Integers past 64 bits and decimals too: saved with every digit.
                0 => match rng.u8(..3) {
                    0 => json!(n),
                    1 => serde_json::from_str(&format!("{n}{:020}", rng.u64(..))).unwrap(),
                    _ => serde_json::from_str(&format!("{n}.{:07}1", rng.u32(..10_000_000))).unwrap(),
                },
                1 => {
                    let offset = ["Z", "+09:00", "-05:30", "+00:00"][rng.usize(..4)];
                    let secs = 1_700_000_000 + n;
                    let t = time::OffsetDateTime::from_unix_timestamp(secs).unwrap();
                    let text = t.format(&time::format_description::well_known::Rfc3339).unwrap();
                    json!(format!("{}{offset}", &text[..19]))
                }
                _ => json!(format!("v{n:08}")),
            }
        };
        for round in 0..300 {
            let kind = (round % 3) as u8;
            let mut cursor = StreamCursor::new("s", vec!["c".into()], None).unwrap();
            for _ in 0..rng.usize(0..40) {
                match rng.u8(..3) {
                    0 => {
                        let key = json!({"p": rng.u8(..10), "name": format!("k\"{}", rng.u8(..3))});
                        let seen = rng.bool().then(|| value(&mut rng, kind));
                        cursor.complete(&key, seen);
                    }
                    1 => {
                        let (a, b) = (value(&mut rng, kind), value(&mut rng, kind));
                        let (a, b) = if compare(&a, &b) == Ordering::Greater { (b, a) } else { (a, b) };
                        cursor.complete_range(rng.bool().then_some(&a), &b, None);
                    }
                    _ => cursor.listing_complete(Some(&value(&mut rng, kind))),
                }
            }
            let state = cursor.to_state();
            let text = serde_json::to_string(&state).unwrap();
            let back = StreamCursor::new("s", vec!["c".into()], Some(&serde_json::from_str(&text).unwrap()))
                .unwrap_or_else(|e| panic!("round {round}: {e:#}: {text}"));
            assert_eq!(back.to_state(), state, "round {round}");
        }
    }

    #[test]
    fn datetimes_are_saved_as_written_and_ordered_as_instants() {
        let mut cursor = StreamCursor::new("s", vec!["c".into()], None).unwrap();
        let key = json!({"a": 1});
        cursor.complete(&key, Some(json!("2024-01-01T05:00:00Z")));
        // 10:00 at +09:00 is 01:00Z: earlier, so the cursor stays.
        cursor.complete(&key, Some(json!("2024-01-01T10:00:00+09:00")));
        assert_eq!(cursor.start_for(&key), Some(&json!("2024-01-01T05:00:00Z")));
        // 15:00 at +09:00 is 06:00Z: later, kept with the offset the API wrote (as the Airbyte
        // CDK keeps a record's offset in its state).
        cursor.complete(&key, Some(json!("2024-01-01T15:00:00+09:00")));
        assert_eq!(cursor.start_for(&key), Some(&json!("2024-01-01T15:00:00+09:00")));
        let back = StreamCursor::new("s", vec!["c".into()], Some(&cursor.to_state())).unwrap();
        assert_eq!(back.start_for(&key), Some(&json!("2024-01-01T15:00:00+09:00")));
        assert!(same_kind(&json!("9"), &json!(10)).unwrap_err().contains("is a number where earlier values"));
        assert!(cursor.check_kind(&json!(5)).is_err());
        // An offset without its colon (Python's %z) is a date-time too, of the same instant.
        same_kind(&json!("2024-01-01T00:00:00+0000"), &json!("2024-04-10T16:20:00+00:00")).unwrap();
        assert_eq!(parse_datetime("2024-01-01T09:00:00+0900"), parse_datetime("2024-01-01T00:00:00Z"));
        assert_eq!(parse_datetime("2024-01-01T00:00:00.5-0130"), parse_datetime("2024-01-01T01:30:00.5+00:00"));
        assert_eq!(parse_datetime("2024-01-01+0000"), None);
    }

    /// A connector's windows read completely hand the next sync the newest record read, not the
    /// end of the last window: a record written after the sync with a cursor between the two
    /// (late data, replication lag) is read by the next one (#26, for SDK connectors as for
    /// manifests). A sync with a failed window hands on nothing past it.
    #[test]
    fn a_finished_sync_hands_on_its_newest_record_so_late_records_are_read() {
        let mut cursor = StreamCursor::new("w", vec!["n".into()], None).unwrap();
        cursor.listing_complete(Some(&json!(0)));
        for (start, end, newest) in [(20, 30, 25), (0, 10, 9), (10, 20, 18)] {
            cursor.complete_range(Some(&json!(start)), &json!(end), Some(json!(newest)));
        }
        cursor.stream_finished(true);
        assert_eq!(cursor.to_state(), json!({"cursor_field": ["n"], "low_water": 25, "newest": 25}));
        let next = StreamCursor::new("w", vec!["n".into()], Some(&cursor.to_state())).unwrap();
        // The last window is read again past the newest record: a late 27 is found.
        assert_eq!(next.resume(Some(&json!(20)), &json!(30)), Resume::From(json!(25)));
        assert_eq!(next.resume(Some(&json!(10)), &json!(20)), Resume::Skip);
        // A failed middle window: the mark stays below it, the finished window after it is kept.
        let mut failed = StreamCursor::new("w", vec!["n".into()], None).unwrap();
        failed.listing_complete(Some(&json!(0)));
        for (start, end, newest) in [(0, 10, 9), (20, 30, 25)] {
            failed.complete_range(Some(&json!(start)), &json!(end), Some(json!(newest)));
        }
        failed.stream_finished(false);
        assert_eq!(failed.to_state()["low_water"], 10);
        assert_eq!(failed.resume(Some(&json!(10)), &json!(20)), Resume::Read);
    }

    /// A partition that wrote nothing keeps the start it was read from, also in a first sync
    /// (no saved cursor, no low-water mark): a connector that chose it is not sent back before it.
    #[test]
    fn an_empty_partition_keeps_the_start_it_was_read_from() {
        let mut cursor = StreamCursor::new("s", vec!["t".into()], None).unwrap();
        cursor.complete_from(r#"{"p":1}"#, Some(&json!("2024-01-02T00:00:00Z")), None);
        cursor.complete_from(r#"{"p":2}"#, Some(&json!("2024-01-02T00:00:00Z")), Some(json!("2024-01-03T00:00:00Z")));
        cursor.complete(&json!({"p": 3}), None);
        assert_eq!(
            cursor.to_state()["partitions"],
            json!([{"partition": {"p": 1}, "cursor": "2024-01-02T00:00:00Z"}, {"partition": {"p": 2}, "cursor": "2024-01-03T00:00:00Z"}])
        );
    }

    /// Past its cap of partition cursors a state keeps one stream-level cursor: the lowest, so
    /// no partition resumes past what it read; once every partition finished it rises to the
    /// lowest this run reached.
    #[test]
    fn many_partition_cursors_fall_back_to_the_lowest() {
        let mut cursor = StreamCursor::with_limit("s", vec!["c".into()], None, 3).unwrap();
        let fell_back: Vec<bool> = (0..6).map(|p| cursor.complete(&json!({"p": p}), Some(json!(10 + p)))).collect();
        assert_eq!(fell_back, [false, false, false, true, false, false]);
        assert_eq!(cursor.to_state(), json!({"cursor_field": ["c"], "low_water": 10}));
        assert_eq!(cursor.start_for(&json!({"p": 5})), Some(&json!(10)));
        cursor.stream_finished(true);
        assert_eq!(cursor.to_state(), json!({"cursor_field": ["c"], "low_water": 10}));
        // The next run: every partition starts at 10 and reaches at least 20.
        let saved = cursor.to_state();
        let mut next = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 3).unwrap();
        for p in 0..6 {
            next.complete(&json!({"p": p}), Some(json!(20 + p)));
        }
        next.stream_finished(false);
        assert_eq!(next.to_state()["low_water"], 10, "a run with a failed partition does not raise it");
        let mut next = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 3).unwrap();
        for p in 0..6 {
            next.complete(&json!({"p": p}), Some(json!(20 + p)));
        }
        next.stream_finished(true);
        assert_eq!(next.to_state()["low_water"], 20);
    }

    /// A saved state with more partition cursors than the limit is folded as it is read into
    /// the state a run that passed the limit would have written: the same stream-level cursor,
    /// rising the same way once every partition finished.
    #[test]
    fn a_saved_state_past_the_partition_cursor_limit_falls_back_as_a_run_does() {
        let cursors = [14, 11, 19, 12, 10, 16];
        // A run that kept them all (a larger limit), and one that passed a limit of 5 with its
        // sixth.
        let mut wide = StreamCursor::with_limit("s", vec!["c".into()], None, 100).unwrap();
        let mut narrow = StreamCursor::with_limit("s", vec!["c".into()], None, 5).unwrap();
        for (p, c) in cursors.iter().enumerate() {
            wide.complete(&json!({"p": p}), Some(json!(c)));
            assert_eq!(narrow.complete(&json!({"p": p}), Some(json!(c))), p == 5);
        }
        let saved = wide.to_state();
        assert_eq!(saved["partitions"].as_array().unwrap().len(), 6);
        let folded = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 5).unwrap();
        assert_eq!(folded.to_state(), narrow.to_state());
        let mut folded = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 3).unwrap();
        assert_eq!(folded.saved_fell_back(), Some(6));
        assert_eq!(folded.to_state(), json!({"cursor_field": ["c"], "low_water": 10}));
        // Every partition resumes from the lowest: none past what it read.
        assert_eq!(folded.start_for(&json!({"p": 2})), Some(&json!(10)));
        // Within the limit, nothing is folded.
        let kept = StreamCursor::with_limit("s", vec!["c".into()], Some(&saved), 6).unwrap();
        assert_eq!((kept.saved_fell_back(), kept.to_state()), (None, saved.clone()));
        // This run reads every partition to at least 20: as after a run's own fall back, the
        // saved cursors count among the lowest reached (a saved partition may not be listed
        // again), so it stays; the next run, starting every partition at 10, raises it.
        for p in 0..8 {
            assert!(!folded.complete(&json!({"p": p}), Some(json!(20 + p))));
        }
        folded.stream_finished(true);
        assert_eq!(folded.to_state(), json!({"cursor_field": ["c"], "low_water": 10}));
        let mut next = StreamCursor::with_limit("s", vec!["c".into()], Some(&folded.to_state()), 3).unwrap();
        for p in 0..8 {
            next.complete(&json!({"p": p}), Some(json!(20 + p)));
        }
        next.stream_finished(true);
        assert_eq!(next.to_state()["low_water"], 20);
        // A saved low-water mark below every partition stays the floor.
        let mut low = saved.clone();
        low["low_water"] = json!(3);
        let folded = StreamCursor::with_limit("s", vec!["c".into()], Some(&low), 3).unwrap();
        assert_eq!(folded.to_state()["low_water"], 3);
        // A stream with finished ranges keeps the lowest and never rises past it on its own.
        let mut ranged = saved;
        ranged["completed"] = json!([[30, 40]]);
        let mut folded = StreamCursor::with_limit("s", vec!["c".into()], Some(&ranged), 3).unwrap();
        assert_eq!(folded.to_state(), json!({"cursor_field": ["c"], "low_water": 10, "completed": [[30, 40]]}));
        folded.stream_finished(true);
        assert_eq!(folded.to_state()["low_water"], 10);
        // A finished range from below the lowest cursor does not lift the mark past a
        // partition's own cursor (a partition at 10 and a range [0, 100] resumed from 100).
        let mut below = low.clone();
        below["completed"] = json!([[0, 100]]);
        below.as_object_mut().unwrap().remove("low_water");
        let folded = StreamCursor::with_limit("s", vec!["c".into()], Some(&below), 3).unwrap();
        assert_eq!(folded.start_for(&json!({"p": 4})), Some(&json!(10)), "{}", folded.to_state());
        assert_eq!(folded.start_for(&json!({"p": 99})), Some(&json!(10)));
    }

    /// 200,000 saved partition cursors under the default limit: folded in one pass, the
    /// state that comes out one stream-level cursor.
    #[test]
    fn a_huge_saved_state_is_folded_in_one_pass() {
        let partitions: Vec<Value> =
            (0..200_000).map(|p| json!({"partition": {"account": p}, "cursor": 1_000_000 - p})).collect();
        let saved = json!({"cursor_field": ["c"], "partitions": partitions});
        let started = std::time::Instant::now();
        let cursor = StreamCursor::new("s", vec!["c".into()], Some(&saved)).unwrap();
        assert!(started.elapsed() < std::time::Duration::from_secs(5), "{:?}", started.elapsed());
        assert_eq!(cursor.saved_fell_back(), Some(200_000));
        assert_eq!(cursor.to_state(), json!({"cursor_field": ["c"], "low_water": 1_000_000 - 199_999}));
        // A malformed entry past the fold is still an error.
        let mut bad = saved;
        bad["partitions"].as_array_mut().unwrap().push(json!({"partition": 1}));
        let error = StreamCursor::new("s", vec!["c".into()], Some(&bad)).unwrap_err().to_string();
        assert!(error.contains("partitions[200000] has no \"cursor\""), "{error}");
    }

    /// A state file's partition cursors past the limit are folded as the file is parsed, in
    /// every form a state file takes: the first `limit` partitions and one more carrying the
    /// lowest cursor are kept, the low-water mark is lowered to it, and the count is kept for
    /// the WARN; a run with that limit folds it as it would the whole list.
    #[test]
    fn partition_cursors_are_folded_as_the_file_is_parsed() {
        let partitions: Vec<Value> = (0..50).map(|p| json!({"partition": {"p": p}, "cursor": 100 - p})).collect();
        let state = json!({"cursor_field": ["c"], "partitions": partitions, "low_water": 80});
        let message = json!({"type": "STREAM", "stream": {"stream_descriptor": {"name": "s"}, "stream_state": state}});
        let forms = [
            json!([message]).to_string(),
            json!({"type": "STATE", "state": message}).to_string(),
            json!({"type": "GLOBAL", "global": {"stream_states": [{"stream_descriptor": {"name": "s"}, "stream_state": state}]}}).to_string(),
            json!({"s": state}).to_string(),
            json!({"bookmarks": {"s": state}}).to_string(),
            json!({"type": "STATE", "value": {"bookmarks": {"s": state}}}).to_string(),
            format!("{{\"type\":\"RECORD\"}}\n{}\n", json!({"type": "STATE", "state": message})),
        ];
        let whole = StreamCursor::with_limit("s", vec!["c".into()], Some(&state), 10).unwrap().to_state();
        for text in forms {
            let parsed = InputState::parse_with_limit(&text, 10).unwrap();
            let saved = &parsed.streams["s"];
            let list = saved["partitions"].as_array().unwrap();
            assert_eq!(list.len(), 11, "{text}");
            assert_eq!(list[10], json!({"partition": {"p": 10}, "cursor": 51}));
            assert_eq!(saved["low_water"], 51);
            assert!(saved.get(FOLDED_KEY).is_none());
            assert_eq!(parsed.folded_partition_cursors("s"), Some((10, 50)));
            let cursor = StreamCursor::with_limit("s", vec!["c".into()], Some(saved), 10).unwrap();
            assert_eq!(cursor.to_state(), whole);
        }
        // Within the limit, or not a list of partition cursors: as written.
        let parsed = InputState::parse_with_limit(&json!({"s": state}).to_string(), 50).unwrap();
        assert_eq!((&parsed.streams["s"], parsed.folded_partition_cursors("s")), (&state, None));
        let foreign = json!({"s": {"partitions": [{"partition": 1}, {"partition": 2}], "x": {"partitions": 1}}});
        let parsed = InputState::parse_with_limit(&foreign.to_string(), 0).unwrap();
        assert_eq!(parsed.streams["s"], foreign["s"]);
        // A partition given twice counts once, the later entry winning; numbers keep their digits;
        // a key of the file's own named like the marker is dropped.
        let text = r#"{"s": {"partitions": [{"partition": 1, "cursor": 5}, {"partition": 1, "cursor": 7},
            {"partition": 2, "cursor": 1.50}], "big": 123456789012345678901234567890, "\u0000sluice: partition cursors folded": 9}}"#;
        let parsed = InputState::parse_with_limit(text, 2).unwrap();
        let kept = r#"[{"partition":1,"cursor":7},{"partition":2,"cursor":1.50}]"#;
        assert_eq!(parsed.streams["s"]["partitions"].to_string(), kept);
        assert_eq!(parsed.streams["s"]["big"].to_string(), "123456789012345678901234567890");
        assert_eq!(parsed.folded_partition_cursors("s"), None);
        assert!(parsed.streams["s"].get(FOLDED_KEY).is_none());
    }

    /// The other lists of a stream's state keep their first `limit` entries as the file is
    /// parsed, the rest dropped unbuilt (each dropped partition or range is read again): a
    /// hostile state of a million in-progress entries is never a tree of a million values.
    #[test]
    fn the_other_lists_of_a_saved_state_are_capped_as_the_file_is_parsed() {
        let progress: Vec<Value> = (0..50).map(|p| json!({"partition": {"p": p}, "token": p})).collect();
        let done: Vec<Value> = (0..50).map(|p| json!({"p": p})).collect();
        let ranges: Vec<Value> = (0..50).map(|i| json!([2 * i, 2 * i + 1])).collect();
        let state = json!({"cursor_field": ["c"], "in_progress": progress, "done": done, "completed": ranges});
        let parsed = InputState::parse_with_limit(&json!({"s": state}).to_string(), 10).unwrap();
        for list in ["in_progress", "done", "completed"] {
            assert_eq!(
                parsed.streams["s"][list],
                Value::Array(state[list].as_array().unwrap()[..10].to_vec()),
                "{list}"
            );
        }
        let parsed = InputState::parse_with_limit(&json!({"s": state}).to_string(), 50).unwrap();
        assert_eq!(parsed.streams["s"], state, "within the limit: as written");
    }

    #[test]
    fn a_state_with_only_its_cursor_field_is_accepted() {
        let saved = json!({"cursor_field": ["updated_at"]});
        let cursor = StreamCursor::new("s", vec!["updated_at".into()], Some(&saved)).unwrap();
        assert_eq!(cursor.to_state(), saved);
    }

    #[test]
    fn cursor_ordering() {
        assert_eq!(compare(&json!(2), &json!(10)), Ordering::Less);
        assert_eq!(compare(&json!("2024-01-01T01:00:00+01:00"), &json!("2024-01-01T00:30:00Z")), Ordering::Less);
        assert_eq!(compare(&json!("b"), &json!("a")), Ordering::Greater);
    }

    #[test]
    fn partitions_advance_and_round_trip() {
        let field = vec!["updated_at".to_string()];
        let mut c = StreamCursor::new("s", field.clone(), None).unwrap();
        let k = json!({"account_id": 1});
        assert_eq!(c.start_for(&k), None);
        c.complete(&k, Some(json!("2024-01-02T00:00:00Z")));
        c.complete(&k, Some(json!("2024-01-01T00:00:00Z")));
        assert_eq!(c.start_for(&k), Some(&json!("2024-01-02T00:00:00Z")));
        let c2 = StreamCursor::new("s", field.clone(), Some(&c.to_state())).unwrap();
        assert_eq!(c.to_state()["partitions"][0]["partition"], json!({"account_id": 1}));
        assert_eq!(c2.start_for(&k), Some(&json!("2024-01-02T00:00:00Z")));
        let floor =
            StreamCursor::new("s", field.clone(), Some(&json!({"updated_at": "2023-01-01T00:00:00Z"}))).unwrap();
        assert_eq!(floor.start_for(&k), Some(&json!("2023-01-01T00:00:00Z")));
        // An older simple state is kept in the state written back.
        assert_eq!(floor.to_state()["low_water"], json!("2023-01-01T00:00:00Z"));
        assert!(StreamCursor::new("s", field, Some(&json!({"other": 1}))).is_err());
    }

    fn t(h: u32) -> Value {
        json!(format!("2024-01-01T{h:02}:00:00Z"))
    }

    #[test]
    fn ranges_finish_out_of_order_behind_a_low_water_mark() {
        let mut c = StreamCursor::new("s", vec!["updated_at".into()], None).unwrap();
        // Windows (0,1], (1,2], (2,3], (3,4]; they finish as 3, 1, 4; window 2 is slow.
        c.complete_range(Some(&t(2)), &t(3), None);
        c.complete_range(Some(&t(0)), &t(1), None);
        c.complete_range(Some(&t(3)), &t(4), None);
        // Listing is not known to be complete yet: no low-water mark, exact ranges only.
        assert_eq!(c.to_state()["low_water"], Value::Null);
        assert_eq!(c.to_state()["completed"], json!([[t(0), t(1)], [t(2), t(4)]]));
        c.listing_complete(Some(&t(0)));
        assert_eq!(c.to_state()["low_water"], t(1));
        assert_eq!(c.to_state()["completed"], json!([[t(2), t(4)]]));
        // On resume, finished windows are skipped and the slow one is read.
        let resumed = StreamCursor::new("s", vec!["updated_at".into()], Some(&c.to_state())).unwrap();
        assert_eq!(resumed.resume(Some(&t(0)), &t(1)), Resume::Skip);
        assert_eq!(resumed.resume(Some(&t(1)), &t(2)), Resume::Read);
        assert_eq!(resumed.resume(Some(&t(2)), &t(3)), Resume::Skip);
        assert_eq!(resumed.resume(Some(&t(3)), &t(5)), Resume::From(t(4)));
        assert_eq!(resumed.resume(None, &t(1)), Resume::Skip);
        // The slow window finishes: everything merges into the low-water mark.
        let mut c = resumed;
        c.complete_range(Some(&t(1)), &t(2), None);
        assert_eq!(c.to_state()["low_water"], t(4));
        assert!(c.to_state().get("completed").is_none());
    }

    #[test]
    fn a_failed_range_holds_the_low_water_mark() {
        let mut c = StreamCursor::new("s", vec!["n".into()], None).unwrap();
        c.listing_complete(Some(&json!(0)));
        for (a, b) in [(0, 10), (20, 30), (30, 40)] {
            c.complete_range(Some(&json!(a)), &json!(b), None);
        }
        // (10, 20] failed: the mark stays at 10 and the finished ranges beyond it are kept.
        assert_eq!(c.to_state()["low_water"], json!(10));
        assert_eq!(c.to_state()["completed"], json!([[20, 40]]));
        assert_eq!(c.resume(Some(&json!(10)), &json!(20)), Resume::Read);
    }

    #[test]
    fn malformed_ranges_are_named() {
        let f = vec!["n".to_string()];
        let e = StreamCursor::new("s", f.clone(), Some(&json!({"completed": [[3, 1]]}))).unwrap_err();
        assert!(e.to_string().contains("completed[0]"), "{e}");
        let e = StreamCursor::new("s", f, Some(&json!({"low_water": [1]}))).unwrap_err();
        assert!(e.to_string().contains("low_water"), "{e}");
    }
}
