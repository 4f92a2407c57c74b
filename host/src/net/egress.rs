//! The HTTP client guests' requests go through: the egress policy first, then timeouts,
//! retries with backoff, `Retry-After`, per-host rates and response-size caps, with the
//! [`HttpHooks`] around every attempt.
//!
//! A request is allowed only when its `host:port` was both declared by the plugin (its
//! `capabilities`) and granted by the operator (`--allow-host`); anything else fails with
//! `denied` before any network I/O. Redirects are re-checked hop by hop.

use super::body::BodySource;
use super::client::{ClientError, ClientOptions, HttpClient, NetworkBody, RequestBody};
use super::grants::EgressPolicy;
use super::hooks::{Answer, Attempt, HttpHooks, Outcome, Timing};
use crate::bindings::{HttpError, Request, Response};
use crate::net::pace::Pacer;
use anyhow::Result;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// HTTP behaviour for one run. The defaults suit public APIs.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of a response.
    pub read_timeout: Duration,
    /// Longest a single attempt may take end to end.
    pub request_timeout: Duration,
    /// Attempts per request, the first included.
    pub max_attempts: u32,
    /// Retries allowed across the whole run, so a failing API cannot keep a run busy forever.
    pub retry_budget: u64,
    /// First backoff delay; doubled per attempt, with jitter.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// A `Retry-After` longer than this is not waited for; the response goes to the guest.
    pub max_retry_after: Duration,
    pub max_response_bytes: u64,
    /// Requests in flight at once across the run.
    pub max_in_flight: usize,
    /// Requests per second to any one host.
    pub max_rate_per_host: Option<f64>,
    /// Keep the connector's headers on a redirect to another origin (scheme, host, port). Off by
    /// default: a credential header meant for one API never reaches another.
    pub forward_headers_on_redirect: bool,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(300),
            max_attempts: 5,
            retry_budget: 1000,
            backoff_base: Duration::from_millis(500),
            backoff_max: Duration::from_secs(60),
            max_retry_after: Duration::from_secs(600),
            max_response_bytes: 64 << 20,
            max_in_flight: 32,
            max_rate_per_host: None,
            forward_headers_on_redirect: false,
        }
    }
}

/// Counters for the run summary.
#[derive(Debug, Default)]
pub struct EgressStats {
    /// Attempts by how they were answered: `[0]` not at all (a connection error, a timeout),
    /// `[1]` to `[5]` with a status of that hundred (1xx to 5xx).
    pub by_status: [AtomicU64; 6],
    pub requests: AtomicU64,
    pub retries: AtomicU64,
    pub denied: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// Performs every request of one run.
pub struct Egress {
    /// The clients, each built at its first request: plain http needs no root certificates,
    /// and loading them (the system's and the built-in ones) takes 4-6 ms of CPU that a run
    /// talking plain http only (a local API, every test and benchmark) never needs, and an
    /// egress that sends nothing (a run's denying one, `spec`) builds neither.
    plain: std::sync::OnceLock<Result<HttpClient, String>>,
    tls: std::sync::OnceLock<Result<HttpClient, String>>,
    policy: Arc<EgressPolicy>,
    options: HttpOptions,
    retry_budget: AtomicU64,
    in_flight: tokio::sync::Semaphore,
    /// Spaces requests to each host under the per-host rate.
    pacer: Option<Pacer>,
    pub stats: EgressStats,
    /// Around every attempt, in order: the first that answers one keeps it off the network.
    hooks: Vec<Arc<dyn HttpHooks>>,
}

/// How long a streamed body may take to read in all: a day; the read timeout still bounds each
/// wait for more bytes.
const STREAMED_BODY_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

/// Redirects followed per request.
const MAX_REDIRECTS: usize = 10;

/// Most headers a guest request may carry, and their total bytes (names and values), as HTTP
/// servers commonly accept; beyond that the request is invalid (the client library panics on
/// tens of thousands).
pub const MAX_REQUEST_HEADERS: usize = 100;
pub const MAX_REQUEST_HEADER_BYTES: usize = 64 << 10;

/// The most of a declared Content-Length reserved before the bytes arrive: a server's claim
/// costs nothing until it sends the data.
const MAX_PREALLOCATION: u64 = 1 << 20;

/// Headers a connector may not set, as in wasi-http: hop-by-hop headers belong to the host's
/// connection, and `Host` would point a granted address at any virtual host behind it.
const FORBIDDEN_HEADERS: [&str; 9] = [
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "http2-settings",
];

/// Checks a guest's headers before anything is sent: the headers, parsed once for every
/// attempt and hop.
fn check_headers(headers: &[(String, String)]) -> Result<HeaderMap, HttpError> {
    if headers.len() > MAX_REQUEST_HEADERS {
        return Err(HttpError::InvalidRequest(format!(
            "{} headers are more than the {MAX_REQUEST_HEADERS} a request may carry",
            headers.len()
        )));
    }
    let bytes: usize = headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    if bytes > MAX_REQUEST_HEADER_BYTES {
        return Err(HttpError::InvalidRequest(format!(
            "the headers take {bytes} bytes, more than the {MAX_REQUEST_HEADER_BYTES} a request may carry"
        )));
    }
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        // Parsing lower-cases the name.
        let parsed = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            HttpError::InvalidRequest(format!("invalid header name {:?}", name.chars().take(64).collect::<String>()))
        })?;
        if FORBIDDEN_HEADERS.contains(&parsed.as_str()) || parsed.as_str().starts_with("proxy-") {
            return Err(HttpError::InvalidRequest(format!(
                "the {name} header is the host's to set, not the connector's"
            )));
        }
        let value = HeaderValue::from_str(value)
            .map_err(|_| HttpError::InvalidRequest(format!("invalid value for header {name}")))?;
        map.append(parsed, value);
    }
    Ok(map)
}

/// True when `a` and `b` share scheme, host and port.
fn same_origin(a: &url::Url, b: &url::Url) -> bool {
    a.scheme() == b.scheme() && a.host() == b.host() && a.port_or_known_default() == b.port_or_known_default()
}

impl Egress {
    pub fn new(policy: EgressPolicy, options: HttpOptions) -> Result<Self> {
        let policy = Arc::new(policy);
        Ok(Egress {
            plain: std::sync::OnceLock::new(),
            tls: std::sync::OnceLock::new(),
            policy,
            retry_budget: AtomicU64::new(options.retry_budget),
            in_flight: tokio::sync::Semaphore::new(options.max_in_flight.max(1)),
            pacer: options.max_rate_per_host.map(Pacer::new),
            options,
            stats: EgressStats::default(),
            hooks: Vec::new(),
        })
    }

    /// The client for `url`: the one with root certificates for https, the one without for
    /// plain http (its requests never do TLS), each built at its first request.
    fn client(&self, url: &url::Url) -> Result<&HttpClient, Failure> {
        let tls = url.scheme() == "https";
        let built = match tls {
            true => self.tls.get_or_init(|| self.build_client(true)),
            false => self.plain.get_or_init(|| self.build_client(false)),
        };
        built.as_ref().map_err(|e| Failure::Other(HttpError::Connection(e.clone())))
    }

    fn build_client(&self, tls: bool) -> Result<HttpClient, String> {
        let options = &self.options;
        let options = ClientOptions {
            connect_timeout: options.connect_timeout,
            read_timeout: options.read_timeout,
            tls_roots: tls,
        };
        HttpClient::new(&options).map_err(|e| format!("the host cannot make its HTTP client: {e}"))
    }

    /// Builds the https client now, on a blocking thread, so a run's first https request does
    /// not wait for the root certificates to load (it overlaps the connector's first calls):
    /// when the connector declared a host it may reach over https alone (one declared with
    /// `http://` is a local or test API, whose requests need no certificates; should one of
    /// them go over https all the same, its first request builds the client). Returns the
    /// build's task, when one is started.
    pub fn prepare(self: &Arc<Self>) -> Option<tokio::task::JoinHandle<()>> {
        let egress = self.clone();
        let tls_ahead = self.policy.declared().any(|host| !host.http);
        (tls_ahead && !self.offline() && tokio::runtime::Handle::try_current().is_ok()).then(|| {
            tokio::task::spawn_blocking(move || {
                egress.tls.get_or_init(|| egress.build_client(true));
            })
        })
    }

    /// Adds a hook around every attempt (after those added before).
    pub fn with_hook(mut self, hook: Arc<dyn HttpHooks>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// True when a hook answers every attempt: nothing goes to the network.
    fn offline(&self) -> bool {
        self.hooks.iter().any(|h| h.offline())
    }

    pub fn max_response_bytes(&self) -> u64 {
        self.options.max_response_bytes
    }

    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// Sends a guest's request: policy check, then attempts with backoff until one is final.
    /// `context` (JSON) says what the request is for, in recordings.
    pub async fn send(&self, req: Request, context: &str) -> Result<Response, HttpError> {
        self.exchange(req, context, false).await.map(|(resp, _)| resp)
    }

    /// Like [`Egress::send`], but answers once the headers arrived, the body left to be read a
    /// piece at a time (the returned response's body is empty). Only when a hook needs bodies
    /// ([`HttpHooks::needs_bodies`], a recording) is the body read whole (under the cap) and
    /// served from memory; an answer a hook gives (a replay) is served from memory too. Hooks
    /// that only observe leave the body streamed.
    pub async fn open(&self, req: Request, context: &str) -> Result<(Response, BodySource), HttpError> {
        let stream = !self.hooks.iter().any(|h| h.needs_bodies());
        let (mut resp, stream) = self.exchange(req, context, stream).await?;
        let source = match stream {
            Some(stream) => BodySource::Network(stream),
            None => BodySource::Memory(Some(std::mem::take(&mut resp.body).into())),
        };
        Ok((resp, source))
    }

    /// The attempts of one request in a `request` span: its method, and its URL without the
    /// query (which may carry a key); the final status, or the error.
    async fn exchange(
        &self,
        req: Request,
        context: &str,
        stream: bool,
    ) -> Result<(Response, Option<NetworkBody>), HttpError> {
        let span = tracing::info_span!(
            "request",
            http.request.method = %req.method,
            url.full = %without_query(&req.url),
            http.response.status_code = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let result = tracing::Instrument::instrument(self.attempts(req, context, stream), span.clone()).await;
        match &result {
            Ok((response, _)) => span.record("http.response.status_code", response.status),
            Err(e) => span.record("error", tracing::field::display(e)),
        };
        result
    }

    /// The attempts of one request; with `stream`, the final answer's body is left unread.
    async fn attempts(
        &self,
        req: Request,
        context: &str,
        stream: bool,
    ) -> Result<(Response, Option<NetworkBody>), HttpError> {
        let url = url::Url::parse(&req.url)
            .map_err(|e| HttpError::InvalidRequest(format!("invalid URL {:?}: {e}", req.url)))?;
        if let Err(why) = self.policy.check(&url) {
            self.stats.denied.fetch_add(1, Ordering::Relaxed);
            return Err(HttpError::Denied(why));
        }
        let method = http::Method::from_bytes(req.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| HttpError::InvalidRequest(format!("invalid method {:?}", req.method)))?;
        let headers = check_headers(&req.headers)?;
        let idempotent = matches!(method.as_str(), "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS");
        let mut attempt = 1;
        loop {
            let (started, clock) = (SystemTime::now(), Instant::now());
            let this = Attempt { context, number: attempt, method: method.as_str(), url: &url, request: &req };
            let outcome = match self.hooks.iter().find_map(|h| h.answer(&this)) {
                Some(answer) => self.answered(answer),
                None if self.offline() => Err(Failure::Other(HttpError::Denied(format!(
                    "nothing answers {method} {url} and HTTP is offline"
                )))),
                None => {
                    for hook in &self.hooks {
                        hook.before_send(&this).await;
                    }
                    self.attempt(&method, &url, &headers, &req, stream).await
                }
            };
            let class = match &outcome {
                Ok((resp, _)) => usize::from(resp.status / 100).clamp(1, 5),
                Err(_) => 0,
            };
            self.stats.by_status[class].fetch_add(1, Ordering::Relaxed);
            let timing = || Timing { started, elapsed: clock.elapsed() };
            for hook in &self.hooks {
                let seen = match &outcome {
                    Ok((resp, _)) => Outcome::Response(resp),
                    Err(Failure::Connect(error)) => Outcome::Error { error, connect: true },
                    Err(Failure::Other(error)) => Outcome::Error { error, connect: false },
                };
                hook.observe(&this, seen, timing()).await;
            }
            let delay = match &outcome {
                Ok((resp, _)) if resp.status == 429 => {
                    Some(self.retry_after(resp).unwrap_or_else(|| self.backoff(attempt)))
                }
                Ok((resp, _)) if idempotent && is_retryable_status(resp.status) => {
                    Some(self.retry_after(resp).unwrap_or_else(|| self.backoff(attempt)))
                }
                Err(Failure::Connect(_)) => Some(self.backoff(attempt)),
                Err(Failure::Other(HttpError::Timeout(_) | HttpError::Connection(_))) if idempotent => {
                    Some(self.backoff(attempt))
                }
                _ => None,
            };
            let retry = match delay {
                Some(d) if attempt < self.options.max_attempts && d <= self.options.max_retry_after => {
                    self.take_retry().then_some(d)
                }
                _ => None,
            };
            match retry {
                Some(delay) => {
                    self.stats.retries.fetch_add(1, Ordering::Relaxed);
                    // An offline replay has nobody to wait for.
                    if !self.offline() {
                        tokio::time::sleep(delay).await;
                    }
                    attempt += 1;
                }
                None => {
                    let outcome = outcome.map_err(Failure::into_http_error);
                    // Policy denials count above; a redirect denied mid-flight counts here.
                    if matches!(outcome, Err(HttpError::Denied(_))) {
                        self.stats.denied.fetch_add(1, Ordering::Relaxed);
                    }
                    return outcome;
                }
            }
        }
    }

    /// An attempt a hook answered: counted as a request, no network.
    fn answered(&self, answer: Answer) -> Result<(Response, Option<NetworkBody>), Failure> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        match answer {
            Answer::Response(resp) => {
                self.stats.bytes_in.fetch_add(resp.body.len() as u64, Ordering::Relaxed);
                Ok((resp, None))
            }
            Answer::Error { error, connect: true } => Err(Failure::Connect(error)),
            Answer::Error { error, .. } => Err(Failure::Other(error)),
        }
    }

    /// Waits for this host's next slot under the per-host rate.
    async fn pace(&self, url: &url::Url) {
        if let Some(pacer) = &self.pacer {
            pacer.wait(url.host_str().unwrap_or_default()).await;
        }
    }

    /// One attempt: the request and the redirects it leads to, each hop checked against the
    /// policy. On a hop to another origin the connector's headers are dropped (unless the
    /// options keep them); 303, and 301/302 after a POST, continue as a GET without the body.
    /// With `stream` the final body is left unread; the request timeout then bounds the wait
    /// for the headers, and the read timeout each piece of the body.
    async fn attempt(
        &self,
        method: &http::Method,
        url: &url::Url,
        headers: &HeaderMap,
        req: &Request,
        stream: bool,
    ) -> Result<(Response, Option<NetworkBody>), Failure> {
        self.pace(url).await;
        let _permit = self.in_flight.acquire().await.expect("the semaphore is never closed");
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        // The body copied once: each hop shares it.
        let (mut method, mut url, mut body) = (method.clone(), url.clone(), req.body.clone().map(bytes::Bytes::from));
        let mut forward_headers = true;
        let mut hops = 0;
        loop {
            let client = self.client(&url)?;
            if let Some(body) = &body {
                self.stats.bytes_out.fetch_add(body.len() as u64, Ordering::Relaxed);
            }
            let request = outgoing(&method, &url, forward_headers.then_some(headers), body.clone())?;
            // A streamed body may take longer than a request may: the request timeout bounds
            // its head, the read timeout each wait for more.
            let now = tokio::time::Instant::now();
            let head_by = now + self.options.request_timeout;
            let body_by = if stream { now + STREAMED_BODY_TIMEOUT } else { head_by };
            let (head, network) = client.send(request, head_by, body_by).await.map_err(|e| failure(e, &url))?;
            let redirected = head.status.is_redirection();
            let Some(location) = head.headers.get(header::LOCATION).filter(|_| redirected) else {
                return if stream {
                    Ok((answer(&head, Vec::new()), Some(network)))
                } else {
                    self.read_body(&head, network, &url).await.map(|r| (r, None))
                };
            };
            if hops == MAX_REDIRECTS {
                return Err(Failure::Other(HttpError::Denied(format!("more than {MAX_REDIRECTS} redirects"))));
            }
            hops += 1;
            let next =
                std::str::from_utf8(location.as_bytes()).ok().and_then(|l| url.join(l).ok()).ok_or_else(|| {
                    Failure::Other(HttpError::Connection(format!("{url} redirected to an invalid location")))
                })?;
            if let Err(why) = self.policy.check(&next) {
                return Err(Failure::Other(HttpError::Denied(format!("the redirect to {next} is denied: {why}"))));
            }
            if !same_origin(&url, &next) {
                forward_headers &= self.options.forward_headers_on_redirect;
            }
            let status = head.status.as_u16();
            if status == 303 && method != http::Method::HEAD
                || matches!(status, 301 | 302) && method == http::Method::POST
            {
                method = http::Method::GET;
                body = None;
            }
            url = next;
        }
    }

    /// A response's status, headers and body, the body capped in bytes.
    async fn read_body(
        &self,
        head: &http::response::Parts,
        mut network: NetworkBody,
        url: &url::Url,
    ) -> Result<Response, Failure> {
        let cap = self.options.max_response_bytes;
        let too_large = || Failure::Other(HttpError::TooLarge(format!("{url} answered more than {cap} bytes")));
        let declared = network.declared_len();
        if declared.is_some_and(|len| len > cap) {
            return Err(too_large());
        }
        let mut body = Vec::with_capacity(declared.unwrap_or(0).min(MAX_PREALLOCATION) as usize);
        while let Some(chunk) = network.chunk().await.map_err(|e| failure(e, url))? {
            if (body.len() + chunk.len()) as u64 > cap {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        self.stats.bytes_in.fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(answer(head, body))
    }

    fn take_retry(&self) -> bool {
        self.retry_budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1)).is_ok()
    }

    /// Exponential backoff with jitter: half the step fixed, half random.
    fn backoff(&self, attempt: u32) -> Duration {
        let step = self.options.backoff_base.saturating_mul(1 << (attempt - 1).min(20)).min(self.options.backoff_max);
        let half = step / 2;
        half + Duration::from_nanos(fastrand::u64(0..=half.as_nanos() as u64))
    }

    /// `Retry-After` in seconds or as an HTTP date, honoured exactly.
    fn retry_after(&self, resp: &Response) -> Option<Duration> {
        let value = resp.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("retry-after"))?.1.trim();
        if let Ok(secs) = value.parse::<u64>() {
            return Some(Duration::from_secs(secs));
        }
        let when = httpdate::parse_http_date(value).ok()?;
        Some(when.duration_since(SystemTime::now()).unwrap_or_default())
    }
}

/// A response's status and headers, with `body`.
fn answer(head: &http::response::Parts, body: Vec<u8>) -> Response {
    let headers = head
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    Response { status: head.status.as_u16(), headers, body }
}

/// What goes on the wire for one hop: the URL's user and password, if any, as basic
/// authentication (unless the connector set its own); the host's user agent and `Accept: */*`
/// unless the connector set them.
fn outgoing(
    method: &http::Method,
    url: &url::Url,
    headers: Option<&HeaderMap>,
    body: Option<bytes::Bytes>,
) -> Result<http::Request<RequestBody>, Failure> {
    let invalid =
        |e: &dyn std::fmt::Display| Failure::Other(HttpError::InvalidRequest(format!("invalid URL {url}: {e}")));
    let (uri, basic) = if url.username().is_empty() && url.password().is_none() {
        (without_fragment(url.as_str()).parse::<http::Uri>().map_err(|e| invalid(&e))?, None)
    } else {
        let mut bare = url.clone();
        let _ = bare.set_username("");
        let _ = bare.set_password(None);
        let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8_lossy().into_owned();
        let pair = format!("{}:{}", decode(url.username()), url.password().map(decode).unwrap_or_default());
        let uri = without_fragment(bare.as_str()).parse::<http::Uri>().map_err(|e| invalid(&e))?;
        (uri, Some(basic_auth(&pair)))
    };
    let body = body.map_or_else(RequestBody::default, RequestBody::new);
    let mut request = http::Request::new(body);
    *request.method_mut() = method.clone();
    *request.uri_mut() = uri;
    let map = request.headers_mut();
    if let Some(headers) = headers {
        map.clone_from(headers);
    }
    if let Some(basic) = basic {
        map.entry(header::AUTHORIZATION).or_insert(basic);
    }
    map.entry(header::USER_AGENT).or_insert(HeaderValue::from_static(concat!("sluice/", env!("CARGO_PKG_VERSION"))));
    map.entry(header::ACCEPT).or_insert(HeaderValue::from_static("*/*"));
    Ok(request)
}

fn without_fragment(url: &str) -> &str {
    url.split_once('#').map_or(url, |(before, _)| before)
}

fn basic_auth(pair: &str) -> HeaderValue {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(pair);
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a valid header value");
    value.set_sensitive(true);
    value
}

fn is_retryable_status(status: u16) -> bool {
    matches!(status, 500 | 502 | 503 | 504) || (507..=599).contains(&status)
}

/// An attempt's failure; connection failures before anything was sent are safe to retry for
/// any method.
enum Failure {
    Connect(HttpError),
    Other(HttpError),
}

impl Failure {
    fn into_http_error(self) -> HttpError {
        match self {
            Failure::Connect(e) | Failure::Other(e) => e,
        }
    }
}

/// A client's failure as the guest sees it, naming the URL.
fn failure(e: ClientError, url: &url::Url) -> Failure {
    match e {
        ClientError::Connect(text) => Failure::Connect(HttpError::Connection(format!("{url}: {text}"))),
        ClientError::Timeout(text) => Failure::Other(HttpError::Timeout(format!("{url}: {text}"))),
        ClientError::Other(text) => Failure::Other(HttpError::Connection(format!("{url}: {text}"))),
        ClientError::Denied(text) => Failure::Other(HttpError::Denied(text)),
    }
}

/// A URL as spans show it: without its query or fragment, nor any user and password.
fn without_query(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            let _ = parsed.set_username("");
            let _ = parsed.set_password(None);
            parsed.to_string()
        }
        Err(_) => String::from("(not a URL)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server on loopback that reads each connection's request and writes `answer`.
    async fn serve(answer: Vec<u8>) -> std::net::SocketAddr {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let answer = Arc::new(answer);
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut request = vec![0u8; 4096];
                    let _ = socket.read(&mut request).await;
                    let _ = socket.write_all(&answer).await;
                });
            }
        });
        addr
    }

    #[test]
    fn guests_cannot_set_routing_headers_or_flood() {
        let h = |n: &str| vec![(n.to_string(), "x".to_string())];
        for name in ["Host", "connection", "Transfer-Encoding", "Proxy-Authorization", "upgrade"] {
            let err = check_headers(&h(name)).unwrap_err();
            assert!(matches!(&err, HttpError::InvalidRequest(m) if m.contains(name)), "{name}: {err:?}");
        }
        assert!(check_headers(&h("x-api-key")).is_ok());
        let many: Vec<_> = (0..101).map(|i| (format!("x-{i}"), "v".to_string())).collect();
        assert!(matches!(check_headers(&many), Err(HttpError::InvalidRequest(m)) if m.contains("101 headers")));
        let big = vec![("x-big".to_string(), "v".repeat(70 << 10))];
        assert!(matches!(check_headers(&big), Err(HttpError::InvalidRequest(m)) if m.contains("bytes")));
        assert!(check_headers(&h("bad name")).is_err());
    }

    /// An embedder's observe-only hook (metrics) turned streaming off, so every streamed body
    /// over the response cap failed; only hooks that need bodies do now.
    #[tokio::test]
    async fn observe_only_hooks_keep_bodies_streamed() {
        use super::super::hooks::{Attempt, BoxFuture, Outcome, Timing};
        struct Counting(std::sync::atomic::AtomicU64, bool);
        impl HttpHooks for Counting {
            fn needs_bodies(&self) -> bool {
                self.1
            }
            fn observe<'a>(&'a self, _: &'a Attempt<'a>, _: Outcome<'a>, _: Timing) -> BoxFuture<'a> {
                self.0.fetch_add(1, Ordering::Relaxed);
                Box::pin(async {})
            }
        }
        let body = "line\n".repeat(2000);
        let answer = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
        let addr = serve(answer.into_bytes()).await;
        let grant = crate::net::HostPort::parse(&format!("http://{addr}")).unwrap();
        let open = |needs_bodies: bool| {
            let (grant, hook) = (grant.clone(), Arc::new(Counting(Default::default(), needs_bodies)));
            async move {
                // A cap under the body's 10,000 bytes: read whole, it is too large.
                let options = HttpOptions { max_response_bytes: 1000, ..Default::default() };
                let egress =
                    Egress::new(EgressPolicy::new([grant.clone()], [grant]), options).unwrap().with_hook(hook.clone());
                let request =
                    Request { method: "GET".into(), url: format!("http://{addr}/lines"), headers: vec![], body: None };
                let result = egress.open(request, "{}").await.map(|(resp, source)| (resp.status, source));
                (result, hook.0.load(Ordering::Relaxed))
            }
        };
        let (streamed, seen) = open(false).await;
        let (status, source) = streamed.expect("streamed past the cap");
        assert_eq!((status, seen), (200, 1), "the hook saw the attempt");
        assert!(matches!(source, BodySource::Network(_)));
        let (whole, _) = open(true).await;
        assert!(matches!(whole, Err(HttpError::TooLarge(_))), "a hook that needs bodies reads them whole");
    }

    /// A run talking plain http never loads root certificates (4-6 ms of CPU at every start);
    /// its first https request builds the client that has them, as does `prepare` ahead of time
    /// for a connector that declared a host it reaches over https.
    #[tokio::test]
    async fn root_certificates_are_loaded_only_for_https() {
        let addr = serve(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_vec()).await;
        let grant = crate::net::HostPort::parse(&format!("http://{addr}")).unwrap();
        // One attempt: the https one fails, and is not tried again.
        let options = HttpOptions { max_attempts: 1, ..Default::default() };
        let egress = Arc::new(Egress::new(EgressPolicy::new([grant.clone()], [grant]), options).unwrap());
        assert!(egress.prepare().is_none(), "a host declared with http:// needs no certificates ahead");
        let get = |scheme: &str| Request {
            method: "GET".into(),
            url: format!("{scheme}://{addr}/"),
            headers: vec![],
            body: None,
        };
        let response = egress.send(get("http"), "{}").await.expect("plain http is answered");
        assert_eq!((response.status, response.body.as_slice()), (200, &b"ok"[..]));
        assert!(egress.plain.get().is_some_and(|c| c.is_ok()));
        assert!(egress.tls.get().is_none(), "plain http loaded no root certificates");
        // The server speaks no TLS: the request fails, after the client with the roots is built.
        assert!(egress.send(get("https"), "{}").await.is_err());
        assert!(egress.tls.get().is_some_and(|c| c.is_ok()), "https builds the client with root certificates");
        let declared = crate::net::HostPort::parse("api.example.com").unwrap();
        let egress =
            Arc::new(Egress::new(EgressPolicy::new([declared.clone()], [declared]), HttpOptions::default()).unwrap());
        egress.prepare().expect("an https host declared: built ahead").await.unwrap();
        assert!(egress.tls.get().is_some_and(|c| c.is_ok()) && egress.plain.get().is_none());
    }

    /// What goes on the wire: a URL's user and password become basic authentication (the
    /// connector's own header wins), the fragment stays home, and the host's user agent and
    /// `Accept` fill in only what the connector left out.
    #[test]
    fn a_hop_carries_the_urls_credentials_as_a_header_not_in_its_target() {
        let url = url::Url::parse("http://us%40er:p%3Ass@127.0.0.1:9/path?q=1#frag").unwrap();
        let request = outgoing(&http::Method::GET, &url, None, None).ok().unwrap();
        assert_eq!(request.uri().to_string(), "http://127.0.0.1:9/path?q=1");
        let auth = request.headers()[header::AUTHORIZATION].to_str().unwrap();
        assert_eq!(auth, "Basic dXNAZXI6cDpzcw==", "us@er:p:ss, percent-decoded");
        assert!(request.headers()[header::AUTHORIZATION].is_sensitive());
        assert!(request.headers()[header::USER_AGENT].to_str().unwrap().starts_with("sluice/"));
        assert_eq!(request.headers()[header::ACCEPT], "*/*");
        let own = check_headers(&[
            ("Authorization".into(), "Bearer t".into()),
            ("User-Agent".into(), "mine".into()),
            ("Accept".into(), "application/json".into()),
        ])
        .unwrap();
        let request =
            outgoing(&http::Method::POST, &url, Some(&own), Some(bytes::Bytes::from_static(b"{}"))).ok().unwrap();
        assert_eq!(request.headers()[header::AUTHORIZATION], "Bearer t");
        assert_eq!(request.headers()[header::USER_AGENT], "mine");
        assert_eq!(request.headers()[header::ACCEPT], "application/json");
        assert_eq!(http_body::Body::size_hint(request.body()).exact(), Some(2));
    }

    #[tokio::test]
    async fn a_rate_too_small_to_mean_anything_does_not_panic() {
        for rate in [1e-300, 0.0, -1.0, f64::NAN] {
            let options = HttpOptions { max_rate_per_host: Some(rate), ..Default::default() };
            let egress = Egress::new(EgressPolicy::default(), options).unwrap();
            // The first request to a host goes at once; the next would wait at most an hour.
            egress.pace(&"http://h/".parse().unwrap()).await;
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let opts = HttpOptions {
            backoff_base: Duration::from_millis(100),
            backoff_max: Duration::from_secs(1),
            ..Default::default()
        };
        let egress = Egress::new(EgressPolicy::default(), opts).unwrap();
        for _ in 0..50 {
            let d1 = egress.backoff(1);
            assert!(d1 >= Duration::from_millis(50) && d1 <= Duration::from_millis(100));
            let d3 = egress.backoff(3);
            assert!(d3 >= Duration::from_millis(200) && d3 <= Duration::from_millis(400));
            assert!(egress.backoff(30) <= Duration::from_secs(1));
        }
    }
}
