//! A guest's logs, as the run emits them: every step that calls into an instance hands its logs
//! on here, so they reach the output in the order the calls made them.

use crate::data::protocol::{Output, OutputClosed};
use crate::guest::sandbox::GuestLog;

/// Emits guest logs as LOG messages (cut to size where they entered, in the sandbox).
pub async fn emit_logs(out: &Output, logs: Vec<GuestLog>) -> Result<(), OutputClosed> {
    for log in logs {
        let level = match log.level {
            crate::bindings::Level::Debug => "DEBUG",
            crate::bindings::Level::Info => "INFO",
            crate::bindings::Level::Warn => "WARN",
            crate::bindings::Level::Error => "ERROR",
        };
        out.log(level, &log.message).await?;
    }
    Ok(())
}
