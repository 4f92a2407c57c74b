//! Compiled components on disk. A `.cwasm` is native code that runs with the host's privileges,
//! so the host runs only entries it can show it wrote for exactly that plugin: beside each entry
//! is its MAC (`.mac`), a keyed BLAKE3 under a key only this user can read of the plugin's sha256
//! and the compiled bytes; an entry without a valid MAC (planted, copied from elsewhere, damaged)
//! is thrown away and the plugin compiled again. The directory must be the user's own and
//! writable by nobody else. Entries are written atomically, so a crash never leaves half a file.
//!
//! Loading maps the entry instead of reading it: the MAC is checked over the mapping and
//! wasmtime maps the same open file (no copy of the code; pages come from the page cache as they
//! are run), which took a 5 MiB entry from 12 ms to a few. The file checked is the file loaded:
//! it is opened once and wasmtime opens it again through `/proc/self/fd`, so a rename in
//! between changes nothing; writing into the entry in place takes this user's own rights. An
//! entry once checked is remembered as checked while its stamp stays as it was ([`Memo`]).

use anyhow::{Context, Result, bail};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;

/// Bytes of the MAC (and of the key).
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

    /// The compiled plugin, when `file` holds an entry this cache wrote for `sha256`. Its MAC is
    /// checked over all its bytes (12 ms for CPython's 35 MiB, half of a warm start), or, for an
    /// entry checked before and not changed since, remembered (see [`Memo::Checked`]).
    pub fn load(&self, engine: &wasmtime::Engine, file: &Path, sha256: &str) -> Result<Option<Component>> {
        if !file.exists() {
            return Ok(None);
        }
        let key = self.key()?;
        let genuine = |len: usize, compiled: &mut dyn Iterator<Item = &[u8]>| {
            let mac = read_small(&mac_file(file), MAC_BYTES).ok().flatten().unwrap_or_default();
            // blake3's Hash compares in constant time.
            <[u8; MAC_BYTES]>::try_from(mac.as_slice()).is_ok_and(|m| mac_of_parts(&key, sha256, len, compiled) == m)
        };
        let checked_before = |stamp: &FileStamp| self.remembered(&key, Memo::Checked, stamp).as_deref() == Some(sha256);
        let checked_now = |stamp: &FileStamp| self.remember(&key, Memo::Checked, stamp, sha256);
        if let Some(component) = load_verified(engine, file, genuine, checked_before, checked_now)? {
            return Ok(Some(component));
        }
        // Not ours, or damaged: never run, rebuilt.
        let _ = std::fs::remove_file(file);
        let _ = std::fs::remove_file(mac_file(file));
        Ok(None)
    }

    /// Stores `compiled` (the code of the plugin with `sha256`) as `file`, with its MAC.
    pub fn store(&self, file: &Path, sha256: &str, compiled: &[u8]) -> Result<()> {
        let key = self.key()?;
        let mac = mac_of(&key, sha256, compiled);
        // Unique per writer, in this process and others; the renames make each file appear whole
        // (a reader between the two sees a MAC that does not match, and compiles again).
        static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = file.with_extension(format!("tmp{}-{n}", std::process::id()));
        let tmp_mac = file.with_extension(format!("mac-tmp{}-{n}", std::process::id()));
        write_private(&tmp_mac, mac.as_bytes())?;
        let written = write_private_file(&tmp, compiled)?;
        // Written back, so its pages are clean and can leave the page cache (and the entry is
        // on disk before its name is).
        written.sync_data().with_context(|| format!("cannot write {}", file.display()))?;
        leave_page_cache(&written);
        std::fs::rename(&tmp_mac, mac_file(file)).with_context(|| format!("cannot write {}", file.display()))?;
        std::fs::rename(&tmp, file).with_context(|| format!("cannot write {}", file.display()))?;
        Ok(())
    }

    /// The cache's key, made on first use; the directory is created private, and refused when
    /// it is not this user's or others can write to it.
    fn key(&self) -> Result<Vec<u8>> {
        create_private_dir(&self.dir)?;
        check_private(&self.dir, "cache directory", 0o022)?;
        let path = self.dir.join(KEY_FILE);
        // Its kind and size are checked before it is read: a key that is a link to /dev/zero
        // (or a FIFO, or a huge file) used to be read without end.
        match read_small(&path, MAC_BYTES) {
            Ok(Some(key)) if key.len() == MAC_BYTES => {
                check_private(&path, "cache key", 0o077)?;
                Ok(key)
            }
            // A damaged key (or anything but a regular file of its size) is replaced; every
            // entry it signed no longer verifies and is rebuilt.
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

/// What `stat` says of a plugin file: its identity (device, inode) and everything that changes
/// when it is written (size, modification and change times: the change time cannot be set back
/// by its owner, and moves at every write and every `touch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    device: u64,
    inode: u64,
    size: u64,
    modified: (i64, i64),
    changed: (i64, i64),
}

impl FileStamp {
    /// The stamp of the file at `path` (`None` where the platform has no inode numbers).
    pub fn of(path: &Path) -> Option<FileStamp> {
        #[cfg(unix)]
        {
            std::fs::metadata(path).ok().map(|m| FileStamp::of_metadata(&m))
        }
        #[cfg(not(unix))]
        {
            let _ = path;
            None
        }
    }

    /// The stamp of an open file.
    #[cfg(unix)]
    fn of_file(file: &std::fs::File) -> Option<FileStamp> {
        file.metadata().ok().map(|m| FileStamp::of_metadata(&m))
    }

    #[cfg(unix)]
    fn of_metadata(m: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            device: m.dev(),
            inode: m.ino(),
            size: m.size(),
            modified: (m.mtime(), m.mtime_nsec()),
            changed: (m.ctime(), m.ctime_nsec()),
        }
    }

    /// Whether the file last changed [`SETTLED`] ago or longer. The kernel stamps a write with
    /// a coarse clock (a tick of up to 10 ms), so a write within the tick of an earlier one can
    /// leave the stamp as it was; a file that has not changed for longer than that is only
    /// changed again with a later stamp.
    fn settled(&self) -> bool {
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let (seconds, nanos) = self.changed;
        let changed = std::time::Duration::new(seconds.max(0) as u64, nanos.clamp(0, 999_999_999) as u32);
        now.saturating_sub(changed) >= SETTLED
    }

    /// The file's size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    fn text(&self) -> String {
        let FileStamp { size, modified: (ms, mn), changed: (cs, cn), .. } = self;
        format!("{size} {ms}.{mn} {cs}.{cn}")
    }
}

/// Bytes of a memo's file at most (a stamp, a sha256 and a MAC, in hex).
const MAX_MEMO_FILE: usize = 512;

/// How long a file must have stayed unchanged before a memo of it is written (see
/// [`FileStamp::settled`]).
const SETTLED: std::time::Duration = std::time::Duration::from_secs(2);

/// What the cache remembers of a file, for the file as it is (its [`FileStamp`]), under the
/// cache's key: a planted or stale memo is not believed. A memo is written only for a file that
/// was the same before and after it was read, and had settled.
#[derive(Clone, Copy)]
pub enum Memo {
    /// A plugin file's sha256: hashing an 18 MB interpreter component took 20 ms of every start.
    Sha256,
    /// A cache entry whose MAC was checked, and the plugin sha256 it was checked for: the check
    /// reads every byte of the entry (35 MiB for CPython's), 12 ms of every start.
    Checked,
}

impl Memo {
    fn prefix(self) -> &'static str {
        match self {
            Memo::Sha256 => "sha256",
            Memo::Checked => "checked",
        }
    }

    /// Each kind its own MAC domain, and other than the code's MACs.
    fn domain(self) -> &'static [u8] {
        match self {
            Memo::Sha256 => b"sluice remembered plugin sha256\0",
            Memo::Checked => b"sluice checked cache entry\0",
        }
    }
}

impl ComponentCache {
    /// The sha256 this cache remembered for the plugin file with `stamp` (see [`Memo::Sha256`]).
    pub fn remembered_sha256(&self, stamp: &FileStamp) -> Option<String> {
        self.remembered(&self.key().ok()?, Memo::Sha256, stamp)
    }

    /// Remembers `sha256` for the plugin file with `stamp`, once it has settled.
    pub fn remember_sha256(&self, stamp: &FileStamp, sha256: &str) {
        if let Ok(key) = self.key() {
            self.remember(&key, Memo::Sha256, stamp, sha256)
        }
    }

    /// The sha256 remembered in `memo` for the file with `stamp`, under the cache's `key`.
    fn remembered(&self, key: &[u8], memo: Memo, stamp: &FileStamp) -> Option<String> {
        let bytes = read_small(&self.memo_file(memo, stamp), MAX_MEMO_FILE).ok().flatten()?;
        let text = String::from_utf8(bytes).ok()?;
        let (remembered, mac) = text.rsplit_once(' ')?;
        let (stamp_text, sha256) = remembered.rsplit_once(' ')?;
        // blake3's Hash compares in constant time.
        let genuine = blake3::Hash::from_hex(mac).ok()? == memo_mac(key, memo, remembered);
        (genuine && stamp_text == stamp.text() && sha256.len() == 64).then(|| sha256.to_string())
    }

    /// Remembers `sha256` in `memo` for the file with `stamp` if it has settled (best effort: a
    /// cache that cannot be written does the work again next time).
    fn remember(&self, key: &[u8], memo: Memo, stamp: &FileStamp, sha256: &str) {
        if stamp.settled() {
            self.write_memo(key, memo, stamp, sha256);
        }
    }

    fn write_memo(&self, key: &[u8], memo: Memo, stamp: &FileStamp, sha256: &str) {
        let remembered = format!("{} {sha256}", stamp.text());
        let text = format!("{remembered} {}", memo_mac(key, memo, &remembered).to_hex());
        write_memo_file(&self.memo_file(memo, stamp), &text);
    }

    fn memo_file(&self, memo: Memo, stamp: &FileStamp) -> PathBuf {
        self.dir.join(format!("{}-{:x}-{:x}", memo.prefix(), stamp.device, stamp.inode))
    }
}

/// The largest spec a [`SpecMemo`] holds; a larger one is asked of the plugin every time.
const MAX_SPEC_MEMO: usize = 1 << 20;

/// A plugin's spec as the cache remembered it, under the cache's key, by the plugin's sha256: a
/// spec depends on nothing but the plugin (the call takes no config), and asking for it cost
/// every run's start a call in the first instance, 1.5-2 ms for an interpreter (the Airbyte
/// platform too keeps the spec of an image version). With it, the config is checked against the
/// spec while the first instance is made. A memo is read only when its MAC holds: a planted or
/// damaged one is not believed (secrets are masked by what the spec marks secret), and a spec
/// past [`MAX_SPEC_MEMO`] is not kept.
#[derive(Clone)]
pub struct SpecMemo {
    file: PathBuf,
    key: [u8; MAC_BYTES],
    sha256: String,
}

impl ComponentCache {
    /// Where the spec of the plugin with `sha256` is remembered (`None` when the cache has no
    /// usable key: nothing is remembered then).
    pub fn spec_memo(&self, sha256: &str) -> Option<SpecMemo> {
        let key = self.key().ok()?.try_into().ok()?;
        let file = self.dir.join(format!("spec-{sha256}"));
        Some(SpecMemo { file, key, sha256: sha256.to_string() })
    }
}

impl SpecMemo {
    /// The spec remembered, when there is one and its MAC holds.
    pub fn read(&self) -> Option<String> {
        let bytes = read_small(&self.file, 2 * MAC_BYTES + 1 + MAX_SPEC_MEMO).ok().flatten()?;
        let (mac, spec) = (bytes.get(..2 * MAC_BYTES)?, bytes.get(2 * MAC_BYTES + 1..)?);
        let mac = blake3::Hash::from_hex(mac).ok()?;
        let spec = String::from_utf8(spec.to_vec()).ok()?;
        // blake3's Hash compares in constant time.
        (mac == self.mac(&spec)).then_some(spec)
    }

    /// Remembers `spec` (best effort: a cache that cannot be written asks again next time).
    pub fn write(&self, spec: &str) {
        if spec.len() > MAX_SPEC_MEMO {
            return;
        }
        write_memo_file(&self.file, &format!("{}\n{spec}", self.mac(spec).to_hex()));
    }

    fn mac(&self, spec: &str) -> blake3::Hash {
        let mut mac = blake3::Hasher::new_keyed(&self.key);
        mac.update(b"sluice remembered spec\0");
        mac.update(self.sha256.as_bytes());
        mac.update(spec.as_bytes());
        mac.finalize()
    }
}

/// Writes a memo as `file`, whole or not at all (best effort: a cache that cannot be written does
/// the work again next time). The temporary name is unique per writer: threads of one process
/// write memos at once too.
fn write_memo_file(file: &Path, text: &str) {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = file.with_extension(format!("tmp{}-{n}", std::process::id()));
    if write_private(&tmp, text.as_bytes()).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

/// The MAC of a memo.
fn memo_mac(key: &[u8], memo: Memo, remembered: &str) -> blake3::Hash {
    let key: &[u8; MAC_BYTES] = key.try_into().expect("the key is checked to be MAC_BYTES long");
    let mut mac = blake3::Hasher::new_keyed(key);
    mac.update(memo.domain());
    mac.update(remembered.as_bytes());
    mac.finalize()
}

fn mac_of(key: &[u8], sha256: &str, compiled: &[u8]) -> blake3::Hash {
    mac_of_parts(key, sha256, compiled.len(), &mut std::iter::once(compiled))
}

/// The MAC of `len` bytes of code given in parts, in order.
fn mac_of_parts(key: &[u8], sha256: &str, len: usize, compiled: &mut dyn Iterator<Item = &[u8]>) -> blake3::Hash {
    let key: &[u8; MAC_BYTES] = key.try_into().expect("the key is checked to be MAC_BYTES long");
    let mut mac = blake3::Hasher::new_keyed(key);
    mac.update(sha256.as_bytes());
    // The length first: the sha256 and the code cannot be shifted into each other.
    mac.update(&(len as u64).to_le_bytes());
    for part in compiled {
        mac.update(part);
    }
    mac.finalize()
}

/// The bytes of `path` when it is a regular file (not followed if it is a link) of at most `max`
/// bytes; `None` when it is anything else. Its kind and size are checked on the open file
/// before anything is read, and never more than `max + 1` bytes are read (a file growing
/// meanwhile is refused too); opening does not wait (a FIFO does not block it).
fn read_small(path: &Path, max: usize) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = match options.open(path) {
        Ok(file) => file,
        // A link (O_NOFOLLOW refuses it), or a socket: not a file of ours.
        #[cfg(unix)]
        Err(e) if matches!(e.raw_os_error(), Some(libc::ELOOP) | Some(libc::ENXIO)) => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    if !meta.is_file() || meta.len() > max as u64 {
        return Ok(None);
    }
    // As long as the file says it is (a file growing meanwhile is refused below).
    let mut bytes = Vec::with_capacity(meta.len() as usize + 1);
    file.take(max as u64 + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() <= max).then_some(bytes))
}

/// The MAC of the entry `file`, beside it.
fn mac_file(file: &Path) -> PathBuf {
    file.with_extension("mac")
}

/// The component in `file` when `genuine` accepts its bytes: the file mapped, checked, and
/// loaded by wasmtime from the same open file. An entry `checked_before` as it is now is not
/// read again; one that stayed the same while it was checked is told to `checked_now`.
#[cfg(target_os = "linux")]
fn load_verified(
    engine: &wasmtime::Engine,
    file: &Path,
    genuine: impl FnOnce(usize, &mut dyn Iterator<Item = &[u8]>) -> bool,
    checked_before: impl FnOnce(&FileStamp) -> bool,
    checked_now: impl FnOnce(&FileStamp),
) -> Result<Option<Component>> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    // Not a link, and opening does not wait (a FIFO); only a regular file is mapped.
    let opened = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(file);
    let Ok(opened) = opened else { return Ok(None) };
    if !opened.metadata().is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let stamp = FileStamp::of_file(&opened);
    if !stamp.as_ref().is_some_and(checked_before) {
        let Ok(mapped) = Mapped::of(&opened) else { return Ok(None) };
        if !genuine(mapped.len, &mut mapped.parts()) {
            return Ok(None);
        }
        drop(mapped);
        if let Some(stamp) = stamp.filter(|stamp| FileStamp::of_file(&opened).as_ref() == Some(stamp)) {
            checked_now(&stamp);
            // Remembered as checked once settled, so no run reads all of it again: from here
            // the page cache holds what runs touch. (Before, each run checks it again, and
            // would read it from disk each time if it left.)
            if stamp.settled() {
                leave_page_cache(&opened);
            }
        }
    }
    // SAFETY: the MAC shows this cache wrote these bytes for this plugin, from
    // `precompile_component` of an engine with the same compatibility hash (in the name), now or
    // when the file was as it is still; the path names the very file checked, held open.
    let component = unsafe { Component::deserialize_file(engine, format!("/proc/self/fd/{}", opened.as_raw_fd())) };
    Ok(component.ok())
}

/// Elsewhere: read, checked and loaded from the same bytes in memory.
#[cfg(not(target_os = "linux"))]
fn load_verified(
    engine: &wasmtime::Engine,
    file: &Path,
    genuine: impl FnOnce(usize, &mut dyn Iterator<Item = &[u8]>) -> bool,
    _checked_before: impl FnOnce(&FileStamp) -> bool,
    _checked_now: impl FnOnce(&FileStamp),
) -> Result<Option<Component>> {
    if !std::fs::symlink_metadata(file).is_ok_and(|m| m.is_file()) {
        return Ok(None);
    }
    let Ok(bytes) = std::fs::read(file) else { return Ok(None) };
    if !genuine(bytes.len(), &mut std::iter::once(&bytes[..])) {
        return Ok(None);
    }
    // SAFETY: as above, for the bytes checked.
    Ok(unsafe { Component::deserialize(engine, &bytes) }.ok())
}

/// A file mapped read-only, for the length of a check.
#[cfg(target_os = "linux")]
struct Mapped {
    ptr: *mut libc::c_void,
    len: usize,
}

#[cfg(target_os = "linux")]
impl Mapped {
    fn of(file: &std::fs::File) -> std::io::Result<Mapped> {
        use std::os::fd::AsRawFd;
        let len = usize::try_from(file.metadata()?.len()).map_err(std::io::Error::other)?;
        if len == 0 {
            return Err(std::io::Error::other("an empty entry"));
        }
        // SAFETY: a fresh private read-only mapping of an open file; unmapped on drop.
        let ptr =
            unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_PRIVATE, file.as_raw_fd(), 0) };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapped { ptr, len })
    }

    /// The bytes a MiB at a time, each part's pages given back once the next is asked for: the
    /// check reads a 35 MiB entry (CPython's) without holding it resident, which was the
    /// process's peak RSS before a run had begun.
    fn parts(&self) -> impl Iterator<Item = &[u8]> + '_ {
        const PART: usize = 1 << 20;
        let mut previous: Option<usize> = None;
        (0..self.len.div_ceil(PART)).map(move |i| {
            if let Some(start) = previous.replace(i * PART) {
                // SAFETY: a page-aligned range inside this private read-only file mapping, whose
                // part was hashed already: dropping its pages loses nothing (a later read
                // would map them again from the page cache).
                unsafe { libc::madvise(self.ptr.add(start), PART, libc::MADV_DONTNEED) };
            }
            let end = ((i + 1) * PART).min(self.len);
            // SAFETY: `ptr` maps `len` readable bytes until `self` is dropped.
            unsafe { std::slice::from_raw_parts((self.ptr as *const u8).add(i * PART), end - i * PART) }
        })
    }
}

#[cfg(target_os = "linux")]
impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `of`, unmapped once.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

fn create_private_dir(dir: &Path) -> Result<()> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).with_context(|| format!("cannot create cache directory {}", dir.display()))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    write_private_file(path, bytes).map(drop)
}

fn write_private_file(path: &Path, bytes: &[u8]) -> Result<std::fs::File> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(bytes).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(file)
}

/// Asks the kernel to drop `file`'s clean pages from the page cache (pages another process has
/// mapped stay). Every run maps a compiled entry whole, and the kernel maps into it the pages
/// around each one a run touches that are in the page cache (fault-around, 64 KiB): with all of
/// CPython's 35 MiB entry cached, as writing or checking it leaves it, a Python run under
/// latency held 11 MiB more of it (72 MiB of RSS against 61) for code and data it never used.
/// Dropped, the cache holds what runs touch (and the kernel's read-around of it).
fn leave_page_cache(file: &std::fs::File) {
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: advice about an open file's cached pages; its contents do not change.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
    #[cfg(not(target_os = "linux"))]
    let _ = file;
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
    use std::io::Write;

    /// A stamp as it would be had the file not changed for a minute.
    #[cfg(unix)]
    fn settled(stamp: &FileStamp) -> FileStamp {
        let mut settled = stamp.clone();
        settled.changed.0 -= 60;
        settled
    }

    /// A remembered sha256 holds while the file is as it was, and is not believed once the file
    /// changed or the memo was written by anyone but this cache; a file that changed a moment
    /// ago (within the kernel's coarse clock tick of a write to come) is not remembered.
    #[cfg(unix)]
    #[test]
    fn a_remembered_sha256_holds_only_for_the_file_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(dir.path().join("cache"));
        let plugin = dir.path().join("plugin.wasm");
        std::fs::write(&plugin, b"first").unwrap();
        let fresh = FileStamp::of(&plugin).unwrap();
        assert!(!fresh.settled() && settled(&fresh).settled());
        let sha = "a".repeat(64);
        cache.remember_sha256(&fresh, &sha);
        assert_eq!(cache.remembered_sha256(&fresh), None, "a file written a moment ago is not remembered");
        let stamp = settled(&fresh);
        assert_eq!(cache.remembered_sha256(&stamp), None, "nothing remembered yet");
        cache.remember_sha256(&stamp, &sha);
        assert_eq!(cache.remembered_sha256(&stamp), Some(sha.clone()));
        // Same size, written again: the change time moves.
        std::thread::sleep(std::time::Duration::from_millis(10));
        std::fs::write(&plugin, b"other").unwrap();
        let changed = settled(&FileStamp::of(&plugin).unwrap());
        assert_ne!(changed, stamp);
        assert_eq!(cache.remembered_sha256(&changed), None, "a file written since is hashed again");
        // A memo planted with another sha256 (its MAC no longer matches) is not believed.
        cache.remember_sha256(&changed, &sha);
        let memo = cache.memo_file(Memo::Sha256, &changed);
        let planted = std::fs::read_to_string(&memo).unwrap().replace(&sha, &"b".repeat(64));
        std::fs::write(&memo, planted).unwrap();
        assert_eq!(cache.remembered_sha256(&changed), None);
        // Nor is a memo of another kind: a checked entry's memo does not name a plugin's sha256.
        cache.write_memo(&cache.key().unwrap(), Memo::Checked, &changed, &sha);
        let checked = std::fs::read(cache.memo_file(Memo::Checked, &changed)).unwrap();
        std::fs::write(&memo, checked).unwrap();
        assert_eq!(cache.remembered_sha256(&changed), None);
    }

    /// A spec is remembered for its plugin's sha256 only, under the cache's key: edited, moved
    /// to another plugin's name, or signed by another cache's key, it is not believed; one past
    /// the size bound is not kept.
    #[test]
    fn a_remembered_spec_holds_only_as_written_for_its_plugin() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(dir.path().join("cache"));
        let (sha, other) = ("a".repeat(64), "b".repeat(64));
        let memo = cache.spec_memo(&sha).unwrap();
        assert_eq!(memo.read(), None, "nothing remembered yet");
        let spec = r#"{"type":"object","properties":{"token":{"type":"string","airbyte_secret":true}}}"#;
        memo.write(spec);
        assert_eq!(memo.read().as_deref(), Some(spec));
        assert_eq!(cache.spec_memo(&other).unwrap().read(), None, "another plugin has none");
        // Copied under another plugin's name: its MAC names the first plugin.
        std::fs::copy(&memo.file, &cache.spec_memo(&other).unwrap().file).unwrap();
        assert_eq!(cache.spec_memo(&other).unwrap().read(), None);
        // Edited in place.
        let text = std::fs::read_to_string(&memo.file).unwrap();
        std::fs::write(&memo.file, text.replace("true", "false")).unwrap();
        assert_eq!(memo.read(), None);
        // Written under another cache's key.
        let elsewhere = ComponentCache::new(dir.path().join("elsewhere")).spec_memo(&sha).unwrap();
        elsewhere.write(spec);
        std::fs::copy(&elsewhere.file, &memo.file).unwrap();
        assert_eq!(memo.read(), None);
        // Too large to keep: the spec is asked for every time.
        std::fs::remove_file(&memo.file).unwrap();
        memo.write(&format!("{{\"description\":\"{}\"}}", "x".repeat(MAX_SPEC_MEMO)));
        assert!(!memo.file.exists());
    }

    /// An entry whose MAC was checked is not read again while it stays as it was, for the
    /// plugin it was checked for; written since, or asked for another plugin, it is checked
    /// again (and, its MAC not matching, thrown away). A fresh entry is not remembered.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_checked_entry_is_checked_again_once_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = ComponentCache::new(dir.path().join("cache"));
        let engine = wasmtime::Engine::default();
        // The empty component, in the binary format (no text parser in this build).
        let compiled = engine.precompile_component(b"\0asm\x0d\0\x01\0").unwrap();
        let sha = "c".repeat(64);
        let entry = cache.file_for(&engine, &sha);
        cache.store(&entry, &sha, &compiled).unwrap();
        assert!(cache.load(&engine, &entry, &sha).unwrap().is_some());
        let opened = std::fs::File::open(&entry).unwrap();
        let stamp = FileStamp::of_file(&opened).unwrap();
        assert!(!cache.memo_file(Memo::Checked, &stamp).exists(), "an entry written a moment ago is not remembered");
        // Remembered as checked (as a settled entry would be), its MAC is not read again: a
        // damaged MAC file goes unnoticed while the entry is as it was.
        cache.write_memo(&cache.key().unwrap(), Memo::Checked, &stamp, &sha);
        std::fs::write(mac_file(&entry), [0u8; MAC_BYTES]).unwrap();
        assert!(cache.load(&engine, &entry, &sha).unwrap().is_some(), "the memo holds");
        // Asked for as another plugin's entry, it is checked (and its MAC fails).
        let other = "d".repeat(64);
        assert!(cache.load(&engine, &entry, &other).unwrap().is_none());
        assert!(!entry.exists(), "an entry whose MAC does not verify is deleted");
        // Written again in place, same bytes: the stamp moves and the entry is checked again.
        cache.store(&entry, &sha, &compiled).unwrap();
        let stamp = FileStamp::of_file(&std::fs::File::open(&entry).unwrap()).unwrap();
        cache.write_memo(&cache.key().unwrap(), Memo::Checked, &stamp, &sha);
        std::thread::sleep(std::time::Duration::from_millis(10));
        let mut bytes = compiled.clone();
        bytes[compiled.len() / 2] ^= 1;
        std::fs::OpenOptions::new().write(true).open(&entry).unwrap().write_all(&bytes).unwrap();
        assert!(cache.load(&engine, &entry, &sha).unwrap().is_none(), "the changed entry is checked and refused");
    }

    /// A stored entry is on disk and out of the page cache: a run maps it and faults in what it
    /// uses, instead of finding all of it cached as writing it left it (see `leave_page_cache`).
    #[cfg(target_os = "linux")]
    #[test]
    fn a_stored_entry_leaves_the_page_cache() {
        use std::os::fd::AsRawFd;
        // On disk (tmpfs pages have nowhere to go).
        let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../target");
        let dir = tempfile::tempdir_in(target).or_else(|_| tempfile::tempdir()).unwrap();
        let mut fs = std::mem::MaybeUninit::<libc::statfs>::uninit();
        let path = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path and room for the answer.
        assert_eq!(unsafe { libc::statfs(path.as_ptr(), fs.as_mut_ptr()) }, 0);
        // SAFETY: filled by the successful call above.
        if unsafe { fs.assume_init() }.f_type == libc::TMPFS_MAGIC {
            return;
        }
        let cache = ComponentCache::new(dir.path().join("cache"));
        let entry = dir.path().join("cache").join("entry.cwasm");
        let bytes: Vec<u8> = (0..4u32 << 20).map(|i| i as u8).collect();
        cache.store(&entry, &"d".repeat(64), &bytes).unwrap();
        let file = std::fs::File::open(&entry).unwrap();
        let len = bytes.len();
        // SAFETY: a fresh read-only mapping of the open file, unmapped below; mincore reads
        // which of its pages are in the page cache without touching them.
        let resident = unsafe {
            let ptr = libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0);
            assert_ne!(ptr, libc::MAP_FAILED);
            let mut pages = vec![0u8; len.div_ceil(4096)];
            assert_eq!(libc::mincore(ptr, len, pages.as_mut_ptr()), 0);
            libc::munmap(ptr, len);
            pages.iter().filter(|p| *p & 1 == 1).count()
        };
        assert_eq!(resident, 0, "pages of the entry still cached");
        assert_eq!(std::fs::read(&entry).unwrap(), bytes);
    }

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

    /// A key that is a link to /dev/zero hung the host reading it; a FIFO, a huge file or a
    /// directory in its place is refused before it is read, and replaced by a fresh key.
    #[cfg(unix)]
    #[test]
    fn a_key_that_is_not_a_small_regular_file_is_not_read() {
        let dir = tempfile::tempdir().unwrap();
        let cache_dir = dir.path().join("cache");
        let cache = ComponentCache::new(cache_dir.clone());
        create_private_dir(&cache_dir).unwrap();
        let key = cache_dir.join(KEY_FILE);
        std::os::unix::fs::symlink("/dev/zero", &key).unwrap();
        let fresh = cache.key().unwrap();
        assert_eq!(fresh.len(), MAC_BYTES);
        assert!(std::fs::symlink_metadata(&key).unwrap().is_file(), "the link was replaced by a key");
        assert_eq!(cache.key().unwrap(), fresh);
        // A FIFO would block a plain open until a writer came.
        std::fs::remove_file(&key).unwrap();
        let fifo = std::ffi::CString::new(key.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(cache.key().unwrap().len(), MAC_BYTES);
        // A file far past the key's size is not read whole.
        std::fs::remove_file(&key).unwrap();
        write_private(&key, &vec![7u8; 1 << 20]).unwrap();
        assert_eq!(read_small(&key, MAC_BYTES).unwrap(), None);
        assert_ne!(cache.key().unwrap(), vec![7u8; MAC_BYTES]);
        // A MAC that is a link to /dev/zero does not hang a load either.
        let entry = cache_dir.join("0-0.cwasm");
        std::fs::write(&entry, b"not code").unwrap();
        std::os::unix::fs::symlink("/dev/zero", mac_file(&entry)).unwrap();
        let engine = wasmtime::Engine::default();
        assert!(cache.load(&engine, &entry, "0").unwrap().is_none());
        assert!(!entry.exists(), "an entry whose MAC does not verify is deleted");
    }
}
