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
pub use manifest::{Manifest, PluginInfo, Segment};
pub use reader::{ReplayOptions, ReplayReport, current_manifest, open_run, rebuild_manifest, replay};
pub use store::Location;
pub use writer::{Cadence, LakeOptions, LakeWriter};

/// What the output writer keeps besides stdout.
pub struct Tee {
    pub lake: Option<LakeWriter>,
    pub batch: Option<BatchWriter>,
    /// Hold each STATE (and what follows it) off stdout until the lake holds it durably.
    pub hold_state: bool,
}

/// How a run is stored, from the command line.
#[derive(Debug, Clone, Default)]
pub struct TeeOptions {
    pub replay_to: Option<String>,
    pub lake: LakeOptions,
    pub hold_state: bool,
    /// BATCH mode: where data files go (`None`: under `replay_to`).
    pub batch: bool,
    pub batch_to: Option<String>,
    pub compression: Compression,
    pub batch_max_records: u64,
}

impl TeeOptions {
    /// Opens the stores (and the run's folder); `None` when nothing is stored. Blocking: call
    /// it outside async code.
    pub fn open(&self) -> anyhow::Result<Option<Tee>> {
        if self.hold_state && self.replay_to.is_none() {
            anyhow::bail!("--replay-hold-state needs --replay-to");
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
        if lake.is_none() && batch.is_none() {
            return Ok(None);
        }
        Ok(Some(Tee { lake, batch, hold_state: self.hold_state }))
    }
}
