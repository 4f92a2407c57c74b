use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
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
