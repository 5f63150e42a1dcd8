"""Dates as real exports write them, and one day/month order per file."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from structrag.timeparse import (
    DEFAULT_DATE_ORDER,
    date_order_of,
    infer_date_order,
    parse_datetime,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("28.12.2023, 20:02:02", datetime(2023, 12, 28, 20, 2, 2)),
        ("12.03.23, 14:02", datetime(2023, 3, 12, 14, 2)),  # dots: day first
        ("2023-03-12 14:02", datetime(2023, 3, 12, 14, 2)),
        ("2023/03/12 14:02:05", datetime(2023, 3, 12, 14, 2, 5)),
        ("28/03/2023, 09:15", datetime(2023, 3, 28, 9, 15)),
        ("3/28/23, 2:02 PM", datetime(2023, 3, 28, 14, 2)),
        ("3/28/23, 2:02\u202fPM", datetime(2023, 3, 28, 14, 2)),  # iOS narrow space
        ("[28/03/2023, 14:02:05]", datetime(2023, 3, 28, 14, 2, 5)),
        ("\u200e[28/03/2023, 14:02:05]", datetime(2023, 3, 28, 14, 2, 5)),
        ("12:30 am on 1 May, 2023", datetime(2023, 5, 1, 0, 30)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),
        ("Mar 12, 2023 at 2:02:05 PM", datetime(2023, 3, 12, 14, 2, 5)),
        ("Sunday, March 12, 2023 2:02 PM", datetime(2023, 3, 12, 14, 2)),
        ("Sun, 12 Mar 2023 14:02:05 +0100", datetime(2023, 3, 12, 13, 2, 5)),
        ("12 Mar 2023 14:02:05 -0000 (UTC)", datetime(2023, 3, 12, 14, 2, 5)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("May 8th, 2023", datetime(2023, 5, 8)),
        ("2024-03-01T09:00:00Z", datetime(2024, 3, 1, 9, 0)),
        ("1678629725.000200", datetime(2023, 3, 12, 14, 2, 5, 200)),  # Slack's ts
        ("1678629725000", datetime(2023, 3, 12, 14, 2, 5)),  # milliseconds
        ("28-Dec-2023 20:02", datetime(2023, 12, 28, 20, 2)),
        ("Dec. 28, 2023", datetime(2023, 12, 28)),
        ("28.12.2023 um 20:02", datetime(2023, 12, 28, 20, 2)),
        ("Thursday 28 December 2023, 20:02:02 GMT+1", datetime(2023, 12, 28, 19, 2, 2)),
        ("Thu Dec 28 20:02:02 +0000 2023", datetime(2023, 12, 28, 20, 2, 2)),
        ("2023-12-28 20:02:02 UTC", datetime(2023, 12, 28, 20, 2, 2)),
        ("20:02, 28/12/2023", datetime(2023, 12, 28, 20, 2)),
    ],
)
def test_export_date_forms(text: str, expected: datetime) -> None:
    assert parse_datetime(text) == expected


@pytest.mark.parametrize(
    "text",
    ["", "hello", "2023", "13/13/2023", "12/03/2023 25:00", "3/12/23, 13:02 PM", "32.01.2023"],
)
def test_not_dates(text: str) -> None:
    assert parse_datetime(text) is None


def test_ambiguous_dates_follow_the_order_given() -> None:
    assert parse_datetime("12/03/2023, 14:02") == datetime(2023, 3, 12, 14, 2)  # default
    assert parse_datetime("12/03/2023, 14:02", order="mdy") == datetime(2023, 12, 3, 14, 2)
    # A value that can be read one way only is read that way, whatever the order says.
    assert parse_datetime("28/03/2023", order="mdy") == datetime(2023, 3, 28)
    assert parse_datetime("03/28/2023", order="dmy") == datetime(2023, 3, 28)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("28/03/2023", "dmy"),
        ("03/28/2023", "mdy"),
        ("12.03.2023", "dmy"),
        ("12/03/2023, 14:02", "either"),
        ("[3/4/23, 2:02:05 PM]", "either"),
        ("2023-03-12", None),
        ("8 May 2023", None),
        (1678629725, None),
    ],
)
def test_what_one_value_says_about_the_order(text: object, says: str | None) -> None:
    assert date_order_of(text) == says


def test_a_file_is_settled_by_any_value_above_12() -> None:
    choice = infer_date_order(["03/04/2023", "05/06/2023", "04/13/2023", "04/20/2023"])
    assert (choice.order, choice.evidence, choice.ambiguous) == ("mdy", "04/13/2023", 2)
    assert not choice.defaulted and choice.notes("f") == []
    assert "month-first" in choice.basis


def test_an_unsettled_file_takes_the_default_and_says_so() -> None:
    choice = infer_date_order(["03/04/2023", "05/06/2023", "2023-03-12"])
    assert choice.order == DEFAULT_DATE_ORDER == "dmy"
    assert choice.defaulted
    (note,) = choice.notes("chat.txt")
    assert note.startswith("chat.txt: 2 date(s)") and "date_order='mdy'" in note
    assert infer_date_order(["03/04/2023"], forced="mdy").order == "mdy"


def test_a_file_at_odds_with_itself_is_reported() -> None:
    choice = infer_date_order(["28/03/2023", "29/03/2023", "03/30/2023"])
    assert choice.order == "dmy" and choice.conflict == "03/30/2023"
    assert any("disagree" in n for n in choice.notes("x"))


@given(
    moment=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2069, 12, 31)),
    order=st.sampled_from(["dmy", "mdy"]),
    style=st.sampled_from(["android", "ios", "ios12", "dots"]),
)
def test_whatsapp_style_dates_round_trip(moment: datetime, order: str, style: str) -> None:
    moment = moment.replace(microsecond=0)
    first, second = (moment.day, moment.month) if order == "dmy" else (moment.month, moment.day)
    if style == "dots":
        if order == "mdy":
            return  # nobody writes month-first dates with dots
        text = f"{first:02}.{second:02}.{moment.year % 100:02}, {moment:%H:%M:%S}"
    elif style == "android":
        text = f"{first}/{second}/{moment.year}, {moment:%H:%M:%S}"
    elif style == "ios":
        text = f"[{first:02}/{second:02}/{moment.year}, {moment:%H:%M:%S}]"
    else:
        hour = moment.hour % 12 or 12
        text = f"[{first}/{second}/{moment.year % 100:02}, {hour}:{moment:%M:%S}\u202f{moment:%p}]"
    assert parse_datetime(text, order=order) == moment  # type: ignore[arg-type]


@given(text=st.text(max_size=60), order=st.sampled_from([None, "dmy", "mdy"]))
def test_any_text_gives_a_date_or_none(text: str, order: str | None) -> None:
    result = parse_datetime(text, order=order)  # type: ignore[arg-type]
    assert result is None or result.tzinfo is None
    date_order_of(text)
