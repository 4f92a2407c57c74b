//! What the host writes: Airbyte or Singer messages, through one writer that owns stdout.

pub mod airbyte;
mod checks;
mod output;
pub mod singer;

pub use checks::{checked_record, checked_record_with_cursor, preview, split_record_with_cursor};
pub use output::{Batcher, Format, Output, OutputClosed, PageLines, PluginInfo, Sink, Sinks};

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

/// Text for a person's terminal: control characters (newlines, carriage returns, ANSI escapes,
/// BEL, ...) shown as escapes, so a connector cannot start lines, rewrite them or drive the
/// terminal. Every human-facing output (stderr, the summary, progress) goes through it.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Appends `value` as JSON to a line being written: what the line holds is serialized where it
/// is, never copied into a `Value` first (a stream's state may list 100,000 partitions).
pub(crate) fn append_json(line: &mut Vec<u8>, value: &impl serde::Serialize) {
    serde_json::to_writer(line, value).expect("JSON text of a string, a number or a Value always serializes");
}

/// Milliseconds since the Unix epoch, as `emitted_at` wants.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_characters_are_escaped_for_people() {
        assert_eq!(super::printable("plain ünïcode"), "plain ünïcode");
        assert_eq!(super::printable("a\nFAKE\r\u{1b}[31mred\u{7}"), "a\\nFAKE\\r\\u{1b}[31mred\\u{7}");
    }
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
