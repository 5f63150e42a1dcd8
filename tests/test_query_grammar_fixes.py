"""Query language defects a tester reported: boosted groups, dates with a time, errors
without a caret, hints naming parser tokens, arguments accepted silently, negated actions.
Every query runs against a real index built in ``tmp_path``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structrag import Index, QueryError
from structrag.errors import QuerySyntaxError
from structrag.query import ast
from structrag.query.parser import _parser, parse

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def ix(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    directory = tmp_path_factory.mktemp("grammar-fixes") / "index"
    with Index(directory) as index:
        index.ingest([EXAMPLES / "friends_chat.jsonl"])
    with Index(directory, read_only=True) as index:
        yield index


def ids(index: Index, expression: str) -> list[str]:
    return [m.id for m in index.query(expression, conversation="friends", limit=None).messages]


def signals(index: Index, expression: str) -> dict[str, float]:
    """The signals of the plan's top ranked group, by name, with their weights."""
    plan = index.query(expression, conversation="friends").plan
    found = re.match(r"Fuse \[(.*?)\]", plan)
    assert found, plan
    named = (part.rsplit("*", 1) for part in found.group(1).split(", "))
    return {name: float(weight) for name, weight in named}


# -- 1. a boosted bracketed group ------------------------------------------------------------


def test_a_boosted_group_of_words_weighs_its_boost_times_plain_words(ix: Index) -> None:
    """``(knee bakery)^3`` weighed 0.75 (3 x pattern_weight) against 1 for a plain word."""
    boosted = signals(ix, "(knee bakery)^3 Biscuit")
    assert boosted == {"text": 1.0, "group^3": 3.0}
    assert signals(ix, "(knee bakery)^0.5 Biscuit") == {"text": 1.0, "group^0.5": 0.5}
    # the boosted words lead: a message about the bakery, not about Biscuit, comes first
    top = ix.query("(knee bakery)^3 Biscuit", conversation="friends").messages[0]
    assert "biscuit" not in ix.show(f"friends/{top.id}")["text"].lower()


def test_plans_without_a_boost_on_a_group_are_unchanged(ix: Index) -> None:
    """Unboosted groups and boosted patterns (what ``ask`` writes) weigh as before."""
    assert signals(ix, "(knee bakery) Biscuit") == {"text": 1.0, "patterns": 0.25}
    assert signals(ix, "entity:Marco^4 knee") == {"text": 1.0, "patterns^4": 1.0}
    assert signals(ix, "(entity:Marco type:dog)^2 knee") == {"text": 1.0, "patterns^2": 0.5}


# -- 2. dates with a time ----------------------------------------------------------------------


def test_a_date_with_a_time_is_its_minute(ix: Index) -> None:
    assert ids(ix, "date:2024-05-03T18:12") == ["m2"]
    assert ids(ix, 'date:"2024-05-03T18:12"') == ["m2"]  # what the old hint advised
    assert ids(ix, 'date:"2024-05-03 18:12"') == ["m2"]
    assert sorted(ids(ix, "date:2024-05-03T18:12..2024-05-03T18:14")) == ["m2", "m3"]
    assert ids(ix, "date:2024-05-03T18:12:00") == ["m2"]
    assert ids(ix, "date:2024-05-03T18:12:01") == []  # a second of its own
    assert ids(ix, "before:2024-05-03T18:12") == ["m1"]
    assert "m2" not in ids(ix, "after:2024-05-03T18:12")
    assert "m3" in ids(ix, "after:2024-05-03T18:12")
    node = parse("date:2024-05-03T18:12 knee")
    assert parse(node.to_query()) == node


def test_a_date_and_time_apart_get_a_hint_that_works(ix: Index) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("after:2024-05-03 18:12")
    assert info.value.hint == "a date with a time is written after:2024-05-03T18:12"
    assert "m3" in ids(ix, "after:2024-05-03T18:12")
    with pytest.raises(QuerySyntaxError, match="cannot read") as info:
        parse("date:2024-05-03T18:99")
    assert info.value.position == 5


# -- 3. errors of queries that parse but cannot run have a caret ---------------------------


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("Biscuit OR action(*, *, *)", 11, "action(*, *, *) matches every action"),
        ("entity(type=*)", 0, "entity(*) matches every entity"),
        ("knee action(*, adopt, entity(type=*))", 22, "entity(*) matches every entity"),
        ("boat AND speaker:Marco^2", 9, "speaker:Marco^2 only prefers"),
        ("NOT speaker:Marco^2", 4, "speaker:Marco^2 only prefers"),
        ("the speaker:Marco^2", 4, "only prefers"),  # a stopword scores nothing
    ],
)
def test_errors_of_a_query_that_cannot_run_point_at_it(
    ix: Index, text: str, position: int, message: str
) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        ix.query(text)
    assert isinstance(info.value, QueryError)  # as the compiler's error was
    assert info.value.position == position
    assert message in str(info.value)
    caret = str(info.value).splitlines()[2]
    assert caret.index("^") == len("  ") + position


# -- 4. hints say what to write, never a parser token ------------------------------------------


def test_a_list_of_values_gets_an_or_or_quotes(ix: Index) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("speaker:Marco,Priya")
    hint = info.value.hint or ""
    assert "speaker:Marco OR speaker:Priya" in hint
    assert 'speaker:"Marco,Priya"' in hint
    assert "$" not in hint
    assert set(ids(ix, "speaker:Marco OR speaker:Priya")) == set(
        ids(ix, "speaker:Marco") + ids(ix, "speaker:Priya")
    )
    with pytest.raises(QuerySyntaxError) as info:
        parse("knee speaker:Marco,Priya")
    assert "(speaker:Marco OR speaker:Priya)" in (info.value.hint or "")


_TOKEN_NAMES = {t.name for t in _parser().terminals} - {"NAME"}  # facet.NAME= is advice


def _assert_plain(hint: str | None) -> None:
    if hint:
        assert "$" not in hint, hint
        assert not {w for w in re.findall(r"[A-Z_]+", hint) if w in _TOKEN_NAMES}, hint


@pytest.mark.parametrize(
    "text",
    [
        "speaker:Marco,Priya",
        "knee, bakery",
        "action(Marco make)",
        "action(Marco,, make)",
        "entity:Ann AND )",
        "knee ~ ~",
        "knee speaker:)",
        "(knee))",
        "meta.x = = 3",
        "knee^2^3",
        "entity(name=Ann name=Bo)",
    ],
)
def test_hints_name_no_parser_tokens(text: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    _assert_plain(info.value.hint)


_PIECES = (
    *("speaker:", "Marco", ",", "(", ")", "entity", "action", "=", "*", "~", "^2", " "),
    *("date:", "2024-05-03", "T18:12", "..", "AND", "OR", "NOT", '"', "meta.x", ">="),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=10).map("".join))
def test_no_hint_names_a_parser_token(text: str) -> None:
    try:
        parse(text)
    except QuerySyntaxError as err:
        _assert_plain(err.hint)


# -- 5. arguments and marks accepted silently ------------------------------------------------


def test_several_types_must_all_hold_and_a_note_says_so(ix: Index) -> None:
    result = ix.query("entity(type=person, type=pet)", conversation="friends")
    assert not result.messages
    assert any("(type:person OR type:pet)" in note for note in result.notes), result.notes
    assert ids(ix, "(type:dog OR type:person)")  # the advice finds them
    assert not any(
        "no entity is of every type" in n
        for n in ix.query("type:dog", conversation="friends").notes
    )


@pytest.mark.parametrize(
    ("text", "position", "glued"),
    [
        ("Biscuit ~", 8, "Biscuit~"),
        ("kind:sport ~ knee", 11, "sport~"),
        ('"fuel pump" ~', 12, '"fuel pump"~'),
    ],
)
def test_a_tilde_apart_from_its_word_is_refused(text: str, position: int, glued: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.position == position
    assert "right after its word" in str(info.value)
    assert glued in (info.value.hint or "")
    assert parse("Biscuit~") == ast.Term("Biscuit", fuzzy=True)


# -- 6. negated actions ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def baking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Index]:
    base = tmp_path_factory.mktemp("negated")
    chat = base / "chat.jsonl"
    chat.write_text(
        '{"id": "n1", "conversation": "bake", "speaker": "Bo", "timestamp": '
        '"2024-03-01T10:00:00", "text": "I made a lemon cake for Ana yesterday."}\n'
        '{"id": "n2", "conversation": "bake", "speaker": "Ana", "timestamp": '
        '"2024-03-01T10:05:00", "text": "Lovely! Did you go to the market party?"}\n'
        '{"id": "n3", "conversation": "bake", "speaker": "Bo", "timestamp": '
        '"2024-03-01T10:07:00", "text": "Sadly I didn\'t make the bread for the party."}\n'
    )
    with Index(base / "index") as index:
        index.ingest([chat])
    with Index(base / "index", read_only=True) as index:
        yield index


def _found(index: Index, expression: str) -> list[str]:
    return sorted(m.id for m in index.query(expression, conversation="bake", limit=None).messages)


def test_negated_chooses_between_what_was_done_and_what_was_not(baking: Index) -> None:
    assert _found(baking, "action(Bo, make, *)") == ["n1", "n3"]  # both, as questions need
    assert _found(baking, "action(Bo, make, *, negated=*)") == ["n1", "n3"]
    assert _found(baking, "action(Bo, make, *, negated=no)") == ["n1"]
    assert _found(baking, "action(Bo, make, *, negated=yes)") == ["n3"]
    assert _found(baking, "action(subject=Bo, verb=make, negated=false)") == ["n1"]
    assert _found(baking, "action(Bo, make, *, negated=yes) AND bread") == ["n3"]
    assert _found(baking, "action(Bo, make, *, negated=yes) AND cake") == []


def test_negated_in_the_ast_plan_and_text() -> None:
    node = parse("action(Bo, make, *, negated=no)")
    assert node == ast.ActionPattern("Bo", "make", None, None, negated=False)
    assert node.to_query() == "action(Bo, make, *, negated=no)"
    assert parse("action(Bo, make, *, negated=yes)").to_query().endswith("negated=yes)")
    assert parse("action(Bo, make, *, negated=*)") == ast.ActionPattern("Bo", "make")
    assert "negated=False" in ast.dump(node)


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("action(Bo, make, *, negated=maybe)", 20, "negated= takes yes or no"),
        ("action(Bo, make, negated=no, negated=yes)", 29, "negated is given twice"),
        ("action(negated=yes)", 0, "matches every action"),
    ],
)
def test_negated_errors_point_at_the_argument(text: str, position: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.position == position
    assert message in str(info.value)
