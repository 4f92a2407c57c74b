//! Sharded reads (`--shard I/N`): N processes, on as many machines, read one sync between them.
//! Every shard lists every stream's partitions the same way (the listing is the connector's, and
//! a parent stream's records are read by each shard: listing once and handing the list over would
//! need a place all shards can read, which a platform's indexed jobs do not give), then reads
//! only the partitions whose stable hash of stream and partition key falls in its shard, so each
//! partition is read by exactly one shard. Each shard writes its own state; `host state merge`
//! ([`crate::data::state`]) makes them one that the next sync resumes from, sharded or not.

use crate::data::state::{InputState, StreamCursor, is_nothing_saved};
use crate::run::shape::{RESUME_KEY, canonical_text, carried_host_form, host_form_only};
use anyhow::{anyhow, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::str::FromStr;

/// Shards a sync may be cut into, at most: each still lists every partition.
pub const MAX_SHARDS: u32 = 4096;

/// Shard `index` (from 0) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Whether this shard reads the partition with `key` (its JSON text) of `stream`. The hash
    /// is of the key with its object members in one order, so a key the connector spells
    /// differently in another run still falls in the same shard; it depends on nothing of the
    /// process, so every shard and every later sync agree.
    pub fn owns(&self, stream: &str, key: &str) -> bool {
        let canonical = match serde_json::from_str::<serde_json::Value>(key) {
            Ok(value) => canonical_text(&value),
            Err(_) => key.to_string(),
        };
        let mut hash = Sha256::new();
        hash.update(stream.as_bytes());
        hash.update([0]);
        hash.update(canonical.as_bytes());
        let digest = hash.finalize();
        let n = u64::from_be_bytes(digest[..8].try_into().expect("eight bytes"));
        n % u64::from(self.count) == u64::from(self.index)
    }
}

impl FromStr for Shard {
    type Err = String;

    /// `I/N`: shard I (from 0, as a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`) of N.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || format!("{text:?} is not a shard: write I/N, shard I (0 to N-1) of N (1 to {MAX_SHARDS})");
        let (index, count) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) =
            (index.trim().parse().map_err(|_| bad())?, count.trim().parse().map_err(|_| bad())?);
        if count == 0 || count > MAX_SHARDS || index >= count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The states of one sync's shards, merged into one (`host state merge`): for each stream, what
/// any shard finished is finished (each partition's cursor the largest, finished ranges and
/// low-water marks together, the part-read partitions, finished partitions of a full read and
/// report jobs each shard carries for its own), and then, as for a run that read every
/// partition, the bookmark a finished sync hands the next one. A stream whose state the
/// connector shapes (the declarative engine's) is merged from the host's form each shard
/// carries beside it, and written in that form alone: the next Sluice sync (sharded or not)
/// reads it and writes the connector's shape again. `states` are the parsed state files, in
/// order; a stream's states are merged in that order.
pub fn merge(states: Vec<InputState>, max_cursors: usize) -> anyhow::Result<Vec<(String, Value)>> {
    let mut by_stream: BTreeMap<String, Vec<(usize, Value)>> = BTreeMap::new();
    for (file, state) in states.into_iter().enumerate() {
        for (stream, value) in state.streams {
            by_stream.entry(stream).or_default().push((file, value));
        }
    }
    by_stream
        .into_iter()
        .map(|(stream, states)| {
            let merged = merge_stream(&stream, states, max_cursors)?;
            Ok((stream, merged))
        })
        .collect()
}

/// One stream's states (by the index of the file each came from), merged.
fn merge_stream(stream: &str, states: Vec<(usize, Value)>, max_cursors: usize) -> anyhow::Result<Value> {
    let mut shaped = false;
    let mut host_forms = Vec::new();
    let mut finished_in_full = false;
    for (file, state) in states {
        let state = match state.get(RESUME_KEY) {
            Some(_) => {
                shaped = true;
                carried_host_form(&state).ok_or_else(|| {
                    anyhow!(
                        "state {} of stream {stream:?}: the host's form beside it was written for another state (merge the states the shards wrote, not states another engine moved on)",
                        file + 1
                    )
                })?
            }
            None => state,
        };
        if is_nothing_saved(&state) {
            finished_in_full |= state.as_object().is_some_and(|o| !o.is_empty());
            continue;
        }
        if !state.is_object() {
            bail!("state {} of stream {stream:?} is not a JSON object: {state}", file + 1);
        }
        host_forms.push((file, state));
    }
    let field = cursor_field(stream, &host_forms)?;
    let mut merged = match &field {
        Some(field) => {
            let mut cursor: Option<StreamCursor> = None;
            for (file, state) in &host_forms {
                let other = StreamCursor::with_limit(stream, field.clone(), Some(state), max_cursors).map_err(|e| {
                    anyhow!(
                        "state {} of stream {stream:?} is not in the host's form ({e:#}); a shaped state must carry it beside (shards do)",
                        file + 1
                    )
                })?;
                match cursor.as_mut() {
                    Some(cursor) => cursor.merge_from(&other),
                    None => cursor = Some(other),
                }
            }
            let mut cursor = cursor.expect("a cursor field comes from a state");
            cursor.merged_finished();
            cursor.to_state()
        }
        None => json!({}),
    };
    // What each shard carries for its own partitions, once each.
    for list in ["in_progress", "jobs"] {
        let entries = union(host_forms.iter().filter_map(|(_, s)| s.get(list)), |e| e.get("partition"));
        if !entries.is_empty() {
            merged[list] = Value::Array(entries);
        }
    }
    let done = union(host_forms.iter().filter_map(|(_, s)| s.get("done")), Some);
    if !done.is_empty() {
        merged["done"] = Value::Array(done);
    }
    let merged = match (shaped, &field, is_nothing_saved(&merged) && merged.as_object().is_some_and(|o| o.is_empty())) {
        (_, None, true) if finished_in_full => crate::data::state::no_cursor_state(),
        (true, _, _) => host_form_only(merged),
        _ => merged,
    };
    Ok(merged)
}

/// The stream's cursor field, which every state that names one must agree on.
fn cursor_field(stream: &str, states: &[(usize, Value)]) -> anyhow::Result<Option<Vec<String>>> {
    let mut field: Option<(usize, Vec<String>)> = None;
    for (file, state) in states {
        let Some(named) = state.get("cursor_field") else { continue };
        let named: Vec<String> = serde_json::from_value(named.clone())
            .map_err(|_| anyhow!("state {} of stream {stream:?}: cursor_field must be a list of names", file + 1))?;
        match &field {
            Some((first, f)) if *f != named => bail!(
                "the states of stream {stream:?} disagree on its cursor field: {f:?} (state {}) and {named:?} (state {})",
                first + 1,
                file + 1
            ),
            Some(_) => {}
            None => field = Some((*file, named)),
        }
    }
    Ok(field.map(|(_, f)| f))
}

/// The entries of several JSON lists, each once by its identity (`id`; the first kept).
fn union<'v>(lists: impl Iterator<Item = &'v Value>, id: impl Fn(&'v Value) -> Option<&'v Value>) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for entry in lists.filter_map(Value::as_array).flatten() {
        if let Some(key) = id(entry)
            && seen.insert(canonical_text(key))
        {
            out.push(entry.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_partition_falls_in_exactly_one_shard_and_always_the_same() {
        for count in [1, 2, 3, 4, 7] {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            let mut per_shard = vec![0; count as usize];
            for i in 0..1000 {
                let key = format!(r#"{{"account_id": {i}, "kind": "a"}}"#);
                let owners: Vec<&Shard> = shards.iter().filter(|s| s.owns("items", &key)).collect();
                assert_eq!(owners.len(), 1, "{key} in {count} shards");
                per_shard[owners[0].index as usize] += 1;
                // Another spelling of the same key: the same shard.
                let respelled = format!(r#"{{"kind":"a","account_id":{i}}}"#);
                assert!(owners[0].owns("items", &respelled));
            }
            // Spread evenly enough that no shard is idle (1000 keys).
            assert!(per_shard.iter().all(|n| *n > 1000 / count as usize / 2), "{per_shard:?}");
        }
    }

    #[test]
    fn shards_are_written_i_of_n() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(Shard { index: 2, count: 4 }.to_string(), "2/4");
        for bad in ["4/4", "0/0", "1", "a/b", "-1/3", "0/5000"] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert!(e.contains("is not a shard"), "{bad}: {e}");
        }
    }

    fn parsed(text: &str) -> InputState {
        InputState::parse(text).unwrap()
    }

    /// Windows read by two shards, each with gaps where the other's are: together they cover
    /// everything, and the bookmark comes down to the newest record, as after one run.
    #[test]
    fn shards_windows_merge_into_one_finished_sync() {
        let a = parsed(r#"{"w": {"cursor_field": ["n"], "low_water": 10, "newest": 8, "completed": [[20, 30, 27]]}}"#);
        let b = parsed(r#"{"w": {"cursor_field": ["n"], "low_water": 0, "completed": [[10, 20, 15], [30, 40, 33]]}}"#);
        let merged = merge(vec![a, b], 10_000).unwrap();
        assert_eq!(merged, [("w".to_string(), json!({"cursor_field": ["n"], "low_water": 33, "newest": 33}))]);
        // A window no shard finished stays a gap: read again next time, nothing claimed past it.
        let a = parsed(r#"{"w": {"cursor_field": ["n"], "low_water": 10, "newest": 8}}"#);
        let b = parsed(r#"{"w": {"cursor_field": ["n"], "low_water": 0, "completed": [[20, 30, 27]]}}"#);
        let merged = merge(vec![a, b], 10_000).unwrap();
        assert_eq!(
            merged[0].1,
            json!({"cursor_field": ["n"], "low_water": 10, "newest": 8, "completed": [[20, 30, 27]]})
        );
    }

    /// Partition cursors: each the largest any shard has (a shard carries the others' as it was
    /// handed them); part-read partitions and report jobs each once.
    #[test]
    fn shards_partition_cursors_merge_to_the_largest() {
        let a = parsed(
            r#"{"p": {"cursor_field": ["t"], "partitions": [{"partition": {"k": 1}, "cursor": 5}, {"partition": {"k": 2}, "cursor": 1}],
                      "in_progress": [{"partition": {"k": 3}, "token": "x"}]}}"#,
        );
        let b = parsed(
            r#"{"p": {"cursor_field": ["t"], "partitions": [{"partition": {"k": 1}, "cursor": 1}, {"partition": {"k": 2}, "cursor": 7}]}}"#,
        );
        let merged = merge(vec![a, b], 10_000).unwrap();
        let p = &merged[0].1;
        assert_eq!(
            p["partitions"],
            json!([{"partition": {"k": 1}, "cursor": 5}, {"partition": {"k": 2}, "cursor": 7}])
        );
        assert_eq!(p["newest"], json!(7));
        assert_eq!(p["in_progress"], json!([{"partition": {"k": 3}, "token": "x"}]));
    }

    /// A shaped stream merges the host's form each shard carries, and is written in it alone;
    /// full reads that finished stay finished; disagreeing cursor fields are refused.
    #[test]
    fn shaped_full_and_conflicting_states() {
        let shaped = |n: u64| {
            let host = json!({"cursor_field": ["n"], "low_water": 0, "completed": [[n, n + 10, n + 5]]});
            crate::run::shape::host_form_only(host)
        };
        let a = parsed(&json!({"s": shaped(0)}).to_string());
        let b = parsed(&json!({"s": shaped(10)}).to_string());
        let merged = merge(vec![a, b], 10_000).unwrap();
        let host = carried_host_form(&merged[0].1).expect("the host's form, for the empty shape");
        assert_eq!(host, json!({"cursor_field": ["n"], "low_water": 15, "newest": 15}));
        let full = r#"{"f": {"__ab_no_cursor_state_message": true}}"#;
        assert_eq!(
            merge(vec![parsed(full), parsed(full)], 10).unwrap()[0].1,
            json!({"__ab_no_cursor_state_message": true})
        );
        let x = parsed(r#"{"s": {"cursor_field": ["a"], "low_water": 1}}"#);
        let y = parsed(r#"{"s": {"cursor_field": ["b"], "low_water": 1}}"#);
        let e = merge(vec![x, y], 10).unwrap_err().to_string();
        assert!(e.contains("disagree on its cursor field"), "{e}");
        let moved = parsed(r#"{"s": {"n": 5, "__sluice": {"for": "0", "state": {"cursor_field": ["n"]}}}}"#);
        let e = merge(vec![moved], 10).unwrap_err().to_string();
        assert!(e.contains("written for another state"), "{e}");
    }
}
