//! Bounds on compiling a plugin, which happens before any instance limit applies: a size cap on
//! the file, limits on functions checked by parsing before anything is compiled, and, when the
//! host has a compile helper (the CLI is its own), compiling in a child process under a memory
//! rlimit and a timeout, so a component built to make Cranelift work for minutes or gigabytes
//! costs at most what the operator allows.

use anyhow::{Context, Result, anyhow, bail};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

/// The first argument that makes the `host` binary (or an embedder's, see
/// [`compile_child_main`]) a compile helper instead of the CLI.
pub const COMPILE_CHILD_ARG: &str = "__sluice-compile";

/// What a compile helper writes before the compiled code, so a program that is not one (an
/// embedder's binary whose `main` does not call [`compile_child_main`]) is told apart.
const HELPER_MAGIC: &[u8] = b"sluice-compiled\n";

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
    pub fn compile(&self, engine: &wasmtime::Engine, wasm: &[u8], wasm_stack_bytes: usize) -> Result<Vec<u8>> {
        match &self.helper {
            None => engine.precompile_component(wasm).map_err(|e| anyhow!("{e:#}")),
            Some(program) => self.compile_in_child(program, wasm, wasm_stack_bytes),
        }
    }

    fn compile_in_child(&self, program: &PathBuf, wasm: &[u8], wasm_stack_bytes: usize) -> Result<Vec<u8>> {
        let mut child = std::process::Command::new(program)
            .arg(COMPILE_CHILD_ARG)
            .arg(wasm_stack_bytes.to_string())
            .arg(self.memory_bytes.to_string())
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .with_context(|| format!("cannot start the compile helper {}", program.display()))?;
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
            scope.spawn(move || {
                // At most 16 bytes of output per byte of input: compiled code is a few times the
                // size of the wasm, and a runaway helper cannot make this process hold more.
                let mut compiled = Vec::new();
                let read = (&mut stdout).take(wasm.len() as u64 * 16 + (64 << 20)).read_to_end(&mut compiled);
                let mut message = String::new();
                let _ = (&mut stderr).take(64 << 10).read_to_string(&mut message);
                let status = child.wait();
                let _ = done_tx.send((read.map(|_| compiled), message, status));
            });
            let outcome = match done.recv_timeout(self.timeout) {
                Ok(outcome) => Ok(outcome),
                Err(_) => {
                    // SAFETY: signalling our own child, which has not been reaped (its waiter
                    // is still blocked in `wait`).
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
                    let _ = done.recv();
                    Err(anyhow!(
                        "compiling it took longer than the limit of {} s (--compile-timeout-s)",
                        self.timeout.as_secs()
                    ))
                }
            };
            let (compiled, message, status) = outcome?;
            let status = status.context("the compile helper was lost")?;
            if status.success() {
                let compiled = compiled.context("cannot read the compiled code from the compile helper")?;
                return match compiled.strip_prefix(HELPER_MAGIC) {
                    Some(code) => Ok(code.to_vec()),
                    None => Err(anyhow!(
                        "{} is not a compile helper (its main must begin by calling sluice_host::compile_child_main \
                         for {COMPILE_CHILD_ARG})",
                        program.display()
                    )),
                };
            }
            let message = message.trim();
            let out_of_memory = message.contains("memory allocation") || status_is_abort(&status);
            if out_of_memory {
                bail!(
                    "compiling it needed more memory than the limit of {} MiB (--compile-memory-mb)",
                    self.memory_bytes >> 20
                );
            }
            bail!(
                "{}",
                if message.is_empty() { format!("the compile helper failed ({status})") } else { message.to_string() }
            )
        })
    }
}

#[cfg(unix)]
fn status_is_abort(status: &std::process::ExitStatus) -> bool {
    std::os::unix::process::ExitStatusExt::signal(status).is_some_and(|s| s == libc::SIGABRT || s == libc::SIGSEGV)
}

#[cfg(not(unix))]
fn status_is_abort(_: &std::process::ExitStatus) -> bool {
    false
}

/// The compile helper's `main`: call it first thing in `main` when the first argument is
/// [`COMPILE_CHILD_ARG`] (the `host` binary does). Reads a component on stdin, compiles it for an
/// engine like the host's, writes the compiled code to stdout; under a memory rlimit.
pub fn compile_child_main() -> std::process::ExitCode {
    match compile_child() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e:#}");
            std::process::ExitCode::FAILURE
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
    let engine = wasmtime::Engine::new(&super::engine::engine_config(stack)).map_err(|e| anyhow!("{e}"))?;
    let compiled = engine.precompile_component(&wasm).map_err(|e| anyhow!("{e:#}"))?;
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
        let engine = wasmtime::Engine::new(&super::super::engine::engine_config(512 << 10)).unwrap();
        let err = echo.compile(&engine, b"\0asm\x0d\0\x01\0", 512 << 10).unwrap_err().to_string();
        assert!(err.contains("/bin/echo is not a compile helper"), "{err}");
    }
}
