//! Reading the demo API through the demo connector: exact records, pagination, incremental
//! state, retries and the egress grant.

use crate::support::*;
use serde_json::json;
use std::time::{Duration, Instant};

const RECORDS: u64 = 250;
const ACCOUNTS: u64 = 4;

fn api(records: u64) -> DemoApi {
    demo_api(DemoApiConfig { records, accounts: ACCOUNTS, ..Default::default() })
}

fn run_all(api: &DemoApi, files: &Files, page_size: u64) -> HostRun {
    host(&["run"]).demo_source(api, files.json(&format!("config-{page_size}.json"), &demo_config(api, page_size))).run()
}

#[test]
fn every_stream_gives_exact_records_at_several_page_sizes() {
    let api = api(RECORDS);
    let files = Files::new();
    for page_size in [1, 7, 50, 250, 1000] {
        let run = run_all(&api, &files, page_size);
        assert!(run.success(), "page size {page_size}: {}", run.stderr());
        let all: Vec<u64> = (1..=RECORDS).collect();
        assert_eq!(run.ids("items"), all, "items in order, none missing or repeated (page size {page_size})");
        assert_eq!(run.ids("accounts"), (1..=ACCOUNTS).collect::<Vec<_>>(), "page size {page_size}");
        assert_eq!(sorted(run.ids("account_items")), all, "page size {page_size}");
        for stream in ["items", "accounts", "account_items"] {
            assert_eq!(run.statuses(stream), ["STARTED", "RUNNING", "COMPLETE"], "{stream}");
        }
        assert!(run.errors().is_empty(), "{:?}", run.errors());
        for record in run.of_type("RECORD") {
            assert!(record["record"]["emitted_at"].as_u64().unwrap() > 1_700_000_000_000);
        }
    }
}

#[test]
fn records_match_the_api_data() {
    let api = api(20);
    let files = Files::new();
    let run = run_all(&api, &files, 6);
    let first = run.records("items")[0];
    let expected = serde_json::to_value(sluice_tests::demo_api::data::item(1, ACCOUNTS)).unwrap();
    assert_eq!(first, &expected);
    // Partitions: each account's items come from that account.
    for record in run.records("account_items") {
        let id = record["id"].as_u64().unwrap();
        assert_eq!(record["account_id"].as_u64().unwrap(), (id - 1) % ACCOUNTS + 1);
    }
}

#[test]
fn read_follows_the_catalog() {
    let api = api(RECORDS);
    let files = Files::new();
    let run = host(&["read"])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(files.json("config.json", &demo_config(&api, 40)))
        .arg("--catalog")
        .arg(files.json("catalog.json", &catalog(&[("accounts", "full_refresh"), ("account_items", "incremental")])))
        .arg("--allow-host")
        .arg(grant(&api))
        .run();
    assert!(run.success(), "{}", run.explain());
    assert!(run.ids("items").is_empty(), "items were not selected");
    assert_eq!(run.ids("accounts").len() as u64, ACCOUNTS);
    assert_eq!(sorted(run.ids("account_items")), (1..=RECORDS).collect::<Vec<_>>());
    // Incremental: a STATE per completed partition, each after the records it covers, and
    // (account_items resumes inside partitions) one after each page of a partition being read.
    let states = run.of_type("STATE");
    let pages = RECORDS.div_ceil(40) + ACCOUNTS;
    assert!((ACCOUNTS..=ACCOUNTS + pages).contains(&(states.len() as u64)), "{} STATEs", states.len());
    let last_state = run.last_state("account_items").unwrap();
    assert!(last_state.get("in_progress").is_none(), "nothing is part-read at the end: {last_state}");
    assert_eq!(last_state["partitions"].as_array().unwrap().len() as u64, ACCOUNTS);
    let last_record = run.messages.iter().rposition(|m| m["type"] == "RECORD").unwrap();
    let last_state_at = run.messages.iter().rposition(|m| m["type"] == "STATE").unwrap();
    assert!(last_state_at > last_record, "the final STATE follows every record");
    // A stream read in full carries no cursor; being resumable, it may checkpoint while it is
    // read, and then leaves nothing behind once it completed: the CDK's no-cursor state.
    assert_eq!(run.last_state("accounts"), Some(json!({"__ab_no_cursor_state_message": true})));
}

#[test]
fn incremental_second_run_emits_only_newer_records() {
    let files = Files::new();
    let first_api = api(100);
    let first = host(&["run", "--streams", "account_items"])
        .demo_source(&first_api, files.json("config.json", &demo_config(&first_api, 30)))
        .run();
    assert!(first.success(), "{}", first.stderr());
    assert_eq!(sorted(first.ids("account_items")), (1..=100).collect::<Vec<_>>());
    let output = files.text("first-run.jsonl", &first.output.stdout);
    drop(first_api);

    // The API now has 150 items; the second run starts from the first run's state.
    let second_api = api(150);
    let config = files.json("config2.json", &demo_config(&second_api, 30));
    let state_forms = [
        output,
        files.json(
            "airbyte-state.json",
            &json!([{"type": "STREAM", "stream": {"stream_descriptor": {"name": "account_items"}, "stream_state": first.last_state("account_items").unwrap()}}]),
        ),
    ];
    for state in state_forms {
        let second =
            host(&["run", "--streams", "account_items", "--state"]).arg(&state).demo_source(&second_api, &config).run();
        assert!(second.success(), "{}", second.stderr());
        assert_eq!(sorted(second.ids("account_items")), (101..=150).collect::<Vec<_>>(), "state {}", state.display());
    }
}

#[test]
fn a_start_date_limits_the_first_run() {
    let api = api(100);
    let files = Files::new();
    // Item i is updated at 2024-01-01T00:00:00Z + i minutes.
    let config = json!({"base_url": api.base_url(), "page_size": 10, "start_date": "2024-01-01T01:00:00Z"});
    let run = host(&["run", "--streams", "account_items"]).demo_source(&api, files.json("config.json", &config)).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(sorted(run.ids("account_items")), (61..=100).collect::<Vec<_>>());
}

/// The instance that answered the spec probe (spec, capabilities) answers the run's other
/// run-level calls too: discover, the questions and the first stream's listing. A run makes
/// one instance besides its partitions' (the Rust demo reads a partition in one), and a second
/// stream's listing takes a fresh one.
#[test]
fn the_spec_probes_instance_answers_discover_the_questions_and_a_listing() {
    let api = api(RECORDS);
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, 1000));
    let run = host(&["run", "--streams", "account_items"]).demo_source(&api, &config).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(sorted(run.ids("account_items")), (1..=RECORDS).collect::<Vec<_>>());
    assert_eq!(run.instance_counts().0, 1 + ACCOUNTS, "{}", run.logs().last().unwrap());

    let run = host(&["run", "--streams", "account_items,items"]).demo_source(&api, &config).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items"), (1..=RECORDS).collect::<Vec<_>>());
    assert_eq!(run.instance_counts().0, 1 + 1 + ACCOUNTS + 1, "{}", run.logs().last().unwrap());
}

#[test]
fn injected_errors_are_retried_to_exact_counts() {
    let api = demo_api(DemoApiConfig {
        records: RECORDS,
        accounts: ACCOUNTS,
        error_every: 4,
        retry_after_secs: 0,
        ..Default::default()
    });
    let files = Files::new();
    // Three streams retrying at once can fall into step, so that one of them meets every
    // injected error: every 4th request (not 3rd) and room for more attempts keep that from
    // failing a request, while the counts below stay exact.
    let run = host(&[
        "run",
        "--streams",
        "items,accounts,account_items",
        "--http-backoff-ms",
        "1",
        "--http-max-attempts",
        "10",
    ])
    .demo_source(&api, files.json("config.json", &demo_config(&api, 20)))
    .run();
    assert!(run.success(), "{}", run.explain());
    let all: Vec<u64> = (1..=RECORDS).collect();
    assert_eq!(run.ids("items"), all);
    assert_eq!(run.ids("accounts"), (1..=ACCOUNTS).collect::<Vec<_>>());
    assert_eq!(sorted(run.ids("account_items")), all);
    let stats = api.stats();
    assert!(stats.errors_injected > 5, "errors were injected: {stats:?}");
    assert_eq!(stats.errors_injected, stats.requests / 4, "every fourth request failed");
    // 13 pages of items, 1 of accounts, 1 account listing and 4 pages for each of 4 accounts.
    assert_eq!(
        stats.requests - stats.errors_injected,
        13 + 1 + 1 + 4 * 4,
        "every page fetched once, each failure retried"
    );
}

#[test]
fn retry_after_is_honoured() {
    // Every second request fails: the second with 429 and Retry-After: 1, so the run cannot finish sooner.
    let api =
        demo_api(DemoApiConfig { records: 5, accounts: 1, error_every: 2, retry_after_secs: 1, ..Default::default() });
    let files = Files::new();
    let started = Instant::now();
    let run = host(&["run", "--streams", "items", "--http-backoff-ms", "1"])
        .demo_source(&api, files.json("config.json", &demo_config(&api, 2)))
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items"), [1, 2, 3, 4, 5]);
    // Requests 2 (429, Retry-After: 1) and 4 (500, backoff) were retried.
    assert_eq!(api.stats().errors_injected, 2);
    assert!(started.elapsed() >= Duration::from_secs(1), "waited for Retry-After");
}

#[test]
fn exhausted_retries_fail_the_partition_and_the_exit_code() {
    // Every request fails: retries run out and the stream ends INCOMPLETE with a TRACE error.
    let api =
        demo_api(DemoApiConfig { records: 5, accounts: 1, error_every: 1, retry_after_secs: 0, ..Default::default() });
    let files = Files::new();
    let run = host(&["run", "--streams", "items", "--http-backoff-ms", "1", "--http-max-attempts", "3"])
        .demo_source(&api, files.json("config.json", &demo_config(&api, 2)))
        .run();
    assert!(!run.success());
    assert_eq!(api.stats().requests, 3, "three attempts, then give up");
    let errors = run.errors();
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0]["failure_type"], "transient_error");
    assert_eq!(errors[0]["stream_descriptor"]["name"], "items");
    assert_eq!(run.statuses("items"), ["STARTED", "INCOMPLETE"]);
}

#[test]
fn a_run_missing_a_grant_refuses_to_start() {
    let api = api(10);
    let files = Files::new();
    let other = demo_api(DemoApiConfig::default());
    // Granting another host does not grant the one the plugin needs.
    let run = host(&["run", "--streams", "items"])
        .demo_source(&other, files.json("config.json", &demo_config(&api, 5)))
        .run();
    assert!(!run.success());
    assert!(run.stderr().contains(&format!("grant it with --allow-host {}", grant(&api))), "{}", run.stderr());
    assert_eq!(run.errors()[0]["failure_type"], "config_error");
    assert!(run.ids("items").is_empty());
    assert_eq!(api.stats().requests + other.stats().requests, 0);
    // https only, unless granted: the same host without http:// is not enough.
    let https_only = host(&["run", "--streams", "items"])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(files.json("config.json", &demo_config(&api, 5)))
        .arg("--allow-host")
        .arg(host_port(&api))
        .run();
    assert!(!https_only.success());
    assert!(https_only.stderr().contains(&format!("--allow-host {}", grant(&api))), "{}", https_only.stderr());
}

#[test]
fn a_host_not_granted_is_denied_without_a_request() {
    let api = api(10);
    let files = Files::new();
    let other = demo_api(DemoApiConfig::default());
    // Started anyway with --deny-ungranted: every request to the ungranted host is denied.
    let run = host(&["run", "--streams", "items", "--deny-ungranted"])
        .demo_source(&other, files.json("config.json", &demo_config(&api, 5)))
        .run();
    assert!(!run.success());
    assert_eq!(api.stats().requests, 0, "no request reached the API");
    assert_eq!(other.stats().requests, 0);
    let errors = run.errors();
    assert_eq!(errors.len(), 1, "{}", run.stdout());
    let message = errors[0]["message"].as_str().unwrap();
    assert!(message.contains("denied") && message.contains(&format!("--allow-host {}", grant(&api))), "{message}");
    assert_eq!(errors[0]["failure_type"], "config_error");
    let logs = run.logs();
    assert!(logs.iter().any(|l| l.contains("which is not granted")), "a warning before reading: {logs:?}");
    assert!(logs.iter().any(|l| l.starts_with("request denied")), "a LOG line per denial: {logs:?}");
}

#[test]
fn unknown_streams_are_named() {
    let api = api(10);
    let files = Files::new();
    let run = host(&["run", "--streams", "items,nope"])
        .demo_source(&api, files.json("config.json", &demo_config(&api, 5)))
        .run();
    assert!(!run.success());
    assert!(
        run.stderr().contains("no stream \"nope\" (it offers: items, accounts, account_items, windowed_items)"),
        "{}",
        run.stderr()
    );
    assert_eq!(api.stats().requests, 0, "nothing is read when the selection is wrong");
}

#[test]
fn malformed_state_is_refused_clearly() {
    let api = api(10);
    let files = Files::new();
    let cases: [(&str, &[u8], &str); 3] = [
        ("not-json.json", b"{\"type\": ", "not valid JSON"),
        ("no-name.json", br#"[{"type":"STREAM","stream":{"stream_state":{}}}]"#, "stream_descriptor.name"),
        (
            "bad-cursor.json",
            br#"[{"type":"STREAM","stream":{"stream_descriptor":{"name":"account_items"},"stream_state":{"partitions":[{"partition":1}]}}}]"#,
            "has no \"cursor\"",
        ),
    ];
    for (name, text, expected) in cases {
        let run = host(&["run", "--streams", "account_items", "--state"])
            .arg(files.text(name, text))
            .demo_source(&api, files.json("config.json", &demo_config(&api, 5)))
            .run();
        assert!(!run.success(), "{name}");
        let messages: Vec<String> = run.errors().iter().map(|e| e["message"].as_str().unwrap().to_string()).collect();
        assert!(messages.iter().any(|m| m.contains(expected)), "{name}: {messages:?}");
        assert!(run.ids("account_items").is_empty(), "{name}: no silent full refresh");
    }
}
