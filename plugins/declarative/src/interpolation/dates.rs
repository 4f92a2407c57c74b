//! Python's `datetime.datetime`, `datetime.date`, `datetime.timedelta` and `isodate.Duration`
//! as template values: what the CDK's macros return (`now_utc()`, `today_utc()`,
//! `str_to_datetime()`, `duration()`), with the attributes and methods manifests use
//! (`strftime`, `isoformat`, `timestamp`, `replace`, `days`, `total_seconds` ...), printed as
//! Python prints them. Their arithmetic and ordering are in [`super::python`].

use std::cmp::Ordering;
use std::fmt::{self, Write as _};
use std::sync::Arc;

use chrono::{Datelike, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime, Timelike, Utc};
use minijinja::value::{DynObject, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, State, Value as Jv};

use super::python::{Num, bind, int_value, is_absent, num, str_arg};
use super::{type_error, value_error};
use crate::datetime::{self, Duration};

/// A Python `datetime` (aware when `offset` is set) or, with `is_date`, a `date`.
#[derive(Clone, Debug)]
pub(super) struct PyDateTime {
    naive: NaiveDateTime,
    pub(super) offset: Option<FixedOffset>,
    pub(super) is_date: bool,
    /// str_to_datetime's datetimes carry pytz's UTC (only their repr differs).
    pytz: bool,
}

impl PyDateTime {
    pub(super) fn now() -> PyDateTime {
        let now = Utc::now();
        let micros = now.timestamp_subsec_micros();
        let naive = now.naive_utc().with_nanosecond(micros * 1000).unwrap_or(now.naive_utc());
        PyDateTime { naive, offset: Some(utc_offset()), is_date: false, pytz: false }
    }

    pub(super) fn from_utc(dt: &datetime::DateTime, pytz: bool) -> PyDateTime {
        PyDateTime { naive: dt.naive_utc(), offset: Some(utc_offset()), is_date: false, pytz }
    }

    pub(super) fn date(&self) -> PyDateTime {
        PyDateTime { naive: self.naive.date().and_time(NaiveTime::MIN), offset: None, is_date: true, pytz: false }
    }

    pub(super) fn into_value(self) -> Jv {
        Jv::from_object(self)
    }

    pub(super) fn micros_since_epoch(&self) -> i128 {
        let utc = match self.offset {
            Some(o) => self.naive - chrono::TimeDelta::seconds(o.local_minus_utc() as i64),
            None => self.naive,
        };
        utc.and_utc().timestamp() as i128 * 1_000_000 + (utc.nanosecond() / 1000) as i128
    }

    pub(super) fn add(&self, d: &PyDuration, subtract: bool) -> Result<PyDateTime, Error> {
        let sign = if subtract { -1 } else { 1 };
        let months = sign * (d.years * 12 + d.months);
        let mut micros = sign as i128 * d.micros;
        if self.is_date {
            // date + timedelta uses whole days only.
            micros = micros.div_euclid(86_400_000_000) * 86_400_000_000;
        }
        let naive = datetime::add_to_naive(&Duration::from_micros(months, micros), &self.naive)
            .filter(|n| (1..=9999).contains(&n.year()))
            .ok_or_else(|| value_error("OverflowError: date value out of range"))?;
        Ok(PyDateTime { naive, ..self.clone() })
    }

    pub(super) fn py_str(&self) -> String {
        if self.is_date {
            return format!("{:04}-{:02}-{:02}", self.naive.year(), self.naive.month(), self.naive.day());
        }
        datetime::isoformat(&self.naive, self.offset, ' ')
    }

    pub(super) fn py_repr(&self) -> String {
        let n = &self.naive;
        if self.is_date {
            return format!("datetime.date({}, {}, {})", n.year(), n.month(), n.day());
        }
        let mut s = format!("datetime.datetime({}, {}, {}, {}, {}", n.year(), n.month(), n.day(), n.hour(), n.minute());
        let us = n.nanosecond() / 1000;
        if n.second() != 0 || us != 0 {
            let _ = write!(s, ", {}", n.second());
        }
        if us != 0 {
            let _ = write!(s, ", {us}");
        }
        match self.offset {
            Some(o) if o.local_minus_utc() == 0 => {
                s.push_str(if self.pytz { ", tzinfo=<UTC>" } else { ", tzinfo=datetime.timezone.utc" })
            }
            Some(o) => {
                let _ = write!(
                    s,
                    ", tzinfo=datetime.timezone({})",
                    PyDuration::timedelta(o.local_minus_utc() as i128 * 1_000_000).py_repr()
                );
            }
            None => {}
        }
        s.push(')');
        s
    }

    pub(super) fn strftime(&self, format: &str) -> String {
        datetime::strftime(&self.naive, self.offset, format)
    }

    /// `replace(year=..., month=..., ..., microsecond=...)`: the fields given changed.
    fn replace(&self, args: &[Jv]) -> Result<PyDateTime, Error> {
        let names = ["year", "month", "day", "hour", "minute", "second", "microsecond"];
        let a = bind("replace", args, &names, 0)?;
        let n = &self.naive;
        let cur = [n.year() as i64, n.month() as i64, n.day() as i64, n.hour() as i64, n.minute() as i64];
        let cur = [cur[0], cur[1], cur[2], cur[3], cur[4], n.second() as i64, (n.nanosecond() / 1000) as i64];
        let mut v = cur;
        for (i, arg) in a.iter().enumerate() {
            if arg.is_undefined() {
                continue;
            }
            match num(arg) {
                Some(Num::Int(x)) => v[i] = x as i64,
                _ => return Err(type_error("an integer is required")),
            }
        }
        let date = NaiveDate::from_ymd_opt(v[0] as i32, v[1] as u32, v[2] as u32)
            .ok_or_else(|| value_error("day is out of range for month"))?;
        let time = NaiveTime::from_hms_micro_opt(v[3] as u32, v[4] as u32, v[5] as u32, v[6] as u32)
            .ok_or_else(|| value_error("time out of range"))?;
        Ok(PyDateTime { naive: date.and_time(time), ..self.clone() })
    }
}

fn utc_offset() -> FixedOffset {
    FixedOffset::east_opt(0).unwrap()
}

impl Object for PyDateTime {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let n = &self.naive;
        Some(match key.as_str()? {
            "year" => Jv::from(n.year()),
            "month" => Jv::from(n.month()),
            "day" => Jv::from(n.day()),
            "hour" if !self.is_date => Jv::from(n.hour()),
            "minute" if !self.is_date => Jv::from(n.minute()),
            "second" if !self.is_date => Jv::from(n.second()),
            "microsecond" if !self.is_date => Jv::from(n.nanosecond() / 1000),
            _ => return None,
        })
    }

    fn call_method(self: &Arc<Self>, _state: &State, method: &str, args: &[Jv]) -> Result<Jv, Error> {
        match method {
            "strftime" => {
                let a = bind("strftime", args, &["format"], 1)?;
                if a[0].kind() != ValueKind::String {
                    return Err(type_error("strftime() argument 1 must be str"));
                }
                Ok(Jv::from(self.strftime(a[0].as_str().unwrap_or_default())))
            }
            "isoformat" => {
                let a = bind("isoformat", args, &["sep", "timespec"], 0)?;
                if self.is_date {
                    return Ok(Jv::from(self.py_str()));
                }
                let sep = if is_absent(&a[0]) { 'T' } else { str_arg(&a[0])?.chars().next().unwrap_or('T') };
                Ok(Jv::from(datetime::isoformat(&self.naive, self.offset, sep)))
            }
            "timestamp" if !self.is_date => {
                bind("timestamp", args, &[], 0)?;
                Ok(Jv::from(self.micros_since_epoch() as f64 / 1_000_000.0))
            }
            "date" if !self.is_date => {
                bind("date", args, &[], 0)?;
                Ok(self.date().into_value())
            }
            "weekday" | "isoweekday" => {
                bind(method, args, &[], 0)?;
                let wd = self.naive.weekday();
                Ok(Jv::from(if method == "weekday" { wd.num_days_from_monday() } else { wd.number_from_monday() }))
            }
            "astimezone" if !self.is_date => {
                bind("astimezone", args, &["tz"], 0)?;
                let utc = self.micros_since_epoch();
                let dt =
                    chrono::DateTime::from_timestamp_micros(utc as i64).ok_or_else(|| value_error("out of range"))?;
                Ok(PyDateTime::from_utc(&dt, false).into_value())
            }
            "replace" => self.replace(args).map(PyDateTime::into_value),
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyDateTime>()?;
        (self.is_date == other.is_date).then(|| self.micros_since_epoch().cmp(&other.micros_since_epoch()))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.py_str())
    }
}

/// A `datetime.timedelta` or, with years or months, an `isodate.Duration`.
#[derive(Clone, Debug)]
pub(super) struct PyDuration {
    pub(super) years: i32,
    pub(super) months: i32,
    pub(super) micros: i128,
    pub(super) is_timedelta: bool,
}

impl PyDuration {
    pub(super) fn timedelta(micros: i128) -> PyDuration {
        PyDuration { years: 0, months: 0, micros, is_timedelta: true }
    }

    pub(super) fn neg(&self) -> PyDuration {
        PyDuration { years: -self.years, months: -self.months, micros: -self.micros, is_timedelta: self.is_timedelta }
    }

    pub(super) fn into_value(self) -> Jv {
        Jv::from_object(self)
    }

    pub(super) fn py_str(&self) -> String {
        let td = datetime::timedelta_str(self.micros);
        if self.is_timedelta {
            return td;
        }
        let mut parts = Vec::new();
        if self.years != 0 {
            parts.push(format!("{} years", self.years));
        }
        if self.months != 0 {
            parts.push(format!("{} {}", self.months, if self.months <= 1 { "month" } else { "months" }));
        }
        parts.push(td);
        parts.join(", ")
    }

    pub(super) fn py_repr(&self) -> String {
        let days = self.micros.div_euclid(86_400_000_000);
        let rest = self.micros.rem_euclid(86_400_000_000);
        let (secs, us) = (rest / 1_000_000, rest % 1_000_000);
        let mut fields = Vec::new();
        if days != 0 {
            fields.push(format!("days={days}"));
        }
        if secs != 0 {
            fields.push(format!("seconds={secs}"));
        }
        if us != 0 {
            fields.push(format!("microseconds={us}"));
        }
        let td = if fields.is_empty() {
            "datetime.timedelta(0)".to_string()
        } else {
            format!("datetime.timedelta({})", fields.join(", "))
        };
        if self.is_timedelta {
            td
        } else {
            format!("isodate.duration.Duration({days}, {secs}, {us}, years={}, months={})", self.years, self.months)
        }
    }
}

impl Object for PyDuration {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn get_value(self: &Arc<Self>, key: &Jv) -> Option<Jv> {
        let days = self.micros.div_euclid(86_400_000_000);
        let rest = self.micros.rem_euclid(86_400_000_000);
        Some(match key.as_str()? {
            "days" => int_value(days),
            "seconds" => int_value(rest / 1_000_000),
            "microseconds" => int_value(rest % 1_000_000),
            "years" if !self.is_timedelta => Jv::from(self.years),
            "months" if !self.is_timedelta => Jv::from(self.months),
            "tdelta" if !self.is_timedelta => PyDuration::timedelta(self.micros).into_value(),
            _ => return None,
        })
    }

    fn call_method(self: &Arc<Self>, _state: &State, method: &str, args: &[Jv]) -> Result<Jv, Error> {
        match method {
            "total_seconds" if self.is_timedelta => {
                bind("total_seconds", args, &[], 0)?;
                Ok(Jv::from(self.micros as f64 / 1_000_000.0))
            }
            _ => Err(Error::from(ErrorKind::UnknownMethod)),
        }
    }

    fn custom_cmp(self: &Arc<Self>, other: &DynObject) -> Option<Ordering> {
        let other = other.downcast_ref::<PyDuration>()?;
        Some((self.years * 12 + self.months, self.micros).cmp(&(other.years * 12 + other.months, other.micros)))
    }

    fn render(self: &Arc<Self>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.py_str())
    }
}

#[cfg(test)]
mod tests {
    use crate::interpolation::Interpolator;
    use crate::interpolation::tests::ctx;

    #[test]
    fn datetime_objects_and_arithmetic() {
        let i = Interpolator::new();
        let r = |t: &str| i.render(t, &ctx()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            r("{{ (str_to_datetime('2021-09-01') - duration('P1D')).strftime('%Y-%m-%dT%H:%M:%SZ') }}"),
            "2021-08-31T00:00:00Z"
        );
        assert_eq!(r("{{ str_to_datetime('2021-03-31') - duration('P1M') }}"), "2021-02-28 00:00:00+00:00");
        assert_eq!(r("{{ str_to_datetime('2020-02-29') + duration('P1Y') }}"), "2021-02-28 00:00:00+00:00");
        assert_eq!(r("{{ duration('PT1H') + str_to_datetime('2021-01-31') }}"), "2021-01-31 01:00:00+00:00");
        assert_eq!(r("{{ str_to_datetime('2021-01-02') - str_to_datetime('2021-01-01T12:00:00') }}"), "12:00:00");
        assert_eq!(r("{{ (str_to_datetime('2021-01-03') - str_to_datetime('2021-01-01')).days }}"), "2");
        assert_eq!(r("{{ str_to_datetime('2021-01-02') > str_to_datetime('2021-01-01') }}"), "True");
        assert_eq!(
            r("{{ max(str_to_datetime('2021-01-02'), str_to_datetime('2021-01-01')) }}"),
            "2021-01-02 00:00:00+00:00"
        );
        assert_eq!(
            r("{{ str_to_datetime('2021-01-02T03:04:05.123Z').isoformat() }}"),
            "2021-01-02T03:04:05.123000+00:00"
        );
        assert_eq!(r("{{ str_to_datetime('2021-01-02T03:04:05Z').timestamp() }}"), "1609556645.0");
        assert_eq!(r("{{ str_to_datetime('2021-01-02T03:04:05Z').date() }}"), "2021-01-02");
        assert_eq!(r("{{ str_to_datetime('2021-01-02').strftime('%s') }}"), "1609545600");
        assert_eq!(r("{{ str_to_datetime('2021-01-15').replace(day=1).strftime('%Y-%m-%d') }}"), "2021-01-01");
        assert_eq!(r("{{ [str_to_datetime('2021-01-02')] }}"), "[datetime.datetime(2021, 1, 2, 0, 0, tzinfo=<UTC>)]");
        assert_eq!(r("{{ [duration('P1D')] }}"), "[datetime.timedelta(days=1)]");
        // now_utc() and today_utc() print as Python's datetime and date do.
        let now = r("{{ now_utc() }}");
        let today = chrono::Utc::now().format("%Y-%m-%d").to_string();
        assert!(now.starts_with(&today) && now.ends_with("+00:00") && now.as_bytes()[10] == b' ', "{now}");
        assert_eq!(r("{{ today_utc() }}"), today);
        assert_eq!(r("{{ now_utc().strftime('%Y-%m-%d') }}"), today);
        assert_eq!(r("{{ today_utc().strftime('%Y/%m/%d') }}"), today.replace('-', "/"));
        let yesterday = (chrono::Utc::now() - chrono::TimeDelta::days(1)).format("%Y-%m-%d").to_string();
        assert_eq!(r("{{ (now_utc() - duration('P1D')).strftime('%Y-%m-%d') }}"), yesterday);
        assert_eq!(r("{{ today_utc() - duration('P1D') }}"), yesterday);
        assert_eq!(r("{{ day_delta(-1, format='%Y-%m-%d') }}"), yesterday);
        assert!(r("{{ day_delta(1) }}").ends_with("+0000"));
        assert_eq!(r("{{ today_with_timezone('UTC') }}"), today);
        assert!(i.render("{{ today_with_timezone('Pacific/Kiritimati') }}", &ctx()).is_err());
        assert!(i.render("{{ str_to_datetime('invalid-date') }}", &ctx()).is_err());
    }
}
