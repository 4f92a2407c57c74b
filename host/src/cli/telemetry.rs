//! `--otlp-endpoint URL`: the run's spans and metrics sent to an OpenTelemetry collector over
//! OTLP/HTTP (protobuf), `URL/v1/traces` and `URL/v1/metrics`, as `OTEL_EXPORTER_OTLP_ENDPOINT`
//! names them. The library opens `tracing` spans (a run, each stream, each partition, each HTTP
//! request) and events (the host's own log lines); this installs the subscriber that turns them
//! into OpenTelemetry spans (`tracing-opentelemetry`), exported in batches by the SDK's own
//! thread, and records the run's numbers as OpenTelemetry metrics at its end. Without the flag
//! no subscriber is installed and the spans cost next to nothing.
//!
//! The exporters send through the host's own HTTP client (reqwest on the run's tokio runtime):
//! the collector is the operator's, outside any guest's egress policy.

use crate::run::request::ReadReport;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use opentelemetry_sdk::trace::SdkTracerProvider;
use std::time::Duration;
use tracing_subscriber::Layer as _;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt;

/// How long an export to the collector may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// The exporters of a run, flushed by [`Telemetry::finish`].
pub struct Telemetry {
    spans: SdkTracerProvider,
    metrics: SdkMeterProvider,
}

/// The OTLP exporters' HTTP client: each export is a task on the run's tokio runtime (the SDK
/// exports from a thread of its own, outside it), awaited through its join handle.
#[derive(Debug, Clone)]
struct OnTheRuntime {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

#[async_trait::async_trait]
impl HttpClient for OnTheRuntime {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = reqwest::Request::try_from(request)?;
        let client = self.client.clone();
        let answer = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let (status, headers) = (response.status(), response.headers().clone());
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        let (status, headers, body) = answer.await??;
        let mut response = Response::builder().status(status).body(body)?;
        *response.headers_mut() = headers;
        Ok(response)
    }
}

/// Starts exporting to the collector at `endpoint` (`http://HOST:PORT`, the OTLP/HTTP base):
/// installs the global `tracing` subscriber. Call within the run's tokio runtime.
pub fn start(endpoint: &str) -> anyhow::Result<Telemetry> {
    let base = endpoint.trim_end_matches('/');
    let url = reqwest::Url::parse(base).map_err(|e| anyhow::anyhow!("--otlp-endpoint {base:?} is not a URL: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") {
        anyhow::bail!("--otlp-endpoint {base:?}: an http:// or https:// URL is wanted");
    }
    let client = OnTheRuntime {
        client: reqwest::Client::builder().timeout(EXPORT_TIMEOUT).build()?,
        runtime: tokio::runtime::Handle::current(),
    };
    let resource = Resource::builder().with_service_name("sluice").build();
    let span_exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_http_client(client.clone())
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/traces"))
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let spans = SdkTracerProvider::builder().with_batch_exporter(span_exporter).with_resource(resource.clone()).build();
    let metric_exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_http_client(client)
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/metrics"))
        .with_timeout(EXPORT_TIMEOUT)
        .build()?;
    let metrics = SdkMeterProvider::builder().with_periodic_exporter(metric_exporter).with_resource(resource).build();
    // The host's own spans and events, not those of the crates under it (hyper's connection
    // pool and the like).
    let host_only = Targets::new().with_target("sluice_host", tracing::Level::INFO);
    let layer = tracing_opentelemetry::layer().with_tracer(spans.tracer("sluice")).with_filter(host_only);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
        .map_err(|e| anyhow::anyhow!("cannot install the OpenTelemetry subscriber: {e}"))?;
    Ok(Telemetry { spans, metrics })
}

impl Telemetry {
    /// Records what a read did as metrics (sent when the exporters finish).
    pub fn record(&self, read: &ReadReport) {
        let meter = self.metrics.meter("sluice");
        let counter = |name: &'static str, description: &'static str| {
            meter.u64_counter(name).with_description(description).build()
        };
        let records = counter("sluice.records", "Records written, by stream.");
        let partitions = counter("sluice.partitions", "Partitions listed, by stream and what became of them.");
        for s in &read.streams {
            let stream = KeyValue::new("stream", s.name.clone());
            records.add(s.records, std::slice::from_ref(&stream));
            for (outcome, n) in s.partitions_by_outcome() {
                partitions.add(n, &[stream.clone(), KeyValue::new("outcome", outcome)]);
            }
        }
        let usage = &read.usage;
        counter("sluice.http.requests", "HTTP requests sent (attempts).").add(usage.requests, &[]);
        let responses = counter("sluice.http.responses", "HTTP attempts by the class of their answer.");
        for (class, n) in crate::run::metrics::STATUS_CLASSES.iter().zip(usage.attempts_by_status) {
            responses.add(n, &[KeyValue::new("status", *class)]);
        }
        counter("sluice.jobs.polls", "Report job polls.").add(usage.job_polls, &[]);
        counter("sluice.state.bytes", "Bytes of the STATE lines written.").add(usage.state_bytes, &[]);
        counter("sluice.http.retries", "HTTP attempts that were retries.").add(usage.retries, &[]);
        counter("sluice.http.denied", "HTTP requests the egress policy denied.").add(usage.denied, &[]);
        let bytes = counter("sluice.http.bytes", "HTTP body bytes, by direction.");
        bytes.add(usage.bytes_in, &[KeyValue::new("direction", "in")]);
        bytes.add(usage.bytes_out, &[KeyValue::new("direction", "out")]);
        counter("sluice.instances", "Guest instances made.").add(usage.instances, &[]);
        let seconds = |name: &'static str, description: &'static str, value: Duration| {
            meter.f64_counter(name).with_unit("s").with_description(description).build().add(value.as_secs_f64(), &[]);
        };
        seconds("sluice.guest.cpu", "CPU time spent in guest code.", usage.guest_cpu);
        seconds("sluice.guest.throttled", "Time busy guests were paused.", usage.throttled + usage.policy_throttled);
        let gauge = |name: &'static str, description: &'static str, value: u64| {
            meter.u64_gauge(name).with_description(description).build().record(value, &[]);
        };
        gauge("sluice.instances.live.peak", "The most guest instances alive at once.", usage.peak_live_instances);
        gauge("sluice.partitions.in_flight.peak", "The most partitions read at once.", usage.peak_partitions_in_flight);
        gauge("sluice.guest.memory.peak", "The most memory one guest instance held.", usage.peak_memory_bytes);
        meter
            .f64_histogram("sluice.run.duration")
            .with_unit("s")
            .with_description("How long the read took.")
            .build()
            .record(read.elapsed.as_secs_f64(), &[]);
    }

    /// Sends what is left and stops the exporters (blocking: call it off the runtime's
    /// workers, as `spawn_blocking` does). Failures are reported, not fatal: the run is done.
    pub fn finish(self) -> Vec<String> {
        let mut failures = Vec::new();
        if let Err(e) = self.spans.shutdown() {
            failures.push(format!("cannot send the run's spans to the collector: {e}"));
        }
        if let Err(e) = self.metrics.shutdown() {
            failures.push(format!("cannot send the run's metrics to the collector: {e}"));
        }
        failures
    }
}
