//! Files the host reads from input it does not control (configs, catalogs, state, policies,
//! package manifests, plugins): one bounded reader for all of them. A file is opened without
//! waiting (a FIFO with no writer does not block the open), its kind and size are checked before
//! anything is read, at most one byte past its cap is ever read (a link to `/dev/zero` is
//! refused, not read without end), and the error names the file and the limit.

use anyhow::{Context, Result, anyhow};
use std::io::Read;
use std::path::Path;

/// What a file is to the host and how much of it may be read.
#[derive(Debug, Clone, Copy)]
pub struct Cap<'a> {
    /// What the file is, as errors name it: `cannot read WHAT PATH: ...` ("state", "config").
    pub what: &'a str,
    /// The most bytes the file may have.
    pub max: u64,
    /// Only a regular file (a link to one is followed): anything else (a FIFO, a device, a
    /// folder) is refused before it is read. Without it, a pipe or device is read too (an
    /// operator's `--config <(vault read ...)`), still never past `max`.
    pub regular: bool,
    /// How the limit is said when the file is past it: `it is larger than LIMIT`. By default
    /// `MAX, the most a WHAT file may be`.
    pub limit: Option<&'a str>,
    /// A FIFO is opened as any reader opens it, waiting for its writer (a plugin written into a
    /// named pipe as it is loaded: the load runs on a thread of its own), not read as empty.
    pub wait_for_writer: bool,
}

impl<'a> Cap<'a> {
    pub fn new(what: &'a str, max: u64) -> Self {
        Cap { what, max, regular: false, limit: None, wait_for_writer: false }
    }

    /// A FIFO waits for its writer.
    pub fn waiting(self) -> Self {
        Cap { wait_for_writer: true, ..self }
    }

    /// Only a regular file.
    pub fn regular(self) -> Self {
        Cap { regular: true, ..self }
    }

    /// The limit as the error says it.
    pub fn said(self, limit: &'a str) -> Self {
        Cap { limit: Some(limit), ..self }
    }

    fn too_large(&self, path: &Path) -> anyhow::Error {
        let limit = match self.limit {
            Some(limit) => limit.to_string(),
            None => format!("{}, the most a {} file may be", size(self.max), self.what),
        };
        anyhow!("cannot read {} {}: it is larger than {limit}", self.what, path.display())
    }
}

/// `64 MiB`, `16 KiB`, `1000 bytes`.
pub fn size(bytes: u64) -> String {
    match bytes {
        0 => "0 bytes".to_string(),
        b if b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
}

/// The bytes of `path`, at most `cap.max` of them: see the module doc.
pub fn read_capped(path: &Path, cap: Cap) -> Result<Vec<u8>> {
    let (file, known) = open(path, &cap)?;
    // What the size says is reserved, never more than the cap (a file may shrink or grow as it is read).
    let mut bytes = Vec::with_capacity(known.unwrap_or(0).min(cap.max) as usize);
    file.take(cap.max.saturating_add(1))
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {} {}", cap.what, path.display()))?;
    if bytes.len() as u64 > cap.max {
        return Err(cap.too_large(path));
    }
    Ok(bytes)
}

/// The sha256 (hex) of `path`, read a piece at a time under the same checks as
/// [`read_capped`]: nothing is held but the piece, and no more than `cap.max` bytes are read.
pub fn sha256_capped(path: &Path, cap: Cap) -> Result<String> {
    use sha2::Digest;
    let (file, _) = open(path, &cap)?;
    let mut file = file.take(cap.max.saturating_add(1));
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).with_context(|| format!("cannot read {} {}", cap.what, path.display()))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > cap.max {
            return Err(cap.too_large(path));
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The file opened for a blocking read once its kind and size pass; its size when it is a
/// regular file.
fn open(path: &Path, cap: &Cap) -> Result<(std::fs::File, Option<u64>)> {
    let cannot = || format!("cannot read {} {}", cap.what, path.display());
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    // Opening a FIFO for reading waits for a writer; this open does not, unless asked to.
    #[cfg(unix)]
    if !cap.wait_for_writer {
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    }
    let file = options.open(path).with_context(cannot)?;
    let meta = file.metadata().with_context(cannot)?;
    if meta.is_file() {
        if meta.len() > cap.max {
            return Err(cap.too_large(path));
        }
    } else if cap.regular {
        return Err(anyhow!("{}: it is not a regular file ({})", cannot(), kind(&meta)));
    } else if meta.is_dir() {
        return Err(anyhow!("{}: it is a directory", cannot()));
    }
    // Reads block again (a pipe the operator gave is read as it fills). A FIFO with no writer
    // reads as empty.
    #[cfg(unix)]
    if !meta.is_file() {
        use std::os::fd::AsRawFd;
        let fd = file.as_raw_fd();
        // SAFETY: fcntl on a descriptor this function owns, with flags it read from it.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error()).with_context(cannot);
        }
    }
    Ok((file, meta.is_file().then_some(meta.len())))
}

fn kind(meta: &std::fs::Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    if meta.is_dir() { "a directory" } else { "not a file" }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A sparse file of 1 GiB past a 16 MiB cap is refused by its size, at once: nothing of
    /// it is read (reading it would take seconds and a GiB).
    #[test]
    fn a_file_past_its_cap_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.json");
        std::fs::File::create(&path).unwrap().set_len(1 << 30).unwrap();
        let started = Instant::now();
        let error = read_capped(&path, Cap::new("config", 16 << 20)).unwrap_err().to_string();
        assert!(started.elapsed() < Duration::from_millis(100), "{:?}", started.elapsed());
        assert_eq!(
            error,
            format!("cannot read config {}: it is larger than 16 MiB, the most a config file may be", path.display())
        );
        let error = sha256_capped(&path, Cap::new("plugin", 1 << 20)).unwrap_err().to_string();
        assert!(error.contains("larger than 1 MiB"), "{error}");
        // At the cap exactly, it is read.
        std::fs::write(&path, b"12345").unwrap();
        assert_eq!(read_capped(&path, Cap::new("config", 5)).unwrap(), b"12345");
        let said = Cap::new("plugin", 4).said("the limit of 4 bytes for a plugin (--max-plugin-mb)");
        let error = read_capped(&path, said).unwrap_err().to_string();
        assert!(error.ends_with("it is larger than the limit of 4 bytes for a plugin (--max-plugin-mb)"), "{error}");
    }

    /// A file whose size the kind does not tell (`/dev/zero`) is read to one byte past its cap
    /// and refused, never without end; where a regular file is required it is not read at all.
    #[cfg(unix)]
    #[test]
    fn a_device_is_read_no_further_than_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("state.json");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let error = read_capped(&link, Cap::new("state", 1 << 20)).unwrap_err().to_string();
        assert!(error.contains("larger than 1 MiB, the most a state file may be"), "{error}");
        let error = sha256_capped(&link, Cap::new("plugin", 1 << 20)).unwrap_err().to_string();
        assert!(error.contains("larger than 1 MiB"), "{error}");
        let error = read_capped(&link, Cap::new("policy", 1 << 20).regular()).unwrap_err().to_string();
        assert!(error.ends_with("it is not a regular file (a character device)"), "{error}");
        let error = read_capped(dir.path(), Cap::new("catalog", 1 << 20)).unwrap_err().to_string();
        assert!(error.ends_with("it is a directory"), "{error}");
    }

    /// A FIFO nobody writes to used to block the host in `open` for ever: where a regular file
    /// is required it is refused, elsewhere it reads as empty, at once.
    #[cfg(unix)]
    #[test]
    fn a_fifo_with_no_writer_does_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("config.json");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: mkfifo with a valid path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let started = Instant::now();
        let error = read_capped(&fifo, Cap::new("package manifest", 1 << 20).regular()).unwrap_err().to_string();
        assert!(error.ends_with("it is not a regular file (a FIFO)"), "{error}");
        assert_eq!(read_capped(&fifo, Cap::new("config", 1 << 20)).unwrap(), b"");
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        // Where the caller waits for the writer (a plugin written into a pipe as it is loaded),
        // the open waits for it and the bytes it writes are read, however late it comes.
        let writer = {
            let fifo = fifo.clone();
            std::thread::spawn(move || std::fs::write(fifo, b"written late"))
        };
        assert_eq!(read_capped(&fifo, Cap::new("plugin", 1 << 20).waiting()).unwrap(), b"written late");
        writer.join().unwrap().unwrap();
    }

    /// A pipe with a writer is read as it fills (the open does not wait, the reads do).
    #[cfg(unix)]
    #[test]
    fn a_pipe_is_read_to_its_end() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "printf '{\"a\":'; sleep 0.2; printf '1}'"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::os::fd::AsRawFd;
        let fd = child.stdout.as_ref().unwrap().as_raw_fd();
        let path = std::path::PathBuf::from(format!("/proc/self/fd/{fd}"));
        assert_eq!(read_capped(&path, Cap::new("config", 1 << 20)).unwrap(), br#"{"a":1}"#);
        child.wait().unwrap();
    }
}
