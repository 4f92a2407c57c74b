//! A small HTTP API that serves deterministic demo data, for the demo connector, the end-to-end
//! tests and the benchmarks.
//!
//! It offers the pagination styles connectors meet in the wild (opaque cursor, page number,
//! next URL, offset, `Link` header), asynchronous report jobs (JSON lines or CSV, plain or
//! gzip), the authentication schemes of declarative manifests (session token, OAuth refresh, API
//! key, basic), and fault injection (latency, extra delay for chosen requests, 429 with
//! `Retry-After`, 500), and counts and logs what it served so tests can assert on client
//! behaviour.
//!
//! Endpoints (timestamps TS are RFC 3339; a malformed one is a 400 naming the parameter):
//! - `GET /items?updated_after=TS&updated_until=TS&limit=N&cursor=C` →
//!   `{"data": [item], "next_cursor": "..." | null}`: items with `updated_after < updated_at <=
//!   updated_until` (either bound optional), in id order; `next_cursor` is null when no item of
//!   the window remains
//! - `GET /items/bounds` → `{"count": N, "first_updated_at": TS | null, "last_updated_at": TS | null}`
//!   over all items (null when there are none)
//! - `GET /accounts?page=P&per_page=N` → `{"data": [account], "page": P, "per_page": N}`
//! - `GET /accounts/{id}/items?updated_after=TS&limit=N&cursor=C` → `{"data": [item], "next": "/accounts/..." | null}`
//! - `POST /reports` `{"account_id"?: A, "updated_after"?: TS, "format"?: "jsonl" | "csv",
//!   "compression"?: "none" | "gzip"}` → 201 `{"id": "job-N", "status": "running"}`
//! - `GET /reports/{id}` → `{"id", "status", "download_url"? , "error"?}`
//! - `GET /reports/{id}/download` → the items (409 until completed): NDJSON by default; CSV
//!   (RFC 4180, `\r\n` line ends) starts with the line [`CSV_HEADER`]; gzip is one gzip member
//!   with `Content-Type: application/gzip`
//! - `DELETE /reports/{id}` → 204
//! - `GET /redirect?to=URL` → 302 to `URL` (for redirect policy tests)
//! - `GET /echo` → `{"headers": {...}}`: the headers the request arrived with
//! - `GET /empty-records?n=N` → `{"data": [{}, ...]}` with `N` empty records;
//! - `GET /bytes?n=N` → a body of `N` bytes; `GET /stall?ms=N` → one byte, then the rest after
//!   `N` ms (for response-size and read-timeout tests)
//! - `GET /_stats` → [`Stats`] (not counted, never delayed or failed)
//!
//! Under `/v2`, the shapes declarative (Airbyte low-code) manifests are written for, over the same
//! items as `/items`, in id order; `P` is a page number from 1 (default 1), `K` a page size
//! (default 100, at most [`MAX_PAGE_SIZE`]); pages past the end are empty. Credentials are the
//! constants of [`v2`]; a wrong or missing one is a 401 `{"error": ...}`.
//! - `GET /v2/items?offset=O&limit=L` → `{"results": [item], "total": N}`
//! - `GET /v2/linked_items?page=P&per_page=K` → `[item]`, while more remain with
//!   `Link: <http://HOST/v2/linked_items?page=P+1&per_page=K>; rel="next"` (HOST: the request's)
//! - `POST /v2/session` `{"username", "password"}` → `{"token": T, "expires_in": 3600}`;
//!   `GET /v2/session/current` with `X-Session-Token: T` → 200 `{"username"}` while T is valid,
//!   else 401;
//!   `GET /v2/session/items?page=P&per_page=K` with `X-Session-Token: T` →
//!   `{"data": [item], "has_more": bool}`
//! - `POST /v2/oauth/token`, form-encoded or JSON (`grant_type=refresh_token`, `client_id`,
//!   `client_secret`, `refresh_token`) → `{"access_token": T, "expires_in": S, "token_type":
//!   "Bearer"}`, or 400/401 `{"error": "<RFC 6749 code>: ..."}`; `GET
//!   /v2/oauth/items?page=P&per_page=K` with `Authorization: Bearer T` (until it expires) →
//!   `{"data": [item], "next_page": P+1 | null}`
//! - `GET /v2/keyed/items?page=P&per_page=K` with `X-Api-Key: KEY` or the query `api_key=KEY`,
//!   and `GET /v2/basic/items?page=P&per_page=K` with `Authorization: Basic ...` →
//!   `{"data": [item]}`
//! - `GET /v2/throttled_items?page=P&per_page=K` → the first request for each page is a 429 with
//!   `Retry-After: retry_after_secs`, the next `{"data": [item]}`
//! - `GET /v2/accounts/{id}/items?page=P&per_page=K` → `{"data": [item]}`, the account's items;
//!   404 `{"error": "no such account"}`, and 403 `{"error": "account suspended"}` for ids
//!   divisible by 4
//!
//! Item `i` was updated at 2024-01-01T00:00:00Z plus `i` minutes (see [`data::item`]), so the
//! items' `updated_at` strictly increase with their ids.

pub mod data;
pub mod events;
mod formats;
mod routes;
mod state;
#[cfg(test)]
mod tests;
pub mod v2;

use std::collections::BTreeMap;
use std::future::IntoFuture;
use std::net::SocketAddr;
use std::sync::{Arc, mpsc};
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

pub use formats::CSV_HEADER;
pub use routes::MAX_PAGE_SIZE;

use state::Shared;

/// How many entries [`Stats::recent_requests`] keeps; older ones are dropped.
pub const RECENT_REQUESTS_CAP: usize = 100_000;

/// How long in-flight requests may take to finish once shutdown is requested.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

/// What the server serves and how badly it behaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoApiConfig {
    /// Number of items (ids 1..=records).
    pub records: u64,
    /// Number of accounts (ids 1..=accounts); items are spread over them round-robin.
    pub accounts: u64,
    /// Delay before answering every request but `/_stats`.
    pub latency_ms: u64,
    /// Requests (but `/_stats`) whose percent-decoded path and query (`/items?updated_after=…`)
    /// contain any of these substrings are delayed by `slow_ms` on top of `latency_ms`, e.g. to
    /// make responses arrive out of order. Matching is case-sensitive; only `%XX` escapes are
    /// decoded (a `+` stays a `+`), and an empty substring matches every request.
    pub slow_match: Vec<String>,
    /// Extra delay of requests matching `slow_match`, in milliseconds.
    pub slow_ms: u64,
    /// Every K-th request (but `/_stats`) gets an injected error, alternating 429 and 500;
    /// 0 = never.
    pub error_every: u64,
    /// `Retry-After` of injected 429s, in seconds.
    pub retry_after_secs: u64,
    /// A report job finishes on its `job_polls`-th status poll (0: on the first).
    pub job_polls: u64,
    /// Every K-th report job fails instead of completing; 0 = never.
    pub fail_job_every: u64,
    /// When set, every request (but `/_stats`) must carry `Authorization: Bearer <key>`;
    /// others get 401. (So `/v2/oauth/items` and `/v2/basic/items`, which want an
    /// `Authorization` of their own, cannot be served.)
    pub api_key: Option<String>,
    /// `expires_in` of the access tokens `POST /v2/oauth/token` issues, in seconds; a token is
    /// refused once that long has passed (at once, with 0).
    pub oauth_expires_in_secs: u64,
    /// Items carry [`data::Details`] too (an email, a nested address, tags, a flag, a score:
    /// ~280 bytes a record, where plain ones are ~100), as records of real APIs do. Listings
    /// only; reports stay plain.
    pub rich_records: bool,
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
}

impl Default for DemoApiConfig {
    fn default() -> Self {
        DemoApiConfig {
            records: 1000,
            accounts: 5,
            latency_ms: 0,
            slow_match: Vec::new(),
            slow_ms: 0,
            error_every: 0,
            retry_after_secs: 1,
            job_polls: 2,
            fail_job_every: 0,
            api_key: None,
            oauth_expires_in_secs: 3600,
            rich_records: false,
            port: 0,
        }
    }
}

/// Counters of what the server did, as returned by [`DemoApi::stats`] and `GET /_stats`.
/// Requests to `/_stats` itself are not counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Requests received, injected errors and unknown paths included.
    pub requests: u64,
    /// Requests answered with an injected 429 or 500.
    pub errors_injected: u64,
    /// Report jobs created.
    pub jobs_created: u64,
    /// Report jobs currently running (created, not yet finished nor deleted).
    pub jobs_running: u64,
    /// Highest `jobs_running` seen.
    pub max_jobs_running: u64,
    /// Report jobs deleted (aborted, when still running).
    #[serde(default)]
    pub jobs_deleted: u64,
    /// Report jobs the server still keeps (created, not deleted).
    #[serde(default)]
    pub jobs_kept: u64,
    /// When the last job completed (Unix milliseconds; 0: none yet), to time what follows.
    #[serde(default)]
    pub last_job_completed_ms: u64,
    /// Successful logins at `POST /v2/session`.
    #[serde(default)]
    pub sessions_created: u64,
    /// Access tokens issued by `POST /v2/oauth/token`.
    #[serde(default)]
    pub tokens_issued: u64,
    /// Requests of `/v2/throttled_items` answered with its 429 (injected errors not included).
    #[serde(default)]
    pub throttled: u64,
    /// Requests being answered right now (latency included).
    pub in_flight: u64,
    /// Highest `in_flight` seen: how many requests a client had open at once.
    pub max_in_flight: u64,
    /// Requests by route pattern (e.g. `/accounts/{id}/items`); `<unmatched>` for unknown paths.
    pub requests_by_path: BTreeMap<String, u64>,
    /// The percent-decoded path and query (`/items?limit=5`, or just the path when there is no
    /// query) of every counted request, in arrival order; only the most recent
    /// [`RECENT_REQUESTS_CAP`] are kept. Decoding is as for [`DemoApiConfig::slow_match`].
    #[serde(default)]
    pub recent_requests: Vec<String>,
}

/// A running demo API server. Stops on [`DemoApi::shutdown`] or when dropped.
pub struct DemoApi {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    server: Option<tokio::task::JoinHandle<()>>,
    /// The thread that owns the runtime, for servers made by [`DemoApi::start_background`].
    thread: Option<std::thread::JoinHandle<()>>,
}

impl DemoApi {
    /// Binds 127.0.0.1:`cfg.port` and serves on the current tokio runtime.
    pub async fn start(cfg: DemoApiConfig) -> anyhow::Result<DemoApi> {
        anyhow::ensure!(cfg.accounts > 0 || cfg.records == 0, "items need at least one account to belong to");
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", cfg.port))
            .await
            .with_context(|| format!("binding 127.0.0.1:{}", cfg.port))?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared::new(cfg));
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(listener, routes::router(shared.clone()), stopped));
        Ok(DemoApi { addr, shared, stop, server: Some(server), thread: None })
    }

    /// Like [`DemoApi::start`], for code without a runtime: serves from a runtime of its own on
    /// a dedicated thread. Returns once the server is listening.
    pub fn start_background(cfg: DemoApiConfig) -> anyhow::Result<DemoApi> {
        let (started_tx, started_rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("demo-api".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_name("demo-api-worker")
                    .enable_all()
                    .build()
                {
                    Ok(runtime) => runtime,
                    Err(e) => {
                        let _ = started_tx.send(Err(anyhow::Error::new(e).context("building a tokio runtime")));
                        return;
                    }
                };
                runtime.block_on(async {
                    match DemoApi::start(cfg).await {
                        Ok(mut api) => {
                            let server = api.server.take().expect("a fresh server has its task");
                            // The caller owns the handle; this thread only drives the server.
                            if started_tx.send(Ok(api)).is_ok() {
                                let _ = server.await;
                            }
                        }
                        Err(e) => {
                            let _ = started_tx.send(Err(e));
                        }
                    }
                });
                // Ends connections still open after the grace period.
                runtime.shutdown_timeout(SHUTDOWN_GRACE);
            })
            .context("spawning the demo-api thread")?;
        let mut api = started_rx.recv().context("the demo-api thread died while starting")??;
        api.thread = Some(thread);
        Ok(api)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> Stats {
        self.shared.stats()
    }

    /// A session token as `POST /v2/session` issues one (counted as a login), for a client that
    /// is handed a token rather than credentials.
    pub fn create_session_token(&self) -> String {
        self.shared.create_session(std::time::Duration::from_secs(v2::SESSION_EXPIRES_IN_SECS))
    }

    /// Replaces what `/v2/events` serves: each a JSON object with an integer `id` and `created`
    /// (see [`events`]). The server starts with none.
    pub fn set_events(&self, events: Vec<serde_json::Value>) {
        self.shared.set_events(events);
    }

    /// Sets what `GET /v2/documents/{name}` answers (any JSON, as it is): the metadata an API
    /// describes its own objects with, for manifests that make streams or schemas from it.
    pub fn set_document(&self, name: &str, document: serde_json::Value) {
        self.shared.set_document(name, document);
    }

    /// The configuration the server runs with.
    pub fn config(&self) -> &DemoApiConfig {
        &self.shared.cfg
    }

    /// Stops the server. For a [`DemoApi::start_background`] server, returns once it has
    /// stopped listening; for a [`DemoApi::start`] one, the server task stops the next time the
    /// runtime polls it (use [`DemoApi::shutdown_and_wait`] to wait for that). Never blocks
    /// longer than the shutdown grace period (one second).
    pub fn shutdown(self) {
        drop(self);
    }

    /// Stops a [`DemoApi::start`] server and waits until it no longer listens.
    pub async fn shutdown_and_wait(mut self) {
        let _ = self.stop.send(true);
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }
}

impl Drop for DemoApi {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves until `stop` turns true (or its sender is gone), then lets in-flight requests finish
/// for at most [`SHUTDOWN_GRACE`].
async fn serve(listener: tokio::net::TcpListener, app: axum::Router, stop: watch::Receiver<bool>) {
    let stop_requested = |mut stop: watch::Receiver<bool>| async move {
        // An error means the sender is gone, which is a stop too.
        let _ = stop.wait_for(|&stop| stop).await;
    };
    let graceful = axum::serve(listener, app).with_graceful_shutdown(stop_requested(stop.clone()));
    tokio::select! {
        result = graceful.into_future() => {
            if let Err(e) = result {
                eprintln!("demo-api: server error: {e}");
            }
        }
        () = async {
            stop_requested(stop).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        } => {}
    }
}
