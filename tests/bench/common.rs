//! Helpers the bench binaries share (each includes this file as a module).

// Each bench uses some of them.
#![allow(dead_code)]

use clap::Parser;
use sluice_host::command_line::Cli;
use sluice_tests::demo_api::DemoApi;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the case being measured has said so far: its report, unless it writes its own.
static SAID: Mutex<String> = Mutex::new(String::new());

/// Prints a line of a case's results and keeps it for the case's report
/// ([`write_case_report`]), so the docs quote what the bench printed.
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::common::said(format!($($arg)*))
    };
}

pub fn said(line: String) {
    println!("{line}");
    let mut said = SAID.lock().unwrap();
    said.push_str(line.trim_start_matches('\n'));
    said.push('\n');
}

/// The report of the case being measured: its name (docs/bench/NAME.md) and title.
static CASE: Mutex<Option<(&str, &str)>> = Mutex::new(None);

/// Names the report of the case starting now ([`write_case_report`] writes it).
pub fn case(name: &'static str, title: &'static str) {
    *CASE.lock().unwrap() = Some((name, title));
    SAID.lock().unwrap().clear();
}

/// Writes what case `case` of `bench` said to the report it named ([`case`]), unless it
/// named none, wrote a report of its own (which takes what it said) or was skipped.
pub fn write_case_report(bench: &str, case: &str) {
    let said = std::mem::take(&mut *SAID.lock().unwrap());
    let Some((name, title)) = CASE.lock().unwrap().take() else { return };
    if said.is_empty() || said.contains("skipped") {
        return;
    }
    let about = format!(
        "What `cargo bench -p sluice-host --bench {bench} -- {case}` printed (part of `just bench`); \
         the case is described in tests/bench/{bench}.rs."
    );
    write_report(
        name,
        &format!("{title} (`just bench`, {bench} case {case})"),
        &about,
        &format!("```text\n{said}```\n"),
    );
}

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
    let code = sluice_host::command_line::execute(cli, sink).await;
    let elapsed = started.elapsed();
    assert_eq!(format!("{code:?}"), format!("{:?}", std::process::ExitCode::SUCCESS), "host run failed");
    elapsed
}

/// The release `host` binary the process cases run, or `None` (and a line saying the case is
/// skipped) when it was not built.
pub fn release_host(case: &str) -> Option<std::path::PathBuf> {
    let host = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("target/release/host");
    if !host.exists() {
        said(format!("\n{case}: skipped, {} is missing (run `cargo build --release -p sluice-host`)", host.display()));
        return None;
    }
    Some(host)
}

/// Runs `command` to its end, counting the RECORD lines of its stdout: the time taken, its own
/// peak RSS in MiB ([`Peak::rss`]), and the records.
pub fn measured_child(command: &mut std::process::Command) -> (Duration, f64, u64) {
    let (took, rss, _, records) = measured_process(command, false);
    (took, rss, records)
}

/// [`measured_child`], with the peak PSS in MiB too when `pss` ([`Peak::pss`]; sampling it walks
/// the process's page tables, so only where it is reported).
pub fn measured_process(command: &mut std::process::Command, pss: bool) -> (Duration, f64, Option<f64>, u64) {
    use std::io::BufRead;
    let started = Instant::now();
    let mut child = command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null()).spawn().unwrap();
    let (rss, pss) = (Peak::rss(child.id()), pss.then(|| Peak::pss(child.id())));
    let mut stdout = std::io::BufReader::with_capacity(1 << 20, child.stdout.take().unwrap());
    let (mut records, mut line) = (0u64, Vec::new());
    while stdout.read_until(b'\n', &mut line).unwrap() > 0 {
        records += line.starts_with(br#"{"type":"RECORD""#) as u64;
        line.clear();
    }
    let (rss, pss) = (rss.mib(), pss.map(Peak::mib));
    assert!(child.wait().unwrap().success(), "{command:?} failed");
    (started.elapsed(), rss, pss, records)
}

/// A child's peak memory, sampled every 5 ms from `/proc/PID` until it exits. RSS is `VmHWM` of
/// `status` (which starts afresh at exec: `wait4`'s `ru_maxrss` also counts the parent's memory
/// the child shared before exec, so a benchmark process that had grown reported every child at
/// its own size). PSS is `Pss` of `smaps_rollup`: each page shared between mappings counted once
/// in all, where RSS counts it once per mapping (so the pages of a memory image every instance of
/// a component maps count once per instance there, though the machine holds them once).
pub struct Peak(std::thread::JoinHandle<u64>);

impl Peak {
    pub fn rss(pid: u32) -> Self {
        Self::watch(pid, "status", "VmHWM:")
    }

    pub fn pss(pid: u32) -> Self {
        Self::watch(pid, "smaps_rollup", "Pss:")
    }

    fn watch(pid: u32, file: &'static str, key: &'static str) -> Self {
        Peak(std::thread::spawn(move || {
            let mut peak_kib = 0;
            // The line goes when the process exits (a zombie has no memory).
            while let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/{file}")) {
                let Some(line) = text.lines().find(|l| l.starts_with(key)) else { break };
                let kib = line.split_whitespace().nth(1).and_then(|n| n.parse().ok()).unwrap_or(0);
                peak_kib = peak_kib.max(kib);
                std::thread::sleep(Duration::from_millis(5));
            }
            peak_kib
        }))
    }

    /// Waits for the process to end; MiB.
    pub fn mib(self) -> f64 {
        self.0.join().unwrap() as f64 / 1024.0
    }
}

/// Writes a case's figures to `docs/bench/NAME.md` (a title, what was measured, then `body`),
/// so the docs link to the numbers the bench measured rather than copies of them.
pub fn write_report(name: &str, title: &str, about: &str, body: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let date = std::process::Command::new("date").args(["-u", "+%Y-%m-%d"]).output();
    let date = date.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string()).unwrap_or_default();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let text = format!(
        "# {title}\n\nWritten by `just bench` on {date}, on a machine with {cores} cores; do not edit by hand (run \
         `just bench` again).\n\n{about}\n\n{body}"
    );
    SAID.lock().unwrap().clear();
    let path = root.join("docs/bench").join(format!("{name}.md"));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    println!("    (written to {})", path.display());
}
