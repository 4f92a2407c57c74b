//! What the host does with whatever a connector hands back, using the `test-connector` plugin
//! whose config picks its behaviour.

use crate::support::*;
use serde_json::{Value, json};

fn run_mode(config: Value) -> HostRun {
    let files = Files::new();
    host(&["run", "--streams", "numbers"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("config.json", &config))
        .run()
}

#[test]
fn pages_and_partitions_are_all_read() {
    let run = run_mode(json!({"partitions": 3, "pages": 4, "per_page": 5}));
    assert!(run.success(), "{}", run.explain());
    assert_eq!(sorted(run.ids("numbers")), (0..60).collect::<Vec<_>>());
}

#[test]
fn guest_output_and_logs_become_log_messages() {
    let files = Files::new();
    let run = host(&["check"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("c.json", &json!({"mode": "print"})))
        .run();
    assert!(run.success());
    let logs = run.of_type("LOG");
    let find = |text: &str| {
        logs.iter().find(|l| l["log"]["message"].as_str().unwrap().contains(text)).map(|l| l["log"]["level"].clone())
    };
    assert_eq!(find("[stdout] hello from stdout"), Some(json!("INFO")));
    assert_eq!(find("[stderr] hello from stderr"), Some(json!("WARN")));
    assert_eq!(find("hello from the log import"), Some(json!("WARN")));
}

#[test]
fn invalid_records_fail_the_partition_naming_the_stream() {
    for (mode, expected) in [("invalid-json", "not valid JSON"), ("not-object", "must be a JSON object")] {
        let run = run_mode(json!({"mode": mode}));
        assert!(!run.success(), "{mode}");
        let errors = run.errors();
        assert_eq!(errors.len(), 1, "{mode}: {}", run.stdout());
        assert!(errors[0]["message"].as_str().unwrap().contains(expected), "{mode}: {}", errors[0]);
        assert_eq!(errors[0]["stream_descriptor"]["name"], "numbers");
        assert_eq!(errors[0]["failure_type"], "system_error");
        assert!(run.of_type("RECORD").is_empty(), "{mode}: nothing from a bad page is written");
        assert_eq!(run.statuses("numbers"), ["STARTED", "INCOMPLETE"]);
    }
}

#[test]
fn newlines_inside_records_cannot_forge_messages() {
    let run = run_mode(json!({"mode": "newline"}));
    assert!(run.success(), "{}", run.explain());
    // Every stdout line parsed as one message (the harness checks), and the records survived whole.
    let records = run.records("numbers");
    assert_eq!(records, [&json!({"id": 1, "note": "x"}), &json!({"id": 2, "text": "a\nb"})]);
    // A stream read in full ends with the Airbyte CDK's no-cursor STATE, and nothing else.
    let states = run.of_type("STATE");
    assert_eq!(states.len(), 1, "{states:?}");
    assert_eq!(states[0]["state"]["stream"]["stream_state"], json!({"__ab_no_cursor_state_message": true}));
    assert_eq!(states[0]["state"]["sourceStats"]["recordCount"], json!(2.0));

    // Two JSON values in one record are not one object: refused, nothing forged.
    let forged = run_mode(json!({"mode": "forge"}));
    assert!(!forged.success());
    assert!(forged.of_type("STATE").is_empty(), "{}", forged.stdout());
    assert!(forged.of_type("RECORD").is_empty());
}

#[test]
fn error_kinds_map_to_failure_types() {
    for (mode, failure, text) in [
        ("config-error", "config_error", "the API key is wrong"),
        ("transient-error", "transient_error", "the API is overloaded"),
        ("panic", "system_error", "the connector crashed"),
    ] {
        let run = run_mode(json!({"mode": mode}));
        assert!(!run.success(), "{mode}");
        let errors = run.errors();
        assert_eq!(errors.len(), 1, "{mode}: {}", run.stdout());
        assert_eq!(errors[0]["failure_type"], failure, "{mode}");
        assert!(errors[0]["message"].as_str().unwrap().contains(text), "{mode}: {}", errors[0]);
    }
}

#[test]
fn a_failed_partition_leaves_the_others_complete() {
    let run =
        run_mode(json!({"mode": "fail-partition", "partitions": 4, "pages": 2, "per_page": 3, "failing_partition": 1}));
    assert!(!run.success(), "a failed stream fails the exit code");
    let expected: Vec<u64> = (0..24).filter(|id| id / 6 != 1).collect();
    assert_eq!(sorted(run.ids("numbers")), expected);
    let errors = run.errors();
    assert_eq!(errors.len(), 1);
    assert!(errors[0]["message"].as_str().unwrap().contains("partition 1 fails on purpose"));
    assert_eq!(run.statuses("numbers"), ["STARTED", "RUNNING", "INCOMPLETE"]);
}

#[test]
fn a_repeated_page_token_is_caught() {
    let run = run_mode(json!({"mode": "repeat-token"}));
    assert!(!run.success());
    let errors = run.errors();
    assert!(errors[0]["message"].as_str().unwrap().contains("repeated the token"), "{}", errors[0]);
    // Two pages were read before the repeat was seen.
    assert_eq!(run.ids("numbers"), [0, 1]);
}

#[test]
fn a_panic_in_check_is_a_failed_check() {
    let files = Files::new();
    let run = host(&["check"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("c.json", &json!({"mode": "panic"})))
        .run();
    let status = &run.of_type("CONNECTION_STATUS")[0]["connectionStatus"];
    assert_eq!(status["status"], "FAILED");
    assert!(status["message"].as_str().unwrap().contains("crashed"), "{status}");
}

/// An instance's memory comes from a pool slot the instance before it wrote to: the slot is reset
/// by copying back the pages that instance dirtied (up to 8 MiB) and giving back the rest. One
/// partition at a time, each instance writes every other page of 1 MiB the image leaves zeroed
/// and of 256 KiB it fills (160 separate runs of pages), and every next one must find them all
/// as the image left them.
#[test]
fn every_partition_finds_its_memory_as_the_image_left_it() {
    let files = Files::new();
    let run = host(&["run", "--streams", "numbers", "--concurrency", "1"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("config.json", &json!({"mode": "dirty-memory", "partitions": 6})))
        .run();
    assert!(run.success(), "{}", run.explain());
    let records = run.records("numbers");
    assert_eq!(records.len(), 6);
    for record in records {
        assert_eq!(record["pristine"], true, "an instance found its memory as another left it: {record}");
    }
}

/// A guest that sleeps (`std::thread::sleep`: a WASI clock pollable) is waiting, not computing:
/// six partitions each sleep 700 ms under a CPU budget of 500 ms a call and all succeed, and the
/// run's guest time is what they computed, not what they slept. (The clock used to run through
/// the wait, and read the wall clock when the guest woke on another thread: most such runs
/// failed with the CPU budget exceeded.)
#[test]
fn a_sleeping_guest_is_not_charged_for_its_sleep() {
    let files = Files::new();
    let config = json!({"mode": "sleep", "partitions": 6, "sleep_ms": 700});
    let run = host(&["run", "--streams", "numbers", "--concurrency", "6", "--cpu-ms-per-call", "500"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("config.json", &config))
        .run();
    assert!(run.success(), "{}", run.explain());
    let records = run.records("numbers");
    assert_eq!(records.len(), 6);
    for record in records {
        assert!(record["slept_ms"].as_u64().unwrap() >= 700, "{record}");
    }
    let (_, guest_secs, _) = run.summary_figures();
    assert!(guest_secs < 0.5, "4.2 s of sleep counted as guest time: {:?}", run.logs().last());
}

/// A connector built for contract 0.1.7 names the config fields its partitions read (the Rust
/// SDK: those its `Config` names); the host hands the calls that read a partition only those,
/// so a long list only the listing reads is not read again in every partition's instance.
#[test]
fn partitions_get_only_the_config_fields_the_connector_names() {
    let keys: Vec<u64> = (0..1000).collect();
    let run = run_mode(json!({"mode": "config-fields", "listing_keys": keys, "partitions": 3}));
    assert!(run.success(), "{}", run.explain());
    let records = run.records("numbers");
    assert_eq!(records.len(), 3);
    for record in records {
        assert_eq!(record["config_fields"], json!(["mode", "partitions"]), "{record}");
    }
    let said = run
        .logs()
        .iter()
        .any(|l| l.contains("partitions are read without the config fields they do not use: listing_keys"));
    assert!(said, "{:?}", run.logs());
}
