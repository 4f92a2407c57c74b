//! `demo-api`: runs the demo API server until SIGINT or SIGTERM.

use std::io::Write;

use clap::Parser;
use sluice_tests::demo_api::{DemoApi, DemoApiConfig};

/// Serves deterministic demo data over HTTP on 127.0.0.1, with cursor, page-number and next-URL
/// pagination, asynchronous report jobs and optional fault injection.
///
/// Endpoints: GET /items?updated_after=TS&updated_until=TS&limit=N&cursor=C, GET /items/bounds,
/// GET /accounts?page=P&per_page=N, GET /accounts/{id}/items?updated_after=TS&limit=N&cursor=C,
/// POST /reports, GET|DELETE /reports/{id}, GET /reports/{id}/download, GET /_stats.
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
