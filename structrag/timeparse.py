"""Parsing the date and time strings that conversation exports contain.

Handles ISO 8601 (with ``Z`` or an offset, converted to UTC), LoCoMo's
``"1:56 pm on 8 May, 2023"``, and the common ``"8 May 2023"`` / ``"May 8, 2023"`` forms.
Times are returned as naive datetimes in UTC (or in the export's own local time when the
export gives no zone, which is what conversation dates usually are).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_LOCOMO_RE = re.compile(
    r"^\s*(?P<h>\d{1,2})[:.](?P<m>\d{2})\s*(?P<ampm>[ap]\.?m\.?)\s+on\s+(?P<rest>.+?)\s*$",
    re.IGNORECASE,
)
_DATE_FORMATS = (
    "%d %B, %Y",
    "%d %B %Y",
    "%d %b, %Y",
    "%d %b %Y",
    "%B %d, %Y",
    "%B %d %Y",
    "%b %d, %Y",
    "%b %d %Y",
    "%Y-%m-%d",
    "%Y/%m/%d",
    "%d/%m/%Y",
    "%Y-%m-%d %H:%M",
    "%Y-%m-%d %H:%M:%S",
)


def _to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is not None:
        try:
            value = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # an offset that pushes the time out of the calendar
            value = value.replace(tzinfo=None)
    return value


def parse_datetime(value: object) -> datetime | None:
    """Parse a timestamp from an export; ``None`` when it is absent or not understood."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return _to_naive_utc(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value) / 1000.0 if value > 1e11 else float(value)
        try:
            return datetime.fromtimestamp(seconds, tz=UTC).replace(tzinfo=None)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        return _to_naive_utc(datetime.fromisoformat(iso))
    except ValueError:
        pass
    match = _LOCOMO_RE.match(text)
    if match:
        day = _parse_date(match.group("rest"))
        if day is None:
            return None
        hour = int(match.group("h")) % 12
        if match.group("ampm").lower().startswith("p"):
            hour += 12
        minute = int(match.group("m"))
        if minute > 59:
            return None
        return day.replace(hour=hour, minute=minute)
    return _parse_date(text)


def _parse_date(text: str) -> datetime | None:
    cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", text.strip())
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    return None


def format_date(value: datetime | None) -> str:
    """The date as the answer context renders it: ``8 May 2023``."""
    if value is None:
        return "undated"
    return f"{value.day} {value.strftime('%B %Y')}"
