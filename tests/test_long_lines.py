"""A message of megabytes: its tokens are counted only as far as any budget can reach
(tiktoken takes seconds per megabyte of a long run of letters), contexts still keep
their budget exactly, and the best match, when it is that message, shows its start."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from structrag import Index
from structrag.query import context as context_module
from structrag.query.context import CUT_MARK
from structrag.tokens import TiktokenCounter, get_counter

#: The largest budget while these tests run: lowered so that a line of a few megabytes
#: is longer than any budget (at the real 1,000,000 it would take 20 MB or more).
CAP = 20_000
WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "was",
    "for",
    "that",
    "on",
    "with",
    "as",
    "by",
    "at",
    "from",
    "his",
    "her",
    "it",
    "an",
    "were",
    "are",
    "which",
    "this",
    "be",
    "or",
    "has",
    "had",
    "not",
    "but",
    "their",
    "its",
    "they",
    "have",
    "one",
    "all",
    "been",
    "who",
    "also",
    "more",
    "new",
    "first",
    "two",
    "after",
    "other",
    "some",
    "time",
    "there",
    "can",
    "into",
    "when",
    "only",
    "would",
    "many",
    "most",
    "these",
    "such",
    "over",
]


class _Spy:
    """A real tiktoken encoding that notes the length of every text it encodes."""

    def __init__(self, encoding: Any) -> None:
        self.encoding = encoding
        self.lengths: list[int] = []

    def encode(self, text: str, **options: Any) -> list[int]:
        self.lengths.append(len(text))
        return list(self.encoding.encode(text, **options))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.encoding, name)


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    watching = _Spy(get_counter()._encoding)
    # get_counter() (an ingest's digests) and get_counter("cl100k_base") (ask) are two
    for counter in {get_counter(), get_counter("cl100k_base")}:
        monkeypatch.setattr(counter, "_encoding", watching)
    monkeypatch.setattr(context_module, "MAX_BUDGET", CAP)
    return watching


def _words(count: int, seed: int = 7) -> str:
    pick = random.Random(seed).choice
    return " ".join(pick(WORDS) for _ in range(count))


LONG_WORDS = "Notes on the quokka census. " + _words(460_000)  # ~2 M characters
LONG_RUN = "quokka " + "x" * 2_000_000


def _index(tmp_path: Path, long_text: str) -> Iterator[Index]:
    rows = [
        {"id": "long", "speaker": "Ann", "text": long_text},
        {"id": "short", "speaker": "Bo", "text": "A short word on the weather today."},
    ]
    path = tmp_path / "long.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with Index(tmp_path / "index") as ix:
        ix.ingest([path])
        yield ix


@pytest.fixture(params=["words", "run"])
def long_index(
    request: pytest.FixtureRequest, tmp_path: Path, spy: _Spy
) -> Iterator[tuple[Index, str]]:
    text = LONG_WORDS if request.param == "words" else LONG_RUN
    for ix in _index(tmp_path, text):
        yield ix, text


def test_a_digest_does_not_count_a_long_line_to_its_end(
    long_index: tuple[Index, str], spy: _Spy
) -> None:
    ix, text = long_index
    assert len(text) > 1_900_000
    # the ingest (its digest) encoded no text near the long line's length, nor all of it
    assert spy.lengths and max(spy.lengths) < 400_000
    assert sum(spy.lengths) < 1_000_000
    digest = ix.engine.view("long").digest
    assert digest is not None
    tokens = {
        line.split(":", 1)[0]: int(t) for line, t in zip(digest.lines(), digest.tokens, strict=True)
    }
    assert tokens["Ann"] > CAP  # "over any budget"
    assert tokens["Bo"] == get_counter().count("Bo: A short word on the weather today.\n")


@pytest.mark.parametrize("budget", [100, 1_000, CAP])
def test_ask_keeps_its_budget_and_shows_the_start_of_a_long_best_match(
    long_index: tuple[Index, str], spy: _Spy, budget: int
) -> None:
    ix, text = long_index
    spy.lengths.clear()
    answer = ix.ask("What about the quokka?", budget=budget)
    context = answer.context
    counter = get_counter()
    assert context.tokens == counter.count(context.text) <= budget
    assert context.messages, answer.notes
    first = context.messages[0]
    assert first.id == "long" and first.cut
    assert first.text.endswith(CUT_MARK)
    start = first.text[: -len(CUT_MARK)]
    assert start.startswith("Ann: ") and text.startswith(start[len("Ann: ") :])
    # the cut start is the longest that fits, give or take the word it stops before
    assert counter.count(first.text + "\n") <= budget
    assert len(start) > 3 * budget if budget < CAP else len(start) > 20_000
    # ask counted only starts of the long line, never the whole of it
    assert max(spy.lengths) < 400_000


def test_lines_not_in_a_digest_are_counted_within_the_cap(tmp_path: Path, spy: _Spy) -> None:
    for ix in _index(tmp_path, LONG_RUN):
        keys = [int(k) for k in ix.engine.view("long").scope.frame.mkeys]
        spy.lengths.clear()
        lines = ix.engine.lines(keys, get_counter())  # read from the store, not a digest
        by_id = {line.id: line for line in lines.values()}
        assert by_id["long"].tokens > CAP
        assert by_id["short"].tokens == get_counter().count(by_id["short"].text + "\n")
        assert max(spy.lengths) < 400_000


def _mixed(seed: int, count: int) -> str:
    """Text of every kind of piece the token patterns split: contractions, numbers,
    punctuation runs, whitespace runs and line breaks, accents, CJK, underscores."""
    parts = [
        "the",
        "of",
        "it's",
        "don't",
        "THEY'LL",
        "12345",
        "7",
        "3.14",
        "...",
        "!?",
        "—",
        "«",
        "»",
        "_x",
        "a_b",
        "__",
        "é",
        "Ünïcödé",
        "naïve",
        "中文字",
        "日本語。",
        "한국어,",
        "\t",
        "\n",
        "\r\n",
        "",
        "",
        "",
        "?!",
        "'",
        '"',
        "(",
        ")",
        "[x]",
        "{y}",
        "@",
        "#",
        "$",
        "%",
        "^",
        "&",
        "*",
    ]
    gaps = [" ", " ", "  ", "", "\n", "\t", "   ", "\u3002", "\uff0c", "\u3001"]
    pick = random.Random(seed).choice
    return "".join(pick(parts) + pick(gaps) for _ in range(count))


@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_counts_within_the_cap_are_tiktokens_own(encoding: str, seed: int) -> None:
    from structrag.query.context import count_within

    counter = TiktokenCounter(encoding)
    text = _mixed(seed, 80_000)  # several parts of structrag.tokens.COUNT_PART
    exact = counter.count(text)
    assert count_within(counter, text, exact) == exact
    assert count_within(counter, text, exact + 1_000) == exact
    assert count_within(counter, text, exact - 1) == exact
    assert count_within(counter, text, 10) == 11
    assert 0 < counter._at_least(text) <= exact
    short = text[:5_000]
    assert count_within(counter, short) == counter.count(short)


def test_a_long_run_without_a_cut_is_over_the_cap_without_being_encoded(spy: _Spy) -> None:
    from structrag.query.context import count_within

    counter = get_counter()
    spy.lengths.clear()
    assert count_within(counter, "Ann: " + "x" * 3_000_000, 100_000) == 100_001
    assert not spy.lengths or max(spy.lengths) < 400_000
    # 4,000 runs of 128 spaces are 4,000 tokens: bounded low, so counted, and exact
    # (tiktoken itself fails on a run of a million spaces before a word)
    spaces = "a" + " " * 512_000 + "b"
    exact = counter.count(spaces)
    assert count_within(counter, spaces, 30_000) == exact
    assert count_within(counter, spaces, exact - 1) == exact


def test_a_note_names_a_line_over_any_budget() -> None:
    from structrag.query.context import tokens_text

    assert tokens_text(120) == "120 tokens"
    assert tokens_text(context_module.MAX_BUDGET + 1) == "more than 1,000,000 tokens"


def test_a_nearest_message_longer_than_the_budget_is_noted_when_nothing_matches(
    tmp_path: Path,
) -> None:
    # No word of the question is in the index: the context would hold the nearest message
    # by embedding, which is longer than the budget (fill is never cut): a note says so.
    path = tmp_path / "one.jsonl"
    row = {"id": "long", "speaker": "Ann", "text": _words(2_000)}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    with Index(tmp_path / "index") as ix:
        ix.ingest([path])
        answer = ix.ask("Did Zebediah travel to Ulaanbaatar?", budget=100)
    assert not answer.context.messages
    assert any(
        "nearest by embedding, long (" in note and "does not fit the budget of 100" in note
        for note in answer.notes
    ), answer.notes


def test_a_run_of_a_million_spaces_is_counted_not_a_crash(tmp_path: Path) -> None:
    # tiktoken's own pattern fails on such a run ("Max stack size exceeded"): the counter
    # counts it in parts, never short of the real cost, and ingest and ask go on.
    counter = TiktokenCounter()
    text = "quokka" + " " * 1_000_000 + "census"
    half = "quokka" + " " * 300_000 + "census"
    assert counter._count_cut(half) >= counter.count(half)
    total = counter.count(text)
    assert 0 < total <= counter.count_within(text, 10 * total)
    path = tmp_path / "spaces.jsonl"
    rows = [{"id": "1", "speaker": "Ann", "text": text}, {"id": "2", "speaker": "Bo", "text": "hi"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    with Index(tmp_path / "index") as ix:
        ix.ingest([path])
        answer = ix.ask("What about the quokka census?", budget=200)
    assert answer.context.tokens <= 200
