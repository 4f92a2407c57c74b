//! `just bench`: the demo connector through the host against a native Rust reader of the same
//! API (same HTTP client, same record checks, same writer), in the same run, on the demo API
//! over loopback. Reports records/s of each, their ratio, and the median time to instantiate a
//! plugin for one partition.
//!
//! Machines here are noisy, so the two readers alternate and medians are reported.

use clap::Parser;
use sluice_host::cli::Cli;
use sluice_host::connector::Connector;
use sluice_host::egress::{Egress, EgressPolicy, HttpOptions};
use sluice_host::engine::Engine;
use sluice_host::protocol::{self, Format, Output};
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const RECORDS: u64 = 100_000;
const PAGE_SIZE: u64 = 1000;
const ROUNDS: usize = 5;
const INSTANCES: usize = 200;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let plugin = root.join("target/plugins/demo-source.wasm");
    assert!(plugin.exists(), "{} is missing: run `just build-plugins` (`just bench` does)", plugin.display());
    let cache = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();

    let api = DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 5, ..Default::default() }).unwrap();
    let config = work.path().join("config.json");
    std::fs::write(&config, format!(r#"{{"base_url": "{}", "page_size": {PAGE_SIZE}}}"#, api.base_url())).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();

    println!(
        "benchmark: stream `items`, {RECORDS} records in pages of {PAGE_SIZE}, demo API on loopback, {ROUNDS} rounds"
    );
    // Warm up both paths (and compile the plugin into the cache) before measuring.
    runtime.block_on(host_read(&plugin, &config, &api, cache.path()));
    runtime.block_on(native_read(&api.base_url()));

    let mut host_times = Vec::new();
    let mut native_times = Vec::new();
    for _ in 0..ROUNDS {
        host_times.push(runtime.block_on(host_read(&plugin, &config, &api, cache.path())));
        native_times.push(runtime.block_on(native_read(&api.base_url())));
    }
    let host = median(&mut host_times);
    let native = median(&mut native_times);
    let rate = |d: Duration| RECORDS as f64 / d.as_secs_f64();
    println!("{:<28} {:>12.0} records/s  (median {:.1} ms)", "host + demo connector", rate(host), ms(host));
    println!("{:<28} {:>12.0} records/s  (median {:.1} ms)", "native reader", rate(native), ms(native));
    println!("ratio host/native: {:.2}x", native.as_secs_f64() / host.as_secs_f64());

    let instantiate = runtime.block_on(instantiation(&plugin, cache.path()));
    println!("per-partition instantiation: median {:.1} µs over {INSTANCES}", instantiate.as_secs_f64() * 1e6);
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The whole `host run` path, output to a sink.
async fn host_read(plugin: &Path, config: &Path, api: &DemoApi, cache: &Path) -> Duration {
    let args: Vec<String> = vec![
        "host".into(),
        "run".into(),
        plugin.display().to_string(),
        "--config".into(),
        config.display().to_string(),
        "--streams".into(),
        "items".into(),
        "--allow-host".into(),
        api.addr().to_string(),
        "--cache-dir".into(),
        cache.display().to_string(),
    ];
    let cli = Cli::parse_from(args);
    let started = Instant::now();
    let code = sluice_host::commands::execute(cli, Box::new(std::io::sink())).await;
    let elapsed = started.elapsed();
    assert_eq!(format!("{code:?}"), format!("{:?}", std::process::ExitCode::SUCCESS), "host run failed");
    elapsed
}

#[derive(serde::Deserialize)]
struct ItemsPage {
    data: Vec<Box<serde_json::value::RawValue>>,
    next_cursor: Option<String>,
}

/// What a hand-written Rust reader does: same client, same checks, same writer.
async fn native_read(base_url: &str) -> Duration {
    let client = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).no_proxy().build().unwrap();
    let (out, writer) = Output::spawn(Format::Airbyte, Box::new(std::io::sink()));
    let started = Instant::now();
    let stream_json = serde_json::to_string("items").unwrap();
    let mut cursor: Option<String> = None;
    let mut records = 0;
    for _ in 0..=RECORDS / PAGE_SIZE + 1 {
        let mut request = client.get(format!("{base_url}/items")).query(&[("limit", PAGE_SIZE.to_string())]);
        if let Some(c) = &cursor {
            request = request.query(&[("cursor", c)]);
        }
        let body = request.send().await.unwrap().error_for_status().unwrap().bytes().await.unwrap();
        let page: ItemsPage = serde_json::from_slice(&body).unwrap();
        let emitted_at = protocol::now_ms();
        let mut lines = Vec::with_capacity(body.len() * 2);
        for record in &page.data {
            let checked = protocol::checked_record(record.get(), 16 << 20).unwrap();
            protocol::airbyte::push_record(&mut lines, &stream_json, &checked, emitted_at);
        }
        records += page.data.len() as u64;
        out.records(lines).await.unwrap();
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    drop(out);
    writer.finish().unwrap();
    let elapsed = started.elapsed();
    assert_eq!(records, RECORDS);
    elapsed
}

async fn instantiation(plugin: &Path, cache: &Path) -> Duration {
    let engine = Engine::new(cache.to_path_buf()).unwrap();
    let plugin = Arc::new(engine.load(plugin).unwrap());
    let egress = Arc::new(Egress::new(EgressPolicy::default(), HttpOptions::default()).unwrap());
    let connector = Connector { plugin, config: "{}".into(), egress };
    let mut times = Vec::with_capacity(INSTANCES);
    for _ in 0..INSTANCES {
        let started = Instant::now();
        let instance = connector.instance().await.unwrap_or_else(|e| panic!("{e}"));
        times.push(started.elapsed());
        drop(instance);
    }
    median(&mut times)
}
