//! Helpers the bench binaries share (each includes this file as a module).

use clap::Parser;
use sluice_host::cli::Cli;
use sluice_tests::demo_api::DemoApi;
use std::path::Path;
use std::time::{Duration, Instant};

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// The whole `host run` path in this process, granted `api`, output to a sink.
pub async fn host_run(plugin: &Path, config: &Path, api: &DemoApi, cache: &Path, extra: &[&str]) -> Duration {
    host_run_into(plugin, config, api, cache, extra, Box::new(std::io::sink())).await
}

/// [`host_run`], output to `sink`.
pub async fn host_run_into(
    plugin: &Path,
    config: &Path,
    api: &DemoApi,
    cache: &Path,
    extra: &[&str],
    sink: Box<dyn std::io::Write + Send>,
) -> Duration {
    let mut args: Vec<String> = vec!["host".into(), "run".into(), plugin.display().to_string()];
    args.extend([
        "--config".into(),
        config.display().to_string(),
        "--allow-host".into(),
        format!("http://{}", api.addr()),
    ]);
    args.extend(["--cache-dir".into(), cache.display().to_string(), "--no-progress".into()]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let cli = Cli::parse_from(args);
    let started = Instant::now();
    let code = sluice_host::cli::execute(cli, sink).await;
    let elapsed = started.elapsed();
    assert_eq!(format!("{code:?}"), format!("{:?}", std::process::ExitCode::SUCCESS), "host run failed");
    elapsed
}
