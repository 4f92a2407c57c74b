//! What a guest instance can see and use: a WASI context that grants nothing (no files,
//! environment, arguments or sockets), the host's `http` and `log` imports, captured
//! stdout/stderr, a memory limit, and a CPU budget per call.

use crate::bindings::{self, HttpError, Level, Request, Response};
use crate::guest::limits::Limits;
use crate::net::Egress;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};

/// Most bytes of stdout/stderr kept per instance between two flushes; the rest is counted.
const MAX_CAPTURED_OUTPUT: usize = 1 << 20;

/// A message for the operator from a guest: its `log` calls, its stdout and stderr, and host
/// notices about it (such as a denied request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestLog {
    pub level: Level,
    pub message: String,
}

/// The data of one guest instance's `Store`.
pub struct GuestState {
    wasi: WasiCtx,
    table: ResourceTable,
    egress: Arc<Egress>,
    logs: Vec<GuestLog>,
    dropped_logs: usize,
    max_logs: usize,
    stdout: Capture,
    stderr: Capture,
    pub limiter: GuestLimiter,
    /// Epoch ticks the current call has spent executing guest code.
    pub cpu_ticks: u64,
    /// Set when a host call (HTTP) returns: the tick that passed while the host worked is not
    /// the guest's.
    pub back_from_host: bool,
    /// Set while a long-running call is paused to let other work run.
    pub paused: bool,
    /// When the current call started, and how much of it was not the guest's (HTTP requests,
    /// pauses): the difference is the call's guest time.
    pub call_started: std::time::Instant,
    pub not_guest: std::time::Duration,
    /// What the current call is for (JSON), to label its HTTP requests in recordings.
    pub context: String,
}

impl GuestState {
    pub fn new(egress: Arc<Egress>, limits: &Limits) -> Self {
        let stdout = Capture::default();
        let stderr = Capture::default();
        // Deny by default: nothing is granted beyond clocks, randomness and captured stdio.
        let wasi = WasiCtxBuilder::new().stdout(stdout.clone()).stderr(stderr.clone()).build();
        GuestState {
            wasi,
            table: ResourceTable::new(),
            egress,
            logs: Vec::new(),
            dropped_logs: 0,
            max_logs: limits.max_logs_per_call,
            stdout,
            stderr,
            limiter: GuestLimiter::new(limits.memory_bytes),
            cpu_ticks: 0,
            back_from_host: false,
            paused: false,
            call_started: std::time::Instant::now(),
            not_guest: std::time::Duration::ZERO,
            context: "null".to_string(),
        }
    }

    fn push_log(&mut self, log: GuestLog) {
        if self.logs.len() < self.max_logs {
            self.logs.push(log);
        } else {
            self.dropped_logs += 1;
        }
    }

    /// Everything the guest said since the last call, oldest first within each source, at most
    /// the per-call limit of log calls (the rest are counted).
    pub fn take_logs(&mut self) -> Vec<GuestLog> {
        let mut logs = std::mem::take(&mut self.logs);
        if self.dropped_logs > 0 {
            let message =
                format!("{} more log messages from the connector were dropped (log rate limit)", self.dropped_logs);
            logs.push(GuestLog { level: Level::Warn, message });
            self.dropped_logs = 0;
        }
        for (capture, level, name) in [(&self.stdout, Level::Info, "stdout"), (&self.stderr, Level::Warn, "stderr")] {
            for line in capture.take_lines() {
                logs.push(GuestLog { level, message: format!("[{name}] {line}") });
            }
        }
        logs
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl bindings::sluice::connector::types::Host for GuestState {}

impl bindings::sluice::connector::http::Host for GuestState {
    async fn send(&mut self, req: Request) -> Result<Response, HttpError> {
        let egress = self.egress.clone();
        let sent = std::time::Instant::now();
        let result = egress.send(req, &self.context).await;
        self.not_guest += sent.elapsed();
        self.back_from_host = true;
        if let Err(HttpError::Denied(why)) = &result {
            self.push_log(GuestLog { level: Level::Warn, message: format!("request denied: {why}") });
        }
        result
    }
}

impl bindings::sluice::connector::log::Host for GuestState {
    async fn log(&mut self, level: Level, message: String) {
        self.push_log(GuestLog { level, message });
    }
}

pub fn add_to_linker(linker: &mut Linker<GuestState>) -> anyhow::Result<()> {
    wasmtime_wasi::p2::add_to_linker_async(linker).map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::Connector::add_to_linker::<GuestState, HasSelf<GuestState>>(linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(())
}

/// A guest's stdout or stderr, kept in memory and turned into LOG lines by the host.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<CaptureBuf>>);

#[derive(Default)]
struct CaptureBuf {
    bytes: Vec<u8>,
    dropped: usize,
}

impl Capture {
    fn take_lines(&self) -> Vec<String> {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut lines: Vec<String> =
            String::from_utf8_lossy(&buf.bytes).lines().filter(|l| !l.trim().is_empty()).map(str::to_owned).collect();
        if buf.dropped > 0 {
            lines.push(format!("({} more bytes of output dropped)", buf.dropped));
        }
        buf.bytes.clear();
        buf.dropped = 0;
        lines
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_CAPTURED_OUTPUT.saturating_sub(buf.bytes.len()).min(data.len());
        buf.bytes.extend_from_slice(&data[..room]);
        buf.dropped += data.len() - room;
        Poll::Ready(Ok(data.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Enforces the memory limit and remembers the peak, so a failed growth can be named as the
/// limit (wasmtime's error for it is not a `Trap`).
pub struct GuestLimiter {
    max_memory: usize,
    /// The largest memory any instance of this store asked for and got.
    pub peak_memory: usize,
    /// Set when the memory limit stopped the guest.
    pub exceeded: Option<String>,
}

impl GuestLimiter {
    fn new(max_memory: u64) -> Self {
        GuestLimiter { max_memory: usize::try_from(max_memory).unwrap_or(usize::MAX), peak_memory: 0, exceeded: None }
    }
}

impl wasmtime::ResourceLimiter for GuestLimiter {
    fn memory_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        if desired > self.max_memory {
            let message = format!(
                "the connector exceeded its memory limit: it asked for {}, the limit is {}",
                mib(desired),
                mib(self.max_memory)
            );
            self.exceeded = Some(message.clone());
            return Err(wasmtime::format_err!("{message}"));
        }
        self.peak_memory = self.peak_memory.max(desired);
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= 1_000_000)
    }
}

/// Bytes in MiB, exact when whole and with two decimals otherwise (so 64 MiB and 64 KiB more
/// never reads as "64 MiB").
fn mib(bytes: usize) -> String {
    match bytes % (1 << 20) {
        0 => format!("{} MiB", bytes >> 20),
        _ => format!("{:.2} MiB", bytes as f64 / (1 << 20) as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasmtime::ResourceLimiter;

    #[test]
    fn a_memory_refusal_says_how_much_was_asked_beyond_the_limit() {
        let mut limiter = GuestLimiter::new(64 << 20);
        assert!(limiter.memory_growing(0, 64 << 20, None).unwrap());
        assert!(limiter.memory_growing(0, (64 << 20) + (64 << 10), None).is_err());
        let message = limiter.exceeded.unwrap();
        assert!(message.contains("asked for 64.06 MiB, the limit is 64 MiB"), "{message}");
        assert_eq!(limiter.peak_memory, 64 << 20);
    }
}
