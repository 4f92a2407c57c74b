//! Replay storage, "the lake": every run's Singer message stream kept as ordered,
//! self-sufficient segments in object storage (local files, S3, GCS, Azure), with a manifest
//! per run, optional BATCH data files, and `host replay` to re-emit a run. Plain Rust beside
//! the output writer; nothing here touches wasmtime.

mod batch;
pub mod manifest;
mod reader;
mod store;
mod writer;

pub use batch::{BatchWriter, Compression};
pub use manifest::{HTTP_FOLDER, Manifest, PluginInfo, Segment};
pub use reader::{ReplayOptions, ReplayReport, current_manifest, rebuild_manifest, replay};
pub use store::{Location, write_replacing};
pub(crate) use writer::Runtime as BlockingRuntime;
pub use writer::{Cadence, LakeOptions, LakeWriter};

use crate::data::protocol::Sinks;

/// How a run is stored: in the lake (`--replay-to`), with its HTTP exchanges, and as BATCH
/// data files.
#[derive(Debug, Clone, Default)]
pub struct StorageOptions {
    /// Where runs are kept (`--replay-to`): a path, `file://`, `s3://`, `gs://`, `az://`, `memory://`.
    pub replay_to: Option<String>,
    /// Store every HTTP exchange next to the segments (`--record-http`).
    pub record_http: bool,
    pub lake: LakeOptions,
    /// Hold each STATE off the output until the lake holds it durably.
    pub hold_state: bool,
    /// BATCH mode: where data files go (`None`: under `replay_to`).
    pub batch: bool,
    pub batch_to: Option<String>,
    pub compression: Compression,
    pub batch_max_records: u64,
}

/// Storage opened for one run: the writer's sinks, and where the run is kept.
pub(crate) struct Opened {
    pub sinks: Sinks,
    /// The run's folder in the lake, when it is kept.
    pub kept_at: Option<String>,
}

impl StorageOptions {
    /// Opens the stores (and the run's folder). Blocking: call it outside async code.
    pub(crate) fn open(&self) -> anyhow::Result<Opened> {
        if self.hold_state && self.replay_to.is_none() {
            anyhow::bail!("--replay-hold-state needs --replay-to");
        }
        if self.record_http && self.replay_to.is_none() {
            anyhow::bail!("--record-http stores the exchanges next to the run's replay segments: add --replay-to URI");
        }
        if self.batch_to.is_some() && !self.batch {
            anyhow::bail!("--batch-to needs --batch");
        }
        let lake = match &self.replay_to {
            Some(uri) => Some(LakeWriter::create(&Location::parse(uri)?, self.lake.clone())?),
            None => None,
        };
        let batch = if self.batch {
            let root = match (&self.batch_to, &self.replay_to) {
                (Some(uri), _) | (None, Some(uri)) => Location::parse(uri)?,
                (None, None) => {
                    anyhow::bail!("--batch needs somewhere for the data files: --batch-to URI or --replay-to URI")
                }
            };
            let run = match &lake {
                Some(lake) => lake.run().uri.rsplit('/').next().unwrap_or_default().to_string(),
                None => ulid::Ulid::new().to_string(),
            };
            Some(BatchWriter::create(&root, &run, self.compression, self.batch_max_records)?)
        } else {
            None
        };
        let kept_at = lake.as_ref().map(|lake| lake.run().uri.clone());
        let sinks = Sinks {
            keep: lake.map(|l| Box::new(l) as Box<dyn crate::data::protocol::Sink>),
            batch: batch.map(|b| Box::new(b) as Box<dyn crate::data::protocol::Batcher>),
            hold_state: self.hold_state,
        };
        Ok(Opened { sinks, kept_at })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::protocol::Sink;
    use std::time::Duration;

    fn schema(stream: &str) -> Vec<u8> {
        format!("{{\"type\":\"SCHEMA\",\"stream\":\"{stream}\",\"schema\":{{}},\"key_properties\":[]}}\n").into_bytes()
    }

    fn record(stream: &str, id: u64) -> Vec<u8> {
        format!("{{\"type\":\"RECORD\",\"stream\":\"{stream}\",\"record\":{{\"id\":{id}}}}}\n").into_bytes()
    }

    /// Writes a stream with two streams and three STATEs through a lake in memory; returns what
    /// was written and the run's URI.
    fn write_run(name: &str, options: LakeOptions) -> (Vec<u8>, String, Manifest) {
        let root = Location::parse(&format!("memory://{name}/lake")).unwrap();
        let mut lake = LakeWriter::create(&root, options).unwrap();
        let mut written = Vec::new();
        let mut put = |lake: &mut LakeWriter, bytes: Vec<u8>, kind: &str| {
            written.extend_from_slice(&bytes);
            match kind {
                "schema" => {
                    let stream = if bytes.windows(3).any(|w| w == b"\"a\"") { "a" } else { "b" };
                    lake.schema(stream, &bytes).unwrap()
                }
                "state" => lake.state(&bytes).unwrap(),
                _ => lake.write(&bytes, 1, Some(kind)).unwrap(),
            }
        };
        put(&mut lake, schema("a"), "schema");
        for round in 0..3u64 {
            for id in 0..50 {
                put(&mut lake, record("a", round * 50 + id), "a");
            }
            if round == 1 {
                put(&mut lake, schema("b"), "schema");
            }
            if round >= 1 {
                put(&mut lake, record("b", round), "b");
            }
            put(&mut lake, format!("{{\"type\":\"STATE\",\"value\":{{\"round\":{round}}}}}\n").into_bytes(), "state");
        }
        lake.finish("succeeded").unwrap();
        let uri = lake.run().uri.clone();
        let manifest = current_manifest(&uri).unwrap();
        (written, uri, manifest)
    }

    fn replayed(uri: &str, from: Option<&str>) -> Vec<u8> {
        let mut out = Vec::new();
        replay(uri, &ReplayOptions { from: from.map(str::to_string), ..Default::default() }, &mut out).unwrap();
        out
    }

    #[test]
    fn segments_cut_at_states_replay_byte_identical_in_memory() {
        let options = LakeOptions { min_interval: Duration::ZERO, ..Default::default() };
        let (written, uri, manifest) = write_run("cut-at-states", options);
        assert!(uri.starts_with("memory://cut-at-states/lake/"), "{uri}");
        assert_eq!(manifest.segments.len(), 3, "one segment per STATE");
        assert_eq!(manifest.outcome.as_deref(), Some("succeeded"));
        assert_eq!(replayed(&uri, None), written);
        // Segment 2 repeats the SCHEMAs of a and b; segment 1 only a's (b came later).
        assert_eq!(manifest.segments[1].preamble_lines, 1);
        assert_eq!(manifest.segments[2].preamble_lines, 2);
        assert_eq!(manifest.segments[1].records, 51);
        assert_eq!(manifest.segments[2].streams, vec!["a", "b"]);
        let from_last = replayed(&uri, Some(&manifest.segments[2].name));
        assert!(from_last.starts_with(&[schema("a"), schema("b")].concat()));
    }

    #[test]
    fn segments_are_cut_by_size_and_gzipped() {
        let options = LakeOptions {
            min_interval: Duration::from_secs(3600),
            max_segment_bytes: 1000,
            gzip: true,
            ..Default::default()
        };
        let (written, uri, manifest) = write_run("cut-by-size", options);
        assert!(manifest.segments.len() > 5, "{} segments", manifest.segments.len());
        assert!(manifest.segments.iter().all(|s| s.name.ends_with(".singer.jsonl.gz")));
        assert!(manifest.segments.windows(2).all(|w| w[0].name < w[1].name), "names sort in replay order");
        assert_eq!(replayed(&uri, None), written);
    }

    #[test]
    fn nothing_is_uploaded_before_the_interval_but_everything_at_the_end() {
        let options = LakeOptions { min_interval: Duration::from_secs(3600), ..Default::default() };
        let (written, uri, manifest) = write_run("interval", options);
        assert_eq!(manifest.segments.len(), 1);
        assert_eq!(replayed(&uri, None), written);
    }
}
