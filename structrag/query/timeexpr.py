"""Time expressions: absolute dates and ranges, and relative phrases resolved against the
conversation's own dates.

Absolute: ``2023``, ``2023-05``, ``2023-05-08``, ``May 2023``, ``8 May 2023``,
``May 8, 2023``, ``A..B`` (inclusive). Relative to an *anchor* (the latest message of the
conversation, not today's date): ``today``, ``yesterday``, ``this/last week``,
``this/last month``, ``this/last year``, ``last May`` / ``in May`` (the latest May on or
before the anchor), ``on April 15`` / ``15 April`` (the latest such day on or before the
anchor), ``3 days ago``, ``2 weeks ago``, ``in the last 2 weeks``, ``recently`` (the last
30 days), ``the day before yesterday``. Either kind with a direction: ``before``,
``prior to``, ``after``, ``since``, ``until`` / ``till`` / ``through`` (open at one end:
``after March 2024`` starts when March ends, ``since March 2024`` when it starts), and
``from A to B`` / ``between A and B`` (B's year is A's when only B has one: ``from
January to March 2024``; with no year, the latest such range that started on or before
the anchor). Seasons (the northern hemisphere's, by the calendar's months: ``spring
2023``, ``the winter of 2023``, and relative: ``this/last summer``, ``in the winter``)
and numeric dates (``20/05/2023``, ``5/20/2023``: read when one of the two numbers is
over 12, or the other end of a range is). Ranges are half-open ``[start, end)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

MONTHS = {
    name: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}
_MONTH_RE = "|".join(sorted(MONTHS, key=len, reverse=True))
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "couple of": 2,
    "few": 3,
}


@dataclass(frozen=True)
class TimeRange:
    start: datetime | None
    end: datetime | None

    def __str__(self) -> str:
        def fmt(value: datetime | None) -> str:
            return value.date().isoformat() if value else "..."

        return f"[{fmt(self.start)}, {fmt(self.end)})"


def _month_range(year: int, month: int) -> TimeRange:
    start = datetime(year, month, 1)
    end = (
        datetime.max
        if (year, month) == (9999, 12)
        else datetime(year + (month == 12), month % 12 + 1, 1)
    )
    return TimeRange(start, end)


#: The seasons by the months they start in (the northern hemisphere's, by the calendar's
#: months: spring is March to May); winter runs into the next year.
SEASONS = {"spring": 3, "summer": 6, "autumn": 9, "fall": 9, "winter": 12}
_SEASON_RE = "|".join(SEASONS)


def _season_range(year: int, season: str) -> TimeRange:
    """The season of ``year`` (winter: its December to the end of February after)."""
    start = SEASONS[season]
    end = _month_range(year + 1, 2).end if start == 12 else _month_range(year, start + 2).end
    return TimeRange(datetime(year, start, 1), end)


#: 20/05/2023, 5.20.2023: a day and a month in either order, then the year.
NUMERIC_DATE = r"\d{1,2}[/.]\d{1,2}[/.]\d{4}"
_NUMERIC = re.compile(rf"(?:on\s+)?({NUMERIC_DATE})")


def _numbers(m: re.Match[str]) -> tuple[int, int, int]:
    first, second, year = re.split(r"[/.]", m.group(1))
    return int(first), int(second), int(year)


def _numeric_order(m: re.Match[str]) -> str | None:
    """ "dmy" for 20/05/2023, "mdy" for 5/20/2023; None for 05/06/2023, whose order is the
    writer's habit, which a question does not show."""
    first, second, _ = _numbers(m)
    if first > 12 >= second:
        return "dmy"
    if second > 12 >= first:
        return "mdy"
    return None


def _numeric_date(m: re.Match[str], order: str | None) -> TimeRange | None:
    if order is None:
        return None
    first, second, year = _numbers(m)
    day, month = (first, second) if order == "dmy" else (second, first)
    try:
        return _day_range(datetime(year, month, day))
    except ValueError:
        return None


def _day_range(day: datetime) -> TimeRange:
    start = datetime(day.year, day.month, day.day)
    return TimeRange(start, _plus(start, timedelta(days=1)))


def _plus(value: datetime, delta: timedelta) -> datetime:
    """``value + delta``, held at the ends of the calendar instead of overflowing."""
    try:
        return value + delta
    except OverflowError:
        return datetime.max if delta > timedelta(0) else datetime.min


def absolute_range(text: str) -> TimeRange | None:
    """An absolute date, month, year or ``A..B`` range; ``None`` if not one."""
    try:
        return _absolute_range(text)
    except (ValueError, OverflowError):
        return None


def relative_range(text: str, anchor: datetime) -> TimeRange | None:
    """A relative phrase resolved against ``anchor``; ``None`` if not understood."""
    try:
        return _relative_range(text, anchor)
    except (ValueError, OverflowError):
        return None


def _one_date(text: str) -> TimeRange | None:
    text = text.strip().lower().rstrip(".")
    if m := re.fullmatch(r"(\d{4})", text):
        year = int(m.group(1))
        return TimeRange(datetime(year, 1, 1), _month_range(year, 12).end)
    if m := re.fullmatch(r"(\d{4})-(\d{1,2})", text):
        if 1 <= int(m.group(2)) <= 12:
            return _month_range(int(m.group(1)), int(m.group(2)))
        return None
    if m := re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", text):
        try:
            return _day_range(datetime(int(m.group(1)), int(m.group(2)), int(m.group(3))))
        except ValueError:
            return None
    if m := re.fullmatch(rf"(?:in\s+)?({_MONTH_RE})\.?,?\s+(?:of\s+)?(\d{{4}})", text):
        return _month_range(int(m.group(2)), MONTHS[m.group(1)])
    if m := re.fullmatch(
        rf"(?:in\s+|during\s+)?(?:the\s+)?({_SEASON_RE})\s+(?:of\s+)?(\d{{4}})", text
    ):
        return _season_range(int(m.group(2)), m.group(1))
    if m := _NUMERIC.fullmatch(text):
        return _numeric_date(m, _numeric_order(m))
    day_month = re.fullmatch(
        rf"(?:on\s+)?(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?,?\s+(\d{{4}})",
        text,
    )
    month_day = re.fullmatch(
        rf"(?:on\s+)?({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?,?\s+(\d{{4}})", text
    )
    try:
        if day_month:
            day_text, month_name, year_text = day_month.groups()
            return _day_range(datetime(int(year_text), MONTHS[month_name], int(day_text)))
        if month_day:
            month_name, day_text, year_text = month_day.groups()
            return _day_range(datetime(int(year_text), MONTHS[month_name], int(day_text)))
    except ValueError:
        return None
    return None


def _absolute_range(text: str) -> TimeRange | None:
    """An absolute date, month, year or ``A..B`` range; ``None`` if not one."""
    if ".." in text:
        left, _, right = text.partition("..")
        start = _one_date(left) if left.strip() else TimeRange(None, None)
        end = _one_date(right) if right.strip() else TimeRange(None, None)
        if start is None or end is None:
            return None
        if start.start and end.end and end.end <= start.start:
            return None
        return TimeRange(start.start, end.end)
    return _one_date(text)


_DIRECTION = re.compile(r"(before|prior to|after|since|until|till|through|up to)\s+(?:the\s+)?(.+)")
_BETWEEN = re.compile(
    r"(?:from|between)\s+(?:the\s+)?(.+?)\s+(?:to|and|until|till|through)\s+(?:the\s+)?(.+)"
)
_YEAR = re.compile(r"\b(\d{4})$")


def _next_year(value: datetime) -> datetime:
    """The same day a year later (28 February for 29 February)."""
    try:
        return value.replace(year=value.year + 1)
    except ValueError:
        return value.replace(year=value.year + 1, day=28)


def _point(text: str, anchor: datetime | None) -> TimeRange | None:
    """One end of a directed phrase or a range: a date, month or year, a relative phrase,
    or a month on its own (``since April``: the latest April on or before the anchor)."""
    found = absolute_range(text) or absolute_range(re.sub(r"^(in|on|during)\s+", "", text))
    if found is None and anchor is not None:
        found = _relative_range(text, anchor, directed=False)
        if found is None and re.fullmatch(rf"(?:{_MONTH_RE})\.?", text):
            found = _relative_range(f"in {text.rstrip('.')}", anchor, directed=False)
    return found


def _directed(phrase: str, anchor: datetime | None) -> TimeRange | None:
    """``before/after/since/until X`` and ``from/between A to/and B``; None if neither."""
    if m := _BETWEEN.fullmatch(phrase):
        left, right = m.group(1), m.group(2)
        year = _YEAR.search(right)
        if year and not _YEAR.search(left) and not re.search(r"\d{4}-", left):
            left = f"{left} {year.group(1)}"
        start, end = _point(left, anchor), _point(right, anchor)
        # "between 01/06/2024 and 30/06/2024": the clear end says the order of the other
        numeric = (_NUMERIC.fullmatch(left), _NUMERIC.fullmatch(right))
        if numeric[0] and numeric[1]:
            order = _numeric_order(numeric[0]) or _numeric_order(numeric[1])
            start, end = _numeric_date(numeric[0], order), _numeric_date(numeric[1], order)
        if (
            year
            and start is not None
            and end is not None
            and start.start
            and end.end
            and end.end <= start.start
            and start.start.month > (end.end - timedelta(days=1)).month  # over a year's end
            and left.endswith(year.group(1))
        ):
            # "from December to January 2024": the December before
            left = f"{left[: -len(year.group(1))]}{int(year.group(1)) - 1}"
            start = _point(left, anchor)
        if (
            not year
            and not _YEAR.search(left)
            and start is not None
            and end is not None
            and start.start
            and end.start
            and end.end
            and end.end <= start.start
            and end.start.month != start.start.month  # "June 9 and June 1": the wrong way
            and re.search(rf"\b(?:{_MONTH_RE})\b", right)
        ):
            # With no year, each end alone is the latest such day on or before the anchor,
            # so an end before the start landed a year early: the range is the latest that
            # started on or before the anchor, as "in the winter" is ("between June 1 and
            # August 15" on 20 July: this summer's; "between Dec 20 and Jan 5" on 25
            # December: this one, which the anchor is in)
            end = TimeRange(_next_year(end.start), _next_year(end.end))
        if start is None or end is None or (start.start and end.end and end.end <= start.start):
            return None
        return TimeRange(start.start, end.end)
    if m := _DIRECTION.fullmatch(phrase):
        found = _point(m.group(2), anchor)
        if found is None:
            return None
        word = m.group(1)
        if word in ("before", "prior to"):
            return TimeRange(None, found.start)
        if word == "after":
            return TimeRange(found.end, None)
        if word == "since":
            return TimeRange(found.start, None)
        return TimeRange(None, found.end)  # until, till, through, up to: inclusive
    return None


def _relative_range(text: str, anchor: datetime, *, directed: bool = True) -> TimeRange | None:
    """A relative phrase resolved against ``anchor``; ``None`` if not understood."""
    phrase = re.sub(r"\s+", " ", text.strip().lower().rstrip("?.!"))
    if directed and (found := _directed(phrase, anchor)) is not None:
        return found
    today = datetime(anchor.year, anchor.month, anchor.day)
    if phrase in ("today", "this day"):
        return _day_range(today)
    if phrase == "yesterday":
        return TimeRange(today - timedelta(days=1), today)
    if phrase == "the day before yesterday":
        return TimeRange(today - timedelta(days=2), today - timedelta(days=1))
    week_start = today - timedelta(days=today.weekday())
    if phrase == "this week":
        return TimeRange(week_start, _plus(week_start, timedelta(days=7)))
    if phrase in ("last week", "the week before", "the previous week"):
        return TimeRange(week_start - timedelta(days=7), week_start)
    if phrase == "this month":
        return _month_range(today.year, today.month)
    if phrase in ("last month", "the previous month"):
        year, month = (today.year, today.month - 1) if today.month > 1 else (today.year - 1, 12)
        return _month_range(year, month)
    if phrase == "this year":
        return TimeRange(datetime(today.year, 1, 1), _month_range(today.year, 12).end)
    if phrase in ("last year", "the previous year"):
        return TimeRange(datetime(today.year - 1, 1, 1), datetime(today.year, 1, 1))
    if phrase in ("recently", "lately"):
        return TimeRange(today - timedelta(days=30), _day_range(today).end)
    if m := re.fullmatch(
        rf"(?:(last|this past)|this|in|during)\s+(?:the\s+)?({_SEASON_RE})", phrase
    ):
        # "in the summer", "this summer": the latest that started on or before the anchor;
        # "last summer": the latest that ended before it
        found = _season_range(today.year, m.group(2))
        if found.start is not None and found.start > today:
            found = _season_range(today.year - 1, m.group(2))
        if m.group(1) and found.end is not None and found.end > today:
            assert found.start is not None
            found = _season_range(found.start.year - 1, m.group(2))
        return found
    if m := re.fullmatch(rf"(?:last|in|this past|this|during)\s+({_MONTH_RE})", phrase):
        # the latest such month on or before the anchor ("last May" in a transcript dated
        # in May is that May: the anchor is the conversation's last day, not today)
        month = MONTHS[m.group(1)]
        year = today.year if month <= today.month else today.year - 1
        return _month_range(year, month)
    day_month = re.fullmatch(
        rf"(?:on\s+)?(?:the\s+)?(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({_MONTH_RE})\.?", phrase
    )
    month_day = re.fullmatch(rf"(?:on\s+)?({_MONTH_RE})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?", phrase)
    if day_month or month_day:
        day, name = (
            (day_month.group(1), day_month.group(2))
            if day_month
            else (month_day.group(2), month_day.group(1))  # type: ignore[union-attr]
        )
        for year in (today.year, today.year - 1):  # the latest such day on or before it
            try:
                candidate = datetime(year, MONTHS[name], int(day))
            except ValueError:
                continue  # 29 February of a year without one, 31 April
            if candidate <= today:
                return _day_range(candidate)
        return None
    numbers_re = "|".join(sorted(_NUMBERS, key=len, reverse=True))
    if m := re.fullmatch(
        rf"(?:in|during|over|within)?\s*the\s+(?:last|past)\s+(\d+|{numbers_re})?\s*"
        r"(day|week|month|year)s?",
        phrase,
    ):
        amount = (
            1
            if m.group(1) is None
            else (int(m.group(1)) if m.group(1).isdigit() else _NUMBERS[m.group(1)])
        )
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[m.group(2)] * amount
        return TimeRange(today - timedelta(days=days - 1), _day_range(today).end)
    numbers = "|".join(sorted(_NUMBERS, key=len, reverse=True))
    if m := re.fullmatch(rf"(\d+|{numbers})\s+(day|week|month|year)s?\s+ago", phrase):
        amount = int(m.group(1)) if m.group(1).isdigit() else _NUMBERS[m.group(1)]
        unit = m.group(2)
        if unit == "day":
            return _day_range(today - timedelta(days=amount))
        if unit == "week":
            start = week_start - timedelta(days=7 * amount)
            return TimeRange(start, start + timedelta(days=7))
        if unit == "month":
            month_index = today.year * 12 + today.month - 1 - amount
            return _month_range(month_index // 12, month_index % 12 + 1)
        return TimeRange(
            datetime(today.year - amount, 1, 1), datetime(today.year - amount + 1, 1, 1)
        )
    return None


def resolve(text: str, anchor: datetime | None) -> TimeRange | None:
    """Absolute first; relative phrases need an anchor (a directed or ranged phrase of
    absolute dates needs none)."""
    found = absolute_range(text)
    if found is None:
        stripped = re.sub(r"^(in|on|during)\s+", "", text.strip().lower())
        found = absolute_range(stripped)
    if found is None:
        try:
            found = _directed(re.sub(r"\s+", " ", text.strip().lower().rstrip("?.!")), anchor)
        except (ValueError, OverflowError):
            found = None
    if found is None and anchor is not None:
        found = relative_range(text, anchor)
    return found


def understood(text: str) -> bool:
    """Whether a phrase is a time expression at all (checked against a sample anchor)."""
    return resolve(text, datetime(2024, 6, 15)) is not None
