//! HTTP recording (`--record-http`) and offline re-runs (`--http-replay`), against the demo API
//! on loopback, stopped before the re-run.

use crate::support::*;
use serde_json::{Value, json};
use std::collections::BTreeMap;

const API_KEY: &str = "sk-demo-SECRET-4242";

/// Every record per stream (sorted by id), and each stream's last state.
fn outcome(run: &HostRun) -> (BTreeMap<String, Vec<Value>>, BTreeMap<String, Value>) {
    let mut records: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    let mut states = BTreeMap::new();
    for m in &run.messages {
        match m["type"].as_str() {
            Some("RECORD") => records
                .entry(m["record"]["stream"].as_str().unwrap().to_string())
                .or_default()
                .push(m["record"]["data"].clone()),
            Some("STATE") => {
                let s = &m["state"]["stream"];
                states.insert(s["stream_descriptor"]["name"].as_str().unwrap().to_string(), s["stream_state"].clone());
            }
            _ => {}
        }
    }
    for list in records.values_mut() {
        list.sort_by_key(|r| r["id"].as_u64());
    }
    (records, states)
}

fn kept_at(run: &HostRun) -> String {
    let log = run.logs().join("\n");
    let at = log.find("this run is kept at ").unwrap_or_else(|| panic!("no replay location in: {log}"));
    log[at + "this run is kept at ".len()..].split_whitespace().next().unwrap().to_string()
}

fn recording_text(uri: &str) -> String {
    let dir = std::path::PathBuf::from(uri.strip_prefix("file://").unwrap()).join("http");
    let mut text = String::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        text.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    text
}

#[test]
fn a_recorded_run_reruns_offline_with_the_same_records_and_state() {
    // Every 5th request fails (429 and 500 in turn): the recording holds the retries too.
    let api = demo_api(DemoApiConfig {
        records: 400,
        accounts: 4,
        error_every: 5,
        retry_after_secs: 0,
        api_key: Some(API_KEY.into()),
        ..Default::default()
    });
    let files = Files::new();
    let lake = files.path().join("lake");
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 50, "api_key": API_KEY}));
    let recorded = host(&["run", "--streams", "items,account_items,windowed_items", "--record-http"])
        .args(["--replay-to".to_string(), lake.display().to_string(), "--http-backoff-ms".into(), "1".into()])
        .demo_source(&api, &config)
        .run();
    assert!(recorded.success(), "{}", recorded.explain());
    let summary = recorded.logs().last().unwrap().clone();
    assert!(!summary.contains(" 0 retries"), "the run should have retried: {summary}");
    let uri = kept_at(&recorded);
    let requests_made = api.stats().requests;
    drop(api);

    // Offline: no grant needed, nothing to reach.
    let rerun = host(&["run", "--streams", "items,account_items,windowed_items", "--http-replay", &uri])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(&config)
        .run();
    assert!(rerun.success(), "{}", rerun.explain());
    assert!(rerun.logs().iter().any(|l| l.contains("HTTP is replayed from the recording")));
    let (records, states) = outcome(&recorded);
    assert_eq!(records["items"].len(), 400);
    assert_eq!(outcome(&rerun), (records, states), "the re-run differs from the recorded run");

    // Nothing secret was stored; every attempt was.
    let stored = recording_text(&uri);
    assert!(!stored.contains(API_KEY), "the API key reached storage");
    assert!(!stored.to_ascii_lowercase().contains("authorization"), "an Authorization header reached storage");
    let exchanges: Vec<Value> = stored.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(exchanges.len() as u64, requests_made, "one exchange per request the API saw");
    let first_page =
        exchanges.iter().find(|e| e["context"]["stream"] == "account_items" && e["context"]["partition"].is_object());
    assert!(first_page.is_some(), "exchanges name their partition");
    assert!(exchanges.iter().any(|e| e["attempt"] == 2 && e["response"]["status"] == 200), "a retry that succeeded");

    let show = host(&["recording", "show", &uri]).run_raw();
    assert!(show.status.success());
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains(&format!("{requests_made} exchanges")), "{text}");
    for status in ["200:", "429:", "500:", "slowest:"] {
        assert!(text.contains(status), "{status} missing in: {text}");
    }
}

#[test]
fn a_request_the_recording_cannot_answer_fails_clearly() {
    let api = demo_api(DemoApiConfig { records: 100, ..Default::default() });
    let files = Files::new();
    let lake = files.path().join("lake");
    let config = files.json("config.json", &demo_config(&api, 50));
    let recorded = host(&["run", "--streams", "items", "--record-http", "--replay-to"])
        .arg(&lake)
        .demo_source(&api, &config)
        .run();
    assert!(recorded.success(), "{}", recorded.explain());
    let uri = kept_at(&recorded);
    let base_url = api.base_url();
    drop(api);
    // Asking for pages of 25 now: URLs the recording never saw.
    let changed = files.json("changed.json", &demo_config_at(&base_url, 25));
    let rerun = host(&["run", "--streams", "items", "--http-replay", &uri])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(&changed)
        .run();
    assert!(!rerun.success());
    let errors = format!("{:?}", rerun.errors());
    assert!(errors.contains(&format!("no recorded answer for GET {base_url}/items?limit=25")), "{errors}");

    let missing = host(&["run", "--streams", "items", "--http-replay", &files.path().display().to_string()])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(&changed)
        .run();
    assert!(missing.stderr().contains("holds no HTTP recording"), "{}", missing.stderr());
}

fn demo_config_at(base_url: &str, page_size: u64) -> Value {
    json!({"base_url": base_url, "page_size": page_size})
}

/// A report download the connector streams (`open`) is recorded whole and replayed offline to
/// the same records: with hooks the host reads the body under the cap and serves it in pieces.
#[test]
fn a_streamed_report_download_is_recorded_and_replayed() {
    let api = demo_api(DemoApiConfig { records: 3000, accounts: 2, job_polls: 2, ..Default::default() });
    let files = Files::new();
    let lake = files.path().join("lake");
    let config =
        files.json("config.json", &json!({"base_url": api.base_url(), "report_jobs": true, "report_page_size": 400}));
    let args = ["run", "--streams", "report_items", "--job-poll-ms", "10", "--record-http"];
    let recorded =
        host(&args).args(["--replay-to".to_string(), lake.display().to_string()]).demo_source(&api, &config).run();
    assert!(recorded.success(), "{}", recorded.explain());
    let uri = kept_at(&recorded);
    drop(api);
    let rerun = host(&["run", "--streams", "report_items", "--job-poll-ms", "10", "--http-replay", &uri])
        .arg(plugin("demo-source"))
        .arg("--config")
        .arg(&config)
        .run();
    assert!(rerun.success(), "{}", rerun.explain());
    let (records, _) = outcome(&recorded);
    assert_eq!(records["report_items"].len(), 3000);
    assert_eq!(outcome(&rerun).0, records, "the re-run differs from the recorded run");
    let stored = recording_text(&uri);
    let exchanges: Vec<Value> = stored.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let downloads = exchanges.iter().filter(|e| e["request"]["url"].as_str().unwrap().ends_with("/download")).count();
    assert_eq!(downloads, 2, "one download per account, read whole into the recording");
}

/// A run whose pages are read in steps (the Python demo: the host sends each step's request,
/// outside any guest call) is recorded and replayed as any other: the same records and states
/// offline, every exchange labelled with its partition.
#[test]
fn a_run_read_in_steps_reruns_offline_with_the_same_records_and_state() {
    let cache = crate::languages::warm_cache("demo-source-py");
    let api = demo_api(DemoApiConfig {
        records: 300,
        accounts: 3,
        error_every: 5,
        retry_after_secs: 0,
        ..Default::default()
    });
    let files = Files::new();
    let lake = files.path().join("lake");
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 40}));
    let streams = "items,account_items,windowed_items";
    let recorded = host(&["run", "--streams", streams, "--record-http", "--http-backoff-ms", "1"])
        .args(["--replay-to".to_string(), lake.display().to_string(), "--allow-host".into(), grant(&api)])
        .arg(plugin("demo-source-py"))
        .arg("--config")
        .arg(&config)
        .cache_dir(&cache)
        .run();
    assert!(recorded.success(), "{}", recorded.explain());
    let uri = kept_at(&recorded);
    let requests_made = api.stats().requests;
    drop(api);

    let rerun = host(&["run", "--streams", streams, "--http-replay", &uri])
        .arg(plugin("demo-source-py"))
        .arg("--config")
        .arg(&config)
        .cache_dir(&cache)
        .run();
    assert!(rerun.success(), "{}", rerun.explain());
    let (records, states) = outcome(&recorded);
    assert_eq!(records["account_items"].len(), 300);
    assert_eq!(outcome(&rerun), (records, states), "the re-run differs from the recorded run");
    let exchanges: Vec<Value> = recording_text(&uri).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(exchanges.len() as u64, requests_made, "one exchange per request the API saw");
    assert!(
        exchanges.iter().any(|e| e["context"]["stream"] == "account_items" && e["context"]["partition"].is_object()),
        "the host's requests for steps name their partition"
    );
}
