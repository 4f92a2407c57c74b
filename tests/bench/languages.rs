//! `just bench` (second part): the demo connector in Rust, Python and JavaScript, in the same
//! run on the same demo API over loopback.
//!
//! 1. Throughput: `items`, 100k records in pages of 1000 (one partition), the whole `host run`
//!    path in this process with output to a sink; median of several rounds after a warm-up that
//!    fills the compiled-component cache.
//! 3. Throughput on records the size and shape of a real API's (~280 bytes: an email, a nested
//!    address, a tags array; `DemoApiConfig::rich_records`): `items`, 100k in pages of 1000, each
//!    language's ratio to Rust in the same run.
//! 2. Start-up with a warm cache: loading the plugin (engine, cached compiled code, linking),
//!    then the first instance and call (`spec`), in this process; and the wall time of a whole
//!    `host spec` process when the release host is built.
//! 5. The first run of a packaged connector with an empty cache (a fresh machine or container),
//!    with the compiled code the package carries and without it
//!    (docs/bench/first-run-of-a-package.md).
//! 4. Under latency: the time, peak RSS and PSS of a whole `host run` process reading 16
//!    partitions at once (`account_items` over 16 accounts, then over 64, 20 ms a request), each
//!    language against Rust and against the native reader, this benchmark run again as a process
//!    that lists the accounts first as the connectors do; the readers take turns for 5 rounds,
//!    median time, highest peak memory (docs/bench/languages-under-latency.md).

#[path = "common.rs"]
#[macro_use]
mod common;
#[path = "native.rs"]
mod native;

use common::{median, ms};
use sluice_host::HttpOptions;
use sluice_host::internals::{Connector, Egress, EgressPolicy, Engine};
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PLUGINS: [(&str, &str); 3] =
    [("Rust", "demo-source"), ("Python", "demo-source-py"), ("JavaScript", "demo-source-js")];
const RECORDS: u64 = 100_000;
const ROUNDS: usize = 3;
const STARTS: usize = 7;
/// Rounds of case 4, each reader once a round.
const LATENCY_ROUNDS: usize = 9;
/// Rounds of case 4 that sample PSS, untimed (see `memory`).
const PSS_ROUNDS: usize = 2;

fn main() {
    // This benchmark, run again as the native reader of case 4: `__native BASE_URL ACCOUNTS
    // PER_ACCOUNT PAGE_SIZE IN_FLIGHT`, its records on stdout.
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__native") {
        let n = |i: usize| args[i].parse::<u64>().unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
        let stdout = Box::new(std::io::BufWriter::with_capacity(1 << 16, std::io::stdout()));
        let listed = native::Accounts::Listed;
        runtime.block_on(native::native_account_items_into(&args[2], n(3), listed, n(4), n(5), n(6) as usize, stdout));
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let cache = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let api = DemoApi::start_background(DemoApiConfig { records: RECORDS, accounts: 5, ..Default::default() }).unwrap();
    let config = work.path().join("config.json");
    std::fs::write(&config, format!(r#"{{"base_url": "{}", "page_size": 1000}}"#, api.base_url())).unwrap();

    common::case("languages-throughput", "Rust, Python and JavaScript: throughput");
    say!("\n[1] items: 100k records, pages of 1000, one partition (median of {ROUNDS} rounds after a warm-up)");
    for (language, name) in PLUGINS {
        let plugin = plugin_path(&root, name);
        let first = runtime.block_on(common::host_run(&plugin, &config, &api, cache.path(), &["--streams", "items"]));
        let mut times: Vec<Duration> = (0..ROUNDS)
            .map(|_| runtime.block_on(common::host_run(&plugin, &config, &api, cache.path(), &["--streams", "items"])))
            .collect();
        let median = median(&mut times);
        say!(
            "  {language:<11} {:>9.0} records/s  (median {:.0} ms; first run, compiling into the cache: {:.1} s)",
            RECORDS as f64 / median.as_secs_f64(),
            ms(median),
            first.as_secs_f64()
        );
    }

    common::write_case_report("languages", "1");

    common::case("languages-rich-records", "Rust, Python and JavaScript on ~280-byte records");
    say!("\n[3] items: 100k records of ~280 bytes (nested address, tags), pages of 1000 (median of {ROUNDS})");
    let rich = DemoApi::start_background(DemoApiConfig {
        records: RECORDS,
        accounts: 5,
        rich_records: true,
        ..Default::default()
    })
    .unwrap();
    let rich_config = work.path().join("rich.json");
    std::fs::write(&rich_config, format!(r#"{{"base_url": "{}", "page_size": 1000}}"#, rich.base_url())).unwrap();
    let mut rust = None;
    for (language, name) in PLUGINS {
        let plugin = plugin_path(&root, name);
        let run =
            || runtime.block_on(common::host_run(&plugin, &rich_config, &rich, cache.path(), &["--streams", "items"]));
        let mut times: Vec<Duration> = (0..ROUNDS).map(|_| run()).collect();
        let rate = RECORDS as f64 / median(&mut times).as_secs_f64();
        let of_rust = *rust.get_or_insert(rate);
        say!("  {language:<11} {rate:>9.0} records/s  ({:.2}x Rust)", rate / of_rust);
    }

    common::write_case_report("languages", "3");

    common::case("languages-start-up", "Start-up with a warm cache");
    say!("\n[2] start-up with a warm cache (median of {STARTS})");
    let host = root.join("target/release/host");
    for (language, name) in PLUGINS {
        let plugin = plugin_path(&root, name);
        let (mut loads, mut firsts): (Vec<Duration>, Vec<Duration>) =
            (0..STARTS).map(|_| runtime.block_on(start(&plugin, cache.path()))).unzip();
        let process = host.exists().then(|| {
            let mut times: Vec<Duration> = (0..STARTS).map(|_| spec_process(&host, &plugin, cache.path())).collect();
            format!("; a whole `host spec` process {:.1} ms", ms(median(&mut times)))
        });
        say!(
            "  {language:<11} load {:>6.1} ms, first instance + spec {:>6.1} ms{}",
            ms(median(&mut loads)),
            ms(median(&mut firsts)),
            process.unwrap_or_else(|| " (build the release host for the process time)".into())
        );
    }

    common::write_case_report("languages", "2");

    first_run_of_a_package(&root, cache.path());
    memory(&root, cache.path(), work.path());
}

/// [5] The first run of a packaged connector on a fresh machine: `source-NAME spec` with an
/// empty cache, the package's compiled code taken instead of compiling the component, against
/// the same with the compiled code left out (as packages were before).
fn first_run_of_a_package(root: &Path, cache: &Path) {
    say!("\n[5] first run of a package with an empty cache (`source-NAME spec`, median of 3)");
    let Some(host) = common::release_host("[5] first run of a package") else { return };
    let mut table =
        String::from("| connector | with the packaged compiled code, ms | compiling, ms |\n| --- | --- | --- |\n");
    for (language, name) in PLUGINS {
        // Beside the host binary, so the package links it.
        let scratch = tempfile::tempdir_in(root.join("target")).unwrap();
        let out = scratch.path().join("pkg");
        let status = std::process::Command::new(&host)
            .args(["package", "--name", "demo", "--out"])
            .arg(&out)
            .arg(plugin_path(root, name))
            .arg("--cache-dir")
            .arg(cache)
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(status.success(), "{language}: host package");
        let first_run = || {
            let fresh = tempfile::tempdir().unwrap();
            let started = Instant::now();
            let status = std::process::Command::new(out.join("source-demo"))
                .arg("spec")
                .env("SLUICE_CACHE_DIR", fresh.path())
                .stdout(std::process::Stdio::null())
                .status()
                .unwrap();
            assert!(status.success(), "{language}: source-demo spec");
            started.elapsed()
        };
        let mut packaged: Vec<Duration> = (0..3).map(|_| first_run()).collect();
        // Without the compiled code: what a first run cost before packages carried it.
        let manifest = out.join("demo.package.json");
        let mut pinned: serde_json::Value = serde_json::from_slice(&std::fs::read(&manifest).unwrap()).unwrap();
        pinned.as_object_mut().unwrap().remove("compiled");
        std::fs::write(&manifest, pinned.to_string()).unwrap();
        let mut compiling: Vec<Duration> = (0..1).map(|_| first_run()).collect();
        let (packaged, compiling) = (ms(median(&mut packaged)), ms(median(&mut compiling)));
        say!("  {language:<11} {packaged:>7.0} ms with the packaged compiled code, {compiling:>7.0} ms compiling");
        writeln!(table, "| {language} | {packaged:.0} | {compiling:.0} |").unwrap();
    }
    common::write_report(
        "first-run-of-a-package",
        "The first run of a packaged connector (`just bench`, languages case 5)",
        "`source-NAME spec` of the demo connector packaged with `host package`, with an empty cache \
         (a fresh machine or container): the package's compiled code taken (the median of 3), and, \
         with it left out of the package manifest, the component compiled (one run).",
        &table,
    );
}

/// Peak RSS of whole `host run` processes reading 16 partitions at once, each language against
/// Rust in the same run: 16 partitions in all, then 64 (the memory of finished instances must
/// not stay with the host).
fn memory(root: &Path, cache: &Path, work: &Path) {
    const IN_FLIGHT: u64 = 16;
    say!(
        "\n[4] memory: account_items, {IN_FLIGHT} partitions in flight (2000 records of ~280 bytes each, pages of 250, 20 ms a request), peak RSS of the `host run` process; median of {LATENCY_ROUNDS} rounds, the readers taking turns"
    );
    let Some(host) = common::release_host("[4] memory") else { return };
    let mut table = String::from(
        "| partitions | reader | seconds | against native | peak RSS, MiB | peak PSS, MiB |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for partitions in [IN_FLIGHT, 4 * IN_FLIGHT] {
        say!("  {partitions} partitions:");
        let api = DemoApi::start_background(DemoApiConfig {
            records: partitions * 2000,
            accounts: partitions,
            rich_records: true,
            latency_ms: 20,
            ..Default::default()
        })
        .unwrap();
        let config = work.join("memory.json");
        std::fs::write(&config, format!(r#"{{"base_url": "{}", "page_size": 250}}"#, api.base_url())).unwrap();
        // The native reader (this benchmark run again), then each language's `host run`.
        let mut readers = vec![("native", {
            let mut command = std::process::Command::new(std::env::current_exe().unwrap());
            let counts = [partitions, 2000, 250, IN_FLIGHT].map(|n| n.to_string());
            command.arg("__native").arg(api.base_url()).args(counts);
            command
        })];
        for (language, name) in PLUGINS {
            let mut command = std::process::Command::new(&host);
            command.arg("run").arg(plugin_path(root, name)).arg("--config").arg(&config).arg("--cache-dir").arg(cache);
            let grant = format!("http://{}", api.addr());
            let concurrency = IN_FLIGHT.to_string();
            let streams = ["--streams", "account_items", "--concurrency", &concurrency];
            command.args(["--allow-host", &grant, "--no-progress"]).args(streams);
            readers.push((language, command));
        }
        // Rounds in turn, so a noisy stretch of the machine falls on every reader alike. The
        // timed rounds sample only the peak RSS (a counter the kernel keeps); PSS is sampled in
        // rounds of its own, whose times are not counted: reading it walks the process's page
        // tables under its memory map lock every 5 ms, which slowed a Python run by 4% and a
        // JavaScript one by 2% (the native reader, not sampled, paid nothing).
        let mut runs: Vec<Vec<(Duration, f64, Option<f64>)>> = vec![Vec::new(); readers.len()];
        for round in 0..LATENCY_ROUNDS + PSS_ROUNDS {
            let timed = round < LATENCY_ROUNDS;
            for ((reader, command), runs) in readers.iter_mut().zip(&mut runs) {
                // The native reader has no PSS to sample.
                if !timed && *reader == "native" {
                    continue;
                }
                let (took, rss, pss, records) = common::measured_process(command, !timed);
                assert_eq!(records, partitions * 2000, "{reader} read every record");
                runs.push((took, rss, pss));
            }
        }
        let mut native = None;
        let mut rust = None;
        for ((reader, _), runs) in readers.iter().zip(runs) {
            let took = median(&mut runs.iter().filter(|r| r.2.is_none()).map(|r| r.0).collect::<Vec<_>>());
            // The highest peak of the rounds: memory is bounded by its worst run.
            let rss = runs.iter().map(|r| r.1).fold(0.0, f64::max);
            let pss = runs.iter().filter_map(|r| r.2).reduce(f64::max);
            let native = *native.get_or_insert(took);
            let against_native = native.as_secs_f64() / took.as_secs_f64();
            let Some(pss) = pss else {
                say!("    {:<11} peak RSS {rss:>6.1} MiB, {:.2} s", reader, took.as_secs_f64());
                let row = format!("| {partitions} | native reader | {:.2} | 1.00x | {rss:.1} | |", took.as_secs_f64());
                writeln!(table, "{row}").unwrap();
                continue;
            };
            let of_rust = *rust.get_or_insert(rss);
            say!(
                "    {reader:<11} peak RSS {rss:>6.1} MiB ({:.1}x Rust), peak PSS {pss:>6.1} MiB, {:.2} s ({against_native:.2}x native)",
                rss / of_rust,
                took.as_secs_f64()
            );
            let row = format!(
                "| {partitions} | {reader} | {:.2} | {against_native:.2}x | {rss:.1} | {pss:.1} |",
                took.as_secs_f64()
            );
            writeln!(table, "{row}").unwrap();
        }
    }
    let about = format!(
        "`account_items` of the demo connector in each language, {IN_FLIGHT} partitions in flight, 2000 records \
         of about 280 bytes a partition in pages of 250, every request answered after 20 ms; each \
         reader a whole process (the host, `host run`, or the native reader). Every reader \
         first lists the accounts from the API (one request), then reads their pages: the same requests. \
         The readers take turns for {LATENCY_ROUNDS} timed rounds, then {PSS_ROUNDS} more where the hosts' PSS is \
         sampled (walking a process's page tables every 5 ms slows it, so those rounds are not timed): the \
         seconds are the median timed run, the memory the highest peak of all the rounds. Python and JavaScript read their pages in steps. \"Against native\" is a \
         speed ratio: above 1 is faster."
    );
    common::write_report(
        "languages-under-latency",
        "Rust, Python and JavaScript connectors under latency (`just bench`, languages case 4)",
        &about,
        &table,
    );
}

fn plugin_path(root: &Path, name: &str) -> PathBuf {
    let plugin = root.join("target/plugins").join(format!("{name}.wasm"));
    assert!(plugin.exists(), "{} is missing: run `just build-plugins` (`just bench` does)", plugin.display());
    plugin
}

/// Loading from the warm cache, then the first instance and call.
async fn start(plugin: &Path, cache: &Path) -> (Duration, Duration) {
    let started = Instant::now();
    let engine = Engine::new(cache.to_path_buf()).unwrap();
    let loaded = engine.load(plugin).unwrap();
    assert!(loaded.load.cache_hit, "the cache is warm");
    let load = started.elapsed();
    let egress = Arc::new(Egress::new(EgressPolicy::default(), HttpOptions::default()).unwrap());
    let connector = Connector::new(Arc::new(loaded), "{}".into(), egress, Default::default());
    let started = Instant::now();
    let mut instance = connector.instance().await.unwrap_or_else(|e| panic!("{e}"));
    instance.spec().await.unwrap_or_else(|e| panic!("{e}"));
    (load, started.elapsed())
}

fn spec_process(host: &Path, plugin: &Path, cache: &Path) -> Duration {
    let started = Instant::now();
    let status = std::process::Command::new(host)
        .arg("spec")
        .arg(plugin)
        .arg("--cache-dir")
        .arg(cache)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    started.elapsed()
}
