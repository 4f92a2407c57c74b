//! The operator's policy for a run: which hosts are granted, and the limits. It comes from a
//! policy file and flags (flags win), or from the library API.

use crate::cli::{ConfiguredArgs, SandboxArgs};
use crate::limits::Limits;
use anyhow::{Context, Result};
use serde::Deserialize;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Grants, as `--allow-host` takes them.
    pub allow_hosts: Vec<String>,
    /// Start even when the connector needs hosts that are not granted.
    pub deny_ungranted: bool,
    pub limits: Limits,
}

impl Policy {
    pub fn load(path: &std::path::Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read policy {}", path.display()))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| anyhow::anyhow!("invalid policy {}: at {}: {}", path.display(), e.path(), e.inner()))
    }

    /// The limits of the policy file (if any) with the flags applied over them.
    pub fn from_sandbox_args(args: &SandboxArgs) -> Result<Self> {
        let mut policy = match &args.policy {
            Some(path) => Policy::load(path)?,
            None => Policy::default(),
        };
        let limits = &mut policy.limits;
        if let Some(mb) = args.memory_mb {
            limits.memory_bytes = mb << 20;
        }
        if let Some(ms) = args.cpu_ms_per_call {
            limits.cpu_ms_per_call = ms;
        }
        if let Some(ms) = args.call_timeout_ms {
            limits.call_timeout_ms = ms;
        }
        if let Some(bytes) = args.max_record_bytes {
            limits.max_record_bytes = bytes;
        }
        if let Some(n) = args.max_logs_per_call {
            limits.max_logs_per_call = n;
        }
        if let Some(kib) = args.wasm_stack_kib {
            limits.wasm_stack_bytes = (kib as usize) << 10;
        }
        Ok(policy)
    }

    /// The whole policy of a configured command: file, then flags.
    pub fn from_args(args: &ConfiguredArgs) -> Result<Self> {
        let mut policy = Self::from_sandbox_args(&args.plugin.sandbox)?;
        policy.allow_hosts.extend(args.allow_hosts.iter().cloned());
        policy.deny_ungranted |= args.deny_ungranted;
        Ok(policy)
    }
}
