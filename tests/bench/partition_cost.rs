//! Case 14, the cost of a partition: N one-record partitions (one request each, 8 in flight),
//! each reader a whole process: the native reader (this benchmark run as one), and the `host`
//! process with the Rust, Python and JavaScript demo connectors (their partitions listed from
//! the API) and with `tests/fixtures/manifests/partitions.yaml` (the accounts a config list, as
//! a ListPartitionRouter's), and the Airbyte CDK on that manifest when `just setup-cdk`
//! installed it. The figures go to `docs/bench/partition-cost.md`, which the docs link to.

use crate::Bench;
use crate::common::{measured_child, median, ms, release_host, write_report};
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Rounds of each reader at 1,000 and 10,000 partitions (one at 100,000).
const ROUNDS: usize = 5;

/// The readers, and the largest N each is run at (an interpreter at 100,000 takes minutes).
const READERS: [(&str, Reader, u64); 6] = [
    ("native reader", Reader::Native, 100_000),
    ("Sluice, Rust connector", Reader::Sluice("demo-source.wasm"), 100_000),
    ("Sluice, the manifest", Reader::Manifest, 100_000),
    ("Sluice, Python connector (steps)", Reader::Sluice("demo-source-py.wasm"), 10_000),
    ("Sluice, JavaScript connector (steps)", Reader::Sluice("demo-source-js.wasm"), 10_000),
    ("Airbyte CDK 7.39.1, the manifest", Reader::Cdk, 10_000),
];

#[derive(Clone, Copy, PartialEq)]
enum Reader {
    Native,
    Sluice(&'static str),
    Manifest,
    Cdk,
}

/// One size's setting: the API, the config and catalog files.
struct Setting {
    api: DemoApi,
    config: PathBuf,
    catalog: PathBuf,
    partitions: u64,
}

pub fn partition_cost(bench: &Bench) {
    let Some(host) = release_host("[14] partition cost") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    say!("\n[14] N one-record partitions, 8 in flight: seconds (against native), ms per partition");
    let mut table = String::from(
        "| partitions | reader | seconds | against native | ms per partition | against the CDK |\n| --- | --- | --- | --- | --- | --- |\n",
    );
    for partitions in [1_000u64, 10_000, 100_000] {
        let setting = setting(bench, partitions);
        let rounds = if partitions >= 100_000 { 1 } else { ROUNDS };
        let mut readers: Vec<(&str, Reader, std::process::Command)> = Vec::new();
        for (name, reader, largest) in READERS {
            if partitions > largest {
                continue;
            }
            let Some(command) = command(reader, &host, &root, bench, &setting) else {
                say!("    {name}: skipped (not installed: `just setup-cdk`)");
                continue;
            };
            // A warm-up fills the compiled-code cache.
            if matches!(reader, Reader::Sluice(_) | Reader::Manifest) {
                measured_child(&mut command_again(&command));
            }
            readers.push((name, reader, command));
        }
        // The readers take turns, round after round, so a noisy stretch of the machine falls on
        // each of them alike (run one after the other, the native reader's median moved by a
        // fifth between two runs of this case); the CDK, tens of seconds at 10,000, runs once.
        let mut times: Vec<Vec<Duration>> = vec![Vec::new(); readers.len()];
        for round in 0..rounds {
            for ((name, reader, command), times) in readers.iter().zip(&mut times) {
                if *reader == Reader::Cdk && round > 0 {
                    continue;
                }
                let (time, _, records) = measured_child(&mut command_again(command));
                assert_eq!(records, partitions, "{name} reads every partition's record");
                times.push(time);
            }
        }
        let took: Vec<(&str, Duration)> =
            readers.iter().zip(&mut times).map(|((name, _, _), times)| (*name, median(times))).collect();
        let native = took.iter().find(|(n, _)| *n == READERS[0].0).map(|(_, t)| *t).expect("the native reader ran");
        let cdk = took.iter().find(|(n, _)| n.starts_with("Airbyte")).map(|(_, t)| *t);
        for (name, time) in &took {
            let against_cdk = cdk.map_or("".to_string(), |c| format!("{:.1}x", c.as_secs_f64() / time.as_secs_f64()));
            let (seconds, per) = (time.as_secs_f64(), ms(*time) / partitions as f64);
            let ratio = native.as_secs_f64() / seconds;
            say!(
                "    {partitions:>6} partitions, {name}: {seconds:.2} s ({ratio:.3}x native), {per:.3} ms per partition"
            );
            let row = format!("| {partitions} | {name} | {seconds:.2} | {ratio:.3}x | {per:.3} | {against_cdk} |");
            writeln!(table, "{row}").unwrap();
        }
    }
    write_report(
        "partition-cost",
        "The cost of a partition (`just bench`, case 14)",
        "N partitions of one record each, one request each, 8 in flight, over loopback to the demo API \
         (0 ms latency); each reader a whole process, the median of 5 runs taken in turns with the other \
         readers' (1 at 100,000, and 1 for the CDK). The Rust, Python and JavaScript connectors list the accounts from the API; the manifest \
         (`tests/fixtures/manifests/partitions.yaml`) takes them from a config list, as a \
         ListPartitionRouter does, in Sluice and in the CDK. \"Against native\" and \"against the CDK\" \
         are speed ratios: above 1 is faster.",
        &table,
    );
}

fn setting(bench: &Bench, partitions: u64) -> Setting {
    let api =
        DemoApi::start_background(DemoApiConfig { records: partitions, accounts: partitions, ..Default::default() })
            .unwrap();
    let accounts: Vec<u64> = (1..=partitions).collect();
    let config = bench.work.path().join("partitions.json");
    let text = serde_json::json!({"base_url": api.base_url(), "page_size": 1000, "accounts": accounts});
    std::fs::write(&config, text.to_string()).unwrap();
    let catalog = bench.work.path().join("partitions-catalog.json");
    let stream =
        serde_json::json!({"name": "account_items", "json_schema": {}, "supported_sync_modes": ["full_refresh"]});
    let entry =
        serde_json::json!({"stream": stream, "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"});
    std::fs::write(&catalog, serde_json::json!({"streams": [entry]}).to_string()).unwrap();
    Setting { api, config, catalog, partitions }
}

/// The process that reads the partitions with `reader`; `None` when it is not installed.
fn command(reader: Reader, host: &Path, root: &Path, bench: &Bench, s: &Setting) -> Option<std::process::Command> {
    let sluice = |plugin: PathBuf| {
        let mut command = std::process::Command::new(host);
        command.arg("run").arg(plugin);
        command.args(["--no-progress", "--streams", "account_items", "--concurrency", "8", "--config"]);
        command.arg(&s.config).arg("--allow-host").arg(format!("http://{}", s.api.addr()));
        command.arg("--cache-dir").arg(bench.cache.path());
        command
    };
    match reader {
        Reader::Native => {
            let mut command = std::process::Command::new(std::env::current_exe().unwrap());
            command.args(["__native", "partitions", &s.api.base_url(), &s.partitions.to_string()]);
            Some(command)
        }
        Reader::Sluice(plugin) => Some(sluice(root.join("target/plugins").join(plugin))),
        Reader::Manifest => Some(sluice(root.join("tests/fixtures/manifests/partitions.yaml"))),
        Reader::Cdk => {
            let cdk = root.join("target/tools/airbyte-cdk/bin/source-declarative-manifest");
            let mut command = std::process::Command::new(cdk.exists().then_some(cdk)?);
            command.args(["read", "--config"]).arg(&s.config).arg("--catalog").arg(&s.catalog);
            command.arg("--manifest-path").arg(root.join("tests/fixtures/manifests/partitions.yaml"));
            command.env("DO_NOT_TRACK", "1");
            Some(command)
        }
    }
}

/// A copy of `command` to run again (a `Command` runs once per spawn, but is not `Clone`).
fn command_again(command: &std::process::Command) -> std::process::Command {
    let mut again = std::process::Command::new(command.get_program());
    again.args(command.get_args());
    for (key, value) in command.get_envs() {
        if let Some(value) = value {
            again.env(key, value);
        }
    }
    again
}
