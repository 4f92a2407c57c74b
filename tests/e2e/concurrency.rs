//! Concurrent reads, state that stays correct when partitions finish out of order, and resuming
//! after a crash.

use crate::support::*;
use serde_json::{Value, json};
use sluice_tests::demo_api::data;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const RECORDS: u64 = 600;

fn windowed_config(api: &DemoApi, page_size: u64, window_minutes: u64) -> Value {
    json!({"base_url": api.base_url(), "page_size": page_size, "window_minutes": window_minutes})
}

/// The item ids a STATE claims as written: at or below the low-water mark, or in a finished range.
fn claimed_ids(state: &Value, records: u64) -> BTreeSet<u64> {
    let t = |v: &Value| data::parse_rfc3339(v.as_str().unwrap()).unwrap();
    let low_water = state.get("low_water").map(t);
    let ranges: Vec<(i64, i64)> = state
        .get("completed")
        .and_then(Value::as_array)
        .map(|r| r.iter().map(|pair| (t(&pair[0]), t(&pair[1]))).collect())
        .unwrap_or_default();
    (1..=records)
        .filter(|&id| {
            let at = data::item_updated_at(id);
            low_water.is_some_and(|lw| at <= lw) || ranges.iter().any(|&(a, b)| a < at && at <= b)
        })
        .collect()
}

/// Checks every STATE of `stream` against the records written before it.
fn assert_states_claim_only_written(run: &HostRun, stream: &str, records: u64) -> usize {
    let mut written = BTreeSet::new();
    let mut states = 0;
    for message in &run.messages {
        match message["type"].as_str() {
            Some("RECORD") if message["record"]["stream"] == stream => {
                written.insert(message["record"]["data"]["id"].as_u64().unwrap());
            }
            Some("STATE") if message["state"]["stream"]["stream_descriptor"]["name"] == stream => {
                states += 1;
                let state = &message["state"]["stream"]["stream_state"];
                let unwritten: Vec<u64> = claimed_ids(state, records).difference(&written).copied().collect();
                assert!(unwritten.is_empty(), "STATE {state} claims ids never written before it: {unwritten:?}");
            }
            _ => {}
        }
    }
    states
}

#[test]
fn windows_read_concurrently_give_exact_records() {
    let api = demo_api(DemoApiConfig { records: RECORDS, ..Default::default() });
    let files = Files::new();
    for (concurrency, window, page) in [(1, 60, 25), (4, 60, 7), (16, 17, 100), (3, 600, 1000)] {
        let run = host(&["run", "--streams", "windowed_items,items", "--concurrency", &concurrency.to_string()])
            .demo_source(&api, files.json("config.json", &windowed_config(&api, page, window)))
            .run();
        assert!(run.success(), "{}", run.explain());
        let all: Vec<u64> = (1..=RECORDS).collect();
        assert_eq!(sorted(run.ids("windowed_items")), all, "concurrency {concurrency}, window {window}, page {page}");
        assert_eq!(run.ids("items"), all);
        let final_state = run.last_state("windowed_items").unwrap();
        // The last window ends at the newest item, never in the future.
        assert_eq!(final_state["low_water"], json!(data::format_rfc3339(data::item_updated_at(RECORDS))));
        assert!(final_state.get("completed").is_none(), "{final_state}");
    }
}

#[test]
fn out_of_order_windows_never_claim_unread_data() {
    // The second hourly window answers slowly, so the windows after it finish first.
    let slow = "updated_after=2024-01-01T01:00:00Z";
    let api =
        demo_api(DemoApiConfig { records: RECORDS, slow_match: vec![slow.into()], slow_ms: 400, ..Default::default() });
    let files = Files::new();
    let run = host(&["run", "--streams", "windowed_items", "--concurrency", "4"])
        .demo_source(&api, files.json("config.json", &windowed_config(&api, 20, 60)))
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(sorted(run.ids("windowed_items")), (1..=RECORDS).collect::<Vec<_>>());
    let states = assert_states_claim_only_written(&run, "windowed_items", RECORDS);
    // A STATE per finished window (10), maybe one when the listing ends, and one after each
    // page of a window being read (windowed_items resumes inside partitions).
    assert!((10..=11 + RECORDS as usize / 20).contains(&states), "{states} STATEs");
    let last = run.last_state("windowed_items").unwrap();
    assert!(last.get("in_progress").is_none(), "nothing is part-read at the end: {last}");
    // Windows after the slow one finished first: some STATE held finished ranges beyond the mark.
    let held = run.of_type("STATE").iter().any(|m| m["state"]["stream"]["stream_state"].get("completed").is_some());
    assert!(held, "the slow window should have finished last");
}

#[test]
fn a_failed_window_holds_the_checkpoint_and_is_read_on_resume() {
    let files = Files::new();
    let config = json!({"mode": "fail-partition", "partitions": 6, "failing_partition": 2});
    let run = host(&["run", "--streams", "windows", "--concurrency", "3"])
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("failing.json", &config))
        .run();
    assert!(!run.success());
    let expected: Vec<u64> = (1..=60).filter(|n| !(21..=30).contains(n)).collect();
    let ns: Vec<u64> = run.records("windows").iter().map(|r| r["n"].as_u64().unwrap()).collect();
    assert_eq!(sorted(ns), expected, "the other windows complete");
    assert_eq!(run.statuses("windows").last().unwrap(), "INCOMPLETE");
    let state = run.last_state("windows").unwrap();
    assert_eq!(state["low_water"], json!(20), "held at the failed window: {state}");
    // With the newest cursor value its records had (the window's bookmark).
    assert_eq!(state["completed"], json!([[30, 60, 60]]));

    // Resumed, only the failed window is read; finished ones are skipped.
    let resumed = host(&["run", "--streams", "windows", "--state"])
        .arg(files.text("out.jsonl", &run.output.stdout))
        .arg(plugin("test-connector"))
        .arg("--config")
        .arg(files.json("ok.json", &json!({"partitions": 6})))
        .run();
    assert!(resumed.success(), "{}", resumed.stderr());
    let ns: Vec<u64> = resumed.records("windows").iter().map(|r| r["n"].as_u64().unwrap()).collect();
    assert_eq!(sorted(ns), (21..=30).collect::<Vec<_>>());
    assert_eq!(resumed.last_state("windows").unwrap(), json!({"cursor_field": ["n"], "low_water": 60, "newest": 60}));
}

#[test]
fn partitions_run_concurrently_within_the_limit() {
    let api = demo_api(DemoApiConfig { records: 400, latency_ms: 30, ..Default::default() });
    let files = Files::new();
    let run = host(&["run", "--streams", "windowed_items", "--concurrency", "3"])
        .demo_source(&api, files.json("config.json", &windowed_config(&api, 10, 30)))
        .run();
    assert!(run.success(), "{}", run.explain());
    let stats = api.stats();
    assert!(stats.max_in_flight <= 3, "at most 3 partitions at once: {}", stats.max_in_flight);
    assert!(stats.max_in_flight >= 2, "partitions overlapped: {}", stats.max_in_flight);

    // A stream capped at one partition at a time reads them one by one, however many the run
    // allows.
    let api = demo_api(DemoApiConfig { records: 400, latency_ms: 30, ..Default::default() });
    let per_stream = host(&["run", "--streams", "windowed_items", "--concurrency", "8", "--stream-concurrency", "1"])
        .demo_source(&api, files.json("config.json", &windowed_config(&api, 10, 30)))
        .run();
    assert!(per_stream.success());
    assert_eq!(sorted(per_stream.ids("windowed_items")), (1..=400).collect::<Vec<_>>());
    assert_eq!(api.stats().max_in_flight, 1, "one partition at a time");
}

/// Runs the host, kills it with SIGKILL after `lines` lines of output, and returns what it wrote.
fn run_and_kill(args: &[String], lines: usize) -> Vec<u8> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_host"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut output = Vec::new();
    let mut line = Vec::new();
    for _ in 0..lines {
        line.clear();
        if reader.read_until(b'\n', &mut line).unwrap() == 0 {
            break;
        }
        output.extend_from_slice(&line);
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // What the host wrote before the kill still counts: a consumer would have read it.
    let mut rest = Vec::new();
    std::io::Read::read_to_end(&mut reader, &mut rest).unwrap();
    output.extend_from_slice(&rest);
    // A line cut by the kill is not a message.
    if let Some(end) = output.iter().rposition(|&b| b == b'\n') {
        output.truncate(end + 1);
    } else {
        output.clear();
    }
    output
}

#[test]
fn killed_runs_resume_without_losses_or_rereading_finished_windows() {
    let api = demo_api(DemoApiConfig { records: RECORDS, latency_ms: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &windowed_config(&api, 10, 30));
    let args = |state: Option<&std::path::Path>| {
        let mut a: Vec<String> =
            vec!["run".into(), "--streams".into(), "windowed_items".into(), "--concurrency".into(), "4".into()];
        if let Some(s) = state {
            a.extend(["--state".into(), s.display().to_string()]);
        }
        a.extend([
            plugin("demo-source").display().to_string(),
            "--config".into(),
            config.display().to_string(),
            "--allow-host".into(),
            grant(&api),
            "--cache-dir".into(),
            files.path().join("cache").display().to_string(),
        ]);
        a
    };
    // Kill points spread over the run (a full run writes ~650 lines), varied by a seed.
    let seed = std::process::id() as usize;
    for round in 0..6 {
        let kill_after = 20 + (seed * 7919 + round * 104_729) % 600;
        let first = run_and_kill(&args(None), kill_after);
        let first_run: Vec<Value> =
            String::from_utf8_lossy(&first).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        let mut delivered: BTreeSet<u64> = first_run
            .iter()
            .filter(|m| m["type"] == "RECORD")
            .map(|m| m["record"]["data"]["id"].as_u64().unwrap())
            .collect();
        let last_state =
            first_run.iter().rev().find(|m| m["type"] == "STATE").map(|m| m["state"]["stream"]["stream_state"].clone());
        let claimed = last_state.as_ref().map(|s| claimed_ids(s, RECORDS)).unwrap_or_default();
        assert!(claimed.is_subset(&delivered), "round {round}: the last STATE claims undelivered ids");

        let state_file = files.text(&format!("state-{round}.jsonl"), &first);
        let before = api.stats().recent_requests.len();
        let resumed = host(&[]).args(args(Some(&state_file))).run();
        assert!(resumed.success(), "round {round}: {}", resumed.stderr());
        delivered.extend(resumed.ids("windowed_items"));
        assert_eq!(delivered, (1..=RECORDS).collect(), "round {round} (killed after {kill_after} lines): ids lost");

        // No request of the resumed run reads inside a window the last STATE marked finished.
        let requests = api.stats().recent_requests[before..].to_vec();
        for request in requests.iter().filter(|r| r.starts_with("/items?")) {
            let after = query_param(request, "updated_after").map(|t| data::parse_rfc3339(&t).unwrap());
            let until = query_param(request, "updated_until").map(|t| data::parse_rfc3339(&t).unwrap()).unwrap();
            let first_id_inside = (1..=RECORDS).find(|&id| {
                let at = data::item_updated_at(id);
                after.is_none_or(|a| at > a) && at <= until
            });
            if let Some(id) = first_id_inside {
                assert!(!claimed.contains(&id), "round {round}: {request} re-reads id {id}, already finished");
            }
        }
    }
}

fn query_param(request: &str, name: &str) -> Option<String> {
    let query = request.split_once('?')?.1;
    query.split('&').find_map(|pair| pair.strip_prefix(&format!("{name}=")).map(str::to_string))
}

#[test]
fn the_connector_estimate_becomes_a_trace_estimate() {
    let api = demo_api(DemoApiConfig { records: 250, ..Default::default() });
    let files = Files::new();
    let run = host(&["run", "--streams", "windowed_items"])
        .demo_source(&api, files.json("config.json", &windowed_config(&api, 50, 60)))
        .run();
    assert!(run.success(), "{}", run.explain());
    let estimates: Vec<&Value> =
        run.of_type("TRACE").into_iter().filter(|m| m["trace"]["type"] == "ESTIMATE").collect();
    assert_eq!(estimates.len(), 1);
    assert_eq!(
        estimates[0]["trace"]["estimate"],
        json!({"name": "windowed_items", "type": "STREAM", "row_estimate": 250})
    );
    let first_record = run.messages.iter().position(|m| m["type"] == "RECORD").unwrap();
    let estimate_at = run.messages.iter().position(|m| m["trace"]["type"] == "ESTIMATE").unwrap();
    assert!(estimate_at < first_record, "the estimate comes with the listing, before the records");
}

#[test]
fn progress_is_drawn_on_a_terminal_only() {
    let api = demo_api(DemoApiConfig { records: 300, latency_ms: 20, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &windowed_config(&api, 10, 60));
    let output = files.path().join("out.jsonl");
    let command = format!(
        "{} run --streams windowed_items {} --config {} --allow-host {} > {}",
        env!("CARGO_BIN_EXE_host"),
        plugin("demo-source").display(),
        config.display(),
        grant(&api),
        output.display()
    );
    // Not a terminal: nothing on stderr.
    let plain = Command::new("bash").arg("-c").arg(&command).output().unwrap();
    assert!(plain.status.success());
    assert!(plain.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&plain.stderr));
    // A terminal (a pseudo-terminal from `script`): the progress display and the summary.
    let tty = Command::new("script").args(["-qec", &command, "/dev/null"]).output().unwrap();
    assert!(tty.status.success(), "{}", String::from_utf8_lossy(&tty.stdout));
    let screen = String::from_utf8_lossy(&tty.stdout);
    assert!(screen.contains("partitions: windowed_items"), "the progress display: {screen}");
    assert!(screen.contains("read 300 records from 1 stream(s)"), "the summary: {screen}");
    let records = std::fs::read_to_string(&output).unwrap().lines().filter(|l| l.contains("\"RECORD\"")).count();
    assert_eq!(records, 300, "stdout still carries only protocol messages");
}

#[test]
fn windows_pick_up_records_added_after_the_last_run() {
    // The newest window of the first run is not full yet; records added later must still be read.
    let files = Files::new();
    let first_api = demo_api(DemoApiConfig { records: 100, ..Default::default() });
    let first = host(&["run", "--streams", "windowed_items"])
        .demo_source(&first_api, files.json("c1.json", &windowed_config(&first_api, 30, 60)))
        .run();
    assert!(first.success(), "{}", first.explain());
    assert_eq!(sorted(first.ids("windowed_items")), (1..=100).collect::<Vec<_>>());
    drop(first_api);
    let second_api = demo_api(DemoApiConfig { records: 150, ..Default::default() });
    let second = host(&["run", "--streams", "windowed_items", "--state"])
        .arg(files.text("state.jsonl", &first.output.stdout))
        .demo_source(&second_api, files.json("c2.json", &windowed_config(&second_api, 30, 60)))
        .run();
    assert!(second.success(), "{}", second.explain());
    assert_eq!(sorted(second.ids("windowed_items")), (101..=150).collect::<Vec<_>>());
}

/// The arguments of a demo-source `command` (`run ...`, `read --catalog ...`) granted `api`,
/// resumed from `state` when given.
fn demo_command(
    command: &[String],
    config: &std::path::Path,
    api: &DemoApi,
    state: Option<&std::path::Path>,
) -> Vec<String> {
    let mut args = command.to_vec();
    args.extend(["--config".into(), config.display().to_string(), "--allow-host".into(), grant(api)]);
    if let Some(state) = state {
        args.extend(["--state".into(), state.display().to_string()]);
    }
    args.push(plugin("demo-source").display().to_string());
    args
}

/// A resumable stream is checkpointed inside its partitions: killed part-way and resumed from
/// its last STATE, a run re-reads at most about a page per partition in flight (it used to
/// re-read every partition that had not finished, from its start), and loses nothing.
#[test]
fn a_killed_run_resumes_inside_its_partitions() {
    const ACCOUNTS: u64 = 8;
    const PER_ACCOUNT: u64 = 200;
    const PAGE: u64 = 10;
    const IN_FLIGHT: u64 = 4;
    let records = ACCOUNTS * PER_ACCOUNT;
    let api = demo_api(DemoApiConfig { records, accounts: ACCOUNTS, latency_ms: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, PAGE));
    let command = ["run", "--streams", "account_items", "--concurrency", &IN_FLIGHT.to_string()].map(String::from);
    let args = |state: Option<&std::path::Path>| demo_command(&command, &config, &api, state);
    let first = run_and_kill(&args(None), 700);
    let first_ids: Vec<u64> = String::from_utf8_lossy(&first)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|m| m["type"] == "RECORD")
        .map(|m| m["record"]["data"]["id"].as_u64().unwrap())
        .collect();
    assert!(first_ids.len() as u64 > 3 * PER_ACCOUNT && (first_ids.len() as u64) < records, "{}", first_ids.len());
    let last_state = String::from_utf8_lossy(&first)
        .lines()
        .rev()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["type"] == "STATE")
        .unwrap();
    let in_progress = &last_state["state"]["stream"]["stream_state"]["in_progress"];
    assert!(in_progress.as_array().is_some_and(|a| !a.is_empty()), "partitions were checkpointed: {last_state}");

    let state = files.text("state.jsonl", &first);
    let resumed = host(&[]).args(args(Some(&state))).run();
    assert!(resumed.success(), "{}", resumed.explain());
    let second = resumed.ids("account_items");
    let mut all: BTreeSet<u64> = first_ids.iter().copied().collect();
    all.extend(&second);
    assert_eq!(all, (1..=records).collect(), "no id lost");
    let first_set: BTreeSet<u64> = first_ids.iter().copied().collect();
    let twice = second.iter().filter(|id| first_set.contains(id)).count() as u64;
    assert!(twice <= 2 * IN_FLIGHT * PAGE, "{twice} records read twice");
}

/// A stream read in full resumes too (Airbyte's resumable full refresh): the resumed read
/// continues the part-read partition from its checkpoint, and once complete its state is empty,
/// so the next full read starts over.
#[test]
fn a_killed_full_read_resumes_inside_its_partition() {
    const RECORDS: u64 = 2000;
    const PAGE: u64 = 20;
    let api = demo_api(DemoApiConfig { records: RECORDS, latency_ms: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &demo_config(&api, PAGE));
    let catalog = files.json("catalog.json", &catalog(&[("items", "full_refresh")]));
    let command = ["read".to_string(), "--catalog".into(), catalog.display().to_string()];
    let args = |state: Option<&std::path::Path>| demo_command(&command, &config, &api, state);
    let first = run_and_kill(&args(None), 800);
    let messages: Vec<Value> =
        String::from_utf8_lossy(&first).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let first_ids: BTreeSet<u64> = messages
        .iter()
        .filter(|m| m["type"] == "RECORD")
        .map(|m| m["record"]["data"]["id"].as_u64().unwrap())
        .collect();
    assert!(first_ids.len() > 500 && (first_ids.len() as u64) < RECORDS, "{}", first_ids.len());
    let state = files.text("state.jsonl", &first);
    let resumed = host(&[]).args(args(Some(&state))).run();
    assert!(resumed.success(), "{}", resumed.explain());
    let second = resumed.ids("items");
    let twice = second.iter().filter(|id| first_ids.contains(id)).count() as u64;
    assert!(twice <= 2 * PAGE, "{twice} records read twice");
    let mut all = first_ids.clone();
    all.extend(&second);
    assert_eq!(all, (1..=RECORDS).collect(), "no id lost");
    assert_eq!(
        resumed.last_state("items"),
        Some(json!({"__ab_no_cursor_state_message": true})),
        "a complete full read leaves nothing to resume"
    );
}
