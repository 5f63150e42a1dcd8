"""Identifiers joined by underscores (``max_retries``, ``user_profile``) found by their
parts as well as whole: the analysis on its own, then real ingests (DuckDB, Whoosh, spaCy)
into ``tmp_path`` searched by ``query``, ``ask`` and knowledge search, and an index built
before the parts were terms."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.analysis import TEXT_ANALYSIS, stems, term_key, words
from tests.chat_helpers import PLAIN_TERMS, spaced_chat

CHAT = [
    ("1", "Ana", "Set max_retries to 5 in the client config."),
    ("2", "Bo", "The user_profile table keeps one row per account."),
    ("3", "Cy", "What is the max speed of that car?"),
    ("4", "Ana", "The upload needed three retries before it passed."),
]

README = """# Fetcher

## Settings

Set `max_retries` in settings.toml to bound how often a request is tried again; the
`retry_delay_seconds` between tries doubles each time.
"""
OTHER = "The garden needs watering twice a week in summer; tomatoes like full sun."


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    folder = tmp_path_factory.mktemp("identifiers")
    (folder / "README.md").write_text(README, "utf-8")
    with Index(folder / "index") as index:
        index.ingest([spaced_chat(folder / "chat.jsonl", CHAT)])
        index.knowledge.add([folder / "README.md", OTHER], shared=True)
        yield index


def ids(index: Index, expression: str) -> list[str]:
    return [m.id for m in index.query(expression, limit=None).messages]


def said(index: Index, expression: str) -> list[str]:
    """The chat messages found that are no filler (a filler is found by its neighbour)."""
    return [i for i in ids(index, expression) if i in {"1", "2", "3", "4"}]


# -- the analysis -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Set max_retries to 5", ["set", "max_retri", "max", "retri"]),
        ("the user_profile table", ["user_profil", "user", "profil", "tabl"]),
        ("__init__ and is_active", ["__init__", "init", "is_act", "activ"]),  # "is": a stopword
        ("a_b_c and x_1", ["a_b_c", "x_1"]),  # no part of two characters
        ("寿司_bar", ["寿", "寿司", "司", "_bar", "bar"]),
    ],
)
def test_the_index_terms_of_an_identifier_are_the_whole_and_its_parts(
    text: str, expected: list[str]
) -> None:
    assert stems(text, parts=True) == expected


def test_a_query_asks_for_the_identifier_as_written() -> None:
    assert stems("Set max_retries to 5") == ["set", "max_retri"]
    assert term_key("user_profile") == "user_profil"  # stored entity keys are unchanged
    assert words("what is max_retries?", unigrams=False) == ["what", "max_retries"]


@pytest.mark.parametrize("parts", [False, True])
def test_text_without_underscores_has_the_terms_it_always_had(parts: bool) -> None:
    def terms(text: str) -> list[str]:  # the index's, or a query's (as before the parts)
        return stems(text, parts=True) if parts else stems(text)

    for text, expected in PLAIN_TERMS:
        assert terms(text) == expected
    # camelCase is no identifier to split (mostly names: LeBron, YouTube)
    assert terms("Set maxRetries to 5, LeBron on YouTube") == [
        "set",
        "maxretri",
        "lebron",
        "youtub",
    ]
    assert terms("We ate 寿司 in Tokyo, 猫!") == [
        "we",
        "ate",
        "寿",
        "寿司",
        "司",
        "tokyo",
        "猫",
    ]


# -- query and ask ------------------------------------------------------------------------


def test_a_part_of_an_identifier_finds_the_message_by_query(ix: Index) -> None:
    assert set(said(ix, "retries")) == {"1", "4"}
    assert said(ix, "profile") == ["2"]
    assert said(ix, "user") == ["2"]
    assert set(ids(ix, "retries AND speaker:Ana")) == {"1", "4"}
    # a phrase may run through the parts (ranked first; under AND, it alone)
    assert ids(ix, '"max retries"')[0] == "1"
    assert ids(ix, 'speaker:Ana AND "max retries"') == ["1"]
    assert ids(ix, 'speaker:Ana AND "retries in the client"') == ["1"]


def test_the_whole_identifier_finds_exactly_it(ix: Index) -> None:
    assert ids(ix, "max_retries")[0] == "1"
    assert said(ix, "max_retries") == ["1"]  # not "max speed", not "three retries"
    assert said(ix, "user_profile") == ["2"]
    assert ids(ix, 'speaker:Ana AND "set max_retries"') == ["1"]
    # under NOT it is the identifier, not any message with "max"
    kept = ids(ix, "NOT max_retries")
    assert "1" not in kept and {"3", "4"} <= set(kept)


def test_a_question_finds_the_identifier_by_a_part_and_whole(ix: Index) -> None:
    # no other word of these questions is said in the messages
    assert ix.ask("Whose profile was it?").ranked[0].id == "2"
    assert {m.id for m in ix.ask("Who mentioned retries?").ranked[:2]} == {"1", "4"}
    answer = ix.ask("What is max_retries set to?")
    assert answer.ranked[0].id == "1"
    assert "max_retries" in answer.query
    assert not any("reindex" in n for n in answer.notes)


# -- knowledge ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["structured", "text"])
def test_knowledge_search_finds_a_document_by_a_part(ix: Index, mode: str) -> None:
    hits = ix.knowledge.search("how often are retries made?", mode=mode)
    assert hits and "max_retries" in hits[0].fragment.text, mode
    text = hits[0].fragment.text
    # the part is what is highlighted, inside its identifier
    shown = {(text[s.start : s.end], text[s.start - 4 : s.start]) for s in hits[0].spans}
    assert ("retries", "max_") in shown
    whole = ix.knowledge.search("max_retries", mode=mode)
    assert whole and "max_retries" in whole[0].fragment.text
    assert "max_retries" in {s.text for s in whole[0].spans}
    delay = ix.knowledge.search("delay seconds", mode=mode)
    assert delay and "retry_delay_seconds" in delay[0].fragment.text


# -- an index built before --------------------------------------------------------------


@pytest.mark.parametrize(
    "older",
    [
        "UPDATE meta SET value = 'cjk-bigrams' WHERE key = 'text_analysis'",  # after CJK
        "DELETE FROM meta WHERE key = 'text_analysis'",  # before both
    ],
)
def test_an_index_built_before_the_parts_says_to_reindex(tmp_path: Path, older: str) -> None:
    with Index(tmp_path / "index") as index:
        index.ingest([spaced_chat(tmp_path / "chat.jsonl", CHAT)])
        assert index.store.get_setting("text_analysis") == TEXT_ANALYSIS
        assert not any("reindex" in n for n in index.query("retries").notes)  # a new index
        index.store.sql(older)
        index.store.release()
    with Index(tmp_path / "index") as index:
        for notes in (
            index.query("retries").notes,
            index.query("profile AND speaker:Bo").notes,
            index.ask("How often are retries made?").notes,
        ):
            assert any("structrag reindex" in n for n in notes), notes
        assert any("(max_retries)" in n for n in index.query("retries").notes)
        # found whole as before, said nowhere inside an identifier, or only by a scope
        for expression in ("max_retries", "weather", "speaker:Ana", "寿司"):
            assert not any("reindex" in n for n in index.query(expression).notes), expression
        index.reindex()
        assert index.store.get_setting("text_analysis") == TEXT_ANALYSIS
        assert not any("reindex" in n for n in index.query("retries").notes)
