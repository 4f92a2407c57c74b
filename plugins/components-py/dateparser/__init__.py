"""dateparser.parse for the date strings reports carry: ISO 8601, RFC 2822, and common layouts
with an optional timezone abbreviation (UTC, GMT, PST, PDT, ...). Returns None when it cannot
read the string, as dateparser does. Natural language ("2 days ago") and locales are not
supported."""

from datetime import datetime, timedelta, timezone
from email.utils import parsedate_to_datetime

_ZONES = {"UTC": 0, "GMT": 0, "Z": 0, "PST": -8, "PDT": -7, "MST": -7, "MDT": -6, "CST": -6, "CDT": -5, "EST": -5,
          "EDT": -4, "AKST": -9, "AKDT": -8, "HST": -10, "CET": 1, "CEST": 2, "BST": 1, "EET": 2, "EEST": 3,
          "WET": 0, "WEST": 1, "JST": 9, "KST": 9, "AEST": 10, "AEDT": 11, "IST": 5.5, "SGT": 8}
_LAYOUTS = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y/%m/%d %H:%M:%S", "%Y/%m/%d", "%m/%d/%Y %H:%M:%S",
            "%m/%d/%Y %H:%M", "%m/%d/%Y", "%d.%m.%Y %H:%M:%S", "%d.%m.%Y", "%b %d, %Y %I:%M:%S %p", "%b %d, %Y %H:%M:%S",
            "%b %d, %Y", "%B %d, %Y", "%d %b %Y %H:%M:%S", "%d %B %Y", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M:%S.%f")


def parse(date_string, date_formats=None, languages=None, locales=None, region=None, settings=None, detect_languages_function=None):
    if not isinstance(date_string, str):
        raise TypeError("Input type must be str")
    s = date_string.strip()
    if not s:
        return None
    try:
        return datetime.fromisoformat(s.replace("z", "Z"))
    except ValueError:
        pass
    tz = None
    head, _, last = s.rpartition(" ")
    if head and last.upper() in _ZONES:
        tz = timezone(timedelta(hours=_ZONES[last.upper()]))
        s = head
    for layout in tuple(date_formats or ()) + _LAYOUTS:
        try:
            parsed = datetime.strptime(s, layout)
            return parsed.replace(tzinfo=tz) if tz else parsed
        except ValueError:
            continue
    try:
        return parsedate_to_datetime(date_string)
    except (TypeError, ValueError, IndexError):
        return None
