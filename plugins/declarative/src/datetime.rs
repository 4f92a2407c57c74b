//! Datetimes as the Airbyte python CDK handles them: `DatetimeParser` (strptime/strftime plus the
//! CDK's `%s`, `%ms`, `%s_as_float`, `%epoch_microseconds` and `%_ms`), dateutil's `isoparse`
//! (behind `str_to_datetime`), `ab_datetime_parse`, isodate's `parse_duration`, and Python's
//! `str()` of datetimes and timedeltas.
//!
//! Python's datetimes have microsecond resolution; everything here keeps to it.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use chrono::{Datelike, FixedOffset, Months, NaiveDate, NaiveDateTime, NaiveTime, TimeZone, Timelike, Utc, Weekday};
use regex_lite::Regex;

pub type DateTime = chrono::DateTime<chrono::Utc>;
/// A datetime that keeps the offset it was written with, as Python's aware datetimes do.
pub type DateTimeOffset = chrono::DateTime<FixedOffset>;

/// Parses `text` with a CDK datetime format (`DatetimeParser.parse`), converted to UTC.
pub fn parse(text: &str, format: &str) -> Result<DateTime, String> {
    parse_with_offset(text, format).map(|d| d.with_timezone(&Utc))
}

/// `DatetimeParser.parse`, keeping the offset the text had (`+00:00` when it had none).
pub fn parse_with_offset(text: &str, format: &str) -> Result<DateTimeOffset, String> {
    let bad = |what: &str| format!("cannot parse {text:?} with format {format:?}: {what}");
    let utc = |d: DateTime| d.fixed_offset();
    match format {
        "%s" => {
            let secs = py_int(text).ok_or_else(|| bad("not an integer"))?;
            let secs = i64::try_from(secs).map_err(|_| bad("out of range"))?;
            chrono::DateTime::from_timestamp(secs, 0).map(utc).ok_or_else(|| bad("out of range"))
        }
        "%s_as_float" => {
            let secs = py_float(text).ok_or_else(|| bad("not a number"))?;
            from_timestamp_f64(secs).map(utc).ok_or_else(|| bad("out of range"))
        }
        "%epoch_microseconds" | "%ms" => {
            let n = py_int(text).ok_or_else(|| bad("not an integer"))?;
            let micros = if format == "%ms" { n.checked_mul(1000) } else { Some(n) };
            micros
                .and_then(|us| i64::try_from(us).ok())
                .and_then(chrono::DateTime::from_timestamp_micros)
                .map(utc)
                .ok_or_else(|| bad("out of range"))
        }
        _ => {
            let format = if format.contains("%_ms") { format.replace("%_ms", "%f") } else { format.to_string() };
            let (naive, offset) = strptime(text, &format).map_err(|e| bad(&e))?;
            let offset = offset.unwrap_or_else(|| FixedOffset::east_opt(0).unwrap());
            offset.from_local_datetime(&naive).single().ok_or_else(|| bad("out of range"))
        }
    }
}

/// `DatetimeParser.format`: the CDK's whole-format specials, else Python's strftime.
pub fn format(dt: &DateTime, format: &str) -> String {
    format_with_offset(&dt.fixed_offset(), format)
}

/// [`format`] for a datetime that keeps its offset (`%z` writes that offset).
pub fn format_with_offset(dt: &DateTimeOffset, format: &str) -> String {
    let ts = timestamp_f64(&dt.with_timezone(&Utc));
    match format {
        // Python: str(int(dt.timestamp())) and friends: float arithmetic, then truncation.
        "%s" => (ts.trunc() as i64).to_string(),
        "%s_as_float" => py_float_repr(ts),
        "%epoch_microseconds" => ((ts * 1_000_000.0).trunc() as i64).to_string(),
        "%ms" => ((ts * 1000.0).trunc() as i64).to_string(),
        _ => {
            let naive = dt.naive_local();
            let offset = Some(*dt.offset());
            if format.contains("%_ms") {
                let micros = strftime(&naive, offset, "%f");
                let formatted = strftime(&naive, offset, &format.replace("%_ms", "%f"));
                formatted.replace(&micros, &format!("{:03}", naive.nanosecond() / 1000 / 1000))
            } else {
                strftime(&naive, offset, format)
            }
        }
    }
}

/// Python's `datetime.timestamp()` of an aware datetime: microseconds divided as a float.
pub fn timestamp_f64(dt: &DateTime) -> f64 {
    let micros = dt.timestamp() as i128 * 1_000_000 + (dt.timestamp_subsec_micros() as i128);
    micros as f64 / 1_000_000.0
}

/// `datetime.fromtimestamp(float, tz=utc)`: the fraction rounded half-even to microseconds.
pub fn from_timestamp_f64(secs: f64) -> Option<DateTime> {
    if !secs.is_finite() {
        return None;
    }
    let whole = secs.trunc();
    let mut micros = ((secs - whole) * 1e6).round_ties_even() as i64;
    let mut whole = whole as i64;
    if micros >= 1_000_000 {
        whole += 1;
        micros -= 1_000_000;
    } else if micros < 0 {
        whole -= 1;
        micros += 1_000_000;
    }
    chrono::DateTime::from_timestamp(whole, (micros * 1000) as u32)
}

/// Python's `str(datetime)` of a UTC datetime: `2024-01-01 12:00:00+00:00`, with `.123456` when
/// the microseconds are not zero.
pub fn python_str(dt: &DateTime) -> String {
    isoformat(&dt.naive_utc(), Some(FixedOffset::east_opt(0).unwrap()), ' ')
}

/// Python's `datetime.isoformat(sep)` (timespec "auto"); no offset for a naive datetime.
pub fn isoformat(naive: &NaiveDateTime, offset: Option<FixedOffset>, sep: char) -> String {
    let mut s = format!(
        "{:04}-{:02}-{:02}{sep}{:02}:{:02}:{:02}",
        naive.year(),
        naive.month(),
        naive.day(),
        naive.hour(),
        naive.minute(),
        naive.second()
    );
    let micros = naive.nanosecond() / 1000;
    if micros != 0 {
        s.push_str(&format!(".{micros:06}"));
    }
    if let Some(offset) = offset {
        s.push_str(&format_offset(offset.local_minus_utc(), true));
    }
    s
}

/// `+HHMM` (or `+HH:MM`), with seconds only when there are any, as Python writes offsets.
fn format_offset(secs: i32, colon: bool) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    let (h, m, s) = (a / 3600, a / 60 % 60, a % 60);
    let sep = if colon { ":" } else { "" };
    if s != 0 { format!("{sign}{h:02}{sep}{m:02}{sep}{s:02}") } else { format!("{sign}{h:02}{sep}{m:02}") }
}

// ---------------------------------------------------------------------------------------------
// Durations (isodate.parse_duration)

/// An ISO 8601 duration as isodate parses it: calendar months (years folded in), applied first,
/// then an exact span (Python's timedelta, microsecond resolution).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Duration {
    /// Calendar months, years counted as 12.
    pub months: i32,
    /// Whole seconds of the exact part; may be negative.
    pub seconds: i64,
    /// Nanoseconds added to `seconds`, in `0..1_000_000_000` (whole microseconds).
    pub nanos: i64,
}

impl Duration {
    pub fn from_micros(months: i32, micros: i128) -> Duration {
        let seconds = micros.div_euclid(1_000_000) as i64;
        let nanos = (micros.rem_euclid(1_000_000) * 1000) as i64;
        Duration { months, seconds, nanos }
    }

    /// The exact part in microseconds (a timedelta's value).
    pub fn total_micros(&self) -> i128 {
        self.seconds as i128 * 1_000_000 + (self.nanos / 1000) as i128
    }

    pub fn is_zero(&self) -> bool {
        self.months == 0 && self.seconds == 0 && self.nanos == 0
    }

    pub fn neg(&self) -> Duration {
        Duration::from_micros(-self.months, -self.total_micros())
    }

    /// `dt + duration`: calendar months first (the day clamped to the month's last), then the span.
    pub fn add_to(&self, dt: &DateTime) -> DateTime {
        self.checked_add_to(dt).unwrap_or(if self.is_negative() { DateTime::MIN_UTC } else { DateTime::MAX_UTC })
    }

    /// `dt - duration`, as isodate does it: `dt + (-duration)`.
    pub fn sub_from(&self, dt: &DateTime) -> DateTime {
        self.neg().add_to(dt)
    }

    pub fn checked_add_to(&self, dt: &DateTime) -> Option<DateTime> {
        let naive = add_to_naive(self, &dt.naive_utc())?;
        Some(naive.and_utc())
    }

    fn is_negative(&self) -> bool {
        self.months < 0 || (self.months == 0 && self.seconds < 0)
    }
}

/// Adds a duration to a wall-clock datetime (what Python does to aware datetimes too).
pub fn add_to_naive(d: &Duration, naive: &NaiveDateTime) -> Option<NaiveDateTime> {
    let date = match d.months {
        0 => naive.date(),
        m if m > 0 => naive.date().checked_add_months(Months::new(m as u32))?,
        m => naive.date().checked_sub_months(Months::new(m.unsigned_abs()))?,
    };
    let micros = i64::try_from(d.total_micros()).ok()?;
    date.and_time(naive.time()).checked_add_signed(chrono::TimeDelta::microseconds(micros))
}

/// Parses an ISO 8601 duration as isodate's `parse_duration` does: `[+-]PnYnMnWnDTnHnMnS`, each
/// number optionally with a `.` or `,` fraction. Fractional years or months are refused (isodate
/// parses them but cannot add them to a date).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    parse_duration_parts(text).map(|p| p.duration)
}

/// A parsed duration with the years and months as written (for Python's `str()` of it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationParts {
    pub duration: Duration,
    pub years: i32,
    pub months: i32,
    /// isodate returns a plain timedelta when there are no years or months.
    pub is_timedelta: bool,
}

thread_local! {
    static DURATION_RE: Regex = Regex::new(concat!(
        r"^([+-])?P",
        r"(?:([0-9]+(?:[,.][0-9]+)?)Y)?",
        r"(?:([0-9]+(?:[,.][0-9]+)?)M)?",
        r"(?:([0-9]+(?:[,.][0-9]+)?)W)?",
        r"(?:([0-9]+(?:[,.][0-9]+)?)D)?",
        r"(?:T(?:([0-9]+(?:[,.][0-9]+)?)H)?",
        r"(?:([0-9]+(?:[,.][0-9]+)?)M)?",
        r"(?:([0-9]+(?:[,.][0-9]+)?)S)?)?$",
    ))
    .unwrap();
}

pub fn parse_duration_parts(text: &str) -> Result<DurationParts, String> {
    let bad = |what: &str| format!("cannot parse the ISO 8601 duration {text:?}: {what}");
    // isodate's `P(?!\b)`: something word-like must follow the P.
    let after_p = text.trim_start_matches(['+', '-']).strip_prefix('P');
    if !after_p.is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')) {
        return Err(bad("expected P followed by its parts, as P1D or PT1H"));
    }
    let caps = DURATION_RE.with(|re| {
        re.captures(text).map(|c| (1..=8).map(|i| c.get(i).map(|m| m.as_str().to_string())).collect::<Vec<_>>())
    });
    let caps = caps.ok_or_else(|| bad("expected [+-]PnYnMnWnDTnHnMnS"))?;
    let negative = caps[0].as_deref() == Some("-");
    let whole = |s: &Option<String>, what: &str| -> Result<i32, String> {
        match s {
            None => Ok(0),
            Some(s) => {
                let (int, frac) = split_decimal(s);
                if frac.trim_end_matches('0').is_empty() {
                    int.parse::<i32>().map_err(|_| bad("too large"))
                } else {
                    Err(bad(&format!("fractional {what} cannot be added to dates")))
                }
            }
        }
    };
    let years = whole(&caps[1], "years")?;
    let months = whole(&caps[2], "months")?;
    // The exact part, summed as decimals and rounded half-even once, like timedelta's constructor.
    const UNITS: [i128; 5] = [7 * 86_400_000_000, 86_400_000_000, 3_600_000_000, 60_000_000, 1_000_000];
    const SCALE_DIGITS: u32 = 9;
    let mut scaled: i128 = 0;
    for (value, unit) in caps[3..8].iter().zip(UNITS) {
        let Some(value) = value else { continue };
        let (int, frac) = split_decimal(value);
        let frac: String = frac.chars().chain(std::iter::repeat('0')).take(SCALE_DIGITS as usize).collect();
        let int: i128 = int.parse().map_err(|_| bad("too large"))?;
        let frac: i128 = frac.parse().unwrap_or(0);
        let mantissa = int.checked_mul(10i128.pow(SCALE_DIGITS)).and_then(|v| v.checked_add(frac));
        let term = mantissa.and_then(|m| m.checked_mul(unit)).ok_or_else(|| bad("too large"))?;
        scaled = scaled.checked_add(term).ok_or_else(|| bad("too large"))?;
    }
    let divisor = 10i128.pow(SCALE_DIGITS);
    let (q, r) = (scaled / divisor, scaled % divisor);
    let micros = if r * 2 > divisor || (r * 2 == divisor && q % 2 == 1) { q + 1 } else { q };
    // Python's timedelta stops at 999999999 days.
    if micros > 999_999_999i128 * 86_400_000_000 {
        return Err(bad("too large"));
    }
    let sign = if negative { -1 } else { 1 };
    let total_months = years.checked_mul(12).and_then(|y| y.checked_add(months)).ok_or_else(|| bad("too large"))?;
    Ok(DurationParts {
        duration: Duration::from_micros(sign * total_months, sign as i128 * micros),
        years: sign * years,
        months: sign * months,
        is_timedelta: years == 0 && months == 0,
    })
}

fn split_decimal(s: &str) -> (&str, &str) {
    match s.find(['.', ',']) {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    }
}

/// Python's `str(timedelta)`: `1 day, 0:00:00`, `-1 day, 23:59:59`, `0:00:00.000001`.
pub fn timedelta_str(micros: i128) -> String {
    let days = micros.div_euclid(86_400_000_000);
    let rest = micros.rem_euclid(86_400_000_000);
    let (secs, us) = (rest / 1_000_000, rest % 1_000_000);
    let mut s = format!("{}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    if days != 0 {
        let plural = if days.abs() != 1 { "s" } else { "" };
        s = format!("{days} day{plural}, {s}");
    }
    if us != 0 {
        s.push_str(&format!(".{us:06}"));
    }
    s
}

// ---------------------------------------------------------------------------------------------
// Format-less parsing

/// `str_to_datetime`: dateutil's `isoparse` (strict ISO 8601, any single character between date
/// and time), naive taken as UTC, converted to UTC.
pub fn parse_iso(text: &str) -> Result<DateTime, String> {
    let (naive, offset) = isoparse(text)?;
    Ok(match offset {
        Some(o) => naive - chrono::TimeDelta::seconds(o.local_minus_utc() as i64),
        None => naive,
    }
    .and_utc())
}

/// The CDK's format-less parse (`ab_datetime_parse`): epoch seconds as digits (at most 10), a date
/// alone, ISO 8601 / RFC 3339 (with `T` or a space, with or without fraction and offset), and the
/// common forms dateutil also reads (RFC 2822 / HTTP dates, `2024/01/31 10:00:00`, `… UTC`).
/// UTC when there is no offset.
pub fn parse_any(text: &str) -> Result<DateTime, String> {
    let bad = || format!("could not parse datetime string {text:?}");
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if digits(text) || text.strip_prefix('-').is_some_and(digits) {
        if text.starts_with('-') {
            return Err(format!("timestamp cannot be negative: {text:?}"));
        }
        if text.trim_start_matches('0').len() > 10 {
            return Err(format!("timestamp value too large: {text:?}"));
        }
        let secs: i64 = text.parse().map_err(|_| bad())?;
        return chrono::DateTime::from_timestamp(secs, 0).ok_or_else(bad);
    }
    let dashes = text.matches('-').count();
    if !text.contains(':') && dashes == 2 && !text.contains('/') {
        let invalid = || format!("invalid date format: {text:?}");
        let parts: Vec<i128> = text.split('-').map(py_int).collect::<Option<_>>().ok_or_else(invalid)?;
        let (y, m, d) = (parts[0], parts[1], parts[2]);
        if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
            return Err(invalid());
        }
        let date = NaiveDate::from_ymd_opt(i32::try_from(y).map_err(|_| invalid())?, m as u32, d as u32);
        return date.map(|d| d.and_time(NaiveTime::MIN).and_utc()).ok_or_else(invalid);
    }
    if text.contains(':') && dashes < 2 && text.matches('/').count() < 2 {
        return Err(format!("missing date part in datetime string: {text:?}"));
    }
    let trimmed = text.trim();
    if let Ok(dt) = parse_iso(trimmed) {
        return Ok(dt);
    }
    // A stand-in for dateutil.parser.parse: the forms APIs commonly send.
    const FORMATS: &[&str] = &[
        "%Y-%m-%d %H:%M:%S %z",
        "%Y-%m-%d %H:%M:%S.%f %z",
        "%Y-%m-%dT%H:%M:%S %z",
        "%Y-%m-%dT%H:%M:%S.%f %z",
        "%Y-%m-%d %H:%M:%S %Z",
        "%Y-%m-%d %H:%M:%S.%f %Z",
        "%Y-%m-%dT%H:%M:%S %Z",
        "%a, %d %b %Y %H:%M:%S %z",
        "%a, %d %b %Y %H:%M:%S %Z",
        "%a, %d %b %Y %H:%M:%S",
        "%d %b %Y %H:%M:%S %z",
        "%d %b %Y %H:%M:%S %Z",
        "%a %b %d %H:%M:%S %Y",
        "%a %b %d %H:%M:%S %z %Y",
        "%A, %d-%b-%y %H:%M:%S %Z",
        "%Y/%m/%d %H:%M:%S",
        "%Y/%m/%d %H:%M",
        "%Y/%m/%d",
        "%m/%d/%Y %H:%M:%S",
        "%m/%d/%Y %H:%M",
        "%m/%d/%Y",
        "%d %B %Y",
        "%B %d, %Y",
        "%b %d, %Y",
        "%B %d, %Y %H:%M:%S",
        "%b %d %Y %H:%M:%S",
    ];
    for f in FORMATS {
        if let Ok(dt) = parse(trimmed, f) {
            return Ok(dt);
        }
    }
    Err(bad())
}

/// dateutil's `isoparser().isoparse`: the wall-clock datetime and its offset, if any.
pub fn isoparse(text: &str) -> Result<(NaiveDateTime, Option<FixedOffset>), String> {
    let bad = |what: &str| format!("cannot parse {text:?} as an ISO 8601 datetime: {what}");
    if !text.is_ascii() {
        return Err(bad("not ASCII"));
    }
    let b = text.as_bytes();
    let (date, pos) = iso_date_common(b).or_else(|_| iso_date_uncommon(b)).map_err(|e| bad(&e))?;
    let mut time = [0i64; 4];
    let mut offset = None;
    if b.len() > pos {
        // Any single character separates the date from the time.
        let (t, o) = iso_time(&b[pos + 1..]).map_err(|e| bad(&e))?;
        time = t;
        offset = o;
    }
    let (mut date, mut hour) = (date, time[0]);
    if hour == 24 {
        date = date.succ_opt().ok_or_else(|| bad("out of range"))?;
        hour = 0;
    }
    let t = NaiveTime::from_hms_micro_opt(hour as u32, time[1] as u32, time[2] as u32, time[3] as u32)
        .ok_or_else(|| bad("time out of range"))?;
    Ok((date.and_time(t), offset))
}

/// dateutil's `_parse_digits`: exactly `n` ASCII digits at `pos`.
fn digits(b: &[u8], pos: usize, n: usize) -> Result<i64, String> {
    match b.get(pos..pos + n) {
        Some(d) if d.iter().all(u8::is_ascii_digit) => Ok(d.iter().fold(0i64, |v, c| v * 10 + (c - b'0') as i64)),
        d => {
            Err(format!("expected {n} digits, got {:?}", String::from_utf8_lossy(d.unwrap_or(&b[pos.min(b.len())..]))))
        }
    }
}

fn iso_date_common(b: &[u8]) -> Result<(NaiveDate, usize), String> {
    if b.len() < 4 {
        return Err("ISO string too short".into());
    }
    let year = digits(b, 0, 4)?;
    let mut pos = 4;
    let mk = |y: i64, m: i64, d: i64| {
        NaiveDate::from_ymd_opt(y as i32, m as u32, d as u32)
            .filter(|_| (1..=9999).contains(&y))
            .ok_or_else(|| "date out of range".to_string())
    };
    if pos >= b.len() {
        return Ok((mk(year, 1, 1)?, pos));
    }
    let has_sep = b[pos] == b'-';
    if has_sep {
        pos += 1;
    }
    if b.len() - pos < 2 {
        return Err("invalid common month".into());
    }
    let month = digits(b, pos, 2)?;
    pos += 2;
    if pos >= b.len() {
        return if has_sep { Ok((mk(year, month, 1)?, pos)) } else { Err("invalid ISO format".into()) };
    }
    if has_sep {
        if b[pos] != b'-' {
            return Err("invalid separator in ISO string".into());
        }
        pos += 1;
    }
    if b.len() - pos < 2 {
        return Err("invalid common day".into());
    }
    let day = digits(b, pos, 2)?;
    Ok((mk(year, month, day)?, pos + 2))
}

fn iso_date_uncommon(b: &[u8]) -> Result<(NaiveDate, usize), String> {
    if b.len() < 4 {
        return Err("ISO string too short".into());
    }
    let year = digits(b, 0, 4)?;
    let has_sep = b.get(4) == Some(&b'-');
    let mut pos = 4 + has_sep as usize;
    if b.get(pos) == Some(&b'W') {
        pos += 1;
        let week = digits(b, pos, 2)?;
        pos += 2;
        let mut day = 1;
        if b.len() > pos {
            if (b[pos] == b'-') != has_sep {
                return Err("inconsistent use of dash separator".into());
            }
            pos += has_sep as usize;
            day = digits(b, pos, 1)?;
            pos += 1;
        }
        if !(1..=53).contains(&week) || !(1..=7).contains(&day) {
            return Err("invalid week date".into());
        }
        // dateutil: the Monday of ISO week 1, plus whole weeks and days.
        let jan4 = NaiveDate::from_ymd_opt(year as i32, 1, 4).ok_or("date out of range")?;
        let week1 = jan4 - chrono::TimeDelta::days(jan4.weekday().num_days_from_monday() as i64);
        Ok((week1 + chrono::TimeDelta::days((week - 1) * 7 + day - 1), pos))
    } else {
        if b.len() < pos + 3 {
            return Err("invalid ordinal day".into());
        }
        let ordinal = digits(b, pos, 3)?;
        let date = u32::try_from(ordinal).ok().and_then(|o| NaiveDate::from_yo_opt(year as i32, o));
        Ok((date.ok_or("invalid ordinal day")?, pos + 3))
    }
}

/// dateutil's `_parse_isotime`: hours, minutes, seconds, microseconds, then an offset.
fn iso_time(b: &[u8]) -> Result<([i64; 4], Option<FixedOffset>), String> {
    let mut c = [0i64; 4];
    let mut offset = None;
    if b.len() < 2 {
        return Err("ISO time too short".into());
    }
    let (mut pos, mut comp, mut has_sep) = (0usize, -1i32, false);
    while pos < b.len() && comp < 5 {
        comp += 1;
        if matches!(b[pos], b'-' | b'+' | b'Z' | b'z') {
            offset = Some(iso_tz(&b[pos..])?);
            pos = b.len();
            break;
        }
        if comp == 1 && b[pos] == b':' {
            has_sep = true;
            pos += 1;
        } else if comp == 2 && has_sep {
            if b[pos] != b':' {
                return Err("inconsistent use of colon separator".into());
            }
            pos += 1;
        }
        if comp < 3 {
            c[comp as usize] = digits(b, pos, 2)?;
            pos += 2;
        }
        if comp == 3 {
            // [.,] then digits, truncated to microseconds.
            if pos < b.len() && matches!(b[pos], b'.' | b',') {
                let digits = b[pos + 1..].iter().take_while(|c| c.is_ascii_digit()).count();
                if digits > 0 {
                    let us: String = std::str::from_utf8(&b[pos + 1..pos + 1 + digits.min(6)]).unwrap().into();
                    c[3] = us.parse::<i64>().unwrap() * 10i64.pow(6 - us.len() as u32);
                    pos += 1 + digits;
                }
            }
        }
    }
    if pos < b.len() {
        return Err("unused components in ISO string".into());
    }
    if c[0] == 24 && c[1..].iter().any(|&v| v != 0) {
        return Err("hour may only be 24 at 24:00:00.000".into());
    }
    Ok((c, offset))
}

fn iso_tz(b: &[u8]) -> Result<FixedOffset, String> {
    if b == b"Z" || b == b"z" {
        return Ok(FixedOffset::east_opt(0).unwrap());
    }
    if ![3, 5, 6].contains(&b.len()) {
        return Err("time zone offset must be 1, 3, 5 or 6 characters".into());
    }
    let sign = match b[0] {
        b'-' => -1,
        b'+' => 1,
        _ => return Err("time zone offset requires sign".into()),
    };
    let hours = digits(b, 1, 2)?;
    let minutes = if b.len() == 3 {
        0
    } else {
        let pos = if b[3] == b':' { 4 } else { 3 };
        if b.len() != pos + 2 {
            return Err("invalid minutes in time zone offset".into());
        }
        digits(b, pos, 2)?
    };
    if minutes > 59 || hours > 23 {
        return Err("invalid time zone offset".into());
    }
    Ok(FixedOffset::east_opt(sign * (hours * 3600 + minutes * 60) as i32).unwrap())
}

// ---------------------------------------------------------------------------------------------
// strptime (CPython's _strptime, C locale, UTC machine)

const FULL_MONTHS: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
const FULL_DAYS: [&str; 7] = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"];

/// `__seqToRE`: alternatives longest first, so that a prefix never wins over a longer name.
fn seq_to_re(names: &[&str], group: &str) -> String {
    let mut names: Vec<&str> = names.to_vec();
    names.sort_by_key(|n| std::cmp::Reverse(n.len()));
    format!("(?P<{group}>{})", names.join("|"))
}

fn directive_re(d: char) -> Option<String> {
    fn abbr(names: &[&'static str]) -> Vec<&'static str> {
        names.iter().map(|n| &n[..3]).collect()
    }
    Some(match d {
        'd' | 'e' => r"(?P<d>3[0-1]|[1-2]\d|0[1-9]|[1-9]| [1-9])".into(),
        'f' => r"(?P<f>[0-9]{1,6})".into(),
        'H' => r"(?P<H>2[0-3]|[0-1]\d|\d)".into(),
        'I' => r"(?P<I>1[0-2]|0[1-9]|[1-9])".into(),
        'G' => r"(?P<G>\d\d\d\d)".into(),
        'j' => r"(?P<j>36[0-6]|3[0-5]\d|[1-2]\d\d|0[1-9]\d|00[1-9]|[1-9]\d|0[1-9]|[1-9])".into(),
        'm' => r"(?P<m>1[0-2]|0[1-9]|[1-9])".into(),
        'M' => r"(?P<M>[0-5]\d|\d)".into(),
        'S' => r"(?P<S>6[0-1]|[0-5]\d|\d)".into(),
        'U' => r"(?P<U>5[0-3]|[0-4]\d|\d)".into(),
        'W' => r"(?P<W>5[0-3]|[0-4]\d|\d)".into(),
        'w' => r"(?P<w>[0-6])".into(),
        'u' => r"(?P<u>[1-7])".into(),
        'V' => r"(?P<V>5[0-3]|0[1-9]|[1-4]\d|\d)".into(),
        'y' => r"(?P<y>\d\d)".into(),
        'Y' => r"(?P<Y>\d\d\d\d)".into(),
        'z' => r"(?P<z>[+-]\d\d:?[0-5]\d(?::?[0-5]\d(?:\.\d{1,6})?)?|(?-i:Z))".into(),
        'A' => seq_to_re(&FULL_DAYS, "A"),
        'a' => seq_to_re(&abbr(&FULL_DAYS), "a"),
        'B' => seq_to_re(&FULL_MONTHS, "B"),
        'b' | 'h' => seq_to_re(&abbr(&FULL_MONTHS), "b"),
        'p' => seq_to_re(&["am", "pm"], "p"),
        // time.tzname on a UTC machine.
        'Z' => seq_to_re(&["utc", "gmt"], "Z"),
        '%' => "%".into(),
        'c' => strptime_pattern("%a %b %d %H:%M:%S %Y").ok()?,
        'x' => strptime_pattern("%m/%d/%y").ok()?,
        'X' => strptime_pattern("%H:%M:%S").ok()?,
        _ => return None,
    })
}

/// `TimeRE.pattern`: regex characters escaped, whitespace runs matching any whitespace, each
/// directive replaced by its group.
fn strptime_pattern(format: &str) -> Result<String, String> {
    let mut escaped = String::with_capacity(format.len() * 2);
    let mut in_space = false;
    for ch in format.chars() {
        if ch.is_whitespace() {
            if !in_space {
                escaped.push_str(r"\s+");
            }
            in_space = true;
            continue;
        }
        in_space = false;
        if "\\.^$*+?(){}[]|".contains(ch) {
            escaped.push('\\');
        }
        escaped.push(ch);
    }
    let mut out = String::with_capacity(escaped.len() * 4);
    let mut chars = escaped.chars();
    while let Some(ch) = chars.next() {
        if ch != '%' {
            out.push(ch);
            continue;
        }
        match chars.next() {
            None => return Err(format!("stray % in format {format:?}")),
            Some(d) => match directive_re(d) {
                Some(re) => out.push_str(&re),
                None => {
                    let d = if d == '\\' { '%' } else { d };
                    return Err(format!("'{d}' is a bad directive in format {format:?}"));
                }
            },
        }
    }
    Ok(out)
}

/// Compiled regular expressions by their source, per instance, bounded (a manifest's templates
/// and formats are few; a hostile one cannot grow it without end).
pub(crate) struct RegexCache(RefCell<HashMap<String, Rc<Regex>>>);

impl RegexCache {
    pub(crate) fn new() -> Self {
        RegexCache(RefCell::new(HashMap::new()))
    }

    /// The regex made from `key`, compiled by `make` the first time.
    pub(crate) fn get<E>(&self, key: &str, make: impl FnOnce() -> Result<Regex, E>) -> Result<Rc<Regex>, E> {
        if let Some(re) = self.0.borrow().get(key) {
            return Ok(re.clone());
        }
        let re = Rc::new(make()?);
        let mut cache = self.0.borrow_mut();
        if cache.len() > 256 {
            cache.clear();
        }
        cache.insert(key.to_string(), re.clone());
        Ok(re)
    }
}

thread_local! {
    static STRPTIME_CACHE: RegexCache = RegexCache::new();
}

fn strptime_regex(format: &str) -> Result<Rc<Regex>, String> {
    STRPTIME_CACHE.with(|cache| {
        cache.get(format, || {
            let pattern = strptime_pattern(format)?;
            Regex::new(&format!("(?i)^(?:{pattern})")).map_err(|e| format!("invalid format {format:?}: {e}"))
        })
    })
}

/// Python's `datetime.strptime`: the wall-clock datetime and, with `%z`, its offset.
pub fn strptime(text: &str, format: &str) -> Result<(NaiveDateTime, Option<FixedOffset>), String> {
    let re = strptime_regex(format)?;
    let nomatch = || format!("time data {text:?} does not match format {format:?}");
    let caps = re.captures(text).ok_or_else(nomatch)?;
    let end = caps.get(0).map_or(0, |m| m.end());
    if end != text.len() {
        return Err(format!("unconverted data remains: {}", &text[end..]));
    }
    let (mut year, mut iso_year, mut month, mut day) = (None::<i32>, None::<i32>, 1u32, 1u32);
    let (mut hour, mut minute, mut second, mut micro) = (0u32, 0u32, 0u32, 0u32);
    let (mut weekday, mut julian, mut week_of_year, mut week_starts_mon, mut iso_week) =
        (None::<u32>, None::<i64>, None::<i64>, false, None::<u32>);
    let mut offset = None;
    for name in re.capture_names().flatten() {
        let Some(m) = caps.name(name) else { continue };
        let v = m.as_str();
        match name {
            "y" => {
                let y = num(v) as i32;
                year = Some(if y <= 68 { y + 2000 } else { y + 1900 });
            }
            "Y" => year = Some(num(v) as i32),
            "G" => iso_year = Some(num(v) as i32),
            "m" => month = num(v) as u32,
            "B" => month = index_of(&FULL_MONTHS, v, false) + 1,
            "b" => month = index_of(&FULL_MONTHS, v, true) + 1,
            "d" => day = num(v) as u32,
            "H" => hour = num(v) as u32,
            "I" => {
                hour = num(v) as u32;
                let pm = caps.name("p").is_some_and(|p| p.as_str().eq_ignore_ascii_case("pm"));
                if !pm && hour == 12 {
                    hour = 0;
                } else if pm && hour != 12 {
                    hour += 12;
                }
            }
            "M" => minute = num(v) as u32,
            "S" => second = num(v) as u32,
            "f" => micro = format!("{v:0<6}").parse().unwrap_or(0),
            "A" => weekday = Some(index_of(&FULL_DAYS, v, false)),
            "a" => weekday = Some(index_of(&FULL_DAYS, v, true)),
            "w" => weekday = Some((num(v) as u32 + 6) % 7),
            "u" => weekday = Some(num(v) as u32 - 1),
            "j" => julian = Some(num(v)),
            "U" | "W" => {
                week_of_year = Some(num(v));
                week_starts_mon = name == "W";
            }
            "V" => iso_week = Some(num(v) as u32),
            "z" => offset = Some(strptime_offset(v)?),
            _ => {}
        }
    }
    let given = [year, iso_year].map(|y| y.is_some());
    check_iso_directives([
        given[0],
        given[1],
        iso_week.is_some(),
        week_of_year.is_some(),
        weekday.is_some(),
        julian.is_some(),
    ])?;
    let out_of_range = || format!("time data {text:?} with format {format:?}: day is out of range for month");
    let leap_year_fix = year.is_none() && month == 2 && day == 29;
    let mut year = year.unwrap_or(if leap_year_fix { 1904 } else { 1900 });
    if let (None, Some(wd)) = (julian, weekday) {
        if let Some(week) = week_of_year {
            julian = Some(julian_from_u_or_w(year, week, wd, week_starts_mon).ok_or_else(out_of_range)?);
        } else if let (Some(iy), Some(iw)) = (iso_year, iso_week) {
            let weekday = Weekday::try_from(wd as u8).map_err(|_| out_of_range())?;
            let date = NaiveDate::from_isoywd_opt(iy, iw, weekday).ok_or_else(out_of_range)?;
            year = date.year();
            julian = Some(date.ordinal() as i64);
        }
        if let Some(j) = julian.filter(|j| *j <= 0) {
            year -= 1;
            julian = Some(j + if NaiveDate::from_ymd_opt(year, 2, 29).is_some() { 366 } else { 365 });
        }
    }
    let date = match julian {
        Some(j) => NaiveDate::from_ymd_opt(year, 1, 1)
            .and_then(|d| d.checked_add_signed(chrono::TimeDelta::days(j - 1)))
            .ok_or_else(out_of_range)?,
        None => {
            // Feb 29 without a year: Python validates it against 1900 and fails.
            let y = if leap_year_fix { 1900 } else { year };
            NaiveDate::from_ymd_opt(y, month, day).ok_or_else(out_of_range)?
        }
    };
    if !(1..=9999).contains(&date.year()) {
        return Err(format!("year {} is out of range", date.year()));
    }
    let time = NaiveTime::from_hms_micro_opt(hour, minute, second, micro)
        .ok_or_else(|| format!("time data {text:?}: second must be in 0..59"))?;
    Ok((date.and_time(time), offset))
}

/// A directive's number (0 when it is not one: the pattern allowed only digits).
fn num(s: &str) -> i64 {
    s.trim().parse::<i64>().unwrap_or(0)
}

/// Where a month or day name is in `names` (its first three letters with `abbr`).
fn index_of(names: &[&str], s: &str, abbr: bool) -> u32 {
    let s = s.to_ascii_lowercase();
    names.iter().position(|n| if abbr { n[..3] == s } else { *n == s }).unwrap_or(0) as u32
}

/// Python's checks of how the ISO year and week directives go together (`_strptime`): which of
/// year, ISO year, ISO week, week of the year, weekday and day of the year were given.
fn check_iso_directives([year, iso_year, iso_week, week_of_year, weekday, julian]: [bool; 6]) -> Result<(), String> {
    if !year && iso_year {
        if !iso_week || !weekday {
            return Err("ISO year directive '%G' must be used with the ISO week directive '%V' and a weekday directive ('%A', '%a', '%w', or '%u')".into());
        }
        if julian {
            return Err("day of the year directive '%j' is not compatible with ISO year directive '%G'".into());
        }
    } else if !week_of_year && iso_week {
        return Err(if !weekday {
            "ISO week directive '%V' must be used with the ISO year directive '%G' and a weekday directive".into()
        } else {
            "ISO week directive '%V' is incompatible with the year directive '%Y'; use the ISO year '%G'".into()
        });
    }
    Ok(())
}

fn strptime_offset(z: &str) -> Result<FixedOffset, String> {
    if z == "Z" {
        return Ok(FixedOffset::east_opt(0).unwrap());
    }
    let mut s = z.to_string();
    if s.as_bytes()[3] == b':' {
        s.remove(3);
        if s.len() > 5 {
            if s.as_bytes()[5] != b':' {
                return Err(format!("inconsistent use of : in {z}"));
            }
            s.remove(5);
        }
    }
    let n = |r: std::ops::Range<usize>| s.get(r).and_then(|v| v.parse::<i32>().ok()).unwrap_or(0);
    let secs = n(1..3) * 3600 + n(3..5) * 60 + n(5..7);
    let secs = if s.starts_with('-') { -secs } else { secs };
    FixedOffset::east_opt(secs).ok_or_else(|| format!("offset out of range: {z}"))
}

fn julian_from_u_or_w(year: i32, week: i64, weekday: u32, week_starts_mon: bool) -> Option<i64> {
    let mut first = NaiveDate::from_ymd_opt(year, 1, 1)?.weekday().num_days_from_monday() as i64;
    let mut wd = weekday as i64;
    if !week_starts_mon {
        first = (first + 1) % 7;
        wd = (wd + 1) % 7;
    }
    let week_0_length = (7 - first) % 7;
    Some(if week == 0 { 1 + wd - first } else { 1 + week_0_length + 7 * (week - 1) + wd })
}

// ---------------------------------------------------------------------------------------------
// strftime (CPython on glibc, C locale)

/// Python's `strftime`: `%f`, `%z`, `%Z` (and `%:z`) as CPython expands them, the rest as glibc
/// does, flags `-` `_` `0` `^` and a width included. `offset` is `None` for naive datetimes and
/// dates (`%z`/`%Z` write nothing); `%s` is the wall clock read as UTC (a UTC machine).
pub fn strftime(dt: &NaiveDateTime, offset: Option<FixedOffset>, format: &str) -> String {
    let mut out = String::with_capacity(format.len() + 16);
    let chars: Vec<char> = format.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '%' {
            out.push(c);
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        let mut flag = None;
        while i < chars.len() && matches!(chars[i], '-' | '_' | '0' | '^' | '#') {
            flag = Some(chars[i]);
            i += 1;
        }
        let mut width = None::<usize>;
        while i < chars.len() && chars[i].is_ascii_digit() {
            width = Some(width.unwrap_or(0) * 10 + chars[i].to_digit(10).unwrap() as usize);
            i += 1;
        }
        while i < chars.len() && matches!(chars[i], 'E' | 'O') {
            i += 1;
        }
        if i < chars.len() && chars[i] == ':' && chars.get(i + 1) == Some(&'z') && flag.is_none() {
            if let Some(o) = offset {
                out.push_str(&format_offset(o.local_minus_utc(), true));
            }
            i += 2;
            continue;
        }
        let Some(&d) = chars.get(i) else {
            out.extend(&chars[start..]);
            break;
        };
        i += 1;
        match strftime_directive(dt, offset, d) {
            Some(Field::Num(v, pad_width, pad)) => {
                let pad = match flag {
                    Some('-') => None,
                    Some('_') => Some(' '),
                    Some('0') => Some('0'),
                    _ => pad,
                };
                let w = width.unwrap_or(pad_width);
                let digits = v.unsigned_abs().to_string();
                let sign = if v < 0 { "-" } else { "" };
                match pad {
                    Some(p) if digits.len() + sign.len() < w => {
                        out.push_str(sign);
                        out.extend(std::iter::repeat_n(p, w - digits.len() - sign.len()));
                        out.push_str(&digits);
                    }
                    _ => {
                        out.push_str(sign);
                        out.push_str(&digits);
                    }
                }
            }
            Some(Field::Text(t)) => {
                let t = match flag {
                    Some('^') => t.to_uppercase(),
                    Some('#') if d == 'p' || d == 'Z' => t.to_lowercase(),
                    Some('#') => t.to_uppercase(),
                    _ => t,
                };
                if let Some(w) = width.filter(|w| *w > t.chars().count()) {
                    let p = if flag == Some('0') { '0' } else { ' ' };
                    out.extend(std::iter::repeat_n(p, w - t.chars().count()));
                }
                out.push_str(&t);
            }
            // glibc writes an unknown conversion as it stands.
            None => out.extend(&chars[start..i]),
        }
    }
    out
}

enum Field {
    /// A number, its default width and default padding.
    Num(i64, usize, Option<char>),
    Text(String),
}

fn strftime_directive(dt: &NaiveDateTime, offset: Option<FixedOffset>, d: char) -> Option<Field> {
    use Field::{Num, Text};
    let z = Some('0');
    let sp = Some(' ');
    let wd = dt.weekday();
    let yday = dt.ordinal0() as i64;
    let hour12 = |h: u32| if h.is_multiple_of(12) { 12 } else { h % 12 } as i64;
    let sub = |f: &str| Text(strftime(dt, offset, f));
    Some(match d {
        'a' => Text(cap(&FULL_DAYS[wd.num_days_from_monday() as usize][..3])),
        'A' => Text(cap(FULL_DAYS[wd.num_days_from_monday() as usize])),
        'b' | 'h' => Text(cap(&FULL_MONTHS[dt.month0() as usize][..3])),
        'B' => Text(cap(FULL_MONTHS[dt.month0() as usize])),
        'c' => sub("%a %b %e %H:%M:%S %Y"),
        'C' => Num(dt.year().div_euclid(100) as i64, 2, z),
        'd' => Num(dt.day() as i64, 2, z),
        'D' | 'x' => sub("%m/%d/%y"),
        'e' => Num(dt.day() as i64, 2, sp),
        'f' => Text(format!("{:06}", dt.nanosecond() / 1000)),
        'F' => sub("%Y-%m-%d"),
        'g' => Num(dt.iso_week().year().rem_euclid(100) as i64, 2, z),
        'G' => Num(dt.iso_week().year() as i64, 1, z),
        'H' => Num(dt.hour() as i64, 2, z),
        'I' => Num(hour12(dt.hour()), 2, z),
        'j' => Num(yday + 1, 3, z),
        'k' => Num(dt.hour() as i64, 2, sp),
        'l' => Num(hour12(dt.hour()), 2, sp),
        'm' => Num(dt.month() as i64, 2, z),
        'M' => Num(dt.minute() as i64, 2, z),
        'n' => Text("\n".into()),
        'p' => Text(if dt.hour() < 12 { "AM" } else { "PM" }.into()),
        'P' => Text(if dt.hour() < 12 { "am" } else { "pm" }.into()),
        'r' => sub("%I:%M:%S %p"),
        'R' => sub("%H:%M"),
        's' => Num(dt.and_utc().timestamp(), 1, z),
        'S' => Num(dt.second() as i64, 2, z),
        't' => Text("\t".into()),
        'T' | 'X' => sub("%H:%M:%S"),
        'u' => Num(wd.number_from_monday() as i64, 1, z),
        'U' => Num((yday + 7 - wd.num_days_from_sunday() as i64) / 7, 2, z),
        'V' => Num(dt.iso_week().week() as i64, 2, z),
        'w' => Num(wd.num_days_from_sunday() as i64, 1, z),
        'W' => Num((yday + 7 - wd.num_days_from_monday() as i64) / 7, 2, z),
        'y' => Num(dt.year().rem_euclid(100) as i64, 2, z),
        'Y' => Num(dt.year() as i64, 1, z),
        'z' => Text(offset.map(|o| format_offset(o.local_minus_utc(), false)).unwrap_or_default()),
        'Z' => Text(offset.map(|o| tz_name(o.local_minus_utc())).unwrap_or_default()),
        '%' => Text("%".into()),
        _ => return None,
    })
}

fn cap(s: &str) -> String {
    let mut c = s.chars();
    c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
}

/// `tzname()` of Python's fixed-offset timezones: `UTC`, or `UTC+01:00`.
fn tz_name(secs: i32) -> String {
    if secs == 0 { "UTC".into() } else { format!("UTC{}", format_offset(secs, true)) }
}

// ---------------------------------------------------------------------------------------------
// Python number parsing and printing

/// Python's `int(str)`: surrounding whitespace, a sign, digits with single underscores between.
pub fn py_int(s: &str) -> Option<i128> {
    let s = s.trim();
    let (neg, digits) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let mut v: i128 = 0;
    for c in digits.chars().filter(|c| *c != '_') {
        v = v.checked_mul(10)?.checked_add(c.to_digit(10)? as i128)?;
    }
    Some(if neg { -v } else { v })
}

/// Python's `float(str)`.
pub fn py_float(s: &str) -> Option<f64> {
    let s = s.trim();
    let lower = s.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "inf" | "infinity" | "nan") {
        return lower.parse().ok();
    }
    let bytes = s.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'_' {
            let digit = |j: Option<&u8>| j.is_some_and(|c| c.is_ascii_digit());
            if !digit(i.checked_sub(1).and_then(|j| bytes.get(j))) || !digit(bytes.get(i + 1)) {
                return None;
            }
        } else if !(b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')) {
            return None;
        }
    }
    s.replace('_', "").parse().ok()
}

/// Python's `repr(float)`: the shortest text that reads back, scientific below 1e-4 and from 1e16.
pub fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap();
    let exp: i32 = exp.parse().unwrap();
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let s = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        let esign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{m}e{esign}{:02}", exp.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32, us: u32) -> DateTime {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap() + chrono::TimeDelta::microseconds(us as i64)
    }

    // test_datetime_parser.py: test_parse_date
    #[test]
    fn parse_cdk_cases() {
        let cases: &[(&str, &str, DateTime)] = &[
            ("2021-01-01T00:00:00.000000+0000", "%Y-%m-%dT%H:%M:%S.%f%z", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-01-01T00:00:00.000000+0400", "%Y-%m-%dT%H:%M:%S.%f%z", utc(2020, 12, 31, 20, 0, 0, 0)),
            ("1609459200", "%s", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("-1609459200", "%s", utc(1919, 1, 1, 0, 0, 0, 0)),
            ("1609459200.4", "%s_as_float", utc(2021, 1, 1, 0, 0, 0, 400000)),
            ("1675092508.873709", "%s_as_float", utc(2023, 1, 30, 15, 28, 28, 873709)),
            ("1609459200001", "%ms", utc(2021, 1, 1, 0, 0, 0, 1000)),
            ("1609459200001000", "%epoch_microseconds", utc(2021, 1, 1, 0, 0, 0, 1000)),
            ("20210101", "%Y%m%d", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-11-22T08:41:55.640Z", "%Y-%m-%dT%H:%M:%S.%_msZ", utc(2021, 11, 22, 8, 41, 55, 640000)),
            ("2021-01-01T00:00:00Z", "%Y-%m-%dT%H:%M:%S%z", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-01-01T00:00:00+05:30", "%Y-%m-%dT%H:%M:%S%z", utc(2020, 12, 31, 18, 30, 0, 0)),
            ("2021-01-01 00:00:00.1", "%Y-%m-%d %H:%M:%S.%f", utc(2021, 1, 1, 0, 0, 0, 100000)),
            ("Sat, 01 Jan 2022 01:01:01 +0000", "%a, %d %b %Y %H:%M:%S %z", utc(2022, 1, 1, 1, 1, 1, 0)),
            ("march 5 2021 3:04 pm", "%B %d %Y %I:%M %p", utc(2021, 3, 5, 15, 4, 0, 0)),
            ("12 AM", "%I %p", utc(1900, 1, 1, 0, 0, 0, 0)),
            ("2021 032", "%Y %j", utc(2021, 2, 1, 0, 0, 0, 0)),
            ("2021-01-01   10", "%Y-%m-%d %H", utc(2021, 1, 1, 10, 0, 0, 0)),
            ("2021 W01 1", "%G W%V %u", utc(2021, 1, 4, 0, 0, 0, 0)),
            ("2021 01 1", "%Y %W %w", utc(2021, 1, 4, 0, 0, 0, 0)),
            ("Fri Jan  1 00:00:00 2021", "%c", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-01-01 UTC", "%Y-%m-%d %Z", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("99", "%y", utc(1999, 1, 1, 0, 0, 0, 0)),
            ("68", "%y", utc(2068, 1, 1, 0, 0, 0, 0)),
            ("2021-1-5", "%Y-%m-%d", utc(2021, 1, 5, 0, 0, 0, 0)),
        ];
        for (text, fmt, want) in cases {
            assert_eq!(parse(text, fmt).unwrap_or_else(|e| panic!("{e}")), *want, "{text} {fmt}");
        }
    }

    #[test]
    fn parse_keeps_offset() {
        let d = parse_with_offset("2022-01-01T01:01:01+0100", "%Y-%m-%dT%H:%M:%S%z").unwrap();
        assert_eq!(format_with_offset(&d, "%H %z"), "01 +0100");
        assert_eq!(format_with_offset(&d, "%s"), "1640995261");
    }

    #[test]
    fn parse_errors_name_text_and_format() {
        for (text, fmt) in [
            ("2021-01-01", "%Y-%m-%dT"),
            ("2021-01-011", "%Y-%m-%d"),
            ("2021-02-30", "%Y-%m-%d"),
            ("x", "%s"),
            ("1.5", "%s"),
            ("2021", "%Q"),
            ("2021", "%Y%"),
            ("02-29", "%m-%d"),
            ("2021-01-01T00:00:60", "%Y-%m-%dT%H:%M:%S"),
            ("+01:0030", "%z"),
        ] {
            let e = parse(text, fmt).unwrap_err();
            assert!(e.contains(&format!("{text:?}")) && e.contains(&format!("{fmt:?}")), "{e}");
        }
    }

    // test_datetime_parser.py: test_format_datetime
    #[test]
    fn format_cdk_cases() {
        let d = utc(2021, 1, 1, 0, 0, 0, 0);
        assert_eq!(format(&d, "%Y-%m-%dT%H:%M:%S.%f%z"), "2021-01-01T00:00:00.000000+0000");
        assert_eq!(format(&d, "%s"), "1609459200");
        assert_eq!(format(&utc(2021, 1, 1, 0, 0, 0, 500000), "%s"), "1609459200");
        assert_eq!(format(&utc(2021, 1, 1, 0, 0, 0, 400000), "%s_as_float"), "1609459200.4");
        assert_eq!(format(&d, "%s_as_float"), "1609459200.0");
        assert_eq!(format(&utc(2021, 1, 1, 0, 0, 0, 1000), "%ms"), "1609459200001");
        assert_eq!(format(&utc(2021, 1, 1, 0, 0, 0, 1000), "%epoch_microseconds"), "1609459200001000");
        assert_eq!(format(&utc(2023, 1, 30, 15, 28, 28, 873709), "%s_as_float"), "1675092508.873709");
        assert_eq!(
            format(&utc(2021, 11, 22, 8, 41, 55, 640000), "%Y-%m-%dT%H:%M:%S.%_msZ"),
            "2021-11-22T08:41:55.640Z"
        );
        assert_eq!(format(&d, "%Y%m%d"), "20210101");
        assert_eq!(format(&utc(1969, 12, 31, 23, 59, 59, 500000), "%s"), "0");
        assert_eq!(format(&utc(1919, 1, 1, 0, 0, 0, 0), "%s"), "-1609459200");
    }

    #[test]
    fn strftime_like_glibc() {
        let d = utc(2026, 12, 1, 16, 12, 12, 49658);
        let got =
            format(&d, "%-d %e %j %a %A %b %B %p %I %y %U %W %u %w %G %V %Z %z %c %x %X %D %F %T %R %C %g %h %n %t %%");
        assert_eq!(
            got,
            "1  1 335 Tue Tuesday Dec December PM 04 26 48 48 2 2 2026 49 UTC +0000 Tue Dec  1 16:12:12 2026 12/01/26 16:12:12 12/01/26 2026-12-01 16:12:12 16:12 20 26 Dec \n \t %"
        );
        assert_eq!(format(&d, "%f|%-m|%_m|%^a|%Q|%:z|%10Y"), "049658|12|12|TUE|%Q|+00:00|0000002026");
        let naive = NaiveDate::from_ymd_opt(999, 1, 1).unwrap().and_time(NaiveTime::MIN);
        assert_eq!(strftime(&naive, None, "%Y|%z|%Z"), "999||");
    }

    #[test]
    fn python_str_and_isoformat() {
        assert_eq!(python_str(&utc(2021, 9, 1, 0, 0, 0, 0)), "2021-09-01 00:00:00+00:00");
        assert_eq!(python_str(&utc(2021, 9, 1, 0, 0, 0, 500000)), "2021-09-01 00:00:00.500000+00:00");
        let d = parse_with_offset("2021-01-02T03:04:05-0130", "%Y-%m-%dT%H:%M:%S%z").unwrap();
        assert_eq!(isoformat(&d.naive_local(), Some(*d.offset()), 'T'), "2021-01-02T03:04:05-01:30");
    }

    // test_macros.py: test_give_valid_date_str_to_datetime_returns_datetime_object, plus isoparse forms
    #[test]
    fn iso_parse_cases() {
        let cases: &[(&str, DateTime)] = &[
            ("2022-01-14", utc(2022, 1, 14, 0, 0, 0, 0)),
            ("2022-01-01 13:45:30", utc(2022, 1, 1, 13, 45, 30, 0)),
            ("2022-01-01T13:45:30+00:00", utc(2022, 1, 1, 13, 45, 30, 0)),
            ("2022-01-01T13:45:30+05:30", utc(2022, 1, 1, 8, 15, 30, 0)),
            ("2022-01-01T13:45:30.123456Z", utc(2022, 1, 1, 13, 45, 30, 123456)),
            ("20210102", utc(2021, 1, 2, 0, 0, 0, 0)),
            ("2021-W01-1", utc(2021, 1, 4, 0, 0, 0, 0)),
            ("2021-01-02T24:00", utc(2021, 1, 3, 0, 0, 0, 0)),
            ("2021-01-02 10", utc(2021, 1, 2, 10, 0, 0, 0)),
            ("2021-01-02T1030", utc(2021, 1, 2, 10, 30, 0, 0)),
            ("2021-01-02T10:30:00,5+05", utc(2021, 1, 2, 5, 30, 0, 500000)),
            ("2021", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-01", utc(2021, 1, 1, 0, 0, 0, 0)),
            ("2021-01-02T10:30:00.1234567Z", utc(2021, 1, 2, 10, 30, 0, 123456)),
            ("2021-01-02T10:30:00-0130", utc(2021, 1, 2, 12, 0, 0, 0)),
            ("2021-032", utc(2021, 2, 1, 0, 0, 0, 0)),
            ("2017-01-01T00:00:00.0Z", utc(2017, 1, 1, 0, 0, 0, 0)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_iso(text).unwrap_or_else(|e| panic!("{e}")), *want, "{text}");
        }
        for bad in ["invalid-date", "1621439283", "2021-01-02T10:30:00+5", "2021-13-01", "2021-01-02T25:00"] {
            assert!(parse_iso(bad).is_err(), "{bad}");
        }
    }

    // test_datetime_helpers.py: ab_datetime_parse
    #[test]
    fn parse_any_cases() {
        let cases: &[(&str, DateTime)] = &[
            ("2023-03-14T15:09:26Z", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("2023-03-14", utc(2023, 3, 14, 0, 0, 0, 0)),
            ("1678806000", utc(2023, 3, 14, 15, 0, 0, 0)),
            ("2023-03-14T15:09:26-04:00", utc(2023, 3, 14, 19, 9, 26, 0)),
            ("2023-03-14 15:09:26Z", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("2023-03-14T15:09:26", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("2023-03-14T15:09:26.123456+00:00", utc(2023, 3, 14, 15, 9, 26, 123456)),
            ("2024-01-01 12:00:00", utc(2024, 1, 1, 12, 0, 0, 0)),
            ("Tuesday, 14-Mar-23 15:09:26 GMT", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("03/14/2023 15:09", utc(2023, 3, 14, 15, 9, 0, 0)),
            ("March 14, 2023", utc(2023, 3, 14, 0, 0, 0, 0)),
            ("2023/03/14 15:09:26", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("2023-03-14 15:09:26 UTC", utc(2023, 3, 14, 15, 9, 26, 0)),
            ("0", utc(1970, 1, 1, 0, 0, 0, 0)),
        ];
        for (text, want) in cases {
            assert_eq!(parse_any(text).unwrap_or_else(|e| panic!("{e}")), *want, "{text}");
        }
        // ab_datetime_parse refuses a time with fewer than two '-' or '/', so RFC 2822 dates too.
        for bad in
            ["foo", "-1", "12345678901", "2023-13-01", "2023-02-30", "15:09:26", "", "Tue, 14 Mar 2023 15:09:26 GMT"]
        {
            assert!(parse_any(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations() {
        let d = |s: &str| parse_duration(s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(d("P1D"), Duration { months: 0, seconds: 86400, nanos: 0 });
        assert_eq!(d("PT1H").seconds, 3600);
        assert_eq!(d("P1W").seconds, 7 * 86400);
        assert_eq!(d("P1W2D").seconds, 9 * 86400);
        assert_eq!(d("P1M").months, 1);
        assert_eq!(d("P1Y2M").months, 14);
        assert_eq!(d("PT0.000001S"), Duration { months: 0, seconds: 0, nanos: 1000 });
        assert_eq!(d("P1DT12H").seconds, 36 * 3600);
        assert_eq!(d("P1.5D").seconds, 36 * 3600);
        assert_eq!(d("PT1,5S"), Duration { months: 0, seconds: 1, nanos: 500_000_000 });
        assert_eq!(d("-PT1S"), Duration { months: 0, seconds: -1, nanos: 0 });
        assert_eq!(d("-P1M").months, -1);
        assert!(d("PT").is_zero() && d("PT0S").is_zero() && d("P0D").is_zero());
        assert!(!d("PT0.000001S").is_zero());
        for bad in ["P", "1D", "P1", "P1.5M", "PT1D", "P1Y-1M", "p1d", "P1H", ""] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{e}");
        }
    }

    #[test]
    fn duration_arithmetic() {
        let d = |s: &str| parse_duration(s).unwrap();
        let at = |s: &str| parse_iso(s).unwrap();
        assert_eq!(d("P1M").sub_from(&at("2021-03-31")), at("2021-02-28"));
        assert_eq!(d("P1Y").add_to(&at("2020-02-29")), at("2021-02-28"));
        assert_eq!(d("P1M1D").add_to(&at("2021-01-31")), at("2021-03-01"));
        assert_eq!(d("P1D").sub_from(&at("2021-09-01")), at("2021-08-31"));
        assert_eq!(d("PT1S").sub_from(&at("2021-09-01")), at("2021-08-31T23:59:59"));
        assert_eq!(d("PT0.000001S").add_to(&at("2021-09-01")), at("2021-09-01T00:00:00.000001"));
        assert_eq!(d("P1M").add_to(&at("2021-12-15T10:00:00")), at("2022-01-15T10:00:00"));
    }

    #[test]
    fn timedelta_strings() {
        let s = |t: &str| timedelta_str(parse_duration(t).unwrap().total_micros());
        assert_eq!(s("P1D"), "1 day, 0:00:00");
        assert_eq!(s("P6DT23H"), "6 days, 23:00:00");
        assert_eq!(s("PT0.000001S"), "0:00:00.000001");
        assert_eq!(s("-P1D"), "-1 day, 0:00:00");
        assert_eq!(s("-PT1S"), "-1 day, 23:59:59");
        assert_eq!(s("PT1.5S"), "0:00:01.500000");
        assert_eq!(s("PT36H"), "1 day, 12:00:00");
    }

    #[test]
    fn python_numbers() {
        assert_eq!(py_int(" 1_000 "), Some(1000));
        assert_eq!(py_int("-007"), Some(-7));
        assert_eq!(py_int("1__0"), None);
        assert_eq!(py_int("1.0"), None);
        assert_eq!(py_float("1_0.5"), Some(10.5));
        assert_eq!(py_float(" -inf "), Some(f64::NEG_INFINITY));
        assert_eq!(py_float("1e5"), Some(1e5));
        assert_eq!(py_float("abc"), None);
        for (f, s) in [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (123_456_789.123_456_79, "123456789.12345679"),
            (-0.0, "-0.0"),
            (1.5e20, "1.5e+20"),
            (5.0, "5.0"),
            (0.5, "0.5"),
            (1.234e-100, "1.234e-100"),
            (f64::INFINITY, "inf"),
        ] {
            assert_eq!(py_float_repr(f), s);
        }
    }
}
