//! `host replay`: re-emits a stored run. In Singer format the output is byte-identical to the
//! stream that was stored; each segment's checksum is verified before any of it is written.

use super::manifest::{self, Manifest, Segment};
use super::store::Location;
use super::writer::Runtime;
use crate::data::protocol::{Format, airbyte};
use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use std::collections::HashMap;
use std::io::Write;

#[derive(Debug, Clone)]
pub struct ReplayOptions {
    /// Singer by default: the stream as stored.
    pub format: Format,
    /// Turn BATCH messages into the RECORD messages of their files.
    pub expand_batch: bool,
    /// Start at this segment (its name or ULID); its SCHEMA preamble is kept.
    pub from: Option<String>,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        ReplayOptions { format: Format::Singer, expand_batch: false, from: None }
    }
}

/// What a replay wrote.
#[derive(Debug, Default)]
pub struct ReplayReport {
    pub segments: usize,
    pub lines: u64,
    pub records: u64,
    /// Segments not listed in the manifest (a run that was killed): read unverified.
    pub unsealed: Vec<String>,
    pub manifest_rebuilt: bool,
}

/// Opens a run folder: its manifest, or one rebuilt by listing, plus any segments the manifest
/// does not list yet. A folder of runs is an error naming them.
pub async fn open_run(run: &Location) -> Result<(Manifest, Vec<String>)> {
    let (objects, folders) = run.list().await?;
    let has_segments = objects.iter().any(|n| manifest::is_segment(n));
    let manifest = match manifest::load(run).await? {
        Some(m) => m,
        None if has_segments => manifest::rebuild(run).await?,
        None if !folders.is_empty() => {
            let runs: Vec<String> = folders.iter().map(|f| run.uri_of(f)).collect();
            bail!("{} holds runs, not one run's segments; replay one of:\n  {}", run.uri, runs.join("\n  "))
        }
        None => bail!("{} holds no replay segments and no {}", run.uri, manifest::MANIFEST),
    };
    let unsealed: Vec<String> = objects
        .into_iter()
        .filter(|n| manifest::is_segment(n) && !manifest.segments.iter().any(|s| &s.name == n))
        .collect();
    Ok((manifest, unsealed))
}

/// Re-emits the run at `uri` into `sink`. Blocking: call it outside async code.
pub fn replay(uri: &str, options: &ReplayOptions, sink: &mut dyn Write) -> Result<ReplayReport> {
    let rt = Runtime::new()?;
    let run = Location::parse(uri)?;
    let (manifest, unsealed) = rt.block_on(open_run(&run))?;
    let mut report = ReplayReport { manifest_rebuilt: manifest.rebuilt, ..Default::default() };
    let mut segments: Vec<(Segment, bool)> = manifest.segments.into_iter().map(|s| (s, true)).collect();
    for name in unsealed {
        report.unsealed.push(name.clone());
        segments.push((Segment { name, ..Default::default() }, false));
    }
    let start = match &options.from {
        None => 0,
        Some(from) => segments
            .iter()
            .position(|(s, _)| s.name == *from || s.name.split('.').next() == Some(from.as_str()))
            .with_context(|| format!("{} has no segment {from}", run.uri))?,
    };
    let mut out = std::io::BufWriter::with_capacity(256 << 10, sink);
    let mut converter = Converter::new(options.format);
    let mut known_schemas = HashMap::new();
    let has_unsealed = segments.iter().any(|(_, sealed)| !sealed);
    for (index, (segment, sealed)) in segments.iter().enumerate() {
        let stored = rt.block_on(run.read(&segment.name))?;
        if *sealed {
            let actual = manifest::sha256_hex(&stored);
            if actual != segment.sha256 {
                bail!(
                    "segment {} is corrupt: its sha256 is {actual}, the manifest says {} (the file was changed or truncated)",
                    run.uri_of(&segment.name),
                    segment.sha256
                );
            }
        }
        let mut text = manifest::decode(&segment.name, &stored)?;
        // A killed run's last segment may end in a cut line: whole lines only.
        let end = text.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        text.truncate(end);
        let preamble = if *sealed {
            segment.preamble_lines
        } else {
            manifest::describe(&segment.name, &stored, &text, &mut known_schemas).preamble_lines
        };
        if *sealed && has_unsealed {
            // The SCHEMA lines seen so far tell an unsealed segment's preamble from its body.
            manifest::describe(&segment.name, &stored, &text, &mut known_schemas);
        }
        if index < start {
            continue;
        }
        // A whole-run replay drops the repeated SCHEMAs; one from a later segment needs them.
        let skip = if index == start { 0 } else { preamble as usize };
        let body_start = text.split_inclusive(|b| *b == b'\n').take(skip).map(<[u8]>::len).sum::<usize>();
        let body = &text[body_start..];
        if options.format == Format::Singer && !options.expand_batch {
            // As stored, in one write.
            for line in body.split_inclusive(|b| *b == b'\n') {
                report.lines += 1;
                report.records += u64::from(line.starts_with(br#"{"type":"RECORD""#));
            }
            out.write_all(body)?;
        } else {
            for line in body.split_inclusive(|b| *b == b'\n') {
                report.lines += 1;
                report.records += converter.line(line, options.expand_batch, &rt, &mut out)?;
            }
        }
        report.segments += 1;
    }
    out.flush()?;
    Ok(report)
}

/// Turns Singer lines into the output format, expanding BATCH messages when asked.
struct Converter {
    format: Format,
    /// Airbyte: the last state written per stream, so only changes are written.
    written: Map<String, Value>,
    /// Airbyte: records of each stream since its last STATE (`sourceStats.recordCount`).
    since_state: std::collections::HashMap<String, u64>,
}

impl Converter {
    fn new(format: Format) -> Self {
        Converter { format, written: Map::new(), since_state: Default::default() }
    }

    /// Writes one Singer line's equivalent; returns the records it wrote.
    fn line(&mut self, line: &[u8], expand_batch: bool, rt: &Runtime, out: &mut dyn Write) -> Result<u64> {
        let message: Value = serde_json::from_slice(line)
            .with_context(|| format!("a stored line is not JSON: {}", String::from_utf8_lossy(line).trim_end()))?;
        let stream = message["stream"].as_str().unwrap_or_default();
        match message["type"].as_str().unwrap_or_default() {
            "BATCH" if expand_batch || self.format == Format::Airbyte => {
                let files = message["manifest"].as_array().context("a BATCH message without a manifest")?;
                let mut records = 0;
                for file in files {
                    let uri = file.as_str().context("a BATCH manifest entry that is not a URI")?;
                    for data in read_batch_file(uri, rt)?.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                        let record: Value =
                            serde_json::from_slice(data).with_context(|| format!("a record in {uri} is not JSON"))?;
                        self.record(stream, record, None, out)?;
                        records += 1;
                    }
                }
                Ok(records)
            }
            "RECORD" => {
                let time = message["time_extracted"].as_str().map(str::to_string);
                self.record(stream, message["record"].clone(), time, out)?;
                Ok(1)
            }
            _ if self.format == Format::Singer => {
                out.write_all(line)?;
                Ok(0)
            }
            "STATE" => {
                let bookmarks = message["value"]["bookmarks"].as_object().cloned().unwrap_or_default();
                for (stream, value) in bookmarks {
                    if self.written.get(&stream) != Some(&value) {
                        let records = self.since_state.remove(&stream).unwrap_or(0);
                        out.write_all(&airbyte::stream_state(&stream, &value, records))?;
                        self.written.insert(stream, value);
                    }
                }
                Ok(0)
            }
            // SCHEMA, ACTIVATE_VERSION and the like have no Airbyte counterpart in a read.
            _ => Ok(0),
        }
    }

    fn record(&mut self, stream: &str, record: Value, time: Option<String>, out: &mut dyn Write) -> Result<()> {
        match self.format {
            Format::Singer => {
                let mut message = json!({"type": "RECORD", "stream": stream, "record": record});
                if let Some(time) = time {
                    message["time_extracted"] = json!(time);
                }
                write_line(out, &message)
            }
            Format::Airbyte => {
                *self.since_state.entry(stream.to_string()).or_default() += 1;
                let emitted_at = time
                    .and_then(|t| time::OffsetDateTime::parse(&t, &time::format_description::well_known::Rfc3339).ok())
                    .map(|t| (t.unix_timestamp_nanos() / 1_000_000) as u64)
                    .unwrap_or_else(crate::data::protocol::now_ms);
                let mut buf = Vec::new();
                let data = serde_json::to_string(&record).expect("a Value serializes");
                airbyte::push_record(
                    &mut buf,
                    &serde_json::to_string(stream).expect("a str serializes"),
                    &data,
                    emitted_at,
                );
                Ok(out.write_all(&buf)?)
            }
        }
    }
}

fn write_line(out: &mut dyn Write, message: &Value) -> Result<()> {
    serde_json::to_writer(&mut *out, message)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// A BATCH data file's JSON lines, from its absolute URI.
fn read_batch_file(uri: &str, rt: &Runtime) -> Result<Vec<u8>> {
    let (folder, name) = uri.rsplit_once('/').with_context(|| format!("not a file URI: {uri}"))?;
    let location = Location::parse(folder)?;
    let stored = rt.block_on(location.read(name))?;
    if name.ends_with(".gz") {
        let mut text = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(&stored[..]), &mut text)
            .with_context(|| format!("{uri} is not valid gzip"))?;
        Ok(text)
    } else {
        Ok(stored)
    }
}

/// The run's manifest as it stands: as written (or rebuilt when missing), with the segments
/// it does not list yet described from their contents. Blocking.
pub fn current_manifest(uri: &str) -> Result<Manifest> {
    let rt = Runtime::new()?;
    let run = Location::parse(uri)?;
    let (mut manifest, unsealed) = rt.block_on(open_run(&run))?;
    let mut schemas = HashMap::new();
    for segment in &manifest.segments {
        let stored = rt.block_on(run.read(&segment.name))?;
        manifest::describe(&segment.name, &stored, &manifest::decode(&segment.name, &stored)?, &mut schemas);
    }
    for name in unsealed {
        let stored = rt.block_on(run.read(&name))?;
        let text = manifest::decode(&name, &stored)?;
        manifest.segments.push(manifest::describe(&name, &stored, &text, &mut schemas));
    }
    Ok(manifest)
}

/// Writes a rebuilt manifest for a run folder (for a run killed before it wrote one, or one
/// whose manifest was lost). Blocking.
pub fn rebuild_manifest(uri: &str) -> Result<Manifest> {
    let rt = Runtime::new()?;
    let run = Location::parse(uri)?;
    let mut manifest = rt.block_on(manifest::rebuild(&run))?;
    if let Some(old) = rt.block_on(manifest::load(&run)).ok().flatten() {
        // Keep what only the run knew.
        manifest.run = old.run;
        manifest.started_at = old.started_at;
        manifest.finished_at = old.finished_at;
        manifest.outcome = old.outcome;
        manifest.plugin = old.plugin;
    }
    let mut bytes = serde_json::to_vec_pretty(&manifest)?;
    bytes.push(b'\n');
    rt.block_on(run.replace(manifest::MANIFEST, bytes))?;
    Ok(manifest)
}
