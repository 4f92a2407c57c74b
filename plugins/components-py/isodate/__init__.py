"""The part of isodate custom components use: parse_duration and Duration.

parse_duration("P1Y2M3DT4H5M6S") returns a datetime.timedelta, or a Duration when the string has
years or months (they have no fixed length), as isodate does."""

import re
from datetime import date, datetime, timedelta

_DURATION = re.compile(
    r"^(?P<sign>[+-])?P(?!\b)"
    r"(?:(?P<years>\d+(?:[.,]\d+)?)Y)?(?:(?P<months>\d+(?:[.,]\d+)?)M)?"
    r"(?:(?P<weeks>\d+(?:[.,]\d+)?)W)?(?:(?P<days>\d+(?:[.,]\d+)?)D)?"
    r"(?:T(?:(?P<hours>\d+(?:[.,]\d+)?)H)?(?:(?P<minutes>\d+(?:[.,]\d+)?)M)?(?:(?P<seconds>\d+(?:[.,]\d+)?)S)?)?$"
)


class ISO8601Error(ValueError):
    pass


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if (year % 4 == 0 and year % 100 != 0) or year % 400 == 0 else 28
    return 30 if month in (4, 6, 9, 11) else 31


class Duration:
    """A duration with years and months (calendar arithmetic) plus a timedelta."""

    def __init__(self, days=0, seconds=0, microseconds=0, milliseconds=0, minutes=0, hours=0, weeks=0, months=0, years=0):
        self.years = years
        self.months = months
        self.tdelta = timedelta(days=days, seconds=seconds, microseconds=microseconds, milliseconds=milliseconds, minutes=minutes, hours=hours, weeks=weeks)

    def __repr__(self):
        return f"isodate.duration.Duration({self.tdelta.days}, {self.tdelta.seconds}, {self.tdelta.microseconds}, years={self.years}, months={self.months})"

    def __str__(self):
        parts = []
        if self.years:
            parts.append(f"{self.years} years")
        if self.months:
            parts.append(f"{self.months} months")
        parts.append(str(self.tdelta))
        return ", ".join(parts)

    def __eq__(self, other):
        if isinstance(other, Duration):
            return (self.years * 12 + self.months) == (other.years * 12 + other.months) and self.tdelta == other.tdelta
        if isinstance(other, timedelta):
            return self.years == 0 and self.months == 0 and self.tdelta == other
        return False

    def __hash__(self):
        return hash((self.years * 12 + self.months, self.tdelta))

    def __neg__(self):
        d = Duration(years=-self.years, months=-self.months)
        d.tdelta = -self.tdelta
        return d

    def __add__(self, other):
        if isinstance(other, Duration):
            d = Duration(years=self.years + other.years, months=self.months + other.months)
            d.tdelta = self.tdelta + other.tdelta
            return d
        if isinstance(other, timedelta):
            d = Duration(years=self.years, months=self.months)
            d.tdelta = self.tdelta + other
            return d
        if isinstance(other, (date, datetime)):
            if int(self.years) != self.years or int(self.months) != self.months:
                raise ValueError("fractional years or months not supported for date calculations")
            total = other.month + int(self.months) - 1
            year = other.year + int(self.years) + total // 12
            month = total % 12 + 1
            day = min(other.day, _days_in_month(year, month))
            return other.replace(year=year, month=month, day=day) + self.tdelta
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, (Duration, timedelta)):
            return self + (-other)
        return NotImplemented

    def __rsub__(self, other):
        if isinstance(other, (date, datetime)):
            return (-self) + other
        if isinstance(other, timedelta):
            return (-self) + other
        return NotImplemented

    def totimedelta(self, start=None, end=None):
        if start is not None:
            return (start + self) - start
        if end is not None:
            return end - (end - self)
        raise ValueError("start or end required")


def _num(value):
    if value is None:
        return 0
    value = value.replace(",", ".")
    return float(value) if "." in value else int(value)


def parse_duration(datestring: str, as_timedelta_if_possible: bool = True):
    if not isinstance(datestring, str):
        raise TypeError(f"Expecting a string {datestring!r}")
    match = _DURATION.match(datestring)
    if not match or datestring in ("P", "PT") or datestring.endswith("T"):
        raise ISO8601Error(f"Unable to parse duration string {datestring!r}")
    g = {k: _num(v) for k, v in match.groupdict().items() if k != "sign"}
    sign = -1 if match.group("sign") == "-" else 1
    if (g["years"] or g["months"]) or not as_timedelta_if_possible:
        d = Duration(days=g["days"], hours=g["hours"], minutes=g["minutes"], seconds=g["seconds"], weeks=g["weeks"], months=g["months"], years=g["years"])
        return -d if sign < 0 else d
    td = timedelta(days=g["days"], hours=g["hours"], minutes=g["minutes"], seconds=g["seconds"], weeks=g["weeks"])
    return -td if sign < 0 else td
