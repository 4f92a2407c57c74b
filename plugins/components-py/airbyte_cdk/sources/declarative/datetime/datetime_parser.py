"""DatetimeParser as in the CDK: strptime/strftime plus %s, %s_as_float, %ms, %epoch_microseconds
and %_ms; a naive parse is taken as UTC."""

import datetime
from typing import Union


class DatetimeParser:
    _UNIX_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

    def parse(self, date: Union[str, int], format: str) -> datetime.datetime:
        if format == "%s":
            return datetime.datetime.fromtimestamp(int(date), tz=datetime.timezone.utc)
        if format == "%s_as_float":
            return datetime.datetime.fromtimestamp(float(date), tz=datetime.timezone.utc)
        if format == "%epoch_microseconds":
            return self._UNIX_EPOCH + datetime.timedelta(microseconds=int(date))
        if format == "%ms":
            return self._UNIX_EPOCH + datetime.timedelta(milliseconds=int(date))
        if "%_ms" in format:
            format = format.replace("%_ms", "%f")
        parsed = datetime.datetime.strptime(str(date), format)
        if parsed.tzinfo is None or parsed.tzinfo.utcoffset(parsed) is None:
            return parsed.replace(tzinfo=datetime.timezone.utc)
        return parsed

    def format(self, dt: datetime.datetime, format: str) -> str:
        if format == "%s":
            return str(int(dt.timestamp()))
        if format == "%s_as_float":
            return str(float(dt.timestamp()))
        if format == "%epoch_microseconds":
            return str(int(dt.timestamp() * 1_000_000))
        if format == "%ms":
            return str(int(dt.timestamp() * 1000))
        if "%_ms" in format:
            _format = format.replace("%_ms", "%f")
            milliseconds = int(dt.microsecond / 1000)
            return dt.strftime(_format).replace(dt.strftime("%f"), "%03d" % milliseconds)
        return dt.strftime(format)
