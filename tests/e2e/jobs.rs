//! Report jobs through the host's orchestrator: the demo connector's `report_items` stream
//! (one job per account) against the demo API's `/reports` endpoints, which count the jobs
//! created, running at once, deleted and kept.

use crate::support::*;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::process::Stdio;

fn report_config(api: &DemoApi, max_jobs: u32) -> Value {
    json!({"base_url": api.base_url(), "page_size": 100, "report_jobs": true, "max_jobs": max_jobs, "report_page_size": 70})
}

/// A fast poll schedule for tests.
const FAST: [&str; 4] = ["--job-poll-ms", "20", "--job-poll-max-ms", "50"];

fn run_reports(api: &DemoApi, files: &Files, max_jobs: u32, extra: &[&str]) -> HostRun {
    report_run(api, &files.json("config.json", &report_config(api, max_jobs)), extra)
}

/// `report_items` with `config`, on the fast poll schedule.
fn report_run(api: &DemoApi, config: &std::path::Path, extra: &[&str]) -> HostRun {
    host(&["run", "--streams", "report_items"])
        .args(FAST.iter().chain(extra).map(|s| s.to_string()))
        .demo_source(api, config)
        .run()
}

#[test]
fn jobs_stay_within_their_slots_and_all_complete() {
    let api = demo_api(DemoApiConfig { records: 800, accounts: 8, job_polls: 3, ..Default::default() });
    let files = Files::new();
    // The plugin allows 2 at once; the operator raises it to 3.
    let run = run_reports(&api, &files, 2, &["--max-jobs", "3"]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(sorted(run.ids("report_items")), (1..=800).collect::<Vec<_>>());
    let stats = api.stats();
    assert_eq!(stats.jobs_created, 8);
    assert!(stats.max_jobs_running <= 3, "more than 3 jobs at once: {}", stats.max_jobs_running);
    assert!(stats.max_jobs_running >= 2, "jobs did not overlap: {}", stats.max_jobs_running);
    assert_eq!((stats.jobs_running, stats.jobs_deleted, stats.jobs_kept), (0, 8, 0), "completed jobs are deleted");
    // The final state has no jobs left, and a cursor per account.
    let state = run.last_state("report_items").unwrap();
    assert!(state.get("jobs").is_none(), "{state}");
    assert_eq!(state["partitions"].as_array().unwrap().len(), 8);

    // The plugin's own default, and a per-stream cap.
    let api = demo_api(DemoApiConfig { records: 300, accounts: 6, job_polls: 3, ..Default::default() });
    let run = run_reports(&api, &files, 2, &[]);
    assert!(run.success(), "{}", run.explain());
    assert!(api.stats().max_jobs_running <= 2);
    let api = demo_api(DemoApiConfig { records: 300, accounts: 6, job_polls: 3, ..Default::default() });
    let run = run_reports(&api, &files, 4, &["--max-jobs-per-stream", "1"]);
    assert!(run.success(), "{}", run.explain());
    assert_eq!(api.stats().max_jobs_running, 1);
}

#[test]
fn failed_jobs_are_retried_and_give_exact_records() {
    // Every 3rd job fails: its partition gets a new job.
    let api =
        demo_api(DemoApiConfig { records: 600, accounts: 6, job_polls: 2, fail_job_every: 3, ..Default::default() });
    let files = Files::new();
    let run = run_reports(&api, &files, 3, &["--job-retry-delay-ms", "10"]);
    assert!(run.success(), "{}", run.explain());
    let ids = run.ids("report_items");
    assert_eq!(ids.len(), 600, "no record twice, none missing");
    assert_eq!(sorted(ids), (1..=600).collect::<Vec<_>>());
    let stats = api.stats();
    assert!(stats.jobs_created >= 8, "failed jobs were not retried: {} created", stats.jobs_created);
    assert_eq!(stats.jobs_kept, 0, "failed and completed jobs are deleted");
    // Every retry is logged, naming the partition and the reason, and counted in the summary.
    let retried = stats.jobs_created - 6;
    let logged: Vec<String> = run.logs().into_iter().filter(|l| l.starts_with("report job attempt")).collect();
    assert_eq!(logged.len() as u64, retried, "{logged:?}");
    assert!(logged.iter().all(|l| l.contains("partition {\"account_id\":") && l.contains("failed")), "{logged:?}");
    let summary = run.logs().last().unwrap().clone();
    assert!(summary.contains(&format!("{retried} report job(s) created again")), "{summary}");
}

/// A job's first poll goes at once: with a poll interval far longer than the test, a job that
/// is done at its first poll finishes the run (it used to wait a whole interval first).
#[test]
fn the_first_poll_is_not_delayed() {
    let api = demo_api(DemoApiConfig { records: 50, accounts: 1, job_polls: 0, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 1));
    // Were the first poll delayed, the job would run past its timeout and fail the run.
    let args = ["run", "--streams", "report_items", "--job-poll-ms", "600000", "--job-timeout", "30"];
    let run = host(&args).demo_source(&api, config).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("report_items").len(), 50);
}

/// While a job runs and nothing else is written, the stream's STATE is repeated (the Airbyte
/// platform fails a sync after 3 hours without RECORD or STATE): a job polled 12 times, 100 ms
/// apart, with a 200 ms heartbeat, repeats its STATE (its job handle) during the wait.
#[test]
fn a_long_job_keeps_the_sync_alive_with_its_state() {
    let api = demo_api(DemoApiConfig { records: 20, accounts: 1, job_polls: 12, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 1));
    let args = ["run", "--streams", "report_items", "--job-poll-ms", "100", "--job-poll-max-ms", "100"];
    let run = host(&args).args(["--job-heartbeat".to_string(), "0.2".to_string()]).demo_source(&api, config).run();
    assert!(run.success(), "{}", run.explain());
    let first_record = run.messages.iter().position(|m| m["type"] == "RECORD").unwrap();
    let waiting: Vec<&Value> =
        run.messages[..first_record].iter().filter(|m| m["type"] == "STATE").map(|m| &m["state"]["stream"]).collect();
    let with_job = waiting.iter().filter(|s| s["stream_state"]["jobs"].as_array().is_some_and(|j| j.len() == 1));
    assert!(with_job.count() >= 3, "the job's STATE, then repeats while it runs: {waiting:?}");
}

#[test]
fn a_job_that_never_completes_is_aborted_at_its_timeout_and_retried() {
    // Jobs never finish; the ordinary stream beside them does.
    let api = demo_api(DemoApiConfig { records: 200, accounts: 2, job_polls: u64::MAX, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 2));
    let run = host(&["run", "--streams", "report_items,items", "--job-timeout", "0.3", "--job-attempts", "2"])
        .args(FAST.iter().chain(&["--job-retry-delay-ms", "10"]).map(|s| s.to_string()))
        .demo_source(&api, config)
        .run();
    assert!(!run.success());
    let stats = api.stats();
    assert_eq!(stats.jobs_created, 4, "2 accounts x 2 attempts");
    assert_eq!((stats.jobs_running, stats.jobs_kept), (0, 0), "timed-out jobs are aborted");
    let errors: Vec<String> = run.errors().iter().map(|e| e["message"].as_str().unwrap().to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for error in &errors {
        assert!(error.starts_with("stream report_items, partition {\"account_id\":"), "{error}");
        assert!(error.contains("no report job succeeded in 2 attempt(s)") && error.contains("timeout"), "{error}");
    }
    assert_eq!(run.statuses("report_items").last().unwrap(), "INCOMPLETE");
    assert_eq!(run.statuses("items").last().unwrap(), "COMPLETE");
    assert_eq!(run.ids("items").len(), 200);
}

#[test]
fn an_ordinary_stream_is_not_held_up_by_polling() {
    // Jobs take about 40 polls; with one partition slot in the whole run, the ordinary stream
    // must still finish first: polling holds no slot.
    let api = demo_api(DemoApiConfig { records: 400, accounts: 2, job_polls: 40, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 2));
    let run = host(&["run", "--streams", "report_items,items", "--concurrency", "1"])
        .args(FAST.iter().map(|s| s.to_string()))
        .demo_source(&api, config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let position = |pred: &dyn Fn(&Value) -> bool| run.messages.iter().position(pred).unwrap();
    let items_done = position(&|m| {
        m["trace"]["stream_status"]["stream_descriptor"]["name"] == "items"
            && m["trace"]["stream_status"]["status"] == "COMPLETE"
    });
    let first_report = position(&|m| m["record"]["stream"] == "report_items");
    assert!(items_done < first_report, "items waited for the report jobs");
    assert_eq!(sorted(run.ids("report_items")), (1..=400).collect::<Vec<_>>());
}

/// Runs until a STATE lists `jobs` job handles, then SIGKILLs the host; returns its output.
fn run_until_jobs_saved(api: &DemoApi, config: &std::path::Path, jobs: usize) -> String {
    run_until_jobs_saved_with(api, config, jobs, &[])
}

fn run_until_jobs_saved_with(api: &DemoApi, config: &std::path::Path, jobs: usize, extra: &[&str]) -> String {
    let mut child = host(&["run", "--streams", "report_items"])
        .args(FAST.iter().chain(extra).map(|s| s.to_string()))
        .demo_source(api, config)
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut output = String::new();
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0, "the run ended before saving its jobs");
        output.push_str(&line);
        let message: Value = serde_json::from_str(&line).unwrap();
        let saved = message["state"]["stream"]["stream_state"]["jobs"].as_array().map_or(0, Vec::len);
        if saved == jobs {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    output
}

#[test]
fn a_resumed_run_polls_its_saved_jobs_instead_of_creating_new_ones() {
    let api = demo_api(DemoApiConfig { records: 400, accounts: 4, job_polls: 25, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 4));
    let first = run_until_jobs_saved(&api, &config, 4);
    assert_eq!(api.stats().jobs_created, 4);

    // The API forgets one of them: only that partition gets a new job.
    let forgotten = first.lines().rev().find_map(|l| {
        let m: Value = serde_json::from_str(l).ok()?;
        Some(m["state"]["stream"]["stream_state"]["jobs"][0]["job"]["id"].as_str()?.to_string())
    });
    let forgotten = forgotten.unwrap();
    let status = sluice_tests::plain_http::request(api.addr(), "DELETE", &format!("/reports/{forgotten}")).unwrap();
    assert_eq!(status, 204);

    let state = files.text("state.jsonl", first.as_bytes());
    let resumed = report_run(&api, &config, &["--state", state.to_str().unwrap()]);
    assert!(resumed.success(), "{}", resumed.explain());
    assert_eq!(api.stats().jobs_created, 5, "3 saved jobs resumed, 1 forgotten job created anew");
    assert!(resumed.logs().iter().any(|l| l.contains(&format!("no longer knows job {{\"id\":\"{forgotten}\"}}"))));
    assert_eq!(sorted(resumed.ids("report_items")), (1..=400).collect::<Vec<_>>());
    assert_eq!(api.stats().jobs_kept, 0);
}

/// A stream read in full through report jobs saves its jobs in flight too, and a run resumed
/// from that state polls them (it used to ignore them: new jobs were created and the saved ones
/// were neither polled nor aborted).
#[test]
fn a_full_refresh_job_stream_resumes_its_saved_jobs() {
    let api = demo_api(DemoApiConfig { records: 400, accounts: 4, job_polls: 25, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 4));
    let first = run_until_jobs_saved_with(&api, &config, 4, &["--full-refresh"]);
    assert_eq!(api.stats().jobs_created, 4);
    let state = files.text("state.jsonl", first.as_bytes());
    let catalog = files.json("catalog.json", &catalog(&[("report_items", "full_refresh")]));
    let resumed = host(&["read", "--catalog", catalog.to_str().unwrap(), "--state", state.to_str().unwrap()])
        .args(FAST.iter().map(|s| s.to_string()))
        .demo_source(&api, &config)
        .run();
    assert!(resumed.success(), "{}", resumed.explain());
    assert_eq!(api.stats().jobs_created, 4, "the 4 saved jobs were polled, none created");
    assert_eq!(sorted(resumed.ids("report_items")), (1..=400).collect::<Vec<_>>());
    assert_eq!(api.stats().jobs_kept, 0, "and deleted once read");
    assert_eq!(
        resumed.last_state("report_items"),
        Some(json!({"__ab_no_cursor_state_message": true})),
        "nothing left in flight"
    );
}

#[test]
fn a_saved_job_of_a_partition_no_longer_listed_is_aborted_not_left_on_the_api() {
    let api = demo_api(DemoApiConfig { records: 200, accounts: 2, job_polls: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 2));
    let first = report_run(&api, &config, &[]);
    assert!(first.success(), "{}", first.explain());

    // A job on the API that the state says belongs to account 7, which the API no longer has.
    let (status, body) =
        sluice_tests::plain_http::exchange(api.addr(), "POST", "/reports", br#"{"account_id": 1}"#).unwrap();
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
    let stale: Value = serde_json::from_slice(&body).unwrap();
    let mut state = first.last_state("report_items").expect("the first run saved a state");
    state["jobs"] = json!([{"partition": {"account_id": 7}, "job": {"id": stale["id"]}}]);
    let message = json!({"type": "STATE", "state": {"type": "STREAM", "stream": {
        "stream_descriptor": {"name": "report_items"}, "stream_state": state}}});
    let state_file = files.json("state.json", &message);
    assert_eq!(api.stats().jobs_kept, 1);

    let resumed = report_run(&api, &config, &["--state", state_file.to_str().unwrap()]);
    assert!(resumed.success(), "{}", resumed.explain());
    assert_eq!(api.stats().jobs_kept, 0, "the stale job was left on the API");
    let id = stale["id"].as_str().unwrap();
    assert!(
        resumed
            .logs()
            .iter()
            .any(|l| l.contains(&format!("aborted job {{\"id\":\"{id}\"}}")) && l.contains("account_id")),
        "{:?}",
        resumed.logs()
    );
    assert_eq!(resumed.last_state("report_items").unwrap().get("jobs"), None);
}

#[test]
fn sigterm_aborts_the_jobs_in_flight() {
    let api = demo_api(DemoApiConfig { records: 300, accounts: 3, job_polls: u64::MAX, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &report_config(&api, 3));
    let mut child = host(&["run", "--streams", "report_items"])
        .args(FAST.iter().map(|s| s.to_string()))
        .demo_source(&api, &config)
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    loop {
        let mut line = String::new();
        assert!(reader.read_line(&mut line).unwrap() > 0);
        let message: Value = serde_json::from_str(&line).unwrap();
        if message["state"]["stream"]["stream_state"]["jobs"].as_array().map_or(0, Vec::len) == 3 {
            break;
        }
    }
    assert_eq!(api.stats().jobs_running, 3);
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child.wait().unwrap();
    assert_eq!(std::os::unix::process::ExitStatusExt::into_raw(status) >> 8, 143);
    let stats = api.stats();
    assert_eq!((stats.jobs_running, stats.jobs_kept, stats.jobs_deleted), (0, 0, 3), "every job was aborted");
}
