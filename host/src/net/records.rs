//! `send-records` (contract 0.1.4): the records of a JSON answer found by the host in one pass,
//! each kept as the API wrote it, so a guest that passes them on never parses them. What else
//! the answer holds comes back as JSON text for the guest's paginator.

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::cell::Cell;
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

/// An answer held more records at its path than may be taken out: found while it was split,
/// counting, before they were copied (a 32 MiB answer of 11 million `{}` used to make the host
/// hold 824 MiB of them first). Past `max` they are only counted, nothing kept of them.
#[derive(Debug, PartialEq)]
pub struct TooMany {
    pub max: usize,
    /// How many records the list holds.
    pub count: usize,
}

/// Records taken out of an answer (when it held them) and the rest of it.
pub type Taken = (Option<Vec<String>>, Vec<u8>);

/// The records at `path` and the rest, or `None` when there is no list of objects there.
pub type Split = Option<(Vec<String>, Vec<u8>)>;

/// The records at `path` of a successful (2xx) answer's body, and the rest of it; for any other
/// answer, or a body without such a list, `None` and the body as it came. More than
/// `max_records` there is [`TooMany`].
pub fn take(status: u16, body: Vec<u8>, path: &[String], max_records: usize) -> Result<Taken, TooMany> {
    if !(200..300).contains(&status) {
        return Ok((None, body));
    }
    match split(&body, path, max_records)? {
        Some((records, rest)) => Ok((Some(records), rest)),
        None => Ok((None, body)),
    }
}

/// The records at `path` in `body` and the body without them, or `None` when the body is not a
/// JSON object holding a list of objects there; past `max_records` there, [`TooMany`] (counted
/// as the list is read: nothing is kept of a list that is too long).
pub fn split(body: &[u8], path: &[String], max_records: usize) -> Result<Split, TooMany> {
    if path.is_empty() || path.len() > MAX_PATH_KEYS {
        return Ok(None);
    }
    let too_many = Cell::new(None);
    let mut de = serde_json::Deserializer::from_slice(body);
    let found = Object { path, max: max_records, too_many: &too_many }.deserialize(&mut de);
    if let Some(count) = too_many.get() {
        return Err(TooMany { max: max_records, count });
    }
    let Ok((records, rest)) = found else { return Ok(None) };
    if de.end().is_err() {
        return Ok(None);
    }
    let Some(records) = records else { return Ok(None) };
    let mut out = Vec::with_capacity(records.len());
    for record in records {
        out.push(record.get().to_string());
    }
    Ok(Some((out, rest.into_bytes())))
}

/// An object on the way to the records: the records (when the path ran through it) and the
/// object's text without them, its other members as they were written.
struct Object<'p> {
    path: &'p [String],
    max: usize,
    too_many: &'p Cell<Option<usize>>,
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
    /// A repeated key on the path is read as Python's `json`, serde_json and JavaScript read
    /// it (and so the Airbyte CDK and the declarative engine): its last value counts. The member
    /// the path runs through goes last in the rest (members' order means nothing once no key
    /// repeats), so a repeat costs no copy of what came before it.
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
        // The last object the path ran through, without its records.
        let mut on_path: Option<String> = None;
        while let Some(key) = map.next_key::<String>()? {
            if key != self.path[0] {
                let value: &RawValue = map.next_value()?;
                member(&mut rest, &key, value.get());
            } else if self.path.len() == 1 {
                records = Some(map.next_value_seed(List { max: self.max, too_many: self.too_many })?);
            } else {
                let inner = Object { path: &self.path[1..], max: self.max, too_many: self.too_many };
                let (found, inner) = map.next_value_seed(inner)?;
                records = found;
                on_path = Some(inner);
            }
        }
        if let Some(inner) = on_path {
            member(&mut rest, &self.path[0], &inner);
        }
        rest.push('}');
        Ok((records, rest))
    }
}

/// The list of records, each borrowed as written, at most `max` of them (past it the rest are
/// counted, not kept, and the list is refused with `too_many` set to the count); each must be
/// an object.
struct List<'p> {
    max: usize,
    too_many: &'p Cell<Option<usize>>,
}

impl<'de> DeserializeSeed<'de> for List<'_> {
    type Value = Vec<&'de RawValue>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for List<'_> {
    type Value = Vec<&'de RawValue>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of records")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut records = Vec::new();
        while let Some(record) = seq.next_element::<&'de RawValue>()? {
            if !record.get().starts_with('{') {
                return Err(serde::de::Error::custom("a record is not an object"));
            }
            if records.len() == self.max {
                let mut count = records.len() + 1;
                drop(records);
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    count += 1;
                }
                self.too_many.set(Some(count));
                return Err(serde::de::Error::custom("too many records"));
            }
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
        let (records, rest) = split(body, &path(&["data"]), 100).unwrap().unwrap();
        assert_eq!(records, [r#"{"id": 1, "n": 1.50}"#, r#"{"id":2,"tags":["a"]}"#]);
        let rest: serde_json::Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(rest, serde_json::json!({"next_cursor": "c2", "total": 7}));
    }

    #[test]
    fn a_nested_path_keeps_the_objects_around_it() {
        let body = br#"{"result": {"items": [{"a": 1}], "page": {"next": null}}, "ok": true}"#;
        let (records, rest) = split(body, &path(&["result", "items"]), 100).unwrap().unwrap();
        assert_eq!(records, [r#"{"a": 1}"#]);
        let rest: serde_json::Value = serde_json::from_slice(&rest).unwrap();
        assert_eq!(rest, serde_json::json!({"result": {"page": {"next": null}}, "ok": true}));
    }

    #[test]
    fn keys_that_need_escaping_stay_valid_json() {
        let body = "{\"da\\\"ta\": [], \"k\\u00e9\": 1, \"data\": [{}]}".as_bytes();
        let (records, rest) = split(body, &path(&["data"]), 100).unwrap().unwrap();
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
            assert!(split(body, &path(&["data"]), 100).unwrap().is_none(), "{}", String::from_utf8_lossy(body));
        }
        assert!(split(br#"{"data": []}"#, &[], 100).unwrap().is_none(), "an empty path");
        let deep = vec!["a".to_string(); MAX_PATH_KEYS + 1];
        assert!(split(br#"{"a": []}"#, &deep, 100).unwrap().is_none(), "a path past the limit");
    }

    #[test]
    fn an_empty_list_is_no_records_not_none() {
        let (records, rest) = split(br#"{"data": [], "next": null}"#, &path(&["data"]), 100).unwrap().unwrap();
        assert!(records.is_empty());
        assert_eq!(rest, br#"{"next":null}"#);
    }

    /// A repeated key is read as JSON parsers that keep the last value read it (Python's, and
    /// so the Airbyte CDK's; serde_json, and so the declarative engine's): the last list holds
    /// the records, and of a repeated object on the path the rest keeps the last one.
    #[test]
    fn a_repeated_key_holds_its_last_value() {
        let (records, rest) =
            split(br#"{"data": [{"a":1}], "next": 1, "data": [{"b":2}]}"#, &path(&["data"]), 100).unwrap().unwrap();
        assert_eq!(records, [r#"{"b":2}"#]);
        assert_eq!(rest, br#"{"next":1}"#);
        let body = br#"{"r": {"items": [{"a":1}], "n": 1}, "x": 2, "r": {"items": [{"b":2}], "n": 3}}"#;
        let (records, rest) = split(body, &path(&["r", "items"]), 100).unwrap().unwrap();
        assert_eq!(records, [r#"{"b":2}"#]);
        assert_eq!(rest, br#"{"x":2,"r":{"n":3}}"#);
        // What serde_json reads of the whole body, records put back, is what the split gives.
        let whole: serde_json::Value = serde_json::from_slice(body).unwrap();
        assert_eq!(whole["r"]["items"][0], serde_json::json!({"b": 2}));
    }

    /// 11.2 million `{}` in a 32 MiB answer were all taken out (824 MiB) before any limit
    /// applied: they are counted while the list is read, and refused past the limit.
    #[test]
    fn records_past_the_limit_are_refused_while_splitting() {
        let mut body = String::from(r#"{"data": ["#);
        body.push_str(&vec!["{}"; 1_000_000].join(","));
        body.push_str("]}");
        assert_eq!(split(body.as_bytes(), &path(&["data"]), 1000), Err(TooMany { max: 1000, count: 1_000_000 }));
        let taken = take(200, body.clone().into_bytes(), &path(&["data"]), 1000);
        assert!(matches!(taken, Err(TooMany { max: 1000, count: 1_000_000 })));
        // Not an answer's records: left alone, whatever it holds.
        assert!(take(500, body.into_bytes(), &path(&["data"]), 1000).unwrap().0.is_none());
        let (records, _) = split(br#"{"data": [{}, {}]}"#, &path(&["data"]), 2).unwrap().unwrap();
        assert_eq!(records.len(), 2, "exactly the limit is fine");
        let nested = br#"{"r": {"items": [{}, {}, {}]}}"#;
        assert_eq!(split(nested, &path(&["r", "items"]), 2), Err(TooMany { max: 2, count: 3 }));
    }
}
