//! What a guest instance can see and use: a WASI context that grants nothing (no files,
//! environment, arguments or sockets), the host's `http` and `log` imports, captured
//! stdout/stderr, a memory limit, and a CPU budget per call.

use crate::bindings::{
    self, BodyError, ForwardedResponse, HttpError, Level, Lines, RecordsResponse, Request, Response, ResponseHead,
};
use crate::guest::limits::Limits;
use crate::net::Egress;
use crate::net::body::{Bodies, MAX_OPEN_BODIES, OpenBody};
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use wasmtime::component::{HasSelf, Linker, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
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
    /// Made when the guest first calls WASI: a Rust connector's partition often never does,
    /// and making one seeds two random generators (twice: `build` makes a spare builder).
    wasi: Option<WasiCtx>,
    table: ResourceTable,
    egress: Arc<Egress>,
    logs: Vec<GuestLog>,
    /// Bytes of `logs`, bounded by `max_log_bytes_per_call`.
    log_bytes: usize,
    dropped_logs: usize,
    max_logs: usize,
    max_log_bytes: usize,
    max_log_bytes_per_call: usize,
    stdout: Capture,
    stderr: Capture,
    pub limiter: GuestLimiter,
    /// Time the current call has spent in guest code.
    pub clock: GuestClock,
    /// Set when the CPU budget stopped the guest.
    pub cpu_exceeded: bool,
    /// What the current call is for (JSON), to label its HTTP requests in recordings.
    pub context: String,
    /// Streamed bodies the guest opened, kept with the instance: one instance reads one
    /// partition, so a page token may name a body the next call goes on reading.
    bodies: Bodies,
    /// What `forward-records` took out during the current `read-page` or `read-result` call,
    /// for the page it returns; `None` outside those calls.
    forwarded: Option<crate::guest::forwarded::Forwarded>,
    max_forwarded_records: usize,
    max_forwarded_bytes: usize,
    /// The run's custom components, for the declarative engine running a manifest with them.
    pub custom: Option<CustomSession>,
}

/// What an engine instance's store keeps of the run's custom code (see `guest::custom`): the
/// runtime to start, the `load` call that gives it the code, and the runtime once started.
pub struct CustomSession {
    pub pre: bindings::components::RuntimePre<GuestState>,
    pub load: Arc<str>,
    pub runtime: Option<Result<Arc<bindings::components::Runtime>, String>>,
}

/// Measures the time a call spends running guest code: it runs from the start of the call and
/// stops whenever control is with the host (an HTTP request, a pause between epoch ticks, a
/// yield to the scheduler), so no pattern of import calls can hide guest work from the budget.
/// Each stretch is measured in the CPU time of the thread that runs it, so a guest is not
/// charged for time the operating system gave to other work; a stretch that ends on another
/// thread (the guest waited inside a WASI call) is charged its wall-clock time instead. Reading
/// a thread's CPU clock is a system call, so it starts only once the instance ran a long stretch
/// ([`LONG_STRETCH`]): before that a stretch is charged its wall-clock time, never less than
/// its CPU time (a connector that only asks for pages makes a few short stretches per page,
/// and the reads were 6% of a run of 10,000 one-record partitions).
/// Clones share one clock: the futures a paused guest waits on restart it when they finish.
#[derive(Clone, Default)]
pub struct GuestClock(Arc<Mutex<ClockState>>);

#[derive(Default)]
struct ClockState {
    spent: Duration,
    running_since: Option<Stretch>,
    /// A stretch ran past [`LONG_STRETCH`]: from then on each is measured in CPU time.
    measure_cpu: bool,
    /// Counted in [`WANTING_CPU`].
    wanting: bool,
    /// The call computed past its grace; counted in [`BUSY_WANTING_CPU`] while it wants a core.
    busy: bool,
}

/// Where a stretch of guest execution started.
struct Stretch {
    wall: Instant,
    thread: std::thread::ThreadId,
    cpu: Option<Duration>,
}

/// A stretch this long, charged at wall-clock time, turns on CPU-time measuring for the
/// instance's later stretches: what a stretch measured by the wall may be charged for time the
/// guest did not run is at most one such stretch (and what preemption lands in it).
const LONG_STRETCH: Duration = Duration::from_millis(1);

impl Stretch {
    fn now(measure_cpu: bool) -> Self {
        let cpu = if measure_cpu { thread_cpu_time() } else { None };
        Stretch { wall: Instant::now(), thread: std::thread::current().id(), cpu }
    }

    fn elapsed(&self) -> Duration {
        let on_cpu = self.cpu.filter(|_| std::thread::current().id() == self.thread);
        on_cpu.and_then(|start| Some(thread_cpu_time()?.saturating_sub(start))).unwrap_or_else(|| self.wall.elapsed())
    }
}

/// CPU time of the calling thread.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer for the duration of the call.
    let ok = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0;
    ok.then(|| Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Guest calls in this process that want a core right now: running guest code, or yielded at an
/// epoch tick and waiting to run again (not those waiting on the host, an HTTP answer say). More
/// of them than cores is contention, and only then is a busy guest paused.
static WANTING_CPU: AtomicUsize = AtomicUsize::new(0);

pub fn guests_wanting_cpu() -> usize {
    WANTING_CPU.load(AtomicOrdering::Relaxed)
}

/// Of those, the calls that computed past their grace (busy ones).
static BUSY_WANTING_CPU: AtomicUsize = AtomicUsize::new(0);

/// Calls that want a core and are still within their grace: the ones a busy call gives way to.
pub fn fresh_guests_wanting_cpu() -> usize {
    guests_wanting_cpu().saturating_sub(BUSY_WANTING_CPU.load(AtomicOrdering::Relaxed))
}

impl GuestClock {
    fn lock(&self) -> std::sync::MutexGuard<'_, ClockState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A new call: nothing spent, the guest running.
    pub fn restart(&self) {
        let mut clock = self.lock();
        if std::mem::take(&mut clock.busy) && clock.wanting {
            BUSY_WANTING_CPU.fetch_sub(1, AtomicOrdering::Relaxed);
        }
        if !clock.wanting {
            clock.wanting = true;
            WANTING_CPU.fetch_add(1, AtomicOrdering::Relaxed);
        }
        clock.spent = Duration::ZERO;
        clock.running_since = Some(Stretch::now(clock.measure_cpu));
    }

    /// Control returns to the guest.
    pub fn resume(&self) {
        let mut clock = self.lock();
        if clock.running_since.is_none() {
            clock.running_since = Some(Stretch::now(clock.measure_cpu));
        }
        if !clock.wanting {
            clock.wanting = true;
            WANTING_CPU.fetch_add(1, AtomicOrdering::Relaxed);
            if clock.busy {
                BUSY_WANTING_CPU.fetch_add(1, AtomicOrdering::Relaxed);
            }
        }
    }

    /// Control passes to the host; what the guest spent so far.
    pub fn suspend(&self) -> Duration {
        let mut clock = self.lock();
        if clock.wanting {
            clock.wanting = false;
            WANTING_CPU.fetch_sub(1, AtomicOrdering::Relaxed);
            if clock.busy {
                BUSY_WANTING_CPU.fetch_sub(1, AtomicOrdering::Relaxed);
            }
        }
        clock.stop()
    }

    /// Awaits `wait` (an HTTP answer, a body's bytes, a sleep) with the clock stopped and the
    /// guest not wanting a core: waiting is not computing.
    pub async fn waiting<T>(&self, wait: impl Future<Output = T>) -> T {
        self.suspend();
        let done = wait.await;
        self.resume();
        done
    }

    /// The call computed past its grace: from now on it gives way to calls within theirs.
    pub fn mark_busy(&self) {
        let mut clock = self.lock();
        if !clock.busy {
            clock.busy = true;
            if clock.wanting {
                BUSY_WANTING_CPU.fetch_add(1, AtomicOrdering::Relaxed);
            }
        }
    }

    /// The guest yields at an epoch tick: its clock stops, but it still wants a core.
    pub fn pause(&self) -> Duration {
        self.lock().stop()
    }

    /// The guest runs again after a yield.
    pub fn unpause(&self) {
        let mut clock = self.lock();
        if clock.running_since.is_none() {
            clock.running_since = Some(Stretch::now(clock.measure_cpu));
        }
    }
}

impl ClockState {
    fn stop(&mut self) -> Duration {
        if let Some(since) = self.running_since.take() {
            let elapsed = since.elapsed();
            self.measure_cpu |= elapsed >= LONG_STRETCH;
            self.spent += elapsed;
        }
        self.spent
    }
}

impl Drop for ClockState {
    // A call dropped while it wanted a core (cancelled, timed out) no longer does.
    fn drop(&mut self) {
        if self.wanting {
            WANTING_CPU.fetch_sub(1, AtomicOrdering::Relaxed);
            if self.busy {
                BUSY_WANTING_CPU.fetch_sub(1, AtomicOrdering::Relaxed);
            }
        }
    }
}

impl GuestState {
    /// Where this instance's requests go from now on (the spec probe's instance, made with no
    /// egress, given the run's once the connector said which hosts it needs).
    pub fn set_egress(&mut self, egress: Arc<Egress>) {
        self.egress = egress;
    }

    pub fn new(egress: Arc<Egress>, limits: &Limits) -> Self {
        let stdout = Capture::default();
        let stderr = Capture::default();
        GuestState {
            wasi: None,
            table: ResourceTable::new(),
            egress,
            logs: Vec::new(),
            log_bytes: 0,
            dropped_logs: 0,
            max_logs: limits.max_logs_per_call,
            max_log_bytes: limits.max_log_bytes,
            max_log_bytes_per_call: limits.max_log_bytes_per_call,
            stdout,
            stderr,
            limiter: GuestLimiter::new(limits.memory_bytes),
            clock: GuestClock::default(),
            cpu_exceeded: false,
            context: "null".to_string(),
            bodies: Bodies::default(),
            forwarded: None,
            max_forwarded_records: limits.max_records_per_page,
            // The host holds no more for a guest than the guest could have held itself.
            max_forwarded_bytes: usize::try_from(limits.memory_bytes).unwrap_or(usize::MAX),
            custom: None,
        }
    }

    /// Keeps a message, cut to the size limit here at the point of entry, while the call's count
    /// and bytes allow; the rest are counted. So the host never holds more than the per-call
    /// budget of a guest's logs, however many or large its calls.
    pub(crate) fn push_log(&mut self, mut log: GuestLog) {
        truncate_message(&mut log.message, self.max_log_bytes);
        if self.logs.len() < self.max_logs && self.log_bytes + log.message.len() <= self.max_log_bytes_per_call {
            self.log_bytes += log.message.len();
            self.logs.push(log);
        } else {
            self.dropped_logs += 1;
        }
    }

    /// A `read-page` or `read-result` call starts: records may be forwarded to its page.
    pub fn start_forwarding(&mut self) {
        let (records, bytes) = (self.max_forwarded_records, self.max_forwarded_bytes);
        self.forwarded = Some(crate::guest::forwarded::Forwarded::new(records, bytes, "in this call"));
    }

    /// The call ended: the records it forwarded, oldest first (dropped if the call failed).
    pub fn take_forwarded(&mut self) -> Vec<String> {
        self.forwarded.take().map(|f| f.records).unwrap_or_default()
    }

    /// Everything the guest said since the last call, oldest first within each source, at most
    /// the per-call limits of log messages and their bytes, lines of captured stdout and stderr
    /// counted in them as log calls are (the rest are counted, never made into messages).
    pub fn take_logs(&mut self) -> Vec<GuestLog> {
        let mut logs = std::mem::take(&mut self.logs);
        let mut room = Room {
            messages: self.max_logs.saturating_sub(logs.len()),
            bytes: self.max_log_bytes_per_call.saturating_sub(self.log_bytes),
            max_message: self.max_log_bytes,
        };
        self.log_bytes = 0;
        if self.dropped_logs > 0 {
            let message =
                format!("{} more log messages from the connector were dropped (log rate limit)", self.dropped_logs);
            logs.push(GuestLog { level: Level::Warn, message });
            self.dropped_logs = 0;
        }
        let mut dropped_lines = 0;
        for (capture, level, name) in [(&self.stdout, Level::Info, "stdout"), (&self.stderr, Level::Warn, "stderr")] {
            let taken = capture.take_lines(name, &mut room);
            logs.extend(taken.lines.into_iter().map(|message| GuestLog { level, message }));
            dropped_lines += taken.dropped_lines;
            if taken.dropped_bytes > 0 {
                let message = format!("[{name}] ({} more bytes of output dropped)", taken.dropped_bytes);
                logs.push(GuestLog { level, message });
            }
        }
        if dropped_lines > 0 {
            let message =
                format!("{dropped_lines} more lines of output from the connector were dropped (log rate limit)");
            logs.push(GuestLog { level: Level::Warn, message });
        }
        logs
    }
}

/// What a call's messages may still take: how many, and their bytes.
struct Room {
    messages: usize,
    bytes: usize,
    /// The longest message, bytes (longer ones are cut).
    max_message: usize,
}

/// Lines taken from a capture as messages, and what did not fit.
struct Taken {
    lines: Vec<String>,
    dropped_lines: usize,
    dropped_bytes: usize,
}

impl GuestState {
    /// The WASI resource table with the guest's clock, for waits that stop the clock.
    pub fn table_and_clock(&mut self) -> (&mut ResourceTable, &GuestClock) {
        (&mut self.table, &self.clock)
    }
}

impl WasiView for GuestState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        // Deny by default: nothing is granted beyond clocks, randomness and captured stdio.
        let (stdout, stderr) = (&self.stdout, &self.stderr);
        let ctx = self
            .wasi
            .get_or_insert_with(|| WasiCtxBuilder::new().stdout(stdout.clone()).stderr(stderr.clone()).build());
        WasiCtxView { ctx, table: &mut self.table }
    }
}

impl bindings::sluice::connector::types::Host for GuestState {}

impl bindings::sluice::connector::http::Host for GuestState {
    async fn send(&mut self, req: Request) -> Result<Response, HttpError> {
        let egress = self.egress.clone();
        let result = self.clock.waiting(egress.send(req, &self.context)).await;
        self.note_denial(&result);
        result
    }

    async fn open(&mut self, req: Request) -> Result<ResponseHead, HttpError> {
        let egress = self.egress.clone();
        // Refused before anything is sent, so a guest cannot keep connections it cannot use.
        if self.bodies.is_full() {
            return Err(HttpError::InvalidRequest(format!(
                "{MAX_OPEN_BODIES} bodies are open already: read them to the end or close them first"
            )));
        }
        let url = req.url.clone();
        let result = self.clock.waiting(egress.open(req, &self.context)).await;
        self.note_denial(&result);
        let (resp, source) = result?;
        let body = self.bodies.insert(OpenBody::new(source, url)).expect("checked above");
        Ok(ResponseHead { status: resp.status, headers: resp.headers, body })
    }

    async fn read_lines(&mut self, body: u32, max_lines: u32) -> Result<Lines, BodyError> {
        let read = self.read_body(body, async |open, cap, stats| open.read_lines(max_lines, cap, stats).await).await?;
        Ok(Lines { text: read.text, count: read.count, end: read.end })
    }

    async fn read_bytes(&mut self, body: u32, max_bytes: u32) -> Result<Vec<u8>, BodyError> {
        self.read_body(body, async |open, cap, stats| open.read_bytes(max_bytes, cap, stats).await).await
    }

    async fn close_body(&mut self, body: u32) {
        self.bodies.close(body);
    }

    async fn send_records(&mut self, req: Request, path: Vec<String>) -> Result<RecordsResponse, HttpError> {
        // At most a page's worth: more could not be returned in one page anyway.
        let max = self.max_forwarded_records;
        self.send_records_within(req, path, max).await.map_err(|(e, _)| e)
    }

    async fn forward_records(&mut self, req: Request, path: Vec<String>) -> Result<ForwardedResponse, HttpError> {
        // Refused before anything is sent when nothing more could be kept.
        let room = match &self.forwarded {
            None => {
                return Err(HttpError::InvalidRequest(
                    "forward-records is only for read-page and read-result, whose page gets the records".into(),
                ));
            }
            Some(kept) => {
                kept.check_room()?;
                kept.room()
            }
        };
        let answer = self.send_records_within(req, path, room).await;
        let kept = self.forwarded.as_mut().expect("set for the whole call");
        let answer = answer.map_err(|(e, too_many)| match too_many {
            Some(count) => kept.too_many(count),
            None => e,
        })?;
        let forwarded = answer.records.map(|records| kept.keep(records)).transpose()?;
        Ok(ForwardedResponse { status: answer.status, headers: answer.headers, forwarded, rest: answer.rest })
    }
}

impl GuestState {
    /// `send-records` taking out at most `max` records (the error says when there were more).
    async fn send_records_within(
        &mut self,
        req: Request,
        path: Vec<String>,
        max: usize,
    ) -> Result<RecordsResponse, (HttpError, Option<usize>)> {
        use bindings::sluice::connector::http::Host as _;
        crate::net::records::check_path(&path).map_err(|e| (e, None))?;
        let response = self.send(req).await.map_err(|e| (e, None))?;
        // Found on the guest's clock: the host's pass over the body is work done for the guest.
        let (records, rest) = crate::net::records::take(response.status, response.body, &path, max).map_err(|t| {
            let message = format!(
                "the answer holds {} records at its records path, more than the {} a page may hold",
                t.count, t.max
            );
            (HttpError::TooLarge(message), Some(t.count))
        })?;
        Ok(RecordsResponse { status: response.status, headers: response.headers, records, rest })
    }

    fn note_denial<T>(&mut self, result: &Result<T, HttpError>) {
        if let Err(HttpError::Denied(why)) = result {
            self.push_log(GuestLog { level: Level::Warn, message: format!("request denied: {why}") });
        }
    }

    /// The most bytes one read of a streamed body hands to the guest.
    fn body_piece_cap(&self) -> usize {
        usize::try_from(self.egress.max_response_bytes()).unwrap_or(usize::MAX)
    }

    /// One read of an open body, the guest's clock stopped while the host waits for the network;
    /// a body read to its end, or broken, is closed.
    async fn read_body<T>(
        &mut self,
        body: u32,
        read: impl AsyncFnOnce(&mut OpenBody, usize, &std::sync::atomic::AtomicU64) -> Result<T, BodyError>,
    ) -> Result<T, BodyError> {
        let egress = self.egress.clone();
        let cap = self.body_piece_cap();
        let open = self.bodies.get(body)?;
        let result = self.clock.waiting(read(open, cap, &egress.stats.bytes_in)).await;
        self.close_when_done(body, result.is_err());
        result
    }

    /// A body read to its end, or broken, is closed: its connection goes back at once.
    fn close_when_done(&mut self, body: u32, failed: bool) {
        if failed || self.bodies.get(body).is_ok_and(|b| b.done()) {
            self.bodies.close(body);
        }
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
    /// The captured lines (blank ones skipped) as `[name] line` messages while `room` allows,
    /// each cut to its longest; the lines past it are only counted, with no message made.
    fn take_lines(&self, name: &str, room: &mut Room) -> Taken {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let mut taken = Taken { lines: Vec::new(), dropped_lines: 0, dropped_bytes: buf.dropped };
        for line in buf.bytes.split(|b| *b == b'\n') {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // What the message would take, before anything is made of it.
            let len = (name.len() + 3 + line.len()).min(room.max_message + "… (truncated)".len());
            if taken.dropped_lines > 0 || room.messages == 0 || len > room.bytes {
                taken.dropped_lines += 1;
                continue;
            }
            let mut message = format!("[{name}] {}", String::from_utf8_lossy(line));
            truncate_message(&mut message, room.max_message);
            room.messages -= 1;
            room.bytes -= len.min(room.bytes);
            taken.lines.push(message);
        }
        buf.bytes.clear();
        buf.dropped = 0;
        taken
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl Capture {
    /// Keeps `data` while the capture has room; the rest is counted as dropped.
    fn append(&self, data: &[u8]) {
        let mut buf = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let room = MAX_CAPTURED_OUTPUT.saturating_sub(buf.bytes.len()).min(data.len());
        buf.bytes.extend_from_slice(&data[..room]);
        buf.dropped += data.len() - room;
    }
}

impl StdoutStream for Capture {
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }

    /// Written in place: the default stream hands every write to a task of its own and the
    /// guest waits for it, so a guest printing in a loop was suspended at each line and resumed
    /// on whichever thread was free, where its CPU time could only be told by the wall clock
    /// (a log flood under load then ran past its CPU budget).
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }
    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }
    /// Always room: past [`MAX_CAPTURED_OUTPUT`] bytes are counted and dropped, not refused.
    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 << 10)
    }
}

#[async_trait::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(self: Pin<&mut Self>, _: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.append(data);
        Poll::Ready(Ok(data.len()))
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// Cuts `message` to at most `max` bytes (on a character boundary), saying so.
fn truncate_message(message: &mut String, max: usize) {
    if message.len() > max {
        let mut end = max;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        // A new string: truncating in place would keep the whole allocation alive.
        *message = format!("{}… (truncated)", &message[..end]);
    }
}

/// Enforces the memory limit over everything an instance allocates (every linear memory and
/// every table, counted together: a component may hold many core instances, each with its own
/// memory) and remembers the peak, so a failed growth can be named as the limit (wasmtime's error
/// for it is not a `Trap`).
pub struct GuestLimiter {
    max_bytes: usize,
    /// Bytes of all memories and tables now.
    total: usize,
    /// The most the instance's memories and tables held together.
    pub peak_memory: usize,
    /// Set when the memory limit stopped the guest.
    pub exceeded: Option<String>,
}

/// Most memories, tables and core instances one guest instance may create; the pooling
/// allocator's per-component settings agree.
pub const MAX_MEMORIES: usize = 8;
pub const MAX_TABLES: usize = 64;
pub const MAX_CORE_INSTANCES: usize = 256;

/// What one table element costs the host (a pointer), for the memory limit.
const TABLE_ELEMENT_BYTES: usize = 8;

impl GuestLimiter {
    fn new(max_memory: u64) -> Self {
        GuestLimiter {
            max_bytes: usize::try_from(max_memory).unwrap_or(usize::MAX),
            total: 0,
            peak_memory: 0,
            exceeded: None,
        }
    }

    /// Grows the total by `desired - current`, or refuses when that passes the limit; `what`
    /// says what grew, written only for a refusal (an instance grows its memory often).
    fn grow(&mut self, current: usize, desired: usize, what: impl FnOnce() -> String) -> wasmtime::Result<bool> {
        let total = self.total.saturating_sub(current).saturating_add(desired);
        if total > self.max_bytes {
            let message = format!(
                "the connector exceeded its memory limit: {} would bring its memories and tables to {}, the limit is {}",
                what(),
                mib(total),
                mib(self.max_bytes)
            );
            self.exceeded = Some(message.clone());
            return Err(wasmtime::format_err!("{message}"));
        }
        self.total = total;
        self.peak_memory = self.peak_memory.max(total);
        Ok(true)
    }
}

impl wasmtime::ResourceLimiter for GuestLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let what = || match current {
            0 => format!("a memory of {}", mib(desired)),
            _ => format!("growing a memory to {}", mib(desired)),
        };
        self.grow(current, desired, what)
    }

    fn table_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let bytes = |elements: usize| elements.saturating_mul(TABLE_ELEMENT_BYTES);
        self.grow(bytes(current), bytes(desired), || format!("a table of {desired} elements"))
    }

    // Counts as well as bytes: every memory, table and core instance costs the host bookkeeping
    // (and address space) even when empty. Connectors built by the SDKs have one memory, two
    // tables and up to 14 core instances (Python).
    fn memories(&self) -> usize {
        MAX_MEMORIES
    }

    fn tables(&self) -> usize {
        MAX_TABLES
    }

    fn instances(&self) -> usize {
        MAX_CORE_INSTANCES
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

    /// A busy call stops counting as fresh, counts again as fresh in its next call, and counts
    /// nowhere while it waits on the host or once dropped. (Each test is a process of its own
    /// under nextest, so the counters start at zero.)
    #[test]
    fn busy_calls_leave_the_fresh_count() {
        let (a, b) = (GuestClock::default(), GuestClock::default());
        a.restart();
        b.restart();
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (2, 2));
        a.mark_busy();
        a.mark_busy();
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (2, 1));
        a.pause();
        assert_eq!(fresh_guests_wanting_cpu(), 1, "paused at a tick, it still wants a core, as a busy one");
        a.suspend();
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (1, 1));
        a.resume();
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (2, 1));
        a.restart();
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (2, 2), "a new call is fresh");
        a.mark_busy();
        drop(a);
        drop(b);
        assert_eq!((guests_wanting_cpu(), fresh_guests_wanting_cpu()), (0, 0));
    }

    /// Short stretches are charged by the wall; once one ran long, the instance's later
    /// stretches are measured in CPU time, so time the thread did not run is not charged.
    #[test]
    fn after_a_long_stretch_the_clock_counts_cpu_time_not_the_wall() {
        let clock = GuestClock::default();
        clock.restart();
        std::thread::sleep(Duration::from_millis(5));
        let first = clock.suspend();
        assert!(first >= Duration::from_millis(5), "a first stretch is charged its wall-clock time: {first:?}");
        clock.resume();
        std::thread::sleep(Duration::from_millis(50));
        let second = clock.suspend() - first;
        assert!(second < Duration::from_millis(20), "a thread asleep runs no guest code: charged {second:?}");
    }
    fn state(limits: &Limits) -> GuestState {
        let egress = Egress::new(crate::net::EgressPolicy::default(), crate::net::HttpOptions::default()).unwrap();
        GuestState::new(Arc::new(egress), limits)
    }

    /// 1 MiB of `a\n` on stdout used to become 524,288 messages in one call, past the 1000 the
    /// call may log: captured lines count in the per-call limits as log calls do, and the rest
    /// are only counted.
    #[test]
    fn captured_lines_count_against_the_log_limits_of_the_call() {
        let mut guest = state(&Limits::default());
        guest.push_log(GuestLog { level: Level::Info, message: "from log".into() });
        guest.stdout.0.lock().unwrap().bytes.extend("a\n".repeat(MAX_CAPTURED_OUTPUT / 2).as_bytes());
        guest.stderr.0.lock().unwrap().bytes.extend(b"e1\n\ne2\n");
        let logs = guest.take_logs();
        let kept = logs.iter().filter(|l| l.message == "[stdout] a").count();
        assert_eq!(kept, 999, "the log call and 999 lines make the 1000 a call may keep");
        assert!(!logs.iter().any(|l| l.message.starts_with("[stderr] e")), "no room left for stderr");
        let expected =
            format!("{} more lines of output from the connector were dropped", MAX_CAPTURED_OUTPUT / 2 - 999 + 2);
        assert!(logs.iter().any(|l| l.level == Level::Warn && l.message.contains(&expected)), "{expected}");
        assert!(logs.len() <= 1000 + 2, "{}", logs.len());
        // The next call has its own room again.
        guest.stdout.0.lock().unwrap().bytes.extend(b"next\n");
        assert_eq!(guest.take_logs(), [GuestLog { level: Level::Info, message: "[stdout] next".into() }]);
    }

    /// Lines count in the call's log bytes too: long lines fill them before the count does.
    #[test]
    fn captured_lines_count_against_the_log_bytes_of_the_call() {
        let limits = Limits { max_log_bytes_per_call: 10_000, max_log_bytes: 1_000, ..Limits::default() };
        let mut guest = state(&limits);
        let line = format!("{}\n", "x".repeat(5_000));
        guest.stdout.0.lock().unwrap().bytes.extend(line.repeat(100).as_bytes());
        let logs = guest.take_logs();
        let kept: Vec<&GuestLog> = logs.iter().filter(|l| l.message.starts_with("[stdout] xxx")).collect();
        assert!(kept.iter().all(|l| l.message.ends_with("… (truncated)") && l.message.len() < 1_100));
        assert_eq!(kept.len(), 10_000 / (1_000 + "… (truncated)".len()));
        let dropped = format!("{} more lines of output", 100 - kept.len());
        assert!(logs.iter().any(|l| l.message.contains(&dropped)), "{dropped}: {logs:?}");
    }

    #[test]
    fn a_memory_refusal_says_how_much_was_asked_beyond_the_limit() {
        let mut limiter = GuestLimiter::new(64 << 20);
        assert!(limiter.memory_growing(0, 32 << 20, None).unwrap());
        assert!(limiter.memory_growing(32 << 20, 64 << 20, None).unwrap());
        assert!(limiter.memory_growing(64 << 20, (64 << 20) + (64 << 10), None).is_err());
        let message = limiter.exceeded.unwrap();
        assert!(message.contains("to 64.06 MiB, the limit is 64 MiB"), "{message}");
        assert_eq!(limiter.peak_memory, 64 << 20);
    }

    #[test]
    fn memories_and_tables_count_together() {
        let mut limiter = GuestLimiter::new(64 << 20);
        for _ in 0..3 {
            assert!(limiter.memory_growing(0, 20 << 20, None).unwrap());
        }
        assert_eq!(limiter.peak_memory, 60 << 20);
        // A fourth memory passes the limit though each one is far below it.
        assert!(limiter.memory_growing(0, 20 << 20, None).is_err());
        // So does a table that would take the rest.
        assert!(limiter.table_growing(0, 1 << 20, None).is_err());
        assert!(limiter.table_growing(0, 1000, None).unwrap());
        assert_eq!(limiter.peak_memory, (60 << 20) + 8000);
    }
}
