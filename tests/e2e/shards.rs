//! Sharded reads (`--shard I/N`) and `host state merge`: N processes read one sync between them,
//! each partition exactly once, and the merged state resumes the next sync, sharded any way or
//! not at all, exactly as the state of one unsharded run would.

use crate::support::*;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// Every kind of stream: one partition read in full (`items`), a partition per account with its
/// own cursor (`account_items`), windows of a cursor (`windowed_items`).
const STREAMS: [&str; 3] = ["items", "account_items", "windowed_items"];

fn api(records: u64) -> DemoApi {
    demo_api(DemoApiConfig { records, accounts: 6, ..Default::default() })
}

fn config(files: &Files, api: &DemoApi, name: &str) -> PathBuf {
    files.json(name, &json!({"base_url": api.base_url(), "page_size": 7, "window_minutes": 15}))
}

/// One run of the demo connector: every stream, from `state`, as `shard` of a sharded read.
fn read(api: &DemoApi, config: &Path, state: Option<&Path>, shard: Option<String>) -> HostRun {
    let mut command = host(&["run", "--streams", &STREAMS.join(",")]);
    if let Some(state) = state {
        command = command.arg("--state").arg(state);
    }
    if let Some(shard) = shard {
        command = command.arg("--shard").arg(shard);
    }
    let run = command.demo_source(api, config).run();
    assert!(run.success(), "{}", run.explain());
    run
}

fn shards(api: &DemoApi, config: &Path, state: Option<&Path>, count: u32) -> Vec<HostRun> {
    (0..count).map(|i| read(api, config, state, Some(format!("{i}/{count}")))).collect()
}

/// `host state merge` of the runs' outputs, written to a file.
fn merge(files: &Files, runs: &[HostRun], name: &str) -> PathBuf {
    let outputs: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(i, run)| files.text(&format!("{name}-{i}.jsonl"), &run.output.stdout).display().to_string())
        .collect();
    let merged = host(&["state", "merge"]).args(outputs).run();
    assert!(merged.success(), "{}", merged.explain());
    files.text(&format!("{name}.json"), &merged.output.stdout)
}

fn stream_state(file: &Path, stream: &str) -> Value {
    let messages: Value = serde_json::from_slice(&std::fs::read(file).unwrap()).unwrap();
    let message = messages.as_array().unwrap().iter().find(|m| m["stream"]["stream_descriptor"]["name"] == stream);
    message.map(|m| m["stream"]["stream_state"].clone()).unwrap_or(Value::Null)
}

/// Every stream's records of the shards together: each once, and the same as one run's.
fn same_records_once(shards: &[HostRun], whole: &HostRun, what: &str) {
    for stream in STREAMS {
        let mut ids: Vec<u64> = shards.iter().flat_map(|run| run.ids(stream)).collect();
        ids.sort_unstable();
        assert_eq!(ids, sorted(whole.ids(stream)), "{what}, {stream}: the shards read every record once");
    }
}

#[test]
fn shards_read_every_partition_once_and_their_merged_state_resumes_as_one_runs() {
    let files = Files::new();
    let first_api = api(120);
    let first_config = config(&files, &first_api, "config-1.json");
    let whole = read(&first_api, &first_config, None, None);
    let four = shards(&first_api, &first_config, None, 4);
    same_records_once(&four, &whole, "first sync in 4 shards");
    // The work is spread: several shards read account partitions.
    assert!(four.iter().filter(|r| !r.ids("account_items").is_empty()).count() >= 2);
    // Each shard says how many partitions it left to the others.
    let said = |run: &HostRun| run.logs().iter().any(|l| l.contains("read by other shards"));
    assert!(four.iter().all(said), "{:?}", four[0].logs());
    let merged = merge(&files, &four, "merged-1");
    for stream in ["account_items", "windowed_items"] {
        assert_eq!(stream_state(&merged, stream), whole.last_state(stream).unwrap(), "{stream}: the merged state");
    }
    drop(first_api);

    // The API has 40 items more; the next sync starts from the merged state.
    let second_api = api(160);
    let second_config = config(&files, &second_api, "config-2.json");
    let whole_output = files.text("whole-1.jsonl", &whole.output.stdout);
    let reference = read(&second_api, &second_config, Some(&whole_output), None);
    assert_eq!(sorted(reference.ids("account_items")), (121..=160).collect::<Vec<_>>());
    // Unsharded from the merged state: nothing lost, nothing read again.
    let from_merged = read(&second_api, &second_config, Some(&merged), None);
    same_records_once(std::slice::from_ref(&from_merged), &reference, "second sync from the merged state");
    // Two shards from the four shards' merged state.
    let two = shards(&second_api, &second_config, Some(&merged), 2);
    same_records_once(&two, &reference, "second sync in 2 shards");
    let merged_again = merge(&files, &two, "merged-2");
    for stream in ["account_items", "windowed_items"] {
        assert_eq!(stream_state(&merged_again, stream), reference.last_state(stream).unwrap(), "{stream}, second sync");
    }
}

#[test]
fn a_bad_shard_or_state_is_refused_naming_it() {
    let files = Files::new();
    let api = api(10);
    let config = config(&files, &api, "config.json");
    let run = host(&["run", "--shard", "4/4"]).demo_source(&api, &config).run();
    assert!(!run.success());
    assert!(run.stderr().contains("\"4/4\" is not a shard"), "{}", run.stderr());
    let a = files.json("a.json", &json!({"s": {"cursor_field": ["a"], "low_water": 1}}));
    let b = files.json("b.json", &json!({"s": {"cursor_field": ["b"], "low_water": 2}}));
    let merged = host(&["state", "merge"]).arg(&a).arg(&b).run();
    assert!(!merged.success());
    assert!(merged.stderr().contains("disagree on its cursor field"), "{}", merged.stderr());
}

/// A declarative manifest, whose states take the Airbyte CDK's shape: each shard carries the
/// host's form beside it, the merged state is in the host's form alone, and the next sync
/// from it reads and ends as a sync from one unsharded run's state.
#[test]
fn a_manifests_shards_merge_and_resume_as_one_run() {
    let files = Files::new();
    let manifest = crate::declarative::manifest("demo.yaml");
    let run = |api: &DemoApi, config: &Path, state: Option<&Path>, shard: Option<String>| {
        let mut command = host(&["run"]).arg(&manifest).arg("--config").arg(config).arg("--allow-host").arg(grant(api));
        command = command.arg("--streams").arg("account_items");
        if let Some(state) = state {
            command = command.arg("--state").arg(state);
        }
        if let Some(shard) = shard {
            command = command.arg("--shard").arg(shard);
        }
        let run = command.run();
        assert!(run.success(), "{}", run.explain());
        run
    };
    let first_api = api(120);
    let first_config = files.json("config-1.json", &demo_config(&first_api, 7));
    let whole = run(&first_api, &first_config, None, None);
    let three: Vec<HostRun> = (0..3).map(|i| run(&first_api, &first_config, None, Some(format!("{i}/3")))).collect();
    let mut ids: Vec<u64> = three.iter().flat_map(|r| r.ids("account_items")).collect();
    ids.sort_unstable();
    assert_eq!(ids, sorted(whole.ids("account_items")), "every record once");
    for shard in &three {
        let state = shard.last_state("account_items").unwrap();
        assert!(state.get("__sluice").is_some(), "a shard carries the host's form: {state}");
    }
    let merged = merge(&files, &three, "merged");
    drop(first_api);
    let second_api = api(160);
    let second_config = files.json("config-2.json", &demo_config(&second_api, 7));
    let whole_output = files.text("whole.jsonl", &whole.output.stdout);
    let reference = run(&second_api, &second_config, Some(&whole_output), None);
    let from_merged = run(&second_api, &second_config, Some(&merged), None);
    assert_eq!(sorted(from_merged.ids("account_items")), sorted(reference.ids("account_items")));
    assert!(reference.ids("account_items").contains(&160));
    // Back in the CDK's shape, as one run's.
    assert_eq!(from_merged.last_state("account_items"), reference.last_state("account_items"));
}
