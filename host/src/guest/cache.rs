//! Compiled components on disk. A `.cwasm` is native code that runs with the host's privileges,
//! so the host runs only entries it can show it wrote for exactly that plugin: each entry starts
//! with an HMAC-SHA256, under a key only this user can read, of the plugin's sha256 and the
//! compiled bytes; an entry without a valid MAC (planted, copied from elsewhere, damaged) is
//! thrown away and the plugin compiled again. The directory must be the user's own and writable
//! by nobody else. Entries are written atomically, so a crash never leaves half a file.

use anyhow::{Context, Result, bail};
use hmac::{Hmac, Mac};
use sha2::Sha256;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

/// Bytes of the MAC at the start of every entry.
const MAC_BYTES: usize = 32;
/// The key's file in the cache directory.
const KEY_FILE: &str = "key";

pub struct ComponentCache {
    dir: PathBuf,
}

impl ComponentCache {
    pub fn new(dir: PathBuf) -> Self {
        ComponentCache { dir }
    }

    /// The default location: `$XDG_CACHE_HOME/sluice/components` or the platform's equivalent.
    pub fn default_dir() -> PathBuf {
        dirs::cache_dir().unwrap_or_else(std::env::temp_dir).join("sluice").join("components")
    }

    /// The entry of the plugin with `sha256` for `engine` (its compatibility hash in the name).
    pub fn file_for(&self, engine: &wasmtime::Engine, sha256: &str) -> PathBuf {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        engine.precompile_compatibility_hash().hash(&mut hasher);
        self.dir.join(format!("{sha256}-{:016x}.cwasm", hasher.finish()))
    }

    /// The compiled plugin, when `file` holds an entry this cache wrote for `sha256`.
    pub fn load(&self, engine: &wasmtime::Engine, file: &Path, sha256: &str) -> Result<Option<Component>> {
        if !file.exists() {
            return Ok(None);
        }
        let key = self.key()?;
        let bytes = std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))?;
        let genuine = bytes.len() > MAC_BYTES && {
            let (mac, compiled) = bytes.split_at(MAC_BYTES);
            mac_of(&key, sha256, compiled).verify_slice(mac).is_ok()
        };
        if genuine {
            // SAFETY: the MAC shows this cache wrote these bytes for this plugin, from
            // `precompile_component` of an engine with the same compatibility hash (in the name).
            if let Ok(component) = unsafe { Component::deserialize(engine, &bytes[MAC_BYTES..]) } {
                return Ok(Some(component));
            }
        }
        // Not ours, or damaged: never run, rebuilt.
        let _ = std::fs::remove_file(file);
        Ok(None)
    }

    /// Stores `compiled` (the code of the plugin with `sha256`) as `file`, with its MAC.
    pub fn store(&self, file: &Path, sha256: &str, compiled: &[u8]) -> Result<()> {
        let key = self.key()?;
        let mut bytes = mac_of(&key, sha256, compiled).finalize().into_bytes().to_vec();
        bytes.extend_from_slice(compiled);
        // Unique per writer, in this process and others; the rename makes the entry appear whole.
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = file.with_extension(format!("tmp{}-{n}", std::process::id()));
        std::fs::write(&tmp, &bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
        std::fs::rename(&tmp, file).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(())
    }

    /// The cache's key, made on first use; the directory is created private, and refused when
    /// it is not this user's or others can write to it.
    fn key(&self) -> Result<Vec<u8>> {
        create_private_dir(&self.dir)?;
        check_private(&self.dir, "cache directory", 0o022)?;
        let path = self.dir.join(KEY_FILE);
        match std::fs::read(&path) {
            Ok(key) if key.len() == MAC_BYTES => {
                check_private(&path, "cache key", 0o077)?;
                Ok(key)
            }
            // A damaged key is replaced; every entry it signed no longer verifies and is rebuilt.
            Ok(_) => {
                std::fs::remove_file(&path).with_context(|| format!("cannot replace {}", path.display()))?;
                self.key()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let mut key = vec![0u8; MAC_BYTES];
                getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("cannot make a cache key: {e}"))?;
                // Unique per writer: threads of one process (tenants loading at once) race here too,
                // and one removing its file must not take another's.
                static KEYS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = KEYS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let tmp = self.dir.join(format!("{KEY_FILE}.tmp{}-{n}", std::process::id()));
                write_private(&tmp, &key)?;
                // Another process may have made one meanwhile: the first one stays.
                match std::fs::hard_link(&tmp, &path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(e).with_context(|| format!("cannot write {}", path.display())),
                }
                let _ = std::fs::remove_file(&tmp);
                self.key()
            }
            Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
        }
    }
}

fn mac_of(key: &[u8], sha256: &str, compiled: &[u8]) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(sha256.as_bytes());
    mac.update(compiled);
    mac
}

fn create_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).with_context(|| format!("cannot create cache directory {}", dir.display()))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// Refuses `path` when another user owns it or its mode has any of the `forbidden` bits.
#[cfg(unix)]
fn check_private(path: &Path, what: &str, forbidden: u32) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).with_context(|| format!("cannot read {}", path.display()))?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if meta.uid() != me {
        bail!(
            "the {what} {} belongs to another user (uid {}): compiled code in it could be substituted; \
             use a directory of your own (--cache-dir)",
            path.display(),
            meta.uid()
        );
    }
    if meta.mode() & forbidden != 0 {
        bail!(
            "the {what} {} is open to others (mode {:o}): compiled code in it could be substituted; \
             make it private (chmod go-w, or go-rwx for the key) or use another --cache-dir",
            path.display(),
            meta.mode() & 0o7777
        );
    }
    Ok(())
}

#[cfg(not(unix))]
fn check_private(_: &Path, _: &str, _: u32) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Threads of one process making the key at once (50 tenants loading their plugins) all get
    /// the one key: a temporary file shared by the process made all but the first fail.
    #[test]
    fn threads_making_the_key_at_once_agree_on_it() {
        let dir = tempfile::tempdir().unwrap();
        let cache = std::sync::Arc::new(ComponentCache::new(dir.path().join("cache")));
        let keys: Vec<Vec<u8>> = (0..16)
            .map(|_| {
                let cache = cache.clone();
                std::thread::spawn(move || cache.key().unwrap())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect();
        assert!(keys.iter().all(|k| k == &keys[0] && k.len() == MAC_BYTES));
    }
}
