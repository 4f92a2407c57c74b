//! The lake writer: the run's Singer message stream cut into segments named by monotonic
//! ULIDs. It runs inside the output writer thread, so it sees messages in exactly the order
//! stdout does; uploads are synchronous there (a blocked upload slows producers instead of
//! buffering without bound).
//!
//! Cadence: *continual* appends to the open segment file as messages arrive (local files: a
//! SIGKILL loses nothing already written); *batched* keeps the open segment in memory and
//! uploads it when a STATE arrives and the minimum interval has passed, when it reaches the
//! size threshold, and at exit (a SIGKILL loses what was not yet uploaded).

use super::manifest::{self, MANIFEST, Manifest, PluginInfo, Segment};
use super::store::Location;
use crate::data::protocol::Sink as RunSink;
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::io::Write;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Cadence {
    /// Continual for local files, batched for object stores.
    #[default]
    Auto,
    /// Append to the open segment as the run goes (local files only).
    Continual,
    /// Upload at STATE boundaries after the minimum interval, on the size threshold, and at exit.
    Batched,
}

#[derive(Debug, Clone)]
pub struct LakeOptions {
    pub cadence: Cadence,
    /// Least time between uploads at STATE boundaries.
    pub min_interval: Duration,
    /// A segment is cut once it holds this many bytes (uncompressed).
    pub max_segment_bytes: u64,
    pub gzip: bool,
}

impl Default for LakeOptions {
    fn default() -> Self {
        LakeOptions {
            cadence: Cadence::Auto,
            min_interval: Duration::from_secs(120),
            max_segment_bytes: 64 << 20,
            gzip: false,
        }
    }
}

/// Where the open segment's bytes go.
enum Sink {
    Memory(Vec<u8>),
    File(std::fs::File),
}

struct OpenSegment {
    name: String,
    sink: Sink,
    /// Over the stored bytes (continual mode: the file as written).
    hasher: Sha256,
    info: Segment,
    streams: BTreeSet<String>,
    /// Bytes written since the last fsync (continual mode).
    unsynced: bool,
}

pub struct LakeWriter {
    rt: Runtime,
    run: Location,
    options: LakeOptions,
    continual: bool,
    ids: ulid::Generator,
    /// The latest SCHEMA line of every stream so far, in order of first appearance.
    schemas: Vec<(String, Vec<u8>)>,
    open: Option<OpenSegment>,
    manifest: Manifest,
    last_cut: Instant,
    /// Recorded HTTP exchanges not yet stored; written as `http/<ULID>.jsonl` at every cut.
    exchanges: Vec<u8>,
}

/// A current-thread runtime for the store's async API, from the (synchronous) writer thread.
/// Dropping it never blocks, so a writer may be dropped anywhere.
pub(crate) struct Runtime(Option<tokio::runtime::Runtime>);

impl Runtime {
    pub(crate) fn new() -> Result<Runtime> {
        let rt =
            tokio::runtime::Builder::new_current_thread().enable_all().build().context("start the lake runtime")?;
        Ok(Runtime(Some(rt)))
    }

    /// Runs `f` to completion; call it only outside async code (the writer thread, or
    /// `spawn_blocking`).
    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.0.as_ref().expect("runtime lives until drop").block_on(f)
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

fn now_rfc3339() -> String {
    crate::data::protocol::singer::timestamp(crate::data::protocol::now_ms())
}

impl LakeWriter {
    /// Starts a run's folder (named by a new ULID) under `root`, with its first manifest. It
    /// blocks: call it outside async code.
    pub fn create(root: &Location, options: LakeOptions) -> Result<LakeWriter> {
        let rt = Runtime::new()?;
        let mut ids = ulid::Generator::new();
        let run_id = ids.generate().context("generate the run ULID")?.to_string();
        let run = root.child(&run_id)?;
        let continual = match options.cadence {
            Cadence::Auto => run.local_dir.is_some() && !options.gzip,
            Cadence::Continual if run.local_dir.is_none() => {
                anyhow::bail!("continual replay cadence needs local files ({} is an object store)", root.uri)
            }
            Cadence::Continual if options.gzip => anyhow::bail!("continual replay cadence cannot gzip segments"),
            Cadence::Continual => true,
            Cadence::Batched => false,
        };
        let manifest = Manifest {
            format: manifest::FORMAT.to_string(),
            run: run_id,
            started_at: Some(now_rfc3339()),
            ..Default::default()
        };
        let writer = LakeWriter {
            rt,
            run,
            options,
            continual,
            ids,
            schemas: Vec::new(),
            open: None,
            manifest,
            last_cut: Instant::now(),
            exchanges: Vec::new(),
        };
        writer.write_manifest()?;
        Ok(writer)
    }

    /// The run's folder.
    pub fn run(&self) -> &Location {
        &self.run
    }

    fn store_exchanges(&mut self) -> Result<()> {
        if self.exchanges.is_empty() {
            return Ok(());
        }
        let id = self.ids.generate().context("generate a recording ULID")?;
        let http = self.run.child(manifest::HTTP_FOLDER)?;
        let bytes = std::mem::take(&mut self.exchanges);
        self.rt.block_on(http.create(&format!("{id}.jsonl"), bytes))
    }

    fn ensure_open(&mut self) -> Result<()> {
        if self.open.is_some() {
            return Ok(());
        }
        let id = self.ids.generate().context("generate a segment ULID")?;
        let name = format!("{id}{}", if self.options.gzip { manifest::GZIP_SUFFIX } else { manifest::SEGMENT_SUFFIX });
        let sink = if self.continual {
            let dir = self.run.dir.as_ref().expect("continual means local");
            // First writer wins: never append to a segment someone else created. Opened through
            // the run folder's handle: nothing planted there leads elsewhere.
            let file = dir
                .open_with(&name, cap_std::fs::OpenOptions::new().create_new(true).append(true))
                .with_context(|| format!("cannot create segment {}", self.run.uri_of(&name)))?;
            Sink::File(file.into_std())
        } else {
            Sink::Memory(Vec::new())
        };
        let info = Segment { name: name.clone(), ..Default::default() };
        self.open =
            Some(OpenSegment { name, sink, hasher: Sha256::new(), info, streams: BTreeSet::new(), unsynced: false });
        // The preamble: every stream's SCHEMA so far, so the segment stands alone.
        let preamble: Vec<(String, Vec<u8>)> = self.schemas.clone();
        for (stream, line) in &preamble {
            self.append(line, 0, Some(stream))?;
        }
        let open = self.open.as_mut().expect("just opened");
        open.info.preamble_lines = preamble.len() as u64;
        Ok(())
    }

    fn append(&mut self, bytes: &[u8], records: u64, stream: Option<&str>) -> Result<()> {
        let open = self.open.as_mut().expect("append needs an open segment");
        match &mut open.sink {
            Sink::Memory(buf) => buf.extend_from_slice(bytes),
            Sink::File(file) => {
                file.write_all(bytes).with_context(|| format!("cannot append to segment {}", open.name))?;
                open.hasher.update(bytes);
                open.unsynced = true;
            }
        }
        let now = now_rfc3339();
        open.info.first_emitted.get_or_insert_with(|| now.clone());
        open.info.last_emitted = Some(now);
        open.info.bytes += bytes.len() as u64;
        open.info.lines += bytes.iter().filter(|b| **b == b'\n').count() as u64;
        open.info.records += records;
        if let Some(stream) = stream
            && !open.streams.contains(stream)
        {
            open.streams.insert(stream.to_string());
        }
        Ok(())
    }

    /// Seals the open segment: uploaded (batched) or synced (continual), then listed in the
    /// manifest.
    fn cut(&mut self) -> Result<()> {
        self.last_cut = Instant::now();
        self.store_exchanges()?;
        let Some(open) = self.open.take() else { return Ok(()) };
        let mut info = open.info;
        info.streams = open.streams.into_iter().collect();
        match open.sink {
            Sink::File(file) => {
                file.sync_all().with_context(|| format!("cannot sync segment {}", self.run.uri_of(&open.name)))?;
                info.sha256 = hex::encode(open.hasher.finalize());
            }
            Sink::Memory(text) => {
                let stored = if self.options.gzip { gzip(&text)? } else { text };
                info.sha256 = manifest::sha256_hex(&stored);
                info.bytes = stored.len() as u64;
                self.rt.block_on(self.run.create(&open.name, stored))?;
            }
        }
        self.manifest.segments.push(info);
        self.write_manifest()
    }

    fn write_manifest(&self) -> Result<()> {
        let mut bytes = serde_json::to_vec_pretty(&self.manifest).expect("a manifest serializes");
        bytes.push(b'\n');
        self.rt.block_on(self.run.replace(MANIFEST, bytes))
    }
}

fn gzip(text: &[u8]) -> Result<Vec<u8>> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::with_capacity(text.len() / 4), flate2::Compression::fast());
    encoder.write_all(text)?;
    Ok(encoder.finish()?)
}

/// The lake is the output writer's keeping sink.
impl RunSink for LakeWriter {
    fn is_continual(&self) -> bool {
        self.continual
    }

    /// Records what produced the run, in the manifest.
    fn describe(&mut self, plugin: PluginInfo) -> Result<()> {
        self.manifest.plugin = Some(plugin);
        self.write_manifest()
    }

    /// A stream's SCHEMA line: written in place and repeated at the start of later segments.
    fn schema(&mut self, stream: &str, line: &[u8]) -> Result<()> {
        self.ensure_open()?;
        match self.schemas.iter_mut().find(|(s, _)| s == stream) {
            Some((_, known)) => *known = line.to_vec(),
            None => self.schemas.push((stream.to_string(), line.to_vec())),
        }
        self.append(line, 0, Some(stream))
    }

    /// Messages in stream order: `records` of them RECORD lines of `stream`.
    fn write(&mut self, bytes: &[u8], records: u64, stream: Option<&str>) -> Result<()> {
        self.ensure_open()?;
        self.append(bytes, records, stream)?;
        if self.open.as_ref().is_some_and(|o| o.info.bytes >= self.options.max_segment_bytes) {
            self.cut()?;
        }
        Ok(())
    }

    /// A STATE line; the segment is cut after it when the minimum interval has passed.
    fn state(&mut self, line: &[u8]) -> Result<()> {
        self.write(line, 0, None)?;
        if self.open.is_some() && self.last_cut.elapsed() >= self.options.min_interval {
            self.cut()?;
        }
        Ok(())
    }

    /// A recorded HTTP exchange (one JSON line); stored with the next cut.
    fn exchange(&mut self, line: &[u8]) -> Result<()> {
        self.exchanges.extend_from_slice(line);
        if self.exchanges.len() as u64 >= self.options.max_segment_bytes {
            self.store_exchanges()?;
        }
        Ok(())
    }

    /// Makes everything written so far durable (continual: fsync; batched: upload).
    fn sync(&mut self) -> Result<()> {
        if !self.continual {
            return self.cut();
        }
        if let Some(open) = self.open.as_mut().filter(|o| o.unsynced)
            && let Sink::File(file) = &open.sink
        {
            file.sync_data().with_context(|| format!("cannot sync {}", self.run.uri_of(&open.name)))?;
            open.unsynced = false;
        }
        Ok(())
    }

    /// Whether everything written so far is durable.
    fn is_durable(&self) -> bool {
        match &self.open {
            None => true,
            Some(open) => self.continual && !open.unsynced,
        }
    }

    /// Seals the open segment and records how the run ended.
    fn finish(&mut self, outcome: &str) -> Result<()> {
        self.cut()?;
        self.manifest.outcome = Some(outcome.to_string());
        self.manifest.finished_at = Some(now_rfc3339());
        self.write_manifest()
    }
}
