//! `--metrics-file`: a read's numbers in the Prometheus text format, read back by the Prometheus
//! project's own parser (prometheus-client from PyPI, installed by `just setup-metrics-parser`).

use crate::support::*;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

/// Samples by name: each its labels and value.
type Samples = HashMap<String, Vec<(HashMap<String, String>, f64)>>;

/// The samples of a Prometheus text file as the Prometheus client's parser reads them.
fn parsed(file: &Path) -> Samples {
    let python = workspace_root().join("target/tools/prometheus/bin/python");
    let script = "import json, sys\n\
                  from prometheus_client.parser import text_string_to_metric_families\n\
                  out = {}\n\
                  for family in text_string_to_metric_families(open(sys.argv[1]).read()):\n\
                  \x20   for s in family.samples:\n\
                  \x20       out.setdefault(s.name, []).append([s.labels, s.value])\n\
                  print(json.dumps(out))\n";
    let output = std::process::Command::new(&python)
        .arg("-c")
        .arg(script)
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{} runs (just setup-metrics-parser): {e}", python.display()));
    assert!(output.status.success(), "the parser refused the file: {}", String::from_utf8_lossy(&output.stderr));
    serde_json::from_slice(&output.stdout).unwrap()
}

fn value(samples: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = samples
        .get(name)
        .into_iter()
        .flatten()
        .find(|(l, _)| labels.iter().all(|(k, v)| l.get(*k).map(String::as_str) == Some(*v)));
    found.unwrap_or_else(|| panic!("no sample {name} {labels:?} in {samples:?}")).1
}

#[test]
fn a_reads_metrics_file_parses_and_matches_what_it_read() {
    let api = demo_api(DemoApiConfig { records: 60, accounts: 4, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 9}));
    let metrics = files.path().join("run.prom");
    let run = host(&["run", "--streams", "items,account_items", "--shard", "0/2", "--metrics-file"])
        .arg(&metrics)
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let samples = parsed(&metrics);
    for stream in ["items", "account_items"] {
        let records = value(&samples, "sluice_records_total", &[("stream", stream)]);
        assert_eq!(records, run.ids(stream).len() as f64, "{stream}");
        let other = value(&samples, "sluice_partitions_total", &[("stream", stream), ("outcome", "other_shard")]);
        let read = value(&samples, "sluice_partitions_total", &[("stream", stream), ("outcome", "read")]);
        assert_eq!(value(&samples, "sluice_stream_complete", &[("stream", stream)]), 1.0);
        if stream == "account_items" {
            assert_eq!(read + other, 4.0, "every account partition, read here or by the other shard");
        }
    }
    let requests = value(&samples, "sluice_http_requests_total", &[]);
    assert!(requests >= 1.0, "{requests}");
    assert!(value(&samples, "sluice_instances_total", &[]) >= 1.0);
    assert!(value(&samples, "sluice_guest_cpu_seconds_total", &[]) > 0.0);
    // The summary LOG and the file agree on the records.
    let total: f64 =
        ["items", "account_items"].iter().map(|s| value(&samples, "sluice_records_total", &[("stream", s)])).sum();
    assert_eq!(total, run.of_type("RECORD").len() as f64);
}
