"""Ranking a question's messages: a message that only asks gives way to the answers, and
an action's verb finds the person's actions whatever their object. Real indexes of a
small chat."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from structrag import Index
from structrag.errors import ConfigError
from structrag.query.engine import is_question
from structrag.query.parser import parse
from structrag.query.settings import DEFAULT_SETTINGS, RankingSettings

CHAT = [
    "[01.02.2024, 10:00:00] Ana: how was the trip?",
    "[01.02.2024, 10:01:00] Tim: good, I read Dune on the train, loved it",
    "[01.02.2024, 10:02:00] Ana: nice",
    "[02.02.2024, 09:00:00] Ana: the weather is awful today",
    "[02.02.2024, 09:01:00] Tim: same here, rain all day",
    "[03.02.2024, 18:00:00] Ana: do you still read books before bed, or are books boring now?",
    "[03.02.2024, 18:01:00] Tim: sometimes",
    "[04.02.2024, 18:00:00] Ana: what kind of books do you read, any books you recommend?",
    "[04.02.2024, 18:01:00] Tim: mostly old sci-fi",
]
QUESTION = "What books has Tim read?"


def _indexed(tmp_path_factory: pytest.TempPathFactory, name: str, lines: list[str]) -> Path:
    """A real index of one chat export with these lines."""
    folder = tmp_path_factory.mktemp(name)
    path = folder / "ana_tim.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Index(folder / "ix") as index:
        index.ingest([path], workers=1)
    return folder / "ix"


@pytest.fixture(scope="module")
def chat(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _indexed(tmp_path_factory, "books", CHAT)


def _texts(index: Index, question: str) -> list[str]:
    answer = index.ask(question, budget=1000)
    return [index.show(m)["text"] for m in answer.message_ids]


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Are you reading any books?", True),
        ("Have you read it? [shares a photo of a book]", True),
        ("Great! Did you enjoy it?  ", True),
        ("I loved it!", False),
        ("Did you? I loved it. [shares a photo of a book]", False),
        ("[shares a photo of a cat]", False),
    ],
)
def test_a_message_asks_when_it_ends_with_a_question(text: str, asks: bool) -> None:
    assert is_question(text) is asks


def test_a_reply_is_packed_before_the_question_it_answers(chat: Path) -> None:
    # Ana's question holds every word of the question; Tim's reply only its neighbours'.
    off = DEFAULT_SETTINGS.with_overrides(question_penalty=0.0)
    with Index(chat, read_only=True, settings=off) as index:
        before = _texts(index, QUESTION)
    with Index(chat, read_only=True) as index:
        after = _texts(index, QUESTION)
    asking = "do you still read books before bed, or are books boring now?"
    assert before[0] == asking
    assert after[0] == "mostly old sci-fi"
    assert after.index(asking) > 0
    assert sorted(before) == sorted(after)  # the same messages, in another order


def test_an_action_with_an_object_also_finds_the_verb_with_any_object(chat: Path) -> None:
    with Index(chat, read_only=True) as index:
        answer = index.ask(QUESTION, budget=1000)
        assert "action(Tim, read, books)" in answer.query
        assert "action(Tim, read, *)^1" in answer.query
        # the printed query runs with the same plan
        assert index.query(answer.query).plan == answer.plan
        widened = [m.score for m in answer.context.messages]
        dune = answer.message_ids.index("2")
    off = DEFAULT_SETTINGS.with_overrides(open_object_weight=0.0)
    with Index(chat, read_only=True, settings=off) as index:
        answer = index.ask(QUESTION, budget=1000)
        assert "action(Tim, read, *)" not in answer.query
        narrow = [m.score for m in answer.context.messages]
        # "I read Dune" is Tim reading something other than "books": only the open
        # pattern finds its action, so it scores higher with it
        assert answer.context.messages[answer.message_ids.index("2")].score < widened[dune]
    assert narrow != widened


def test_a_boost_of_one_is_written_out_and_parsed_back() -> None:
    node = parse("read action(Tim, read, *)^1")
    assert node.to_query() == "read action(Tim, read, *)^1"


def test_an_action_whose_object_is_no_category_is_not_opened(chat: Path) -> None:
    with Index(chat, read_only=True) as index:
        query = index.ask("When did Tim read Dune?", budget=300).query
    assert "action(Tim, read, Dune)" in query
    assert "action(Tim, read, *)" not in query


COOKING = [
    "[01.02.2024, 10:00:00] Ana: what did you cook yesterday?",
    "[01.02.2024, 10:01:00] Tim: I cooked pasta with my brother",
    "[02.02.2024, 19:00:00] Ana: hey! what's new with you?",
    "[02.02.2024, 19:01:00] Tim: tried a homemade coconut ice cream tonight, so good",
    "[03.02.2024, 12:00:00] Tim: I cooked a curry for lunch",
    "[04.02.2024, 18:00:00] Ana: cooking again?",
    "[04.02.2024, 18:01:00] Tim: yes, I cooked soup",
]


@pytest.fixture(scope="module")
def cooking(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _indexed(tmp_path_factory, "cooking", COOKING)


def test_a_dropped_time_scope_keeps_its_messages_first(cooking: Path) -> None:
    # Nothing on 2 February says "cook", so the question is widened until the date is
    # dropped; that day's messages still come before the other days' cooking.
    question = "What did Tim cook on 2 February 2024?"
    day = [
        "hey! what's new with you?",
        "tried a homemade coconut ice cream tonight, so good",
    ]
    with Index(cooking, read_only=True) as index:
        answer = index.ask(question, budget=1000)
        texts = [index.show(m)["text"] for m in answer.message_ids]
        assert any("dropped scopes" in note for note in answer.notes)
        assert 'the messages of when:"on 2 February 2024" (2 in all) come first' in answer.notes
        assert sorted(texts[:2]) == sorted(day)
        assert "I cooked a curry for lunch" in texts  # the wider query's matches follow
    off = DEFAULT_SETTINGS.with_overrides(scope_keep_max=0)
    with Index(cooking, read_only=True, settings=off) as index:
        answer = index.ask(question, budget=1000)
        texts = [index.show(m)["text"] for m in answer.message_ids]
        # only what the wider query matches comes first: the day's messages, unmatched,
        # are left to the vector fill after every other day's cooking
        assert texts[0] != day[1]
        assert texts.index("I cooked a curry for lunch") < texts.index(day[1])


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"k1": -1}, "ranking setting k1 must be 0 or more, not -1"),
        ({"k1": "x"}, "ranking setting k1 takes a number, not 'x'"),
        ({"b": 5}, "ranking setting b must be from 0 to 1, not 5"),
        ({"fuzzy_threshold": 7}, "fuzzy_threshold must be from 0 to 1"),
        ({"question_depth": -1}, "question_depth must be 0 or more"),
        ({"graph_max_names": 2.5}, "graph_max_names takes a whole number, not 2.5"),
        ({"window_turns": 1}, "window_turns takes true or false, not 1"),
        ({"speaker_boost": float("inf")}, "speaker_boost must be 0 or more, not inf"),
        ({"window": {0: 1.0, 1: -0.5}}, "window[1] must be 0 or more, not -0.5"),
    ],
)
def test_ranking_settings_refuse_impossible_values(
    overrides: dict[str, object], message: str
) -> None:
    """They were taken as given: ``k1=-1`` found nothing, ``k1="x"`` failed in numpy at
    query time."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        DEFAULT_SETTINGS.with_overrides(**overrides)
    with pytest.raises(ConfigError, match=re.escape(message)):
        RankingSettings(**overrides)  # type: ignore[arg-type]
    assert DEFAULT_SETTINGS.with_overrides(k1=2, b=1, question_depth=0).k1 == 2


def test_ranking_settings_take_numpy_numbers_and_refuse_huge_ones() -> None:
    import numpy as np

    swept = DEFAULT_SETTINGS.with_overrides(k1=np.float32(1.5), spelling_max=np.int64(2))
    assert (swept.k1, swept.spelling_max) == (1.5, 2)
    with pytest.raises(ConfigError, match="spelling_max must be 0 or more"):
        DEFAULT_SETTINGS.with_overrides(spelling_max=10**400)
