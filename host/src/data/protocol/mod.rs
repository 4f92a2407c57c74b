//! What the host writes: Airbyte or Singer messages, through one writer that owns stdout.

pub mod airbyte;
mod checks;
mod output;
pub mod singer;

pub use checks::{checked_record, checked_record_with_cursor, preview};
pub use output::{Batcher, Format, Output, OutputClosed, PageLines, PluginInfo, Sink, Sinks};

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch, as `emitted_at` wants.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Airbyte failure types, from the guest's error kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureType {
    Config,
    Transient,
    System,
}

impl FailureType {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureType::Config => "config_error",
            FailureType::Transient => "transient_error",
            FailureType::System => "system_error",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStatus {
    Started,
    Running,
    Complete,
    Incomplete,
}
