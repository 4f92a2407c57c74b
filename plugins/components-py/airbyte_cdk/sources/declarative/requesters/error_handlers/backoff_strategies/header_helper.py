import numbers
from re import Pattern
from typing import Optional

import requests


def get_numeric_value_from_header(response: requests.Response, header: str, regex: Optional[Pattern]) -> Optional[float]:
    """The header's value as a float (first regex match if given), else None — as in the CDK."""
    header_value = response.headers.get(header, None)
    if not header_value:
        return None
    if isinstance(header_value, str):
        if regex:
            match = regex.match(header_value)
            if match:
                header_value = match.group()
        try:
            return float(header_value)
        except ValueError:
            return None
    if isinstance(header_value, numbers.Number):
        return float(header_value)
    return None
