"""Statements about people: the data, the supersede rule, and the offline patterns.

The supersede rule is checked for its invariants with hypothesis (a statement never
supersedes itself, restating changes nothing, the rule is symmetric, other people's
statements never interfere) and on the cases memory relies on. The patterns run on the
real spaCy pipeline: each sentence must give the statements listed, with a span in the
message that contains the object.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structrag.memory.statements import (
    CATEGORIES,
    PREDICATES,
    TENSES,
    Statement,
    StatementError,
    current_statements,
    describe,
    implied,
    normalize,
    same_subject,
    supersedes,
)
from structrag.models import Tense


def make(
    subject: str,
    predicate: str,
    obj: str,
    *,
    negated: bool = False,
    tense: Tense = "present",
    detail: str | None = None,
) -> Statement:
    return Statement.make(
        subject, predicate, obj, start=0, end=len(obj), negated=negated, tense=tense, detail=detail
    )


# -- the table -------------------------------------------------------------------------


def test_the_table_covers_every_category_and_its_promises() -> None:
    assert {p.category for p in PREDICATES.values()} == set(CATEGORIES)
    single = {name for name, p in PREDICATES.items() if p.single}
    assert {"lives_in", "works_at", "job", "age", "partner"} <= single
    assert not {"likes", "has_pet", "sibling", "friend", "wants_to"} & single
    assert implied("moved_to") == {"moved_to", "lives_in"}
    assert implied("married_to") == {"married_to", "partner"}
    assert PREDICATES["likes"].opposite == "dislikes"
    assert PREDICATES["dislikes"].opposite == "likes"


@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_every_predicate_renders_in_every_tense(name: str) -> None:
    for tense in TENSES:
        for negated in (False, True):
            text = describe("Priya", name, "Lisbon", negated=negated, tense=tense)
            assert "Priya" in text and "Lisbon" in text and "<" not in text
            assert ("not" in text) == negated


@pytest.mark.parametrize(
    ("subject", "predicate", "obj", "negated", "tense", "detail", "text"),
    [
        ("Priya", "lives_in", "Lisbon", False, "present", None, "Priya lives in Lisbon"),
        ("Priya", "lives_in", "Porto", True, "present", None, "Priya does not live in Porto"),
        ("Priya", "lives_in", "Porto", False, "past", None, "Priya lived in Porto"),
        ("Priya", "moved_to", "Lisbon", False, "future", None, "Priya will move to Lisbon"),
        ("Priya", "job", "engineer", True, "present", None, "Priya is not an engineer"),
        ("Priya", "sibling", "Ana", False, "present", "sister", "Ana is Priya's sister"),
        ("Priya", "sibling", "a sister", False, "present", "sister", "Priya has a sister"),
        ("Priya", "child", "two kids", False, "present", "kids", "Priya has two kids"),
        ("Priya", "married_to", "husband", False, "present", "husband", "Priya has a husband"),
        ("Priya", "married_to", "Tom", False, "present", None, "Priya is married to Tom"),
        ("Priya", "has_pet", "Max", False, "present", "dog", "Priya has a dog named Max"),
        ("Priya", "likes", "pizza", False, "present", "food", "Priya's favorite food is pizza"),
        (
            "Priya",
            "wants_to",
            "run a marathon",
            False,
            "future",
            None,
            "Priya wants to run a marathon",
        ),
        ("Priya", "emojis", "emojis", True, "present", None, "Priya does not want emojis"),
        ("Priya", "age", "34", False, "present", None, "Priya's age is 34"),
    ],
)
def test_statements_read_as_sentences(
    subject: str,
    predicate: str,
    obj: str,
    negated: bool,
    tense: Tense,
    detail: str | None,
    text: str,
) -> None:
    statement = make(subject, predicate, obj, negated=negated, tense=tense, detail=detail)
    assert statement.text == text
    assert statement.category == PREDICATES[predicate].category


@pytest.mark.parametrize(
    "changes",
    [
        {"predicate": "lives_at"},
        {"category": "goal"},
        {"start": 5, "end": 2},
        {"confidence": 1.5},
        {"tense": "someday"},
        {"object": "  "},
    ],
)
def test_a_broken_statement_is_refused(changes: dict[str, object]) -> None:
    good = make("Priya", "lives_in", "Lisbon")
    with pytest.raises(StatementError):
        replace(good, **changes)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # a StatementError is a ValueError too
        replace(good, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("Priya", "priya", True),
        ("Priya", "Priya Shah", True),
        ("priya  shah", "Priya Shah", True),
        ("Priya Shah", "Priya Rao", False),
        ("Priya", "Marco", False),
        ("Pri", "Priya", False),
        ("Priya's sister", "Priya Shah's sister", True),
        ("Priya's sister", "Priya", False),
        ("Priya's sister", "Priya's brother", False),
    ],
)
def test_same_subject(a: str, b: str, same: bool) -> None:
    assert same_subject(a, b) is same
    assert same_subject(b, a) is same


def test_normalize_ignores_case_space_articles_and_edge_punctuation() -> None:
    assert normalize("The  Harbour.") == normalize("harbour") == "harbour"
    assert normalize("a") == "a"


# -- supersede: the cases memory relies on ----------------------------------------------


@pytest.mark.parametrize(
    ("new", "old", "expected"),
    [
        # single-valued: a new value replaces the old
        (make("Priya", "lives_in", "Lisbon"), make("Priya", "lives_in", "Porto"), True),
        (make("Priya Shah", "works_at", "Google"), make("priya", "works_at", "the bakery"), True),
        (make("Priya", "job", "nurse"), make("Priya", "job", "teacher"), True),
        (make("Priya", "age", "35"), make("Priya", "age", "34"), True),
        # by implication: a move says where one lives; a marriage is a partner
        (
            make("Priya", "moved_to", "Lisbon", tense="past"),
            make("Priya", "lives_in", "Porto"),
            True,
        ),
        (
            make("Priya", "lives_in", "Porto"),
            make("Priya", "moved_to", "Lisbon", tense="past"),
            True,
        ),
        (make("Priya", "married_to", "Tom"), make("Priya", "partner", "Sam"), True),
        (make("Priya", "married_to", "Tom"), make("Priya", "partner", "Tom"), False),
        # negation of the same statement
        (
            make("Priya", "lives_in", "Porto", negated=True),
            make("Priya", "lives_in", "Porto"),
            True,
        ),
        (
            make("Priya", "lives_in", "Porto", negated=True),
            make("Priya", "moved_to", "Porto", tense="past"),
            True,
        ),
        (make("Priya", "likes", "sushi", negated=True), make("Priya", "likes", "Sushi"), True),
        (make("Priya", "likes", "sushi"), make("Priya", "likes", "sushi", negated=True), True),
        # a negated move does not say one does not live there
        (
            make("Priya", "moved_to", "Porto", negated=True, tense="past"),
            make("Priya", "lives_in", "Porto"),
            False,
        ),
        # a negation of another value leaves the statement alone
        (
            make("Priya", "lives_in", "Paris", negated=True),
            make("Priya", "lives_in", "Porto"),
            False,
        ),
        # opposites on the same object
        (make("Priya", "dislikes", "sushi"), make("Priya", "likes", "sushi"), True),
        (make("Priya", "likes", "sushi", negated=True), make("Priya", "dislikes", "sushi"), False),
        # multi-valued values live side by side
        (make("Priya", "likes", "tea"), make("Priya", "likes", "coffee"), False),
        (
            make("Priya", "has_pet", "Luna", detail="cat"),
            make("Priya", "has_pet", "Max", detail="dog"),
            False,
        ),
        (
            make("Priya", "sibling", "Ana", detail="sister"),
            make("Priya", "sibling", "Rui", detail="brother"),
            False,
        ),
        # restating, or another person, changes nothing
        (make("Priya", "lives_in", "Lisbon"), make("priya shah", "lives_in", "lisbon"), False),
        (make("Marco", "lives_in", "Lisbon"), make("Priya", "lives_in", "Porto"), False),
        (make("Priya's sister", "lives_in", "Lisbon"), make("Priya", "lives_in", "Porto"), False),
        # only what holds now: the past and plans do not replace the present
        (
            make("Priya", "lives_in", "Paris", tense="past"),
            make("Priya", "lives_in", "Porto"),
            False,
        ),
        (
            make("Priya", "moved_to", "Paris", tense="future"),
            make("Priya", "lives_in", "Porto"),
            False,
        ),
        # a kind is no value: "my husband" does not replace "Tom is my husband"
        (
            make("Priya", "married_to", "husband", detail="husband"),
            make("Priya", "married_to", "Tom", detail="husband"),
            False,
        ),
        # goals: "I don't want to X anymore" replaces "I want to X"
        (
            make("Priya", "wants_to", "run a marathon", negated=True, tense="future"),
            make("Priya", "wants_to", "run a marathon", tense="future"),
            True,
        ),
        (
            make("Priya", "wants_to", "learn French", tense="future"),
            make("Priya", "wants_to", "run a marathon", tense="future"),
            False,
        ),
        # style: the newest request wins
        (make("Priya", "answer_length", "detailed"), make("Priya", "answer_length", "short"), True),
        (make("Priya", "emojis", "emojis"), make("Priya", "emojis", "emojis", negated=True), True),
    ],
)
def test_supersedes(new: Statement, old: Statement, expected: bool) -> None:
    assert supersedes(new, old) is expected


def test_a_caller_can_say_who_is_who() -> None:
    nicknames = {"mel": "melanie"}

    def same(a: str, b: str) -> bool:
        def key(name: str) -> str:
            return nicknames.get(name.casefold(), name.casefold())

        return key(a) == key(b)

    new, old = make("Mel", "lives_in", "Lisbon"), make("Melanie", "lives_in", "Porto")
    assert not supersedes(new, old)
    assert supersedes(new, old, same_person=same)


def test_current_statements_keep_what_still_holds() -> None:
    history = [
        make("Priya", "lives_in", "Porto"),
        make("Priya", "likes", "sushi"),
        make("Priya", "likes", "tea"),
        make("Priya", "moved_to", "Lisbon", tense="past"),
        make("Priya", "likes", "sushi", negated=True),
        make("Marco", "lives_in", "Porto"),
    ]
    assert current_statements(history) == history[2:]


# -- supersede: invariants ---------------------------------------------------------------

SUBJECTS = ["Priya", "priya", "Priya Shah", "PRIYA SHAH", "Marco", "Marco Rossi", "Priya's sister"]
OBJECTS = ["Lisbon", "lisbon", "the Lisbon", "Porto", "Ana", "sushi", "Max", "a dog", "two kids"]


@st.composite
def statements(draw: st.DrawFn) -> Statement:
    return make(
        draw(st.sampled_from(SUBJECTS)),
        draw(st.sampled_from(sorted(PREDICATES))),
        draw(st.sampled_from(OBJECTS) | st.text(min_size=1, max_size=12).filter(str.strip)),
        negated=draw(st.booleans()),
        tense=draw(st.sampled_from(TENSES)),
        detail=draw(st.sampled_from([None, "dog", "kids", "sister"])),
    )


@given(statements())
def test_a_statement_never_supersedes_itself(s: Statement) -> None:
    assert not supersedes(s, s)


@given(statements(), st.sampled_from(SUBJECTS), st.integers(0, 40), st.integers(0, 40))
def test_restating_supersedes_nothing(s: Statement, subject: str, start: int, end: int) -> None:
    """The same statement again, said of the same person in other words, somewhere else."""
    if not same_subject(subject, s.subject):
        subject = s.subject
    again = Statement.make(
        subject.upper(),
        s.predicate,
        f"  {s.object.upper()} ",
        start=min(start, end),
        end=max(start, end),
        negated=s.negated,
        tense=s.tense,
        confidence=0.3,
        detail=s.detail,
    )
    assert not supersedes(again, s)
    assert not supersedes(s, again)


@given(statements(), statements())
def test_supersede_is_symmetric(a: Statement, b: Statement) -> None:
    """Two statements conflict or they do not; which one wins is their order in time."""
    assert supersedes(a, b) == supersedes(b, a)


@given(statements(), statements())
def test_only_statements_about_the_same_person_that_hold_now_supersede(
    a: Statement, b: Statement
) -> None:
    if supersedes(a, b):
        assert same_subject(a.subject, b.subject)
        assert a.current and b.current
        assert implied(a.predicate) & implied(b.predicate) or (
            PREDICATES[a.predicate].opposite == b.predicate
        )


@given(statements(), statements())
def test_multi_valued_statements_supersede_only_by_negation_or_opposites(
    a: Statement, b: Statement
) -> None:
    single = any(PREDICATES[p].single for p in implied(a.predicate) & implied(b.predicate))
    if supersedes(a, b) and not single:
        same_object = normalize(a.object) == normalize(b.object)
        assert same_object
        assert a.negated != b.negated or PREDICATES[a.predicate].opposite == b.predicate


@given(statements(), st.sampled_from(OBJECTS))
def test_single_valued_same_object_never_supersedes_but_another_value_does(
    s: Statement, other: str
) -> None:
    if not PREDICATES[s.predicate].single:
        return
    same = replace(s, object=s.object.casefold())
    assert not supersedes(same, s)
    changed = replace(s, object=other, negated=False)
    base = replace(s, negated=False)
    expected = (
        s.current and normalize(other) != normalize(s.object) and changed.specific and base.specific
    )
    assert supersedes(changed, base) == expected


@given(statements())
def test_a_negation_supersedes_what_it_negates_when_both_hold_now(s: Statement) -> None:
    flipped = replace(s, negated=not s.negated)
    assert supersedes(flipped, s) == s.current


@given(statements(), statements())
def test_statements_about_other_people_never_interfere(a: Statement, b: Statement) -> None:
    other = replace(b, subject="Zoe Quinn")
    assert not supersedes(a, other)
    assert not supersedes(other, a)


@settings(max_examples=60)
@given(st.lists(statements(), max_size=12))
def test_current_statements_are_the_ones_nothing_later_replaces(
    history: list[Statement],
) -> None:
    kept = current_statements(history)
    # A sub-sequence of the history. Of equal statements, the kept ones are the last
    # (nothing after a kept one replaces it, so nothing replaces a later copy), so match
    # greedily from the end.
    positions: list[int] = []
    for i in reversed(range(len(history))):
        if len(positions) < len(kept) and history[i] == kept[len(kept) - 1 - len(positions)]:
            positions.insert(0, i)
    assert len(positions) == len(kept)
    if history:
        assert kept[-1] == history[-1]  # nothing comes after the last
    for n, i in enumerate(positions):
        for j in positions[n + 1 :]:
            assert not supersedes(history[j], history[i])
    for i, s in enumerate(history):
        if i not in positions:
            assert any(supersedes(later, s) for later in history[i + 1 :])
