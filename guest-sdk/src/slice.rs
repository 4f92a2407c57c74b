//! Slicing helpers: cut a stream into date-time windows the host can checkpoint one by one.
//!
//! A window is a partition whose cursor range is `(start, end]`: records with a cursor value
//! after `start`, up to and including `end`. The host records finished windows and, on the next
//! run, skips them or starts them where the last run stopped.

use crate::{CursorRange, CursorValue, Error, Partition, Result, json};

/// Seconds since the Unix epoch of an RFC 3339 date-time (`2024-01-31T12:00:00Z`, an offset such
/// as `+02:00`, or fractional seconds, which are dropped).
pub fn parse_rfc3339(text: &str) -> Result<i64> {
    let bad = || Error::Config(format!("not an RFC 3339 date-time: {text:?}"));
    let b = text.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't' | b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return Err(bad());
    }
    let num = |range: std::ops::Range<usize>| -> Result<i64> {
        text.get(range).filter(|s| s.bytes().all(|c| c.is_ascii_digit())).and_then(|s| s.parse().ok()).ok_or_else(bad)
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    let mut rest = &text[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) && &rest[3..4] == ":" => {
            let h: i64 = rest[1..3].parse().map_err(|_| bad())?;
            let m: i64 = rest[4..6].parse().map_err(|_| bad())?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => return Err(bad()),
    };
    Ok(days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// The RFC 3339 form (`Z`, whole seconds) of seconds since the Unix epoch.
pub fn format_rfc3339(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

// Howard Hinnant's algorithms for the proleptic Gregorian calendar.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Windows of `step_secs` covering `(from, to]`: the first starts at `from`, the others at
/// multiples of the step since the epoch, so they are the same in every run. Each is a partition keyed by its bounds. The last window
/// ends at `to`, never after: the host records finished windows, and a window reaching past what
/// the API holds (the future, say) would be marked finished before its records exist.
pub fn datetime_windows(stream: &str, from: i64, to: i64, step_secs: i64) -> Result<Vec<Partition>> {
    if step_secs <= 0 {
        return Err(Error::Config(format!("a window must be longer than 0 seconds, got {step_secs}")));
    }
    let mut start = from;
    let mut windows = Vec::new();
    while start < to {
        let end = ((start.div_euclid(step_secs) + 1) * step_secs).min(to);
        let (s, e) = (format_rfc3339(start), format_rfc3339(end));
        let mut partition = Partition::keyed(stream, json!({"start": s, "end": e}))?;
        partition.cursor_range =
            Some(CursorRange { start: Some(CursorValue::Datetime(s)), end: Some(CursorValue::Datetime(e)) });
        windows.push(partition);
        start = end;
    }
    Ok(windows)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table every SDK's tests run (guest-sdk/cases).
    #[test]
    fn the_shared_cases() {
        let cases: serde_json::Value = serde_json::from_str(include_str!("../cases/slice.json")).unwrap();
        for c in cases["parse_rfc3339"].as_array().unwrap() {
            match parse_rfc3339(c["text"].as_str().unwrap()) {
                Ok(secs) => assert_eq!(json!(secs), c["secs"], "{c}"),
                Err(e) => assert!(matches!(e, Error::Config(_)) && c["error"] == "config", "{c}: {e:?}"),
            }
        }
        for c in cases["datetime_windows"].as_array().unwrap() {
            let n = |k: &str| c[k].as_i64().unwrap();
            match datetime_windows("s", n("from"), n("to"), n("step")) {
                Ok(windows) => {
                    let keys: Vec<_> = windows.iter().map(|w| w.key.clone()).collect();
                    assert_eq!(json!(keys), c["keys"], "{c}");
                }
                Err(e) => assert!(matches!(e, Error::Config(_)) && c["error"] == "config", "{c}: {e:?}"),
            }
        }
    }

    #[test]
    fn rfc3339_round_trips() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z").unwrap(), 0);
        assert_eq!(parse_rfc3339("2024-01-01T00:00:00Z").unwrap(), 1_704_067_200);
        assert_eq!(parse_rfc3339("2024-01-01T02:00:00+02:00").unwrap(), 1_704_067_200);
        assert_eq!(parse_rfc3339("2024-02-29T12:30:45.123Z").unwrap(), 1_709_209_845);
        for secs in [0, 951_782_400, 1_704_067_200, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&format_rfc3339(secs)).unwrap(), secs);
        }
        for bad in ["", "2024-01-01", "2024-13-01T00:00:00Z", "2024-01-01T00:00:00", "2024-01-01T00:00:00.Z"] {
            assert!(parse_rfc3339(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn windows_are_aligned_and_cover_the_range() {
        let w = datetime_windows("s", 1_704_067_200 + 60, 1_704_067_200 + 7200, 3600).unwrap();
        assert_eq!(w.len(), 2);
        // The first window starts where asked; the next ones on whole steps.
        assert_eq!(w[0].cursor_start(), Some(&CursorValue::Datetime("2024-01-01T00:01:00Z".into())));
        assert_eq!(w[1].cursor_start(), Some(&CursorValue::Datetime("2024-01-01T01:00:00Z".into())));
        assert_eq!(w[1].cursor_end(), Some(&CursorValue::Datetime("2024-01-01T02:00:00Z".into())));
        assert_eq!(w[0].key, json!({"start": "2024-01-01T00:01:00Z", "end": "2024-01-01T01:00:00Z"}));
        assert!(datetime_windows("s", 0, 10, 0).is_err());
        assert!(datetime_windows("s", 10, 10, 5).unwrap().is_empty());
        // The last window stops at `to`.
        let w = datetime_windows("s", 0, 90, 60).unwrap();
        assert_eq!(w[1].cursor_end(), Some(&CursorValue::Datetime(format_rfc3339(90))));
    }
}
