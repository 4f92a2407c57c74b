//! The single writer: the only code that writes protocol output. Producers render records into
//! complete lines and send them through one bounded channel, so a slow consumer slows the
//! producers instead of filling memory, and everything sent before a STATE is written before it.

use super::{FailureType, StreamStatus, airbyte, singer};
use serde_json::{Map, Value};
use std::io::Write;
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

enum Event {
    Bytes(Vec<u8>),
    /// A stream's new state; the writer renders it (Singer merges all streams into one value).
    State {
        stream: String,
        value: Value,
    },
    /// States of streams not read in this run, carried into Singer's whole-tap STATE.
    Seed(Map<String, Value>),
    Stderr(String),
}

/// A handle to the writer; clones share its channel.
#[derive(Clone)]
pub struct Output {
    tx: mpsc::Sender<Event>,
    format: Format,
    /// Masked out of every log and error message.
    pub secrets: crate::secrets::Secrets,
}

/// The writer thread; [`Writer::finish`] tells whether every byte reached the sink.
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
        let (tx, mut rx) = mpsc::channel::<Event>(64);
        let thread = std::thread::Builder::new()
            .name("sluice-writer".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::with_capacity(256 << 10, sink);
                let mut bookmarks = Map::new();
                // Singer targets commit the last STATE only if nothing follows it.
                let mut written_since_state = false;
                while let Some(event) = rx.blocking_recv() {
                    match event {
                        Event::Bytes(bytes) => {
                            written_since_state = true;
                            out.write_all(&bytes)?
                        }
                        Event::State { stream, value } => match format {
                            Format::Airbyte => out.write_all(&line(&airbyte::stream_state(&stream, &value)))?,
                            Format::Singer => {
                                bookmarks.insert(stream, value);
                                out.write_all(&line(&singer::state(&bookmarks)))?;
                                written_since_state = false;
                            }
                        },
                        Event::Seed(states) => bookmarks.extend(states),
                        Event::Stderr(text) => {
                            out.flush()?;
                            eprintln!("{text}");
                        }
                    }
                    // Flush whenever nothing else is waiting: timely output, written in batches.
                    if rx.is_empty() {
                        out.flush()?;
                    }
                }
                if format == Format::Singer && written_since_state && !bookmarks.is_empty() {
                    out.write_all(&line(&singer::state(&bookmarks)))?;
                }
                out.flush()
            })
            .expect("spawn the writer thread");
        (Output { tx, format, secrets: Default::default() }, Writer { thread })
    }

    pub fn format(&self) -> Format {
        self.format
    }

    async fn send(&self, event: Event) -> Result<(), OutputClosed> {
        self.tx.send(event).await.map_err(|_| OutputClosed)
    }

    pub fn stamp(&self) -> Stamp {
        let ms = super::now_ms();
        let rfc3339 = if self.format == Format::Singer { singer::timestamp(ms) } else { String::new() };
        Stamp { ms, rfc3339 }
    }

    /// Renders one checked record into `buf` as a complete line.
    pub fn push_record(&self, buf: &mut Vec<u8>, stream_json: &str, data: &str, stamp: &Stamp) {
        match self.format {
            Format::Airbyte => airbyte::push_record(buf, stream_json, data, stamp.ms),
            Format::Singer => singer::push_record(buf, stream_json, data, &stamp.rfc3339),
        }
    }

    /// Complete record lines rendered with [`Output::push_record`].
    pub async fn records(&self, lines: Vec<u8>) -> Result<(), OutputClosed> {
        self.send(Event::Bytes(lines)).await
    }

    /// A protocol message written as it is (SPEC, CATALOG, CONNECTION_STATUS, SCHEMA).
    pub async fn message(&self, message: &Value) -> Result<(), OutputClosed> {
        self.send(Event::Bytes(line(message))).await
    }

    pub async fn log(&self, level: &str, message: &str) -> Result<(), OutputClosed> {
        let message = &self.secrets.mask(message);
        match self.format {
            Format::Airbyte => self.message(&airbyte::log(level, message)).await,
            Format::Singer => self.send(Event::Stderr(format!("{level} {message}"))).await,
        }
    }

    pub async fn error(&self, message: &str, failure: FailureType, stream: Option<&str>) -> Result<(), OutputClosed> {
        let message = &self.secrets.mask(message);
        match self.format {
            Format::Airbyte => self.message(&airbyte::trace_error(message, None, failure, stream)).await,
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

    /// Singer's SCHEMA for a stream, before its first record; nothing in Airbyte.
    pub async fn schema(&self, stream: &crate::bindings::Stream) -> Result<(), OutputClosed> {
        if self.format != Format::Singer {
            return Ok(());
        }
        let schema: Value = serde_json::from_str(&stream.json_schema).unwrap_or(Value::Null);
        self.message(&singer::schema(&stream.name, &schema, &stream.primary_key, stream.cursor_field.as_deref())).await
    }
}

impl Writer {
    /// Waits until everything sent before every `Output` was dropped is written.
    pub fn finish(self) -> std::io::Result<()> {
        self.thread.join().unwrap_or_else(|_| Err(std::io::Error::other("writer thread panicked")))
    }
}
