//! BATCH mode: records go to data files (JSON lines, gzip or not compressed at all) under the
//! storage root, and the message stream carries Singer BATCH messages whose manifests hold the
//! files' absolute URIs. Every stream's pending records are written out before each STATE, so
//! a STATE never covers records that are not in a file yet.

use super::store::Location;
use super::writer::Runtime;
use anyhow::{Context, Result};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Compression {
    #[default]
    Gzip,
    /// Plain JSON lines: no compression at all.
    None,
}

pub struct BatchWriter {
    rt: Runtime,
    /// `<root>/<run>/batches`.
    dir: Location,
    compression: Compression,
    max_records: u64,
    ids: ulid::Generator,
    pending: BTreeMap<String, (Vec<u8>, u64)>,
    /// Data files written, by absolute URI.
    pub files: u64,
}

impl BatchWriter {
    /// Data files go under `root/<run>/batches/<stream>/`. It blocks: call it outside async code.
    pub fn create(root: &Location, run: &str, compression: Compression, max_records: u64) -> Result<BatchWriter> {
        Ok(BatchWriter {
            rt: Runtime::new()?,
            dir: root.child(run)?.child("batches")?,
            compression,
            max_records: max_records.max(1),
            ids: ulid::Generator::new(),
            pending: BTreeMap::new(),
            files: 0,
        })
    }

    fn flush(&mut self, stream: &str) -> Result<Vec<u8>> {
        let (data, _) = self.pending.remove(stream).unwrap_or_default();
        let (suffix, bytes, compression) = match self.compression {
            Compression::Gzip => {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(&data)?;
                ("jsonl.gz", gz.finish()?, "gzip")
            }
            Compression::None => ("jsonl", data, "none"),
        };
        let id = self.ids.generate().context("generate a batch file ULID")?;
        let folder = self.dir.child(&sanitize(stream))?;
        let name = format!("{id}.{suffix}");
        self.rt.block_on(folder.create(&name, bytes))?;
        self.files += 1;
        let message = json!({
            "type": "BATCH",
            "stream": stream,
            "encoding": {"format": "jsonl", "compression": compression},
            "manifest": [folder.uri_of(&name)],
        });
        let mut line = serde_json::to_vec(&message).expect("a BATCH message serializes");
        line.push(b'\n');
        Ok(line)
    }
}

/// A stream name as one path segment: never `.` or `..` (which would name the folder itself or
/// the one above it), never hidden, never empty.
fn sanitize(stream: &str) -> String {
    let mut name: String =
        stream.chars().map(|c| if c.is_ascii_alphanumeric() || "-_.".contains(c) { c } else { '_' }).collect();
    if name.starts_with('.') || name.is_empty() {
        name.replace_range(..name.len().min(1), "_");
    }
    name
}

impl crate::data::protocol::Batcher for BatchWriter {
    /// Record data lines of `stream`; returns a BATCH line when the stream's file is full.
    fn add(&mut self, stream: &str, data_lines: &[u8], records: u64) -> Result<Option<Vec<u8>>> {
        let (buf, count) = self.pending.entry(stream.to_string()).or_default();
        buf.extend_from_slice(data_lines);
        *count += records;
        if *count >= self.max_records { self.flush(stream).map(Some) } else { Ok(None) }
    }

    /// Writes every stream's pending records; the BATCH lines to emit, in stream order.
    fn flush_all(&mut self) -> Result<Vec<Vec<u8>>> {
        let streams: Vec<String> =
            self.pending.iter().filter(|(_, (b, _))| !b.is_empty()).map(|(s, _)| s.clone()).collect();
        streams.iter().map(|s| self.flush(s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream named `.` or `..` became the batches folder itself or the run's folder.
    #[test]
    fn a_stream_name_is_one_segment_inside_the_folder() {
        for (stream, folder) in [
            (".", "_"),
            ("..", "_."),
            ("", "_"),
            (".hidden", "_hidden"),
            ("../../etc", "_._.._etc"),
            ("a.b-c_d", "a.b-c_d"),
        ] {
            assert_eq!(sanitize(stream), folder, "{stream:?}");
        }
        for stream in [".", "..", "...", "/", "a/..", "\\..", "..\0"] {
            let name = sanitize(stream);
            assert!(name != "." && name != ".." && !name.contains('/') && !name.is_empty(), "{stream:?}: {name}");
        }
    }
}
