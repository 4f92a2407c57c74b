//! Bounds on compiling a plugin, which happens before any instance limit applies: a size cap on
//! the file, limits on functions checked by parsing before anything is compiled, and, when the
//! host has a compile helper (the CLI is its own), compiling in a child process under a memory
//! rlimit and a timeout, so a component built to make Cranelift work for minutes or gigabytes
//! costs at most what the operator allows.

use anyhow::{Result, anyhow, bail};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The first argument that makes the `host` binary (or an embedder's, see
/// [`compile_child_main`]) a compile helper instead of the CLI.
pub const COMPILE_CHILD_ARG: &str = "__sluice-compile";

/// What a compile helper writes before the compiled code, so a program that is not one (an
/// embedder's binary whose `main` does not call [`compile_child_main`]) is told apart.
const HELPER_MAGIC: &[u8] = b"sluice-compiled\n";

/// The helper's exit status when the component itself cannot be compiled (it is invalid), as
/// against the helper failing for another reason.
const EXIT_INVALID: i32 = 3;

/// Most bytes of the helper's stderr kept (the rest is read and dropped, so it never blocks).
const MAX_HELPER_MESSAGE: u64 = 64 << 10;

/// How long a failed compile is remembered (by the plugin's sha256 and the limits it failed
/// under), so every run does not pay for a compile bomb again; and how many are.
const FAILED_FOR: Duration = Duration::from_secs(600);
const MAX_FAILED: usize = 256;

/// The first line of a failed compile's marker file.
const MARKER_HEADER: &str = "sluice failed compile 1";

/// Why a plugin was not compiled.
#[derive(Debug, Clone, PartialEq)]
pub enum CompileError {
    /// The component is not valid WebAssembly (wasmtime refused it).
    Invalid(String),
    /// Compiling took longer than the limit.
    TimedOut(String),
    /// Compiling needed more memory than the limit.
    OutOfMemory(String),
    /// The compile helper could not be started, crashed, or said something that is not code.
    Helper(String),
}

impl std::fmt::Display for CompileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CompileError::Invalid(m) => write!(f, "it is not a valid WebAssembly component: {m}"),
            CompileError::TimedOut(m) | CompileError::OutOfMemory(m) | CompileError::Helper(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for CompileError {}

/// Compiles that failed, by plugin sha256 and the limits they failed under: when, and why.
type Failed = std::collections::HashMap<(String, Duration, u64), (std::time::Instant, CompileError)>;
static FAILED: std::sync::Mutex<Option<Failed>> = std::sync::Mutex::new(None);

/// Set by [`compile_child_main`]'s callers that are compile helpers: this executable can compile
/// for the host (the `host` binary sets it first thing in `main`).
static CURRENT_EXE_IS_HELPER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Declares that this executable answers [`COMPILE_CHILD_ARG`] (its `main` begins by calling
/// [`compile_child_main`] for it), so [`CompileLimits::in_child_process`] may use it.
pub fn enable_compile_helper() {
    CURRENT_EXE_IS_HELPER.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// How much compiling a plugin may cost.
#[derive(Debug, Clone, PartialEq)]
pub struct CompileLimits {
    /// Largest plugin file, bytes. The Python demo connector is 19 MB.
    pub max_component_bytes: u64,
    /// Functions across all the component's modules. The Python runtime has about 13,400.
    pub max_functions: u64,
    /// Largest function body, bytes. The Python runtime's largest is about 420 KiB.
    pub max_function_bytes: u64,
    /// Longest a compile may take (in the child process).
    pub timeout: Duration,
    /// Memory the compiling process may allocate, bytes (in the child process).
    pub memory_bytes: u64,
    /// A program to compile in: run as `PROGRAM __sluice-compile STACK MEMORY`, the wasm on
    /// its stdin, the compiled code on its stdout. `None` compiles in this process, with the
    /// checks above but no bound on time or memory.
    pub helper: Option<PathBuf>,
    /// Compiled code shipped in a package (`host package`), taken when the cache has none for
    /// the plugin: a fresh machine or container then runs the plugin without compiling it.
    pub packaged: Option<PackagedCode>,
}

/// The largest compiled code read for a component of at most `max_component_bytes` (a package
/// carries it, see [`PackagedCode`]): compiled code is about twice the component's size.
pub fn max_compiled_bytes(max_component_bytes: u64) -> u64 {
    max_component_bytes.saturating_mul(4)
}

/// A package's compiled code: used only when its file name is the cache entry the engine looks
/// for (the plugin's sha256 and the engine's compatibility hash, so a host built or configured
/// otherwise compiles instead) and its bytes have the sha256 the package pins; it then goes into
/// the cache as the host's own entry.
#[derive(Debug, Clone, PartialEq)]
pub struct PackagedCode {
    pub file: PathBuf,
    pub sha256: String,
}

impl Default for CompileLimits {
    fn default() -> Self {
        CompileLimits {
            max_component_bytes: 256 << 20,
            max_functions: 200_000,
            max_function_bytes: 2 << 20,
            timeout: Duration::from_secs(300),
            memory_bytes: 4 << 30,
            helper: None,
            packaged: None,
        }
    }
}

impl CompileLimits {
    /// The defaults, compiling in a child process of this very program when it is a compile
    /// helper ([`enable_compile_helper`]; the `host` binary is one), else in this process.
    pub fn in_child_process() -> Self {
        let helper = CURRENT_EXE_IS_HELPER.load(std::sync::atomic::Ordering::Relaxed);
        CompileLimits { helper: helper.then(|| std::env::current_exe().ok()).flatten(), ..Default::default() }
    }

    /// Refuses a plugin whose functions are too many or too large, by parsing it (nothing is
    /// compiled or validated yet). The size cap applies earlier, while the file is read.
    pub fn check(&self, wasm: &[u8]) -> Result<()> {
        let mut functions = 0u64;
        for payload in wasmparser::Parser::new(0).parse_all(wasm) {
            match payload.map_err(|e| anyhow!("it is not a valid WebAssembly component: {e}"))? {
                wasmparser::Payload::CodeSectionStart { count, .. } => {
                    functions += u64::from(count);
                    if functions > self.max_functions {
                        bail!(
                            "it has more than {} functions, the limit for a plugin (--max-plugin-functions)",
                            self.max_functions
                        );
                    }
                }
                wasmparser::Payload::CodeSectionEntry(body) => {
                    let size = body.range().len() as u64;
                    if size > self.max_function_bytes {
                        bail!(
                            "it has a function of {size} bytes, more than the limit of {} bytes (--max-function-kib)",
                            self.max_function_bytes
                        );
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Compiles `wasm` for an engine built with `config`: in the helper process when there is
    /// one, else here.
    pub(crate) fn compile(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        wasm_stack_bytes: usize,
    ) -> std::result::Result<Vec<u8>, CompileError> {
        match &self.helper {
            None => engine.precompile_component(wasm).map_err(|e| CompileError::Invalid(format!("{e:#}"))),
            Some(program) => self.compile_in_child(program, wasm, wasm_stack_bytes),
        }
    }

    /// [`CompileLimits::compile`], unless the plugin with `sha256` failed to compile under these
    /// limits in the last ten minutes: then that failure again, at no cost (it says so). A
    /// failure to start the helper is not the plugin's, and not remembered. Failures are
    /// remembered in this process, and in `marker` when given (a file beside the cache's
    /// entries, so the next run of the CLI, a process of its own, does not pay again either; it
    /// counts for limits no larger than those it failed under).
    pub(crate) fn compile_remembered(
        &self,
        engine: &wasmtime::Engine,
        wasm: &[u8],
        sha256: &str,
        wasm_stack_bytes: usize,
        marker: Option<&std::path::Path>,
    ) -> std::result::Result<Vec<u8>, CompileError> {
        let key = (sha256.to_string(), self.timeout, self.memory_bytes);
        let now = std::time::Instant::now();
        if let Some(error) = marker.and_then(|m| self.remembered_on_disk(m)) {
            return Err(error);
        }
        {
            let mut failed = FAILED.lock().unwrap_or_else(|e| e.into_inner());
            let failed = failed.get_or_insert_with(Failed::new);
            failed.retain(|_, (at, _)| now.duration_since(*at) < FAILED_FOR);
            if let Some((at, error)) = failed.get(&key) {
                let ago = now.duration_since(*at).as_secs();
                let again = |m: &String| format!("{m} (remembered from a compile {ago} s ago; not tried again)");
                return Err(match error {
                    CompileError::Invalid(m) => CompileError::Invalid(again(m)),
                    CompileError::TimedOut(m) => CompileError::TimedOut(again(m)),
                    CompileError::OutOfMemory(m) => CompileError::OutOfMemory(again(m)),
                    CompileError::Helper(m) => CompileError::Helper(again(m)),
                });
            }
        }
        let result = self.compile(engine, wasm, wasm_stack_bytes);
        if let Err(error) = &result
            && !matches!(error, CompileError::Helper(m) if m.starts_with("cannot start"))
        {
            {
                let mut failed = FAILED.lock().unwrap_or_else(|e| e.into_inner());
                let failed = failed.get_or_insert_with(Failed::new);
                if failed.len() >= MAX_FAILED
                    && let Some(oldest) = failed.iter().min_by_key(|(_, (at, _))| *at).map(|(k, _)| k.clone())
                {
                    failed.remove(&oldest);
                }
                failed.insert(key, (std::time::Instant::now(), error.clone()));
            }
            if let Some(marker) = marker {
                self.remember_on_disk(marker, error);
            }
        }
        result
    }

    /// A failure written in `marker` under limits at least as large as these, less than ten
    /// minutes ago, by this user (a marker is only believed when it is a small regular file of
    /// ours, not a link).
    fn remembered_on_disk(&self, marker: &std::path::Path) -> Option<CompileError> {
        use std::io::Read;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let file = options.open(marker).ok()?;
        let meta = file.metadata().ok()?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            if meta.uid() != unsafe { libc::geteuid() } || meta.mode() & 0o022 != 0 {
                return None;
            }
        }
        if !meta.is_file() || meta.len() > MAX_HELPER_MESSAGE + 256 {
            return None;
        }
        let mut text = String::new();
        file.take(MAX_HELPER_MESSAGE + 256).read_to_string(&mut text).ok()?;
        let mut lines = text.splitn(6, '\n');
        if lines.next()? != MARKER_HEADER {
            return None;
        }
        let at: u64 = lines.next()?.parse().ok()?;
        let timeout_ms: u128 = lines.next()?.parse().ok()?;
        let memory: u64 = lines.next()?.parse().ok()?;
        let kind = lines.next()?;
        let message = lines.next()?.to_string();
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).ok()?.as_secs();
        let ago = now.checked_sub(at)?;
        if ago >= FAILED_FOR.as_secs() || self.timeout.as_millis() > timeout_ms || self.memory_bytes > memory {
            return None;
        }
        let again = format!("{message} (remembered from a compile {ago} s ago; not tried again)");
        Some(match kind {
            "invalid" => CompileError::Invalid(again),
            "timed-out" => CompileError::TimedOut(again),
            "out-of-memory" => CompileError::OutOfMemory(again),
            _ => CompileError::Helper(again),
        })
    }

    /// Writes `error` to `marker` (whole, by a rename; a failure to write it changes nothing).
    fn remember_on_disk(&self, marker: &std::path::Path, error: &CompileError) {
        let (kind, message) = match error {
            CompileError::Invalid(m) => ("invalid", m),
            CompileError::TimedOut(m) => ("timed-out", m),
            CompileError::OutOfMemory(m) => ("out-of-memory", m),
            CompileError::Helper(m) => ("helper", m),
        };
        let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) else { return };
        let message: String = message.chars().take(MAX_HELPER_MESSAGE as usize / 4).collect();
        let text = format!(
            "{MARKER_HEADER}\n{}\n{}\n{}\n{kind}\n{message}",
            now.as_secs(),
            self.timeout.as_millis(),
            self.memory_bytes
        );
        let tmp = marker.with_extension(format!("failed-tmp{}", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let written = options.open(&tmp).and_then(|mut f| f.write_all(text.as_bytes()));
        if written.is_err() || std::fs::rename(&tmp, marker).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }

    fn compile_in_child(
        &self,
        program: &PathBuf,
        wasm: &[u8],
        wasm_stack_bytes: usize,
    ) -> std::result::Result<Vec<u8>, CompileError> {
        let mut child = std::process::Command::new(program)
            .arg(COMPILE_CHILD_ARG)
            .arg(wasm_stack_bytes.to_string())
            .arg(self.memory_bytes.to_string())
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| CompileError::Helper(format!("cannot start the compile helper {}: {e}", program.display())))?;
        let pid = child.id();
        let (mut stdin, mut stdout, mut stderr) = (
            child.stdin.take().expect("piped"),
            child.stdout.take().expect("piped"),
            child.stderr.take().expect("piped"),
        );
        let (done_tx, done) = std::sync::mpsc::channel();
        std::thread::scope(|scope| {
            scope.spawn(move || {
                // A helper that dies early closes its stdin: its exit status says why.
                let _ = stdin.write_all(wasm);
            });
            // Its stderr is read beside its stdout, and what is past the cap dropped, so a helper
            // that says a lot never blocks (it used to, and read as a timeout).
            let said = scope.spawn(move || {
                let mut message = Vec::new();
                let _ = (&mut stderr).take(MAX_HELPER_MESSAGE).read_to_end(&mut message);
                let _ = std::io::copy(&mut stderr, &mut std::io::sink());
                String::from_utf8_lossy(&message).into_owned()
            });
            scope.spawn(move || {
                // At most 16 bytes of output per byte of input: compiled code is a few times the
                // size of the wasm, and a runaway helper cannot make this process hold more.
                // Past that it is killed (it would block writing, and read as a timeout).
                let cap = wasm.len() as u64 * 16 + (64 << 20);
                let mut compiled = Vec::new();
                let read = (&mut stdout).take(cap + 1).read_to_end(&mut compiled);
                let too_much = compiled.len() as u64 > cap;
                if too_much {
                    // SAFETY: signalling our own child, not reaped yet (we wait for it below).
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                    compiled = Vec::new();
                }
                drop(stdout);
                let status = child.wait();
                let _ = done_tx.send((read.map(|_| compiled), too_much.then_some(cap), status));
            });
            let outcome = match done.recv_timeout(self.timeout) {
                Ok(outcome) => Ok(outcome),
                Err(_) => {
                    // SAFETY: signalling our own child, which has not been reaped (its waiter
                    // is still blocked in `wait`).
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                    let _ = done.recv();
                    Err(CompileError::TimedOut(format!(
                        "compiling it took longer than the limit of {} s (--compile-timeout-s)",
                        self.timeout.as_secs()
                    )))
                }
            };
            let message = said.join().unwrap_or_default();
            let (compiled, too_much, status) = outcome?;
            if let Some(cap) = too_much {
                return Err(CompileError::Helper(format!(
                    "the compile helper wrote more than {cap} bytes of compiled code for a plugin of {} bytes",
                    wasm.len()
                )));
            }
            let status = status.map_err(|e| CompileError::Helper(format!("the compile helper was lost: {e}")))?;
            if status.success() {
                let compiled = compiled.map_err(|e| {
                    CompileError::Helper(format!("cannot read the compiled code from the compile helper: {e}"))
                })?;
                return match compiled.strip_prefix(HELPER_MAGIC) {
                    Some(code) => Ok(code.to_vec()),
                    None => Err(CompileError::Helper(format!(
                        "{} is not a compile helper (its main must begin by calling sluice_host::compile_child_main \
                         for {COMPILE_CHILD_ARG})",
                        program.display()
                    ))),
                };
            }
            Err(self.failure(&status, message.trim()))
        })
    }

    /// Why a helper that did not succeed failed, from its exit status and what it said: out of
    /// memory only when the allocator said so, a crash when a signal other than an abort ended
    /// it, an invalid component when it exited saying so.
    fn failure(&self, status: &std::process::ExitStatus, message: &str) -> CompileError {
        let lower = message.to_ascii_lowercase();
        if lower.contains("memory allocation") || lower.contains("allocate memory") || lower.contains("out of memory") {
            return CompileError::OutOfMemory(format!(
                "compiling it needed more memory than the limit of {} MiB (--compile-memory-mb)",
                self.memory_bytes >> 20
            ));
        }
        let said = if message.is_empty() { String::new() } else { format!(": {message}") };
        if let Some(signal) = signal_of(status) {
            let name = match signal {
                libc::SIGSEGV => "SIGSEGV",
                libc::SIGBUS => "SIGBUS",
                libc::SIGILL => "SIGILL",
                libc::SIGABRT => "SIGABRT",
                libc::SIGKILL => "SIGKILL",
                _ => "a signal",
            };
            return CompileError::Helper(format!("the compile helper crashed ({name}, signal {signal}){said}"));
        }
        if status.code() == Some(EXIT_INVALID) {
            return CompileError::Invalid(message.to_string());
        }
        CompileError::Helper(format!("the compile helper failed ({status}){said}"))
    }
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn signal_of(_: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// The compile helper's `main`: call it first thing in `main` when the first argument is
/// [`COMPILE_CHILD_ARG`] (the `host` binary does). Reads a component on stdin, compiles it for an
/// engine like the host's, writes the compiled code to stdout; under a memory rlimit.
pub fn compile_child_main() -> std::process::ExitCode {
    match compile_child() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            let invalid = e.downcast_ref::<CompileError>().is_some_and(|e| matches!(e, CompileError::Invalid(_)));
            std::process::ExitCode::from(if invalid { EXIT_INVALID as u8 } else { 1 })
        }
    }
}

fn compile_child() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(2).collect();
    let [stack, memory] = args.as_slice() else { bail!("usage: {COMPILE_CHILD_ARG} WASM_STACK_BYTES MEMORY_BYTES") };
    let (stack, memory): (usize, u64) = (stack.parse()?, memory.parse()?);
    limit_memory(memory)?;
    let mut wasm = Vec::new();
    std::io::stdin().read_to_end(&mut wasm)?;
    let engine = wasmtime::Engine::new(&engine_config(stack)).map_err(|e| anyhow!("{e}"))?;
    let compiled = engine.precompile_component(&wasm).map_err(|e| CompileError::Invalid(format!("{e:#}")))?;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(HELPER_MAGIC)?;
    stdout.write_all(&compiled)?;
    stdout.flush()?;
    Ok(())
}

/// Caps the data this process may allocate (heap and private writable mappings; address space
/// reserved but not writable, such as guard regions, does not count).
#[cfg(unix)]
fn limit_memory(bytes: u64) -> Result<()> {
    let limit = libc::rlimit { rlim_cur: bytes as libc::rlim_t, rlim_max: bytes as libc::rlim_t };
    // SAFETY: a plain syscall with a valid pointer.
    if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) } != 0 {
        bail!("cannot limit the compile helper's memory: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(not(unix))]
fn limit_memory(_: u64) -> Result<()> {
    Ok(())
}

/// The engine settings that compiled code depends on: the helper compiles with them and the
/// run's engine (`guest::engine`) loads with them, so its output loads there.
pub(crate) fn engine_config(wasm_stack_bytes: usize) -> wasmtime::Config {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    // Guests get a bounded stack; async host calls need a larger fiber stack than that.
    config.max_wasm_stack(wasm_stack_bytes);
    // Host calls run on the same fiber as the guest: room for them beyond the guest's stack.
    config.async_stack_size(wasm_stack_bytes + (3 << 19));
    // CPU budgets: the epoch advances on a ticker thread; guests check it cheaply.
    config.epoch_interruption(true);
    // For profiling a run with `perf record` (docs/architecture.md): names for the guests' code.
    if std::env::var_os("SLUICE_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that runs and exits 0 but is not a compile helper (here `echo`, which prints
    /// its arguments) is refused, never taken for compiled code; and a program that has not
    /// declared itself a helper compiles in process (a benchmark or an embedder calling the CLI).
    #[test]
    fn only_a_declared_helper_compiles_out_of_process() {
        assert_eq!(CompileLimits::in_child_process().helper, None);
        let echo = CompileLimits { helper: Some("/bin/echo".into()), ..Default::default() };
        let engine = wasmtime::Engine::new(&super::engine_config(512 << 10)).unwrap();
        let err = echo.compile(&engine, b"\0asm\x0d\0\x01\0", 512 << 10).unwrap_err().to_string();
        assert!(err.contains("/bin/echo is not a compile helper"), "{err}");
    }

    fn exited(code: i32) -> std::process::ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(code << 8)
    }

    fn killed(signal: i32) -> std::process::ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(signal)
    }

    /// Every failure used to read "not a valid WebAssembly component", and a SIGSEGV of the
    /// helper read as out of memory: each is told apart now.
    #[test]
    fn helper_failures_are_told_apart() {
        let limits = CompileLimits::default();
        let oom = limits.failure(&killed(libc::SIGABRT), "memory allocation of 123 bytes failed");
        assert!(matches!(&oom, CompileError::OutOfMemory(m) if m.contains("--compile-memory-mb")), "{oom}");
        let segv = limits.failure(&killed(libc::SIGSEGV), "");
        assert!(matches!(&segv, CompileError::Helper(m) if m.contains("crashed (SIGSEGV")), "{segv}");
        let invalid = limits.failure(&exited(EXIT_INVALID), "type mismatch");
        assert_eq!(invalid.to_string(), "it is not a valid WebAssembly component: type mismatch");
        let other = limits.failure(&exited(1), "usage: ...");
        assert!(matches!(&other, CompileError::Helper(m) if m.contains("failed") && m.contains("usage")), "{other}");
    }

    /// A helper that says more than its cap on stderr and never writes code used to block
    /// (read as a timeout); one that writes past the output cap is killed and said so.
    #[test]
    fn a_chatty_or_runaway_helper_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("helper.sh");
        // 1 MiB on stderr, then 80 MiB on stdout (past 16 bytes per input byte plus 64 MiB).
        std::fs::write(&script, "#!/bin/sh\n/usr/bin/head -c 1048576 /dev/zero >&2\n/usr/bin/head -c 83886080 /dev/zero\n/usr/bin/sleep 60\n")
            .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
        let limits = CompileLimits { helper: Some(script), timeout: Duration::from_secs(50), ..Default::default() };
        let engine = wasmtime::Engine::new(&super::engine_config(512 << 10)).unwrap();
        let err = limits.compile(&engine, b"\0asm\x0d\0\x01\0", 512 << 10).unwrap_err();
        assert!(matches!(&err, CompileError::Helper(m) if m.contains("wrote more than")), "{err}");
    }

    /// A compile that failed is remembered by the plugin's sha256 (and the limits): the next
    /// run of it does not pay for it again.
    #[test]
    fn a_failed_compile_is_remembered() {
        let limits = CompileLimits { timeout: Duration::from_secs(7), ..Default::default() };
        let engine = wasmtime::Engine::new(&super::engine_config(512 << 10)).unwrap();
        let sha = "remembered-test-sha";
        let first = limits.compile_remembered(&engine, b"\0asm\x0d\0\x01\0\xff", sha, 512 << 10, None).unwrap_err();
        assert!(matches!(&first, CompileError::Invalid(m) if !m.contains("remembered")), "{first}");
        // The same sha256 again, even with other bytes: not compiled again.
        let valid = wat_component();
        let again = limits.compile_remembered(&engine, &valid, sha, 512 << 10, None).unwrap_err();
        assert!(matches!(&again, CompileError::Invalid(m) if m.contains("remembered")), "{again}");
        // Other limits, or another plugin, are tried.
        let other = CompileLimits { timeout: Duration::from_secs(8), ..limits.clone() };
        assert!(other.compile_remembered(&engine, &valid, sha, 512 << 10, None).is_ok());
        assert!(limits.compile_remembered(&engine, &valid, "another-sha", 512 << 10, None).is_ok());
    }

    /// The CLI runs each command in a process of its own: a failed compile is remembered beside
    /// the cache's entries too, for limits no larger than it failed under.
    #[test]
    fn a_failed_compile_is_remembered_across_processes() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("sha-engine.failed");
        let limits = CompileLimits { timeout: Duration::from_secs(9), ..Default::default() };
        let engine = wasmtime::Engine::new(&super::engine_config(512 << 10)).unwrap();
        let sha = "remembered-on-disk-sha";
        let bad = b"\0asm\x0d\0\x01\0\xff";
        assert!(limits.compile_remembered(&engine, bad, sha, 512 << 10, Some(&marker)).is_err());
        assert!(marker.is_file());
        // Another process: nothing remembered in memory.
        *FAILED.lock().unwrap() = None;
        let valid = wat_component();
        let again = limits.compile_remembered(&engine, &valid, sha, 512 << 10, Some(&marker)).unwrap_err();
        assert!(matches!(&again, CompileError::Invalid(m) if m.contains("remembered")), "{again}");
        *FAILED.lock().unwrap() = None;
        let smaller = CompileLimits { timeout: Duration::from_secs(5), ..limits.clone() };
        assert!(smaller.compile_remembered(&engine, &valid, sha, 512 << 10, Some(&marker)).is_err());
        // More time than it failed with is tried again.
        let larger = CompileLimits { timeout: Duration::from_secs(60), ..limits.clone() };
        assert!(larger.compile_remembered(&engine, &valid, sha, 512 << 10, Some(&marker)).is_ok());
        // A marker that is not ours, or not a file, is not believed.
        std::fs::remove_file(&marker).unwrap();
        std::os::unix::fs::symlink("/dev/zero", &marker).unwrap();
        *FAILED.lock().unwrap() = None;
        assert!(limits.compile_remembered(&engine, &valid, sha, 512 << 10, Some(&marker)).is_ok());
    }

    /// The smallest valid component.
    fn wat_component() -> Vec<u8> {
        b"\0asm\x0d\0\x01\0".to_vec()
    }
}
