use clap::Parser;
use std::process::ExitCode;

/// mimalloc: a run allocates and frees small objects on every worker for every partition
/// (requests, records, instances' host state), and glibc's arenas made that a tenth of a run
/// of one-record partitions (docs/architecture.md, "What a partition costs").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's defaults trade memory for speed: freed memory kept resident for a second (a Python
/// run under latency peaked at twice its RSS) and arenas committed whole. mimalloc reads its
/// options when it starts, in a constructor of its own before `main`, so they are set from a
/// constructor ordered ahead of every unnumbered one, mimalloc's among them. They are
/// defaults: `MIMALLOC_PURGE_DELAY` and `MIMALLOC_ARENA_EAGER_COMMIT` still override them.
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static SET_ALLOCATOR_DEFAULTS: extern "C" fn() = set_allocator_defaults;

#[cfg(target_os = "linux")]
extern "C" fn set_allocator_defaults() {
    // mimalloc.h's `mi_option_e` (mimalloc 3, as libmimalloc-sys 0.1.49 builds it); the
    // bindings name neither.
    const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;
    const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;
    // SAFETY: plain stores into mimalloc's option table, which needs no initialisation.
    unsafe {
        libmimalloc_sys::mi_option_set_default(PURGE_DELAY, 0);
        libmimalloc_sys::mi_option_set_default(ARENA_EAGER_COMMIT, 0);
    }
}

fn main() -> ExitCode {
    // The host compiles plugins in a child process of itself, bounded in time and memory.
    if std::env::args().nth(1).as_deref() == Some(sluice_host::COMPILE_CHILD_ARG) {
        return sluice_host::compile_child_main();
    }
    sluice_host::enable_compile_helper();
    // Started as a packaged connector (source-NAME, tap-NAME), the platform's arguments become
    // the host's.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let cli = match sluice_host::command_line::packaged_args(args.clone()) {
        Ok(Some(packaged)) => sluice_host::command_line::Cli::parse_from(packaged),
        Ok(None) => sluice_host::command_line::Cli::parse_from(args),
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    sluice_host::command_line::end_with_process();
    let code = runtime.block_on(sluice_host::command_line::execute(cli, Box::new(std::io::stdout())));
    // The process ends here: its threads go with it, without a shutdown of the runtime's.
    std::mem::forget(runtime);
    code
}
