//! Numbers in the Prometheus text exposition format (version 0.0.4): a read's, what
//! `--metrics-file` writes at the end of a run and an embedder can serve or push for each run
//! ([`ReadReport::prometheus_text`]; counters are the run's totals, gauges its peaks), and every
//! tenant's of a runtime ([`crate::Runtime::prometheus_text`]).

use super::read::StreamSummary;
use super::request::ReadReport;
use super::tenants::{RUN_SECONDS_BUCKETS, TenantUsage};
use std::fmt::Write as _;

/// The `status` label of `RunUsage::attempts_by_status`, by index.
pub(crate) const STATUS_CLASSES: [&str; 6] = ["none", "1xx", "2xx", "3xx", "4xx", "5xx"];

/// Labels of a sample.
type Labels = Vec<(&'static str, String)>;

/// One metric family: its name, help, type and samples (a suffix of the name, as a
/// histogram's `_bucket`, labels, value).
struct Family {
    name: String,
    help: &'static str,
    kind: &'static str,
    samples: Vec<(&'static str, Labels, f64)>,
}

impl Family {
    fn new(name: impl Into<String>, kind: &'static str, help: &'static str) -> Self {
        Family { name: name.into(), help, kind, samples: Vec::new() }
    }

    fn one(mut self, value: f64) -> Self {
        self.samples.push(("", Vec::new(), value));
        self
    }

    fn labelled(mut self, labels: Labels, value: f64) -> Self {
        self.samples.push(("", labels, value));
        self
    }

    /// A histogram's samples: its cumulative buckets (`le`, `+Inf` last), sum and count.
    fn histogram(mut self, labels: Labels, bounds: &[f64], buckets: &[u64], sum: f64, count: u64) -> Self {
        for (i, bound) in bounds.iter().enumerate() {
            let mut le = labels.clone();
            le.push(("le", bound.to_string()));
            self.samples.push(("_bucket", le, buckets.get(i).copied().unwrap_or(0) as f64));
        }
        let mut inf = labels.clone();
        inf.push(("le", "+Inf".into()));
        self.samples.push(("_bucket", inf, count as f64));
        self.samples.push(("_sum", labels.clone(), sum));
        self.samples.push(("_count", labels, count as f64));
        self
    }

    fn write(&self, run_labels: &[(&str, &str)], out: &mut String) {
        let _ = writeln!(out, "# HELP {} {}", self.name, self.help);
        let _ = writeln!(out, "# TYPE {} {}", self.name, self.kind);
        for (suffix, labels, value) in &self.samples {
            out.push_str(&self.name);
            out.push_str(suffix);
            let all: Vec<(&str, &str)> =
                run_labels.iter().copied().chain(labels.iter().map(|(k, v)| (*k, v.as_str()))).collect();
            if !all.is_empty() {
                out.push('{');
                for (i, (key, value)) in all.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{key}=\"{}\"", escape(value));
                }
                out.push('}');
            }
            let _ = writeln!(out, " {value}");
        }
    }
}

/// A label value as the format writes it: backslash, double quote and line feed escaped.
fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

impl ReadReport {
    /// The run's metrics in the Prometheus text format, each sample with `labels` (a tenant, a
    /// connection) before its own.
    pub fn prometheus_text(&self, labels: &[(&str, &str)]) -> String {
        let usage = &self.usage;
        let per_stream = |name, help, value: fn(&StreamSummary) -> f64| {
            self.streams
                .iter()
                .fold(Family::new(name, "counter", help), |f, s| f.labelled(vec![("stream", s.name.clone())], value(s)))
        };
        let mut partitions =
            Family::new("sluice_partitions_total", "counter", "Partitions listed, by stream and what became of them.");
        for s in &self.streams {
            for (outcome, n) in s.partitions_by_outcome() {
                partitions =
                    partitions.labelled(vec![("stream", s.name.clone()), ("outcome", outcome.into())], n as f64);
            }
        }
        let complete = self.streams.iter().fold(
            Family::new("sluice_stream_complete", "gauge", "1 when every partition of the stream was read."),
            |f, s| f.labelled(vec![("stream", s.name.clone())], if s.complete() { 1.0 } else { 0.0 }),
        );
        let families = [
            per_stream("sluice_records_total", "Records written, by stream.", |s| s.records as f64),
            partitions,
            complete,
            per_stream("sluice_job_retries_total", "Report jobs created again, by stream.", |s| s.job_retries as f64),
            Family::new("sluice_http_requests_total", "counter", "HTTP requests sent (attempts).")
                .one(usage.requests as f64),
            STATUS_CLASSES.iter().zip(usage.attempts_by_status).fold(
                Family::new("sluice_http_responses_total", "counter", "HTTP attempts by the class of their answer."),
                |f, (class, n)| f.labelled(vec![("status", class.to_string())], n as f64),
            ),
            Family::new("sluice_job_polls_total", "counter", "Report job polls.").one(usage.job_polls as f64),
            Family::new("sluice_partitions_in_flight_peak", "gauge", "The most partitions read at once.")
                .one(usage.peak_partitions_in_flight as f64),
            Family::new("sluice_state_bytes_total", "counter", "Bytes of the STATE lines written.")
                .one(usage.state_bytes as f64),
            Family::new("sluice_http_retries_total", "counter", "HTTP attempts that were retries.")
                .one(usage.retries as f64),
            Family::new("sluice_http_denied_total", "counter", "HTTP requests the egress policy denied.")
                .one(usage.denied as f64),
            Family::new("sluice_http_bytes_total", "counter", "HTTP body bytes, by direction.")
                .labelled(vec![("direction", "in".into())], usage.bytes_in as f64)
                .labelled(vec![("direction", "out".into())], usage.bytes_out as f64),
            Family::new("sluice_guest_cpu_seconds_total", "counter", "CPU time spent in guest code.")
                .one(usage.guest_cpu.as_secs_f64()),
            Family::new("sluice_guest_throttled_seconds_total", "counter", "Time busy guests were paused, by cause.")
                .labelled(vec![("cause", "contended".into())], usage.throttled.as_secs_f64())
                .labelled(vec![("cause", "policy".into())], usage.policy_throttled.as_secs_f64()),
            Family::new("sluice_instances_total", "counter", "Guest instances made.").one(usage.instances as f64),
            Family::new("sluice_instances_live_peak", "gauge", "The most guest instances alive at once.")
                .one(usage.peak_live_instances as f64),
            Family::new("sluice_guest_memory_peak_bytes", "gauge", "The most memory one guest instance held.")
                .one(usage.peak_memory_bytes as f64),
            Family::new("sluice_run_seconds", "gauge", "How long the read took.").one(self.elapsed.as_secs_f64()),
        ];
        let mut out = String::new();
        for family in &families {
            family.write(labels, &mut out);
        }
        out
    }
}

/// A tenant's number: its name in `sluice_tenant_NAME`, its help, its value.
type TenantNumber = (&'static str, &'static str, fn(&TenantUsage) -> f64);

/// The tenants' counters, each `sluice_tenant_NAME_total`.
const TENANT_COUNTERS: [TenantNumber; 11] = [
    ("records", "Records the tenant's reads wrote.", |u| u.records as f64),
    ("partitions", "Partitions the tenant's reads read.", |u| u.partitions as f64),
    ("partitions_failed", "Partitions of the tenant's reads that failed.", |u| u.failed_partitions as f64),
    ("http_requests", "HTTP requests of the tenant's reads (attempts).", |u| u.requests as f64),
    ("http_retries", "HTTP attempts of the tenant's reads that were retries.", |u| u.retries as f64),
    ("http_denied", "The tenant's requests the egress policy denied.", |u| u.denied as f64),
    ("http_bytes_in", "Response body bytes of the tenant's reads.", |u| u.bytes_in as f64),
    ("guest_cpu_seconds", "CPU time in the tenant's guest code.", |u| u.guest_cpu.as_secs_f64()),
    ("guest_throttled_seconds", "Time the tenant's busy guests were paused.", |u| u.throttled.as_secs_f64()),
    ("instances", "Guest instances the tenant's reads made.", |u| u.instances as f64),
    ("partition_slots", "Shared partition slots granted to the tenant's runs.", |u| u.partition_slots as f64),
];

/// The tenants' gauges, each `sluice_tenant_NAME`.
const TENANT_GAUGES: [TenantNumber; 2] = [
    ("runs_active", "The tenant's runs going now.", |u| u.runs_active as f64),
    ("memory_held_bytes", "Memory the tenant's runs going hold under its quota.", |u| u.memory_held as f64),
];

/// Every tenant's usage, each sample labelled with its `tenant`.
pub(crate) fn tenants_text(tenants: &[(String, TenantUsage)]) -> String {
    let tenant = |name: &str| vec![("tenant", name.to_string())];
    let mut runs = Family::new("sluice_tenant_runs_total", "counter", "The tenant's runs, by what became of them.");
    let mut seconds = Family::new("sluice_tenant_run_seconds", "histogram", "How long the tenant's runs took.");
    for (name, u) in tenants {
        let outcomes = [("started", u.runs_started), ("refused", u.runs_refused), ("ended", u.runs_ended)];
        for (outcome, n) in outcomes.into_iter().chain([("failed", u.runs_failed)]) {
            runs = runs.labelled(vec![("tenant", name.clone()), ("outcome", outcome.into())], n as f64);
        }
        let s = &u.run_seconds;
        seconds = seconds.histogram(tenant(name), &RUN_SECONDS_BUCKETS, &s.buckets, s.sum, s.count);
    }
    let numbers = |kind: &'static str, suffix: &str, table: &[TenantNumber]| -> Vec<Family> {
        let family = |(name, help, value): &TenantNumber| {
            let family = Family::new(format!("sluice_tenant_{name}{suffix}"), kind, help);
            tenants.iter().fold(family, |f, (t, u)| f.labelled(tenant(t), value(u)))
        };
        table.iter().map(family).collect()
    };
    let mut out = String::new();
    let families = [runs, seconds].into_iter().chain(numbers("gauge", "", &TENANT_GAUGES));
    for family in families.chain(numbers("counter", "_total", &TENANT_COUNTERS)) {
        family.write(&[], &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::request::RunUsage;
    use std::time::Duration;

    #[test]
    fn a_reports_numbers_are_written_in_the_text_format() {
        let report = ReadReport {
            streams: vec![StreamSummary {
                name: "a\"b".into(),
                records: 7,
                partitions: 5,
                failed_partitions: 1,
                skipped_partitions: 1,
                other_shards: 2,
                ..Default::default()
            }],
            usage: RunUsage { requests: 3, guest_cpu: Duration::from_millis(1500), ..Default::default() },
            elapsed: Duration::from_secs(2),
        };
        let text = report.prometheus_text(&[("tenant", "t\n1")]);
        assert!(text.contains("# TYPE sluice_records_total counter\n"), "{text}");
        assert!(text.contains("sluice_records_total{tenant=\"t\\n1\",stream=\"a\\\"b\"} 7\n"), "{text}");
        assert!(text.contains("outcome=\"read\"} 1\n") && text.contains("outcome=\"other_shard\"} 2\n"), "{text}");
        assert!(text.contains("sluice_stream_complete{tenant=\"t\\n1\",stream=\"a\\\"b\"} 0\n"), "{text}");
        assert!(text.contains("sluice_guest_cpu_seconds_total{tenant=\"t\\n1\"} 1.5\n"), "{text}");
        assert!(text.contains("sluice_http_requests_total{tenant=\"t\\n1\"} 3\n"), "{text}");
    }
}
