//! `demo-api`: runs the demo API server until SIGINT or SIGTERM.

use std::io::Write;

use clap::Parser;
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};

/// Serves deterministic demo data over HTTP on 127.0.0.1, with cursor, page-number, next-URL,
/// offset and Link-header pagination, asynchronous report jobs (JSON lines or CSV, plain or
/// gzip), session, OAuth, API-key and basic authentication, and optional fault injection.
///
/// Endpoints: GET /items?updated_after=TS&updated_until=TS&limit=N&cursor=C, GET /items/bounds,
/// GET /accounts?page=P&per_page=N, GET /accounts/{id}/items?updated_after=TS&limit=N&cursor=C,
/// POST /reports ({"format": "jsonl"|"csv", "compression": "none"|"gzip", ...}),
/// GET|DELETE /reports/{id}, GET /reports/{id}/download, GET /_stats.
///
/// For declarative manifests, over the same items (P, K: page=P&per_page=K): GET
/// /v2/items?offset=O&limit=L, GET /v2/linked_items?P,K (Link: rel="next"), POST /v2/session
/// ({"username": "demo", "password": "demo-password"}) then GET /v2/session/items?P,K
/// (X-Session-Token), POST /v2/oauth/token (grant_type=refresh_token, client_id=demo-client,
/// client_secret=demo-secret, refresh_token=demo-refresh) then GET /v2/oauth/items?P,K
/// (Authorization: Bearer), GET /v2/keyed/items?P,K (X-Api-Key: demo-key or api_key=demo-key),
/// GET /v2/basic/items?P,K (basic demo:demo-password), GET /v2/throttled_items?P,K (one 429 per
/// page), GET /v2/accounts/{id}/items?P,K (403 for ids divisible by 4, 404 for unknown ones).
///
/// Prints `listening on 127.0.0.1:PORT` as its first line on stdout once it accepts
/// connections, then serves until SIGINT or SIGTERM. `GET /_stats` returns request counters and
/// the log of recent requests.
#[derive(Debug, Parser)]
#[command(name = "demo-api", version)]
struct Args {
    /// Port to listen on (0 picks a free one; read it from the first output line).
    #[arg(long, default_value_t = 8080)]
    port: u16,

    /// Number of items, with ids 1..=N.
    #[arg(long, value_name = "N", default_value_t = DemoApiConfig::default().records)]
    records: u64,

    /// Number of accounts, with ids 1..=N; item i belongs to account ((i-1) mod N) + 1.
    #[arg(long, value_name = "N", default_value_t = DemoApiConfig::default().accounts)]
    accounts: u64,

    /// Delay before answering each request, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    latency_ms: u64,

    /// Delay requests whose percent-decoded path and query contain SUBSTRING (e.g.
    /// `updated_after=2024-01-01T01:00:00Z`) by an extra --slow-ms. Repeatable; a request
    /// matching any of them is slow. `/_stats` is never delayed.
    #[arg(long, value_name = "SUBSTRING")]
    slow_match: Vec<String>,

    /// Extra delay of requests matching --slow-match, in milliseconds, on top of --latency-ms.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    slow_ms: u64,

    /// Answer every K-th request with an injected error, alternating 429 (with Retry-After)
    /// and 500. 0 disables.
    #[arg(long, value_name = "K", default_value_t = 0)]
    error_every: u64,

    /// Retry-After value of injected 429 answers, in seconds.
    #[arg(long = "retry-after", value_name = "SECS", default_value_t = DemoApiConfig::default().retry_after_secs)]
    retry_after_secs: u64,

    /// A report job completes on its N-th status poll (0: on the first).
    #[arg(long, value_name = "N", default_value_t = DemoApiConfig::default().job_polls)]
    job_polls: u64,

    /// Make every K-th report job fail instead of completing. 0 disables.
    #[arg(long, value_name = "K", default_value_t = 0)]
    fail_job_every: u64,

    /// Require `Authorization: Bearer KEY` on every request (401 otherwise).
    #[arg(long, value_name = "KEY")]
    api_key: Option<String>,

    /// Lifetime of the access tokens POST /v2/oauth/token issues, in seconds (its `expires_in`).
    #[arg(long = "oauth-expires-in", value_name = "SECS", default_value_t = DemoApiConfig::default().oauth_expires_in_secs)]
    oauth_expires_in_secs: u64,

    /// Items carry an email, a nested address, tags, a flag and a score too (~280 bytes each).
    #[arg(long)]
    rich_records: bool,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let api = DemoApi::start(DemoApiConfig {
        records: args.records,
        accounts: args.accounts,
        latency_ms: args.latency_ms,
        slow_match: args.slow_match,
        slow_ms: args.slow_ms,
        error_every: args.error_every,
        retry_after_secs: args.retry_after_secs,
        job_polls: args.job_polls,
        fail_job_every: args.fail_job_every,
        api_key: args.api_key,
        oauth_expires_in_secs: args.oauth_expires_in_secs,
        rich_records: args.rich_records,
        port: args.port,
    })
    .await?;

    // Scripts wait for this exact line to learn the port, so it must not sit in a buffer.
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on {}", api.addr())?;
    stdout.flush()?;
    drop(stdout);

    wait_for_termination().await?;
    api.shutdown_and_wait().await;
    Ok(())
}

#[cfg(unix)]
async fn wait_for_termination() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        result = tokio::signal::ctrl_c() => result?,
        _ = term.recv() => {}
    }
    Ok(())
}

#[cfg(not(unix))]
async fn wait_for_termination() -> anyhow::Result<()> {
    tokio::signal::ctrl_c().await?;
    Ok(())
}
