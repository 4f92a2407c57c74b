//! Case 16, custom components: `tests/fixtures/manifests/custom/bench` (a custom filter and a
//! custom transformation of a components.py) read by the `host` process, which calls custom
//! code in the components runtime a page at a time, and by the Airbyte CDK with unsafe code
//! enabled (when `just setup-cdk` installed it): 20,000 events in pages of 1,000, and 1,000
//! one-record partitions (where each partition starts its own runtime). The figures go to
//! `docs/bench/custom-components.md`.

use crate::Bench;
use crate::common::{measured_child, median, release_host, write_report};
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};
use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

const EVENTS: u64 = 20_000;
const PARTITIONS: u64 = 1_000;

pub fn custom_components(bench: &Bench) {
    let Some(host) = release_host("[16] custom components") else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let manifest = root.join("tests/fixtures/manifests/custom/bench/manifest.yaml");
    let cdk = root.join("target/tools/airbyte-cdk/bin/source-declarative-manifest");
    let api = DemoApi::start_background(DemoApiConfig::default()).unwrap();
    let events = (1..=EVENTS)
        .map(|i| serde_json::json!({"id": i, "created": 1_700_000_000 + i, "name": format!("event {i}"), "account_id": i}))
        .collect();
    api.set_events(events);
    let config = bench.work.path().join("custom-components.json");
    let accounts: Vec<u64> = (1..=PARTITIONS).collect();
    std::fs::write(&config, serde_json::json!({"base_url": api.base_url(), "accounts": accounts}).to_string()).unwrap();
    say!("\n[16] custom components (a filter and a transformation of components.py): seconds, against the CDK");
    let mut table = String::from(
        "| read | records | Sluice, s | CDK with unsafe code, s | against the CDK |\n| --- | --- | --- | --- | --- |\n",
    );
    for (stream, what) in [("pages", "20,000 events in pages of 1,000"), ("partitions", "1,000 one-record partitions")]
    {
        let catalog = bench.work.path().join(format!("custom-{stream}.json"));
        let entry = serde_json::json!({"stream": {"name": stream, "json_schema": {}, "supported_sync_modes": ["full_refresh"]},
                                       "sync_mode": "full_refresh", "destination_sync_mode": "overwrite"});
        std::fs::write(&catalog, serde_json::json!({"streams": [entry]}).to_string()).unwrap();
        let sluice = || {
            let mut command = std::process::Command::new(&host);
            command.arg("read").arg(&manifest).arg("--config").arg(&config).arg("--catalog").arg(&catalog);
            command.arg("--no-progress").arg("--allow-host").arg(format!("http://{}", api.addr()));
            command.arg("--cache-dir").arg(bench.cache.path());
            command
        };
        // A warm-up fills the compiled-code cache (the engine and the components runtime).
        let (_, _, expected) = measured_child(&mut sluice());
        let mut times: Vec<Duration> = (0..3)
            .map(|_| {
                let (time, _, records) = measured_child(&mut sluice());
                assert_eq!(records, expected);
                time
            })
            .collect();
        let ours = median(&mut times);
        let theirs = cdk.exists().then(|| {
            let mut command = std::process::Command::new(&cdk);
            command.args(["read", "--config"]).arg(&config).arg("--catalog").arg(&catalog);
            command.arg("--manifest-path").arg(&manifest).arg("--components-path");
            command.arg(manifest.with_file_name("components.py"));
            command.env("DO_NOT_TRACK", "1").env("AIRBYTE_ENABLE_UNSAFE_CODE", "true");
            let (time, _, records) = measured_child(&mut command);
            assert_eq!(records, expected, "the CDK reads what Sluice reads");
            time
        });
        let (cdk_s, ratio) = match theirs {
            Some(t) => (format!("{:.2}", t.as_secs_f64()), format!("{:.2}x", t.as_secs_f64() / ours.as_secs_f64())),
            None => ("not installed".to_string(), String::new()),
        };
        say!("    {what}: Sluice {:.2} s, CDK {cdk_s} s ({ratio})", ours.as_secs_f64());
        writeln!(table, "| {what} | {expected} | {:.2} | {cdk_s} | {ratio} |", ours.as_secs_f64()).unwrap();
    }
    write_report(
        "custom-components",
        "Custom components (`just bench`, case 16)",
        "`tests/fixtures/manifests/custom/bench`: each record through a custom filter (every third \
         dropped) and a custom transformation (a field upper-cased) of a components.py, over loopback \
         to the demo API's /v2/events. Sluice calls custom code in the components runtime a page at a \
         time, each partition in a runtime of its own; the CDK runs the same manifest and \
         components.py in its process with AIRBYTE_ENABLE_UNSAFE_CODE. Sluice: the median of 3 runs \
         after a warm-up; the CDK: one run. \"Against the CDK\" is a speed ratio: above 1 is faster.",
        &table,
    );
}
