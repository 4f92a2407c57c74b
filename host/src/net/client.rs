//! The HTTP/1.1 client egress sends through: hyper's pooled client over a connector that
//! resolves names through [`CheckedResolver`], with rustls for https.
//!
//! Egress follows redirects, retries and times attempts itself, so the client does only the
//! exchange. reqwest did the same exchange through layers of its own (a redirect policy that
//! was off, its timeouts, the URL parsed again for every response): 6-8% of a run of 10,000
//! one-record partitions (docs/architecture.md, "What a partition costs").

use super::grants::is_internal;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

type Connector = TimedConnect<hyper_rustls::HttpsConnector<HttpConnector<CheckedResolver>>>;

/// A request's body: whole, as guests send them.
pub type RequestBody = http_body_util::Full<Bytes>;

/// A denial found inside the HTTP client (a name resolving to an internal address); it reaches
/// the guest as `denied`.
#[derive(Debug)]
struct Denial(String);
impl fmt::Display for Denial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for Denial {}

/// Resolves names for the HTTP client and refuses internal addresses: a name is never allowed
/// to lead to loopback, private or metadata addresses (only an address grant can), and the
/// client connects to exactly the addresses checked here, so DNS rebinding cannot slip past.
/// (An address in the URL is not resolved: the egress policy checked it.)
#[derive(Clone)]
pub struct CheckedResolver;

type Resolving = Pin<Box<dyn Future<Output = Result<std::vec::IntoIter<SocketAddr>, BoxError>> + Send>>;
type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower_service::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = BoxError;
    type Future = Resolving;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            if let Some(internal) = addrs.iter().find(|a| is_internal(a.ip())) {
                let message = format!(
                    "{host} resolves to the internal address {}, which is reachable only when granted by address",
                    internal.ip()
                );
                return Err(Box::new(Denial(message)) as BoxError);
            }
            Ok(addrs.into_iter())
        })
    }
}

/// A connector whose whole connect (the name resolved, the TCP connection, the TLS handshake)
/// must finish within the connect timeout, as reqwest's did: the TCP connector bounds only its
/// connection, so a server that accepted and then said nothing held a request until the read
/// timeout, and its failure was not a connect failure (which any method may retry).
#[derive(Clone)]
struct TimedConnect<C> {
    inner: C,
    timeout: Duration,
}

/// The connect took longer than the connect timeout.
#[derive(Debug)]
struct ConnectTimedOut(Duration);
impl fmt::Display for ConnectTimedOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "connecting timed out after {:.1} s", self.0.as_secs_f64())
    }
}
impl std::error::Error for ConnectTimedOut {}

impl<C> tower_service::Service<http::Uri> for TimedConnect<C>
where
    C: tower_service::Service<http::Uri> + Send,
    C::Future: Send + 'static,
    C::Error: Into<BoxError>,
{
    type Response = C::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<C::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let (connecting, timeout) = (self.inner.call(uri), self.timeout);
        Box::pin(async move {
            match tokio::time::timeout(timeout, connecting).await {
                Ok(connected) => connected.map_err(Into::into),
                Err(_) => Err(Box::new(ConnectTimedOut(timeout)) as BoxError),
            }
        })
    }
}

/// What the client is built with.
pub struct ClientOptions {
    pub connect_timeout: Duration,
    /// Longest wait for the next bytes of an answer: its head, then each piece of its body.
    pub read_timeout: Duration,
    /// Root certificates (the system's and the built-in ones) for https. Without them an https
    /// request fails its handshake: the client for plain http is built without, as loading them
    /// takes 4-6 ms of CPU.
    pub tls_roots: bool,
}

/// A pooled HTTP/1.1 client.
pub struct HttpClient {
    inner: Client<Connector, RequestBody>,
    read_timeout: Duration,
}

/// Why an exchange failed.
#[derive(Debug)]
pub enum ClientError {
    /// Before anything was sent: no connection (refused, unreachable, the name unresolved or
    /// denied, the handshake failed).
    Connect(String),
    /// No answer in time.
    Timeout(String),
    /// The connection failed after the request went out.
    Other(String),
    /// A name resolved to an internal address.
    Denied(String),
}

impl HttpClient {
    pub fn new(options: &ClientOptions) -> Result<Self, String> {
        let mut http = HttpConnector::new_with_resolver(CheckedResolver);
        // https URLs reach it through the TLS connector.
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(options.connect_timeout));
        let mut roots = rustls::RootCertStore::empty();
        if options.tls_roots {
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            // A system store that cannot be read leaves the built-in roots.
            for cert in rustls_native_certs::load_native_certs().certs {
                let _ = roots.add(cert);
            }
        }
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("the host cannot set up TLS: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let connector = TimedConnect { inner: connector, timeout: options.connect_timeout };
        let inner = Client::builder(hyper_util::rt::TokioExecutor::new())
            .pool_timer(hyper_util::rt::TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(HttpClient { inner, read_timeout: options.read_timeout })
    }

    /// Sends `request` and waits for the answer's head until `head_by`, and for at most the
    /// read timeout; the body is left to [`NetworkBody`], read until `body_by`.
    pub async fn send(
        &self,
        request: http::Request<RequestBody>,
        head_by: Instant,
        body_by: Instant,
    ) -> Result<(http::response::Parts, NetworkBody), ClientError> {
        let started = Instant::now();
        let wait = head_by.min(started + self.read_timeout);
        let answer = match tokio::time::timeout_at(wait, self.inner.request(request)).await {
            Ok(answer) => answer.map_err(classify)?,
            Err(_) => {
                let waited = wait.saturating_duration_since(started).as_secs_f64();
                return Err(ClientError::Timeout(format!("no answer: timed out after {waited:.1} s")));
            }
        };
        let (head, body) = answer.into_parts();
        Ok((head, NetworkBody { body, read_timeout: self.read_timeout, deadline: body_by }))
    }
}

/// An answer's body as it arrives.
pub struct NetworkBody {
    body: hyper::body::Incoming,
    read_timeout: Duration,
    deadline: Instant,
}

impl NetworkBody {
    /// The next piece of the body, or `None` at its end; each waited for at most the read
    /// timeout, all of them until the deadline. Trailers are not data.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, ClientError> {
        loop {
            let wait = self.deadline.min(Instant::now() + self.read_timeout);
            let frame = match tokio::time::timeout_at(wait, self.body.frame()).await {
                Ok(frame) => frame,
                Err(_) => return Err(ClientError::Timeout("the body stopped: timed out".to_string())),
            };
            match frame {
                None => return Ok(None),
                Some(Err(e)) => return Err(ClientError::Other(error_chain(&e))),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if !data.is_empty() => return Ok(Some(data)),
                    _ => continue,
                },
            }
        }
    }

    /// The body's declared length, if any.
    pub fn declared_len(&self) -> Option<u64> {
        http_body::Body::size_hint(&self.body).exact()
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Connect(t) | ClientError::Timeout(t) | ClientError::Other(t) | ClientError::Denied(t) => {
                f.write_str(t)
            }
        }
    }
}

/// An error with the errors that caused it, as one line (hyper's own text says only "client
/// error (Connect)").
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

fn classify(e: hyper_util::client::legacy::Error) -> ClientError {
    let mut source: Option<&dyn std::error::Error> = Some(&e);
    while let Some(err) = source {
        if let Some(denial) = err.downcast_ref::<Denial>() {
            return ClientError::Denied(denial.0.clone());
        }
        source = err.source();
    }
    let text = error_chain(&e);
    match e.is_connect() {
        true => ClientError::Connect(text),
        false => ClientError::Other(text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that accepts and then says nothing: an https request to it waits for a TLS
    /// handshake that never comes, and fails as a connect failure once the connect timeout
    /// passes, not at the read timeout.
    #[tokio::test]
    async fn a_handshake_that_never_comes_hits_the_connect_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (held_tx, mut held_rx) = tokio::sync::mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                // Held open, silent, until the test ends.
                let _ = held_tx.send(socket);
            }
        });
        let options = ClientOptions {
            connect_timeout: Duration::from_millis(200),
            read_timeout: Duration::from_secs(30),
            tls_roots: false,
        };
        let client = HttpClient::new(&options).unwrap();
        let request = http::Request::get(format!("https://{addr}/")).body(RequestBody::default()).unwrap();
        let far = Instant::now() + Duration::from_secs(60);
        let started = std::time::Instant::now();
        let failed = client.send(request, far, far).await.err().expect("no handshake, no answer");
        assert!(held_rx.recv().await.is_some(), "the server accepted the connection");
        assert!(matches!(&failed, ClientError::Connect(text) if text.contains("timed out")), "{failed:?}");
        assert!(started.elapsed() < Duration::from_secs(10), "the read timeout (30 s) did not decide");
    }
}
