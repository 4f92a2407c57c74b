"""The part of pendulum custom components use: from_format (pendulum format tokens), parse (ISO
8601), datetime (in UTC unless told) and a DateTime whose str() is its ISO form, as pendulum
prints it."""

import re
from datetime import datetime as _datetime, timezone

_TOKENS = [("YYYY", "%Y"), ("MMMM", "%B"), ("MMM", "%b"), ("MM", "%m"), ("M", "%m"), ("dddd", "%A"), ("ddd", "%a"),
           ("DD", "%d"), ("D", "%d"), ("HH", "%H"), ("H", "%H"), ("hh", "%I"), ("h", "%I"), ("mm", "%M"), ("m", "%M"),
           ("ss", "%S"), ("s", "%S"), ("SSSSSS", "%f"), ("A", "%p"), ("ZZ", "%z"), ("Z", "%z"), ("YY", "%y")]
_TOKEN_RE = re.compile("|".join(re.escape(t) for t, _ in _TOKENS) + r"|\[[^\]]*\]")


class DateTime(_datetime):
    def __str__(self) -> str:
        return self.isoformat("T")

    @classmethod
    def instance(cls, dt: _datetime, tz=timezone.utc) -> "DateTime":
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=tz)
        return cls(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond, dt.tzinfo)


def _to_strptime(fmt: str) -> str:
    table = dict(_TOKENS)

    def repl(m):
        t = m.group(0)
        return t[1:-1].replace("%", "%%") if t.startswith("[") else table[t]

    return _TOKEN_RE.sub(repl, fmt)


def from_format(string: str, fmt: str, tz=timezone.utc, locale=None) -> DateTime:
    return DateTime.instance(_datetime.strptime(string, _to_strptime(fmt)), tz)


def parse(text: str, tz=timezone.utc, **options) -> DateTime:
    return DateTime.instance(_datetime.fromisoformat(text.replace("z", "Z")), tz)


def datetime(year, month=1, day=1, hour=0, minute=0, second=0, microsecond=0, tz=timezone.utc) -> DateTime:
    """`pendulum.datetime`: aware, in UTC unless told (sorting it beside `parse`'s works)."""
    return DateTime(year, month, day, hour, minute, second, microsecond, tz)


datetime_ = datetime


def now(tz=timezone.utc) -> DateTime:
    return DateTime.instance(_datetime.now(tz))


UTC = timezone.utc
