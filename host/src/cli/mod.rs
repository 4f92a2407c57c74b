//! The `host` command line: its arguments ([`args`]), what each command does on top of the
//! library ([`commands`]), new connector projects ([`init`]), packaged connectors ([`package`])
//! and their images ([`oci`]), the process's signals ([`signals`]) and its OpenTelemetry
//! export ([`telemetry`]).

pub mod args;
pub mod commands;
pub mod init;
pub mod manifests;
pub mod oci;
pub mod package;
pub mod signals;
pub mod telemetry;

pub use args::Cli;
pub use commands::{end_with_process, execute};
