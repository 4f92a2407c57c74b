//! `IncrementingCountCursor` as the Airbyte CDK 7.39 runs it: a `ConcurrentCursor` over an
//! integer field with the `IncrementingCountStreamStateConverter`.
//!
//! - One slice, `{"start": S, "end": inf}`, where S is the saved value when it is truthy and at
//!   least `start_value` (rendered with the config, then `int()`; 0 without one), else
//!   `start_value`. No `+ 1`: the record at S is read again. `start_value_option` sends S as it
//!   is. Templates see `start` (an integer); `end` (infinity, which JSON cannot hold) is left out.
//! - Records are not filtered by the cursor; one without the field is kept.
//! - The state is `{cursor_field: max(newest value read, S)}`, a number; a sync that read nothing
//!   writes `{cursor_field: S}`.
//!
//! For the host the slice is one open-ended partition starting at S ([`Counter::partition`]): the
//! host keeps the newest value its records had ([state.md](../../../docs/state.md)), and
//! [`Counter::to_host`] / [`Counter::from_host`] translate the CDK's state at the edges.

use crate::engine::{Engine, Scope, kind};
use crate::requester::Options;
use crate::slicing::{self, Inject};
use serde_json::{Map, Value, json};
use sluice_guest::{CursorValue, Error, Partition, Result};

/// The component's type name.
pub const KIND: &str = "IncrementingCountCursor";

/// The slice key templates see the start under (the concurrent engine's `start`).
const START: &str = "start";

/// A stream's `IncrementingCountCursor`.
pub struct Counter {
    pub node: Value,
    pub field: String,
    /// `start_value`, evaluated.
    pub start: i64,
}

impl Counter {
    /// The counter of a stream, when its `incremental_sync` is one.
    pub fn of(engine: &Engine, stream: &Value) -> Result<Option<Counter>> {
        let Some(node) = stream.get("incremental_sync").filter(|n| kind(n) == KIND) else { return Ok(None) };
        let ctx = engine.context(node, &Scope::default(), Vec::new());
        let field = engine.text(node.get("cursor_field"), &ctx)?;
        if field.is_empty() {
            return Err(Error::config("incremental_sync: an IncrementingCountCursor needs cursor_field"));
        }
        let start = match node.get("start_value") {
            None | Some(Value::Null) => 0,
            Some(template) => python_int(&engine.value(Some(template), &ctx)?).ok_or_else(|| {
                Error::config(format!("incremental_sync.start_value: {template} does not render an integer"))
            })?,
        };
        Ok(Some(Counter { node: node.clone(), field, start }))
    }

    /// Where a sync starts given the state handed in, as the CDK's `_get_sync_start`: the saved
    /// value when it is truthy and at least `start_value`, else `start_value`.
    pub fn sync_start(&self, state: Option<&Value>, stream: &str) -> Result<i64> {
        let saved = match state {
            Some(state) => self.saved(state, stream)?,
            None => None,
        };
        Ok(saved.filter(|v| *v != 0 && *v >= self.start).unwrap_or(self.start))
    }

    /// The saved value of a state; `None` for none, or a falsy one (`null`, `""`, `false`).
    fn saved(&self, state: &Value, stream: &str) -> Result<Option<i64>> {
        match state.get(&self.field) {
            None | Some(Value::Null | Value::Bool(false)) => Ok(None),
            Some(Value::String(s)) if s.is_empty() => Ok(None),
            Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
            Some(Value::String(s)) => Err(Error::config(format!(
                "the state of stream {stream}: the cursor value {s:?} is text; an IncrementingCountCursor needs a \
                 number (the Airbyte CDK fails on it too, with a TypeError comparing it with start_value)"
            ))),
            Some(other) => Err(Error::config(format!(
                "the state of stream {stream}: the cursor value {other} is not an integer, which an \
                 IncrementingCountCursor needs"
            ))),
        }
    }

    /// The stream's one partition: open-ended, from where the sync starts.
    pub fn partition(&self, stream_name: &str, state: Option<&Value>) -> Result<Partition> {
        let start = self.sync_start(state, stream_name)?;
        Ok(Partition::whole(stream_name).starting_at(Some(CursorValue::Integer(start))))
    }

    /// Where a partition reads from: its start (the host may have raised it to the saved value).
    pub fn start_of(&self, partition: &Partition) -> Result<i64> {
        match partition.cursor_start() {
            None => Ok(self.start),
            Some(CursorValue::Integer(n)) => Ok(*n),
            Some(other) => Err(Error::system(format!(
                "stream {}: the cursor start {} is not an integer, which an IncrementingCountCursor needs",
                partition.stream,
                other.to_query_value()
            ))),
        }
    }

    /// The slice's cursor part as templates see it (`stream_interval`).
    pub fn interval(start: i64) -> Map<String, Value> {
        Map::from_iter([(START.to_string(), json!(start))])
    }

    /// A CDK state in the host's form: open-ended partitions start at `low_water`, here S.
    pub fn to_host(&self, state: &Value, stream: &str) -> Result<Value> {
        let start = self.sync_start(Some(state), stream)?;
        Ok(json!({"cursor_field": [self.field], "low_water": start}))
    }

    /// The host's form as the CDK writes it: the newest value the partition reached (its start
    /// when it read nothing), never below `start_value`.
    pub fn from_host(&self, host: &Value) -> Value {
        let partitions = host.get("partitions").and_then(Value::as_array).into_iter().flatten();
        let newest = ["newest", "low_water"]
            .iter()
            .filter_map(|k| host.get(*k))
            .chain(partitions.filter_map(|p| p.get("cursor")))
            .filter(|v| v.is_number())
            .fold(json!(self.start), |best, v| match v.as_f64() > best.as_f64() {
                true => v.clone(),
                false => best,
            });
        json!({ self.field.clone(): newest })
    }
}

impl Inject for Counter {
    /// `start_value_option`: the slice's start, as it is.
    fn inject(&self, engine: &Engine, scope: &Scope, options: &mut Options) -> Result<()> {
        if let (Some(option), Some(value)) =
            (self.node.get("start_value_option").filter(|o| !o.is_null()), scope.interval.get(START))
        {
            let ctx = engine.context(&self.node, scope, Vec::new());
            options.inject(engine, option, value, &ctx)?;
        }
        Ok(())
    }
}

/// Python's `int()` of a rendered value: an integer, a float truncated, a boolean, or text that
/// is an integer (spaces around and `_` between digits allowed).
fn python_int(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f.trunc() as i64)),
        Value::Bool(b) => Some(i64::from(*b)),
        Value::String(s) => {
            let s = s.trim();
            let digits = s.trim_start_matches(['+', '-']);
            if digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
                return None;
            }
            s.replace('_', "").parse().ok()
        }
        _ => None,
    }
}

/// What the CDK refuses when it builds a stream with an `IncrementingCountCursor` (its own
/// words), and what this engine does not run: checked when the manifest loads, so such a stream
/// is refused alone. Streams nested in it (a parent) are checked too.
pub fn check(node: &Value, at: &str) -> std::result::Result<(), String> {
    match node {
        Value::Object(map) => {
            let counted = |s: &Value| s.get("incremental_sync").is_some_and(|c| kind(c) == KIND);
            let name = map.get("name").and_then(Value::as_str).unwrap_or_default();
            if counted(node) && !slicing::routers(&node["retriever"]).is_empty() {
                return Err(format!(
                    "{at}: The low-code framework does not currently support usage of a PartitionRouter and an \
                     IncrementingCountCursor at the same time. Please specify only one of these options for stream \
                     {name}."
                ));
            }
            if counted(node) && kind(&node["retriever"]) == "AsyncRetriever" {
                return Err(format!(
                    "{at}: an IncrementingCountCursor on a stream read through report jobs (AsyncRetriever) is not \
                     supported"
                ));
            }
            let retention = map.get("api_retention_period").and_then(Value::as_str).is_some_and(|r| !r.is_empty());
            let sides = ["full_refresh_stream", "incremental_stream"];
            if kind(node) == "StateDelegatingStream" && retention && sides.iter().any(|s| counted(&node[*s])) {
                return Err(format!(
                    "{at}: Stream '{name}' uses IncrementingCountCursor which is not supported with \
                     api_retention_period. IncrementingCountCursor does not use datetime-based cursors, so cursor age \
                     validation cannot be performed."
                ));
            }
            map.iter()
                .filter(|(k, _)| !crate::manifest::is_data_field(k))
                .try_for_each(|(k, v)| check(v, &format!("{at}.{k}")))
        }
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| check(v, &format!("{at}[{i}]"))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(start: i64) -> Counter {
        Counter { node: json!({"type": KIND, "cursor_field": "id"}), field: "id".into(), start }
    }

    /// The saved value when it is truthy and at least `start_value`, else `start_value`; the
    /// value itself is where the sync starts (read again).
    #[test]
    fn a_sync_starts_at_the_saved_value_or_the_start_value() {
        let c = counter(10);
        let start = |state: Value| c.sync_start(Some(&state), "s").unwrap();
        assert_eq!(c.sync_start(None, "s").unwrap(), 10);
        assert_eq!(start(json!({})), 10);
        assert_eq!(start(json!({"id": 12})), 12);
        assert_eq!(start(json!({"id": 10})), 10);
        assert_eq!(start(json!({"id": 7})), 10, "a saved value below start_value");
        assert_eq!(start(json!({"id": 0})), 10);
        assert_eq!(start(json!({"id": null})), 10);
        assert_eq!(start(json!({"id": ""})), 10, "an empty text is falsy: no TypeError");
        assert_eq!(start(json!({"id": 12, "foo": "bar"})), 12);
        // A saved 0 is falsy: start_value, even a negative one.
        assert_eq!(counter(-5).sync_start(Some(&json!({"id": 0})), "s").unwrap(), -5);
        assert_eq!(counter(-5).sync_start(Some(&json!({"id": -3})), "s").unwrap(), -3);
    }

    /// A saved value in text is refused, naming the stream and the value (the CDK fails on it
    /// with a TypeError); so is one that is not an integer.
    #[test]
    fn a_state_in_text_is_refused() {
        let c = counter(0);
        let e = c.sync_start(Some(&json!({"id": "5"})), "events").unwrap_err().to_string();
        assert!(e.contains("stream events") && e.contains("\"5\"") && e.contains("TypeError"), "{e}");
        let e = c.to_host(&json!({"id": "5"}), "events").unwrap_err().to_string();
        assert!(e.contains("\"5\""), "{e}");
        assert!(c.sync_start(Some(&json!({"id": 2.5})), "events").is_err());
        assert!(c.sync_start(Some(&json!({"id": [1]})), "events").is_err());
    }

    /// The host's form and back: S as the low-water mark; the newest value reached, never below
    /// `start_value`, as a number.
    #[test]
    fn states_cross_to_the_host_and_back() {
        let c = counter(3);
        assert_eq!(c.to_host(&json!({"id": 8}), "s").unwrap(), json!({"cursor_field": ["id"], "low_water": 8}));
        assert_eq!(c.to_host(&json!({"id": 1}), "s").unwrap()["low_water"], 3);
        assert_eq!(c.from_host(&json!({"cursor_field": ["id"]})), json!({"id": 3}), "nothing saved, nothing read");
        assert_eq!(c.from_host(&json!({"low_water": 8})), json!({"id": 8}), "nothing read");
        let done = json!({"low_water": 8, "partitions": [{"partition": null, "cursor": 15}], "newest": 15});
        assert_eq!(c.from_host(&done), json!({"id": 15}));
        assert_eq!(c.from_host(&json!({"partitions": [{"partition": null, "cursor": 2}]})), json!({"id": 3}));
        assert_eq!(counter(0).from_host(&json!({})), json!({"id": 0}));
    }

    #[test]
    fn start_values_are_read_as_python_reads_them() {
        assert_eq!(python_int(&json!(10)), Some(10));
        assert_eq!(python_int(&json!(" 1_000 ")), Some(1000));
        assert_eq!(python_int(&json!("-7")), Some(-7));
        assert_eq!(python_int(&json!(10.9)), Some(10));
        assert_eq!(python_int(&json!(true)), Some(1));
        assert_eq!(python_int(&json!("10.5")), None);
        assert_eq!(python_int(&json!("1__0")), None);
        assert_eq!(python_int(&Value::Null), None);
    }

    /// A router beside the counter, report jobs, and `api_retention_period` on a
    /// StateDelegatingStream with one are refused (the first and last in the CDK's words).
    #[test]
    fn what_the_cdk_refuses_is_refused() {
        let stream = |extra: Value| {
            let mut s = json!({"type": "DeclarativeStream", "name": "ids", "incremental_sync": {"type": KIND, "cursor_field": "id"},
                "retriever": {"type": "SimpleRetriever"}});
            s["retriever"].as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            s
        };
        assert!(check(&stream(json!({})), "streams[0]").is_ok());
        let routed = stream(json!({"partition_router": {"type": "ListPartitionRouter", "values": ["a"]}}));
        let e = check(&routed, "streams[0]").unwrap_err();
        assert!(e.ends_with("Please specify only one of these options for stream ids."), "{e}");
        let mut jobs = stream(json!({}));
        jobs["retriever"]["type"] = json!("AsyncRetriever");
        assert!(check(&jobs, "streams[0]").unwrap_err().contains("AsyncRetriever"));
        let delegating = |retention: Value| {
            json!({"type": "StateDelegatingStream", "name": "ids", "api_retention_period": retention,
                "full_refresh_stream": {"type": "DeclarativeStream", "name": "ids", "retriever": {}},
                "incremental_stream": stream(json!({}))})
        };
        let e = check(&delegating(json!("P30D")), "streams[0]").unwrap_err();
        assert!(
            e.contains("Stream 'ids' uses IncrementingCountCursor which is not supported with api_retention_period")
        );
        assert!(check(&delegating(Value::Null), "streams[0]").is_ok());
        // A parent stream with a router and a counter is refused with its child.
        let parent = json!({"type": "DeclarativeStream", "name": "child", "retriever": {"type": "SimpleRetriever",
            "partition_router": {"type": "SubstreamPartitionRouter", "parent_stream_configs": [{"stream": routed}]}}});
        assert!(check(&parent, "streams[1]").unwrap_err().contains("for stream ids."));
    }
}
