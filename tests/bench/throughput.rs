//! `just bench`: the host against a native Rust reader of the same API (same HTTP client, same
//! record checks, same writer), measured in the same run on the demo API over loopback, so the
//! ratios hold on a noisy machine. Readers alternate; medians are reported.
//!
//! Cases:
//! 1. `items`, 100k records in pages of 1000 (one partition): raw throughput.
//! 2. `account_items`, 20 partitions x 1000 records, pages of 100, 20 ms per request, 8 in flight;
//!    the native reader lists the accounts first, as the connector does (the same requests).
//! 3. Peak RSS of the `host` process reading 1M records.
//! 4. Median time to instantiate the plugin for one partition.
//! 5. Noisy neighbours: 50 tenants in one process, 5 of them the hostile plugin (an endless loop,
//!    in one partition and in all, a memory bomb, a log flood, a request flood): each
//!    well-behaved tenant's time against the same 45 tenants' without the hostile ones.
//! 6. Instances per second with and without the pooling allocator.
//! 8. One report job of 100k rows (async jobs): the host's orchestrator vs a native reader on
//!    the same poll schedule, and the time from the job's completion to its first record written;
//!    then the same job done at its second poll with both polling every 5 s.
//! 9. Host memory under the hostile plugin's memory attacks (a memory bomb, 150 log calls of
//!    10 MiB, 32 MiB pages to a consumer that stalls): the `host` process's peak RSS against an
//!    idle run of the same plugin, with the guest limited to 64 MiB.
//! 10. STATE bytes of one incremental stream of 1k, 10k and 100k one-record partitions (the
//!     hostile plugin's `cursor-partitions`), against the size of its final state.
//! 11. Crash and resume: `account_items`, 20 partitions x 1000 records in pages of 100, 8 in
//!     flight, five SIGKILLs at random points, each run resumed from the last STATE it printed:
//!     records delivered twice, and none lost.
//! 12. Scale, each the `host` process against a native reader process (this benchmark run as
//!     one, `__native …`), peak RSS and records/s: 10M records in one stream (`items`), 100k
//!     partitions of one record (`account_items`, 8 in flight), and a 1M-row report job polled
//!     on a 5 s schedule by both, its download streamed.
//! 13. Declarative manifests: the demo manifest (`tests/fixtures/manifests/demo.yaml`) in the
//!     declarative engine against the Rust demo connector, both in the release `host` process on
//!     the same data: `items` (200k records, pages of 1000) and `account_items` (20 accounts x
//!     1000 records, pages of 100); then the start-up of each with a warm cache (`host discover`).
//! 14. The cost of a partition (partition_cost.rs): N one-record partitions (N = 1,000, 10,000
//!     and 100,000; 8 in flight), the native reader process against the `host` process with the
//!     Rust, Python and JavaScript demo connectors and `tests/fixtures/manifests/partitions.yaml`,
//!     and the Airbyte CDK on that manifest; written to docs/bench/partition-cost.md.
//! 15. The same manifest in Sluice and in the Airbyte CDK (when `just setup-cdk` installed it):
//!     the demo manifest's `items`, 100k records in pages of 1000, and `account_items`, 20
//!     accounts x 1000 records in pages of 100; records/s and each process's peak RSS.
//! 7. Replay storage: a 100k-record Singer run with `--replay-to file://…` (continual, and
//!    batched with gzip) vs without; then `host replay` of that run.

#[path = "common.rs"]
#[macro_use]
mod common;
mod custom_components;
#[path = "native.rs"]
mod native;
#[path = "partition_cost.rs"]
mod partition_cost;

use common::{Peak, measured_child, median, ms, release_host};
use native::{Accounts, client, native_account_items, native_account_items_into, native_items, native_items_into};
use sluice_host::internals::{Connector, Egress, EgressPolicy, Engine, Output, checked_record};
use sluice_host::{Format, HttpOptions};
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

const ROUNDS: usize = 5;
const INSTANCES: usize = 200;

struct Bench {
    plugin: std::path::PathBuf,
    cache: tempfile::TempDir,
    work: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
}

fn main() {
    // This benchmark, run again as a native reader, for case 12's per-process figures.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__native") {
        return native_child(&args[2..]);
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let plugin = root.join("target/plugins/demo-source.wasm");
    assert!(plugin.exists(), "{} is missing: run `just build-plugins` (`just bench` does)", plugin.display());
    let bench = Bench {
        plugin,
        cache: tempfile::tempdir().unwrap(),
        work: tempfile::tempdir().unwrap(),
        runtime: tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap(),
    };
    // `cargo bench --bench throughput -- 1 7` runs only cases 1 and 7.
    let only: Vec<String> = std::env::args().skip(1).filter(|a| a.parse::<u32>().is_ok()).collect();
    let cases: [(&str, Measure); 16] = [
        ("1", throughput),
        ("2", latency_bound),
        ("3", peak_rss),
        ("4", instantiation_time),
        ("5", tenants),
        ("6", pooling),
        ("7", replay_storage),
        ("8", report_job),
        ("9", memory_attacks),
        ("10", state_bytes),
        ("11", crash_and_resume),
        ("12", scale),
        ("13", declarative),
        ("14", partition_cost::partition_cost),
        ("15", against_the_cdk),
        ("16", custom_components::custom_components),
    ];
    for (case, measure) in cases {
        if only.is_empty() || only.iter().any(|c| c == case) {
            measure(&bench);
            // What the case printed goes to its report (unless it wrote one of its own).
            common::write_case_report("throughput", case);
        }
    }
}

/// One benchmark case.
type Measure = fn(&Bench);

fn instantiation_time(bench: &Bench) {
    common::case("instantiation", "Instantiating a plugin for a partition");
    let instantiate = bench.runtime.block_on(instantiation(&bench.plugin, bench.cache.path()));
    say!("\n[4] per-partition instantiation: median {:.1} µs over {INSTANCES}", instantiate.as_secs_f64() * 1e6);
}

/// `__native items|partitions|report BASE_URL N`: a native reader writing Airbyte records to
/// stdout, for a process of its own.
fn native_child(args: &[String]) {
    let (what, base_url, n) = (args[0].as_str(), args[1].as_str(), args[2].parse::<u64>().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let stdout = || Box::new(std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()));
    runtime.block_on(async {
        match what {
            "items" => drop(native_items_into(base_url, n, 1000, stdout()).await),
            "partitions" => drop(native_account_items_into(base_url, n, Accounts::Known, 1, 1000, 8, stdout()).await),
            "report" => drop(native_streamed_report(base_url, n, Duration::from_secs(5), stdout()).await),
            other => panic!("unknown native reader {other}"),
        }
    });
}

fn scale(bench: &Bench) {
    common::case("scale", "Scale: 10M records, 100k partitions, a 1M-row report");
    let Some(host) = release_host("[12] scale") else { return };
    let me = std::env::current_exe().unwrap();
    say!("\n[12] scale: the host process vs a native reader process, peak RSS and records/s");
    struct Case {
        name: &'static str,
        api: DemoApiConfig,
        config: serde_json::Value,
        args: &'static [&'static str],
        native: &'static str,
        records: u64,
    }
    let cases = [
        Case {
            name: "10M records in one stream (items, pages of 1000)",
            api: DemoApiConfig { records: 10_000_000, accounts: 1, ..Default::default() },
            config: serde_json::json!({"page_size": 1000}),
            args: &["--streams", "items"],
            native: "items",
            records: 10_000_000,
        },
        Case {
            name: "100k partitions of one record (account_items, 8 in flight)",
            api: DemoApiConfig { records: 100_000, accounts: 100_000, ..Default::default() },
            config: serde_json::json!({"page_size": 1000}),
            args: &["--streams", "account_items", "--concurrency", "8"],
            native: "partitions",
            records: 100_000,
        },
        Case {
            name: "a 1M-row report job, polled every 5 s, its download streamed in pages of 5000",
            api: DemoApiConfig { records: 1_000_000, accounts: 1, job_polls: 2, ..Default::default() },
            config: serde_json::json!({"report_jobs": true, "max_jobs": 1, "report_page_size": 5000}),
            args: &["--streams", "report_items", "--job-poll-ms", "5000", "--job-poll-max-ms", "5000"],
            native: "report",
            records: 1_000_000,
        },
    ];
    for Case { name, api: api_config, config, args, native, records } in cases {
        let api = DemoApi::start_background(api_config).unwrap();
        let mut config = config;
        config["base_url"] = api.base_url().into();
        let path = bench.work.path().join("scale.json");
        std::fs::write(&path, config.to_string()).unwrap();
        let (host_took, host_rss, host_records) = measured_child(
            std::process::Command::new(&host)
                .args(["run", "--no-progress", "--config"])
                .arg(&path)
                .args(args)
                .arg("--allow-host")
                .arg(format!("http://{}", api.addr()))
                .arg("--cache-dir")
                .arg(bench.cache.path())
                .arg(&bench.plugin),
        );
        let (native_took, native_rss, native_records) = measured_child(std::process::Command::new(&me).args([
            "__native",
            native,
            &api.base_url(),
            &records.to_string(),
        ]));
        assert_eq!((host_records, native_records), (records, records), "{name}");
        let rate = |took: Duration| records as f64 / took.as_secs_f64();
        say!(
            "    {name}:\n      host {:.0} records/s, peak RSS {host_rss:.1} MiB; native {:.0} records/s, peak RSS {native_rss:.1} MiB; host/native throughput {:.2}x",
            rate(host_took),
            rate(native_took),
            native_took.as_secs_f64() / host_took.as_secs_f64()
        );
    }
}

fn declarative(bench: &Bench) {
    common::case("declarative", "A manifest in the declarative engine against the Rust connector");
    let Some(host) = release_host("[13] declarative manifests") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let manifest = root.join("tests/fixtures/manifests/demo.yaml");
    // Short runs on a noisy machine: more rounds than the other cases, so the medians hold.
    const ROUNDS_13: usize = 11;
    say!(
        "\n[13] declarative manifests: the demo manifest in the engine vs the Rust demo connector (records/s, median of {ROUNDS_13})"
    );
    let cases = [
        (
            "items, 200k records in pages of 1000",
            DemoApiConfig { records: 200_000, accounts: 1, ..Default::default() },
            1000,
            "items",
        ),
        (
            "account_items, 20 accounts x 1000 records in pages of 100",
            DemoApiConfig { records: 20_000, accounts: 20, ..Default::default() },
            100,
            "account_items",
        ),
    ];
    let run = |plugin: &Path, config: &Path, api: &DemoApi, args: &[&str]| {
        let mut command = std::process::Command::new(&host);
        command
            .arg("run")
            .arg(plugin)
            .args(["--no-progress", "--config"])
            .arg(config)
            .args(args)
            .arg("--allow-host")
            .arg(format!("http://{}", api.addr()))
            .arg("--cache-dir")
            .arg(bench.cache.path());
        measured_child(&mut command)
    };
    for (name, api_config, page_size, stream) in cases {
        let records = api_config.records;
        let api = DemoApi::start_background(api_config).unwrap();
        let config = bench.config("declarative.json", &api, page_size);
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        // One warm-up each (compiling the components), then alternating rounds.
        run(&manifest, &config, &api, &["--streams", stream]);
        run(&bench.plugin, &config, &api, &["--streams", stream]);
        for _ in 0..ROUNDS_13 {
            let (took, _, n) = run(&manifest, &config, &api, &["--streams", stream]);
            assert_eq!(n, records, "{name}: the manifest");
            ours.push(took);
            let (took, _, n) = run(&bench.plugin, &config, &api, &["--streams", stream]);
            assert_eq!(n, records, "{name}: the Rust connector");
            theirs.push(took);
        }
        let (ours, theirs) = (median(&mut ours), median(&mut theirs));
        let rate = |took: Duration| records as f64 / took.as_secs_f64();
        say!(
            "    {name}: manifest {:.0} records/s, Rust {:.0} records/s; manifest/Rust {:.2}x",
            rate(ours),
            rate(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64()
        );
    }
    // Start-up: the whole `host discover` process with the compiled engine in the cache.
    let api = DemoApi::start_background(DemoApiConfig { records: 10, ..Default::default() }).unwrap();
    let config = bench.config("declarative.json", &api, 100);
    let discover = |plugin: &Path| {
        let started = Instant::now();
        let out = std::process::Command::new(&host)
            .arg("discover")
            .arg(plugin)
            .arg("--config")
            .arg(&config)
            .arg("--cache-dir")
            .arg(bench.cache.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        started.elapsed()
    };
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        ours.push(discover(&manifest));
        theirs.push(discover(&bench.plugin));
    }
    say!(
        "    start-up, warm cache (`host discover`, median of 10): manifest {:.1} ms, Rust {:.1} ms",
        ms(median(&mut ours)),
        ms(median(&mut theirs))
    );
}

fn against_the_cdk(bench: &Bench) {
    common::case("against-the-cdk", "A manifest in Sluice and in the Airbyte CDK");
    let Some(host) = release_host("[15] the manifest against the CDK") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let manifest = root.join("tests/fixtures/manifests/demo.yaml");
    let cdk = root.join("target/tools/airbyte-cdk/bin/source-declarative-manifest");
    if !cdk.exists() {
        say!("\n[15] skipped: {} is missing (run `just setup-cdk`)", cdk.display());
        return;
    }
    say!("\n[15] the demo manifest in Sluice vs the Airbyte CDK 7.39.1: records/s and peak RSS (median of 3)");
    let cases = [
        (
            "items, 100k records in pages of 1000",
            DemoApiConfig { records: 100_000, accounts: 1, ..Default::default() },
            1000,
            "items",
        ),
        (
            "account_items, 20 accounts x 1000 records in pages of 100",
            DemoApiConfig { records: 20_000, accounts: 20, ..Default::default() },
            100,
            "account_items",
        ),
    ];
    for (name, api_config, page_size, stream) in cases {
        let records = api_config.records;
        let api = DemoApi::start_background(api_config).unwrap();
        let config = bench.config("against-cdk.json", &api, page_size);
        let catalog = bench.work.path().join("against-cdk-catalog.json");
        let entry = serde_json::json!({"stream": {"name": stream, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
            "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"});
        std::fs::write(&catalog, serde_json::json!({"streams": [entry]}).to_string()).unwrap();
        let sluice = || {
            let mut command = std::process::Command::new(&host);
            command
                .arg("run")
                .arg(&manifest)
                .args(["--no-progress", "--streams", stream, "--config"])
                .arg(&config)
                .arg("--allow-host")
                .arg(format!("http://{}", api.addr()))
                .arg("--cache-dir")
                .arg(bench.cache.path());
            measured_child(&mut command)
        };
        let airbyte = || {
            measured_child(
                std::process::Command::new(&cdk)
                    .args(["read", "--config"])
                    .arg(&config)
                    .arg("--catalog")
                    .arg(&catalog)
                    .arg("--manifest-path")
                    .arg(&manifest)
                    .env("DO_NOT_TRACK", "1"),
            )
        };
        sluice();
        let (mut ours, mut theirs, mut our_rss, mut their_rss) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for _ in 0..3 {
            let (took, rss, n) = sluice();
            assert_eq!(n, records, "{name}: Sluice reads every record");
            ours.push(took);
            our_rss.push(rss);
            let (took, rss, n) = airbyte();
            assert_eq!(n, records, "{name}: the CDK reads every record");
            theirs.push(took);
            their_rss.push(rss);
        }
        let (ours, theirs) = (median(&mut ours), median(&mut theirs));
        let mid = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let (our_rss, their_rss) = (mid(&mut our_rss), mid(&mut their_rss));
        let rate = |took: Duration| records as f64 / took.as_secs_f64();
        say!(
            "    {name}: Sluice {:.0} records/s, {our_rss:.0} MiB; the CDK {:.0} records/s, {their_rss:.0} MiB; \
             throughput {:.1}x the CDK's, memory {:.2}x",
            rate(ours),
            rate(theirs),
            theirs.as_secs_f64() / ours.as_secs_f64(),
            our_rss / their_rss
        );
    }
}

/// A native reader of one report job on `poll` schedule (first poll at once, as the host's),
/// its download streamed and written in pages of 5000 lines.
async fn native_streamed_report(
    base_url: &str,
    expected: u64,
    poll: Duration,
    sink: Box<dyn std::io::Write + Send>,
) -> Duration {
    #[derive(serde::Deserialize)]
    struct Job {
        id: String,
        status: String,
        download_url: Option<String>,
    }
    const PAGE: usize = 5000;
    let client = client();
    let (out, writer) = Output::spawn(Format::Airbyte, sink);
    let started = Instant::now();
    let stream_json = serde_json::to_string("report_items").unwrap();
    let created = client.post(format!("{base_url}/reports")).body(r#"{"account_id": 1}"#).send().await.unwrap();
    let job: Job = serde_json::from_slice(&created.bytes().await.unwrap()).unwrap();
    let url = loop {
        let polled = client.get(format!("{base_url}/reports/{}", job.id)).send().await.unwrap();
        let polled: Job = serde_json::from_slice(&polled.bytes().await.unwrap()).unwrap();
        if polled.status == "completed" {
            break polled.download_url.unwrap();
        }
        tokio::time::sleep(poll).await;
    };
    let mut download = client.get(format!("{base_url}{url}")).send().await.unwrap();
    let (mut pending, mut lines, mut records) = (Vec::new(), Vec::new(), 0u64);
    let flush = async |lines: &mut Vec<Vec<u8>>| {
        let stamp = out.stamp();
        let mut rendered = out.page(lines.iter().map(|l| l.len() + 80).sum());
        for line in lines.iter() {
            let checked = checked_record(std::str::from_utf8(line).unwrap(), 16 << 20, 64).unwrap();
            out.push_record(&mut rendered, &stream_json, &checked, &stamp);
        }
        out.records("report_items", rendered, lines.len() as u64).await.unwrap();
        lines.len() as u64
    };
    while let Some(chunk) = download.chunk().await.unwrap() {
        pending.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(newline) = memchr::memchr(b'\n', &pending[start..]) {
            lines.push(pending[start..start + newline].to_vec());
            start += newline + 1;
            if lines.len() == PAGE {
                records += flush(&mut lines).await;
                lines.clear();
            }
        }
        pending.drain(..start);
    }
    records += flush(&mut lines).await;
    client.delete(format!("{base_url}/reports/{}", job.id)).send().await.unwrap();
    drop(out);
    writer.finish().unwrap();
    assert_eq!(records, expected);
    started.elapsed()
}

/// Five SIGKILLs, each run resumed from the output of the one before.
fn crash_and_resume(bench: &Bench) {
    common::case("crash-and-resume", "Crash and resume");
    use std::io::BufRead;
    let Some(host) = release_host("[11] crash and resume") else { return };
    const ACCOUNTS: u64 = 20;
    const RECORDS: u64 = 20_000;
    let api = DemoApi::start_background(DemoApiConfig {
        records: RECORDS,
        accounts: ACCOUNTS,
        latency_ms: 5,
        ..Default::default()
    })
    .unwrap();
    let config = bench.config("crash.json", &api, 100);
    let state = bench.work.path().join("crash-state.jsonl");
    let command = |with_state: bool| {
        let mut command = std::process::Command::new(&host);
        command.args(["run", "--streams", "account_items", "--concurrency", "8", "--no-progress", "--config"]);
        command.arg(&config).arg("--allow-host").arg(format!("http://{}", api.addr()));
        command.arg("--cache-dir").arg(bench.cache.path());
        if with_state {
            command.arg("--state").arg(&state);
        }
        command.arg(&bench.plugin);
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
        command
    };
    let mut seen = std::collections::HashSet::new();
    let mut twice = 0u64;
    let mut take = |line: &str, output: &mut Vec<String>| {
        if let Ok(message) = serde_json::from_str::<serde_json::Value>(line) {
            if let Some(id) = message["record"]["data"]["id"].as_u64() {
                twice += u64::from(!seen.insert(id));
            }
            output.push(line.to_string());
        }
    };
    let mut rng = fastrand::Rng::with_seed(11);
    for kill in 0..=5 {
        let mut child = command(kill > 0).spawn().unwrap();
        let reader = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut output = Vec::new();
        let stop_after = if kill < 5 { rng.usize(500..4000) } else { usize::MAX };
        for (n, line) in reader.lines().enumerate() {
            take(&line.unwrap(), &mut output);
            if n == stop_after {
                child.kill().unwrap();
                break;
            }
        }
        child.wait().unwrap();
        // What the next run resumes from: everything this one printed (its last STATE counts).
        let mut previous = std::fs::read_to_string(&state).unwrap_or_default();
        previous.extend(output.iter().map(|l| format!("{l}\n")));
        std::fs::write(&state, previous).unwrap();
    }
    let lost = RECORDS - seen.len() as u64;
    say!(
        "\n[11] 20 partitions x 1000 records (pages of 100, 8 in flight), 5 SIGKILLs, each run resumed: \
         {twice} records delivered twice ({:.1} pages per kill), {lost} lost",
        twice as f64 / 100.0 / 5.0
    );
}

/// STATE bytes written for N partitions: linear in N, with the fallback past 10,000.
fn state_bytes(bench: &Bench) {
    common::case("state-bytes", "STATE bytes of many partitions");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let Some(host) = release_host("[10] STATE bytes") else { return };
    say!("\n[10] STATE bytes of one incremental stream of N one-record partitions");
    for partitions in [1_000u64, 10_000, 100_000] {
        let path = bench.work.path().join("partitions.json");
        let config = serde_json::json!({"mode": "cursor-partitions", "partitions": partitions});
        std::fs::write(&path, config.to_string()).unwrap();
        let started = Instant::now();
        let output = std::process::Command::new(&host)
            .args(["run", "--no-progress", "--config"])
            .arg(&path)
            .arg("--cache-dir")
            .arg(bench.cache.path())
            .arg(root.join("target/plugins/hostile.wasm"))
            .stderr(std::process::Stdio::null())
            .output()
            .unwrap();
        let elapsed = started.elapsed();
        assert!(output.status.success());
        let stdout = String::from_utf8_lossy(&output.stdout);
        let states: Vec<&str> = stdout.lines().filter(|l| l.contains("\"type\":\"STATE\"")).collect();
        let total: usize = states.iter().map(|l| l.len()).sum();
        let last = states.last().map_or(0, |l| l.len());
        say!(
            "    {partitions:>7} partitions: {} STATE lines, {:.2} MB in all, the last {:.2} MB ({:.1}x it), {:.0} partitions/s",
            states.len(),
            total as f64 / 1e6,
            last as f64 / 1e6,
            total as f64 / last.max(1) as f64,
            partitions as f64 / elapsed.as_secs_f64()
        );
    }
}

/// Peak RSS of `host run` on the hostile plugin in `mode` (its only partition misbehaves),
/// stdout read only after `stall`, in MiB.
fn hostile_rss(bench: &Bench, host: &Path, mode: serde_json::Value, stall: Duration) -> f64 {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut config = serde_json::json!({"partitions": 1, "hostile_partition": 0});
    config.as_object_mut().unwrap().extend(mode.as_object().unwrap().clone());
    let path = bench.work.path().join("hostile.json");
    std::fs::write(&path, config.to_string()).unwrap();
    let mut child = std::process::Command::new(host)
        .args(["run", "--memory-mb", "64", "--cpu-ms-per-call", "20000", "--config"])
        .arg(&path)
        .arg("--cache-dir")
        .arg(bench.cache.path())
        .arg(root.join("target/plugins/hostile.wasm"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let peak = Peak::rss(child.id());
    let mut stdout = child.stdout.take().unwrap();
    std::thread::sleep(stall);
    std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
    let peak = peak.mib();
    child.wait().unwrap();
    peak
}

fn memory_attacks(bench: &Bench) {
    common::case("memory-attacks", "Host memory under memory attacks");
    use serde_json::json;
    let Some(host) = release_host("[9] memory attacks") else { return };
    let none = Duration::ZERO;
    // Compile once, so no case counts the compile.
    hostile_rss(bench, &host, json!({"mode": "env"}), none);
    let mut idle: Vec<f64> = (0..3).map(|_| hostile_rss(bench, &host, json!({"mode": "env"}), none)).collect();
    idle.sort_by(f64::total_cmp);
    let idle = idle[1];
    say!("\n[9] host peak RSS under memory attacks, guest limit 64 MiB (idle run: {idle:.1} MiB)");
    let cases = [
        ("memory bomb (grows until refused)", json!({"mode": "memory"}), none),
        ("150 log calls of 10 MiB in one call", json!({"mode": "log-bomb", "count": 150, "size": 10 << 20}), none),
        (
            "8 pages of 4 x 4 MiB records, stdout unread for 5 s",
            json!({"mode": "big-page", "count": 4, "size": 4 << 20, "pages": 8}),
            Duration::from_secs(5),
        ),
    ];
    for (name, mode, stall) in cases {
        let peak = hostile_rss(bench, &host, mode, stall);
        say!(
            "    {name}: {peak:.1} MiB, {:.1} MiB over idle ({:.2}x the guest limit)",
            peak - idle,
            (peak - idle) / 64.0
        );
    }
}

/// Notes when the first record line is written (Unix ms), passing everything on to nowhere.
struct FirstRecord(Arc<std::sync::atomic::AtomicU64>);

impl std::io::Write for FirstRecord {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.0.load(std::sync::atomic::Ordering::Relaxed) == 0 && buf.windows(8).any(|w| w == b"\"RECORD\"") {
            self.0.store(unix_ms(), std::sync::atomic::Ordering::Relaxed);
        }
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn unix_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64
}

/// One report job of 100k rows, polled every 100 ms, read in pages of 5000.
fn report_job(bench: &Bench) {
    common::case("report-job", "A report job on the host's orchestrator");
    const RECORDS: u64 = 100_000;
    const PAGE: u64 = 5000;
    let api =
        DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 1, job_polls: 3, ..Default::default() })
            .unwrap();
    let config = bench.work.path().join("report.json");
    let text = format!(
        r#"{{"base_url": "{}", "page_size": 100, "report_jobs": true, "max_jobs": 1, "report_page_size": {PAGE}}}"#,
        api.base_url()
    );
    std::fs::write(&config, text).unwrap();
    let args = ["--streams", "report_items", "--job-poll-ms", "100", "--job-poll-max-ms", "100"];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let plugin = root.join("target/plugins/demo-source.wasm");
    let host_once = || -> (Duration, u64) {
        let first = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let sink = Box::new(FirstRecord(first.clone()));
        let took =
            bench.runtime.block_on(common::host_run_into(&plugin, &config, &api, bench.cache.path(), &args, sink));
        let after_completion =
            first.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(api.stats().last_job_completed_ms);
        (took, after_completion)
    };
    host_once();
    bench.runtime.block_on(native_report(&api.base_url(), RECORDS, PAGE));
    let (mut host, mut native, mut host_first, mut native_first) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        let (took, first) = host_once();
        host.push(took);
        host_first.push(Duration::from_millis(first));
        let (took, first) = bench.runtime.block_on(native_report(&api.base_url(), RECORDS, PAGE));
        native.push(took);
        native_first.push(Duration::from_millis(first.saturating_sub(api.stats().last_job_completed_ms)));
    }
    report(
        "[8] report_items: one report job of 100k rows, polled every 100 ms, pages of 5000",
        RECORDS,
        &mut host,
        &mut native,
    );
    say!(
        "  job completed -> first record written: host {:.0} ms, native {:.0} ms (medians)",
        ms(median(&mut host_first)),
        ms(median(&mut native_first))
    );
    // The issue's schedule: done at the second poll, polled every 5 s by both (at 0 s and 5 s).
    let api =
        DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 1, job_polls: 2, ..Default::default() })
            .unwrap();
    let text = format!(
        r#"{{"base_url": "{}", "report_jobs": true, "max_jobs": 1, "report_page_size": {PAGE}}}"#,
        api.base_url()
    );
    std::fs::write(&config, text).unwrap();
    let args = ["--streams", "report_items", "--job-poll-ms", "5000", "--job-poll-max-ms", "5000"];
    let (mut host, mut native) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        host.push(bench.runtime.block_on(common::host_run(&plugin, &config, &api, bench.cache.path(), &args)));
        let sink = Box::new(std::io::sink());
        native.push(bench.runtime.block_on(native_streamed_report(
            &api.base_url(),
            RECORDS,
            Duration::from_secs(5),
            sink,
        )));
    }
    report("    the same job done at its 2nd poll, both polling every 5 s", RECORDS, &mut host, &mut native);
}

/// A hand-written reader of one report job: create, poll every 100 ms, read pages, delete.
/// Returns the time taken and when its first record was written (Unix ms).
async fn native_report(base_url: &str, expected: u64, page: u64) -> (Duration, u64) {
    #[derive(serde::Deserialize)]
    struct Job {
        id: String,
        status: String,
        download_url: Option<String>,
    }
    let client = client();
    let first = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let (out, writer) = Output::spawn(Format::Airbyte, Box::new(FirstRecord(first.clone())));
    let started = Instant::now();
    let stream_json = serde_json::to_string("report_items").unwrap();
    let created = client.post(format!("{base_url}/reports")).body(r#"{"account_id": 1}"#).send().await.unwrap();
    let job: Job = serde_json::from_slice(&created.bytes().await.unwrap()).unwrap();
    let url = loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let polled = client.get(format!("{base_url}/reports/{}", job.id)).send().await.unwrap();
        let polled: Job = serde_json::from_slice(&polled.bytes().await.unwrap()).unwrap();
        if polled.status == "completed" {
            break polled.download_url.unwrap();
        }
    };
    let mut records = 0;
    for offset in (0..).step_by(page as usize) {
        let body = client
            .get(format!("{base_url}{url}"))
            .query(&[("offset", offset.to_string()), ("limit", page.to_string())])
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        let lines: Vec<&str> = body.lines().filter(|l| !l.is_empty()).collect();
        let stamp = out.stamp();
        let mut rendered = out.page(body.len() + lines.len() * 80);
        for line in &lines {
            let checked = checked_record(line, 16 << 20, 64).unwrap();
            out.push_record(&mut rendered, &stream_json, &checked, &stamp);
        }
        out.records("report_items", rendered, lines.len() as u64).await.unwrap();
        records += lines.len() as u64;
        if (lines.len() as u64) < page {
            break;
        }
    }
    client.delete(format!("{base_url}/reports/{}", job.id)).send().await.unwrap();
    drop(out);
    writer.finish().unwrap();
    assert_eq!(records, expected);
    (started.elapsed(), first.load(std::sync::atomic::Ordering::Relaxed))
}

/// A 100k-record Singer run kept in a local lake vs not kept, and the replay of it.
fn replay_storage(bench: &Bench) {
    common::case("replay-storage", "Replay storage: a run kept, and replayed");
    const RECORDS: u64 = 100_000;
    let api = DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 5, ..Default::default() }).unwrap();
    let config = bench.config("replay.json", &api, 1000);
    let lake = bench.work.path().join("lake");
    let lake_uri = format!("file://{}", lake.display());
    let gz_uri = format!("file://{}", bench.work.path().join("lake-gz").display());
    let plain = ["--streams", "items", "--format", "singer"];
    let continual = [&plain[..], &["--replay-to", &lake_uri]].concat();
    let batched = [&plain[..], &["--replay-to", &gz_uri, "--replay-cadence", "batched", "--replay-gzip"]].concat();
    bench.runtime.block_on(host_read(bench, &config, &api, &continual));
    let (mut without, mut with_continual, mut with_batched) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        without.push(bench.runtime.block_on(host_read(bench, &config, &api, &plain)));
        with_continual.push(bench.runtime.block_on(host_read(bench, &config, &api, &continual)));
        with_batched.push(bench.runtime.block_on(host_read(bench, &config, &api, &batched)));
    }
    let (without, continual, batched) = (median(&mut without), median(&mut with_continual), median(&mut with_batched));
    let rate = |d: Duration| RECORDS as f64 / d.as_secs_f64();
    say!("\n[7] replay storage: items, 100k records, Singer format, pages of 1000");
    say!("  {:<34} {:>12.0} records/s  (median {:.1} ms)", "not kept", rate(without), ms(without));
    for (name, d) in [("--replay-to file:// (continual)", continual), ("… batched, gzip", batched)] {
        say!(
            "  {name:<34} {:>12.0} records/s  (median {:.1} ms)  ratio kept/not kept: {:.2}x",
            rate(d),
            ms(d),
            without.as_secs_f64() / d.as_secs_f64()
        );
    }
    // Replay: the last continual run (one uncompressed segment), to a sink.
    let runs: Vec<_> = std::fs::read_dir(&lake).unwrap().map(|e| e.unwrap().path()).collect();
    let mut replays = Vec::new();
    for run in runs.iter().take(ROUNDS) {
        let uri = format!("file://{}", run.display());
        let started = Instant::now();
        let report = sluice_host::replay(&uri, &Default::default(), &mut std::io::sink()).unwrap();
        replays.push(started.elapsed());
        assert_eq!(report.records, RECORDS);
    }
    let replay = median(&mut replays);
    say!("  host replay (Singer, verified):    {:>12.0} records/s  (median {:.1} ms)", rate(replay), ms(replay));
}

/// 45 tenants reading `items` (10,000 records each, a second or so of the machine for all), with
/// or without 5 hostile ones.
fn tenants(bench: &Bench) {
    common::case("noisy-neighbours", "Noisy neighbours: 45 tenants and 5 hostile ones in one process");
    use sluice_host::{Policy, RunRequest, Runtime};
    let api = DemoApi::start_background(DemoApiConfig { records: 10_000, accounts: 4, ..Default::default() }).unwrap();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let hostile = root.join("target/plugins/hostile.wasm");
    let runtime = Arc::new(Runtime::new(bench.cache.path().to_path_buf(), true).unwrap());
    // The hostile plugin's modes: CPU (an endless loop, in every partition), memory (a bomb),
    // logs (200,000 lines a call) and a request flood (denied requests sent in a loop).
    // `SLUICE_BENCH_HOSTILE=loop,memory` measures some of them only.
    let chosen = std::env::var("SLUICE_BENCH_HOSTILE").unwrap_or_default();
    let hostile_modes: Vec<&str> = match chosen.as_str() {
        "" => vec!["loop", "loop-all", "memory", "log-flood", "spin-send"],
        some => some.split(',').collect(),
    };
    // Each well-behaved tenant's time, from the round's start to its own end.
    let round = |hostiles: &[&str]| -> Vec<Duration> {
        bench.runtime.block_on(async {
            let mut runs = tokio::task::JoinSet::new();
            for mode in hostiles {
                let config = serde_json::json!({"mode": mode, "target": format!("http://{}/items", api.addr())});
                let mut request = RunRequest::new(&hostile, config, Box::new(std::io::sink()));
                request.policy.limits.cpu_ms_per_call = 2000;
                request.policy.limits.memory_bytes = 64 << 20;
                let runtime = runtime.clone();
                runs.spawn(async move {
                    let _ = runtime.run(request).await;
                    None
                });
            }
            let started = Instant::now();
            for _ in 0..45 {
                let config = serde_json::json!({"base_url": api.base_url(), "page_size": 500});
                let mut request = RunRequest::new(&bench.plugin, config, Box::new(std::io::sink()));
                request.policy = Policy { allow_hosts: vec![format!("http://{}", api.addr())], ..Default::default() };
                let request = request.streams(["items"]);
                let runtime = runtime.clone();
                runs.spawn(async move {
                    let report = runtime.run(request).await.read().expect("a tenant run");
                    assert!(report.ok());
                    Some(started.elapsed())
                });
            }
            let mut times = Vec::new();
            while let Some(done) = runs.join_next().await {
                times.extend(done.unwrap());
            }
            times.sort();
            times
        })
    };
    round(&[]);
    let (mut alone, mut present) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        alone.push(round(&hostile_modes[..0]));
        present.push(round(&hostile_modes));
    }
    // The tenants of each round in the order they ended: the k-th to end with hostile tenants
    // against the k-th to end without (medians over the rounds), for the first 45 of each.
    let kth = |rounds: &[Vec<Duration>], k: usize| median(&mut rounds.iter().map(|r| r[k]).collect::<Vec<_>>());
    let ratios: Vec<f64> = (0..45).map(|k| kth(&present, k).as_secs_f64() / kth(&alone, k).as_secs_f64()).collect();
    let worst = ratios.iter().cloned().fold(0.0, f64::max);
    let mut sorted_ratios = ratios.clone();
    sorted_ratios.sort_by(f64::total_cmp);
    say!("\n[5] 45 tenants x 10,000 records in one process (pooling: {}), and 5 hostile ones", runtime.pooling());
    say!("  hostile modes: {}", hostile_modes.join(", "));
    say!(
        "  the last of 45 well-behaved tenants ends after {:.1} ms without them, {:.1} ms with the hostile ones",
        ms(kth(&alone, 44)),
        ms(kth(&present, 44))
    );
    say!(
        "  each well-behaved tenant with the hostile ones against without: median {:.2}x, worst {:.2}x (aim: 1.1x)",
        sorted_ratios[sorted_ratios.len() / 2],
        worst
    );
}

/// Instances created and dropped per second, pooled and on demand.
fn pooling(bench: &Bench) {
    common::case("pooling", "Instances per second, with and without pooling");
    const N: usize = 2000;
    let rate = |pooled: bool| -> (f64, bool) {
        bench.runtime.block_on(async {
            let engine = Engine::with_pooling(bench.cache.path().to_path_buf(), pooled).unwrap();
            let plugin = Arc::new(engine.load(&bench.plugin).unwrap());
            let egress = Arc::new(Egress::new(EgressPolicy::default(), HttpOptions::default()).unwrap());
            let connector = Connector::new(plugin, "{}".into(), egress, Default::default());
            let started = Instant::now();
            for _ in 0..N {
                drop(connector.instance().await.unwrap_or_else(|e| panic!("{e}")));
            }
            (N as f64 / started.elapsed().as_secs_f64(), engine.pooling())
        })
    };
    let (on_demand, _) = rate(false);
    let (pooled, pooling_used) = rate(true);
    say!(
        "\n[6] instances per second: on demand {on_demand:.0}, pooled {pooled:.0} (pooling in use: {pooling_used}); ratio {:.2}x",
        pooled / on_demand
    );
}

fn report(case: &str, records: u64, host: &mut [Duration], native: &mut [Duration]) {
    let (host, native) = (median(host), median(native));
    let rate = |d: Duration| records as f64 / d.as_secs_f64();
    say!("\n{case}");
    say!("  {:<26} {:>12.0} records/s  (median {:.1} ms)", "host + demo connector", rate(host), ms(host));
    say!("  {:<26} {:>12.0} records/s  (median {:.1} ms)", "native reader", rate(native), ms(native));
    say!("  ratio host/native: {:.2}x", native.as_secs_f64() / host.as_secs_f64());
}

fn throughput(bench: &Bench) {
    common::case("throughput", "Throughput: one partition of 100k records");
    const RECORDS: u64 = 100_000;
    let api = DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 5, ..Default::default() }).unwrap();
    let config = bench.config("throughput.json", &api, 1000);
    let args = ["--streams", "items"];
    let (mut host, mut native) = (Vec::new(), Vec::new());
    // Warm up both (the first host run compiles the plugin into the cache).
    bench.runtime.block_on(host_read(bench, &config, &api, &args));
    bench.runtime.block_on(native_items(&api.base_url(), RECORDS, 1000));
    for _ in 0..ROUNDS {
        host.push(bench.runtime.block_on(host_read(bench, &config, &api, &args)));
        native.push(bench.runtime.block_on(native_items(&api.base_url(), RECORDS, 1000)));
    }
    report("[1] items: 100k records, pages of 1000, one partition", RECORDS, &mut host, &mut native);
}

fn latency_bound(bench: &Bench) {
    common::case("latency-bound", "Latency-bound: 20 partitions, 20 ms a request");
    const ACCOUNTS: u64 = 20;
    const PER_ACCOUNT: u64 = 1000;
    const IN_FLIGHT: usize = 8;
    let api = DemoApi::start_background(DemoApiConfig {
        records: ACCOUNTS * PER_ACCOUNT,
        accounts: ACCOUNTS,
        latency_ms: 20,
        ..Default::default()
    })
    .unwrap();
    let config = bench.config("latency.json", &api, 100);
    let args = ["--streams", "account_items", "--concurrency", "8"];
    let (mut host, mut native) = (Vec::new(), Vec::new());
    let base_url = api.base_url();
    for _ in 0..ROUNDS {
        host.push(bench.runtime.block_on(host_read(bench, &config, &api, &args)));
        let listed = native_account_items(&base_url, ACCOUNTS, Accounts::Listed, 100, IN_FLIGHT);
        native.push(bench.runtime.block_on(listed));
    }
    report(
        "[2] account_items: 20 partitions x 1000 records, pages of 100, 20 ms per request, 8 in flight",
        ACCOUNTS * PER_ACCOUNT,
        &mut host,
        &mut native,
    );
}

fn peak_rss(bench: &Bench) {
    common::case("peak-rss", "Peak RSS reading 1M records");
    const RECORDS: u64 = 1_000_000;
    let api = DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 5, ..Default::default() }).unwrap();
    let config = bench.config("rss.json", &api, 1000);
    let Some(host) = release_host("[3] peak RSS") else { return };
    let started = Instant::now();
    let mut child = std::process::Command::new(&host)
        .args(["run", "--streams", "items", "--config"])
        .arg(&config)
        .arg("--allow-host")
        .arg(format!("http://{}", api.addr()))
        .arg("--cache-dir")
        .arg(bench.cache.path())
        .arg(&bench.plugin)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let peak = Peak::rss(child.id()).mib();
    assert!(child.wait().unwrap().success());
    let elapsed = started.elapsed();
    say!(
        "\n[3] host process reading 1M records (items, pages of 1000, stdout to /dev/null): peak RSS {peak:.1} MiB, {:.0} records/s",
        RECORDS as f64 / elapsed.as_secs_f64()
    );
}

impl Bench {
    fn config(&self, name: &str, api: &DemoApi, page_size: u64) -> std::path::PathBuf {
        let path = self.work.path().join(name);
        std::fs::write(&path, format!(r#"{{"base_url": "{}", "page_size": {page_size}}}"#, api.base_url())).unwrap();
        path
    }
}

/// The whole `host run` path in this process, output to a sink.
async fn host_read(bench: &Bench, config: &Path, api: &DemoApi, extra: &[&str]) -> Duration {
    common::host_run(&bench.plugin, config, api, bench.cache.path(), extra).await
}

async fn instantiation(plugin: &Path, cache: &Path) -> Duration {
    let engine = Engine::new(cache.to_path_buf()).unwrap();
    let plugin = Arc::new(engine.load(plugin).unwrap());
    let egress = Arc::new(Egress::new(EgressPolicy::default(), HttpOptions::default()).unwrap());
    let connector = Connector::new(plugin, "{}".into(), egress, Default::default());
    let mut times = Vec::with_capacity(INSTANCES);
    for _ in 0..INSTANCES {
        let started = Instant::now();
        let instance = connector.instance().await.unwrap_or_else(|e| panic!("{e}"));
        times.push(started.elapsed());
        drop(instance);
    }
    median(&mut times)
}
