//! Progress on a terminal: streams, partitions done / listed, records and records/s. Nothing is
//! drawn when stderr is not a terminal; the counters still feed the run summary.

use crate::data::protocol::printable;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Default, Clone, Copy)]
struct Partitions {
    listed: u64,
    done: u64,
    estimate: Option<u64>,
}

pub struct Progress {
    bar: Option<ProgressBar>,
    started: Instant,
    records: AtomicU64,
    streams: Mutex<BTreeMap<String, Partitions>>,
}

impl Progress {
    /// Draws on stderr when it is a terminal and `wanted`.
    pub fn new(wanted: bool) -> Self {
        let bar = (wanted && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(10));
            bar.set_style(ProgressStyle::with_template("{spinner} {elapsed} {msg}").expect("valid template"));
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Progress { bar, started: Instant::now(), records: AtomicU64::new(0), streams: Mutex::new(BTreeMap::new()) }
    }

    fn update(&self, f: impl FnOnce(&mut BTreeMap<String, Partitions>)) {
        let mut streams = self.streams.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut streams);
        if let Some(bar) = &self.bar {
            let parts: Vec<String> = streams
                .iter()
                .map(|(name, p)| match p.estimate {
                    Some(e) => format!("{} {}/{} (~{e} records)", printable(name), p.done, p.listed),
                    None => format!("{} {}/{}", printable(name), p.done, p.listed),
                })
                .collect();
            let records = self.records.load(Ordering::Relaxed);
            let rate = records as f64 / self.started.elapsed().as_secs_f64().max(0.001);
            bar.set_message(format!("partitions: {} | {records} records, {rate:.0}/s", parts.join(", ")));
        }
    }

    pub fn partition_listed(&self, stream: &str) {
        self.update(|s| s.entry(stream.to_string()).or_default().listed += 1);
    }

    pub fn estimate(&self, stream: &str, records: u64) {
        self.update(|s| s.entry(stream.to_string()).or_default().estimate = Some(records));
    }

    pub fn partition_done(&self, stream: &str) {
        self.update(|s| s.entry(stream.to_string()).or_default().done += 1);
    }

    pub fn records(&self, n: u64) {
        self.records.fetch_add(n, Ordering::Relaxed);
        if self.bar.is_some() {
            self.update(|_| {});
        }
    }

    /// Removes the bar before the final summary is printed.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
