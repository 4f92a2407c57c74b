//! The one place that opens sockets for guests: egress policy, the HTTP client, timeouts,
//! retries with backoff, `Retry-After`, and response-size caps.
//!
//! A request is allowed only when its `host:port` was both declared by the plugin (its
//! `capabilities`) and granted by the operator (`--allow-host`); anything else fails with
//! `denied` before any network I/O. Redirects are re-checked hop by hop.

use crate::bindings::{HttpError, Request, Response};
use crate::recording::{Answer, Cassette, Outcome, Recorder};
use crate::secrets::Secrets;
use anyhow::{Result, bail};
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::Mutex;
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
    /// Answer every request from this recording instead of the network (`--http-replay`).
    pub replay: Option<Arc<Cassette>>,
    /// Record every attempt into the run's replay storage (`--record-http`).
    pub record: bool,
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
            replay: None,
            record: false,
        }
    }
}

/// A host an operator grants or a plugin declares: `[http://]HOST[:PORT]`. HOST is a name, an
/// address, or a pattern `*.example.com` (any subdomain). Without a port it means the scheme's
/// default port (80 for http, 443 for https). Plain http is allowed only by a grant written with
/// `http://`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct HostPort {
    pub host: String,
    pub port: Option<u16>,
    /// Plain http is allowed too.
    pub http: bool,
}

impl HostPort {
    pub fn parse(text: &str) -> Result<Self> {
        let original = text.trim();
        let (http, text) = match original.split_once("://") {
            Some(("http", rest)) => (true, rest),
            Some(("https", rest)) => (false, rest),
            Some((other, _)) => bail!("{original:?}: only http:// and https:// hosts can be granted, not {other}://"),
            None => (false, original),
        };
        let text = text.trim_end_matches('/');
        let (host, port) = if let Some(rest) = text.strip_prefix('[') {
            let (host, after) = rest.split_once(']').ok_or_else(|| anyhow::anyhow!("unclosed [ in {original:?}"))?;
            (format!("[{}]", host.to_ascii_lowercase()), after.strip_prefix(':'))
        } else {
            match text.rsplit_once(':') {
                Some((h, p)) => (h.to_ascii_lowercase(), Some(p)),
                None => (text.to_ascii_lowercase(), None),
            }
        };
        if host.is_empty() || host.contains(['/', '@', ' ', '?', '#']) || host[1..].contains('*') {
            bail!("{original:?} is not a host, host:port or *.domain pattern");
        }
        if host.starts_with('*') && !host.starts_with("*.") {
            bail!("{original:?}: a pattern must look like *.example.com");
        }
        let port = port
            .map(|p| p.parse::<u16>().map_err(|_| anyhow::anyhow!("{original:?} has an invalid port")))
            .transpose()?;
        Ok(HostPort { host, port, http })
    }

    fn matches_host(&self, host: &str) -> bool {
        match self.host.strip_prefix("*.") {
            Some(domain) => {
                host.len() > domain.len() + 1
                    && host.ends_with(domain)
                    && host[..host.len() - domain.len()].ends_with('.')
            }
            None => self.host == host,
        }
    }

    fn matches(&self, host: &str, port: u16, default_port: u16) -> bool {
        self.matches_host(host) && self.port.unwrap_or(default_port) == port
    }
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.http {
            f.write_str("http://")?;
        }
        match self.port {
            Some(p) => write!(f, "{}:{p}", self.host),
            None => f.write_str(&self.host),
        }
    }
}

/// Addresses a guest may reach only when the operator granted the address itself: loopback,
/// private, link-local (cloud metadata lives there), shared, unspecified and multicast ranges.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
        }
    }
}

/// Who may be reached: what the plugin declared, limited to what the operator granted.
#[derive(Debug, Clone, Default)]
pub struct EgressPolicy {
    declared: BTreeSet<HostPort>,
    granted: BTreeSet<HostPort>,
}

impl EgressPolicy {
    pub fn new(declared: impl IntoIterator<Item = HostPort>, granted: impl IntoIterator<Item = HostPort>) -> Self {
        EgressPolicy { declared: declared.into_iter().collect(), granted: granted.into_iter().collect() }
    }

    pub fn declared(&self) -> impl Iterator<Item = &HostPort> {
        self.declared.iter()
    }
    pub fn granted(&self) -> impl Iterator<Item = &HostPort> {
        self.granted.iter()
    }

    /// Declared hosts the operator has not granted: requests to them will be denied. A missing
    /// port stands for a scheme's default port, 80 or 443. A declared pattern counts as granted
    /// when the operator granted part of it (`api.example.com` of `*.example.com`): the rest of
    /// the pattern stays denied request by request.
    pub fn ungranted(&self) -> Vec<&HostPort> {
        let default = |p: Option<u16>| p.is_none_or(|p| p == 80 || p == 443);
        let covers = |g: &HostPort, d: &HostPort| {
            (!d.http || g.http)
                && (g.host == d.host || g.matches_host(&d.host) || d.matches_host(&g.host))
                && (g.port == d.port || (g.port.is_none() && default(d.port)) || (d.port.is_none() && default(g.port)))
        };
        self.declared.iter().filter(|d| !self.granted.iter().any(|g| covers(g, d))).collect()
    }

    /// `Ok` when the URL may be requested, else why not. Names are checked again once resolved
    /// (see [`CheckedResolver`]).
    pub fn check(&self, url: &url::Url) -> Result<(), String> {
        let default_port = match url.scheme() {
            "http" => 80,
            "https" => 443,
            other => return Err(format!("scheme {other:?} is not allowed (only http and https)")),
        };
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_ascii_lowercase(),
            Some(url::Host::Ipv4(ip)) => ip.to_string(),
            Some(url::Host::Ipv6(ip)) => format!("[{ip}]"),
            None => return Err(format!("{url} has no host")),
        };
        let port = url.port().unwrap_or(default_port);
        let target = format!("{host}:{port}");
        if !self.declared.iter().any(|d| d.matches(&host, port, default_port)) {
            return Err(format!("{target} is not among the hosts the plugin declared for this config"));
        }
        let grants: Vec<&HostPort> = self.granted.iter().filter(|g| g.matches(&host, port, default_port)).collect();
        if grants.is_empty() {
            let how = if url.scheme() == "http" { format!("http://{target}") } else { target.clone() };
            return Err(format!("{target} is not granted by the operator (grant it with --allow-host {how})"));
        }
        if url.scheme() == "http" && !grants.iter().any(|g| g.http) {
            return Err(format!(
                "plain http to {target} is not granted, only https (grant it with --allow-host http://{target})"
            ));
        }
        Ok(())
    }
}

/// Resolves names for the HTTP client and refuses internal addresses: a name is never allowed
/// to lead to loopback, private or metadata addresses (only an address grant can), and the
/// client connects to exactly the addresses checked here, so DNS rebinding cannot slip past.
struct CheckedResolver;

impl reqwest::dns::Resolve for CheckedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(internal) = addrs.iter().find(|a| is_internal(a.ip())) {
                let message = format!(
                    "{host} resolves to the internal address {}, which is reachable only when granted by address",
                    internal.ip()
                );
                return Err(Box::new(Denial(message)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Counters for the run summary.
#[derive(Debug, Default)]
pub struct EgressStats {
    pub requests: AtomicU64,
    pub retries: AtomicU64,
    pub denied: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
}

/// Performs every request of one run.
pub struct Egress {
    client: reqwest::Client,
    policy: Arc<EgressPolicy>,
    options: HttpOptions,
    retry_budget: AtomicU64,
    in_flight: tokio::sync::Semaphore,
    /// When each host may next be sent a request, under the per-host rate.
    next_slot: Mutex<HashMap<String, Instant>>,
    pub stats: EgressStats,
    /// Every attempt is handed to it (`--record-http`).
    recorder: Option<Recorder>,
    /// Masks requests the way the recording stored them, to find their answers.
    secrets: Secrets,
}

/// A denial found inside the HTTP client (a redirect hop, a name resolving to an internal
/// address); it reaches the guest as `denied`.
#[derive(Debug)]
struct Denial(String);
impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Denial {}

const MAX_REDIRECTS: usize = 10;

impl Egress {
    pub fn new(policy: EgressPolicy, options: HttpOptions) -> Result<Self> {
        let policy = Arc::new(policy);
        let redirect_policy = policy.clone();
        let client = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .timeout(options.request_timeout)
            // Proxies from the environment would send guest traffic somewhere nobody granted.
            .no_proxy()
            .user_agent(concat!("sluice/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(CheckedResolver))
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= MAX_REDIRECTS {
                    return attempt.error(Denial(format!("more than {MAX_REDIRECTS} redirects")));
                }
                match redirect_policy.check(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(why) => {
                        let to = attempt.url().to_string();
                        attempt.error(Denial(format!("the redirect to {to} is denied: {why}")))
                    }
                }
            }))
            .build()?;
        Ok(Egress {
            client,
            policy,
            retry_budget: AtomicU64::new(options.retry_budget),
            in_flight: tokio::sync::Semaphore::new(options.max_in_flight.max(1)),
            next_slot: Mutex::new(HashMap::new()),
            options,
            stats: EgressStats::default(),
            recorder: None,
            secrets: Secrets::default(),
        })
    }

    /// Records every attempt with `recorder` (if any); `secrets` are the run's, to match
    /// requests against a recording masked with them.
    pub fn with_recording(mut self, recorder: Option<Recorder>, secrets: Secrets) -> Self {
        self.recorder = recorder;
        self.secrets = secrets;
        self
    }

    pub fn policy(&self) -> &EgressPolicy {
        &self.policy
    }

    /// Sends a guest's request: policy check, then attempts with backoff until one is final.
    /// `context` (JSON) says what the request is for, in recordings.
    pub async fn send(&self, req: Request, context: &str) -> Result<Response, HttpError> {
        let url = url::Url::parse(&req.url)
            .map_err(|e| HttpError::InvalidRequest(format!("invalid URL {:?}: {e}", req.url)))?;
        if let Err(why) = self.policy.check(&url) {
            self.stats.denied.fetch_add(1, Ordering::Relaxed);
            return Err(HttpError::Denied(why));
        }
        let method = reqwest::Method::from_bytes(req.method.to_ascii_uppercase().as_bytes())
            .map_err(|_| HttpError::InvalidRequest(format!("invalid method {:?}", req.method)))?;
        let idempotent = matches!(method.as_str(), "GET" | "HEAD" | "PUT" | "DELETE" | "OPTIONS");
        let mut attempt = 1;
        loop {
            let (started, clock) = (SystemTime::now(), Instant::now());
            let outcome = match &self.options.replay {
                Some(cassette) => self.answer(cassette, &method, &url, &req),
                None => self.attempt(&method, &url, &req).await,
            };
            if let Some(recorder) = &self.recorder {
                let seen = match &outcome {
                    Ok(resp) => Outcome::Response(resp),
                    Err(Failure::Connect(error)) => Outcome::Error { error, connect: true },
                    Err(Failure::Other(error)) => Outcome::Error { error, connect: false },
                };
                recorder.record(context, attempt, started, clock.elapsed(), method.as_str(), &url, &req, seen).await;
            }
            let delay = match &outcome {
                Ok(resp) if resp.status == 429 => Some(self.retry_after(resp).unwrap_or_else(|| self.backoff(attempt))),
                Ok(resp) if idempotent && is_retryable_status(resp.status) => {
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
                    // A replay has nobody to wait for.
                    if self.options.replay.is_none() {
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

    /// An attempt answered from a recording: no network. A request the recording has no
    /// (more) answers to is denied, naming it.
    fn answer(
        &self,
        cassette: &Cassette,
        method: &reqwest::Method,
        url: &url::Url,
        req: &Request,
    ) -> Result<Response, Failure> {
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        match cassette.answer(method.as_str(), url, req.body.as_deref(), &self.secrets) {
            Some(Answer::Response(resp)) => {
                self.stats.bytes_in.fetch_add(resp.body.len() as u64, Ordering::Relaxed);
                Ok(resp)
            }
            Some(Answer::Error { error, connect: true }) => Err(Failure::Connect(error)),
            Some(Answer::Error { error, .. }) => Err(Failure::Other(error)),
            None => Err(Failure::Other(HttpError::Denied(format!(
                "no recorded answer for {method} {} in the recording at {} (HTTP is replayed: nothing goes to the network)",
                crate::recording::mask_url(url.as_str(), &self.secrets),
                cassette.uri
            )))),
        }
    }

    /// Waits for this host's next slot under the per-host rate.
    async fn pace(&self, url: &url::Url) {
        let Some(rate) = self.options.max_rate_per_host else { return };
        let interval = Duration::from_secs_f64(1.0 / rate);
        let wait = {
            let mut slots = self.next_slot.lock().unwrap_or_else(|e| e.into_inner());
            let now = Instant::now();
            let slot = slots.entry(url.host_str().unwrap_or_default().to_string()).or_insert(now);
            let start = (*slot).max(now);
            *slot = start + interval;
            start - now
        };
        tokio::time::sleep(wait).await;
    }

    async fn attempt(&self, method: &reqwest::Method, url: &url::Url, req: &Request) -> Result<Response, Failure> {
        self.pace(url).await;
        let _permit = self.in_flight.acquire().await.expect("the semaphore is never closed");
        let mut builder = self.client.request(method.clone(), url.clone());
        for (name, value) in &req.headers {
            builder = builder.header(name.as_str(), value.as_str());
        }
        if let Some(body) = &req.body {
            self.stats.bytes_out.fetch_add(body.len() as u64, Ordering::Relaxed);
            builder = builder.body(body.clone());
        }
        self.stats.requests.fetch_add(1, Ordering::Relaxed);
        let mut resp = builder.send().await.map_err(classify)?;
        let cap = self.options.max_response_bytes;
        let too_large = || Failure::Other(HttpError::TooLarge(format!("{url} answered more than {cap} bytes")));
        if resp.content_length().is_some_and(|len| len > cap) {
            return Err(too_large());
        }
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
            .collect();
        let mut body = Vec::with_capacity(resp.content_length().unwrap_or(0) as usize);
        while let Some(chunk) = resp.chunk().await.map_err(classify)? {
            if (body.len() + chunk.len()) as u64 > cap {
                return Err(too_large());
            }
            body.extend_from_slice(&chunk);
        }
        self.stats.bytes_in.fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(Response { status, headers, body })
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

fn classify(e: reqwest::Error) -> Failure {
    let mut source: Option<&dyn std::error::Error> = Some(&e);
    while let Some(err) = source {
        if let Some(denial) = err.downcast_ref::<Denial>() {
            return Failure::Other(HttpError::Denied(denial.0.clone()));
        }
        source = err.source();
    }
    let text = error_chain(&e);
    if e.is_connect() {
        Failure::Connect(HttpError::Connection(text))
    } else if e.is_timeout() {
        Failure::Other(HttpError::Timeout(text))
    } else if e.is_builder() || e.is_request() && e.to_string().contains("builder") {
        Failure::Other(HttpError::InvalidRequest(text))
    } else {
        Failure::Other(HttpError::Connection(text))
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(declared: &[&str], granted: &[&str]) -> EgressPolicy {
        EgressPolicy::new(
            declared.iter().map(|h| HostPort::parse(h).unwrap()),
            granted.iter().map(|h| HostPort::parse(h).unwrap()),
        )
    }

    #[test]
    fn host_port_parsing() {
        let hp = |host: &str, port, http| HostPort { host: host.into(), port, http };
        assert_eq!(HostPort::parse("Example.com:8080").unwrap(), hp("example.com", Some(8080), false));
        assert_eq!(HostPort::parse("[::1]:80").unwrap(), hp("[::1]", Some(80), false));
        assert_eq!(HostPort::parse("http://127.0.0.1:9/").unwrap(), hp("127.0.0.1", Some(9), true));
        assert_eq!(HostPort::parse("*.x.io").unwrap(), hp("*.x.io", None, false));
        assert_eq!(HostPort::parse("api.x.io").unwrap().port, None);
        assert!(HostPort::parse("ftp://x").is_err());
        assert!(HostPort::parse("a*.x.io").is_err());
        assert!(HostPort::parse("*x.io").is_err());
        assert!(HostPort::parse("x:99999").is_err());
    }

    #[test]
    fn policy_is_declared_and_granted() {
        let p = policy(&["127.0.0.1:8080", "api.x.io"], &["http://127.0.0.1:8080"]);
        assert!(p.check(&"http://127.0.0.1:8080/items".parse().unwrap()).is_ok());
        let e = p.check(&"https://api.x.io/v1".parse().unwrap()).unwrap_err();
        assert!(e.contains("--allow-host api.x.io:443"), "{e}");
        let e = p.check(&"http://127.0.0.1:9999/".parse().unwrap()).unwrap_err();
        assert!(e.contains("not among the hosts the plugin declared"), "{e}");
        assert!(p.check(&"ftp://127.0.0.1:8080/".parse().unwrap()).is_err());
        assert_eq!(p.ungranted().len(), 1);
        // A grant without a port covers a declaration of the default port, and the reverse.
        assert!(policy(&["api.x.io:443"], &["api.x.io"]).ungranted().is_empty());
        assert!(policy(&["api.x.io"], &["api.x.io:443"]).ungranted().is_empty());
        assert_eq!(policy(&["api.x.io:8443"], &["api.x.io"]).ungranted().len(), 1);
        // A pattern is covered by a grant of part of it, and by a wider pattern.
        assert!(policy(&["*.x.io"], &["api.x.io"]).ungranted().is_empty());
        assert!(policy(&["api.x.io"], &["*.x.io"]).ungranted().is_empty());
        assert_eq!(policy(&["*.x.io"], &["api.y.io"]).ungranted().len(), 1);
    }

    #[test]
    fn plain_http_needs_an_http_grant() {
        let p = policy(&["127.0.0.1:8080"], &["127.0.0.1:8080"]);
        let e = p.check(&"http://127.0.0.1:8080/".parse().unwrap()).unwrap_err();
        assert!(e.contains("--allow-host http://127.0.0.1:8080"), "{e}");
        let p = policy(&["127.0.0.1:8080"], &["http://127.0.0.1:8080"]);
        assert!(p.check(&"http://127.0.0.1:8080/".parse().unwrap()).is_ok());
    }

    #[test]
    fn wildcards_match_subdomains_only() {
        let p = policy(&["*.x.io"], &["*.x.io"]);
        assert!(p.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"https://a.b.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"https://x.io/".parse().unwrap()).is_err());
        assert!(p.check(&"https://evilx.io/".parse().unwrap()).is_err());
        let narrow = policy(&["*.x.io"], &["api.x.io"]);
        assert!(narrow.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(narrow.check(&"https://other.x.io/".parse().unwrap()).is_err());
    }

    #[test]
    fn internal_addresses() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00:ec2::254",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_internal(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "2606:4700::1111", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(!is_internal(ip.parse().unwrap()), "{ip}");
        }
    }

    #[test]
    fn default_ports() {
        let p = policy(&["api.x.io"], &["api.x.io:443"]);
        assert!(p.check(&"https://api.x.io/".parse().unwrap()).is_ok());
        assert!(p.check(&"http://api.x.io/".parse().unwrap()).is_err());
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
