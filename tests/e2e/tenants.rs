//! Many tenants in one process through the library API: one engine and cache, each run with its
//! own policy, limits and accounting. A hostile tenant must not cost the others anything but time.

use crate::support::*;
use serde_json::{Value, json};
use sluice_host::{
    Attempt, AttemptOutcome, BoxFuture, FailureType, Format, HttpHooks, Policy, ReadReport, ReplayOptions, RunRequest,
    Runtime, RuntimeOptions, Timing,
};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A sink the test can read back.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Shared {
    fn first_log(&self) -> String {
        let bytes = self.0.lock().unwrap();
        let first = String::from_utf8_lossy(&bytes).lines().next().unwrap_or_default().to_string();
        let message: Value = serde_json::from_str(&first).unwrap();
        message["log"]["message"].as_str().unwrap_or_default().to_string()
    }

    fn ids(&self, stream: &str) -> Vec<u64> {
        let bytes = self.0.lock().unwrap();
        let ids = String::from_utf8_lossy(&bytes)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|m| m["type"] == "RECORD" && m["record"]["stream"] == stream)
            .map(|m| m["record"]["data"]["id"].as_u64().unwrap())
            .collect();
        sorted(ids)
    }
}

const RECORDS: u64 = 200;

fn tenant(api: &DemoApi, sink: Shared) -> RunRequest {
    let mut request = RunRequest::new(plugin("demo-source"), demo_config(api, 25), Box::new(sink));
    request.policy = Policy { allow_hosts: vec![grant(api)], ..Default::default() };
    request.streams(["items", "account_items"])
}

fn hostile_tenant(mode: &str) -> RunRequest {
    let mut request = RunRequest::new(plugin("hostile"), json!({"mode": mode}), Box::new(std::io::sink()));
    request.policy.limits.cpu_ms_per_call = 500;
    request.policy.limits.memory_bytes = 64 << 20;
    request
}

async fn fifty_runs(hostile_mode: &str) {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let mut runs = tokio::task::JoinSet::new();
    let hostile = runtime.clone();
    let mode = hostile_mode.to_string();
    runs.spawn(async move { (None, hostile.run(hostile_tenant(&mode)).await.read()) });
    for _ in 0..49 {
        let (runtime, sink) = (runtime.clone(), Shared::default());
        let request = tenant(&api, sink.clone());
        runs.spawn(async move { (Some(sink), runtime.run(request).await.read()) });
    }
    let mut good = 0;
    let mut figures = std::collections::BTreeSet::new();
    while let Some(joined) = runs.join_next().await {
        match joined.unwrap() {
            (Some(sink), result) => {
                let report: ReadReport = result.unwrap_or_else(|e| panic!("a well-behaved tenant failed: {e}"));
                assert!(report.ok(), "{}", report.summary_line());
                let all: Vec<u64> = (1..=RECORDS).collect();
                // Every tenant's output starts with the plugin's identity, loaded once or not.
                assert!(sink.first_log().contains("sha256") && sink.first_log().contains("sluice:connector@0.1.7"));
                assert_eq!(sink.ids("items"), all);
                assert_eq!(sink.ids("account_items"), all);
                // Per-run accounting.
                assert_eq!(report.usage.records, 2 * RECORDS);
                assert_eq!(report.usage.requests, 8 + 1 + 4 * 2, "8 item pages, 1 account page, 2 pages per account");
                assert!(report.usage.bytes_in > 2 * RECORDS * 50, "{:?}", report.usage);
                assert!(report.usage.peak_memory_bytes >= 64 << 10, "{:?}", report.usage);
                // The spec probe's (spec and capabilities, then discover, the questions before the
                // read and one stream's listing), the other stream's listing, 1 + 4 partitions.
                assert_eq!(report.usage.instances, 1 + 1 + 5, "{:?}", report.usage);
                assert_eq!((report.usage.retries, report.usage.denied, report.usage.bytes_out), (0, 0, 0));
                assert!(!report.usage.guest_cpu.is_zero(), "the guests' time is accounted: {:?}", report.usage);
                // Every tenant read the same: byte for byte the same answers, the same peak.
                figures.insert((report.usage.bytes_in, report.usage.peak_memory_bytes));
                good += 1;
            }
            (None, result) => {
                let report = result.expect("the hostile run starts; its partition fails");
                assert!(!report.ok(), "the hostile partition fails");
                assert_eq!(report.streams[0].failed_partitions, 1);
                assert_eq!(report.usage.records, 2, "its well-behaved partitions complete");
                if hostile_mode == "loop" {
                    assert!(
                        report.usage.guest_cpu.as_millis() >= 400,
                        "the loop's CPU is accounted: {:?}",
                        report.usage
                    );
                } else {
                    assert!(
                        report.usage.peak_memory_bytes >= 32 << 20,
                        "the bomb's memory is accounted: {:?}",
                        report.usage
                    );
                }
            }
        }
    }
    assert_eq!(good, 49);
    assert_eq!(figures.len(), 1, "the tenants' accounting differs: {figures:?}");
    assert!(runtime.pooling(), "the pooling allocator is in use here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tenants_with_an_endless_loop_among_them() {
    fifty_runs("loop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tenants_with_a_memory_bomb_among_them() {
    fifty_runs("memory").await;
}

/// The demo API, a runtime with its own cache, and a lake folder.
fn kept_tenant_setup() -> (DemoApi, tempfile::TempDir, tempfile::TempDir, Runtime) {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let (cache, lake) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runtime = Runtime::new(cache.path().to_path_buf(), true).unwrap();
    (api, cache, lake, runtime)
}

/// A tenant's run kept in the lake, through the library: the same storage options as
/// `--replay-to`, and the stored run replays byte-identical to what the tenant's sink got.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_run_is_kept_in_the_lake_and_replays_byte_identical() {
    let (api, _cache, lake, runtime) = kept_tenant_setup();
    let sink = Shared::default();
    let mut request = tenant(&api, sink.clone());
    request.format = Format::Singer;
    request.storage.replay_to = Some(lake.path().display().to_string());
    let report = runtime.run(request).await;
    let kept_at = report.kept_at.clone().expect("the run is kept");
    let read = report.read().unwrap();
    assert!(read.ok(), "{}", read.summary_line());
    // The storage functions block: off the async workers, as docs/embedding.md says.
    let uri = kept_at.clone();
    let manifest = tokio::task::spawn_blocking(move || sluice_host::current_manifest(&uri)).await.unwrap().unwrap();
    assert_eq!(manifest.outcome.as_deref(), Some("succeeded"));
    assert_eq!(manifest.segments.iter().map(|s| s.records).sum::<u64>(), 2 * RECORDS);
    let replayed = tokio::task::spawn_blocking(move || {
        let mut replayed = Vec::new();
        let options = ReplayOptions { format: Format::Singer, ..Default::default() };
        sluice_host::replay(&kept_at, &options, &mut replayed).unwrap();
        replayed
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8(replayed).unwrap(), String::from_utf8(sink.0.lock().unwrap().clone()).unwrap());
}

/// Counts what the egress layer shows an embedder's hook: every attempt, with its outcome.
#[derive(Default)]
struct Counting {
    attempts: AtomicU64,
    ok: AtomicU64,
}

impl HttpHooks for Counting {
    fn observe<'a>(&'a self, attempt: &'a Attempt<'a>, outcome: AttemptOutcome<'a>, _timing: Timing) -> BoxFuture<'a> {
        assert_eq!(attempt.method, "GET");
        self.attempts.fetch_add(1, Ordering::Relaxed);
        if matches!(outcome, AttemptOutcome::Response(r) if r.status == 200) {
            self.ok.fetch_add(1, Ordering::Relaxed);
        }
        Box::pin(async {})
    }
}

/// A tenant's run recorded (`storage.record_http`), then run again from the recording with the
/// API gone: the same records, no network, and an embedder's own hook sees every attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_run_replays_from_its_http_recording_with_the_api_gone() {
    let (api, _cache, lake, runtime) = kept_tenant_setup();
    let recorded_sink = Shared::default();
    let mut request = tenant(&api, recorded_sink.clone());
    request.storage.replay_to = Some(lake.path().display().to_string());
    request.storage.record_http = true;
    let counting = Arc::new(Counting::default());
    request.http_hooks.push(counting.clone());
    let report = runtime.run(request).await;
    let kept_at = report.kept_at.clone().expect("the run is kept");
    let recorded = report.read().unwrap();
    assert!(recorded.ok(), "{}", recorded.summary_line());
    assert_eq!(counting.attempts.load(Ordering::Relaxed), recorded.usage.requests);
    assert_eq!(counting.ok.load(Ordering::Relaxed), recorded.usage.requests);
    let config = demo_config(&api, 25);
    drop(api);

    let replayed_sink = Shared::default();
    let mut request = RunRequest::new(plugin("demo-source"), config, Box::new(replayed_sink.clone()));
    request = request.streams(["items", "account_items"]);
    request.http_replay = Some(kept_at);
    let replayed = runtime.run(request).await.read().unwrap();
    assert!(replayed.ok(), "{}", replayed.summary_line());
    let all: Vec<u64> = (1..=RECORDS).collect();
    assert_eq!(replayed_sink.ids("items"), all);
    assert_eq!(replayed_sink.ids("account_items"), all);
    assert_eq!(replayed.usage.requests, recorded.usage.requests);
    let logs = String::from_utf8(replayed_sink.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("HTTP is replayed from the recording"), "{logs}");
}

/// A tenant stopped through its request's [`Stop`] ends with its own reason, and the others in
/// the process are not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_stopped_through_its_handle_ends_alone() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, latency_ms: 200, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let (stopped_sink, other_sink) = (Shared::default(), Shared::default());
    let stopped = tenant(&api, stopped_sink.clone());
    let stop = stopped.stop.clone();
    let other = tenant(&api, other_sink.clone());
    let (a, b) = (runtime.clone(), runtime.clone());
    let stopped = tokio::spawn(async move { a.run(stopped).await });
    let other = tokio::spawn(async move { b.run(other).await });
    // Stop once the tenant has written its first record (polled, for at most 60 s).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !String::from_utf8_lossy(&stopped_sink.0.lock().unwrap()).contains("\"RECORD\"") {
        assert!(std::time::Instant::now() < deadline, "the tenant wrote no record");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    stop.request("the tenant was cancelled");
    let stopped = stopped.await.unwrap();
    assert_eq!(stopped.stopped.as_deref(), Some("the tenant was cancelled"));
    let error = stopped.result.unwrap_err();
    assert_eq!(error.failure, FailureType::Transient);
    let text = String::from_utf8(stopped_sink.0.lock().unwrap().clone()).unwrap();
    let last = text.lines().last().unwrap();
    assert!(last.contains("TRACE") && last.contains("the tenant was cancelled"), "{last}");
    let other = other.await.unwrap().read().unwrap();
    assert!(other.ok(), "{}", other.summary_line());
    assert_eq!(other_sink.ids("items"), (1..=RECORDS).collect::<Vec<_>>());
}

/// A tenant whose plugin is slow to load holds up nobody. The slow plugin is a named pipe: its
/// load blocks reading it until the test writes the component, and the test knows the load has
/// begun because opening the pipe for writing waits for that reader. Meanwhile a tenant of another
/// plugin runs to the end (with one process-wide load lock, or a load on an async worker, it
/// would wait for the pipe forever).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_plugin_load_does_not_hold_up_other_tenants() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let (cache, files) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let pipe = files.path().join("slow.wasm");
    let c_path = std::ffi::CString::new(pipe.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c_path.as_ptr(), 0o600) }, 0, "mkfifo");
    let slow_sink = Shared::default();
    let slow = RunRequest::new(&pipe, demo_config(&api, 25), Box::new(slow_sink.clone()));
    let mut slow = slow.streams(["items"]);
    slow.policy = Policy { allow_hosts: vec![grant(&api)], ..Default::default() };
    let slow_runtime = runtime.clone();
    let slow = tokio::spawn(async move { slow_runtime.run(slow).await.read() });
    // Opening for writing returns once the slow tenant's load has opened the pipe to read it.
    let writer = {
        let pipe = pipe.clone();
        tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(pipe)).await.unwrap().unwrap()
    };
    let fast = tokio::time::timeout(std::time::Duration::from_secs(60), runtime.run(tenant(&api, Shared::default())))
        .await
        .expect("the other tenant waited for the slow plugin's load")
        .read()
        .unwrap();
    assert!(fast.ok(), "{}", fast.summary_line());
    assert!(!slow.is_finished(), "the slow tenant is still loading");
    tokio::task::spawn_blocking(move || {
        let mut writer = writer;
        writer.write_all(&std::fs::read(plugin("demo-source")).unwrap()).unwrap();
    })
    .await
    .unwrap();
    let slow = slow.await.unwrap().unwrap();
    assert!(slow.ok(), "{}", slow.summary_line());
    assert_eq!(slow_sink.ids("items"), (1..=RECORDS).collect::<Vec<_>>());
}

/// An embedder's hook that panics for the requests of one partition.
struct PanicsFor(&'static str);

impl HttpHooks for PanicsFor {
    fn answer(&self, attempt: &Attempt<'_>) -> Option<sluice_host::Answer> {
        if attempt.context.contains(self.0) {
            panic!("a hook panicked on purpose");
        }
        None
    }
}

/// A panic in a partition's task (here in an embedder's hook) fails that partition with a
/// system error; its stream's other partitions, the other streams and the run all finish. (A
/// panicking task used to leave its stream waiting for it forever.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_in_a_partition_task_fails_that_partition_only() {
    let api = demo_api(DemoApiConfig { records: RECORDS, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(cache.path().to_path_buf(), false).unwrap();
    let sink = Shared::default();
    let mut request = tenant(&api, sink.clone());
    request.http_hooks.push(Arc::new(PanicsFor(r#""partition":{"account_id":3}"#)));
    let report = runtime.run(request).await.read().unwrap();
    assert!(!report.ok());
    let by_name = |name: &str| report.streams.iter().find(|s| s.name == name).unwrap().clone();
    assert!(by_name("items").complete(), "{}", report.summary_line());
    let account_items = by_name("account_items");
    assert_eq!((account_items.partitions, account_items.failed_partitions), (5, 1), "{}", report.summary_line());
    // Accounts 1, 2, 4 and 5 are read whole: items of account 3 (ids 3, 8, ...) are missing.
    let expected: Vec<u64> = (1..=RECORDS).filter(|id| (id - 1) % 5 != 2).collect();
    assert_eq!(sink.ids("account_items"), expected);
    let output = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
    let error = output
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["type"] == "TRACE" && m["trace"]["type"] == "ERROR")
        .expect("an error trace");
    assert_eq!(error["trace"]["error"]["failure_type"], "system_error", "{error}");
    assert!(error["trace"]["error"]["message"].as_str().unwrap().contains("account_id"), "{error}");
}

/// A pool with fewer slots than the runs want instances makes instances wait for a slot: it used
/// to fail them ("maximum concurrent instance limit"), so a run whose report jobs all polled at
/// once could fail for want of a slot. Four runs of eight partitions share two slots here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_wait_for_a_slot_of_a_full_pool() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 8, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let options = RuntimeOptions {
        cache_dir: cache.path().to_path_buf(),
        pooling: true,
        pooled_instances: 2,
        ..Default::default()
    };
    let runtime = Arc::new(Runtime::with_options(options).unwrap());
    assert!(runtime.pooling(), "the test needs the pooling allocator");
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..4 {
        let (runtime, sink) = (runtime.clone(), Shared::default());
        let request = tenant(&api, sink.clone());
        runs.spawn(async move { (sink, runtime.run(request).await.read()) });
    }
    while let Some(joined) = runs.join_next().await {
        let (sink, result) = joined.unwrap();
        let report = result.unwrap_or_else(|e| panic!("a run failed: {e}"));
        assert!(report.ok(), "{}", report.summary_line());
        assert_eq!(sink.ids("account_items"), (1..=RECORDS).collect::<Vec<_>>());
    }
}

/// Waits (bounded) until `tenant` has `n` runs going.
async fn until_active(runtime: &Runtime, tenant: &str, n: u64) {
    for _ in 0..10_000 {
        if runtime.tenant_usage(tenant).is_some_and(|u| u.runs_active == n) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    panic!("tenant {tenant} never had {n} runs going: {:?}", runtime.tenant_usage(tenant));
}

/// A tenant's quota of runs at once: past it a run is refused (saying why) or waits for one to
/// end, as the quota says; the tenant's usage is the sum of its runs'.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_runs_at_once_are_refused_or_wait_past_its_quota() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, latency_ms: 20, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    runtime.set_tenant("refusing", sluice_host::TenantQuota { max_runs: Some(1), ..Default::default() });
    let first = {
        let (runtime, request) = (runtime.clone(), tenant(&api, Shared::default()));
        tokio::spawn(async move { runtime.run_for("refusing", request).await.read() })
    };
    until_active(&runtime, "refusing", 1).await;
    let refused = runtime.run_for("refusing", tenant(&api, Shared::default())).await.read().unwrap_err();
    assert!(refused.message.contains("already has 1 run(s) going"), "{}", refused.message);
    assert_eq!(refused.failure, FailureType::Transient);
    // A quota set again while a run goes: the run still counts when it ends.
    runtime.set_tenant("refusing", sluice_host::TenantQuota { max_runs: Some(1), ..Default::default() });
    let first = first.await.unwrap().unwrap();
    let usage = runtime.tenant_usage("refusing").unwrap();
    assert_eq!((usage.runs_started, usage.runs_refused, usage.runs_active), (1, 1, 0));
    assert_eq!((usage.records, usage.requests), (first.usage.records, first.usage.requests));

    // Waiting: three runs, one at a time, all read in full.
    let wait = Some(std::time::Duration::from_secs(120));
    runtime.set_tenant(
        "waiting",
        sluice_host::TenantQuota { max_runs: Some(1), wait_for_run: wait, ..Default::default() },
    );
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (runtime, request) = (runtime.clone(), tenant(&api, Shared::default()));
        runs.spawn(async move { runtime.run_for("waiting", request).await.read() });
    }
    let mut records = 0;
    while let Some(done) = runs.join_next().await {
        let report = done.unwrap().unwrap_or_else(|e| panic!("a waiting run ran: {e}"));
        assert!(report.ok(), "{}", report.summary_line());
        records += report.usage.records;
    }
    let usage = runtime.tenant_usage("waiting").unwrap();
    assert_eq!((usage.runs_started, usage.runs_refused, usage.peak_runs_active), (3, 0, 1), "{usage:?}");
    assert_eq!(usage.records, records);
    assert_eq!(records, 3 * 2 * RECORDS);
}

/// Two runs of `tenant` at once, each read in full: the requests they made.
async fn two_runs_at_once(runtime: &Arc<Runtime>, api: &DemoApi, tenant_name: &str) -> u64 {
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..2 {
        let (runtime, request, name) = (runtime.clone(), tenant(api, Shared::default()), tenant_name.to_string());
        runs.spawn(async move { runtime.run_for(&name, request).await.read() });
    }
    let mut requests = 0;
    while let Some(done) = runs.join_next().await {
        let report = done.unwrap().unwrap();
        assert!(report.ok(), "{}", report.summary_line());
        requests += report.usage.requests;
    }
    requests
}

/// A tenant's API budget holds across its runs: two runs at once together send no faster than
/// the tenant's rate to the API host (each run alone would go as fast as the API answers).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_api_budget_is_shared_by_its_runs() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    // Slow enough that the two runs unpaced (well under a second here) would be far quicker.
    let rate = 8.0;
    runtime.set_tenant("budgeted", sluice_host::TenantQuota { api_rate_per_host: Some(rate), ..Default::default() });
    let started = std::time::Instant::now();
    let requests = two_runs_at_once(&runtime, &api, "budgeted").await;
    let elapsed = started.elapsed().as_secs_f64();
    // Slots are handed out one interval apart across both runs: the last request goes no
    // sooner than (requests - 1) intervals after the first.
    let floor = (requests - 1) as f64 / rate;
    assert!(elapsed >= floor, "{requests} requests in {elapsed:.3} s, under the shared {rate}/s ({floor:.3} s)");
    assert_eq!(runtime.tenant_usage("budgeted").unwrap().requests, requests);
}

/// A tenant's requests per window hold across its runs: two runs at once send no more than the
/// allowance in any window, so the last request waits for the window its count falls in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_requests_per_window_hold_across_its_runs() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let (per_window, window) = (6, std::time::Duration::from_millis(500));
    let quota =
        sluice_host::TenantQuota { requests_per_window: Some(per_window), window: Some(window), ..Default::default() };
    runtime.set_tenant("windowed", quota);
    let started = std::time::Instant::now();
    let requests = two_runs_at_once(&runtime, &api, "windowed").await;
    // The windows start when the quota is set: request n goes in window (n - 1) / per_window.
    let floor = window.as_secs_f64() * ((requests - 1) / per_window) as f64;
    let elapsed = started.elapsed().as_secs_f64();
    assert!(requests > 2 * per_window, "{requests} requests: too few to need a second window");
    assert!(
        elapsed >= floor,
        "{requests} requests in {elapsed:.3} s, under {per_window} per {window:?} ({floor:.3} s)"
    );
    assert_eq!(runtime.tenant_usage("windowed").unwrap().requests, requests);
}

/// Guest CPU and response bytes per window: once a window's allowance is used by runs that
/// ended, the next run is refused (saying which quota), or waits for the next window when the
/// quota lets it; the usage is the runs' own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_cpu_and_bytes_per_window_refuse_or_delay_the_next_run() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let hour = Some(std::time::Duration::from_secs(3600));
    let tiny_cpu = Some(std::time::Duration::from_micros(1));
    runtime.set_tenant(
        "cpu",
        sluice_host::TenantQuota { guest_cpu_per_window: tiny_cpu, window: hour, ..Default::default() },
    );
    let first = runtime.run_for("cpu", tenant(&api, Shared::default())).await.read().unwrap();
    assert!(first.ok(), "{}", first.summary_line());
    let refused = runtime.run_for("cpu", tenant(&api, Shared::default())).await.read().unwrap_err();
    assert!(refused.message.contains("used its guest CPU quota"), "{}", refused.message);
    let usage = runtime.tenant_usage("cpu").unwrap();
    assert_eq!((usage.runs_started, usage.runs_refused), (1, 1));
    assert_eq!((usage.guest_cpu, usage.window_guest_cpu), (first.usage.guest_cpu, first.usage.guest_cpu));
    assert_eq!(usage.bytes_in, first.usage.bytes_in);

    runtime.set_tenant(
        "bytes",
        sluice_host::TenantQuota { bytes_per_window: Some(1), window: hour, ..Default::default() },
    );
    runtime.run_for("bytes", tenant(&api, Shared::default())).await.read().unwrap();
    let refused = runtime.run_for("bytes", tenant(&api, Shared::default())).await.read().unwrap_err();
    assert!(refused.message.contains("response bytes per 3600 s"), "{}", refused.message);

    // Waiting: a short window, and a run allowed to wait longer than it: it runs in the next
    // window (the first window ends a window after the quota was set, and the first run's CPU
    // counts in the window it ended in, that one or a later one).
    let window = std::time::Duration::from_millis(1500);
    let set_at = std::time::Instant::now();
    let quota = sluice_host::TenantQuota {
        guest_cpu_per_window: tiny_cpu,
        window: Some(window),
        wait_for_run: Some(std::time::Duration::from_secs(30)),
        ..Default::default()
    };
    runtime.set_tenant("waits", quota);
    runtime.run_for("waits", tenant(&api, Shared::default())).await.read().unwrap();
    let second = runtime.run_for("waits", tenant(&api, Shared::default())).await.read().unwrap();
    assert!(second.ok(), "{}", second.summary_line());
    assert!(set_at.elapsed() >= window, "the second run did not wait for the next window");
    let usage = runtime.tenant_usage("waits").unwrap();
    assert_eq!((usage.runs_started, usage.runs_refused), (2, 0));
}

/// A tenant's memory: each run holds its memory limit for each partition it reads at once; a run
/// that would pass the quota with the runs going is refused (or waits), one that alone would
/// pass it is refused at once, and the memory held goes back when runs end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenants_memory_quota_refuses_or_delays_runs() {
    let api = demo_api(DemoApiConfig { records: RECORDS, accounts: 4, latency_ms: 20, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    let sized = |api: &DemoApi| {
        let mut request = tenant(api, Shared::default());
        request.policy.limits.memory_bytes = 64 << 20;
        request.concurrency.partitions = 2;
        request
    };
    // One run holds 128 MiB: the quota has room for one.
    runtime.set_tenant("memory", sluice_host::TenantQuota { max_memory_bytes: Some(200 << 20), ..Default::default() });
    let first = {
        let (runtime, request) = (runtime.clone(), sized(&api));
        tokio::spawn(async move { runtime.run_for("memory", request).await.read() })
    };
    until_active(&runtime, "memory", 1).await;
    assert_eq!(runtime.tenant_usage("memory").unwrap().memory_held, 128 << 20);
    let refused = runtime.run_for("memory", sized(&api)).await.read().unwrap_err();
    assert!(refused.message.contains("would hold 128 MiB (64 MiB for each of 2 partitions at once) with the tenant's other runs, past its memory quota of 200 MiB"), "{}", refused.message);
    first.await.unwrap().unwrap();
    assert_eq!(runtime.tenant_usage("memory").unwrap().memory_held, 0, "given back when the run ended");
    let mut big = sized(&api);
    big.concurrency.partitions = 8;
    let refused = runtime.run_for("memory", big).await.read().unwrap_err();
    assert!(refused.message.contains("would hold 512 MiB"), "{}", refused.message);

    // Waiting: three runs, one at a time under the memory quota, all read in full.
    let quota = sluice_host::TenantQuota {
        max_memory_bytes: Some(200 << 20),
        wait_for_run: Some(std::time::Duration::from_secs(120)),
        ..Default::default()
    };
    runtime.set_tenant("memory-waits", quota);
    let mut runs = tokio::task::JoinSet::new();
    for _ in 0..3 {
        let (runtime, request) = (runtime.clone(), sized(&api));
        runs.spawn(async move { runtime.run_for("memory-waits", request).await.read() });
    }
    while let Some(done) = runs.join_next().await {
        let report = done.unwrap().unwrap_or_else(|e| panic!("a waiting run ran: {e}"));
        assert!(report.ok(), "{}", report.summary_line());
    }
    let usage = runtime.tenant_usage("memory-waits").unwrap();
    assert_eq!((usage.runs_started, usage.runs_refused, usage.peak_runs_active), (3, 0, 1), "{usage:?}");
}

/// Fair share: with the runtime's partition slots shared, two tenants of weights 1 and 3 whose
/// runs both want more partitions than there are slots read in that ratio: when the heavier
/// tenant's run ends, the lighter one has read a third as many partitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tenants_share_partition_slots_by_weight() {
    let accounts = 120;
    let api = demo_api(DemoApiConfig { records: 2 * accounts, accounts, latency_ms: 5, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Arc::new(Runtime::new(cache.path().to_path_buf(), true).unwrap());
    assert!(runtime.share_partition_slots(2));
    assert!(!runtime.share_partition_slots(4), "once per runtime");
    runtime.set_tenant("light", sluice_host::TenantQuota { weight: Some(1.0), ..Default::default() });
    runtime.set_tenant("heavy", sluice_host::TenantQuota { weight: Some(3.0), ..Default::default() });
    let request = |api: &DemoApi| {
        // One page of accounts: each run lists its partitions with one request.
        let mut request = RunRequest::new(plugin("demo-source"), demo_config(api, 200), Box::new(std::io::sink()));
        request.policy = Policy { allow_hosts: vec![grant(api)], ..Default::default() };
        request.concurrency.partitions = 8;
        request.streams(["account_items"])
    };
    let light = {
        let (runtime, request) = (runtime.clone(), request(&api));
        tokio::spawn(async move { runtime.run_for("light", request).await.read() })
    };
    // Counted from the heavy tenant's first slot: before it, the light one reads alone however
    // long the heavy run takes to start (loading, listing), and that is no contention.
    let slots_of = |tenant: &str| runtime.tenant_usage(tenant).map_or(0, |u| u.partition_slots);
    let heavy = {
        let (runtime, request) = (runtime.clone(), request(&api));
        tokio::spawn(async move { runtime.run_for("heavy", request).await.read() })
    };
    let mut light_before = None;
    for _ in 0..20_000 {
        if slots_of("heavy") >= 1 {
            light_before = Some(slots_of("light"));
            break;
        }
        tokio::time::sleep(std::time::Duration::from_micros(200)).await;
    }
    let light_before = light_before.expect("the heavy tenant never read");
    let heavy = heavy.await.unwrap().unwrap();
    assert!(heavy.ok(), "{}", heavy.summary_line());
    let (light_slots, heavy_slots) = (slots_of("light") - light_before, slots_of("heavy"));
    let ratio = heavy_slots as f64 / light_slots as f64;
    assert!((2.7..=3.3).contains(&ratio), "weights 3 and 1 read {heavy_slots} and {light_slots} partitions");
    let light = light.await.unwrap().unwrap();
    assert!(light.ok(), "{}", light.summary_line());
    assert_eq!(runtime.tenant_usage("light").unwrap().partition_slots, accounts, "every partition took a slot");
}
