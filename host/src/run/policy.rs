//! The operator's policy for a run: which hosts are granted, and the limits. It comes from a
//! policy file and flags (flags win, see `cli::args`), or from the library API.

use crate::data::files::{self, Cap};
use crate::guest::limits::Limits;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The largest policy file (and package manifest) read; real ones are a few hundred bytes.
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Where a run's policy came from, named in the run's first LOG line, and what was passed over
/// on the way (each a WARN of the run).
#[derive(Debug, Clone, PartialEq)]
pub struct PolicySource {
    /// The policy in force and where it came from: `defaults (...)`, `FILE (--policy)`, ...
    pub described: String,
    pub warnings: Vec<String>,
}

impl Default for PolicySource {
    fn default() -> Self {
        PolicySource { described: "the run request's (set by the embedder)".to_string(), warnings: Vec::new() }
    }
}

/// How the operator named a policy file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Given {
    Flag,
    Environment,
}

/// The operator's policy for a run of `plugin`: the file the operator named (`--policy` or
/// `SLUICE_POLICY`), else the `NAME.policy.json` beside the plugin when the package the operator
/// made with `host package` pins it (its sha256 in `NAME.package.json`, for this very plugin),
/// else the defaults. A policy beside a plugin that nothing pins came with the plugin, not from
/// the operator: it is ignored with a warning (a downloaded `evil.wasm` with an
/// `evil.policy.json` granted itself egress and lifted its limits).
pub fn resolve(given: Option<(&Path, Given)>, plugin: Option<&Path>) -> Result<(Policy, PolicySource)> {
    if let Some((path, how)) = given {
        let how = match how {
            Given::Flag => "--policy",
            Given::Environment => "SLUICE_POLICY",
        };
        let described = format!("{} (given with {how})", path.display());
        return Ok((Policy::load(path)?, PolicySource { described, warnings: Vec::new() }));
    }
    let defaults = |warnings| PolicySource { described: "the defaults (no policy file given)".to_string(), warnings };
    let Some(plugin) = plugin else { return Ok((Policy::default(), defaults(Vec::new()))) };
    let beside = Policy::beside(plugin);
    if std::fs::symlink_metadata(&beside).is_err() {
        return Ok((Policy::default(), defaults(Vec::new())));
    }
    let package = plugin.with_extension("package.json");
    match pinned_by(&package, plugin, &beside)? {
        Ok(()) => {
            let described = format!("{} (pinned by {})", beside.display(), package.display());
            Ok((Policy::load_beside(&beside)?, PolicySource { described, warnings: Vec::new() }))
        }
        Err(why) => {
            let warning = format!(
                "the policy file {} beside the plugin is ignored: {why}; a policy beside a plugin is honoured only \
                 when the package made with `host package` pins it, or when it is named with --policy or SLUICE_POLICY",
                beside.display()
            );
            Ok((Policy::default(), defaults(vec![warning])))
        }
    }
}

/// `Ok(Ok(()))` when the package manifest `package` pins `policy` for `plugin`: the plugin and
/// the policy both have the sha256 it packaged. A pinned policy that was changed since is an
/// error (the package was tampered with); anything else is why the policy is not pinned.
fn pinned_by(package: &Path, plugin: &Path, policy: &Path) -> Result<Result<(), String>> {
    #[derive(Deserialize)]
    struct Package {
        plugin: String,
        sha256: String,
        #[serde(default)]
        policy: Option<Pin>,
    }
    #[derive(Deserialize)]
    struct Pin {
        file: String,
        sha256: String,
    }
    let Ok(bytes) = files::read_capped(package, Cap::new("package manifest", MAX_POLICY_BYTES).regular()) else {
        return Ok(Err(format!("no package pins it ({} cannot be read)", package.display())));
    };
    let Ok(manifest) = serde_json::from_slice::<Package>(&bytes) else {
        return Ok(Err(format!("{} is not a package manifest", package.display())));
    };
    let name = |p: &Path| p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let Some(pin) = manifest.policy.filter(|p| p.file == name(policy)) else {
        return Ok(Err(format!("{} does not pin it", package.display())));
    };
    if manifest.plugin != name(plugin) {
        return Ok(Err(format!("{} packages {}, not this plugin", package.display(), manifest.plugin)));
    }
    // Hashed a piece at a time, and only a regular file: its size is the bound (the plugin is
    // read next under --max-plugin-mb).
    let plugin_sha = files::sha256_capped(plugin, Cap::new("plugin", u64::MAX).regular())?;
    if plugin_sha != manifest.sha256 {
        return Ok(Err(format!(
            "{} pins it for another plugin (sha256 {}; this one is {plugin_sha})",
            package.display(),
            manifest.sha256
        )));
    }
    let policy_sha = files::sha256_capped(policy, Cap::new("policy", MAX_POLICY_BYTES).regular())?;
    if policy_sha != pin.sha256 {
        bail!(
            "the policy {} is not the one packaged in {} (sha256 {policy_sha}, packaged {}): package it again with \
             `host package`",
            policy.display(),
            package.display(),
            pin.sha256
        );
    }
    Ok(Ok(()))
}

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

    /// The policy file the operator named: at most 1 MiB of it is read (it may be a pipe).
    pub fn load(path: &std::path::Path) -> Result<Self> {
        Self::parse(path, files::read_capped(path, Cap::new("policy", MAX_POLICY_BYTES))?)
    }

    /// A policy file beside a plugin: a regular file, checked before it is read.
    fn load_beside(path: &std::path::Path) -> Result<Self> {
        Self::parse(path, files::read_capped(path, Cap::new("policy", MAX_POLICY_BYTES).regular())?)
    }

    fn parse(path: &Path, bytes: Vec<u8>) -> Result<Self> {
        let text =
            String::from_utf8(bytes).with_context(|| format!("cannot read policy {}: not UTF-8", path.display()))?;
        let de = &mut serde_json::Deserializer::from_str(&text);
        serde_path_to_error::deserialize(de)
            .map_err(|e| anyhow::anyhow!("invalid policy {}: at {}: {}", path.display(), e.path(), e.inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::Digest;

    fn sha(bytes: &[u8]) -> String {
        hex::encode(sha2::Sha256::digest(bytes))
    }

    /// A downloaded plugin's own `NAME.policy.json` granted itself hosts and lifted its limits:
    /// it is ignored with a warning unless the operator's package pins it (plugin and policy
    /// by sha256) or the operator names it.
    #[test]
    fn a_policy_beside_a_plugin_counts_only_when_pinned_or_named() {
        let dir = tempfile::tempdir().unwrap();
        let plugin = dir.path().join("evil.wasm");
        std::fs::write(&plugin, b"\0asm plugin").unwrap();
        let beside = dir.path().join("evil.policy.json");
        let text = r#"{"allow_hosts": ["http://169.254.169.254"], "limits": {"memory_bytes": 17179869184}}"#;
        std::fs::write(&beside, text).unwrap();
        let (policy, source) = resolve(None, Some(&plugin)).unwrap();
        assert!(policy.allow_hosts.is_empty() && policy.limits == Limits::default());
        assert_eq!(source.described, "the defaults (no policy file given)");
        assert!(source.warnings[0].contains("evil.policy.json beside the plugin is ignored"), "{source:?}");

        // Named by the operator: in force, and said so.
        let (policy, source) = resolve(Some((&beside, Given::Environment)), Some(&plugin)).unwrap();
        assert_eq!(policy.allow_hosts, ["http://169.254.169.254"]);
        assert!(source.described.ends_with("evil.policy.json (given with SLUICE_POLICY)"), "{source:?}");

        // Pinned by the package, for this plugin.
        let package = dir.path().join("evil.package.json");
        let manifest = |plugin_sha: &str, policy_sha: &str| {
            serde_json::json!({"name": "evil", "plugin": "evil.wasm", "sha256": plugin_sha, "sluice": "0",
                "policy": {"file": "evil.policy.json", "sha256": policy_sha}})
            .to_string()
        };
        std::fs::write(&package, manifest(&sha(b"\0asm plugin"), &sha(text.as_bytes()))).unwrap();
        let (policy, source) = resolve(None, Some(&plugin)).unwrap();
        assert_eq!(policy.allow_hosts, ["http://169.254.169.254"]);
        assert!(source.described.contains("(pinned by") && source.warnings.is_empty(), "{source:?}");

        // The plugin swapped for another: the pin is not for it.
        std::fs::write(&package, manifest(&sha(b"another"), &sha(text.as_bytes()))).unwrap();
        let (policy, source) = resolve(None, Some(&plugin)).unwrap();
        assert!(policy.allow_hosts.is_empty() && source.warnings[0].contains("for another plugin"), "{source:?}");
        // The policy changed after packaging: refused outright.
        std::fs::write(&package, manifest(&sha(b"\0asm plugin"), &sha(b"{}"))).unwrap();
        let error = resolve(None, Some(&plugin)).unwrap_err().to_string();
        assert!(error.contains("is not the one packaged"), "{error}");
        // A manifest without a pin pins nothing.
        std::fs::write(&package, r#"{"name": "evil", "plugin": "evil.wasm", "sha256": "x", "sluice": "0"}"#).unwrap();
        assert!(resolve(None, Some(&plugin)).unwrap().1.warnings[0].contains("does not pin it"));
    }

    #[cfg(unix)]
    #[test]
    fn a_policy_that_is_not_a_small_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("p.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        // Named by the operator: read up to the cap, never without end.
        let error = format!("{:#}", Policy::load(&link).unwrap_err());
        assert!(error.contains("larger than 1 MiB, the most a policy file may be"), "{error}");
        // Beside a plugin: not even opened for reading past its kind.
        let plugin = dir.path().join("p.wasm");
        std::fs::write(&plugin, b"x").unwrap();
        let beside = Policy::beside(&plugin);
        std::os::unix::fs::symlink("/dev/zero", &beside).unwrap();
        std::fs::write(
            dir.path().join("p.package.json"),
            format!(
                r#"{{"plugin": "p.wasm", "sha256": "{}", "policy": {{"file": "p.policy.json", "sha256": "0"}}}}"#,
                sha(b"x")
            ),
        )
        .unwrap();
        let error = format!("{:#}", resolve(None, Some(&plugin)).unwrap_err());
        assert!(error.contains("not a regular file"), "{error}");
    }
}
