//! A run's manifest: its segments in replay order with checksums and counts, and what produced
//! the run (plugin sha256, contract version, a hash of the config — never the config itself).
//! It can be rebuilt from the segments alone.

use super::store::Location;
pub use crate::data::protocol::PluginInfo;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeSet, HashMap};

pub const MANIFEST: &str = "manifest.json";
pub const FORMAT: &str = "sluice-replay/1";
pub const SEGMENT_SUFFIX: &str = ".singer.jsonl";
pub const GZIP_SUFFIX: &str = ".singer.jsonl.gz";
/// The folder of a run that holds its HTTP exchanges.
pub const HTTP_FOLDER: &str = "http";

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Manifest {
    pub format: String,
    /// The run's ULID (also its folder's name).
    pub run: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// How the run ended: `succeeded`, `failed`, `interrupted`; absent while it runs (or when
    /// it was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<PluginInfo>,
    #[serde(default)]
    pub segments: Vec<Segment>,
    /// True when rebuilt by listing the folder rather than written by the run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rebuilt: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Segment {
    pub name: String,
    /// sha256 of the stored bytes (compressed ones for `.gz`).
    pub sha256: String,
    pub bytes: u64,
    pub lines: u64,
    pub records: u64,
    /// The SCHEMA lines repeated at the start so the segment stands alone; a replay of the
    /// whole run skips them.
    pub preamble_lines: u64,
    pub streams: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_emitted: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_emitted: Option<String>,
}

pub fn is_segment(name: &str) -> bool {
    name.ends_with(SEGMENT_SUFFIX) || name.ends_with(GZIP_SUFFIX)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A segment's stored bytes as text lines (gunzipped when named `.gz`).
pub fn decode(name: &str, stored: &[u8]) -> Result<Vec<u8>> {
    if !name.ends_with(".gz") {
        return Ok(stored.to_vec());
    }
    let mut text = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::MultiGzDecoder::new(stored), &mut text)
        .with_context(|| format!("segment {name} is not valid gzip"))?;
    Ok(text)
}

/// What a segment's text holds, for a rebuilt manifest. `known_schemas` carries the SCHEMA
/// lines of the segments before it: leading SCHEMA lines equal to one of them are preamble.
pub fn describe(name: &str, stored: &[u8], text: &[u8], known_schemas: &mut HashMap<String, Vec<u8>>) -> Segment {
    let mut segment = Segment {
        name: name.to_string(),
        sha256: sha256_hex(stored),
        bytes: stored.len() as u64,
        ..Default::default()
    };
    /// The two fields a description needs, borrowed: no full parse of every record.
    #[derive(Deserialize, Default)]
    struct Head<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
        #[serde(borrow, default)]
        stream: Option<std::borrow::Cow<'a, str>>,
    }
    let mut streams = BTreeSet::new();
    let mut in_preamble = true;
    for line in text.split_inclusive(|b| *b == b'\n') {
        segment.lines += 1;
        let head: Head = serde_json::from_slice(line).unwrap_or_default();
        let kind = head.kind.as_deref().unwrap_or_default();
        let stream = head.stream.as_deref();
        if kind == "SCHEMA" && in_preamble && known_schemas.get(stream.unwrap_or_default()).is_some_and(|k| k == line) {
            segment.preamble_lines += 1;
            continue;
        }
        in_preamble = false;
        if kind == "SCHEMA" {
            known_schemas.insert(stream.unwrap_or_default().to_string(), line.to_vec());
        }
        if kind == "RECORD" {
            segment.records += 1;
        }
        if let Some(stream) = stream
            && !streams.contains(stream)
        {
            streams.insert(stream.to_string());
        }
    }
    segment.streams = streams.into_iter().collect();
    segment
}

/// Rebuilds a run's manifest from its folder: every segment, in name (= replay) order.
pub async fn rebuild(run: &Location) -> Result<Manifest> {
    let (objects, _) = run.list().await?;
    let mut manifest = Manifest {
        format: FORMAT.to_string(),
        run: run.uri.rsplit('/').next().unwrap_or_default().to_string(),
        rebuilt: true,
        ..Default::default()
    };
    let mut schemas = HashMap::new();
    for name in objects.iter().filter(|n| is_segment(n)) {
        let stored = run.read(name).await?;
        let text = decode(name, &stored)?;
        manifest.segments.push(describe(name, &stored, &text, &mut schemas));
    }
    Ok(manifest)
}

/// The run's manifest as written, or `None` when there is none.
pub async fn load(run: &Location) -> Result<Option<Manifest>> {
    if !run.exists(MANIFEST).await? {
        return Ok(None);
    }
    let bytes = run.read(MANIFEST).await?;
    let manifest: Manifest = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a valid replay manifest", run.uri_of(MANIFEST)))?;
    Ok(Some(manifest))
}
