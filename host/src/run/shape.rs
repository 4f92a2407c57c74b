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

use crate::guest::connector::{CallError, Connector, Instance};
use serde_json::{Map, Value, json};
use std::collections::HashSet;
use tokio::sync::Mutex;

/// Where the host's own form of a shaped state travels while a sync is under way.
pub const RESUME_KEY: &str = "__sluice";

/// Keys of the host's form that only resuming inside a sync needs.
const RESUME_ONLY: [&str; 4] = ["completed", "in_progress", "jobs", "done"];

/// The run's shaping of states: the streams the connector shapes, and one instance kept for the
/// shaping calls (each is short, and a STATE is written often: an instantiation each would cost
/// more than the call). Shaping is a function of the call's arguments; the instance reads no
/// partition, so keeping it shares nothing between partitions.
pub struct Shaper {
    streams: HashSet<String>,
    kept: Mutex<Option<Instance>>,
    /// Every state carries the host's form (a shard's, which `host state merge` reads).
    always_resume: bool,
}

impl Shaper {
    /// `instance`: one to begin with, kept only when there is a stream to shape. With
    /// `always_resume`, every state carries the host's form beside its shape.
    pub fn new(streams: HashSet<String>, instance: Option<Instance>, always_resume: bool) -> Self {
        let instance = instance.filter(|_| !streams.is_empty());
        Shaper { streams, kept: Mutex::new(instance), always_resume }
    }

    pub fn shapes(&self, stream: &str) -> bool {
        self.streams.contains(stream)
    }

    /// One call on the kept instance (a fresh one when none is kept, or after a call failed:
    /// a trap leaves an instance unusable).
    async fn call<T>(
        &self,
        connector: &Connector,
        call: impl AsyncFnOnce(&mut Instance) -> Result<T, CallError>,
    ) -> Result<T, CallError> {
        let mut kept = self.kept.lock().await;
        let mut instance = match kept.take() {
            Some(instance) => instance,
            None => connector.instance().await?,
        };
        let answer = call(&mut instance).await;
        // What it logs while shaping is not kept: nothing reads it, and a kept instance would
        // gather it for the whole run.
        drop(instance.take_logs());
        if answer.is_ok() {
            *kept = Some(instance);
        }
        answer
    }

    /// A saved state of a shaped stream in the host's form: the resume data beside it when it
    /// belongs to this very shape, else the connector's reading of the shape, else (a state the
    /// connector does not know, such as one Sluice wrote before the stream was shaped) as it is.
    pub async fn host_form(
        &self,
        connector: &Connector,
        stream: &str,
        saved: Option<&Value>,
    ) -> Result<Option<Value>, String> {
        let Some(saved) = saved.filter(|s| s.is_object()) else { return Ok(saved.cloned()) };
        let (shaped, resume) = split(saved);
        if let Some(resume) = resume
            && resume.get("for").and_then(Value::as_str) == Some(&fingerprint(&shaped))
            && let Some(state) = resume.get("state").filter(|s| s.is_object())
        {
            return Ok(Some(state.clone()));
        }
        let (stream, text) = (stream.to_string(), shaped.to_string());
        let answer =
            self.call(connector, async |i: &mut Instance| i.state_to_host(&connector.config, &stream, &text).await);
        match answer
            .await
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

    /// The host's state of a shaped stream in the connector's shape, with the host's form beside
    /// it while it holds what only resuming needs.
    pub async fn shaped(&self, connector: &Connector, stream: &str, state: &Value) -> Result<Value, String> {
        let (stream, text) = (stream.to_string(), state.to_string());
        let answer =
            self.call(connector, async |i: &mut Instance| i.state_from_host(&connector.config, &stream, &text).await);
        let text = answer
            .await
            .map_err(|e| format!("the connector cannot shape the state of stream {stream}: {}", e.message()))?;
        let mut shaped = match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(shaped)) => shaped,
            _ => {
                return Err(format!(
                    "the connector shaped the state of stream {stream} as something that is not a JSON object"
                ));
            }
        };
        shaped.remove(RESUME_KEY);
        if self.always_resume || RESUME_ONLY.iter().any(|k| state.get(k).is_some()) {
            let print = fingerprint(&Value::Object(shaped.clone()));
            shaped.insert(RESUME_KEY.into(), json!({"for": print, "state": state}));
        }
        Ok(Value::Object(shaped))
    }
}

/// The host's form carried beside a shaped state, when it was written with that very shape.
pub fn carried_host_form(saved: &Value) -> Option<Value> {
    let (shaped, resume) = split(saved);
    let resume = resume?;
    let belongs = resume.get("for").and_then(Value::as_str) == Some(&fingerprint(&shaped));
    resume.get("state").filter(|s| belongs && s.is_object()).cloned()
}

/// A state in the host's form for a shaped stream, with nothing in the connector's shape: a
/// later run reads the host's form (it belongs to the empty shape), and ends with its shape.
pub fn host_form_only(state: Value) -> Value {
    json!({ RESUME_KEY: {"for": fingerprint(&json!({})), "state": state} })
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
    blake3::hash(canonical_text(value).as_bytes()).to_hex()[..32].to_string()
}

/// A JSON value's text with every object's members in key order: the same for any order
/// another engine (or a connector in another run) wrote them in.
pub fn canonical_text(value: &Value) -> String {
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
    text
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
