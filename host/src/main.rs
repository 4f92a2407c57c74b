use clap::Parser;
use std::process::ExitCode;

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
