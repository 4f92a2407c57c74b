//! The single writer: the only code that writes protocol output. Producers render records into
//! complete lines and send them through one bounded channel, so a slow consumer slows the
//! producers instead of filling memory, and everything sent before a STATE is written before it.
//! Besides stdout the writer feeds [`Sinks`]: a [`Sink`] that keeps the run (the replay lake is
//! one) and a [`Batcher`] for BATCH data files. Both are traits owned here, so the writer knows
//! nothing of storage.

use super::{FailureType, StreamStatus, airbyte, singer};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use tokio::sync::mpsc;

/// The protocol spoken on stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Airbyte messages: RECORD, STATE per stream, LOG, TRACE.
    #[default]
    Airbyte,
    /// A Singer tap: SCHEMA, RECORD, STATE (bookmarks); logs go to stderr.
    Singer,
}

/// What produced a run, for whatever keeps it (the lake's manifest).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PluginInfo {
    pub sha256: String,
    /// `package@version` of the contract the plugin was built for.
    pub wit: String,
    /// sha256 of the config as the plugin received it (minified JSON).
    pub config_sha256: String,
}

/// Keeps a run's messages besides stdout, as Singer lines in output order (on the writer
/// thread). An error stops the run's output: what was kept so far stays kept.
pub trait Sink: Send {
    /// A stream's SCHEMA line (repeated where the sink needs its parts to stand alone).
    fn schema(&mut self, stream: &str, line: &[u8]) -> anyhow::Result<()>;
    /// Complete lines: `records` records (of `stream`), or one message (BATCH).
    fn write(&mut self, lines: &[u8], records: u64, stream: Option<&str>) -> anyhow::Result<()>;
    /// A STATE line: everything before it is covered.
    fn state(&mut self, line: &[u8]) -> anyhow::Result<()>;
    /// What produced the run.
    fn describe(&mut self, _plugin: PluginInfo) -> anyhow::Result<()> {
        Ok(())
    }
    /// One recorded HTTP exchange (a JSON line).
    fn exchange(&mut self, _line: &[u8]) -> anyhow::Result<()> {
        Ok(())
    }
    /// True when the sink stores what it gets at once (so a held STATE can be released by
    /// [`Sink::sync`] instead of waiting for the sink's own cadence).
    fn is_continual(&self) -> bool {
        true
    }
    /// Makes everything written so far durable.
    fn sync(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
    /// True when everything written so far is durable.
    fn is_durable(&self) -> bool {
        true
    }
    /// The run ended (`succeeded`, `failed`, `interrupted`): store the rest, seal.
    fn finish(&mut self, outcome: &str) -> anyhow::Result<()>;
}

/// BATCH mode: takes record data lines into data files and answers with BATCH messages.
pub trait Batcher: Send {
    /// Adds `records` data lines of `stream`; a BATCH message when a file was completed.
    fn add(&mut self, stream: &str, data_lines: &[u8], records: u64) -> anyhow::Result<Option<Vec<u8>>>;
    /// Completes every open file (before a STATE covers it): their BATCH messages.
    fn flush_all(&mut self) -> anyhow::Result<Vec<Vec<u8>>>;
}

/// What the writer feeds besides stdout.
#[derive(Default)]
pub struct Sinks {
    pub keep: Option<Box<dyn Sink>>,
    pub batch: Option<Box<dyn Batcher>>,
    /// Hold each STATE (and what follows it) off stdout until `keep` holds it durably.
    pub hold_state: bool,
}

enum Event {
    /// A page's record lines (or, in BATCH mode, its record data lines).
    Records {
        stream: Arc<str>,
        lines: PageLines,
        count: u64,
    },
    /// A message for stdout only (SPEC, CATALOG, LOG, TRACE, ...).
    Bytes(Vec<u8>),
    /// Singer's SCHEMA line of a stream: on stdout in Singer format, and in the lake.
    Schema {
        stream: String,
        line: Vec<u8>,
    },
    /// A stream's new state; the writer renders it (Singer merges all streams into one value).
    State {
        stream: String,
        value: Value,
    },
    /// States of streams not read in this run, carried into Singer's whole-tap STATE.
    Seed(Map<String, Value>),
    Stderr(String),
    /// What produced the run, for the lake's manifest.
    Describe(PluginInfo),
    /// One recorded HTTP attempt (a JSON line), for the lake.
    Exchange(Vec<u8>),
    /// Stop now (everything sent before is written); how the run ended, for the lake.
    Close(String),
}

impl Event {
    /// What the event holds in memory, roughly: its bytes.
    fn bytes(&self) -> usize {
        match self {
            Event::Records { lines, .. } => lines.stdout.len() + lines.singer.len(),
            Event::Bytes(b) | Event::Exchange(b) => b.len(),
            Event::Schema { line, .. } => line.len(),
            Event::Stderr(s) => s.len(),
            _ => 0,
        }
    }
}

/// What record lines a page renders: the stdout form, and the Singer form for the lake when
/// stdout speaks Airbyte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Render {
    Stdout,
    StdoutAndSinger,
    /// BATCH mode: the records' JSON alone, one per line, for the data files.
    Data,
}

/// A page's rendered record lines.
#[derive(Default)]
pub struct PageLines {
    stdout: Vec<u8>,
    singer: Vec<u8>,
}

/// A handle to the writer; clones share its channel.
#[derive(Clone)]
pub struct Output {
    tx: mpsc::Sender<Queued>,
    /// Bytes the queue may hold: a producer waits for room, so a consumer that stops reading
    /// holds the host to this much output, however large the pages.
    room: Arc<tokio::sync::Semaphore>,
    format: Format,
    render: Render,
    /// Masked out of every log and error message.
    pub secrets: crate::data::secrets::Secrets,
    /// Bytes of the STATE lines written so far (the writer adds each as it writes it).
    state_bytes: Arc<AtomicU64>,
}

/// An event and the queue room it holds until the writer is done with it.
type Queued = (Event, Option<tokio::sync::OwnedSemaphorePermit>);

/// Bytes of rendered output the queue holds at most (a larger event waits for the whole queue).
pub const OUTPUT_QUEUE_BYTES: usize = 32 << 20;
/// Events the queue holds at most.
const OUTPUT_QUEUE_EVENTS: usize = 64;
/// How long the writer, busy a moment ago, lets events gather before it looks again: at most
/// this much later on stdout, and about a thousand wake-ups a second at most.
const WRITER_LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// The writer thread; [`Writer::finish`] tells whether every byte reached the sink (and the lake).
pub struct Writer {
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

/// The writer has stopped (for example the consumer closed stdout).
#[derive(Debug)]
pub struct OutputClosed;

impl std::fmt::Display for OutputClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the output stream is closed")
    }
}
impl std::error::Error for OutputClosed {}

/// When a page of records was read: `emitted_at` for Airbyte, `time_extracted` for Singer.
pub struct Stamp {
    ms: u64,
    rfc3339: String,
}

fn line(message: &Value) -> Vec<u8> {
    let mut bytes = serde_json::to_vec(message).expect("a Value always serializes");
    bytes.push(b'\n');
    bytes
}

impl Output {
    /// Starts the writer on its own thread, so blocking writes never stall the async workers.
    pub fn spawn(format: Format, sink: Box<dyn Write + Send>) -> (Output, Writer) {
        Self::spawn_with(format, sink, Sinks::default())
    }

    /// [`Output::spawn`], also feeding `sinks` (replay storage, BATCH data files).
    pub fn spawn_with(format: Format, sink: Box<dyn Write + Send>, sinks: Sinks) -> (Output, Writer) {
        let render = match &sinks {
            Sinks { batch: Some(_), .. } => Render::Data,
            Sinks { keep: Some(_), .. } if format == Format::Airbyte => Render::StdoutAndSinger,
            _ => Render::Stdout,
        };
        let (tx, mut rx) = mpsc::channel::<Queued>(OUTPUT_QUEUE_EVENTS);
        let state_bytes = Arc::new(AtomicU64::new(0));
        let counted = state_bytes.clone();
        let thread = std::thread::Builder::new()
            .name("sluice-writer".into())
            .spawn(move || {
                let mut pump = Pump {
                    format,
                    out: std::io::BufWriter::with_capacity(256 << 10, sink),
                    sinks,
                    held: None,
                    bookmarks: Map::new(),
                    written_since_state: false,
                    any_state: false,
                    reading: false,
                    since_state: std::collections::HashMap::new(),
                    state_bytes: counted,
                };
                let mut outcome = "ended".to_string();
                // Events came since the queue was last found empty.
                let mut busy = false;
                loop {
                    let (event, room) = match rx.try_recv() {
                        Ok(queued) => queued,
                        Err(mpsc::error::TryRecvError::Disconnected) => break,
                        Err(mpsc::error::TryRecvError::Empty) => {
                            // Flush whenever nothing else is waiting: timely output, in batches.
                            pump.out.flush()?;
                            // While events keep coming the writer looks again after a short
                            // while instead of waiting to be woken: a wake-up per page (a
                            // futex call on the sender's side, a context switch on ours) was 8%
                            // of a run of 10,000 one-record partitions.
                            if std::mem::take(&mut busy) {
                                std::thread::sleep(WRITER_LINGER);
                                continue;
                            }
                            match rx.blocking_recv() {
                                Some(queued) => queued,
                                None => break,
                            }
                        }
                    };
                    busy = true;
                    if let Event::Close(how) = event {
                        outcome = how;
                        break;
                    }
                    pump.event(event)?;
                    drop(room);
                }
                pump.finish(&outcome)
            })
            .expect("spawn the writer thread");
        let room = Arc::new(tokio::sync::Semaphore::new(OUTPUT_QUEUE_BYTES));
        (Output { tx, room, format, render, secrets: Default::default(), state_bytes }, Writer { thread })
    }

    /// Bytes of the STATE lines written so far (all of them once the writer is done).
    pub fn state_bytes(&self) -> u64 {
        self.state_bytes.load(AtomicOrdering::Relaxed)
    }

    pub fn format(&self) -> Format {
        self.format
    }

    async fn send(&self, event: Event) -> Result<(), OutputClosed> {
        let bytes = event.bytes().min(OUTPUT_QUEUE_BYTES);
        let room = match bytes {
            0 => None,
            n => Some(self.room.clone().acquire_many_owned(n as u32).await.map_err(|_| OutputClosed)?),
        };
        self.tx.send((event, room)).await.map_err(|_| OutputClosed)
    }

    pub fn stamp(&self) -> Stamp {
        let ms = super::now_ms();
        let singer = self.format == Format::Singer || self.render == Render::StdoutAndSinger;
        let rfc3339 = if singer { singer::timestamp(ms) } else { String::new() };
        Stamp { ms, rfc3339 }
    }

    /// An empty page, for about `bytes` of records.
    pub fn page(&self, bytes: usize) -> PageLines {
        let singer = if self.render == Render::StdoutAndSinger { Vec::with_capacity(bytes) } else { Vec::new() };
        PageLines { stdout: Vec::with_capacity(bytes), singer }
    }

    /// Renders one checked record into `page` as a complete line.
    pub fn push_record(&self, page: &mut PageLines, stream_json: &str, data: &str, stamp: &Stamp) {
        match (self.render, self.format) {
            (Render::Data, _) => {
                page.stdout.extend_from_slice(data.as_bytes());
                page.stdout.push(b'\n');
            }
            (_, Format::Airbyte) => airbyte::push_record(&mut page.stdout, stream_json, data, stamp.ms),
            (_, Format::Singer) => singer::push_record(&mut page.stdout, stream_json, data, &stamp.rfc3339),
        }
        if self.render == Render::StdoutAndSinger {
            singer::push_record(&mut page.singer, stream_json, data, &stamp.rfc3339);
        }
    }

    /// `count` records of `stream` rendered with [`Output::push_record`].
    pub async fn records(&self, stream: &str, page: PageLines, count: u64) -> Result<(), OutputClosed> {
        self.send(Event::Records { stream: stream.into(), lines: page, count }).await
    }

    /// What produced the run, kept in the lake's manifest.
    pub async fn describe_run(&self, plugin: PluginInfo) -> Result<(), OutputClosed> {
        self.send(Event::Describe(plugin)).await
    }

    /// One recorded HTTP exchange, stored beside the run's segments.
    pub async fn exchange(&self, line: Vec<u8>) -> Result<(), OutputClosed> {
        self.send(Event::Exchange(line)).await
    }

    /// Ends the output now: everything sent before is written, the lake is sealed with
    /// `outcome`, and later sends fail. Other handles may still exist (tasks being cancelled).
    pub async fn close(&self, outcome: &str) {
        let _ = self.send(Event::Close(outcome.to_string())).await;
    }

    /// A protocol message written as it is (SPEC, CATALOG, CONNECTION_STATUS, SCHEMA).
    pub async fn message(&self, message: &Value) -> Result<(), OutputClosed> {
        self.send(Event::Bytes(line(message))).await
    }

    pub async fn log(&self, level: &str, message: &str) -> Result<(), OutputClosed> {
        let message = &self.secrets.mask_text(message);
        // Also an event of the current span (a run's, a partition's), for a tracing subscriber.
        match level {
            "ERROR" | "FATAL" => tracing::error!(message),
            "WARN" => tracing::warn!(message),
            "DEBUG" | "TRACE" => tracing::debug!(message),
            _ => tracing::info!(message),
        }
        match self.format {
            Format::Airbyte => self.message(&airbyte::log(level, message)).await,
            Format::Singer => self.send(Event::Stderr(format!("{level} {message}"))).await,
        }
    }

    /// An error for the operator (Airbyte TRACE ERROR, whose `internal_message` repeats it).
    pub async fn error(&self, message: &str, failure: FailureType, stream: Option<&str>) -> Result<(), OutputClosed> {
        self.error_with(message, None, failure, stream).await
    }

    /// [`Output::error`] with an `internal_message` of its own.
    pub async fn error_with(
        &self,
        message: &str,
        internal: Option<&str>,
        failure: FailureType,
        stream: Option<&str>,
    ) -> Result<(), OutputClosed> {
        let message = &self.secrets.mask_text(message);
        let internal = internal.map(|i| self.secrets.mask_text(i));
        match self.format {
            Format::Airbyte => {
                let internal = internal.as_deref().unwrap_or(message);
                self.message(&airbyte::trace_error(message, Some(internal), failure, stream)).await
            }
            Format::Singer => self.send(Event::Stderr(format!("ERROR ({}) {message}", failure.as_str()))).await,
        }
    }

    pub async fn status(&self, stream: &str, status: StreamStatus) -> Result<(), OutputClosed> {
        match self.format {
            Format::Airbyte => self.message(&airbyte::stream_status(stream, status)).await,
            Format::Singer => Ok(()),
        }
    }

    /// The connector's estimate of a stream's records (Airbyte TRACE ESTIMATE).
    pub async fn estimate(&self, stream: &str, records: u64) -> Result<(), OutputClosed> {
        match self.format {
            Format::Airbyte => self.message(&airbyte::estimate(stream, records)).await,
            Format::Singer => Ok(()),
        }
    }

    /// A stream's new state, written after everything sent before it.
    pub async fn state(&self, stream: &str, value: Value) -> Result<(), OutputClosed> {
        self.send(Event::State { stream: stream.to_string(), value }).await
    }

    /// States of streams this run does not read, kept in Singer's whole-tap STATE.
    pub async fn seed_states(&self, states: Map<String, Value>) -> Result<(), OutputClosed> {
        self.send(Event::Seed(states)).await
    }

    /// Singer's SCHEMA for a stream, before its first record (stdout in Singer format, and the
    /// lake).
    pub async fn schema(&self, stream: &crate::bindings::Stream) -> Result<(), OutputClosed> {
        if self.format != Format::Singer && self.render == Render::Stdout {
            return Ok(());
        }
        let schema: Value = serde_json::from_str(&stream.json_schema).unwrap_or(Value::Null);
        let message = singer::schema(&stream.name, &schema, &stream.primary_key, stream.cursor_field.as_deref());
        self.send(Event::Schema { stream: stream.name.clone(), line: line(&message) }).await
    }
}

/// The writer thread's side: stdout, and the sinks beside it.
struct Pump {
    format: Format,
    out: std::io::BufWriter<Box<dyn Write + Send>>,
    sinks: Sinks,
    /// Hold-state mode: stdout from the first STATE the lake does not yet hold durably.
    held: Option<Vec<u8>>,
    bookmarks: Map<String, Value>,
    /// Singer targets commit the last STATE only if nothing follows it.
    written_since_state: bool,
    /// Whether any STATE was written: a Singer read always ends with one.
    any_state: bool,
    /// A read started (its input state was seeded): only a read owes a final STATE, not
    /// `--discover`, whose stdout is the catalog alone.
    reading: bool,
    /// Records of each stream since its last STATE (Airbyte `sourceStats.recordCount`).
    since_state: std::collections::HashMap<Arc<str>, u64>,
    /// Shared with the [`Output`] handles: bytes of the STATE lines written.
    state_bytes: Arc<AtomicU64>,
}

fn sink_error(e: anyhow::Error) -> std::io::Error {
    std::io::Error::other(format!("replay storage: {e:#}"))
}

impl Pump {
    fn event(&mut self, event: Event) -> std::io::Result<()> {
        match event {
            Event::Records { stream, lines, count } => {
                self.written_since_state = true;
                *self.since_state.entry(stream.clone()).or_default() += count;
                if let Some(batch) = self.sinks.batch.as_mut() {
                    if let Some(message) = batch.add(&stream, &lines.stdout, count).map_err(sink_error)? {
                        self.singer_message(&message, &stream)?;
                    }
                    return Ok(());
                }
                // The lake first: whatever a consumer has seen is already in it.
                let singer = if self.format == Format::Singer { &lines.stdout } else { &lines.singer };
                self.keep(|sink| sink.write(singer, count, Some(&stream)))?;
                self.stdout(&lines.stdout)?;
            }
            Event::Bytes(bytes) => self.stdout(&bytes)?,
            Event::Schema { stream, line } => {
                self.keep(|sink| sink.schema(&stream, &line))?;
                if self.format == Format::Singer {
                    self.stdout(&line)?;
                }
            }
            Event::State { stream, value } => {
                self.flush_batches()?;
                self.bookmarks.insert(stream.clone(), value);
                let records = self.since_state.remove(stream.as_str()).unwrap_or(0);
                let stdout = match self.format {
                    Format::Airbyte => airbyte::stream_state(&stream, &self.bookmarks[&stream], records),
                    Format::Singer => singer::state_line(&self.bookmarks),
                };
                self.state_bytes.fetch_add(stdout.len() as u64, AtomicOrdering::Relaxed);
                self.state(stdout)?;
            }
            Event::Seed(states) => {
                self.reading = true;
                self.bookmarks.extend(states);
            }
            Event::Stderr(text) => {
                self.out.flush()?;
                eprintln!("{}", super::printable(&text));
            }
            Event::Describe(plugin) => self.keep(|sink| sink.describe(plugin))?,
            Event::Exchange(line) => self.keep(|sink| sink.exchange(&line))?,
            Event::Close(_) => {}
        }
        Ok(())
    }

    /// Bytes for stdout, held back while a STATE waits for the lake.
    fn stdout(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        match &mut self.held {
            Some(held) => held.extend_from_slice(bytes),
            None => self.out.write_all(bytes)?,
        }
        Ok(())
    }

    /// Runs `f` on the keeping sink, if there is one, then releases held stdout it made durable.
    fn keep(&mut self, f: impl FnOnce(&mut dyn Sink) -> anyhow::Result<()>) -> std::io::Result<()> {
        let Some(sink) = self.sinks.keep.as_deref_mut() else { return Ok(()) };
        f(sink).map_err(sink_error)?;
        if self.held.is_some() && sink.is_durable() {
            let held = self.held.take().unwrap_or_default();
            self.out.write_all(&held)?;
        }
        Ok(())
    }

    /// A Singer message for both stdout (Singer format) and the lake: BATCH.
    fn singer_message(&mut self, message: &[u8], stream: &str) -> std::io::Result<()> {
        self.written_since_state = true;
        self.keep(|sink| sink.write(message, 0, Some(stream)))?;
        if self.format == Format::Singer {
            self.stdout(message)?;
        }
        Ok(())
    }

    /// BATCH mode: every pending record into a data file, before a STATE covers it.
    fn flush_batches(&mut self) -> std::io::Result<()> {
        let Some(batch) = self.sinks.batch.as_mut() else { return Ok(()) };
        for message in batch.flush_all().map_err(sink_error)? {
            let stream = serde_json::from_slice::<Value>(&message).ok();
            let stream = stream.as_ref().and_then(|m| m["stream"].as_str()).unwrap_or_default().to_string();
            self.singer_message(&message, &stream)?;
        }
        Ok(())
    }

    /// A STATE: `stdout` in the output format, the lake's in Singer's. With hold-state, stdout
    /// gets it (and what follows) only once the lake holds it durably.
    fn state(&mut self, stdout: Vec<u8>) -> std::io::Result<()> {
        self.written_since_state = false;
        self.any_state = true;
        // The lake's copy only when there is a lake: it holds every stream's state.
        if self.sinks.keep.is_some() {
            let singer = match self.format {
                Format::Singer => stdout.clone(),
                Format::Airbyte => singer::state_line(&self.bookmarks),
            };
            self.keep(|sink| sink.state(&singer))?;
        }
        let hold = self.sinks.hold_state;
        if !hold {
            return self.stdout(&stdout);
        }
        self.held.get_or_insert_with(Vec::new).extend_from_slice(&stdout);
        // Local files are made durable at once; a batched lake releases it at its next upload.
        self.keep(|sink| if sink.is_continual() { sink.sync() } else { Ok(()) })
    }

    /// The last Singer STATE (when records followed the last one, or no STATE was written at
    /// all: a target writing the last STATE it sees to a file must get one, or the next run
    /// would start over), then the lake sealed.
    fn finish(mut self, outcome: &str) -> std::io::Result<()> {
        self.flush_batches()?;
        let singer_owes_one =
            self.format == Format::Singer && self.reading && !self.any_state && outcome != "interrupted";
        if self.written_since_state && !self.bookmarks.is_empty() || singer_owes_one {
            let singer = singer::state_line(&self.bookmarks);
            if self.format == Format::Singer {
                self.stdout(&singer)?;
            }
            self.keep(|sink| sink.state(&singer))?;
        }
        self.keep(|sink| sink.finish(outcome))?;
        if let Some(held) = self.held.take() {
            self.out.write_all(&held)?;
        }
        self.out.flush()
    }
}

impl Writer {
    /// Waits until everything sent before every `Output` was dropped is written.
    pub fn finish(self) -> std::io::Result<()> {
        self.thread.join().unwrap_or_else(|_| Err(std::io::Error::other("writer thread panicked")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::sync::mpsc as std_mpsc;

    /// A consumer that stops reading: each write waits until the gate opens (is dropped).
    struct Gated {
        entered: std_mpsc::Sender<()>,
        gate: std_mpsc::Receiver<()>,
    }

    impl Write for Gated {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            let _ = self.entered.send(());
            let _ = self.gate.recv();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn page(bytes: usize) -> PageLines {
        PageLines { stdout: vec![b'x'; bytes], singer: Vec::new() }
    }

    /// Pages wait for room in the queue by their bytes, not only their count: with the consumer
    /// stalled, the host holds the page being written plus at most the queue's bytes.
    #[tokio::test]
    async fn the_output_queue_is_bounded_in_bytes() {
        let (entered_tx, entered) = std_mpsc::channel();
        let (gate, gate_rx) = std_mpsc::channel::<()>();
        let (out, writer) = Output::spawn(Format::Airbyte, Box::new(Gated { entered: entered_tx, gate: gate_rx }));
        let eight = 8 << 20;
        out.records("s", page(eight), 1).await.unwrap();
        entered.recv().unwrap();
        // The writer is stuck on the first page; three more fill the queue's 32 MiB with it.
        for _ in 0..3 {
            out.records("s", page(eight), 1).await.unwrap();
        }
        assert_eq!(out.room.available_permits(), 0);
        let mut fifth = Box::pin(out.records("s", page(eight), 1));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        assert!(fifth.as_mut().poll(&mut cx).is_pending(), "a page beyond the queue's bytes waits");
        drop(gate);
        fifth.await.unwrap();
        out.close("succeeded").await;
        drop(out);
        assert!(writer.finish().is_ok());
    }
}
