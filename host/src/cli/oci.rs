//! A packaged connector as an OCI image for the Airbyte platform (`host package --oci`), written
//! as an OCI image layout with no registry and no container tool: one layer holding the package
//! under /airbyte and the shared libraries the host binary links (so the image needs no base),
//! an image config with the entrypoint, `AIRBYTE_ENTRYPOINT` and the `io.airbyte.*` labels.
//! `podman load`/`skopeo copy oci:DIR ...` read it.

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// Where the package goes inside the image.
pub const IMAGE_DIR: &str = "/airbyte";

/// Writes the image layout for the package in `package` (as `host package` wrote it) into
/// `out`; `version` becomes `io.airbyte.version` and the image tag.
pub fn write(package: &Path, name: &str, version: &str, out: &Path) -> Result<PathBuf> {
    let blobs = out.join("blobs/sha256");
    std::fs::create_dir_all(&blobs).with_context(|| format!("cannot create {}", blobs.display()))?;
    // The layer is written to a file as it is made (the host binary alone is tens of MB), then
    // named by its digest.
    let unnamed = blobs.join("layer.tmp");
    let layer_size = layer(package, name, &unnamed)?;
    let layer_digest = hex::encode(Sha256::digest(std::fs::read(&unnamed)?));
    std::fs::rename(&unnamed, blobs.join(&layer_digest))?;
    let entrypoint = format!("{IMAGE_DIR}/source-{name}");
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Entrypoint": [entrypoint],
            "Env": [
                format!("AIRBYTE_ENTRYPOINT={entrypoint}"),
                "SLUICE_CACHE_DIR=/tmp/sluice",
                "PATH=/airbyte",
            ],
            "WorkingDir": IMAGE_DIR,
            "Labels": {"io.airbyte.name": format!("airbyte/source-{name}"), "io.airbyte.version": version},
        },
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created_by": format!("sluice {} host package --oci", env!("CARGO_PKG_VERSION"))}],
    });
    let config = serde_json::to_vec(&config)?;
    let config_digest = store(&blobs, &config)?;
    let manifest = serde_json::to_vec(&json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": format!("sha256:{config_digest}"), "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": format!("sha256:{layer_digest}"), "size": layer_size}],
    }))?;
    let manifest_digest = store(&blobs, &manifest)?;
    let index = json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{manifest_digest}"),
            "size": manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": format!("source-{name}:{version}")},
        }],
    });
    std::fs::write(out.join("index.json"), serde_json::to_vec(&index)?)?;
    std::fs::write(out.join("oci-layout"), br#"{"imageLayoutVersion":"1.0.0"}"#)?;
    Ok(out.to_path_buf())
}

/// A blob under its sha256; the digest, hex.
fn store(blobs: &Path, bytes: &[u8]) -> Result<String> {
    let digest = hex::encode(Sha256::digest(bytes));
    std::fs::write(blobs.join(&digest), bytes).with_context(|| format!("cannot write blob {digest}"))?;
    Ok(digest)
}

type Layer = tar::Builder<std::io::BufWriter<std::fs::File>>;

/// The one layer, written to `file`: the package's files under /airbyte (`tap-NAME` a hard link
/// to `source-NAME`), the host's shared libraries at their paths, and a /tmp for the
/// compiled-component cache. Its size in bytes.
fn layer(package: &Path, name: &str, file: &Path) -> Result<u64> {
    let out = std::fs::File::create(file).with_context(|| format!("cannot write {}", file.display()))?;
    let mut tar = tar::Builder::new(std::io::BufWriter::new(out));
    tar.mode(tar::HeaderMode::Deterministic);
    let dir = |tar: &mut Layer, path: &str, mode: u32| -> Result<()> {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_mode(mode);
        header.set_size(0);
        tar.append_data(&mut header, path, std::io::empty())?;
        Ok(())
    };
    dir(&mut tar, "airbyte", 0o755)?;
    dir(&mut tar, "tmp", 0o1777)?;
    // The plugin is a component, or a manifest with the engine that runs it.
    let mut files = vec![format!("source-{name}"), format!("{name}.policy.json"), format!("{name}.package.json")];
    if package.join(format!("{name}.yaml")).is_file() {
        files.push(format!("{name}.yaml"));
        files.push(crate::guest::manifest::ENGINE_FILE.to_string());
    } else {
        files.push(format!("{name}.wasm"));
    }
    for file in &files {
        let path = package.join(file);
        let executable = file.starts_with("source-") || file.starts_with("tap-");
        add_file(&mut tar, &path, &format!("airbyte/{file}"), if executable { 0o755 } else { 0o644 })?;
    }
    let mut link = tar::Header::new_gnu();
    link.set_entry_type(tar::EntryType::Link);
    link.set_size(0);
    link.set_mode(0o755);
    tar.append_link(&mut link, format!("airbyte/tap-{name}"), format!("airbyte/source-{name}"))?;
    let mut made = std::collections::BTreeSet::new();
    for library in shared_libraries(&package.join(format!("source-{name}")))? {
        let inside = library.strip_prefix("/").unwrap_or(&library).to_path_buf();
        // Parent folders first, once each.
        let mut parents: Vec<&Path> = inside.ancestors().skip(1).filter(|p| !p.as_os_str().is_empty()).collect();
        parents.reverse();
        for parent in parents {
            if made.insert(parent.to_path_buf()) {
                dir(&mut tar, &parent.display().to_string(), 0o755)?;
            }
        }
        add_file(&mut tar, &library, &inside.display().to_string(), 0o755)?;
    }
    let out = tar.into_inner()?.into_inner().map_err(|e| e.into_error())?;
    out.sync_all()?;
    Ok(out.metadata()?.len())
}

fn add_file(tar: &mut Layer, path: &Path, inside: &str, mode: u32) -> Result<()> {
    // Links followed: the image holds the files themselves.
    let mut file = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut header = tar::Header::new_gnu();
    header.set_size(file.metadata()?.len());
    header.set_mode(mode);
    tar.append_data(&mut header, inside, &mut file)?;
    Ok(())
}

/// The shared libraries `binary` loads, from `ldd` (the dynamic loader's own answer).
fn shared_libraries(binary: &Path) -> Result<Vec<PathBuf>> {
    let output = std::process::Command::new("ldd").arg(binary).output().context("cannot run ldd")?;
    if !output.status.success() {
        bail!("ldd {} failed: {}", binary.display(), String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8_lossy(&output.stdout);
    Ok(text
        .lines()
        .filter_map(|line| {
            // `libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)` or `/lib64/ld-linux-x86-64.so.2 (0x...)`.
            let path = line.split("=>").last()?.split_whitespace().next()?;
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect())
}

/// The image config of a layout (for tests and inspection).
pub fn config_of(layout: &Path) -> Result<Value> {
    let read = |digest: &str| -> Result<Value> {
        let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
        Ok(serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex))?)?)
    };
    let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
    let manifest = read(index["manifests"][0]["digest"].as_str().unwrap_or_default())?;
    read(manifest["config"]["digest"].as_str().unwrap_or_default())
}
