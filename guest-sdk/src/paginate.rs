//! Pagination helpers. A page token is any JSON value; these helpers give the common kinds a
//! fixed shape so a connector reads `token` and builds the next one in one line each.

use crate::{Error, Result, Value};

/// Page numbers (`?page=N`), starting at `first`. The token is the next page's number.
pub fn page_number(token: Option<&Value>, first: u64) -> Result<u64> {
    number(token, first, "page number")
}

/// The token for the page after `current`, or `None` when this page was short (the last one).
pub fn next_page_number(current: u64, records_on_page: usize, page_size: usize) -> Option<Value> {
    (records_on_page >= page_size && records_on_page > 0).then(|| Value::from(current + 1))
}

/// Offsets (`?offset=N`). The token is the next offset.
pub fn offset(token: Option<&Value>) -> Result<u64> {
    number(token, 0, "offset")
}

/// The token for the page after one that started at `current`, or `None` after a short page.
pub fn next_offset(current: u64, records_on_page: usize, page_size: usize) -> Option<Value> {
    (records_on_page >= page_size && records_on_page > 0).then(|| Value::from(current + records_on_page as u64))
}

/// Opaque cursors or next-page URLs handed out by the API. The token is that string.
pub fn cursor(token: Option<&Value>) -> Result<Option<&str>> {
    match token {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(Error::System(format!("expected a cursor string as page token, got {other}"))),
    }
}

/// The token for an API's next cursor or next URL; `None` (or an empty string) ends the partition.
pub fn next_cursor(next: Option<&str>) -> Option<Value> {
    next.filter(|s| !s.is_empty()).map(Value::from)
}

fn number(token: Option<&Value>, default: u64, what: &str) -> Result<u64> {
    match token {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v.as_u64().ok_or_else(|| Error::System(format!("expected a {what} as page token, got {v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table every SDK's tests run (guest-sdk/cases).
    #[test]
    fn the_shared_cases() {
        let cases: Value = serde_json::from_str(include_str!("../cases/paginate.json")).unwrap();
        let n = |c: &Value, k: &str| c[k].as_u64().unwrap();
        for c in cases["next_page_number"].as_array().unwrap() {
            let next = next_page_number(n(c, "current"), n(c, "records_on_page") as usize, n(c, "page_size") as usize);
            assert_eq!(next.unwrap_or(Value::Null), c["next"], "{c}");
        }
        for c in cases["next_offset"].as_array().unwrap() {
            let next = next_offset(n(c, "current"), n(c, "records_on_page") as usize, n(c, "page_size") as usize);
            assert_eq!(next.unwrap_or(Value::Null), c["next"], "{c}");
        }
        for c in cases["page_number"].as_array().unwrap() {
            let token = Some(&c["token"]).filter(|t| !t.is_null());
            match page_number(token, n(c, "first")) {
                Ok(page) => assert_eq!(Value::from(page), c["page"], "{c}"),
                Err(e) => assert!(matches!(e, Error::System(_)) && c["error"] == "system", "{c}: {e:?}"),
            }
        }
        for c in cases["next_cursor"].as_array().unwrap() {
            assert_eq!(next_cursor(c["next"].as_str()).unwrap_or(Value::Null), c["token"], "{c}");
        }
    }

    #[test]
    fn page_numbers_stop_on_short_page() {
        assert_eq!(page_number(None, 1).unwrap(), 1);
        assert_eq!(next_page_number(1, 10, 10), Some(Value::from(2)));
        assert_eq!(next_page_number(2, 3, 10), None);
        assert_eq!(next_page_number(2, 0, 0), None);
        assert_eq!(page_number(Some(&Value::from(5)), 1).unwrap(), 5);
        assert!(page_number(Some(&Value::from("x")), 1).is_err());
    }

    #[test]
    fn offsets_and_cursors() {
        assert_eq!(next_offset(20, 10, 10), Some(Value::from(30)));
        assert_eq!(next_offset(20, 9, 10), None);
        assert_eq!(cursor(Some(&Value::from("abc"))).unwrap(), Some("abc"));
        assert_eq!(next_cursor(Some("")), None);
        assert!(cursor(Some(&Value::from(3))).is_err());
    }
}
