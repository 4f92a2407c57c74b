//! A read's numbers and spans where operators read them: `--metrics-file` and a runtime's
//! tenants in the Prometheus text format, read back by the Prometheus project's own parser
//! (prometheus-client from PyPI, installed by `just setup-metrics-parser`), and `--otlp-endpoint`
//! to an OTLP/HTTP receiver on loopback.

use crate::support::*;
use serde_json::json;
use sluice_host::{Policy, ReadReport, RunRequest, Runtime, TenantQuota};
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
    // Every attempt was answered 2xx by the demo API.
    assert_eq!(value(&samples, "sluice_http_responses_total", &[("status", "2xx")]), requests);
    for class in ["none", "1xx", "3xx", "4xx", "5xx"] {
        assert_eq!(value(&samples, "sluice_http_responses_total", &[("status", class)]), 0.0, "{class}");
    }
    assert_eq!(value(&samples, "sluice_job_polls_total", &[]), 0.0, "no report stream was read");
    let in_flight = value(&samples, "sluice_partitions_in_flight_peak", &[]);
    assert!((1.0..=8.0).contains(&in_flight), "at most the run's 8 partitions at once: {in_flight}");
    // The STATE lines on stdout, each with its line end, are the bytes counted.
    let stdout = String::from_utf8_lossy(&run.output.stdout).into_owned();
    let state_bytes: usize = stdout.lines().filter(|l| l.contains(r#""type":"STATE""#)).map(|l| l.len() + 1).sum();
    assert!(state_bytes > 0);
    assert_eq!(value(&samples, "sluice_state_bytes_total", &[]), state_bytes as f64);
    assert!(value(&samples, "sluice_instances_total", &[]) >= 1.0);
    assert!(value(&samples, "sluice_guest_cpu_seconds_total", &[]) > 0.0);
    // The summary LOG and the file agree on the records.
    let total: f64 =
        ["items", "account_items"].iter().map(|s| value(&samples, "sluice_records_total", &[("stream", s)])).sum();
    assert_eq!(total, run.of_type("RECORD").len() as f64);
}

/// An embedder's metrics: every tenant's usage from `Runtime::prometheus_text`, read back by the
/// Prometheus client's parser, matching the runs' own reports (records, requests, partitions),
/// the runs by outcome (a refused one included), and the histogram of how long runs took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtimes_tenant_metrics_parse_and_match_the_runs() {
    let api = demo_api(DemoApiConfig { records: 60, accounts: 3, ..Default::default() });
    let cache = tempfile::tempdir().unwrap();
    let runtime = Runtime::new(cache.path().to_path_buf(), true).unwrap();
    // A quota no run fits: refused before it starts.
    runtime.set_tenant("refused", TenantQuota { max_memory_bytes: Some(1), ..Default::default() });
    let request = || {
        let mut request = RunRequest::new(plugin("demo-source"), demo_config(&api, 25), Box::new(std::io::sink()));
        request.policy = Policy { allow_hosts: vec![grant(&api)], ..Default::default() };
        request.streams(["items", "account_items"])
    };
    let mut reports = Vec::new();
    for tenant in ["a", "a", "b"] {
        let read = runtime.run_for(tenant, request()).await.read().unwrap();
        assert!(read.ok(), "{}", read.summary_line());
        reports.push((tenant, read));
    }
    assert!(runtime.run_for("refused", request()).await.read().is_err());

    let files = Files::new();
    let text = files.path().join("tenants.prom");
    std::fs::write(&text, runtime.prometheus_text()).unwrap();
    let samples = parsed(&text);
    for tenant in ["a", "b"] {
        let reads: Vec<&ReadReport> = reports.iter().filter(|(t, _)| *t == tenant).map(|(_, r)| r).collect();
        let sum = |f: fn(&ReadReport) -> u64| reads.iter().map(|r| f(r)).sum::<u64>() as f64;
        let of = |name: &str| value(&samples, name, &[("tenant", tenant)]);
        assert_eq!(of("sluice_tenant_records_total"), sum(|r| r.usage.records), "{tenant}");
        assert_eq!(of("sluice_tenant_http_requests_total"), sum(|r| r.usage.requests), "{tenant}");
        assert_eq!(of("sluice_tenant_http_bytes_in_total"), sum(|r| r.usage.bytes_in), "{tenant}");
        assert_eq!(of("sluice_tenant_instances_total"), sum(|r| r.usage.instances), "{tenant}");
        let partitions = sum(|r| r.streams.iter().map(|s| s.partitions).sum());
        assert_eq!(of("sluice_tenant_partitions_total"), partitions, "{tenant}: every partition was read");
        let runs = reads.len() as f64;
        assert_eq!(value(&samples, "sluice_tenant_runs_total", &[("tenant", tenant), ("outcome", "started")]), runs);
        assert_eq!(value(&samples, "sluice_tenant_runs_total", &[("tenant", tenant), ("outcome", "failed")]), 0.0);
        assert_eq!(of("sluice_tenant_run_seconds_count"), runs, "{tenant}");
        let inf = value(&samples, "sluice_tenant_run_seconds_bucket", &[("tenant", tenant), ("le", "+Inf")]);
        assert_eq!(inf, runs, "{tenant}: the +Inf bucket counts every run");
        let elapsed: f64 = reads.iter().map(|r| r.elapsed.as_secs_f64()).sum();
        assert!(of("sluice_tenant_run_seconds_sum") >= elapsed, "{tenant}: a run's time covers its read's");
        assert_eq!(of("sluice_tenant_runs_active"), 0.0);
    }
    let refused = |outcome| value(&samples, "sluice_tenant_runs_total", &[("tenant", "refused"), ("outcome", outcome)]);
    assert_eq!((refused("refused"), refused("started")), (1.0, 0.0));
}

/// `--otlp-endpoint`: a read's spans and metrics reach an OTLP/HTTP receiver on loopback,
/// decoded with the OpenTelemetry project's protocol types: one `run` span (its command and
/// outcome), a `stream` span per stream under it, a `partition` span per partition under its
/// stream (their records adding up to what was written), a `request` span per HTTP request
/// under the partition or stream that sent it (its status; the URL without its query), and
/// the run's log lines as events, and the run's counters, the records equal to the output's.
#[test]
fn a_reads_spans_and_metrics_reach_an_otlp_collector() {
    use sluice_tests::otlp::proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as Number};
    use sluice_tests::otlp::{OtlpReceiver, text_attribute};
    let api = demo_api(DemoApiConfig { records: 60, accounts: 4, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 9}));
    let receiver = OtlpReceiver::start().unwrap();
    let run = host(&["run", "--streams", "items,account_items", "--otlp-endpoint"])
        .arg(receiver.endpoint())
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    let written = (run.ids("items").len() + run.ids("account_items").len()) as i64;

    let spans = receiver.spans();
    assert!(receiver.span_services().iter().all(|s| s == "sluice"), "{:?}", receiver.span_services());
    let named = |name: &str| spans.iter().filter(|s| s.name == name).collect::<Vec<_>>();
    let attribute = |span: &sluice_tests::otlp::proto::tonic::trace::v1::Span, key: &str| {
        text_attribute(&span.attributes, key).unwrap_or_default()
    };
    let runs = named("run");
    assert_eq!(runs.len(), 1, "one run span: {:?}", spans.iter().map(|s| &s.name).collect::<Vec<_>>());
    let root = runs[0];
    assert_eq!((attribute(root, "command").as_str(), attribute(root, "outcome").as_str()), ("read", "succeeded"));
    assert_eq!(attribute(root, "records"), written.to_string());
    let streams = named("stream");
    let mut stream_names: Vec<String> = streams.iter().map(|s| attribute(s, "stream")).collect();
    stream_names.sort();
    assert_eq!(stream_names, ["account_items", "items"]);
    assert!(streams.iter().all(|s| s.parent_span_id == root.span_id && s.trace_id == root.trace_id));
    let partitions = named("partition");
    assert_eq!(partitions.len(), 1 + 4, "items reads one partition, account_items one per account");
    for partition in &partitions {
        let stream =
            streams.iter().find(|s| s.span_id == partition.parent_span_id).expect("a partition's parent is a stream");
        assert_eq!(attribute(stream, "stream"), attribute(partition, "stream"));
    }
    let records: i64 = partitions.iter().map(|p| attribute(p, "records").parse::<i64>().unwrap()).sum();
    assert_eq!(records, written, "the partitions' records add up to what was written");
    let requests = named("request");
    assert!(!requests.is_empty());
    for request in &requests {
        let parent_known = partitions.iter().chain(&streams).any(|s| s.span_id == request.parent_span_id);
        assert!(parent_known, "a request's parent is its partition or stream: {request:?}");
        assert_eq!(attribute(request, "http.response.status_code"), "200");
        let url = attribute(request, "url.full");
        assert!(url.starts_with(&api.base_url()) && !url.contains('?'), "{url}");
    }

    // The LOG lines the run wrote through its output (the host's and the connector's) are
    // events of the spans they were written in.
    let events: Vec<&str> = spans.iter().flat_map(|s| &s.events).map(|e| e.name.as_str()).collect();
    let logs = run.logs();
    assert!(logs.len() >= 2, "a log line besides the summary: {logs:?}");
    for log in &logs[..logs.len() - 1] {
        assert!(events.contains(&log.as_str()), "the log line {log:?} is not an event: {events:?}");
    }

    let metrics = receiver.metrics();
    let total = |name: &str| -> f64 {
        let metric = metrics.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no metric {name}"));
        let Some(Data::Sum(sum)) = &metric.data else { panic!("{name} is not a sum") };
        let value = |p: &sluice_tests::otlp::proto::tonic::metrics::v1::NumberDataPoint| match p.value {
            Some(Number::AsInt(i)) => i as f64,
            Some(Number::AsDouble(d)) => d,
            None => 0.0,
        };
        sum.data_points.iter().map(value).sum()
    };
    assert_eq!(total("sluice.records"), written as f64);
    assert_eq!(total("sluice.http.requests"), requests.len() as f64, "a request span per request");
    assert_eq!(total("sluice.http.responses"), requests.len() as f64, "every attempt by its status");
    assert!(total("sluice.state.bytes") > 0.0);
}

/// A wrong `--otlp-endpoint` is refused before the run starts, naming the flag; a collector
/// that is down costs the run nothing: every record is written and the run succeeds.
#[test]
fn an_otlp_endpoint_that_is_wrong_or_down_does_not_cost_the_read() {
    let api = demo_api(DemoApiConfig { records: 30, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 9}));
    let wrong = host(&["run", "--streams", "items", "--otlp-endpoint", "ftp://127.0.0.1:4318"])
        .demo_source(&api, &config)
        .run();
    assert!(!wrong.success());
    assert!(wrong.stderr().contains("--otlp-endpoint \"ftp://127.0.0.1:4318\""), "{}", wrong.stderr());
    assert!(wrong.records("items").is_empty(), "nothing was read");

    // A port nothing listens on.
    let down = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let run = host(&["run", "--streams", "items", "--otlp-endpoint"])
        .arg(format!("http://{down}"))
        .demo_source(&api, &config)
        .run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("items").len(), 30);
}

/// A read through report jobs counts its polls: every job polled until it completed (the demo
/// API completes a job at its second poll), and no more polls than the API answered.
#[test]
fn a_reads_job_polls_are_counted() {
    let api = demo_api(DemoApiConfig { records: 40, accounts: 2, ..Default::default() });
    let files = Files::new();
    let config = files.json("config.json", &json!({"base_url": api.base_url(), "page_size": 100, "report_jobs": true}));
    let metrics = files.path().join("jobs.prom");
    let poll_fast = ["--job-poll-ms", "20", "--job-poll-max-ms", "50", "--metrics-file"];
    let run = host(&["run", "--streams", "report_items"]).args(poll_fast.map(String::from)).arg(&metrics);
    let run = run.demo_source(&api, &config).run();
    assert!(run.success(), "{}", run.explain());
    assert_eq!(run.ids("report_items").len(), 40);
    let polls = value(&parsed(&metrics), "sluice_job_polls_total", &[]);
    let stats = api.stats();
    assert!(stats.jobs_created >= 2);
    assert!(polls >= (stats.jobs_created * 2) as f64, "{polls} polls for {} jobs", stats.jobs_created);
    assert!(polls <= stats.requests_by_path["/reports/{id}"] as f64, "{polls} polls, {stats:?}");
}
