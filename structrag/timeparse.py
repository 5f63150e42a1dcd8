"""Parsing the date and time strings that conversation exports contain.

Handles ISO 8601 (with ``Z`` or an offset, converted to UTC), epoch seconds or
milliseconds (numbers or digit strings such as Slack's ``"1678629720.000200"``), LoCoMo's
``"1:56 pm on 8 May, 2023"``, month names (``"8 May 2023"``, ``"Mar 12, 2023, 2:02 PM"``,
``"Sun, 12 Mar 2023 14:02:05 +0100"``) and the numeric forms chat apps write
(``"28.12.2023, 20:02:02"``, ``"12/03/2023, 14:02"``, ``"3/12/23, 2:02 PM"``,
``"2023/03/12 14:02"``), including the invisible marks and narrow spaces WhatsApp puts in
them. Times are returned as naive datetimes in UTC (or in the export's own local time when
the export gives no zone, which is what chat exports usually do).

Day or month first? ``12/03/2023`` can be either, and one string cannot tell. A value
whose first number is above 12 (``28/03/2023``) can only be day-first, one whose second is
above 12 only month-first, and dotted dates (``12.03.2023``) are day-first by universal
convention; such values are read the only way they can be. The others follow ``order``,
which an importer decides once per file with :func:`infer_date_order` from all the file's
values; without one, :data:`DEFAULT_DATE_ORDER` (day-first, the order most of the world
writes, and the one structrag always used) applies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from functools import lru_cache
from typing import Literal

DateOrder = Literal["dmy", "mdy"]
#: The order of an ambiguous numeric date when nothing in its file settles it.
DEFAULT_DATE_ORDER: DateOrder = "dmy"

_LOCOMO_RE = re.compile(
    r"^\s*(?P<h>\d{1,2})[:.](?P<m>\d{2})\s*(?P<ampm>[ap]\.?m\.?)\s+on\s+(?P<rest>.+?)\s*$",
    re.IGNORECASE,
)
_DATE_FORMATS = (
    "%d %B %Y",
    "%d %b %Y",
    "%B %d %Y",
    "%b %d %Y",
    "%Y %B %d",
    "%Y %b %d",
)
# Marks WhatsApp and others put around dates (left-to-right marks, BOMs) and the spaces
# they use (no-break, narrow no-break before "PM", thin).
_INVISIBLE = dict.fromkeys(map(ord, "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\ufeff"))
_SPACES_RE = re.compile(r"[\s\u00a0\u202f\u2009]+")
_EPOCH_RE = re.compile(r"\d{9,13}(?:\.\d+)?")
_NUMERIC_DATE_RE = re.compile(
    r"(?P<a>\d{1,4})(?P<sep>[./-])(?P<b>\d{1,2})(?P=sep)(?P<c>\d{2,4})\.?"
)
_TIME_RE = re.compile(
    r"(?<![\d:])(?P<h>\d{1,2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?)?"
    r"(?:\s*(?P<ampm>[ap])\.?\s?m\.?(?![a-z]))?"
    r"(?:\s*(?P<zone>Z|(?:UTC|GMT)?\s?[+-]\d{2}:?\d{2}|(?:UTC|GMT)[+-]\d{1,2}|UTC|GMT)(?![\w]))?",
    re.IGNORECASE,
)
_WEEKDAY_RE = re.compile(r"^(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*\.?,?\s+", re.IGNORECASE)
# Words between a date and its time ("at", German "um", French "à", Finnish "klo" ...).
_FILLER_RE = re.compile(
    r"\((?:[^)]*)\)|\b(?:at|on|um|à|a las|alle|om|kl|klo)\b\.?|,", re.IGNORECASE
)


def _to_naive_utc(value: datetime) -> datetime:
    if value.tzinfo is not None:
        try:
            value = value.astimezone(UTC).replace(tzinfo=None)
        except OverflowError:  # an offset that pushes the time out of the calendar
            value = value.replace(tzinfo=None)
    return value


def _clean(text: str) -> str:
    return _SPACES_RE.sub(" ", text.translate(_INVISIBLE)).strip().strip("[]").strip()


def parse_datetime(value: object, *, order: DateOrder | None = None) -> datetime | None:
    """Parse a timestamp from an export; ``None`` when it is absent or not understood.

    ``order`` says how to read numeric dates that could be day- or month-first (see the
    module docstring); values that can only be read one way are read that way.
    """
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
    return _parse_string(value, order)


@lru_cache(maxsize=4096)
def _parse_string(value: str, order: DateOrder | None) -> datetime | None:
    """:func:`parse_datetime` of a string, remembered: the turns of a session often carry
    the same timestamp (LoCoMo's session date), and ``strptime`` is slow."""
    text = _clean(value)
    if not text:
        return None
    if _EPOCH_RE.fullmatch(text):
        return parse_datetime(float(text))
    iso = text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text
    try:
        return _to_naive_utc(datetime.fromisoformat(iso))
    except ValueError:
        pass
    match = _LOCOMO_RE.match(text)
    if match:
        day = _parse_date(match.group("rest"), order)
        if day is None:
            return None
        hour = int(match.group("h")) % 12
        if match.group("ampm").lower().startswith("p"):
            hour += 12
        minute = int(match.group("m"))
        if minute > 59:
            return None
        return day.replace(hour=hour, minute=minute)
    return _parse_date_time(text, order)


def _parse_date_time(text: str, order: DateOrder | None) -> datetime | None:
    """A date with an optional time (and zone) anywhere around it."""
    text = _WEEKDAY_RE.sub("", text)
    time = _TIME_RE.search(text)
    date_text = text
    if time is not None:
        date_text = text[: time.start()] + " " + text[time.end() :]
    day = _parse_date(date_text, order)
    if day is None:
        return None
    if time is None:
        return day
    hour, minute = int(time.group("h")), int(time.group("m"))
    second = int(time.group("s") or 0)
    micro = int((time.group("f") or "0")[:6].ljust(6, "0"))
    ampm = (time.group("ampm") or "").lower()
    if ampm:
        if not 1 <= hour <= 12:
            return None
        hour = hour % 12 + (12 if ampm == "p" else 0)
    try:
        moment = day.replace(hour=hour, minute=minute, second=second, microsecond=micro)
    except ValueError:
        return None
    zone = (time.group("zone") or "").upper().replace(" ", "")
    if zone:
        offset = zone.removeprefix("UTC").removeprefix("GMT")
        delta = timedelta(0)
        if offset and offset != "Z":
            sign = -1 if offset[0] == "-" else 1
            digits = offset[1:].replace(":", "")
            hours, minutes = (digits, "0") if len(digits) <= 2 else (digits[:2], digits[2:])
            delta = sign * timedelta(hours=int(hours), minutes=int(minutes))
        try:
            moment = _to_naive_utc(moment.replace(tzinfo=timezone(delta)))
        except ValueError:  # an offset of a day or more
            return None
    return moment


def _parse_date(text: str, order: DateOrder | None = None) -> datetime | None:
    cleaned = _SPACES_RE.sub(" ", _FILLER_RE.sub(" ", text)).strip(" -–/")
    numeric = _NUMERIC_DATE_RE.fullmatch(cleaned)
    if numeric:
        return _numeric_date(numeric, order)
    cleaned = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", cleaned)
    # "28-Dec-2023", "Dec. 28": month names with dashes, slashes or abbreviation dots.
    cleaned = re.sub(r"([A-Za-z]{3,})\.", r"\1", cleaned)
    cleaned = re.sub(r"(?<=\w)[-/](?=\w)", " ", cleaned)
    cleaned = re.sub(r"\bSept\b", "Sep", cleaned, flags=re.IGNORECASE)
    for fmt in _DATE_FORMATS:
        try:
            return datetime.strptime(cleaned, fmt)
        except ValueError:
            continue
    return None


def _numeric_date(match: re.Match[str], order: DateOrder | None) -> datetime | None:
    a, b, c = match.group("a"), match.group("b"), match.group("c")
    if len(a) == 4:
        year, month, day = int(a), int(b), int(c)
    elif len(a) > 2 or len(c) == 3:
        return None
    else:
        settled = _settles(match)
        first_is_day = (settled or order or DEFAULT_DATE_ORDER) == "dmy"
        day, month = (int(a), int(b)) if first_is_day else (int(b), int(a))
        year = int(c)
        if len(c) == 2:  # WhatsApp's "3/12/23": this century, unless it is far ahead
            year += 2000 if year < 70 else 1900
    try:
        return datetime(year, month, day)
    except ValueError:
        return None


def _settles(match: re.Match[str]) -> DateOrder | None:
    """The order one numeric date can only be read in, or ``None`` if it reads both ways."""
    a, b = int(match.group("a")), int(match.group("b"))
    if len(match.group("a")) == 4:
        return None
    if a > 12 >= b:
        return "dmy"
    if b > 12 >= a:
        return "mdy"
    if match.group("sep") == ".":
        return "dmy"
    return None


def date_order_of(value: object) -> DateOrder | Literal["either"] | None:
    """What one value says about day/month order: ``"dmy"`` or ``"mdy"`` when it can only
    be read that way, ``"either"`` for an ambiguous numeric date, ``None`` when it holds
    no day/month numeric date (ISO, month names, epoch numbers)."""
    if not isinstance(value, str):
        return None
    text = _WEEKDAY_RE.sub("", _clean(value))
    for candidate in _SPACES_RE.split(_FILLER_RE.sub(" ", text)):
        match = _NUMERIC_DATE_RE.fullmatch(candidate.strip(" -–"))
        if match and len(match.group("a")) <= 2:
            if int(match.group("a")) > 12 and int(match.group("b")) > 12:
                return None  # not a date either way
            return _settles(match) or "either"
    return None


@dataclass(frozen=True)
class DateOrderChoice:
    """The day/month order chosen for a file's numeric dates, and why."""

    order: DateOrder
    #: The first value that settled the order (``None``: none did, the default applies).
    evidence: str | None = None
    #: How many values could be read either way.
    ambiguous: int = 0
    #: The first value that can only be read in the other order (a file at odds with itself).
    conflict: str | None = None

    @property
    def defaulted(self) -> bool:
        """True when ambiguous dates were read in the default order, with nothing to go by."""
        return self.evidence is None and self.ambiguous > 0

    @property
    def basis(self) -> str:
        """Why this order, in words (for a source's metadata and warnings)."""
        name = "day-first" if self.order == "dmy" else "month-first"
        if self.evidence is not None:
            return f"{name}, settled by {self.evidence!r}"
        if self.ambiguous:
            return f"{name} (the default: no date in the file settles it)"
        return name

    def notes(self, path: object) -> list[str]:
        """Warnings an importer adds to its source: a default taken, or a contradiction."""
        out = []
        if self.defaulted:
            other = "mdy" if self.order == "dmy" else "dmy"
            out.append(
                f"{path}: {self.ambiguous} date(s) can be read day-first or month-first and "
                f"none has a day above 12 to settle it; read {self.basis}. If they are "
                f"month/day dates, ingest it with --date-order {other} (in Python: "
                f"index.ingest(paths, date_order={other!r}))"
            )
        if self.conflict is not None:
            out.append(
                f"{path}: dates disagree on day/month order: {self.evidence!r} is read "
                f"{self.order} but {self.conflict!r} can only be the other; each is read the "
                "only way it can be, the ambiguous ones "
                + ("day-first" if self.order == "dmy" else "month-first")
            )
        return out


class DateOrderVotes:
    """What a file's values say about day/month order, gathered one value at a time (a
    file read as a stream); :meth:`choice` decides as :func:`infer_date_order` does."""

    def __init__(self) -> None:
        self.first: dict[str, str] = {}
        self.votes = {"dmy": 0, "mdy": 0}
        self.ambiguous = 0

    def add(self, value: object) -> DateOrder | Literal["either"] | None:
        """Count one value; what it says (see :func:`date_order_of`)."""
        said = date_order_of(value)
        if said == "either":
            self.ambiguous += 1
        elif said is not None:
            self.votes[said] += 1
            self.first.setdefault(said, str(value).strip())
        return said

    def choice(self, forced: DateOrder | None = None) -> DateOrderChoice:
        if forced is not None:
            return DateOrderChoice(
                order=forced, evidence="date_order option", ambiguous=self.ambiguous
            )
        votes = self.votes
        if not votes["dmy"] and not votes["mdy"]:
            return DateOrderChoice(order=DEFAULT_DATE_ORDER, ambiguous=self.ambiguous)
        order: DateOrder = "mdy" if votes["mdy"] > votes["dmy"] else "dmy"
        other = "dmy" if order == "mdy" else "mdy"
        return DateOrderChoice(
            order=order,
            evidence=self.first[order],
            ambiguous=self.ambiguous,
            conflict=self.first.get(other),
        )


def infer_date_order(
    values: Iterable[object], *, forced: DateOrder | None = None
) -> DateOrderChoice:
    """Decide one day/month order for all of a file's values: the order the unambiguous
    values vote for (the majority, if they disagree), else :data:`DEFAULT_DATE_ORDER`.
    ``forced`` (the caller knows) wins over the values."""
    votes = DateOrderVotes()
    for value in values:
        votes.add(value)
    return votes.choice(forced)


def format_date(value: datetime | None) -> str:
    """The date as the answer context renders it: ``8 May 2023``."""
    if value is None:
        return "undated"
    return f"{value.day} {value.strftime('%B %Y')}"
