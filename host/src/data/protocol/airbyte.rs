//! Airbyte protocol messages.

use super::{FailureType, StreamStatus, now_ms};
use serde_json::{Value, json};

/// The Airbyte protocol version these messages follow.
pub const PROTOCOL_VERSION: &str = "0.2.0";

/// SPEC for a connector's spec. A connector's spec may carry `documentationUrl` and
/// `supportsIncremental` at its top level (beside the JSON Schema keywords): they are lifted
/// into SPEC, as the Airbyte CDK reads them from spec.yaml. `supportsIncremental` defaults to
/// true: the host reads incrementally any stream with a cursor field.
pub fn spec(connection_specification: Value) -> Value {
    let mut schema = connection_specification;
    let lifted = |schema: &mut Value, key: &str| schema.as_object_mut().and_then(|o| o.remove(key));
    let documentation = lifted(&mut schema, "documentationUrl").filter(Value::is_string);
    let incremental = lifted(&mut schema, "supportsIncremental").and_then(|v| v.as_bool()).unwrap_or(true);
    let mut spec = json!({
        "connectionSpecification": schema,
        "supportsIncremental": incremental,
        "protocol_version": PROTOCOL_VERSION,
    });
    if let Some(url) = documentation {
        spec["documentationUrl"] = url;
    }
    json!({"type": "SPEC", "spec": spec})
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

pub fn estimate(stream: &str, records: u64) -> Value {
    json!({"type": "TRACE", "trace": {"type": "ESTIMATE", "emitted_at": now_ms(),
        "estimate": {"name": stream, "type": "STREAM", "row_estimate": records}}})
}

/// A stream's STATE line, with the records of the stream written since its previous STATE
/// (`sourceStats.recordCount`, a number as the Airbyte CDK writes it). Written from the state as
/// it is, not a copy: a stream's state may hold an entry for each of 100,000 partitions.
pub fn stream_state(stream: &str, state: &Value, records: u64) -> Vec<u8> {
    let mut line = br#"{"type":"STATE","state":{"type":"STREAM","stream":{"stream_descriptor":{"name":"#.to_vec();
    super::append_json(&mut line, &stream);
    line.extend_from_slice(br#"},"stream_state":"#);
    super::append_json(&mut line, state);
    line.extend_from_slice(br#"},"sourceStats":{"recordCount":"#);
    super::append_json(&mut line, &(records as f64));
    line.extend_from_slice(b"}}}\n");
    line
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_line_is_the_cdk_shape() {
        let state = json!({"cursor_field": ["updated"], "partitions": [{"partition": {"id": 1}, "cursor": 5}]});
        let line = stream_state("items", &state, 12);
        assert_eq!(line.last(), Some(&b'\n'));
        let expected = json!({"type": "STATE", "state": {"type": "STREAM",
            "stream": {"stream_descriptor": {"name": "items"}, "stream_state": state},
            "sourceStats": {"recordCount": 12.0}}});
        assert_eq!(serde_json::from_slice::<Value>(&line).unwrap(), expected);
        assert!(String::from_utf8(line).unwrap().contains(r#""recordCount":12.0"#), "a number as the CDK writes it");
    }

    #[test]
    fn record_line_is_valid_json() {
        let mut buf = Vec::new();
        push_record(&mut buf, "\"items\"", r#"{"id":1}"#, 42);
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(v, json!({"type": "RECORD", "record": {"stream": "items", "data": {"id": 1}, "emitted_at": 42}}));
        assert_eq!(buf.last(), Some(&b'\n'));
    }
}
