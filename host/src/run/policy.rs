//! The operator's policy for a run: which hosts are granted, and the limits. It comes from a
//! policy file and flags (flags win, see `cli::args`), or from the library API.

use crate::guest::limits::Limits;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Grants, as `--allow-host` takes them.
    pub allow_hosts: Vec<String>,
    /// Start even when the connector needs hosts that are not granted.
    pub deny_ungranted: bool,
    pub limits: Limits,
}

impl Policy {
    /// The policy file that goes with a plugin when none is given: `NAME.policy.json` beside
    /// `NAME.wasm`, so a packaged connector carries its grants and limits and a platform that
    /// passes only the standard arguments runs it sandboxed as its operator meant.
    pub fn beside(plugin: &std::path::Path) -> std::path::PathBuf {
        plugin.with_extension("policy.json")
    }

    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read policy {}", path.display()))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| anyhow::anyhow!("invalid policy {}: at {}: {}", path.display(), e.path(), e.inner()))
    }
}
