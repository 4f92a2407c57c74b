use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // The host compiles plugins in a child process of itself, bounded in time and memory.
    if std::env::args().nth(1).as_deref() == Some(sluice_host::COMPILE_CHILD_ARG) {
        return sluice_host::compile_child_main();
    }
    sluice_host::enable_compile_helper();
    let cli = sluice_host::cli::Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(sluice_host::cli::execute(cli, Box::new(std::io::stdout())))
}
