//! The CDK's macros (airbyte_cdk/sources/declarative/interpolation/macros.py): `now_utc`,
//! `today_utc`, `today_with_timezone`, `timestamp`, `str_to_datetime`, `max`, `min`,
//! `day_delta`, `duration`, `format_datetime`, `sanitize_url`, `camel_case_to_snake_case` and
//! `generate_uuid`, each taking its arguments as the Python function does.

use std::cmp::Ordering;

use chrono::Utc;
use minijinja::value::{Rest, ValueKind};
use minijinja::{Error, Value as Jv};

use super::dates::{PyDateTime, PyDuration};
use super::jinja_filters::quote;
use super::python::{Num, bind, int_value, is_absent, num, py_max_min, py_type_name, str_arg};
use super::repr::py_str;
use super::{type_error, undefined_error, value_error};
use crate::datetime;

pub(super) fn now_utc(args: Rest<Jv>) -> Result<Jv, Error> {
    bind("now_utc", &args, &[], 0)?;
    Ok(PyDateTime::now().into_value())
}

pub(super) fn today_utc(args: Rest<Jv>) -> Result<Jv, Error> {
    bind("today_utc", &args, &[], 0)?;
    Ok(PyDateTime::now().date().into_value())
}

pub(super) fn today_with_timezone(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("today_with_timezone", &args, &["timezone"], 1)?;
    let tz = str_arg(&a[0])?;
    // No timezone database in the component: the fixed-offset zones only.
    let offset_hours = match tz.as_str() {
        "UTC" | "Etc/UTC" | "GMT" | "Etc/GMT" | "Etc/UCT" | "UCT" | "Universal" | "Zulu" | "Etc/Zulu" => Some(0),
        t => t.strip_prefix("Etc/GMT").and_then(|n| n.parse::<i64>().ok()).filter(|n| n.abs() <= 14).map(|n| -n),
    };
    let Some(hours) = offset_hours else {
        return Err(value_error(format!(
            "today_with_timezone: unsupported timezone {tz:?} (only UTC and Etc/GMT±N are known)"
        )));
    };
    let now = Utc::now() + chrono::TimeDelta::hours(hours);
    Ok(PyDateTime::from_utc(&now, false).date().into_value())
}

pub(super) fn timestamp(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("timestamp", &args, &["dt"], 1)?;
    let v = &a[0];
    if v.is_undefined() {
        return Err(undefined_error("timestamp() of an undefined value"));
    }
    match num(v) {
        Some(Num::Int(i)) => Ok(int_value(i)),
        Some(Num::Float(f)) => {
            if !f.is_finite() {
                return Err(value_error("cannot convert float to integer"));
            }
            Ok(int_value(f.trunc() as i128))
        }
        None => {
            let dt = datetime_arg(v)?;
            Ok(Jv::from(dt.micros_since_epoch() as f64 / 1_000_000.0))
        }
    }
}

/// `str_to_datetime` of a text, or a datetime as it is.
fn datetime_arg(v: &Jv) -> Result<PyDateTime, Error> {
    if let Some(d) = v.downcast_object_ref::<PyDateTime>() {
        return Ok(d.clone());
    }
    match v.kind() {
        ValueKind::Undefined => Err(undefined_error("a datetime is undefined")),
        ValueKind::String => {
            let dt = datetime::parse_iso(v.as_str().unwrap_or_default()).map_err(value_error)?;
            Ok(PyDateTime::from_utc(&dt, true))
        }
        _ => Err(type_error(format!("expected a datetime string, got '{}'", py_type_name(v)))),
    }
}

pub(super) fn str_to_datetime(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("str_to_datetime", &args, &["s"], 1)?;
    datetime_arg(&a[0]).map(PyDateTime::into_value)
}

pub(super) fn day_delta(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("day_delta", &args, &["num_days", "format"], 1)?;
    let micros = match num(&a[0]) {
        Some(Num::Int(d)) => d * 86_400_000_000,
        Some(Num::Float(d)) => (d * 86_400_000_000.0).round_ties_even() as i128,
        None if a[0].is_undefined() => return Err(undefined_error("day_delta() of an undefined value")),
        None => return Err(type_error("unsupported type for timedelta days component")),
    };
    let format = if a[1].is_undefined() { "%Y-%m-%dT%H:%M:%S.%f%z".to_string() } else { str_arg(&a[1])? };
    let dt = PyDateTime::now().add(&PyDuration::timedelta(micros), false)?;
    Ok(Jv::from(dt.strftime(&format)))
}

pub(super) fn duration(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("duration", &args, &["datestring"], 1)?;
    if a[0].kind() != ValueKind::String {
        if a[0].is_undefined() {
            return Err(undefined_error("duration() of an undefined value"));
        }
        return Err(type_error(format!("Expecting a string {}", py_str(&a[0]))));
    }
    let p = datetime::parse_duration_parts(a[0].as_str().unwrap_or_default()).map_err(value_error)?;
    Ok(PyDuration { years: p.years, months: p.months, micros: p.duration.total_micros(), is_timedelta: p.is_timedelta }
        .into_value())
}

pub(super) fn format_datetime(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("format_datetime", &args, &["dt", "format", "input_format"], 2)?;
    let (dt, format) = (&a[0], str_arg(&a[1])?);
    if let Some(d) = dt.downcast_object_ref::<PyDateTime>() {
        // A datetime goes straight to strftime (so `%s` is libc's, `%ms` is minutes-then-s).
        return Ok(Jv::from(d.strftime(&format)));
    }
    let input_format = if is_absent(&a[2]) { None } else { Some(str_arg(&a[2])?) };
    let parsed = match (num(dt), dt.kind()) {
        (_, ValueKind::Undefined) => return Err(undefined_error("format_datetime() of an undefined value")),
        (Some(Num::Int(i)), _) => {
            datetime::parse_with_offset(&i.to_string(), input_format.as_deref().unwrap_or("%s")).map_err(value_error)?
        }
        // The CDK refuses floats; epoch seconds with a fraction are the obvious reading.
        (Some(Num::Float(f)), _) => {
            datetime::parse_with_offset(&datetime::py_float_repr(f), input_format.as_deref().unwrap_or("%s_as_float"))
                .map_err(value_error)?
        }
        (None, ValueKind::String) => {
            let s = dt.as_str().unwrap_or_default();
            match &input_format {
                Some(f) => datetime::parse_with_offset(s, f).map_err(value_error)?,
                None => datetime::parse_iso(s).map_err(value_error)?.fixed_offset(),
            }
        }
        _ => return Err(type_error(format!("format_datetime() cannot read a '{}'", py_type_name(dt)))),
    };
    Ok(Jv::from(datetime::format_with_offset(&parsed, &format)))
}

pub(super) fn max(args: Rest<Jv>) -> Result<Jv, Error> {
    py_max_min("max", &args, Ordering::Greater)
}

pub(super) fn min(args: Rest<Jv>) -> Result<Jv, Error> {
    py_max_min("min", &args, Ordering::Less)
}

pub(super) fn sanitize_url(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("sanitize_url", &args, &["value"], 1)?;
    Ok(Jv::from(quote(&str_arg(&a[0])?, "", true)))
}

pub(super) fn camel_case_to_snake_case(args: Rest<Jv>) -> Result<Jv, Error> {
    let a = bind("camel_case_to_snake_case", &args, &["value"], 1)?;
    Ok(Jv::from(camel_to_snake(&str_arg(&a[0])?)))
}

pub(super) fn generate_uuid(args: Rest<Jv>) -> Result<Jv, Error> {
    bind("generate_uuid", &args, &[], 0)?;
    Ok(Jv::from(uuid4()))
}

fn camel_to_snake(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 4);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && c.is_ascii_uppercase() {
            out.push('_');
        }
        out.push(c);
    }
    out.to_lowercase()
}

/// A version 4 UUID from the hasher's per-process random keys and the clock (not for secrets).
fn uuid4() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let state = std::collections::hash_map::RandomState::new();
    let mut bytes = [0u8; 16];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = state.build_hasher();
        h.write_u64(COUNTER.fetch_add(1, AtomicOrdering::Relaxed));
        h.write_u128(Utc::now().timestamp_nanos_opt().unwrap_or_default() as u128);
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_le_bytes());
    }
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &hex[0..8], &hex[8..12], &hex[12..16], &hex[16..20], &hex[20..32])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::interpolation::Interpolator;
    use crate::interpolation::tests::{ctx, ev};

    // test_macros.py and test_jinja.py: macros
    #[test]
    fn macros() {
        assert_eq!(ev("{{ timestamp(1621439283) }}"), json!(1621439283));
        assert_eq!(ev("{{ timestamp('2021-05-19') }}"), json!(1621382400.0));
        assert_eq!(ev("{{ timestamp('2017-01-01T00:00:00.0Z') }}"), json!(1483228800.0));
        assert_eq!(ev("{{ timestamp('2022-02-28T00:00:00-08:00') }}"), json!(1646035200.0));
        assert_eq!(ev("{{ timestamp('2022-02-28T10:11:12') }}"), json!(1646043072.0));
        assert_eq!(ev("{{ timestamp(100.9) }}"), json!(100));
        assert_eq!(ev("{{ max(1,2) }}"), json!(2));
        assert_eq!(ev("{{ min(1,2) }}"), json!(1));
        assert_eq!(ev("{{ max([2, 3]) }}"), json!(3));
        assert_eq!(ev("{{ min([2, 3]) }}"), json!(2));
        assert_eq!(ev("{{ duration('P1D') }}"), json!("1 day, 0:00:00"));
        assert_eq!(ev("{{ duration('P6DT23H') }}"), json!("6 days, 23:00:00"));
        assert_eq!(ev("{{ duration('P1Y2M3DT4H') }}"), json!("1 years, 2 months, 3 days, 4:00:00"));
        assert_eq!(ev("{{ duration('-P1M') }}"), json!("-1 month, 0:00:00"));
        assert_eq!(ev("{{ duration('P2D').total_seconds() }}"), json!(172800.0));
        assert_eq!(ev("{{ 1 | string }}"), json!("1"));
        assert_eq!(ev("{{ [\"hello\", \"world\"] | string }}"), json!("[\"hello\", \"world\"]"));
        assert_eq!(
            ev("{{ sanitize_url('https://example.com/path?query=value') }}"),
            json!("https%3A%2F%2Fexample.com%2Fpath%3Fquery%3Dvalue")
        );
        assert_eq!(ev("{{ sanitize_url('hello world') }}"), json!("hello+world"));
        assert_eq!(ev("{{ camel_case_to_snake_case('CamelCase_snake_case') }}"), json!("camel_case_snake_case"));
        assert_eq!(ev("{{ str_to_datetime('2022-01-01T13:45:30+05:30') }}"), json!("2022-01-01 08:15:30+00:00"));
        assert_eq!(
            ev("{{ str_to_datetime('2022-01-01T13:45:30.123456Z') }}"),
            json!("2022-01-01 13:45:30.123456+00:00")
        );
        let uuid = ev("{{ generate_uuid() }}");
        let u = uuid.as_str().unwrap();
        assert_eq!((u.len(), &u[14..15]), (36, "4"));
        assert_ne!(uuid, ev("{{ generate_uuid() }}"));
    }

    #[test]
    fn format_datetime_cases() {
        let cases = [
            ("'2022-01-01T01:01:01Z', '%Y-%m-%d'", "2022-01-01"),
            ("'2022-01-01', '%Y-%m-%d'", "2022-01-01"),
            ("'2022-01-01T01:01:01Z', '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T01:01:01Z"),
            ("'2022-01-01T01:01:01-0800', '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T09:01:01Z"),
            ("'Sat, 01 Jan 2022 01:01:01 +0000', '%Y-%m-%d', '%a, %d %b %Y %H:%M:%S %z'", "2022-01-01"),
            ("'2022-01-01T01:01:01Z', '%s', '%Y-%m-%dT%H:%M:%SZ'", "1640998861"),
            ("'2022-01-01T01:01:01Z', '%epoch_microseconds', '%Y-%m-%dT%H:%M:%SZ'", "1640998861000000"),
            ("1683729087, '%Y-%m-%dT%H:%M:%SZ'", "2023-05-10T14:31:27Z"),
            ("1640998861000000, '%Y-%m-%dT%H:%M:%SZ', '%epoch_microseconds'", "2022-01-01T01:01:01Z"),
            ("1640998861000, '%Y-%m-%dT%H:%M:%SZ', '%ms'", "2022-01-01T01:01:01Z"),
            ("'2022-01-01T01:01:01+0100', '%Y-%m-%dT%H:%M:%S.%f%z'", "2022-01-01T00:01:01.000000+0000"),
            ("'2022-01-01T01:01:01', '%Y-%m-%dT%H:%M:%S.%f%z'", "2022-01-01T01:01:01.000000+0000"),
            ("'2022-01-01T01:01:01+0100', '%H %z', '%Y-%m-%dT%H:%M:%S%z'", "01 +0100"),
            ("dt='2020-10-01T00:00:00Z', format='%s'", "1601510400"),
            ("str_to_datetime('2022-01-01T01:01:01Z'), '%Y-%m-%dT%H:%M:%SZ'", "2022-01-01T01:01:01Z"),
            ("config.start_date, '%Y/%m/%d'", "2021/01/01"),
        ];
        for (args, want) in cases {
            let t = format!("{{{{ format_datetime({args}) }}}}");
            assert_eq!(Interpolator::new().render(&t, &ctx()).unwrap(), want, "{t}");
        }
    }
}
