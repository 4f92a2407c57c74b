"""Slicing helpers: cut a stream into date-time windows the host checkpoints one by one.

A window is a partition whose cursor range is `(start, end]`. The same functions as the Rust
SDK's `slice` module, giving the same windows."""

import re

from .errors import Error
from .types import CursorRange, CursorValue, Partition

_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def parse_rfc3339(text: str) -> int:
    """Seconds since the Unix epoch of an RFC 3339 date-time (`2024-01-31T12:00:00Z`, an offset
    such as `+02:00`, or fractional seconds, which are dropped)."""
    m = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not m:
        raise Error.config(f"not an RFC 3339 date-time: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= 31 and hour <= 23 and minute <= 59 and second <= 60):
        raise Error.config(f"not an RFC 3339 date-time: {text!r}")
    zone = m.group(8)
    offset = 0
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    return _days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset


def format_rfc3339(secs: int) -> str:
    """The RFC 3339 form (`Z`, whole seconds) of seconds since the Unix epoch."""
    days, rem = divmod(secs, 86_400)
    y, m, d = _civil_from_days(days)
    return f"{y:04}-{m:02}-{d:02}T{rem // 3600:02}:{rem % 3600 // 60:02}:{rem % 60:02}Z"


def datetime_windows(stream: str, start: int, end: int, step_secs: int) -> list[Partition]:
    """Windows of `step_secs` covering `(start, end]`, aligned to multiples of the step since the
    epoch so they are the same in every run; each is a partition keyed by its bounds. The last
    window ends at `end`, never after."""
    if step_secs <= 0:
        raise Error.config(f"a window must be longer than 0 seconds, got {step_secs}")
    windows = []
    # Aligned boundaries; the first window starts at `start` itself, so nothing before it is read.
    lower = start
    while lower < end:
        upper = min((lower // step_secs + 1) * step_secs, end)
        s, e = format_rfc3339(lower), format_rfc3339(upper)
        windows.append(Partition.keyed(stream, {"start": s, "end": e}))
        windows[-1].cursor_range = CursorRange(CursorValue.datetime(s), CursorValue.datetime(e))
        lower = upper
    return windows


# Howard Hinnant's algorithms for the proleptic Gregorian calendar.
def _days_from_civil(y: int, m: int, d: int) -> int:
    y = y - 1 if m <= 2 else y
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m - 3 if m > 2 else m + 9) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


def _civil_from_days(z: int) -> tuple[int, int, int]:
    z += 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if m <= 2 else 0), m, d
