"""AirbyteDateTime and ab_datetime_* as in the CDK. The CDK falls back to dateutil's parser for
free-form strings; here the fallback is datetime.fromisoformat, RFC 2822 and a few common
layouts, and anything else is a ValueError (as the CDK raises for what dateutil cannot read)."""

from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Union

_FORMATS = ("%Y-%m-%d %H:%M:%S", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d", "%m/%d/%Y", "%m/%d/%Y %H:%M:%S",
            "%Y-%m-%dT%H:%M:%S.%f%z", "%d %b %Y %H:%M:%S", "%b %d, %Y", "%B %d, %Y", "%Y%m%dT%H%M%S")


class AirbyteDateTime(datetime):
    def __new__(cls, *args: Any, **kwargs: Any) -> "AirbyteDateTime":
        self = super().__new__(cls, *args, **kwargs)
        if self.tzinfo is None:
            return self.replace(tzinfo=timezone.utc)
        return self

    @classmethod
    def from_datetime(cls, dt: datetime) -> "AirbyteDateTime":
        return cls(dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second, dt.microsecond, dt.tzinfo or timezone.utc)

    def to_datetime(self) -> datetime:
        return self

    def __str__(self) -> str:
        aware_self = self if self.tzinfo else self.replace(tzinfo=timezone.utc)
        return aware_self.isoformat(sep="T", timespec="auto")

    def __repr__(self) -> str:
        return self.__str__()

    def add(self, delta: timedelta) -> "AirbyteDateTime":
        return self + delta

    def subtract(self, delta: timedelta) -> "AirbyteDateTime":
        return AirbyteDateTime.from_datetime(datetime.__sub__(self, delta))

    def __add__(self, other: timedelta) -> "AirbyteDateTime":
        result = super().__add__(other)
        if isinstance(result, datetime):
            return AirbyteDateTime.from_datetime(result)
        raise TypeError("Invalid operation")

    def __radd__(self, other: timedelta) -> "AirbyteDateTime":
        return self.__add__(other)

    def __sub__(self, other):
        if isinstance(other, timedelta):
            result = super().__sub__(other)
            if isinstance(result, datetime):
                return AirbyteDateTime.from_datetime(result)
        elif isinstance(other, datetime):
            result = super().__sub__(other)
            if isinstance(result, timedelta):
                return result
        raise TypeError(f"unsupported operand type(s) for -: '{type(self).__name__}' and '{type(other).__name__}'")

    def __rsub__(self, other: datetime) -> timedelta:
        if not isinstance(other, datetime):
            return NotImplemented
        return other - datetime(self.year, self.month, self.day, self.hour, self.minute, self.second, self.microsecond, self.tzinfo)

    def to_epoch_millis(self) -> int:
        return int(self.timestamp() * 1000)

    @classmethod
    def from_epoch_millis(cls, milliseconds: int) -> "AirbyteDateTime":
        return cls.fromtimestamp(milliseconds / 1000.0, timezone.utc)

    @classmethod
    def from_str(cls, dt_str: str) -> "AirbyteDateTime":
        return ab_datetime_parse(dt_str)


def ab_datetime_now() -> AirbyteDateTime:
    # the clock is the host's: in the component, datetime.now reads the time the host hands in
    return AirbyteDateTime.from_datetime(datetime.now(timezone.utc))


def _free_form(dt_str: str) -> datetime:
    s = dt_str.strip()
    try:
        return datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        pass
    try:
        return parsedate_to_datetime(s)
    except (TypeError, ValueError, IndexError):
        pass
    for fmt in _FORMATS:
        try:
            return datetime.strptime(s, fmt)
        except ValueError:
            continue
    raise ValueError(f"Could not parse datetime string: {dt_str}")


def ab_datetime_parse(dt_str: Union[str, int]) -> AirbyteDateTime:
    if isinstance(dt_str, int) or (isinstance(dt_str, str) and (dt_str.isdigit() or (dt_str.startswith("-") and dt_str[1:].isdigit()))):
        timestamp = int(dt_str)
        if timestamp < 0:
            raise ValueError("Timestamp cannot be negative")
        if len(str(abs(timestamp))) > 10:
            raise ValueError("Timestamp value too large")
        return AirbyteDateTime.from_datetime(datetime.fromtimestamp(timestamp, timezone.utc))
    if not isinstance(dt_str, str):
        raise ValueError(f"Could not parse datetime string: {dt_str}")
    if ":" not in dt_str and dt_str.count("-") == 2 and "/" not in dt_str:
        try:
            year, month, day = map(int, dt_str.split("-"))
            if not (1 <= month <= 12 and 1 <= day <= 31):
                raise ValueError
            return AirbyteDateTime(year, month, day, tzinfo=timezone.utc)
        except (ValueError, TypeError):
            raise ValueError(f"Invalid date format: {dt_str}")
    if ":" in dt_str and dt_str.count("-") < 2 and dt_str.count("/") < 2:
        raise ValueError(f"Could not parse datetime string: {dt_str}")
    parsed = _free_form(dt_str)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return AirbyteDateTime.from_datetime(parsed)


def ab_datetime_try_parse(dt_str: str):
    try:
        return ab_datetime_parse(dt_str)
    except (ValueError, TypeError):
        return None


def ab_datetime_format(dt: Union[datetime, AirbyteDateTime], format: Union[str, None] = None) -> str:
    if isinstance(dt, AirbyteDateTime):
        return str(dt)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    if format:
        return dt.strftime(format)
    return dt.isoformat(sep="T", timespec="auto")
