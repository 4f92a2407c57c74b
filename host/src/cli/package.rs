//! One connector as platforms run it: `host package` writes a folder holding the host (as
//! `source-NAME` and `tap-NAME`), the plugin, its policy and a manifest that pins the plugin's
//! sha256, plus a Meltano plugin definition. Run under one of those names, the host takes the
//! arguments platforms pass (Airbyte's `spec|check|discover|read`, a Singer tap's `--config
//! --catalog|--properties --state --discover --about`) and runs the packaged plugin, refusing a
//! plugin that is not the one packaged.

use crate::data::files::{self, Cap};
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The manifest beside a packaged connector: `NAME.package.json`.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub name: String,
    /// The plugin file, beside the manifest.
    pub plugin: String,
    pub sha256: String,
    /// The host version that packaged it.
    pub sluice: String,
    /// For a declarative manifest: the engine that runs it, beside the host, and its sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Pinned>,
    /// The policy beside the plugin (`NAME.policy.json`) and its sha256: only a policy the
    /// package pins is honoured without being named (see `run::policy::resolve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<Pinned>,
    /// For a manifest with custom components: its components.py (`NAME.components.py`) and the
    /// components runtime that runs them, beside the host, each with its sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Pinned>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Pinned>,
    /// The plugin's (or the engine's) compiled code for the host that packaged it, named as its
    /// cache entry: a fresh machine runs it without compiling (a host built otherwise compiles).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compiled: Option<Pinned>,
}

/// A file beside the package and the sha256 it must have.
#[derive(Debug, Serialize, Deserialize)]
pub struct Pinned {
    pub file: String,
    pub sha256: String,
}

/// The largest package manifest read (as a policy file); real ones are a few hundred bytes.
pub const MAX_MANIFEST_BYTES: u64 = crate::run::policy::MAX_POLICY_BYTES;

fn manifest_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{name}.package.json"))
}

/// The manifest `NAME.package.json` in `dir`: a regular file of at most
/// [`MAX_MANIFEST_BYTES`], checked before it is read.
pub fn read_manifest(dir: &Path, name: &str) -> Result<Manifest> {
    let path = manifest_path(dir, name);
    let bytes = files::read_capped(&path, Cap::new("package manifest", MAX_MANIFEST_BYTES).regular())?;
    serde_json::from_slice(&bytes).with_context(|| format!("{} is not a package manifest", path.display()))
}

/// Writes the package of `plugin` as `name` into `out`; `policy` is the policy file's JSON
/// (grants and limits), `spec` the connector's spec (for the Meltano settings), and `compiled`
/// the cache entry of the plugin's (or the engine's) compiled code. A component (and the engine)
/// is read up to `max_plugin_bytes` (`--max-plugin-mb`), a manifest up to the manifest's own cap.
pub fn write(
    plugin: &Path,
    name: &str,
    (policy, spec): (&Value, &Value),
    compiled: Option<&Path>,
    out: &Path,
    max_plugin_bytes: u64,
) -> Result<Vec<PathBuf>> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        bail!("--name {name:?}: use letters, digits, - and _ (it becomes source-NAME and tap-NAME)");
    }
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    // Every file is written through a handle on the folder: a symlink planted in it (say
    // NAME.wasm -> ~/.bashrc) is not followed out of it.
    let dir = cap_std::fs::Dir::open_ambient_dir(out, cap_std::ambient_authority())
        .with_context(|| format!("cannot open {}", out.display()))?;
    // Written aside and renamed over the name: a hard link planted under it is replaced, not
    // written through.
    let put = |file: &str, bytes: &[u8]| -> Result<PathBuf> {
        let path = out.join(file);
        crate::storage::replay::write_replacing(&dir, file, bytes)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    };
    let declarative = crate::guest::manifest::is_manifest(plugin);
    let plugin_limit = format!("the limit of {max_plugin_bytes} bytes for a plugin (--max-plugin-mb)");
    let cap = match declarative {
        true => Cap::new("manifest", crate::guest::manifest::MAX_MANIFEST_BYTES),
        false => Cap::new("plugin", max_plugin_bytes).said(&plugin_limit),
    };
    let bytes = files::read_capped(plugin, cap)?;
    // A manifest goes with the engine that runs it, beside the host (where the host finds it).
    let file = if declarative { format!("{name}.yaml") } else { format!("{name}.wasm") };
    let copy = put(&file, &bytes)?;
    let policy_file = crate::run::policy::Policy::beside(&copy);
    let policy_text = serde_json::to_string_pretty(policy)?;
    let policy_name = policy_file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    put(&policy_name, policy_text.as_bytes())?;
    let policy_pin =
        Pinned { file: policy_name, sha256: crate::storage::replay::manifest::sha256_hex(policy_text.as_bytes()) };
    let mut written = vec![copy, policy_file];
    let (engine, components, runtime) = match declarative {
        false => (None, None, None),
        true => {
            let (files, pins) = beside_a_manifest(plugin, name, &put, max_plugin_bytes, &plugin_limit)?;
            written.extend(files);
            (Some(pins.engine), pins.components, pins.runtime)
        }
    };
    let compiled = match compiled {
        None => None,
        Some(entry) => {
            let file = entry.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let max = crate::guest::compile::max_compiled_bytes(max_plugin_bytes);
            let cap = Cap::new("compiled code", max).regular();
            let code = files::read_capped(entry, cap)?;
            written.push(put(&file, &code)?);
            Some(Pinned { file, sha256: crate::storage::replay::manifest::sha256_hex(&code) })
        }
    };
    let manifest = Manifest {
        name: name.to_string(),
        plugin: file,
        sha256: crate::storage::replay::manifest::sha256_hex(&bytes),
        sluice: env!("CARGO_PKG_VERSION").to_string(),
        engine,
        policy: Some(policy_pin),
        components,
        runtime,
        compiled,
    };
    let manifest_file = manifest_path(out, name);
    let manifest_name = manifest_file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    written.push(put(&manifest_name, serde_json::to_string_pretty(&manifest)?.as_bytes())?);
    let host = std::env::current_exe().context("cannot find the host executable to package")?;
    for exe in [format!("source-{name}"), format!("tap-{name}")] {
        let target = out.join(&exe);
        let _ = dir.remove_file(&exe);
        // A hard link costs nothing when the folder is on the host's filesystem; else a copy.
        if link_host(&host, &dir, &exe).is_err() {
            let copied = || -> std::io::Result<()> {
                use cap_std::fs::PermissionsExt;
                let mut from = std::fs::File::open(&host)?;
                let mut to = dir.create(&exe)?;
                std::io::copy(&mut from, &mut to)?;
                to.set_permissions(cap_std::fs::Permissions::from_mode(0o755))
            };
            copied().with_context(|| format!("cannot write {}", target.display()))?;
        }
        written.push(target);
    }
    // Meltano runs plugins from its project folder: the executable's path must be absolute.
    let folder = std::fs::canonicalize(out).with_context(|| format!("cannot resolve {}", out.display()))?;
    written.push(put(
        "meltano-plugin.yml",
        meltano_definition(name, &folder.join(format!("tap-{name}")), spec).as_bytes(),
    )?);
    Ok(written)
}

/// What goes with a manifest, pinned: the declarative engine beside the host, and, for a manifest
/// with custom components, them as `NAME.components.py` (where a run of `NAME.yaml` finds them)
/// and the components runtime beside the host. The files written, and the engine's, the
/// components' and the runtime's pins.
fn beside_a_manifest(
    manifest: &Path,
    name: &str,
    put: &dyn Fn(&str, &[u8]) -> Result<PathBuf>,
    max_plugin_bytes: u64,
    plugin_limit: &str,
) -> Result<(Vec<PathBuf>, ManifestPins)> {
    let mut written = Vec::new();
    let mut shipped = |path: &Path, file: &str, what: &str| -> Result<Pinned> {
        let bytes = files::read_capped(path, Cap::new(what, max_plugin_bytes).said(plugin_limit))?;
        written.push(put(file, &bytes)?);
        Ok(Pinned { file: file.to_string(), sha256: crate::storage::replay::manifest::sha256_hex(&bytes) })
    };
    let engine = shipped(&crate::guest::manifest::engine_path()?, crate::guest::manifest::ENGINE_FILE, "the engine")?;
    let Some(code) = crate::guest::custom::CustomCode::beside(manifest)? else {
        return Ok((written, ManifestPins { engine, components: None, runtime: None }));
    };
    let runtime_file = crate::guest::custom::RUNTIME_FILE;
    let runtime = shipped(&crate::guest::custom::runtime_path()?, runtime_file, "the components runtime")?;
    let file = format!("{name}.{}", crate::guest::custom::COMPONENTS_FILE);
    written.push(put(&file, code.source.as_bytes())?);
    let components = Pinned { file, sha256: code.sha256.clone() };
    Ok((written, ManifestPins { engine, components: Some(components), runtime: Some(runtime) }))
}

/// The pins of what goes with a manifest (see [`beside_a_manifest`]).
struct ManifestPins {
    engine: Pinned,
    components: Option<Pinned>,
    runtime: Option<Pinned>,
}

/// The host executable hard-linked into the package folder as `exe`.
fn link_host(host: &Path, dir: &cap_std::fs::Dir, exe: &str) -> std::io::Result<()> {
    let (Some(folder), Some(file)) = (host.parent(), host.file_name()) else {
        return Err(std::io::Error::other("the host executable has no folder"));
    };
    let host_dir = cap_std::fs::Dir::open_ambient_dir(folder, cap_std::ambient_authority())?;
    host_dir.hard_link(file, dir, exe)
}

/// A Meltano `extractors` entry: `meltano add --custom` asks the same, and a meltano.yml takes it
/// as it is. Settings come from the spec's top-level properties; secret ones are `sensitive`.
pub fn meltano_definition(name: &str, executable: &Path, spec: &Value) -> String {
    // JSON strings are YAML strings: every value is written quoted.
    let q = |s: &str| serde_json::to_string(s).expect("a string serializes");
    let mut text = String::from("plugins:\n  extractors:\n");
    text.push_str(&format!("  - name: {}\n", q(&format!("tap-{name}"))));
    text.push_str(&format!("    namespace: {}\n", q(&format!("tap_{}", name.replace('-', "_")))));
    text.push_str(&format!("    executable: {}\n", q(&executable.display().to_string())));
    text.push_str("    capabilities: [\"catalog\", \"discover\", \"state\", \"properties\", \"about\"]\n");
    let properties = spec.get("properties").and_then(Value::as_object);
    if properties.is_some_and(|p| !p.is_empty()) {
        text.push_str("    settings:\n");
    }
    for (setting, schema) in properties.into_iter().flatten() {
        let kind = match schema.get("type").and_then(Value::as_str) {
            Some("integer") => "integer",
            Some("boolean") => "boolean",
            Some("object") => "object",
            Some("array") => "array",
            _ => "string",
        };
        text.push_str(&format!("    - name: {}\n      kind: {kind}\n", q(setting)));
        if schema.get("airbyte_secret").and_then(Value::as_bool) == Some(true) {
            text.push_str("      sensitive: true\n");
        }
        if let Some(description) = schema.get("description").and_then(Value::as_str) {
            text.push_str(&format!("      description: {}\n", q(description)));
        }
    }
    text
}

/// The command line to run when the host was started as a packaged connector (`source-NAME` or
/// `tap-NAME` beside `NAME.package.json`); `None` for the plain `host`.
pub fn packaged_args(args: Vec<OsString>) -> Result<Option<Vec<OsString>>> {
    let Some(exe) = args.first().map(PathBuf::from) else { return Ok(None) };
    let file = exe.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
    let (kind, name) = match (file.strip_prefix("source-"), file.strip_prefix("tap-")) {
        (Some(name), _) => ("source", name.to_string()),
        (_, Some(name)) => ("tap", name.to_string()),
        _ => return Ok(None),
    };
    // The folder the executable is in, links followed (a platform may link it elsewhere).
    let real = std::fs::canonicalize(&exe).or_else(|_| std::env::current_exe())?;
    let dir = real.parent().map(Path::to_path_buf).unwrap_or_default();
    if !manifest_path(&dir, &name).is_file() {
        return Ok(None);
    }
    let manifest = read_manifest(&dir, &name)?;
    let plugin = dir.join(&manifest.plugin);
    verify(&plugin, &manifest.sha256, &format!("the plugin packaged as {name}"))?;
    if let Some(engine) = &manifest.engine {
        verify(&dir.join(&engine.file), &engine.sha256, &format!("the declarative engine packaged with {name}"))?;
    }
    if let Some(components) = &manifest.components {
        verify(
            &dir.join(&components.file),
            &components.sha256,
            &format!("the custom components packaged with {name}"),
        )?;
    }
    if let Some(runtime) = &manifest.runtime {
        verify(&dir.join(&runtime.file), &runtime.sha256, &format!("the components runtime packaged with {name}"))?;
    }
    let rest: Vec<OsString> = args[1..].to_vec();
    let host = OsString::from("host");
    let plugin = plugin.into_os_string();
    let mut args = match kind {
        "source" => airbyte_args(host, plugin, rest)?,
        _ => singer_args(host, plugin, rest),
    };
    // Verified when used: only a run whose cache misses reads it.
    let runs_plugin =
        matches!(args.get(1).and_then(|a| a.to_str()), Some("spec" | "check" | "discover" | "read" | "run"));
    if let Some(compiled) = manifest.compiled.filter(|_| runs_plugin && args.len() >= 3) {
        // After `host COMMAND PLUGIN`.
        let at = 3;
        let code = [OsString::from("--packaged-code"), dir.join(&compiled.file).into_os_string()];
        let sha = [OsString::from("--packaged-code-sha256"), compiled.sha256.into()];
        args.splice(at..at, code.into_iter().chain(sha));
    }
    Ok(Some(args))
}

/// Refuses a packaged file whose sha256 is not the one pinned: another plugin (or engine) in the
/// packaged one's place. Hashed a piece at a time, and only a regular file (its size is the
/// bound; the run reads it next under --max-plugin-mb).
fn verify(file: &Path, sha256: &str, what: &str) -> Result<()> {
    let actual = files::sha256_capped(file, Cap::new(what, u64::MAX).regular())?;
    if actual != sha256 {
        bail!(
            "{} is not {what} (sha256 {actual}, packaged {sha256}): package it again with `host package`",
            file.display()
        );
    }
    Ok(())
}

/// `source-NAME spec|check|discover|read ARGS` is `host spec|check|discover|read PLUGIN ARGS`.
fn airbyte_args(host: OsString, plugin: OsString, rest: Vec<OsString>) -> Result<Vec<OsString>> {
    let Some(command) = rest.first().and_then(|c| c.to_str()).map(str::to_string) else {
        bail!(
            "usage: source-NAME spec | check --config FILE | discover --config FILE | read --config FILE --catalog FILE [--state FILE]"
        );
    };
    if !["spec", "check", "discover", "read"].contains(&command.as_str()) {
        // --help, --version and the like reach the host as they are.
        return Ok([host].into_iter().chain(rest).collect());
    }
    Ok([host, command.into(), plugin].into_iter().chain(rest.into_iter().skip(1)).collect())
}

/// `tap-NAME --config FILE [--catalog|--properties FILE] [--state FILE] [--discover|--test]` is
/// `host run PLUGIN --format singer ...`; `--about [--format json|markdown]` is `--about=FORMAT`.
fn singer_args(host: OsString, plugin: OsString, rest: Vec<OsString>) -> Vec<OsString> {
    let mut args = vec![host, "run".into(), plugin];
    let mut rest = rest.into_iter().peekable();
    let mut about = None;
    let mut format = None;
    let mut others = Vec::new();
    while let Some(arg) = rest.next() {
        match arg.to_str() {
            Some("--about") => about = Some("json".to_string()),
            Some("--format") => format = rest.next().and_then(|f| f.into_string().ok()),
            Some(a) if a.starts_with("--format=") => format = Some(a["--format=".len()..].to_string()),
            _ => others.push(arg),
        }
    }
    match about {
        Some(_) => args.push(format!("--about={}", format.unwrap_or_else(|| "json".into())).into()),
        None => args.extend(["--format".into(), "singer".into()]),
    }
    args.extend(others);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(args: &[OsString]) -> Vec<String> {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn platform_arguments_become_host_commands() {
        let (host, plugin) = (OsString::from("host"), OsString::from("/p/x.wasm"));
        let read = airbyte_args(host.clone(), plugin.clone(), vec!["read".into(), "--config".into(), "c".into()]);
        assert_eq!(strings(&read.unwrap()), ["host", "read", "/p/x.wasm", "--config", "c"]);
        let tap = singer_args(host.clone(), plugin.clone(), vec!["--config".into(), "c".into(), "--discover".into()]);
        assert_eq!(strings(&tap), ["host", "run", "/p/x.wasm", "--format", "singer", "--config", "c", "--discover"]);
        let about = singer_args(host, plugin, vec!["--about".into(), "--format".into(), "markdown".into()]);
        assert_eq!(strings(&about), ["host", "run", "/p/x.wasm", "--about=markdown"]);
    }

    #[test]
    fn meltano_settings_mark_secrets_sensitive() {
        let spec = serde_json::json!({"properties": {
            "base_url": {"type": "string", "description": "Where \"it\" is"},
            "api_key": {"type": "string", "airbyte_secret": true},
            "page_size": {"type": "integer"}}});
        let text = meltano_definition("demo", Path::new("/opt/demo/tap-demo"), &spec);
        assert!(text.contains("  - name: \"tap-demo\"\n    namespace: \"tap_demo\"\n"), "{text}");
        assert!(text.contains("    - name: \"api_key\"\n      kind: string\n      sensitive: true\n"), "{text}");
        assert!(text.contains("    - name: \"page_size\"\n      kind: integer\n"), "{text}");
        assert!(text.contains("description: \"Where \\\"it\\\" is\""), "{text}");
    }

    /// The package folder is written through a handle on it, each file aside and renamed over
    /// its name: a symlink or a hard link planted there is replaced, never written through.
    #[test]
    fn links_planted_in_the_package_folder_are_replaced_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let (out, outside, linked) = (dir.path().join("pkg"), dir.path().join("victim"), dir.path().join("linked"));
        std::fs::create_dir(&out).unwrap();
        std::fs::write(&outside, b"precious").unwrap();
        std::fs::write(&linked, b"also precious").unwrap();
        let plugin = dir.path().join("demo.wasm");
        std::fs::write(&plugin, b"\0asm component bytes").unwrap();
        std::os::unix::fs::symlink(&outside, out.join("demo.wasm")).unwrap();
        std::fs::hard_link(&linked, out.join("demo.policy.json")).unwrap();
        let spec = serde_json::json!({});
        let written = write(&plugin, "demo", (&serde_json::json!({}), &spec), None, &out, 1 << 20).unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"precious", "nothing was written through the symlink");
        assert_eq!(std::fs::read(&linked).unwrap(), b"also precious", "nor through the hard link");
        assert!(written.iter().all(|f| f.starts_with(&out) && f.exists()), "{written:?}");
        assert!(std::fs::symlink_metadata(out.join("demo.wasm")).unwrap().is_file());
        assert_eq!(std::fs::read(out.join("demo.wasm")).unwrap(), b"\0asm component bytes");
        let staged = std::fs::read_dir(&out)
            .unwrap()
            .filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".staging-"));
        assert_eq!(staged.count(), 0, "no staged file is left");
    }
}
