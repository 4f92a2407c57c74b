//! The Airbyte protocol: message encoding, the checks every guest value passes before it is
//! written, and the single writer that owns stdout.

use serde_json::{Value, json};
use std::borrow::Cow;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// Milliseconds since the Unix epoch, as `emitted_at` wants.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
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

pub fn spec(connection_specification: Value) -> Value {
    json!({"type": "SPEC", "spec": {"connectionSpecification": connection_specification}})
}

pub fn connection_status(result: Result<(), String>) -> Value {
    match result {
        Ok(()) => json!({"type": "CONNECTION_STATUS", "connectionStatus": {"status": "SUCCEEDED"}}),
        Err(message) => {
            json!({"type": "CONNECTION_STATUS", "connectionStatus": {"status": "FAILED", "message": message}})
        }
    }
}

pub fn catalog(streams: Vec<Value>) -> Value {
    json!({"type": "CATALOG", "catalog": {"streams": streams}})
}

pub fn log(level: &str, message: &str) -> Value {
    json!({"type": "LOG", "log": {"level": level, "message": message}})
}

pub fn trace_error(message: &str, internal: Option<&str>, failure: FailureType, stream: Option<&str>) -> Value {
    let mut error = json!({"message": message, "failure_type": failure.as_str()});
    if let Some(internal) = internal {
        error["internal_message"] = json!(internal);
    }
    if let Some(stream) = stream {
        error["stream_descriptor"] = json!({"name": stream});
    }
    json!({"type": "TRACE", "trace": {"type": "ERROR", "emitted_at": now_ms(), "error": error}})
}

pub fn stream_status(stream: &str, status: StreamStatus) -> Value {
    let status = match status {
        StreamStatus::Started => "STARTED",
        StreamStatus::Running => "RUNNING",
        StreamStatus::Complete => "COMPLETE",
        StreamStatus::Incomplete => "INCOMPLETE",
    };
    json!({"type": "TRACE", "trace": {"type": "STREAM_STATUS", "emitted_at": now_ms(),
        "stream_status": {"stream_descriptor": {"name": stream}, "status": status}}})
}

pub fn stream_state(stream: &str, state: &Value) -> Value {
    json!({"type": "STATE", "state": {"type": "STREAM",
        "stream": {"stream_descriptor": {"name": stream}, "stream_state": state}}})
}

/// Appends one RECORD line. `stream_json` is the stream name already encoded as a JSON string,
/// and `data` a record that passed [`checked_record`].
pub fn push_record(buf: &mut Vec<u8>, stream_json: &str, data: &str, emitted_at: u64) {
    buf.extend_from_slice(b"{\"type\":\"RECORD\",\"record\":{\"stream\":");
    buf.extend_from_slice(stream_json.as_bytes());
    buf.extend_from_slice(b",\"data\":");
    buf.extend_from_slice(data.as_bytes());
    buf.extend_from_slice(b",\"emitted_at\":");
    buf.extend_from_slice(emitted_at.to_string().as_bytes());
    buf.extend_from_slice(b"}}\n");
}

/// Checks a record from a guest: valid JSON, an object, within the size cap. Returns it ready
/// to splice into a line: guest bytes go out verbatim only when they cannot break the line (a
/// newline is legal JSON whitespace and could otherwise forge a message), else minified.
pub fn checked_record(text: &str, max_bytes: usize) -> Result<Cow<'_, str>, String> {
    if text.len() > max_bytes {
        return Err(format!(
            "a record of {} bytes exceeds the limit of {max_bytes} bytes",
            text.len()
        ));
    }
    let raw: &serde_json::value::RawValue =
        serde_json::from_str(text).map_err(|e| format!("a record is not valid JSON ({e}): {}", preview(text)))?;
    let raw = raw.get();
    if !raw.starts_with('{') {
        return Err(format!("a record must be a JSON object, got: {}", preview(raw)));
    }
    if raw.bytes().any(|b| b == b'\n' || b == b'\r') {
        Ok(Cow::Owned(minify(raw)))
    } else {
        Ok(Cow::Borrowed(raw))
    }
}

/// Drops whitespace outside strings from valid JSON text.
fn minify(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    let (mut in_string, mut escaped) = (false, false);
    for c in json.chars() {
        if in_string {
            out.push(c);
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
        } else if c == '"' {
            in_string = true;
            out.push(c);
        } else if !c.is_ascii_whitespace() {
            out.push(c);
        }
    }
    out
}

/// The start of a value, for error messages.
pub fn preview(text: &str) -> String {
    const MAX: usize = 120;
    if text.len() <= MAX {
        return text.to_string();
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

/// A handle to the single writer. Clones share one bounded channel, so a slow consumer slows
/// the producers instead of filling memory.
#[derive(Clone)]
pub struct Output {
    tx: mpsc::Sender<Vec<u8>>,
}

/// The writer thread; join it to learn whether every byte reached the sink.
pub struct Writer {
    thread: std::thread::JoinHandle<std::io::Result<()>>,
}

/// Error when the writer has stopped (for example the consumer closed stdout).
#[derive(Debug)]
pub struct OutputClosed;

impl std::fmt::Display for OutputClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the output stream is closed")
    }
}
impl std::error::Error for OutputClosed {}

impl Output {
    /// Starts the writer on its own thread: blocking writes never stall the async workers.
    pub fn spawn(sink: Box<dyn Write + Send>) -> (Output, Writer) {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(64);
        let thread = std::thread::Builder::new()
            .name("sluice-writer".into())
            .spawn(move || {
                let mut out = std::io::BufWriter::with_capacity(256 << 10, sink);
                while let Some(chunk) = rx.blocking_recv() {
                    out.write_all(&chunk)?;
                    // Flush whenever nothing else is waiting, so output is timely but batched.
                    if rx.is_empty() {
                        out.flush()?;
                    }
                }
                out.flush()
            })
            .expect("spawn writer thread");
        (Output { tx }, Writer { thread })
    }

    /// Sends complete lines.
    pub async fn lines(&self, bytes: Vec<u8>) -> Result<(), OutputClosed> {
        self.tx.send(bytes).await.map_err(|_| OutputClosed)
    }

    pub async fn message(&self, message: &Value) -> Result<(), OutputClosed> {
        let mut line = serde_json::to_vec(message).expect("a Value always serializes");
        line.push(b'\n');
        self.lines(line).await
    }
}

impl Writer {
    /// Waits until every line sent before all `Output` handles were dropped is written.
    pub fn finish(self) -> std::io::Result<()> {
        self.thread
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("writer thread panicked")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_must_be_objects() {
        assert_eq!(checked_record(r#"{"id":1}"#, 100).unwrap(), r#"{"id":1}"#);
        assert!(
            checked_record("[1]", 100)
                .unwrap_err()
                .contains("must be a JSON object")
        );
        assert!(checked_record("{\"id\":", 100).unwrap_err().contains("not valid JSON"));
        assert!(
            checked_record(r#"{"a":"0123456789"}"#, 10)
                .unwrap_err()
                .contains("exceeds the limit")
        );
    }

    #[test]
    fn newlines_cannot_forge_lines() {
        let hostile = "{\"a\":1,\n\"b\":\"x \\\" \\n {\\\"type\\\":\\\"STATE\\\"}\"\r\n}";
        let checked = checked_record(hostile, 1000).unwrap();
        assert!(!checked.contains('\n') && !checked.contains('\r'));
        let back: Value = serde_json::from_str(&checked).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(hostile).unwrap());
    }

    #[test]
    fn record_line_is_valid_json() {
        let mut buf = Vec::new();
        push_record(&mut buf, "\"items\"", r#"{"id":1}"#, 42);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(
            v,
            json!({"type": "RECORD", "record": {"stream": "items", "data": {"id": 1}, "emitted_at": 42}})
        );
        assert_eq!(buf.last(), Some(&b'\n'));
    }
}
