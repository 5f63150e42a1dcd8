"""Statements the patterns used to miss or misread, on the real spaCy pipeline and a real
index: "I moved back to Paris" (a move the parse hangs on "back"), "I'm allergic to
shellfish" (a noun after "to" the tagger takes for a verb) and "I've moved to Paris"
(the present perfect told as a present move)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.memory.statement_rules import extract_statements
from structrag.memory.statements import Statement
from structrag.models import Message


def said(text: str, speaker: str = "Priya") -> list[Statement]:
    (found,) = extract_statements(
        [Message(conversation="c", id="m1", text=text, ordinal=0, speaker=speaker)]
    )
    for s in found:  # every statement's span holds its object as written
        assert s.object in text[s.start : s.end], (text, s)
    return found


def facts(text: str) -> set[tuple[str, str, str, bool]]:
    return {(s.predicate, s.object, s.tense, s.negated) for s in said(text)}


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


# -- A: "moved back to X" ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tense"),
    [
        ("I moved back to Paris.", "past"),
        ("I moved back home to Paris.", "past"),
        ("I just moved back to Paris last year.", "past"),
        ("I've moved back to Paris.", "past"),
        ("I'm moving back to Paris.", "future"),  # as "I'm moving to Paris": a plan
    ],
)
def test_moving_back_is_a_move(text: str, tense: str) -> None:
    assert ("moved_to", "Paris", tense, False) in facts(text)


def test_moving_away_or_back_from_a_place_says_one_lived_there() -> None:
    assert ("lives_in", "London", "past", False) in facts("I moved away from London.")
    assert ("lives_in", "Tokyo", "past", False) in facts("I moved back from Tokyo.")


def test_moving_something_else_is_no_move_of_the_speaker() -> None:
    assert not facts("I moved the meeting back to Monday.")
    assert not facts("I moved the meeting to Monday.")
    assert not facts("We moved back to Paris.")  # "we" is nobody in particular, as before


def test_moving_back_supersedes_the_move_before(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I live in Paris.", user="priya", room="dm")
    berlin = mem.add("I moved to Berlin.", user="priya", room="dm")
    back = mem.add("I moved back to Paris.", user="priya", room="dm")
    places = [e for e in mem.profile("priya") if e.predicate in ("lives_in", "moved_to")]
    assert places and all(e.object == "Paris" for e in places)
    assert any(back.id in e.sources for e in places)
    old = [e for e in mem.profile("priya", history=True) if e.object == "Berlin"]
    assert old and old[0].superseded_by is not None and berlin.id in old[0].sources
    held = " ".join(r.text for r in mem.facts("priya"))
    assert "Paris" in held and "Berlin" not in held


# -- B: "allergic to X" -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "allergens"),
    [
        ("I'm allergic to shellfish.", ["shellfish"]),
        ("I'm allergic to gluten", ["gluten"]),
        ("I'm severely allergic to shellfish.", ["shellfish"]),
        ("I am allergic to soy", ["soy"]),
        ("I'm allergic to cats.", ["cats"]),
        ("I'm allergic to penicillin.", ["penicillin"]),
        ("I'm allergic to bee stings.", ["bee stings"]),
        ("I'm allergic to peanuts, dairy and eggs.", ["peanuts", "dairy", "eggs"]),
        ("I'm allergic to shellfish and gluten.", ["shellfish", "gluten"]),
        ("I am allergic to dairy, shellfish and tree nuts.", ["dairy", "shellfish", "tree nuts"]),
        ("I'm allergic to cats and dogs lol", ["cats", "dogs"]),
        ("I'm allergic to soy, so I avoid tofu.", ["soy"]),
        ("I'm allergic to peanuts and have to carry an EpiPen.", ["peanuts"]),
        ("I'm allergic to peanuts, not shellfish.", ["peanuts"]),
        ("I am allergic to pollen in the spring.", ["pollen"]),
        ("I'm allergic to it.", []),
    ],
)
def test_allergic_to_any_noun_phrase(text: str, allergens: list[str]) -> None:
    found = [s for s in said(text) if s.predicate == "allergic_to"]
    assert [s.object for s in found] == allergens
    assert all(s.subject == "Priya" and not s.negated and s.tense == "present" for s in found)
    assert all(s.text == f"Priya is allergic to {s.object}" for s in found)


def test_allergies_of_others_negations_and_questions() -> None:
    both = said("I'm allergic to shellfish and my husband is allergic to gluten.")
    allergies = {(s.subject, s.object) for s in both if s.predicate == "allergic_to"}
    assert allergies == {("Priya", "shellfish"), ("Priya's husband", "gluten")}
    assert ("allergic_to", "shellfish", "present", True) in facts("I'm not allergic to shellfish.")
    assert not facts("Are you allergic to shellfish?")
    assert not facts("If I were allergic to gluten, I'd know.")


def test_allergies_reach_the_profile(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I'm allergic to shellfish and gluten.", user="ines", room="dm")
    mem.add("I'm allergic to penicillin.", user="ines", room="dm")
    held = {e.object for e in mem.profile("ines") if e.predicate == "allergic_to"}
    assert held == {"shellfish", "gluten", "penicillin"}


# -- C: the present perfect of a move ---------------------------------------------------


@pytest.mark.parametrize(
    ("perfect", "past", "told"),
    [
        ("I've moved to Paris.", "I moved to Paris.", "Priya moved to Paris"),
        ("I have moved to Rome.", "I moved to Rome.", "Priya moved to Rome"),
        ("I've just moved to Madrid.", "I just moved to Madrid.", "Priya moved to Madrid"),
        ("I haven't moved to Berlin.", "I didn't move to Berlin.", "Priya did not move to Berlin"),
    ],
)
def test_the_present_perfect_of_a_move_reads_as_the_past(
    perfect: str, past: str, told: str
) -> None:
    def move(text: str) -> tuple[str, str, bool, str]:
        (found,) = [s for s in said(text) if s.predicate == "moved_to"]
        return found.object, found.tense, found.negated, found.text

    assert move(perfect) == move(past)
    assert move(perfect)[1] == "past" and move(perfect)[3] == told


def test_the_present_perfect_still_holds_now(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I live in Porto.", user="priya", room="dm")
    mem.add("I've moved to Paris.", user="priya", room="dm")
    places = [e for e in mem.profile("priya") if e.predicate in ("lives_in", "moved_to")]
    assert [e.text for e in places] == ["priya moved to Paris"]
    # "I've lived here" is still what holds now, not history.
    assert ("lives_in", "Chicago", "present", False) in facts("I've lived in Chicago for years.")
