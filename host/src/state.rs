//! Incremental state: reading the state a platform hands us, and keeping per-partition cursors.
//!
//! The host owns the state format of every stream (a guest never parses it):
//! `{"cursor_field": [...], "partitions": [{"partition": KEY, "cursor": VALUE}, ...]}`.
//! A partition's cursor is the largest cursor value among the records written for it; the next
//! run starts that partition after it. Older simple forms such as `{"updated_at": "..."}` are
//! accepted as a floor for every partition.

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

/// The saved state of each stream, by stream name.
#[derive(Debug, Default, Clone)]
pub struct InputState {
    pub streams: HashMap<String, Value>,
}

impl InputState {
    /// Parses a state file: an array of Airbyte state messages (per-stream or global), one state
    /// message, a legacy `{stream: state}` object, or JSON lines of a previous run's output (the
    /// last STATE per stream wins; other messages are ignored).
    pub fn parse(text: &str) -> Result<Self> {
        let mut state = InputState::default();
        if text.trim().is_empty() {
            return Ok(state);
        }
        match serde_json::from_str::<Value>(text) {
            Ok(Value::Array(messages)) => {
                for (i, m) in messages.iter().enumerate() {
                    state.add_message(m).with_context(|| format!("state message {i}"))?;
                }
            }
            Ok(Value::Object(map)) if map.contains_key("type") => state.add_message(&Value::Object(map))?,
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
                    let message: Value = serde_json::from_str(line).map_err(|e| {
                        if seen == 0 {
                            anyhow!("state is not valid JSON: {whole}")
                        } else {
                            anyhow!("line {}: not valid JSON: {e}", n + 1)
                        }
                    })?;
                    if message.get("type").and_then(Value::as_str) == Some("STATE") {
                        state.add_message(&message).with_context(|| format!("line {}", n + 1))?;
                    }
                }
            }
        }
        Ok(state)
    }

    fn set(&mut self, stream: String, value: Value) -> Result<()> {
        match value {
            Value::Null => {}
            Value::Object(_) => {
                self.streams.insert(stream, value);
            }
            other => bail!(
                "the state of stream {stream:?} must be a JSON object, not {}",
                kind(&other)
            ),
        }
        Ok(())
    }

    /// One Airbyte state message, bare or wrapped in `{"type": "STATE", "state": ...}`.
    fn add_message(&mut self, message: &Value) -> Result<()> {
        let message = match message.get("type").and_then(Value::as_str) {
            Some("STATE") => message
                .get("state")
                .ok_or_else(|| anyhow!("a STATE message has no \"state\""))?,
            _ => message,
        };
        let Some(obj) = message.as_object() else {
            bail!("a state message must be an object, not {}", kind(message))
        };
        match obj.get("type").and_then(Value::as_str) {
            Some("STREAM") => {
                let stream = obj
                    .get("stream")
                    .ok_or_else(|| anyhow!("a STREAM state has no \"stream\""))?;
                self.add_stream_state(stream)
            }
            Some("GLOBAL") => {
                let global = obj
                    .get("global")
                    .ok_or_else(|| anyhow!("a GLOBAL state has no \"global\""))?;
                let streams = global
                    .get("stream_states")
                    .and_then(Value::as_array)
                    .ok_or_else(|| anyhow!("a GLOBAL state has no \"stream_states\" array"))?;
                streams.iter().try_for_each(|s| self.add_stream_state(s))
            }
            Some("LEGACY") | None => match obj.get("data") {
                Some(Value::Object(data)) => data.iter().try_for_each(|(k, v)| self.set(k.clone(), v.clone())),
                Some(other) => bail!("a LEGACY state's \"data\" must be an object, not {}", kind(other)),
                None => bail!(
                    "unrecognised state message (expected type STREAM, GLOBAL or LEGACY): {}",
                    crate::protocol::preview(&message.to_string())
                ),
            },
            Some(other) => bail!("unknown state type {other:?} (expected STREAM, GLOBAL or LEGACY)"),
        }
    }

    fn add_stream_state(&mut self, stream: &Value) -> Result<()> {
        let name = stream
            .pointer("/stream_descriptor/name")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("a stream state has no stream_descriptor.name"))?;
        self.set(
            name.to_string(),
            stream.get("stream_state").cloned().unwrap_or(Value::Null),
        )
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

/// Orders cursor values: numbers numerically, RFC 3339 date-times as instants, other text as text.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x.as_f64().unwrap_or(0.0).total_cmp(&y.as_f64().unwrap_or(0.0)),
        },
        (Value::String(x), Value::String(y)) => match (parse_datetime(x), parse_datetime(y)) {
            (Some(x), Some(y)) => x.cmp(&y),
            _ => x.cmp(y),
        },
        // Mixed kinds cannot be ordered meaningfully; keep the saved one.
        _ => Ordering::Equal,
    }
}

pub fn parse_datetime(text: &str) -> Option<time::OffsetDateTime> {
    time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()
}

/// The value at `path` in a record, if it is a usable cursor (a number or a string).
pub fn cursor_of(record: &Value, path: &[String]) -> Option<Value> {
    let mut v = record;
    for part in path {
        v = v.get(part)?;
    }
    matches!(v, Value::Number(_) | Value::String(_)).then(|| v.clone())
}

/// The cursors of one incremental stream.
#[derive(Debug, Clone)]
pub struct StreamCursor {
    field: Vec<String>,
    partitions: BTreeMap<String, (Value, Value)>,
    /// A cursor from an older state form that applies to every partition.
    floor: Option<Value>,
}

impl StreamCursor {
    pub fn new(stream: &str, field: Vec<String>, saved: Option<&Value>) -> Result<Self> {
        let mut cursor = StreamCursor {
            field,
            partitions: BTreeMap::new(),
            floor: None,
        };
        let Some(saved) = saved else { return Ok(cursor) };
        if let Some(list) = saved.get("partitions") {
            let list = list
                .as_array()
                .ok_or_else(|| anyhow!("state of stream {stream:?}: \"partitions\" must be an array"))?;
            for (i, entry) in list.iter().enumerate() {
                let key = entry.get("partition").cloned().unwrap_or(Value::Null);
                let value = entry
                    .get("cursor")
                    .filter(|v| matches!(v, Value::Number(_) | Value::String(_)))
                    .ok_or_else(|| {
                        anyhow!("state of stream {stream:?}: partitions[{i}] has no \"cursor\" (a number or a string)")
                    })?;
                cursor.partitions.insert(key.to_string(), (key, value.clone()));
            }
        } else if let Some(value) = cursor_of(saved, &cursor.field) {
            cursor.floor = Some(value);
        } else {
            bail!(
                "state of stream {stream:?} is not in a form Sluice knows (expected \"partitions\" or a \"{}\" cursor): {}",
                cursor.field.join("."),
                crate::protocol::preview(&saved.to_string())
            );
        }
        Ok(cursor)
    }

    pub fn field(&self) -> &[String] {
        &self.field
    }

    /// Where a partition resumes: its saved cursor, else the floor.
    pub fn start_for(&self, key: &Value) -> Option<&Value> {
        self.partitions
            .get(&key.to_string())
            .map(|(_, v)| v)
            .or(self.floor.as_ref())
    }

    /// Records that a partition was fully written up to `max_seen`.
    pub fn complete(&mut self, key: &Value, max_seen: Option<Value>) {
        let start = self.start_for(key).cloned();
        let best = match (start, max_seen) {
            (Some(a), Some(b)) => Some(if compare(&b, &a) == Ordering::Greater { b } else { a }),
            (a, b) => a.or(b),
        };
        if let Some(best) = best {
            self.partitions.insert(key.to_string(), (key.clone(), best));
        }
    }

    pub fn to_state(&self) -> Value {
        let partitions: Vec<Value> = self
            .partitions
            .values()
            .map(|(key, cursor)| json!({"partition": key, "cursor": cursor}))
            .collect();
        json!({"cursor_field": self.field, "partitions": partitions})
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn cursor_ordering() {
        assert_eq!(compare(&json!(2), &json!(10)), Ordering::Less);
        assert_eq!(
            compare(&json!("2024-01-01T01:00:00+01:00"), &json!("2024-01-01T00:30:00Z")),
            Ordering::Less
        );
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
        assert_eq!(c2.start_for(&k), Some(&json!("2024-01-02T00:00:00Z")));
        let floor =
            StreamCursor::new("s", field.clone(), Some(&json!({"updated_at": "2023-01-01T00:00:00Z"}))).unwrap();
        assert_eq!(floor.start_for(&k), Some(&json!("2023-01-01T00:00:00Z")));
        assert!(StreamCursor::new("s", field, Some(&json!({"other": 1}))).is_err());
    }
}
