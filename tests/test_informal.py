"""Informal chats: windows over turns (runs of messages by one speaker), typos in
questions, names written in lower case. Real indexes of small WhatsApp-style chats."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.query.settings import DEFAULT_SETTINGS
from structrag.translate.offline import SpacyTranslator

BURSTS = [
    "[09.03.2024, 12:20:00] Tom: signed up for the half marathon in april!!",
    "[09.03.2024, 12:20:30] Tom: so nervous",
    "[09.03.2024, 12:21:00] Tom: training starts monday",
    "[09.03.2024, 12:25:00] Aiko: when is it?",
    "[09.03.2024, 12:26:00] Tom: 14 april",
    "[09.03.2024, 12:27:00] Aiko: i will watch the tracking",
    "[10.03.2024, 19:00:00] Aiko: i started learning guitar, my fingers hurt",
    "[10.03.2024, 19:01:00] Tom: that goes away",
    "[11.03.2024, 08:00:00] Aiko: rainy again",
    "[11.03.2024, 08:01:00] Tom: same here",
]
ALTERNATING = [
    "[01.02.2024, 10:00:00] Ana: we adopted a cat yesterday",
    "[01.02.2024, 10:01:00] Bo: no way, what is her name?",
    "[01.02.2024, 10:02:00] Ana: Pepper, she is tiny",
    "[01.02.2024, 10:03:00] Bo: send a photo of the cat",
    "[01.02.2024, 10:04:00] Ana: later, she is sleeping",
]


def _index(folder: Path, name: str, lines: list[str]) -> Path:
    chat = folder / f"{name}.txt"
    chat.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with Index(folder / "ix") as index:
        index.ingest([chat], workers=1)
    return folder / "ix"


@pytest.fixture(scope="module")
def bursts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _index(tmp_path_factory.mktemp("bursts"), "tom_aiko", BURSTS)


@pytest.fixture(scope="module")
def ix(bursts: Path) -> Iterator[Index]:
    with Index(bursts, read_only=True) as index:
        yield index


def _found(index: Index, expression: str) -> list[str]:
    return [index.show(m.id)["text"] for m in index.query(expression, limit=None).messages]


def test_a_reply_is_found_by_the_turn_it_answers_however_many_messages_that_turn_has(
    bursts: Path,
) -> None:
    # "14 april" answers Aiko's "when is it?", which follows Tom's three messages: two
    # turns back, four messages back.
    with Index(bursts, read_only=True) as by_turns:
        assert "14 april" in _found(by_turns, "marathon")
    by_messages = DEFAULT_SETTINGS.with_overrides(window_turns=False)
    with Index(bursts, read_only=True, settings=by_messages) as index:
        assert "14 april" not in _found(index, "marathon")


def test_when_every_turn_is_one_message_turns_and_messages_rank_alike(
    tmp_path: Path,
) -> None:
    path = _index(tmp_path, "ana_bo", ALTERNATING)
    ranked = []
    for turns in (True, False):
        settings = DEFAULT_SETTINGS.with_overrides(window_turns=turns)
        with Index(path, read_only=True, settings=settings) as index:
            result = index.query("cat photo", limit=None)
            ranked.append([(m.id, m.score) for m in result.messages])
    assert ranked[0] == ranked[1] and ranked[0]


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("When did Aiko start lerning the guitar?", "learning guitar"),
        ("when is toms maraton?", "half marathon"),
    ],
)
def test_a_typo_in_a_question_finds_the_word_it_meant(
    ix: Index, question: str, expected: str
) -> None:
    answer = ix.ask(question, budget=40)
    assert expected in answer.context.messages[0].text


def test_a_word_the_history_holds_is_not_corrected(ix: Index) -> None:
    # "rainy" is in the chat; "rain" (one edit away) is not added beside it.
    assert "TextMatch [raini]" in ix.query("rainy~").plan
    assert "TextMatch [maraton marathon^0.8]" in ix.query("maraton~").plan


@pytest.mark.parametrize(
    ("question", "typos"),
    [
        ("Wich language is Lena lerning?", ["Wich", "lerning"]),
        ("whats the rent of aikos new apartmnet?", ["apartmnet"]),
        ("For how long has Nate had his snakes?", []),
        ("What does Melanie do to destress?", []),
    ],
)
def test_the_translator_marks_words_that_are_no_english_words(
    question: str, typos: list[str]
) -> None:
    translation = SpacyTranslator().translate(question, ["Lena", "Aiko", "Nate", "Melanie"])
    assert translation.unknown == typos


def test_spelling_correction_can_be_switched_off(bursts: Path) -> None:
    settings = DEFAULT_SETTINGS.with_overrides(spelling_weight=0.0)
    with Index(bursts, read_only=True, settings=settings) as index:
        assert index.query("lerning~").messages == []
    with Index(bursts, read_only=True) as index:
        assert index.query("lerning~").messages
        # without ~ a word is taken as written
        assert index.query("lerning").messages == []


@pytest.mark.parametrize(
    ("question", "person"),
    [
        ("who is lenas team lead?", "Lena Vogt"),
        ("what food did kemals mom bring?", "Kemal"),
        ("did tom run the marathon?", "Tom Whitfield"),
    ],
)
def test_names_in_lower_case_or_with_a_bare_possessive_s_are_people(
    question: str, person: str
) -> None:
    speakers = ["Lena Vogt", "Kemal", "Tom Whitfield"]
    assert SpacyTranslator().translate(question, speakers).people == [person]


def test_a_lower_case_word_that_is_no_name_stays_a_word() -> None:
    translation = SpacyTranslator().translate("what will mark the end?", ["Will", "Mark"])
    assert translation.people == []
