//! An OTLP/HTTP receiver on loopback, for the tests of `--otlp-endpoint`: it takes what a
//! collector would be sent (`POST /v1/traces`, `POST /v1/metrics`, protobuf bodies) and decodes
//! it with the OpenTelemetry project's own protocol types (opentelemetry-proto), answering as a
//! collector answers (200 with an empty response message).

pub use opentelemetry_proto as proto;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::post;
use opentelemetry_proto::tonic::collector::metrics::v1::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::metrics::v1::Metric;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// What the receiver was sent, decoded.
#[derive(Default)]
struct Received {
    traces: Vec<ExportTraceServiceRequest>,
    metrics: Vec<ExportMetricsServiceRequest>,
}

/// A running receiver; it stops with the test process.
pub struct OtlpReceiver {
    addr: SocketAddr,
    received: Arc<Mutex<Received>>,
}

impl OtlpReceiver {
    /// Starts one on 127.0.0.1, on a thread of its own.
    pub fn start() -> anyhow::Result<OtlpReceiver> {
        let received = Arc::new(Mutex::new(Received::default()));
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let app = Router::new()
            .route("/v1/traces", post(traces))
            .route("/v1/metrics", post(metrics))
            .with_state(received.clone());
        std::thread::Builder::new().name("otlp-receiver".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                let _ = axum::serve(listener, app).await;
            });
        })?;
        Ok(OtlpReceiver { addr, received })
    }

    /// The base URL to give `--otlp-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received, in the order they came.
    pub fn spans(&self) -> Vec<Span> {
        let received = self.received.lock().unwrap();
        let resources = received.traces.iter().flat_map(|t| &t.resource_spans);
        resources.flat_map(|r| &r.scope_spans).flat_map(|s| s.spans.clone()).collect()
    }

    /// The service name each export of spans named for its resource.
    pub fn span_services(&self) -> Vec<String> {
        let received = self.received.lock().unwrap();
        let resources = received.traces.iter().flat_map(|t| &t.resource_spans);
        let attributes = resources.filter_map(|r| r.resource.as_ref()).map(|r| r.attributes.as_slice());
        attributes.filter_map(|a| text_attribute(a, "service.name")).collect()
    }

    /// Every metric received.
    pub fn metrics(&self) -> Vec<Metric> {
        let received = self.received.lock().unwrap();
        let resources = received.metrics.iter().flat_map(|m| &m.resource_metrics);
        resources.flat_map(|r| &r.scope_metrics).flat_map(|s| s.metrics.clone()).collect()
    }
}

/// An attribute's value as text (a string as it is, others as their debug form).
pub fn text_attribute(attributes: &[KeyValue], key: &str) -> Option<String> {
    let value = attributes.iter().find(|a| a.key == key)?.value.as_ref()?;
    Some(plain(value))
}

fn plain(value: &AnyValue) -> String {
    match &value.value {
        Some(any_value::Value::StringValue(s)) => s.clone(),
        Some(any_value::Value::IntValue(i)) => i.to_string(),
        Some(any_value::Value::BoolValue(b)) => b.to_string(),
        Some(any_value::Value::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    }
}

/// Decodes an export as `Req`, keeps it, and answers with an empty `Resp`, as a collector does.
fn export<Req: Message + Default, Resp: Message + Default>(
    received: &Mutex<Received>,
    body: Bytes,
    keep: fn(&mut Received, Req),
) -> axum::response::Response {
    match Req::decode(body) {
        Ok(request) => {
            keep(&mut received.lock().unwrap(), request);
            ([(header::CONTENT_TYPE, "application/x-protobuf")], Resp::default().encode_to_vec()).into_response()
        }
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn traces(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> axum::response::Response {
    export::<ExportTraceServiceRequest, ExportTraceServiceResponse>(&received, body, |r, t| r.traces.push(t))
}

async fn metrics(State(received): State<Arc<Mutex<Received>>>, body: Bytes) -> axum::response::Response {
    export::<ExportMetricsServiceRequest, ExportMetricsServiceResponse>(&received, body, |r, m| r.metrics.push(m))
}
