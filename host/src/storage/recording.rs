//! HTTP recording and offline replay, as hooks of the egress layer ([`HttpHooks`]). A
//! [`Recorder`] (`--record-http`) sees every attempt of every guest request: one JSON line per
//! attempt, stored by the lake writer next to the run's replay segments
//! (`<run>/http/<ULID>.jsonl`). A [`Cassette`] (`--http-replay URI`) loads such a recording and,
//! as a [`Replayer`], answers requests from it without any network access. The format is in
//! docs/recording.md.
//!
//! What never reaches storage: the headers in [`SENSITIVE_HEADERS`] (and any whose name says
//! token, secret, password or key), the config's secret values (raw, URL-encoded and
//! JSON-escaped), and the values of query parameters named like a secret field of the spec.

use super::replay::{HTTP_FOLDER, Location};
use crate::bindings::{HttpError, Response};
use crate::data::protocol::Output;
use crate::data::secrets::{MASK, Secrets};
use crate::net::hooks::{Answer, Attempt, BoxFuture, HttpHooks, Outcome, Timing};
use anyhow::{Context, Result};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// Headers never stored, whatever their value.
pub const SENSITIVE_HEADERS: &[&str] =
    &["authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-auth-token"];

fn is_sensitive(header: &str) -> bool {
    let name = header.to_ascii_lowercase();
    SENSITIVE_HEADERS.contains(&name.as_str())
        || ["token", "secret", "password", "apikey", "api-key", "api_key"].iter().any(|w| name.contains(w))
}

/// One attempt of one request, as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Exchange {
    /// Order in which attempts finished, from 1.
    pub seq: u64,
    /// What the request was made for: `{"stream": ..., "partition": key}`, `{"stream": ...,
    /// "listing": true}`, or `{"call": "check"}` and the like.
    pub context: serde_json::Value,
    /// 1 for the first attempt; retries count up.
    pub attempt: u32,
    pub started_at: String,
    pub elapsed_ms: f64,
    pub request: RecordedRequest,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<RecordedResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordedRequest {
    pub method: String,
    pub url: String,
    pub headers: Vec<(String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Body>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordedResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Body,
}

/// An attempt that got no response.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordedError {
    /// `connect` (nothing was sent), `connection`, `timeout`, `denied`, `too_large`,
    /// `invalid_request`.
    pub kind: String,
    pub message: String,
}

/// A body: UTF-8 text as it is, anything else in base64.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Body {
    Text(String),
    Base64(String),
}

impl Body {
    fn of(bytes: &[u8], secrets: &Secrets) -> Body {
        match std::str::from_utf8(bytes) {
            Ok(text) => Body::Text(secrets.mask(text)),
            Err(_) => Body::Base64(base64::engine::general_purpose::STANDARD.encode(bytes)),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        match self {
            Body::Text(text) => text.clone().into_bytes(),
            Body::Base64(b64) => base64::engine::general_purpose::STANDARD.decode(b64).unwrap_or_default(),
        }
    }

    fn len(&self) -> u64 {
        match self {
            Body::Text(text) => text.len() as u64,
            Body::Base64(b64) => (b64.len() / 4 * 3) as u64,
        }
    }
}

fn error_kind(error: &HttpError, connect: bool) -> (&'static str, String) {
    match error {
        _ if connect => ("connect", error_message(error)),
        HttpError::Denied(m) => ("denied", m.clone()),
        HttpError::Timeout(m) => ("timeout", m.clone()),
        HttpError::Connection(m) => ("connection", m.clone()),
        HttpError::TooLarge(m) => ("too_large", m.clone()),
        HttpError::InvalidRequest(m) => ("invalid_request", m.clone()),
    }
}

fn error_message(error: &HttpError) -> String {
    match error {
        HttpError::Denied(m)
        | HttpError::Timeout(m)
        | HttpError::Connection(m)
        | HttpError::TooLarge(m)
        | HttpError::InvalidRequest(m) => m.clone(),
    }
}

/// A URL with the values of secret-named query parameters and secret values masked.
pub fn mask_url(url: &str, secrets: &Secrets) -> String {
    let names = secrets.names();
    let masked = match url::Url::parse(url) {
        Ok(mut parsed) if parsed.query().is_some() && !names.is_empty() => {
            let pairs: Vec<(String, String)> = parsed
                .query_pairs()
                .map(|(k, v)| {
                    let secret = names.iter().any(|n| n.eq_ignore_ascii_case(&k));
                    (k.into_owned(), if secret { MASK.to_string() } else { v.into_owned() })
                })
                .collect();
            parsed.query_pairs_mut().clear().extend_pairs(pairs);
            parsed.to_string()
        }
        _ => url.to_string(),
    };
    secrets.mask(&masked)
}

fn kept_headers(headers: &[(String, String)], secrets: &Secrets) -> Vec<(String, String)> {
    headers.iter().filter(|(k, _)| !is_sensitive(k)).map(|(k, v)| (k.clone(), secrets.mask(v))).collect()
}

/// Hands every attempt to the output writer, which stores it in the lake.
pub struct Recorder {
    out: Output,
    seq: AtomicU64,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Recorder")
    }
}

impl Recorder {
    pub fn new(out: Output) -> Self {
        Recorder { out, seq: AtomicU64::new(0) }
    }

    /// One attempt as stored (masked).
    fn exchange(&self, attempt: &Attempt<'_>, outcome: Outcome<'_>, timing: Timing) -> Exchange {
        let secrets = &self.out.secrets;
        let (response, error) = match outcome {
            Outcome::Response(resp) => (
                Some(RecordedResponse {
                    status: resp.status,
                    headers: kept_headers(&resp.headers, secrets),
                    body: Body::of(&resp.body, secrets),
                }),
                None,
            ),
            Outcome::Error { error, connect } => {
                let (kind, message) = error_kind(error, connect);
                (None, Some(RecordedError { kind: kind.to_string(), message: secrets.mask(&message) }))
            }
        };
        let req = attempt.request;
        Exchange {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            context: serde_json::from_str(attempt.context).unwrap_or(serde_json::Value::Null),
            attempt: attempt.number,
            started_at: crate::data::protocol::singer::timestamp(
                timing.started.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0),
            ),
            elapsed_ms: (timing.elapsed.as_secs_f64() * 1e6).round() / 1e3,
            request: RecordedRequest {
                method: attempt.method.to_string(),
                url: mask_url(attempt.url.as_str(), secrets),
                headers: kept_headers(&req.headers, secrets),
                body: req.body.as_deref().map(|b| Body::of(b, secrets)),
            },
            response,
            error,
        }
    }
}

impl HttpHooks for Recorder {
    /// A recording stores every body, streamed ones too.
    fn needs_bodies(&self) -> bool {
        true
    }

    /// Stores the attempt through the output writer. A closed output ends recording silently:
    /// the run is ending.
    fn observe<'a>(&'a self, attempt: &'a Attempt<'a>, outcome: Outcome<'a>, timing: Timing) -> BoxFuture<'a> {
        let mut line = serde_json::to_vec(&self.exchange(attempt, outcome, timing)).expect("an exchange serializes");
        line.push(b'\n');
        Box::pin(async move {
            let _ = self.out.exchange(line).await;
        })
    }
}

/// What identifies a request in a recording: method, URL and body, masked as stored.
type Key = (String, String, Option<Vec<u8>>);

/// A recording, answering requests in recorded order per identical request.
pub struct Cassette {
    pub uri: String,
    answers: Mutex<HashMap<Key, VecDeque<Exchange>>>,
    pub exchanges: usize,
}

impl std::fmt::Debug for Cassette {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cassette({})", self.uri)
    }
}

/// A run's exchanges, in order (blocking: call it outside async code).
pub fn load_exchanges(uri: &str) -> Result<Vec<Exchange>> {
    let rt = super::replay::BlockingRuntime::new()?;
    let run = Location::parse(uri)?;
    let http = run.child(HTTP_FOLDER)?;
    let (objects, _) = rt.block_on(http.list())?;
    if objects.is_empty() {
        anyhow::bail!("{} holds no HTTP recording (was the run made with --record-http?)", run.uri);
    }
    let mut exchanges = Vec::new();
    for name in objects.iter().filter(|n| n.ends_with(".jsonl")) {
        let text = rt.block_on(http.read(name))?;
        for (n, line) in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()).enumerate() {
            let exchange: Exchange = serde_json::from_slice(line)
                .with_context(|| format!("{} line {} is not a recorded exchange", http.uri_of(name), n + 1))?;
            exchanges.push(exchange);
        }
    }
    exchanges.sort_by_key(|e| e.seq);
    Ok(exchanges)
}

impl Cassette {
    /// Loads the recording of the run at `uri` (blocking).
    pub fn load(uri: &str) -> Result<Cassette> {
        let exchanges = load_exchanges(uri)?;
        let count = exchanges.len();
        let mut answers: HashMap<Key, VecDeque<Exchange>> = HashMap::new();
        for exchange in exchanges {
            let key = (
                exchange.request.method.to_ascii_uppercase(),
                exchange.request.url.clone(),
                exchange.request.body.as_ref().map(Body::bytes),
            );
            answers.entry(key).or_default().push_back(exchange);
        }
        Ok(Cassette { uri: uri.trim_end_matches('/').to_string(), answers: Mutex::new(answers), exchanges: count })
    }

    /// The next recorded answer to this request, masked as the recording is; `None` when the
    /// recording has no (more) answers to it.
    fn next_answer(&self, method: &str, url: &url::Url, body: Option<&[u8]>, secrets: &Secrets) -> Option<Answer> {
        let key =
            (method.to_ascii_uppercase(), mask_url(url.as_str(), secrets), body.map(|b| Body::of(b, secrets).bytes()));
        let exchange = self.answers.lock().unwrap_or_else(|e| e.into_inner()).get_mut(&key)?.pop_front()?;
        Some(match (exchange.response, exchange.error) {
            (Some(resp), _) => {
                Answer::Response(Response { status: resp.status, headers: resp.headers, body: resp.body.bytes() })
            }
            (None, Some(error)) => {
                let message = format!("{} (recorded)", error.message);
                let (error, connect) = match error.kind.as_str() {
                    "connect" => (HttpError::Connection(message), true),
                    "denied" => (HttpError::Denied(message), false),
                    "timeout" => (HttpError::Timeout(message), false),
                    "too_large" => (HttpError::TooLarge(message), false),
                    "invalid_request" => (HttpError::InvalidRequest(message), false),
                    _ => (HttpError::Connection(message), false),
                };
                Answer::Error { error, connect }
            }
            (None, None) => {
                Answer::Error { error: HttpError::Connection("recorded without an outcome".into()), connect: false }
            }
        })
    }

    /// The hook that answers a run's requests from this recording; `secrets` are the run's,
    /// to mask requests the way the recording stored them.
    pub fn replayer(self: Arc<Self>, secrets: Secrets) -> Replayer {
        Replayer { cassette: self, secrets }
    }
}

/// Answers every attempt from a recording; a request it has no (more) answers to is denied,
/// naming it. Nothing goes to the network.
pub struct Replayer {
    cassette: Arc<Cassette>,
    secrets: Secrets,
}

impl HttpHooks for Replayer {
    fn answer(&self, attempt: &Attempt<'_>) -> Option<Answer> {
        let body = attempt.request.body.as_deref();
        Some(self.cassette.next_answer(attempt.method, attempt.url, body, &self.secrets).unwrap_or_else(|| {
            Answer::Error {
                error: HttpError::Denied(format!(
                    "no recorded answer for {} {} in the recording at {} (HTTP is replayed: nothing goes to the network)",
                    attempt.method,
                    mask_url(attempt.url.as_str(), &self.secrets),
                    self.cassette.uri
                )),
                connect: false,
            }
        }))
    }

    fn offline(&self) -> bool {
        true
    }
}

/// `host recording show`: requests per host and status, bytes, retries and the slowest.
pub fn summary(exchanges: &[Exchange]) -> String {
    let mut by_host: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
    let (mut bytes_out, mut bytes_in, mut retries) = (0u64, 0u64, 0u64);
    for e in exchanges {
        let host = url::Url::parse(&e.request.url)
            .ok()
            .and_then(|u| u.host_str().map(|h| format!("{h}{}", u.port().map(|p| format!(":{p}")).unwrap_or_default())))
            .unwrap_or_else(|| "(invalid URL)".into());
        let status = match (&e.response, &e.error) {
            (Some(r), _) => r.status.to_string(),
            (None, Some(err)) => err.kind.clone(),
            _ => "?".into(),
        };
        *by_host.entry(host).or_default().entry(status).or_default() += 1;
        bytes_out += e.request.body.as_ref().map_or(0, Body::len);
        bytes_in += e.response.as_ref().map_or(0, |r| r.body.len());
        retries += u64::from(e.attempt > 1);
    }
    let mut text = format!(
        "{} exchanges ({} retries), {} bytes sent, {} bytes received\n",
        exchanges.len(),
        retries,
        bytes_out,
        bytes_in
    );
    for (host, statuses) in &by_host {
        let total: u64 = statuses.values().sum();
        let parts: Vec<String> = statuses.iter().map(|(s, n)| format!("{s}: {n}")).collect();
        text.push_str(&format!("  {host}: {total} ({})\n", parts.join(", ")));
    }
    let mut slowest: Vec<&Exchange> = exchanges.iter().collect();
    slowest.sort_by(|a, b| b.elapsed_ms.total_cmp(&a.elapsed_ms));
    text.push_str("slowest:\n");
    for e in slowest.iter().take(5) {
        let status = e
            .response
            .as_ref()
            .map_or_else(|| e.error.as_ref().map_or("?".into(), |x| x.kind.clone()), |r| r.status.to_string());
        text.push_str(&format!(
            "  {:>9.1} ms  {} {} {} (attempt {})\n",
            e.elapsed_ms, status, e.request.method, e.request.url, e.attempt
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_query_parameters_and_values_are_masked() {
        let secrets = Secrets::default();
        let spec = json!({"properties": {"api_key": {"airbyte_secret": true}, "token": {"airbyte_secret": true}}});
        secrets.set_from(&spec, &json!({"api_key": "sk-live-12345", "token": "t0k3n-abc"}));
        let masked = mask_url("http://h/x?api_key=derived-value&token=other&page=2&q=sk-live-12345", &secrets);
        assert!(!masked.contains("derived-value") && !masked.contains("sk-live-12345") && !masked.contains("other"));
        assert!(masked.contains("page=2"), "{masked}");
        let headers = vec![
            ("Authorization".to_string(), "Bearer x".to_string()),
            ("X-Refresh-Token".to_string(), "y".to_string()),
            ("Accept".to_string(), "application/json".to_string()),
        ];
        assert_eq!(kept_headers(&headers, &secrets), vec![("Accept".to_string(), "application/json".to_string())]);
    }
}
