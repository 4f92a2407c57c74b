//! Stream states in a connector's shape (contract 0.1.6, `state-shape`): the declarative engine
//! writes the Airbyte CDK's, so a connection moves between the CDK and Sluice both ways. The host
//! keeps tracking progress in its own form ([`crate::data::state`]); here, at the edges, a state
//! handed in becomes the host's form, and every state written takes the connector's shape.
//!
//! While a sync is under way the host's form says more than the shape can (finished windows
//! above the bookmark, page tokens of part-read partitions, report jobs): it travels beside the
//! shaped state under [`RESUME_KEY`], with a fingerprint of the shaped part it was written with.
//! A later run uses it only when the shaped part is still the one it was written with, so a
//! state the CDK moved on (and which carries the key along, as the CDK keeps unknown keys) is
//! read from its shape, never from stale resume data.

use crate::data::protocol::{Output, OutputClosed};
use crate::guest::connector::{CallError, Connector, Instance};
use crate::run::read;
use serde_json::{Map, Value, json};
use std::collections::HashSet;

/// Where the host's own form of a shaped state travels while a sync is under way.
pub const RESUME_KEY: &str = "__sluice";

/// Keys of the host's form that only resuming inside a sync needs.
const RESUME_ONLY: [&str; 4] = ["completed", "in_progress", "jobs", "done"];

/// The streams whose state the connector shapes (none before contract 0.1.6, or when it cannot
/// say: a warning, and the host's own form is written).
pub async fn shaped_streams(connector: &Connector, out: &Output) -> Result<HashSet<String>, OutputClosed> {
    if connector.plugin.shape.is_none() {
        return Ok(HashSet::new());
    }
    let ask = async |instance: &mut Instance| instance.shaped_streams(&connector.config).await;
    let warning = |e: &CallError| {
        format!(
            "the connector cannot say which streams' states it shapes ({}): states are written in Sluice's form",
            e.message()
        )
    };
    read::ask_streams(connector, Some(out), ask, warning).await
}

/// A saved state of a shaped stream in the host's form: the resume data beside it when it
/// belongs to this very shape, else the connector's reading of the shape, else (a state the
/// connector does not know, such as one Sluice wrote before the stream was shaped) as it is.
pub async fn to_host(connector: &Connector, stream: &str, saved: Option<&Value>) -> Result<Option<Value>, String> {
    let Some(saved) = saved.filter(|s| s.is_object()) else { return Ok(saved.cloned()) };
    let (shaped, resume) = split(saved);
    if let Some(resume) = resume
        && resume.get("for").and_then(Value::as_str) == Some(&fingerprint(&shaped))
        && let Some(state) = resume.get("state").filter(|s| s.is_object())
    {
        return Ok(Some(state.clone()));
    }
    let mut instance = connector.instance().await.map_err(|e| e.message())?;
    let answer = instance.state_to_host(&connector.config, stream, &shaped.to_string()).await;
    match answer
        .map_err(|e| format!("the connector cannot read the saved state of stream {stream}: {}", e.message()))?
    {
        None => Ok(Some(shaped)),
        Some(text) => match serde_json::from_str::<Value>(&text) {
            Ok(state @ Value::Object(_)) => Ok(Some(state)),
            _ => Err(format!(
                "the connector read the saved state of stream {stream} as something that is not a JSON object"
            )),
        },
    }
}

/// The host's state of a shaped stream in the connector's shape, with the host's form beside it
/// while it holds what only resuming needs.
pub async fn from_host(connector: &Connector, stream: &str, state: &Value) -> Result<Value, String> {
    let mut instance = connector.instance().await.map_err(|e| e.message())?;
    let answer = instance.state_from_host(&connector.config, stream, &state.to_string()).await;
    let text =
        answer.map_err(|e| format!("the connector cannot shape the state of stream {stream}: {}", e.message()))?;
    let mut shaped = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Object(shaped)) => shaped,
        _ => {
            return Err(format!(
                "the connector shaped the state of stream {stream} as something that is not a JSON object"
            ));
        }
    };
    shaped.remove(RESUME_KEY);
    if RESUME_ONLY.iter().any(|k| state.get(k).is_some()) {
        let print = fingerprint(&Value::Object(shaped.clone()));
        shaped.insert(RESUME_KEY.into(), json!({"for": print, "state": state}));
    }
    Ok(Value::Object(shaped))
}

/// A shaped state without the resume data, and the resume data.
fn split(saved: &Value) -> (Value, Option<Value>) {
    let mut shaped: Map<String, Value> = saved.as_object().cloned().unwrap_or_default();
    let resume = shaped.remove(RESUME_KEY);
    (Value::Object(shaped), resume)
}

/// A digest of a JSON value that does not depend on the order of its keys (another engine may
/// write them in another order).
fn fingerprint(value: &Value) -> String {
    fn canonical(v: &Value, out: &mut String) {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                out.push('{');
                for k in keys {
                    out.push_str(&Value::String(k.clone()).to_string());
                    out.push(':');
                    canonical(&map[k], out);
                    out.push(',');
                }
                out.push('}');
            }
            Value::Array(items) => {
                out.push('[');
                for item in items {
                    canonical(item, out);
                    out.push(',');
                }
                out.push(']');
            }
            other => out.push_str(&other.to_string()),
        }
    }
    let mut text = String::new();
    canonical(value, &mut text);
    blake3::hash(text.as_bytes()).to_hex()[..32].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_ignore_key_order() {
        let a: Value = serde_json::from_str(r#"{"a": 1, "b": {"x": [1, 2], "y": null}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"b": {"y": null, "x": [1, 2]}, "a": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"b": {"y": null, "x": [2, 1]}, "a": 1}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
    }

    #[test]
    fn resume_data_is_split_off() {
        let saved = json!({"created": "5", RESUME_KEY: {"for": "x", "state": {}}});
        let (shaped, resume) = split(&saved);
        assert_eq!(shaped, json!({"created": "5"}));
        assert!(resume.is_some());
    }
}
