//! Resuming inside a partition. For a stream whose connector says its page tokens stay valid
//! across runs (the `resume` export, contract 0.1.2), the host keeps in the stream's state, for
//! each partition being read, where it started and the token of its next page; a run resumed
//! from that state continues such a partition from that page instead of reading it again. A
//! stream read in full also keeps the partitions it finished, so a resumed full read skips them
//! (Airbyte's resumable full refresh); a full read that completes leaves nothing behind.
//!
//! In the state (beside the cursor's keys):
//! `"in_progress": [{"partition": KEY, "start": CURSOR | null, "token": TOKEN, "cursor": MAX | null}]`
//! and, for full reads, `"done": [KEY, ...]`.

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// Where a part-read partition continues.
#[derive(Debug, Clone, PartialEq)]
pub struct Checkpoint {
    /// The partition's cursor start when it was first read (a token belongs to it).
    pub start: Option<Value>,
    /// The token of the next page, as JSON.
    pub token: Value,
    /// The largest cursor value written so far.
    pub cursor: Option<Value>,
}

/// The checkpoints of one resumable stream.
#[derive(Debug, Default)]
pub struct Resumption {
    /// By partition key, as compact JSON text.
    in_progress: BTreeMap<String, (Value, Checkpoint)>,
    /// Full reads only: partitions the read being resumed finished.
    done: BTreeSet<String>,
    full_read: bool,
}

/// A partition key in one spelling, however the guest spaced it.
pub fn key_text(key: &str) -> String {
    serde_json::from_str::<Value>(key).map(|v| v.to_string()).unwrap_or_else(|_| key.to_string())
}

impl Resumption {
    /// The checkpoints in a saved state. `full_read` streams also keep their finished partitions.
    pub fn from_state(stream: &str, saved: Option<&Value>, full_read: bool) -> anyhow::Result<Self> {
        let mut resumption = Resumption { full_read, ..Default::default() };
        let Some(saved) = saved else { return Ok(resumption) };
        let fail = |what: String| anyhow::anyhow!("state of stream {stream:?}: {what}");
        if let Some(list) = saved.get("in_progress") {
            let list = list.as_array().ok_or_else(|| fail("\"in_progress\" must be an array".into()))?;
            for (i, entry) in list.iter().enumerate() {
                let (Some(key), Some(token)) = (entry.get("partition"), entry.get("token")) else {
                    return Err(fail(format!("in_progress[{i}] needs a \"partition\" and a \"token\"")));
                };
                let cursor = |name: &str| entry.get(name).filter(|v| !v.is_null()).cloned();
                let checkpoint = Checkpoint { start: cursor("start"), token: token.clone(), cursor: cursor("cursor") };
                resumption.in_progress.insert(key.to_string(), (key.clone(), checkpoint));
            }
        }
        if full_read && let Some(list) = saved.get("done") {
            let list = list.as_array().ok_or_else(|| fail("\"done\" must be an array".into()))?;
            resumption.done.extend(list.iter().map(Value::to_string));
        }
        Ok(resumption)
    }

    /// Where the partition with `key` (compact JSON text) continues, if it was part-read.
    pub fn checkpoint(&self, key: &str) -> Option<&Checkpoint> {
        self.in_progress.get(key).map(|(_, c)| c)
    }

    /// True when a full read being resumed finished this partition already.
    pub fn is_done(&self, key: &str) -> bool {
        self.done.contains(key)
    }

    /// The partition's pages up to `checkpoint.token` are written.
    pub fn save(&mut self, key: &str, checkpoint: Checkpoint) {
        let value = serde_json::from_str(key).unwrap_or(Value::Null);
        self.in_progress.insert(key.to_string(), (value, checkpoint));
    }

    /// The partition ended: finished (`ok`), or failed, when the next run starts it over (its
    /// token may be what failed).
    pub fn finished(&mut self, key: &str, ok: bool) {
        self.in_progress.remove(key);
        if ok && self.full_read {
            self.done.insert(key.to_string());
        }
    }

    /// The stream ended; a full read that `complete`d leaves nothing to resume.
    pub fn stream_finished(&mut self, complete: bool) {
        if complete {
            self.done.clear();
        }
    }

    /// Entries this adds to a STATE.
    pub fn entries(&self) -> usize {
        self.in_progress.len() + self.done.len()
    }

    /// Adds the checkpoints to a stream's state (making one when there is none).
    pub fn add_to(&self, state: &mut Option<Value>) {
        if self.in_progress.is_empty() && self.done.is_empty() {
            return;
        }
        let state = state.get_or_insert_with(|| json!({}));
        if !self.in_progress.is_empty() {
            let entries: Vec<Value> = self
                .in_progress
                .values()
                .map(|(key, c)| json!({"partition": key, "start": c.start, "token": c.token, "cursor": c.cursor}))
                .collect();
            state["in_progress"] = Value::Array(entries);
        }
        if !self.done.is_empty() {
            let keys: Vec<Value> = self.done.iter().map(|k| serde_json::from_str(k).unwrap_or(Value::Null)).collect();
            state["done"] = Value::Array(keys);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checkpoints_round_trip_through_the_state() {
        let mut r = Resumption::from_state("s", None, true).unwrap();
        let key = key_text(r#"{ "p": 1 }"#);
        r.save(&key, Checkpoint { start: Some(json!(5)), token: json!({"offset": 20}), cursor: Some(json!(9)) });
        r.finished(&key_text(r#"{"p":2}"#), true);
        let mut state = None;
        r.add_to(&mut state);
        let state = state.unwrap();
        let back = Resumption::from_state("s", Some(&state), true).unwrap();
        assert_eq!(back.checkpoint(&key), r.checkpoint(&key));
        assert!(back.is_done(r#"{"p":2}"#));
        // A failed partition starts over; a complete full read leaves nothing.
        let mut back = back;
        back.finished(&key, false);
        back.stream_finished(true);
        let mut state = None;
        back.add_to(&mut state);
        assert_eq!(state, None);
    }
}
