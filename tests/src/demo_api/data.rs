//! The demo data set: deterministic items and accounts, and the RFC 3339 handling they need.
//!
//! Nothing is stored: every record is computed from its id, so the server can serve millions of
//! items without holding them in memory.

use serde::Serialize;

/// 2024-01-01T00:00:00Z in seconds since the Unix epoch; item `i` was updated `i` minutes later.
pub const ITEMS_EPOCH: i64 = 1_704_067_200;

/// Every account was created at the same instant.
pub const ACCOUNT_CREATED_AT: &str = "2023-01-01T00:00:00Z";

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Item {
    pub id: u64,
    pub name: String,
    pub account_id: u64,
    pub amount: u64,
    pub updated_at: String,
    /// What a real API's record carries besides (`DemoApiConfig::rich_records`): ~280 bytes in all.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub details: Option<Details>,
}

/// A customer's contact and tags: a nested object, an array, a boolean and a decimal, as real
/// records have.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Details {
    pub email: String,
    pub address: Address,
    pub tags: Vec<String>,
    pub active: bool,
    /// A decimal, kept as text so `Item` stays `Eq`; written as a JSON number.
    #[serde(serialize_with = "as_number")]
    pub score: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Address {
    pub street: String,
    pub city: &'static str,
    pub postcode: String,
    pub country: &'static str,
}

fn as_number<S: serde::Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    let n: serde_json::Number = text.parse().map_err(serde::ser::Error::custom)?;
    n.serialize(s)
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Account {
    pub id: u64,
    pub name: String,
    pub created_at: &'static str,
}

/// Item `id` of a data set with `accounts` accounts (`accounts` must be at least 1).
pub fn item(id: u64, accounts: u64) -> Item {
    Item {
        id,
        name: format!("item-{id}"),
        account_id: (id - 1) % accounts + 1,
        amount: (id * 7) % 1000,
        updated_at: format_rfc3339(item_updated_at(id)),
        details: None,
    }
}

/// Item `id` with its [`Details`], as `rich_records` serves it.
pub fn rich_item(id: u64, accounts: u64) -> Item {
    const CITIES: [&str; 4] = ["Springfield", "Rivertown", "Lakeside", "Hillcrest"];
    const COUNTRIES: [&str; 3] = ["US", "DE", "JP"];
    Item {
        details: Some(Details {
            email: format!("customer-{id}@example.com"),
            address: Address {
                street: format!("{} Main Street", id % 900 + 100),
                city: CITIES[(id % 4) as usize],
                postcode: format!("{:05}", id * 37 % 100_000),
                country: COUNTRIES[(id % 3) as usize],
            },
            tags: vec![
                format!("tier-{}", id % 5),
                format!("region-{}", COUNTRIES[(id % 3) as usize].to_lowercase()),
                "customer".into(),
            ],
            active: !id.is_multiple_of(7),
            score: format!("{}.{}", id % 100, id % 10),
        }),
        ..item(id, accounts)
    }
}

/// `updated_at` of item `id`, in epoch seconds; strictly increasing with the id.
pub fn item_updated_at(id: u64) -> i64 {
    ITEMS_EPOCH + 60 * id as i64
}

pub fn account(id: u64) -> Account {
    Account { id, name: format!("account-{id}"), created_at: ACCOUNT_CREATED_AT }
}

/// Which items a listing or a report covers. Items are always visited in id order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ItemFilter {
    /// Number of items in the data set.
    pub records: u64,
    /// Number of accounts in the data set (at least 1 when `records` > 0).
    pub accounts: u64,
    /// Only items of this account.
    pub account_id: Option<u64>,
    /// Only items whose `updated_at` is strictly after this instant (epoch seconds, floored).
    pub updated_after: Option<i64>,
    /// Only items whose `updated_at` is at or before this instant (epoch seconds, floored).
    pub updated_until: Option<i64>,
}

impl ItemFilter {
    /// The first matching id strictly greater than `after`, if any.
    ///
    /// Computed arithmetically rather than by scanning, so paging stays O(page size) however
    /// large the data set is.
    pub fn first_after(&self, after: u64) -> Option<u64> {
        let mut lower = after.saturating_add(1);
        if let Some(ts) = self.updated_after {
            // item i matches iff ITEMS_EPOCH + 60 i > ts, i.e. i > floor((ts - ITEMS_EPOCH) / 60).
            let min_id = (ts - ITEMS_EPOCH).div_euclid(60) + 1;
            lower = lower.max(u64::try_from(min_id).unwrap_or(0));
        }
        let candidate = match self.account_id {
            None => lower,
            Some(account) => {
                // Items of an account are every `accounts`-th id, starting at the account id.
                let n = self.accounts;
                let rem = (lower - 1) % n;
                lower.checked_add((account - 1 + n - rem) % n)?
            }
        };
        (candidate <= self.last_id()).then_some(candidate)
    }

    /// The highest id the time window allows (0 when it allows none), ignoring the account.
    ///
    /// Flooring `updated_until` is exact: item timestamps are whole seconds, and for a whole
    /// `t`, `t <= s + frac` (0 <= frac < 1) holds exactly when `t <= s`.
    fn last_id(&self) -> u64 {
        match self.updated_until {
            None => self.records,
            // item i matches iff ITEMS_EPOCH + 60 i <= ts, i.e. i <= floor((ts - ITEMS_EPOCH) / 60).
            Some(ts) => {
                let max_id = (ts - ITEMS_EPOCH).div_euclid(60);
                self.records.min(u64::try_from(max_id).unwrap_or(0))
            }
        }
    }

    /// Distance between two consecutive matching ids.
    fn step(&self) -> u64 {
        if self.account_id.is_some() { self.accounts } else { 1 }
    }

    /// Up to `limit` matching ids after `after`, and whether more remain after them.
    pub fn page(&self, after: u64, limit: u64) -> (Vec<u64>, bool) {
        let ids: Vec<u64> = self.ids_after(after).take(limit as usize).collect();
        let more = match ids.last() {
            Some(&last) => self.first_after(last).is_some(),
            None => false,
        };
        (ids, more)
    }

    /// All matching ids after `after`, in order.
    pub fn ids_after(&self, after: u64) -> impl Iterator<Item = u64> + use<> {
        let (step, last) = (self.step(), self.last_id());
        let first = self.first_after(after);
        std::iter::successors(first, move |&id| id.checked_add(step).filter(|&n| n <= last))
    }
}

/// Formats epoch seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}Z")
}

/// Parses an RFC 3339 timestamp (`YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)`) to epoch seconds,
/// rounded down.
///
/// Dropping the fraction is exact for our purpose: item timestamps are whole seconds, and for a
/// whole `t`, `t > s + frac` (0 <= frac < 1) holds exactly when `t > s`.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        digits.iter().try_fold(0i64, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + i64::from(c - b'0')))
    };
    let sep = |i: usize, want: &[u8]| b.get(i).is_some_and(|c| want.contains(c));

    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let separators_ok = sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt") && sep(13, b":") && sep(16, b":");
    if !separators_ok
        || !(1..=12).contains(&month)
        || day < 1
        || day > days_in_month(year, month)
        || hour > 23
        || minute > 59
        || second > 59
    {
        return None;
    }

    let mut rest = &b[19..];
    if let Some(frac) = rest.strip_prefix(b".") {
        let digits = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        b"Z" | b"z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let two = |a: u8, b: u8| {
                (a.is_ascii_digit() && b.is_ascii_digit()).then(|| i64::from(a - b'0') * 10 + i64::from(b - b'0'))
            };
            let (oh, om) = (two(*h1, *h2)?, two(*m1, *m2)?);
            if oh > 23 || om > 59 {
                return None;
            }
            let offset = oh * 3600 + om * 60;
            if *sign == b'-' { -offset } else { offset }
        }
        _ => return None,
    };

    let local = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some(local - offset)
}

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        2 if is_leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400; // [0, 399]
    let mp = (m + 9) % 12; // March = 0
    let doy = (153 * mp + 2) / 5 + d - 1; // [0, 365]
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy; // [0, 146096]
    era * 146_097 + doe - 719_468
}

/// Proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // March = 0
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rich records are the plain ones plus their details, about 280 bytes, numbers as numbers.
    #[test]
    fn rich_items_carry_details_of_a_realistic_size() {
        let plain = serde_json::to_value(item(12345, 5)).unwrap();
        let rich = serde_json::to_value(rich_item(12345, 5)).unwrap();
        for (k, v) in plain.as_object().unwrap() {
            assert_eq!(&rich[k], v, "{k}");
        }
        assert_eq!(rich["address"]["city"], "Rivertown", "12345 % 4 is 1");
        assert_eq!(rich["score"], serde_json::json!(45.5));
        assert!(rich["tags"].as_array().unwrap().len() == 3 && rich["active"] == true);
        let size = serde_json::to_string(&rich).unwrap().len();
        assert!((250..=320).contains(&size), "{size} bytes: {rich}");
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(ITEMS_EPOCH), "2024-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(ITEMS_EPOCH + 59 * 86_400), "2024-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(format_rfc3339(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(format_rfc3339(-1), "1969-12-31T23:59:59Z");
        assert_eq!(item(1, 5).updated_at, "2024-01-01T00:01:00Z");
        assert_eq!(item(61, 5).updated_at, "2024-01-01T01:01:00Z");
        assert_eq!(item(1440, 5).updated_at, "2024-01-02T00:00:00Z");
    }

    #[test]
    fn day_conversion_round_trips() {
        // 1600-01-01 .. 2400-01-01, covering every leap-year rule.
        for days in -135_140..157_000 {
            let (y, m, d) = civil_from_days(days);
            assert!((1..=days_in_month(y, m)).contains(&d), "{y}-{m}-{d}");
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn parses_what_it_formats() {
        for secs in [0, ITEMS_EPOCH, ITEMS_EPOCH + 60 * 123_457, 951_782_400 + 86_399] {
            assert_eq!(parse_rfc3339(&format_rfc3339(secs)), Some(secs));
        }
    }

    #[test]
    fn parses_fractions_and_offsets() {
        let base = ITEMS_EPOCH + 40 * 60;
        assert_eq!(parse_rfc3339("2024-01-01T00:40:00.5Z"), Some(base));
        assert_eq!(parse_rfc3339("2024-01-01T00:40:59.999999999Z"), Some(base + 59));
        assert_eq!(parse_rfc3339("2024-01-01t00:40:00z"), Some(base));
        assert_eq!(parse_rfc3339("2024-01-01T02:40:00+02:00"), Some(base));
        assert_eq!(parse_rfc3339("2023-12-31T22:40:00-01:30"), Some(base - 30 * 60));
    }

    #[test]
    fn rejects_malformed_timestamps() {
        for bad in [
            "",
            "yesterday",
            "2024-01-01",
            "2024-01-01T00:00:00",
            "2024-01-01 00:00:00Z",
            "2024-01-01T00:00:00.Z",
            "2024-01-01T00:00:00ZZ",
            "2024-02-30T00:00:00Z",
            "2023-02-29T00:00:00Z",
            "2024-13-01T00:00:00Z",
            "2024-00-01T00:00:00Z",
            "2024-01-01T24:00:00Z",
            "2024-01-01T00:60:00Z",
            "2024-01-01T00:00:60Z",
            "2024-01-01T00:00:00+2:00",
            "+024-01-01T00:00:00Z",
            "2024-01-01T00:00:00+24:00",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn filter_matches_a_brute_force_scan() {
        let (records, accounts) = (50, 4);
        let after_ts = [None, Some(ITEMS_EPOCH + 60 * 17), Some(ITEMS_EPOCH + 60 * 17 + 30), Some(0)];
        let until_ts = [
            None,
            Some(ITEMS_EPOCH + 60 * 33),
            Some(ITEMS_EPOCH + 60 * 33 + 59),
            Some(ITEMS_EPOCH + 60 * 17),
            Some(ITEMS_EPOCH + 59),
            Some(0),
            Some(ITEMS_EPOCH + 60 * 1000),
        ];
        for account_id in [None, Some(1), Some(3), Some(4)] {
            for updated_after in after_ts {
                for updated_until in until_ts {
                    let filter = ItemFilter { records, accounts, account_id, updated_after, updated_until };
                    for after in 0..=records + 1 {
                        let expected: Vec<u64> = (after + 1..=records)
                            .filter(|&i| account_id.is_none_or(|a| item(i, accounts).account_id == a))
                            .filter(|&i| updated_after.is_none_or(|ts| item_updated_at(i) > ts))
                            .filter(|&i| updated_until.is_none_or(|ts| item_updated_at(i) <= ts))
                            .collect();
                        let got: Vec<u64> = filter.ids_after(after).collect();
                        assert_eq!(got, expected, "{filter:?} after {after}");
                        let (page, more) = filter.page(after, 3);
                        assert_eq!(page, expected[..expected.len().min(3)], "{filter:?} after {after}");
                        assert_eq!(more, expected.len() > 3, "{filter:?} after {after}: more");
                    }
                }
            }
        }
    }

    #[test]
    fn page_reports_whether_more_remain() {
        let filter =
            ItemFilter { records: 10, accounts: 1, account_id: None, updated_after: None, updated_until: None };
        assert_eq!(filter.page(0, 4), (vec![1, 2, 3, 4], true));
        assert_eq!(filter.page(6, 4), (vec![7, 8, 9, 10], false));
        assert_eq!(filter.page(10, 4), (vec![], false));
        // A window ending exactly at a page boundary leaves nothing after it.
        let window = ItemFilter { updated_until: Some(item_updated_at(8)), ..filter };
        assert_eq!(window.page(0, 4), (vec![1, 2, 3, 4], true));
        assert_eq!(window.page(4, 4), (vec![5, 6, 7, 8], false));
    }
}
