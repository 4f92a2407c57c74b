//! Where a lake lives: a URI (`file://`, a plain path, `s3://`, `gs://`, `az://`, `memory://`)
//! turned into an object store and a prefix inside it. A local folder is used through a
//! capability handle rooted at it (`cap_std::fs::Dir`), not through paths: a name made from
//! input (a stream's BATCH folder) or a symlink planted in the lake cannot reach outside the
//! folder, and a file is checked to be a regular file before it is read.

use anyhow::{Context, Result, bail};
use object_store::path::Path;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

/// A folder in an object store, and the URI that names it.
#[derive(Clone)]
pub struct Location {
    pub store: Arc<dyn ObjectStore>,
    /// The folder inside the store (empty for the store's root).
    pub prefix: Path,
    /// The URI of the folder, without a trailing slash.
    pub uri: String,
    /// For local files: the folder on disk (continual mode appends to files here directly).
    pub local_dir: Option<PathBuf>,
    /// For local files: the folder itself, every file of it opened through this handle.
    pub dir: Option<Arc<cap_std::fs::Dir>>,
}

impl std::fmt::Debug for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.uri)
    }
}

/// In-memory stores by name, so a writer and a reader in one process meet (`memory://NAME/...`).
fn memory_store(name: &str) -> Arc<dyn ObjectStore> {
    static STORES: OnceLock<Mutex<HashMap<String, Arc<object_store::memory::InMemory>>>> = OnceLock::new();
    let mut stores = STORES.get_or_init(Default::default).lock().expect("memory stores lock");
    stores.entry(name.to_string()).or_insert_with(|| Arc::new(object_store::memory::InMemory::new())).clone()
}

impl Location {
    /// Opens the folder a URI names; a local folder is created if missing. Cloud credentials
    /// come from the usual environment variables (`AWS_*`, `GOOGLE_*`, `AZURE_*`).
    pub fn parse(uri: &str) -> Result<Location> {
        let uri = uri.trim_end_matches('/');
        if uri.is_empty() {
            bail!("an empty storage URI");
        }
        let Some((scheme, rest)) = uri.split_once("://") else {
            return Self::local(PathBuf::from(uri));
        };
        let (bucket, key) = rest.split_once('/').unwrap_or((rest, ""));
        let store: Arc<dyn ObjectStore> = match scheme {
            "file" => return Self::local(PathBuf::from(format!("/{}", rest.trim_start_matches('/')))),
            "memory" => memory_store(bucket),
            "s3" | "s3a" => Arc::new(
                object_store::aws::AmazonS3Builder::from_env()
                    .with_url(uri)
                    .build()
                    .with_context(|| format!("cannot open {uri}"))?,
            ),
            "gs" => Arc::new(
                object_store::gcp::GoogleCloudStorageBuilder::from_env()
                    .with_url(uri)
                    .build()
                    .with_context(|| format!("cannot open {uri}"))?,
            ),
            "az" | "azure" | "abfs" | "abfss" => Arc::new(
                object_store::azure::MicrosoftAzureBuilder::from_env()
                    .with_url(uri)
                    .build()
                    .with_context(|| format!("cannot open {uri}"))?,
            ),
            other => bail!(
                "unsupported storage URI scheme {other:?} in {uri} (use file://, s3://, gs://, az:// or memory://)"
            ),
        };
        if bucket.is_empty() {
            bail!("{uri} names no bucket");
        }
        let prefix = Path::parse(key).with_context(|| format!("invalid object path in {uri}"))?;
        Ok(Location { store, prefix, uri: uri.to_string(), local_dir: None, dir: None })
    }

    fn local(dir: PathBuf) -> Result<Location> {
        let dir = std::path::absolute(&dir).with_context(|| format!("invalid path {}", dir.display()))?;
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let store = object_store::local::LocalFileSystem::new_with_prefix(&dir)
            .with_context(|| format!("cannot open {}", dir.display()))?;
        let uri = url::Url::from_directory_path(&dir)
            .map_err(|_| anyhow::anyhow!("{} is not an absolute path", dir.display()))?
            .to_string()
            .trim_end_matches('/')
            .to_string();
        let handle = cap_std::fs::Dir::open_ambient_dir(&dir, cap_std::ambient_authority())
            .with_context(|| format!("cannot open {}", dir.display()))?;
        Ok(Location {
            store: Arc::new(store),
            prefix: Path::default(),
            uri,
            local_dir: Some(dir),
            dir: Some(Arc::new(handle)),
        })
    }

    /// The folder `name` inside this one (created on disk for local files, inside this folder's
    /// handle: a `..` or a symlink out of it is refused).
    pub fn child(&self, name: &str) -> Result<Location> {
        let (local_dir, dir) = match (&self.local_dir, &self.dir) {
            (Some(path), Some(dir)) => {
                let shown = path.join(name);
                let inside = || -> std::io::Result<cap_std::fs::Dir> {
                    dir.create_dir_all(name)?;
                    dir.open_dir(name)
                };
                let child =
                    inside().with_context(|| format!("cannot create {} inside {}", shown.display(), path.display()))?;
                (Some(shown), Some(Arc::new(child)))
            }
            _ => (None, None),
        };
        Ok(Location {
            store: self.store.clone(),
            prefix: self.path(name),
            uri: format!("{}/{name}", self.uri),
            local_dir,
            dir,
        })
    }

    /// Runs `work` on the local folder's handle, off the async workers.
    async fn on_disk<T: Send + 'static>(
        dir: &Arc<cap_std::fs::Dir>,
        work: impl FnOnce(&cap_std::fs::Dir) -> std::io::Result<T> + Send + 'static,
    ) -> std::io::Result<T> {
        let dir = dir.clone();
        tokio::task::spawn_blocking(move || work(&dir)).await.map_err(std::io::Error::other)?
    }

    /// The object `name` in this folder.
    pub fn path(&self, name: &str) -> Path {
        self.prefix.parts().chain(Path::from(name).parts()).collect()
    }

    /// The absolute URI of the object `name` in this folder.
    pub fn uri_of(&self, name: &str) -> String {
        format!("{}/{name}", self.uri)
    }

    /// Creates `name`, first writer wins: an object that already exists is left alone and
    /// reported — unless it holds exactly these bytes (an earlier attempt of this very upload).
    pub async fn create(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        if let Some(dir) = &self.dir {
            let (file, tmp) = (name.to_string(), staging(name));
            let (written, bytes) = Self::on_disk(dir, move |dir| {
                stage(dir, &tmp, &bytes)?;
                // Linked under its name only if none is there: first writer wins, never a
                // half-written object.
                let linked = dir.hard_link(&tmp, dir, &file);
                dir.remove_file(&tmp)?;
                Ok((linked, bytes))
            })
            .await
            .with_context(|| format!("cannot create {}", self.uri_of(name)))?;
            return match written {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    if self.read(name).await? == bytes {
                        Ok(())
                    } else {
                        bail!("{} already exists with other contents; not overwriting it", self.uri_of(name))
                    }
                }
                Err(e) => Err(e).with_context(|| format!("cannot create {}", self.uri_of(name))),
            };
        }
        let path = self.path(name);
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.store.put_opts(&path, PutPayload::from(bytes.clone()), options).await {
            Ok(_) => Ok(()),
            Err(object_store::Error::AlreadyExists { .. }) => {
                let existing = self.read(name).await?;
                if existing == bytes {
                    Ok(())
                } else {
                    bail!("{} already exists with other contents; not overwriting it", self.uri_of(name))
                }
            }
            Err(e) => Err(e).with_context(|| format!("cannot create {}", self.uri_of(name))),
        }
    }

    /// Writes `name`, replacing what is there (the manifest).
    pub async fn replace(&self, name: &str, bytes: Vec<u8>) -> Result<()> {
        if let Some(dir) = &self.dir {
            let file = name.to_string();
            return Self::on_disk(dir, move |dir| write_replacing(dir, &file, &bytes))
                .await
                .with_context(|| format!("cannot write {}", self.uri_of(name)));
        }
        self.store
            .put(&self.path(name), PutPayload::from(bytes))
            .await
            .with_context(|| format!("cannot write {}", self.uri_of(name)))?;
        Ok(())
    }

    pub async fn read(&self, name: &str) -> Result<Vec<u8>> {
        if let Some(dir) = &self.dir {
            let file = name.to_string();
            return Self::on_disk(dir, move |dir| {
                use std::io::Read;
                let mut options = cap_std::fs::OpenOptions::new();
                options.read(true);
                // Not waiting on a FIFO planted in the lake: its kind is checked next.
                #[cfg(unix)]
                cap_std::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
                let mut opened = dir.open_with(&file, &options)?;
                if !opened.metadata()?.is_file() {
                    return Err(std::io::Error::other("it is not a regular file"));
                }
                let mut bytes = Vec::new();
                opened.read_to_end(&mut bytes)?;
                Ok(bytes)
            })
            .await
            .with_context(|| format!("cannot read {}", self.uri_of(name)));
        }
        let got =
            self.store.get(&self.path(name)).await.with_context(|| format!("cannot read {}", self.uri_of(name)))?;
        Ok(got.bytes().await.with_context(|| format!("cannot read {}", self.uri_of(name)))?.to_vec())
    }

    /// Whether `name` exists.
    pub async fn exists(&self, name: &str) -> Result<bool> {
        if let Some(dir) = &self.dir {
            let file = name.to_string();
            return Self::on_disk(dir, move |dir| dir.try_exists(&file))
                .await
                .with_context(|| format!("cannot look at {}", self.uri_of(name)));
        }
        match self.store.head(&self.path(name)).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e).with_context(|| format!("cannot look at {}", self.uri_of(name))),
        }
    }

    /// The objects directly in this folder, and its subfolders, by name, sorted.
    pub async fn list(&self) -> Result<(Vec<String>, Vec<String>)> {
        if let Some(dir) = &self.dir {
            let (mut objects, mut folders) = Self::on_disk(dir, |dir| {
                let (mut objects, mut folders) = (Vec::new(), Vec::new());
                for entry in dir.entries()? {
                    let entry = entry?;
                    let Ok(name) = entry.file_name().into_string() else { continue };
                    let kind = entry.file_type()?;
                    if name.starts_with(STAGING) {
                        continue;
                    } else if kind.is_dir() {
                        folders.push(name);
                    } else if kind.is_file() {
                        objects.push(name);
                    }
                }
                Ok((objects, folders))
            })
            .await
            .with_context(|| format!("cannot list {}", self.uri))?;
            objects.sort();
            folders.sort();
            return Ok((objects, folders));
        }
        let prefix = if self.prefix.as_ref().is_empty() { None } else { Some(&self.prefix) };
        let listed =
            self.store.list_with_delimiter(prefix).await.with_context(|| format!("cannot list {}", self.uri))?;
        let name = |p: &Path| p.filename().unwrap_or_default().to_string();
        let mut objects: Vec<String> = listed.objects.iter().map(|o| name(&o.location)).collect();
        let mut folders: Vec<String> = listed.common_prefixes.iter().map(name).collect();
        objects.sort();
        folders.sort();
        Ok((objects, folders))
    }
}

/// Objects being written locally, before they are linked under their names; never listed.
const STAGING: &str = ".staging-";

/// Writes `bytes` to the staging file `tmp` and syncs it, so the name it is linked or renamed to
/// never holds less after a power loss; a failed write leaves no staging file behind.
fn stage(dir: &cap_std::fs::Dir, tmp: &str, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let written = (|| {
        let mut file = dir.open_with(tmp, cap_std::fs::OpenOptions::new().write(true).create_new(true))?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if written.is_err() {
        let _ = dir.remove_file(tmp);
    }
    written
}

/// Writes `name` in `dir` whole: staged, synced, then renamed over the name, so a reader sees the
/// old file or the new one, and a link planted under the name is replaced, never written
/// through (the lake's manifest, the files of `host package`).
pub fn write_replacing(dir: &cap_std::fs::Dir, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = staging(name);
    stage(dir, &tmp, bytes)?;
    dir.rename(&tmp, dir, name).inspect_err(|_| drop(dir.remove_file(&tmp)))
}

fn staging(name: &str) -> String {
    format!("{STAGING}{:016x}-{name}", fastrand::u64(..))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        let dir = tempfile::tempdir().unwrap();
        let plain = Location::parse(dir.path().join("lake").to_str().unwrap()).unwrap();
        assert!(plain.uri.starts_with("file:///") && plain.uri.ends_with("/lake"), "{}", plain.uri);
        let file = Location::parse(&format!("{}/", plain.uri)).unwrap();
        assert_eq!(file.local_dir, plain.local_dir);
        let run = file.child("01ABC").unwrap();
        assert_eq!(run.uri_of("x.jsonl"), format!("{}/01ABC/x.jsonl", plain.uri));
        assert!(run.local_dir.unwrap().is_dir());
        assert!(Location::parse("ftp://x/y").unwrap_err().to_string().contains("unsupported storage URI scheme"));
        let mem = Location::parse("memory://t/a/b").unwrap();
        assert_eq!(mem.path("c").as_ref(), "a/b/c");
    }

    #[tokio::test]
    async fn create_is_first_writer_wins() {
        let lake = Location::parse("memory://create-test/run").unwrap();
        lake.create("s.jsonl", b"one\n".to_vec()).await.unwrap();
        lake.create("s.jsonl", b"one\n".to_vec()).await.unwrap();
        let err = lake.create("s.jsonl", b"two\n".to_vec()).await.unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        assert_eq!(lake.read("s.jsonl").await.unwrap(), b"one\n");
        assert_eq!(lake.list().await.unwrap().0, vec!["s.jsonl"]);
    }

    #[tokio::test]
    async fn a_local_lake_is_first_writer_wins_too_and_lists_what_it_wrote() {
        let dir = tempfile::tempdir().unwrap();
        let lake = Location::parse(dir.path().to_str().unwrap()).unwrap().child("run").unwrap();
        lake.create("s.jsonl", b"one\n".to_vec()).await.unwrap();
        lake.create("s.jsonl", b"one\n".to_vec()).await.unwrap();
        let err = lake.create("s.jsonl", b"two\n".to_vec()).await.unwrap_err();
        assert!(err.to_string().contains("already exists"), "{err}");
        lake.replace("manifest.json", b"{}".to_vec()).await.unwrap();
        lake.replace("manifest.json", b"{\"a\":1}".to_vec()).await.unwrap();
        assert_eq!(lake.read("manifest.json").await.unwrap(), b"{\"a\":1}");
        lake.child("http").unwrap();
        assert_eq!(lake.list().await.unwrap(), (vec!["manifest.json".into(), "s.jsonl".into()], vec!["http".into()]));
        assert!(lake.exists("s.jsonl").await.unwrap() && !lake.exists("t.jsonl").await.unwrap());
    }

    /// The lake's folder is a capability: names with `..`, absolute names and symlinks planted
    /// in it to elsewhere are refused, not followed.
    #[tokio::test]
    async fn nothing_reaches_outside_a_local_lake() {
        let dir = tempfile::tempdir().unwrap();
        let outside = dir.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), b"s").unwrap();
        let lake = Location::parse(dir.path().join("lake").to_str().unwrap()).unwrap();
        let run = lake.child("run").unwrap();
        assert!(lake.child("../escaped").is_err());
        assert!(!dir.path().join("escaped").exists());
        assert!(run.create("../../outside/planted", b"x".to_vec()).await.is_err());
        assert!(run.read("../../outside/secret").await.is_err());
        assert!(run.create("/tmp/planted-by-a-name", b"x".to_vec()).await.is_err());
        // Symlinks planted in the lake: to a folder outside, to a file outside.
        std::os::unix::fs::symlink(&outside, dir.path().join("lake/run/http")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), dir.path().join("lake/run/s.jsonl")).unwrap();
        assert!(run.child("http").is_err(), "a folder linked outside is not entered");
        assert!(run.read("s.jsonl").await.is_err(), "a file linked outside is not read");
        assert!(run.create("http/x.jsonl", b"x".to_vec()).await.is_err());
        assert!(!outside.join("x.jsonl").exists());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "nothing was written outside");
        // A FIFO in the lake is not a file to read.
        let fifo = dir.path().join("lake/run/fifo.jsonl");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(run.read("fifo.jsonl").await.is_err());
    }
}
