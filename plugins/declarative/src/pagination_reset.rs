//! `SimpleRetriever.pagination_reset` and the `RESET_PAGINATION` response action, as the CDK
//! 7.39's `PaginationTracker` runs them: an API that stops paginating past some page (source-
//! freshdesk's "You cannot access tickets beyond the 300th page") is read again from its first
//! page, with the window's start moved to the newest cursor value read (`SPLIT_USING_CURSOR`, on
//! records ordered by the cursor), or from the same start once (`RESET`, or no cursor). A reset
//! that would read the same slice again than allowed is an error, as in the CDK, so it never
//! loops. `limits.number_of_records` resets after that many records too.
//!
//! What the tracker counts travels in the page token ([`Tracker`]): the engine keeps nothing
//! between pages.

use crate::datetime::DateTime;
use crate::engine::{Engine, Scope, kind};
use crate::slicing::Cursor;
use serde_json::{Value, json};
use sluice_guest::{Error, Result};

/// A retriever's reset policy.
pub struct Policy {
    /// `SPLIT_USING_CURSOR` on a stream with a cursor: the slice starts again at the newest value.
    pub split: bool,
    /// `limits.number_of_records`.
    pub limit: Option<u64>,
}

impl Policy {
    /// The retriever's policy: the CDK's default tracker (reset once, no limit) without
    /// `pagination_reset`.
    pub fn of(engine: &Engine, retriever: &Value, cursor: Option<&Cursor>, stream: &str) -> Result<Policy> {
        let Some(reset) = retriever.get("pagination_reset").filter(|r| !r.is_null()) else {
            return Ok(Policy { split: false, limit: None });
        };
        let ctx = engine.context(reset, &Scope::default(), Vec::new());
        let split = match engine.text(reset.get("action"), &ctx)?.as_str() {
            "SPLIT_USING_CURSOR" => cursor.is_some(),
            "RESET" => false,
            other => {
                return Err(Error::config(format!(
                    "stream {stream}: retriever.pagination_reset: Unknown PaginationReset action: {other}"
                )));
            }
        };
        let limit = match reset.get("limits").filter(|l| kind(l) == "PaginationResetLimits" || l.is_object()) {
            None => None,
            Some(limits) => match engine.value(limits.get("number_of_records"), &ctx)? {
                Value::Null => None,
                v => Some(v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
                    Error::config(format!(
                        "stream {stream}: retriever.pagination_reset.limits.number_of_records must be a positive \
                         integer, got {v}"
                    ))
                })?),
            },
        };
        let filtered = retriever["record_selector"].get("record_filter").is_some_and(|f| !f.is_null());
        if limit.is_some() && filtered {
            // The CDK's own words.
            return Err(Error::config(format!(
                "stream {stream}: PaginationResetLimits are not supported while having record filter."
            )));
        }
        Ok(Policy { split, limit })
    }

    /// Resets with the same slice allowed in a row: none with a cursor to split by (the slice
    /// must move), one otherwise (a retry).
    fn allowed_same_slice(&self) -> u32 {
        if self.split { 1 } else { 2 }
    }
}

/// What the tracker has seen since the partition's pagination began (or last reset).
#[derive(Default, Clone, Debug, PartialEq)]
pub struct Tracker {
    /// Records read since the last reset.
    pub records: u64,
    /// Resets in a row that left the slice where it was.
    pub same_slice: u32,
    /// The newest cursor value read in the partition (kept across resets, as the CDK's cursor).
    pub newest: Option<DateTime>,
}

impl Tracker {
    pub fn parse(token: &Value) -> Option<Tracker> {
        let t = token.get("reset")?;
        Some(Tracker {
            records: t.get("records").and_then(Value::as_u64).unwrap_or(0),
            same_slice: t.get("same").and_then(Value::as_u64).unwrap_or(0) as u32,
            newest: t.get("newest").and_then(Value::as_i64).and_then(DateTime::from_timestamp_micros),
        })
    }

    /// The tracker in a page token (nothing when it has seen nothing).
    pub fn write(&self, token: &mut Value) {
        if *self != Tracker::default() {
            token["reset"] = json!({"records": self.records, "same": self.same_slice, "newest": self.newest.map(|n| n.timestamp_micros())});
        }
    }

    /// Counts a page's records (and their newest cursor value).
    pub fn observe(&mut self, count: usize, newest: Option<DateTime>) {
        self.records += count as u64;
        if newest > self.newest {
            self.newest = newest;
        }
    }

    pub fn reached_limit(&self, policy: &Policy) -> bool {
        policy.limit.is_some_and(|limit| self.records >= limit)
    }

    /// A reset: where the slice starts now (`start` as it was, or the newest value read), or an
    /// error when the slice would be read again more often than allowed.
    pub fn reset(&mut self, policy: &Policy, start: Option<DateTime>, stream: &str) -> Result<Option<DateTime>> {
        let moved = match (policy.split, self.newest) {
            (true, Some(newest)) => Some(newest),
            _ => start,
        };
        if moved == start {
            self.same_slice += 1;
            let allowed = policy.allowed_same_slice();
            if self.same_slice >= allowed {
                return Err(Error::system(format!(
                    "stream {stream}: the pagination was reset with the same slice again: There were {} attempts \
                     with the same slice already while the max allowed is {allowed}",
                    self.same_slice
                )));
            }
        } else {
            self.same_slice = 0;
        }
        self.records = 0;
        Ok(moved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Option<DateTime> {
        DateTime::from_timestamp(secs, 0)
    }

    #[test]
    fn a_split_moves_the_start_and_refuses_the_same_slice_twice() {
        let split = Policy { split: true, limit: None };
        let mut t = Tracker::default();
        t.observe(2, at(20));
        assert_eq!(t.reset(&split, at(10), "s").unwrap(), at(20));
        assert_eq!((t.records, t.same_slice), (0, 0));
        // Nothing newer since: the same slice again is refused.
        assert!(t.reset(&split, at(20), "s").unwrap_err().to_string().contains("max allowed is 1"));
    }

    #[test]
    fn a_reset_without_a_cursor_retries_once() {
        let reset = Policy { split: false, limit: Some(3) };
        let mut t = Tracker::default();
        t.observe(2, None);
        assert!(!t.reached_limit(&reset));
        t.observe(2, None);
        assert!(t.reached_limit(&reset));
        assert_eq!(t.reset(&reset, None, "s").unwrap(), None);
        assert!(t.reset(&reset, None, "s").unwrap_err().to_string().contains("2 attempts"));
    }

    #[test]
    fn the_tracker_travels_in_the_token() {
        let mut token = json!({"next": 3});
        Tracker::default().write(&mut token);
        assert!(token.get("reset").is_none());
        let t = Tracker { records: 4, same_slice: 1, newest: at(99) };
        t.write(&mut token);
        assert_eq!(Tracker::parse(&token), Some(t));
    }
}
