//! A packaged connector as an OCI image for the Airbyte platform (`host package --oci`), written
//! as an OCI image layout with no registry and no container tool: one layer holding the package
//! under /airbyte and the shared libraries the host binary links (so the image needs no base),
//! an image config with the entrypoint, `AIRBYTE_ENTRYPOINT` and the `io.airbyte.*` labels.
//! `podman load`/`skopeo copy oci:DIR ...` read it.

use anyhow::{Context, Result, bail};
use serde_json::json;
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
    // Hashed as it is written, never read back.
    let architecture = architecture()?;
    let unnamed = blobs.join("layer.tmp");
    let (layer_digest, layer_size) = match layer(package, name, &unnamed) {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_file(&unnamed);
            return Err(e);
        }
    };
    std::fs::rename(&unnamed, blobs.join(&layer_digest))?;
    let entrypoint = format!("{IMAGE_DIR}/source-{name}");
    let config = json!({
        "architecture": architecture,
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

/// The image's `architecture`: the OCI (Go) name of the target the host was built for, which is
/// the binary the image runs (`source-NAME` in the package is this host, hard-linked or copied
/// by `host package`). An architecture without an OCI name is refused rather than mislabelled.
fn architecture() -> Result<&'static str> {
    oci_architecture(std::env::consts::ARCH, cfg!(target_endian = "little"))
}

fn oci_architecture(arch: &str, little_endian: bool) -> Result<&'static str> {
    Ok(match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "arm" => "arm",
        "riscv64" => "riscv64",
        "s390x" => "s390x",
        "loongarch64" => "loong64",
        "powerpc64" if little_endian => "ppc64le",
        "powerpc64" => "ppc64",
        "mips64" if little_endian => "mips64le",
        "mips64" => "mips64",
        other => bail!("cannot name the image's architecture: the host was built for {other}, which has no OCI name"),
    })
}

/// A writer that hashes and counts what goes through it: the layer's digest and size, made as
/// the layer is written.
struct Digesting<W> {
    inner: W,
    hasher: Sha256,
    bytes: u64,
}

impl<W: std::io::Write> std::io::Write for Digesting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes what it reads (a pinned file checked as it is packed).
struct Hashing<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }
}

type Layer = tar::Builder<Digesting<std::io::BufWriter<std::fs::File>>>;

/// A file name a package manifest gives: one plain name in the package folder, never a path.
fn plain_name<'a>(manifest: &Path, file: &'a str) -> Result<&'a str> {
    let mut parts = Path::new(file).components();
    match (parts.next(), parts.next()) {
        (Some(std::path::Component::Normal(part)), None) if part == file => Ok(file),
        _ => bail!("{} names the file {file:?}: a package's files are plain names in its folder", manifest.display()),
    }
}

/// The one layer, written to `file`: the package's files under /airbyte (`tap-NAME` a hard link
/// to `source-NAME`), the host's shared libraries at their paths, and a /tmp for the
/// compiled-component cache. Which plugin goes in is the package manifest's to say
/// (`NAME.package.json`, read bounded): exactly the plugin, engine, custom components and their
/// runtime, compiled code and policy it pins, each
/// checked against its sha256 as it is streamed in, whatever else lies in the folder. The
/// layer's sha256 (hex) and size in bytes.
fn layer(package: &Path, name: &str, file: &Path) -> Result<(String, u64)> {
    let manifest = super::package::read_manifest(package, name)?;
    let manifest_file = package.join(format!("{name}.package.json"));
    if manifest.name != name {
        bail!("{} packages {:?}, not {name:?}", manifest_file.display(), manifest.name);
    }
    // The files it pins, as (name, sha256, what they are).
    let mut pinned = vec![(plain_name(&manifest_file, &manifest.plugin)?, &manifest.sha256, "the plugin")];
    if let Some(engine) = &manifest.engine {
        pinned.push((plain_name(&manifest_file, &engine.file)?, &engine.sha256, "the declarative engine"));
    }
    if let Some(components) = &manifest.components {
        pinned.push((plain_name(&manifest_file, &components.file)?, &components.sha256, "the custom components"));
    }
    if let Some(runtime) = &manifest.runtime {
        pinned.push((plain_name(&manifest_file, &runtime.file)?, &runtime.sha256, "the components runtime"));
    }
    if let Some(compiled) = &manifest.compiled {
        pinned.push((plain_name(&manifest_file, &compiled.file)?, &compiled.sha256, "the compiled code"));
    }
    if let Some(policy) = &manifest.policy {
        pinned.push((plain_name(&manifest_file, &policy.file)?, &policy.sha256, "the policy"));
    }
    let out = std::fs::File::create(file).with_context(|| format!("cannot write {}", file.display()))?;
    let sink = Digesting { inner: std::io::BufWriter::new(out), hasher: Sha256::new(), bytes: 0 };
    let mut tar = tar::Builder::new(sink);
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
    add_file(&mut tar, &package.join(format!("source-{name}")), &format!("airbyte/source-{name}"), 0o755)?;
    add_file(&mut tar, &manifest_file, &format!("airbyte/{name}.package.json"), 0o644)?;
    for (file, sha256, what) in pinned {
        let path = package.join(file);
        let actual = add_file(&mut tar, &path, &format!("airbyte/{file}"), 0o644)?;
        if &actual != sha256 {
            bail!(
                "{} is not {what} packaged in {} (sha256 {actual}, packaged {sha256}): package it again with \
                 `host package`",
                path.display(),
                manifest_file.display()
            );
        }
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
    let Digesting { inner, hasher, bytes } = tar.into_inner()?;
    let out = inner.into_inner().map_err(|e| e.into_error())?;
    out.sync_all()?;
    Ok((hex::encode(hasher.finalize()), bytes))
}

/// Streams `path` into the layer as `inside`; the sha256 (hex) of what was packed. At most the
/// size the file had when it was opened is read (the tar header holds that size), and a file
/// that comes out shorter is refused.
fn add_file(tar: &mut Layer, path: &Path, inside: &str, mode: u32) -> Result<String> {
    use std::io::Read;
    // Links followed: the image holds the files themselves. Opened without waiting (a FIFO in
    // the folder does not hang the writer), then checked to be a regular file.
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        bail!("cannot pack {}: it is not a regular file", path.display());
    }
    let size = meta.len();
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(mode);
    let mut reader = Hashing { inner: file.take(size), hasher: Sha256::new(), bytes: 0 };
    tar.append_data(&mut header, inside, &mut reader)?;
    if reader.bytes != size {
        bail!("cannot pack {}: it changed while it was packed", path.display());
    }
    Ok(hex::encode(reader.hasher.finalize()))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::package::{Manifest, Pinned};
    use serde_json::Value;

    /// The image config of a layout (for the tests).
    fn config_of(layout: &Path) -> Result<Value> {
        let read = |digest: &str| -> Result<Value> {
            let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
            Ok(serde_json::from_slice(&std::fs::read(layout.join("blobs/sha256").join(hex))?)?)
        };
        let index: Value = serde_json::from_slice(&std::fs::read(layout.join("index.json"))?)?;
        let manifest = read(index["manifests"][0]["digest"].as_str().unwrap_or_default())?;
        read(manifest["config"]["digest"].as_str().unwrap_or_default())
    }

    fn sha(bytes: &[u8]) -> String {
        hex::encode(Sha256::digest(bytes))
    }

    /// A package folder as `host package` writes one for a component `demo`, its host a small
    /// dynamic executable (ldd lists its libraries), with `extra` files beside it.
    fn package(extra: &[(&str, &[u8])]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let plugin = b"\0asm the demo component";
        let policy = br#"{"allow_hosts": ["api.example.com"]}"#;
        std::fs::write(dir.path().join("demo.wasm"), plugin).unwrap();
        std::fs::write(dir.path().join("demo.policy.json"), policy).unwrap();
        std::fs::copy("/bin/true", dir.path().join("source-demo")).unwrap();
        let manifest = Manifest {
            name: "demo".into(),
            plugin: "demo.wasm".into(),
            sha256: sha(plugin),
            sluice: "0".into(),
            engine: None,
            components: None,
            runtime: None,
            compiled: None,
            policy: Some(Pinned { file: "demo.policy.json".into(), sha256: sha(policy) }),
        };
        std::fs::write(dir.path().join("demo.package.json"), serde_json::to_vec(&manifest).unwrap()).unwrap();
        for (name, bytes) in extra {
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        dir
    }

    /// The entries of the layout's one layer, and the layer's digest as its manifest gives it.
    fn layer_of(layout: &Path) -> (Vec<String>, String) {
        let read = |path: PathBuf| -> Value { serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap() };
        let index = read(layout.join("index.json"));
        let digest = |d: &Value| d.as_str().unwrap().strip_prefix("sha256:").unwrap().to_string();
        let manifest = read(layout.join("blobs/sha256").join(digest(&index["manifests"][0]["digest"])));
        let layer = digest(&manifest["layers"][0]["digest"]);
        let blob = layout.join("blobs/sha256").join(&layer);
        assert_eq!(manifest["layers"][0]["size"], std::fs::metadata(&blob).unwrap().len());
        let mut archive = tar::Archive::new(std::fs::File::open(&blob).unwrap());
        let names = archive.entries().unwrap().map(|e| e.unwrap().path().unwrap().display().to_string()).collect();
        (names, layer)
    }

    /// A `demo.yaml` left in a component's package folder (from packaging a manifest there
    /// before) made the layer hold the yaml and the engine instead of the packaged component.
    #[test]
    fn the_layer_holds_the_plugin_the_package_pins() {
        let dir = package(&[("demo.yaml", b"version: 6.44.0\n"), ("declarative.wasm", b"an engine")]);
        let layout = dir.path().join("image");
        write(dir.path(), "demo", "1.0.0", &layout).unwrap();
        let (names, _) = layer_of(&layout);
        for packed in ["airbyte/source-demo", "airbyte/tap-demo", "airbyte/demo.wasm", "airbyte/demo.policy.json"] {
            assert!(names.iter().any(|n| n == packed), "{packed} not in {names:?}");
        }
        assert!(names.iter().any(|n| n == "airbyte/demo.package.json"), "{names:?}");
        assert!(!names.iter().any(|n| n.ends_with("demo.yaml") || n.ends_with("declarative.wasm")), "{names:?}");
    }

    /// The layer is named by the sha256 of exactly the bytes written (hashed as they were
    /// written, not read back), and the config's diff_id and architecture agree.
    #[test]
    fn the_layer_digest_is_the_sha256_of_its_blob() {
        let dir = package(&[]);
        let layout = dir.path().join("image");
        write(dir.path(), "demo", "1.0.0", &layout).unwrap();
        let (_, digest) = layer_of(&layout);
        let blob = std::fs::read(layout.join("blobs/sha256").join(&digest)).unwrap();
        assert_eq!(sha(&blob), digest);
        let config = config_of(&layout).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], format!("sha256:{digest}"));
        assert_eq!(config["architecture"], architecture().unwrap());
        assert!(!layout.join("blobs/sha256/layer.tmp").exists());
    }

    /// A pinned file whose bytes changed after packaging is not packed: the image would run
    /// another plugin (or policy) than the package names.
    #[test]
    fn a_pinned_file_changed_since_packaging_is_refused() {
        let dir = package(&[]);
        std::fs::write(dir.path().join("demo.wasm"), b"\0asm another component").unwrap();
        let layout = dir.path().join("image");
        let error = format!("{:#}", write(dir.path(), "demo", "1.0.0", &layout).unwrap_err());
        assert!(error.contains("demo.wasm is not the plugin packaged in"), "{error}");
        assert!(!layout.join("blobs/sha256/layer.tmp").exists(), "the unfinished layer is removed");
        let dir = package(&[]);
        std::fs::write(dir.path().join("demo.policy.json"), b"{}").unwrap();
        let error = format!("{:#}", write(dir.path(), "demo", "1.0.0", &dir.path().join("image")).unwrap_err());
        assert!(error.contains("is not the policy packaged in"), "{error}");
    }

    /// The package manifest names files in its folder only, and is read bounded.
    #[test]
    fn a_package_manifest_that_reaches_out_or_is_not_small_is_refused() {
        let dir = package(&[]);
        let path = dir.path().join("demo.package.json");
        let mut manifest: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        manifest["plugin"] = json!("../outside.wasm");
        std::fs::write(&path, manifest.to_string()).unwrap();
        let error = format!("{:#}", write(dir.path(), "demo", "1.0.0", &dir.path().join("image")).unwrap_err());
        assert!(error.contains("plain names in its folder"), "{error}");
        std::fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
        let error = format!("{:#}", write(dir.path(), "demo", "1.0.0", &dir.path().join("image")).unwrap_err());
        assert!(error.contains("larger than"), "{error}");
    }

    #[test]
    fn the_architecture_is_the_targets_oci_name() {
        assert_eq!(oci_architecture("x86_64", true).unwrap(), "amd64");
        assert_eq!(oci_architecture("aarch64", true).unwrap(), "arm64");
        assert_eq!(oci_architecture("powerpc64", true).unwrap(), "ppc64le");
        let error = oci_architecture("sparc64", false).unwrap_err().to_string();
        assert!(error.contains("sparc64"), "{error}");
        #[cfg(target_arch = "x86_64")]
        assert_eq!(architecture().unwrap(), "amd64");
    }
}
