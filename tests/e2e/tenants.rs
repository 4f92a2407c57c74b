//! Many tenants in one process through the library API: one engine and cache, each run with its
//! own policy, limits and accounting. A hostile tenant must not cost the others anything but time.

use crate::support::*;
use serde_json::{Value, json};
use sluice_host::policy::Policy;
use sluice_host::runtime::{RunRequest, Runtime};
use sluice_host::session::ReadReport;
use std::io::Write;
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
    request.streams = Some(vec!["items".into(), "account_items".into()]);
    request
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
    runs.spawn(async move { (None, hostile.run(hostile_tenant(&mode)).await) });
    for _ in 0..49 {
        let (runtime, sink) = (runtime.clone(), Shared::default());
        let request = tenant(&api, sink.clone());
        runs.spawn(async move { (Some(sink), runtime.run(request).await) });
    }
    let mut good = 0;
    while let Some(joined) = runs.join_next().await {
        match joined.unwrap() {
            (Some(sink), result) => {
                let report: ReadReport = result.unwrap_or_else(|e| panic!("a well-behaved tenant failed: {e}"));
                assert!(report.ok(), "{}", report.summary_line());
                let all: Vec<u64> = (1..=RECORDS).collect();
                // Every tenant's output starts with the plugin's identity, loaded once or not.
                assert!(sink.first_log().contains("sha256") && sink.first_log().contains("sluice:connector@0.1.1"));
                assert_eq!(sink.ids("items"), all);
                assert_eq!(sink.ids("account_items"), all);
                // Per-run accounting.
                assert_eq!(report.usage.records, 2 * RECORDS);
                assert_eq!(report.usage.requests, 8 + 1 + 4 * 2, "8 item pages, 1 account page, 2 pages per account");
                assert!(report.usage.bytes_in > 2 * RECORDS * 50, "{:?}", report.usage);
                assert!(report.usage.peak_memory_bytes >= 64 << 10, "{:?}", report.usage);
                assert!(report.usage.instances >= 7, "{:?}", report.usage);
                assert!(!report.usage.guest_cpu.is_zero(), "the guests' time is accounted: {:?}", report.usage);
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
    assert!(runtime.engine().pooling(), "the pooling allocator is in use here");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tenants_with_an_endless_loop_among_them() {
    fifty_runs("loop").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fifty_tenants_with_a_memory_bomb_among_them() {
    fifty_runs("memory").await;
}
