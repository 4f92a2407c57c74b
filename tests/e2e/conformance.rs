//! The conformance kit (`host test`): the demo connector passes it in all three languages; the
//! broken connector fails it, each bug caught by the check that names it, at the place it is.

use crate::languages::{DEMO_PLUGINS, warm_cache};
use crate::support::*;
use serde_json::{Value, json};
use std::path::Path;

/// A `host test` run: its exit status and its JSON report.
struct KitRun {
    success: bool,
    report: Value,
    stderr: String,
}

impl KitRun {
    fn check(&self, name: &str, stream: Option<&str>) -> &Value {
        let checks = self.report["checks"].as_array().expect("checks");
        checks
            .iter()
            .find(|c| c["check"] == name && c["stream"].as_str() == stream)
            .unwrap_or_else(|| panic!("no check {name} {stream:?} in {:#}", self.report))
    }
    fn failed_checks(&self) -> Vec<String> {
        let checks = self.report["checks"].as_array().unwrap().iter().filter(|c| c["status"] == "fail");
        checks.map(|c| format!("{} {}", c["check"].as_str().unwrap(), c["stream"].as_str().unwrap_or(""))).collect()
    }
}

fn kit(plugin: &Path, config: &Path, cache: Option<&Path>, extra: &[&str]) -> KitRun {
    let mut host =
        host(&["test", "--json"]).arg(plugin).arg("--config").arg(config).args(extra.iter().map(|s| s.to_string()));
    if let Some(cache) = cache {
        host = host.arg("--cache-dir").arg(cache);
    } else {
        host = host.arg("--cache-dir").arg(workspace_root().join("target/test-cache"));
    }
    let output = host.run_raw();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let report =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("the report is not JSON ({e}): {stdout}\n{stderr}"));
    KitRun { success: output.status.success(), report, stderr }
}

fn demo_passes(name: &str) {
    let cache = warm_cache(name);
    let api = demo_api(DemoApiConfig { records: 250, accounts: 3, ..Default::default() });
    let files = Files::new();
    // Report jobs on: the job stream is checked like the others, through its jobs.
    let config = files.json(
        "config.json",
        &json!({"base_url": api.base_url(), "page_size": 30, "window_minutes": 45, "report_jobs": true, "report_page_size": 40,
            "listing_only": [1, 2, 3]}),
    );
    let grant = grant(&api);
    let run = kit(&plugin(name), &config, Some(&cache), &["--allow-host", &grant]);
    assert!(run.success, "{name}: {:#}\n{}", run.report, run.stderr);
    assert_eq!(run.report["passed"], true);
    assert_eq!(run.failed_checks(), Vec::<String>::new());
    // Its partitions were read, as a run reads them, with only the config fields it names.
    let notes = run.report["notes"].as_array().unwrap();
    let narrowed = notes.iter().any(|n| n.as_str().unwrap().ends_with("do not use: listing_only"));
    assert!(narrowed, "{name}: {notes:?}");
    for check in ["spec", "check", "check-broken", "discover"] {
        assert_eq!(run.check(check, None)["status"], "pass", "{check}");
    }
    // The broken configs were derived from the spec: base_url removed, and fields of the wrong type.
    assert!(run.check("check-broken", None)["facts"]["broken_configs"].as_u64().unwrap() >= 2);
    let records = |stream: &str| run.check("read", Some(stream))["facts"]["records"].as_u64().unwrap();
    assert_eq!(records("items"), 250);
    assert_eq!(records("accounts"), 3);
    assert_eq!(records("account_items"), 250);
    assert_eq!(records("windowed_items"), 250);
    assert_eq!(records("report_items"), 250);
    for stream in ["items", "accounts", "account_items", "windowed_items", "report_items"] {
        for check in ["partitions", "read", "pagination"] {
            assert_eq!(run.check(check, Some(stream))["status"], "pass", "{check} {stream}");
        }
    }
    // 250 items in pages of 30: 9 pages.
    assert_eq!(run.check("pagination", Some("items"))["facts"]["pages"], 9);
    assert_eq!(run.check("partitions", Some("account_items"))["facts"]["partitions"], 3);
    // From the final state nothing is left: open partitions read nothing, windows are skipped.
    let incremental = run.check("incremental", Some("account_items"));
    assert_eq!((incremental["status"].as_str(), incremental["facts"]["records"].as_u64()), (Some("pass"), Some(0)));
    let reports = run.check("incremental", Some("report_items"));
    assert_eq!((reports["status"].as_str(), reports["facts"]["records"].as_u64()), (Some("pass"), Some(0)));
    // Three reports of 84, 83 and 83 rows in pages of 40: three pages each.
    assert_eq!(run.check("pagination", Some("report_items"))["facts"]["pages"], 9);
    let windows = run.check("incremental", Some("windowed_items"));
    assert_eq!(windows["status"], "pass");
    assert_eq!(windows["facts"]["partitions"], 0);
    assert_eq!(
        windows["facts"]["skipped_partitions"],
        run.check("partitions", Some("windowed_items"))["facts"]["partitions"]
    );
    assert!(
        run.report["checks"].as_array().unwrap().iter().all(|c| c["stream"] != "items" || c["check"] != "incremental")
    );
}

#[test]
fn the_rust_demo_connector_passes_the_kit() {
    demo_passes(DEMO_PLUGINS[0]);
}

#[test]
fn the_kit_reads_report_job_streams_through_their_jobs() {
    let api = demo_api(DemoApiConfig { records: 120, accounts: 3, job_polls: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json(
        "config.json",
        &json!({"base_url": api.base_url(), "page_size": 50, "report_jobs": true, "report_page_size": 25}),
    );
    let run =
        kit(&plugin(DEMO_PLUGINS[0]), &config, None, &["--allow-host", &grant(&api), "--streams", "report_items"]);
    assert!(run.success, "{:#}\n{}", run.report, run.stderr);
    for check in ["partitions", "read", "pagination", "incremental"] {
        assert_eq!(run.check(check, Some("report_items"))["status"], "pass", "{check}");
    }
    assert_eq!(run.check("read", Some("report_items"))["facts"]["records"], 120);
    // 40 rows a report in pages of 25: two pages each of its three jobs.
    assert_eq!(run.check("pagination", Some("report_items"))["facts"]["pages"], 6);
    let incremental = run.check("incremental", Some("report_items"));
    assert_eq!(incremental["facts"]["records"], 0, "{incremental}");
    // Every job the kit created was polled to its end, read, and deleted.
    let stats = api.stats();
    assert_eq!(stats.jobs_created, 6, "three jobs for the full read, three for the incremental one");
    assert_eq!(stats.jobs_deleted, stats.jobs_created);
    assert_eq!(stats.jobs_kept, 0);
}

#[test]
fn the_python_demo_connector_passes_the_kit() {
    demo_passes(DEMO_PLUGINS[1]);
}

#[test]
fn the_javascript_demo_connector_passes_the_kit() {
    demo_passes(DEMO_PLUGINS[2]);
}

#[test]
fn the_text_report_names_every_check_and_the_verdict() {
    let api = demo_api(DemoApiConfig { records: 40, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 10));
    let output =
        host(&["test"]).demo_source(&api, &config).arg("--cache-dir").arg(files.path().join("cache")).run_raw();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{text}");
    assert!(text.starts_with("Conformance of "), "{text}");
    for line in ["PASS  spec ", "PASS  check-broken ", "PASS  read items ", "PASS  incremental account_items "] {
        assert!(text.contains(line), "{line:?} missing from:\n{text}");
    }
    assert!(text.contains("without `base_url`: invalid config: missing field `base_url`"), "{text}");
    assert!(text.trim_end().ends_with("18 passed, 0 failed, 0 skipped: the connector conforms"), "{text}");
}

/// The broken connector with one bug: the kit must fail exactly `check` (on `stream`), with a
/// failure whose location and message contain the given texts; every other check passes.
fn caught(bug: &str, check: &str, stream: Option<&str>, location: &str, message: &str) -> KitRun {
    let files = Files::new();
    let config = files.json("config.json", &json!({"bug": bug, "api_key": "test-api-key-0042"}));
    let run = kit(&plugin("broken-connector"), &config, Some(&files.path().join("cache")), &[]);
    assert!(!run.success, "{bug}: the kit passed a broken connector: {:#}", run.report);
    assert_eq!(run.report["passed"], false);
    let label = format!("{check} {}", stream.unwrap_or(""));
    assert_eq!(run.failed_checks(), vec![label], "{bug}: {:#}", run.report);
    let failures = run.check(check, stream)["failures"].as_array().unwrap().clone();
    assert!(
        failures.iter().any(|f| {
            f["location"].as_str().unwrap().contains(location) && f["message"].as_str().unwrap().contains(message)
        }),
        "{bug}: no failure at {location:?} saying {message:?}: {failures:#?}"
    );
    run
}

#[test]
fn the_broken_connector_without_its_bug_passes() {
    let files = Files::new();
    let config = files.json("config.json", &json!({"bug": "none", "api_key": "test-api-key-0042"}));
    let run = kit(&plugin("broken-connector"), &config, Some(&files.path().join("cache")), &[]);
    assert!(run.success, "{:#}", run.report);
    assert_eq!(run.report["counts"], json!({"pass": 15, "fail": 0, "skip": 0}));
}

#[test]
fn an_invalid_spec_schema_is_caught() {
    let files = Files::new();
    let config = files.json("config.json", &json!({"bug": "none", "api_key": "test-api-key-0042"}));
    let run = kit(&plugin("broken-connector-bad-spec"), &config, Some(&files.path().join("cache")), &[]);
    assert!(!run.success);
    assert_eq!(run.failed_checks(), vec!["spec "]);
    let failure = &run.check("spec", None)["failures"][0];
    assert_eq!(failure["location"], "spec at /properties/bug/type", "{failure}");
    assert!(failure["message"].as_str().unwrap().contains("not a valid JSON Schema"), "{failure}");
}

#[test]
fn a_config_the_spec_rejects_is_caught() {
    let files = Files::new();
    let config = files.json("config.json", &json!({"bug": "none", "api_key": "test-api-key-0042", "colour": "red"}));
    let run = kit(&plugin("broken-connector"), &config, Some(&files.path().join("cache")), &[]);
    assert_eq!(run.failed_checks(), vec!["spec "], "{:#}", run.report);
    let failure = &run.check("spec", None)["failures"][0];
    assert_eq!(failure["location"], "config", "{failure}");
    assert!(failure["message"].as_str().unwrap().contains("colour"), "{failure}");
    // The secret never appears in the report.
    assert!(!run.report.to_string().contains("test-api-key-0042"));
}

#[test]
fn a_check_that_accepts_a_broken_config_is_caught() {
    caught(
        "accepts-broken-config",
        "check-broken",
        None,
        "without `api_key`",
        "succeeded: it should fail with a config error",
    );
}

#[test]
fn a_check_that_crashes_on_a_broken_config_is_caught() {
    caught("crashes-on-broken-config", "check-broken", None, "without `api_key`", "crashed instead of failing cleanly");
}

#[test]
fn an_invalid_stream_schema_is_caught() {
    caught("bad-stream-schema", "discover", None, "stream things, schema at /type", "not a valid JSON Schema");
}

#[test]
fn a_stream_without_a_primary_key_is_caught() {
    caught("no-primary-key", "discover", None, "stream things", "no primary key");
}

#[test]
fn a_record_without_its_primary_key_is_caught() {
    caught(
        "missing-key",
        "read",
        Some("things"),
        "stream things, partition {\"p\":1}, page 2, record 3",
        "the primary key `id` is missing",
    );
}

#[test]
fn a_record_violating_its_schema_is_caught() {
    caught(
        "schema-violation",
        "read",
        Some("things"),
        "partition {\"p\":2}, page 1, record 1 at /id",
        "is not of type \"integer\"",
    );
}

#[test]
fn a_page_served_twice_is_caught() {
    caught(
        "duplicate-records",
        "read",
        Some("things"),
        "partition {\"p\":2}, page 4, record 0",
        "primary key [35] was already read",
    );
}

#[test]
fn a_repeated_page_token_is_caught() {
    caught(
        "repeat-token",
        "pagination",
        Some("things"),
        "partition {\"p\":0}, page 2",
        "the next token 1 was already returned by page 1",
    );
}

#[test]
fn endless_pagination_is_caught() {
    let files = Files::new();
    let config = files.json("config.json", &json!({"bug": "endless", "api_key": "test-api-key-0042"}));
    let run = kit(&plugin("broken-connector"), &config, Some(&files.path().join("cache")), &["--max-pages", "40"]);
    assert_eq!(run.failed_checks(), vec!["pagination things"], "{:#}", run.report);
    let failure = &run.check("pagination", Some("things"))["failures"][0];
    assert_eq!(failure["location"], "stream things, partition {\"p\":0}, page 40");
    assert!(failure["message"].as_str().unwrap().contains("did not end after 40 pages"), "{failure}");
}

#[test]
fn partitions_that_change_between_listings_are_caught() {
    caught(
        "random-partitions",
        "partitions",
        Some("things"),
        "stream things",
        "the first listing has partition {\"listed_at\":",
    );
}

#[test]
fn an_incremental_read_ignoring_the_state_is_caught() {
    let run = caught(
        "ignore-state",
        "incremental",
        Some("events"),
        "stream events, partition {\"shard\":0}, page 1, record 0",
        "`seq` 1 is older than the state's cursor 10",
    );
    assert_eq!(run.check("incremental", Some("events"))["facts"]["records"], 20);
}

#[test]
fn records_outside_their_window_are_caught() {
    caught(
        "outside-window",
        "read",
        Some("windows"),
        "stream windows, partition {\"w\":0}, page 1, record 10",
        "cursor 11 lies outside the partition's range (0, 10]",
    );
}

#[test]
fn a_plugin_that_cannot_be_loaded_fails_the_kit() {
    let files = Files::new();
    let config = files.json("config.json", &json!({}));
    let run = kit(&plugin("wrong-version"), &config, Some(&files.path().join("cache")), &[]);
    assert!(!run.success);
    assert_eq!(run.failed_checks(), vec!["load "]);
    let message = run.check("load", None)["failures"][0]["message"].as_str().unwrap().to_string();
    assert!(message.contains("built for sluice:connector@9.0.0"), "{message}");
}
