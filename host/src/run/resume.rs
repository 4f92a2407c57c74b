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
//!
//! A saved state is taken in under the run's bounds: a token longer than
//! [`MAX_TOKEN_BYTES`](crate::run::read::MAX_TOKEN_BYTES) (what a run accepts from a connector) is
//! refused, naming the stream and the partition, and in-progress entries past the limit are
//! dropped, each such partition read again from its start (nothing is lost; its records may be
//! written again), which the run says in a WARN.

#[cfg(test)]
use crate::run::read::MAX_TOKEN_BYTES;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The length of `value` as compact JSON, counted without writing it anywhere.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, nor can serializing a Value.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

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
    /// In-progress entries of the saved state past the limit, dropped.
    dropped: usize,
}

/// A partition key in one spelling, however the guest spaced it (as the listing makes every
/// key it hands over, `read::hand_over`).
pub fn key_text(key: &str) -> String {
    serde_json::from_str::<Value>(key).map(|v| v.to_string()).unwrap_or_else(|_| key.to_string())
}

impl Resumption {
    /// The checkpoints in a saved state, at most
    /// [`DEFAULT_MAX_PARTITION_CURSORS`](crate::data::state::DEFAULT_MAX_PARTITION_CURSORS) of
    /// them (see [`Resumption::with_limit`]). For the unit tests and fuzz targets: a run
    /// passes its own limit.
    #[cfg(test)]
    pub fn from_state(stream: &str, saved: Option<&Value>, full_read: bool) -> anyhow::Result<Self> {
        Self::with_limit(stream, saved, full_read, crate::data::state::DEFAULT_MAX_PARTITION_CURSORS, MAX_TOKEN_BYTES)
    }

    /// The checkpoints in a saved state. `full_read` streams also keep their finished
    /// partitions. A token longer than `max_token_bytes` is refused (a run never accepts one
    /// from a connector, and every STATE of the stream would carry it); past `max_in_progress`
    /// in-progress entries the rest are dropped and counted ([`Resumption::dropped`]): each such
    /// partition is read again from its start, which loses nothing.
    pub fn with_limit(
        stream: &str,
        saved: Option<&Value>,
        full_read: bool,
        max_in_progress: usize,
        max_token_bytes: usize,
    ) -> anyhow::Result<Self> {
        let mut resumption = Resumption { full_read, ..Default::default() };
        let Some(saved) = saved else { return Ok(resumption) };
        let fail = |what: String| anyhow::anyhow!("state of stream {stream:?}: {what}");
        if let Some(list) = saved.get("in_progress") {
            let list = list.as_array().ok_or_else(|| fail("\"in_progress\" must be an array".into()))?;
            for (i, entry) in list.iter().enumerate() {
                let (Some(key), Some(token)) = (entry.get("partition"), entry.get("token")) else {
                    return Err(fail(format!("in_progress[{i}] needs a \"partition\" and a \"token\"")));
                };
                let size = json_len(token);
                if size > max_token_bytes {
                    return Err(fail(format!(
                        "the token of partition {} (in_progress[{i}]) is {size} bytes, more than the {max_token_bytes} \
                         a token may have (--max-token-kib)",
                        crate::data::protocol::preview(&key.to_string())
                    )));
                }
                let text = key.to_string();
                if resumption.in_progress.len() >= max_in_progress && !resumption.in_progress.contains_key(&text) {
                    resumption.dropped += 1;
                    continue;
                }
                let cursor = |name: &str| entry.get(name).filter(|v| !v.is_null()).cloned();
                let checkpoint = Checkpoint { start: cursor("start"), token: token.clone(), cursor: cursor("cursor") };
                resumption.in_progress.insert(text, (key.clone(), checkpoint));
            }
        }
        if full_read && let Some(list) = saved.get("done") {
            let list = list.as_array().ok_or_else(|| fail("\"done\" must be an array".into()))?;
            resumption.done.extend(list.iter().map(Value::to_string));
        }
        Ok(resumption)
    }

    /// In-progress entries of the saved state dropped past the limit ([`Resumption::with_limit`]).
    pub fn dropped(&self) -> usize {
        self.dropped
    }

    /// Where the partition with `key` (compact JSON text) continues, if it was part-read.
    pub fn checkpoint(&self, key: &str) -> Option<&Checkpoint> {
        self.in_progress.get(key).map(|(_, c)| c)
    }

    /// Keeps the part-read partitions whose key (compact JSON text) `keep` says.
    pub fn retain_in_progress(&mut self, keep: impl Fn(&str) -> bool) {
        self.in_progress.retain(|key, _| keep(key));
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

    /// A token from a saved state is held to what a run accepts from a connector: one longer
    /// than MAX_TOKEN_BYTES (a 100 MB token made 100 MB STATE lines) is refused, naming the
    /// stream, the partition and the limit; one at the limit is taken.
    #[test]
    fn a_saved_token_past_the_limit_is_refused() {
        let entry = |token: String| json!({"in_progress": [{"partition": {"p": 7}, "start": null, "token": token}]});
        // A JSON string of MAX_TOKEN_BYTES - 2 characters is MAX_TOKEN_BYTES bytes with its quotes.
        let at = entry("a".repeat(MAX_TOKEN_BYTES - 2));
        let r = Resumption::from_state("items", Some(&at), false).unwrap();
        assert!(r.checkpoint(r#"{"p":7}"#).is_some());
        let past = entry("a".repeat(MAX_TOKEN_BYTES - 1));
        let error = Resumption::from_state("items", Some(&past), false).unwrap_err().to_string();
        assert_eq!(
            error,
            format!(
                "state of stream \"items\": the token of partition {{\"p\":7}} (in_progress[0]) is {} bytes, more than \
                 the {MAX_TOKEN_BYTES} a token may have (--max-token-kib)",
                MAX_TOKEN_BYTES + 1
            )
        );
        // Counted as JSON: escapes count as they are written.
        assert_eq!(json_len(&json!({"a": "\"\n"})), r#"{"a":"\"\n"}"#.len());
    }

    /// In-progress entries past the limit are dropped, counted, and their partitions read from
    /// their start: the first ones are kept, whatever their number (a hostile state had a
    /// million); a key given twice counts once.
    #[test]
    fn in_progress_entries_past_the_limit_are_dropped() {
        let entries: Vec<Value> = [0, 1, 1, 2, 3, 4]
            .iter()
            .map(|p| json!({"partition": {"p": p}, "start": 1, "token": {"page": p}, "cursor": null}))
            .collect();
        let saved = json!({"in_progress": entries});
        let r = Resumption::with_limit("s", Some(&saved), false, 3, MAX_TOKEN_BYTES).unwrap();
        assert_eq!(r.dropped(), 2);
        assert_eq!(r.entries(), 3);
        for p in 0..3 {
            let c = r.checkpoint(&format!(r#"{{"p":{p}}}"#)).unwrap();
            assert_eq!(c.token, json!({"page": p}));
        }
        assert!(r.checkpoint(r#"{"p":3}"#).is_none() && r.checkpoint(r#"{"p":4}"#).is_none());
        let mut state = None;
        r.add_to(&mut state);
        assert_eq!(state.unwrap()["in_progress"].as_array().unwrap().len(), 3);
        assert_eq!(Resumption::with_limit("s", Some(&saved), false, 5, MAX_TOKEN_BYTES).unwrap().dropped(), 0);
    }
}
