//! `send-records` (contract 0.1.4): the records of a JSON answer found by the host in one pass,
//! each kept as the API wrote it, so a guest that passes them on never parses them. What else
//! the answer holds comes back as JSON text for the guest's paginator.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// Keys a path may have: a guest names a list a few levels down, not a walk of its own.
pub const MAX_PATH_KEYS: usize = 16;

/// Refuses a records path with no keys or too many, before anything is sent.
pub fn check_path(path: &[String]) -> Result<(), crate::bindings::HttpError> {
    if path.is_empty() || path.len() > MAX_PATH_KEYS {
        return Err(crate::bindings::HttpError::InvalidRequest(format!(
            "a records path has 1 to {MAX_PATH_KEYS} keys, not {}",
            path.len()
        )));
    }
    Ok(())
}

/// Records the host keeps for a page (`forward-records`, or a step's `forward`), and their bytes,
/// bounded by the records-per-page limit and the guest's memory limit: the host holds no more for
/// a guest than the guest could have held itself.
pub struct Forwarded {
    pub records: Vec<String>,
    bytes: usize,
    max_records: usize,
    max_bytes: usize,
    /// Where they are counted, for messages: "in this call", "for this page".
    scope: &'static str,
}

impl Forwarded {
    pub fn new(max_records: usize, max_bytes: usize, scope: &'static str) -> Self {
        Forwarded { records: Vec::new(), bytes: 0, max_records, max_bytes, scope }
    }

    /// Refused before anything is sent when nothing more could be kept.
    pub fn check_room(&self) -> Result<(), crate::bindings::HttpError> {
        if self.records.len() >= self.max_records {
            return Err(crate::bindings::HttpError::InvalidRequest(format!(
                "{} records were forwarded {} already, the limit of records per page",
                self.records.len(),
                self.scope
            )));
        }
        Ok(())
    }

    /// Keeps an answer's records after those kept before; how many, or why not (then none are).
    pub fn keep(&mut self, records: Vec<String>) -> Result<u32, crate::bindings::HttpError> {
        let (count, bytes) = (records.len(), records.iter().map(String::len).sum::<usize>());
        let (limit, scope) = (self.max_records, self.scope);
        if self.records.len() + count > limit {
            return Err(crate::bindings::HttpError::InvalidRequest(format!(
                "forwarding {count} more records makes {} {scope}, past the limit of {limit} records per page",
                self.records.len() + count
            )));
        }
        if self.bytes + bytes > self.max_bytes {
            return Err(crate::bindings::HttpError::InvalidRequest(format!(
                "forwarding {bytes} more bytes of records makes {} {scope}, past the guest's memory limit of {} bytes",
                self.bytes + bytes,
                self.max_bytes
            )));
        }
        self.bytes += bytes;
        self.records.extend(records);
        Ok(u32::try_from(count).expect("at most the records-per-page limit"))
    }
}

/// The records at `path` of a successful (2xx) answer's body, and the rest of it; for any other
/// answer, or a body without such a list, `None` and the body as it came.
pub fn take(status: u16, body: Vec<u8>, path: &[String]) -> (Option<Vec<String>>, Vec<u8>) {
    match (200..300).contains(&status).then(|| split(&body, path)).flatten() {
        Some((records, rest)) => (Some(records), rest),
        None => (None, body),
    }
}

/// The records at `path` in `body` and the body without them, or `None` when the body is not a
/// JSON object holding a list of objects there.
pub fn split(body: &[u8], path: &[String]) -> Option<(Vec<String>, Vec<u8>)> {
    if path.is_empty() || path.len() > MAX_PATH_KEYS {
        return None;
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let (records, rest) = Object { path }.deserialize(&mut de).ok()?;
    de.end().ok()?;
    let records = records?;
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        let text = record.get();
        if !text.starts_with('{') {
            return None;
        }
        out.push(text.to_string());
    }
    Some((out, rest.into_bytes()))
}

/// An object on the way to the records: the records (when the path ran through it) and the
/// object's text without them, its other members as they were written.
struct Object<'p> {
    path: &'p [String],
}

type Found<'de> = (Option<Vec<&'de RawValue>>, String);

impl<'de> DeserializeSeed<'de> for Object<'_> {
    type Value = Found<'de>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for Object<'_> {
    type Value = Found<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut records = None;
        let mut rest = String::from("{");
        let member = |rest: &mut String, key: &str, value: &str| {
            if rest.len() > 1 {
                rest.push(',');
            }
            rest.push_str(&serde_json::to_string(key).expect("a string serializes"));
            rest.push(':');
            rest.push_str(value);
        };
        while let Some(key) = map.next_key::<String>()? {
            if key != self.path[0] || records.is_some() {
                let value: &RawValue = map.next_value()?;
                member(&mut rest, &key, value.get());
            } else if self.path.len() == 1 {
                records = Some(map.next_value_seed(List)?);
            } else {
                let (found, inner) = map.next_value_seed(Object { path: &self.path[1..] })?;
                records = found;
                member(&mut rest, &key, &inner);
            }
        }
        rest.push('}');
        Ok((records, rest))
    }
}

/// The list of records, each borrowed as written.
struct List;

impl<'de> DeserializeSeed<'de> for List {
    type Value = Vec<&'de RawValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for List {
    type Value = Vec<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut records = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(record) = seq.next_element::<&'de RawValue>()? {
            records.push(record);
        }
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(keys: &[&str]) -> Vec<String> {
        keys.iter().map(|k| k.to_string()).collect()
    }

    #[test]
    fn records_come_out_as_written_and_the_rest_stays() {
        let body = br#"{"data": [{"id": 1, "n": 1.50}, {"id":2,"tags":["a"]}], "next_cursor": "c2", "total": 7}"#;
        let (records, rest) = split(body, &path(&["data"])).unwrap();
        assert_eq!(records, [r#"{"id": 1, "n": 1.50}"#, r#"{"id":2,"tags":["a"]}"#]);
        let rest: serde_json::Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(rest, serde_json::json!({"next_cursor": "c2", "total": 7}));
    }

    #[test]
    fn a_nested_path_keeps_the_objects_around_it() {
        let body = br#"{"result": {"items": [{"a": 1}], "page": {"next": null}}, "ok": true}"#;
        let (records, rest) = split(body, &path(&["result", "items"])).unwrap();
        assert_eq!(records, [r#"{"a": 1}"#]);
        let rest: serde_json::Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(rest, serde_json::json!({"result": {"page": {"next": null}}, "ok": true}));
    }

    #[test]
    fn keys_that_need_escaping_stay_valid_json() {
        let body = "{\"da\\\"ta\": [], \"k\\u00e9\": 1, \"data\": [{}]}".as_bytes();
        let (records, rest) = split(body, &path(&["data"])).unwrap();
        assert_eq!(records, ["{}"]);
        let rest: serde_json::Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(rest, serde_json::json!({"da\"ta": [], "k\u{e9}": 1}));
    }

    #[test]
    fn what_is_not_a_list_of_objects_at_the_path_is_none() {
        for body in [
            &br#"[{"id": 1}]"#[..],
            br#"{"data": {"id": 1}}"#,
            br#"{"data": [1, 2]}"#,
            br#"{"data": [{"id": 1}, "x"]}"#,
            br#"{"other": []}"#,
            br#"{"data": [{"id": 1}]"#,
            br#"{"data": [{"id": 1}]} trailing"#,
            b"not json",
            b"",
        ] {
            assert!(split(body, &path(&["data"])).is_none(), "{}", String::from_utf8_lossy(body));
        }
        assert!(split(br#"{"data": []}"#, &[]).is_none(), "an empty path");
        let deep = vec!["a".to_string(); MAX_PATH_KEYS + 1];
        assert!(split(br#"{"a": []}"#, &deep).is_none(), "a path past the limit");
    }

    #[test]
    fn an_empty_list_is_no_records_not_none() {
        let (records, rest) = split(br#"{"data": [], "next": null}"#, &path(&["data"])).unwrap();
        assert!(records.is_empty());
        assert_eq!(rest, br#"{"next":null}"#);
    }

    /// Only the first member named like the path's key holds the records; a repeated key stays
    /// in the rest (JSON parsers differ on duplicates; the host does not pick the last one).
    #[test]
    fn a_repeated_key_is_kept_in_the_rest() {
        let (records, rest) = split(br#"{"data": [{"a":1}], "data": [{"b":2}]}"#, &path(&["data"])).unwrap();
        assert_eq!(records, [r#"{"a":1}"#]);
        assert_eq!(rest, br#"{"data":[{"b":2}]}"#);
    }
}
