//! Singer tap messages: SCHEMA before a stream's records, RECORD, and STATE as one whole-tap value
//! (`{"bookmarks": {stream: state}}`).

use serde_json::{Map, Value, json};

pub fn schema(stream: &str, schema: &Value, primary_key: &[Vec<String>], cursor_field: Option<&[String]>) -> Value {
    // Singer key properties are top-level field names; nested keys cannot be expressed.
    let keys: Vec<&str> = primary_key.iter().filter(|p| p.len() == 1).map(|p| p[0].as_str()).collect();
    let mut message = json!({"type": "SCHEMA", "stream": stream, "schema": schema, "key_properties": keys});
    if let Some(cursor) = cursor_field.filter(|c| c.len() == 1) {
        message["bookmark_properties"] = json!([cursor[0]]);
    }
    message
}

/// Appends one RECORD line; `data` passed the record checks.
pub fn push_record(buf: &mut Vec<u8>, stream_json: &str, data: &str, time_extracted: &str) {
    buf.extend_from_slice(b"{\"type\":\"RECORD\",\"stream\":");
    buf.extend_from_slice(stream_json.as_bytes());
    buf.extend_from_slice(b",\"record\":");
    buf.extend_from_slice(data.as_bytes());
    buf.extend_from_slice(b",\"time_extracted\":\"");
    buf.extend_from_slice(time_extracted.as_bytes());
    buf.extend_from_slice(b"\"}\n");
}

/// The whole-tap STATE line, written from the bookmarks as they are (not a copy).
pub fn state_line(bookmarks: &Map<String, Value>) -> Vec<u8> {
    let mut line = br#"{"type":"STATE","value":{"bookmarks":"#.to_vec();
    super::append_json(&mut line, bookmarks);
    line.extend_from_slice(b"}}\n");
    line
}

/// An RFC 3339 UTC timestamp with milliseconds, for `time_extracted`.
pub fn timestamp(unix_ms: u64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(unix_ms as i128 * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        t.millisecond()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_line() {
        let mut buf = Vec::new();
        push_record(&mut buf, "\"items\"", r#"{"id":1}"#, &timestamp(1_700_000_000_123));
        let v: Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(
            v,
            json!({"type": "RECORD", "stream": "items", "record": {"id": 1}, "time_extracted": "2023-11-14T22:13:20.123Z"})
        );
    }

    #[test]
    fn state_line_holds_every_bookmark() {
        let mut bookmarks = Map::new();
        bookmarks.insert("items".into(), json!({"cursor": 5}));
        let line = state_line(&bookmarks);
        assert_eq!(line.last(), Some(&b'\n'));
        let v: Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v, json!({"type": "STATE", "value": {"bookmarks": {"items": {"cursor": 5}}}}));
    }

    #[test]
    fn schema_keys() {
        let keys = vec![vec!["id".to_string()], vec!["a".to_string(), "b".to_string()]];
        let field = ["updated_at".to_string()];
        let s = schema("items", &json!({"type": "object"}), &keys, Some(&field));
        assert_eq!(s["key_properties"], json!(["id"]));
        assert_eq!(s["bookmark_properties"], json!(["updated_at"]));
    }
}
