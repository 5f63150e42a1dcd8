"""The query language: parse trees, rendering back to text, and caret errors."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structrag.errors import QuerySyntaxError
from structrag.query import ast
from structrag.query.parser import grammar_text, parse


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("caroline adoption", ast.Or((ast.Term("caroline"), ast.Term("adoption")))),
        ('"support group"', ast.Term("support group", phrase=True, together=True)),
        ("'support group'", ast.Term("support group", phrase=True)),
        ("entity:Caroline", ast.EntityPattern(name="Caroline")),
        ("type:book", ast.EntityPattern(types=("book",))),
        (
            "entity(name=Caroline, type=person, facet.color=blue)",
            ast.EntityPattern("Caroline", ("person",), (ast.FacetCondition("color", "blue"),)),
        ),
        (
            "action(Kevin, tell, *, Satya)",
            ast.ActionPattern("Kevin", "tell", None, "Satya"),
        ),
        (
            "action(subject=*, verb=paint, object=entity(type=painting))",
            ast.ActionPattern(None, "paint", ast.EntityPattern(types=("painting",))),
        ),
        ('topic:"mental health"', ast.TopicPattern("mental health")),
        ("speaker:Kevin", ast.PeopleScope("speaker", "Kevin")),
        ("to:Satya", ast.PeopleScope("to", "Satya")),
        ("conversation:conv-26", ast.ConversationScope("conv-26")),
        ("tag:session_3", ast.TagScope("session_3")),
        ("during:adoption", ast.DuringScope("adoption")),
        ("meta.session >= 3", ast.MetaFilter("session", ">=", "3")),
        ('meta.title contains "AI"', ast.MetaFilter("title", "contains", "AI")),
        (
            "date:2023-05",
            ast.TimeScope(datetime(2023, 5, 1), datetime(2023, 6, 1), "2023-05", "date"),
        ),
        (
            "date:2023-05-01..2023-05-31",
            ast.TimeScope(
                datetime(2023, 5, 1), datetime(2023, 6, 1), "2023-05-01..2023-05-31", "date"
            ),
        ),
        ("after:2023-05-01", ast.TimeScope(datetime(2023, 5, 2), None, "2023-05-01", "after")),
        ('when:"last May"', ast.TimeScope(None, None, "last May", "when")),
        ("melanie^0.3", ast.Term("melanie", weight=0.3)),
        ('"support group"^2', ast.Term("support group", phrase=True, weight=2.0, together=True)),
        ("speaker:Kevin^1.5", ast.Boost(ast.PeopleScope("speaker", "Kevin"), 1.5)),
        ("(a b)^2", ast.Boost(ast.Or((ast.Term("a"), ast.Term("b"))), 2.0)),
        (
            "entity(name=*, facet.owner=*)",
            ast.EntityPattern(facets=(ast.FacetCondition("owner", None),)),
        ),
    ],
)
def test_parse(text: str, expected: ast.Node) -> None:
    assert parse(text) == expected


def test_precedence_not_and_juxtaposition_or() -> None:
    node = parse("NOT a b AND c OR d")
    assert node == ast.Or(
        (
            ast.Or((ast.Not(ast.Term("a")), ast.And((ast.Term("b"), ast.Term("c"))))),
            ast.Term("d"),
        ),
        explicit=True,
    )


@pytest.mark.parametrize(
    "text",
    [
        "caroline adoption",
        '"support group" AND entity:Caroline',
        'action(Kevin, tell, *, Satya) when:"last May"',
        "(a OR b) AND NOT topic:sports",
        "meta.session >= 3 speaker:Kevin",
        "entity(name=*, type=person, facet.age=4)",
        'action(Marco, adopt, Biscuit) adopt^2 melanie^0.3 speaker:Marco^1.5 when:"May 2024"',
        "(NOT a)^2 (x y)^0.5 action(*, adopt, entity(type=pet))",
    ],
)
def test_rendering_round_trips(text: str) -> None:
    node = parse(text)
    assert parse(node.to_query()) == node


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("entity(", 7, "ends too early"),
        ("a AND", 2, "AND needs a word or pattern on each side"),
        ("Biscuit OR  ", 8, "OR needs a word or pattern on each side"),
        ("NOT", 0, "NOT needs a word or pattern after it"),
        ("AND", 0, "AND needs a word or pattern on each side"),
        ("OR Biscuit", 0, "OR needs a word or pattern on each side"),
        ("Biscuit AND AND boat", 12, "AND needs a word"),
        ("date:2024-05-01..2024-04-01", 5, "ends before it starts"),
        ("foo^abc", 3, "unexpected '^'"),
        ("date:2023-13", 5, "as a date"),
        ("action(a, b, c, d, e)", 19, "at most four"),
        ('"unclosed', 0, "unexpected"),
        ("meta.x ~ 3", 7, "unexpected '~'"),
        ('when:"blah blah"', 5, "as a time"),
        ("entity(colour=red)", 7, "no argument 'colour'"),
        ("   ", 0, "empty query"),
        ("NOT " * 4000 + "x", 0, "nests too deeply"),
        ("meta.session. = 1", 12, "unexpected '.'"),
        ("word^0", 4, "above 0"),
        ("Biscuit)", 7, "this ')' closes no '('"),
        ("foo:bar", 3, "'foo' is not a field: the scopes are speaker:, from:"),
    ],
)
def test_errors_point_at_the_problem(text: str, position: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    err = info.value
    assert err.position == position
    assert message in str(err)
    caret_line = err.snippet.splitlines()[1]
    assert caret_line.index("^") == position - (text.rfind("\n", 0, position) + 1)


def test_grammar_ships_in_the_package() -> None:
    assert "?disjunction" in grammar_text()


def test_the_error_hints_name_the_grammars_scopes() -> None:
    from structrag.query.parser import scope_names

    assert scope_names().startswith("speaker:, from:, to:,") and "section:" in scope_names()
    with pytest.raises(QuerySyntaxError) as info:  # a ')' with its '(' is another matter
        parse("action(Marco, )")
    assert "closes no" not in str(info.value)


_FRAGMENTS = st.sampled_from(
    [
        "entity",
        "action",
        "topic",
        "type",
        "speaker",
        "when",
        "date",
        "meta.x",
        "(",
        ")",
        ":",
        ",",
        "=",
        "*",
        '"',
        "'",
        "AND",
        "OR",
        "NOT",
        ">=",
        "contains",
        " ",
        "2023-05",
        "..",
        "\\",
        "facet.a",
        "^2",
        "^0.5",
        "meta.a.",
        "x",
        "é",
        "\n",
        "\t",
        "\x00",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=60), st.lists(_FRAGMENTS, max_size=14).map("".join)))
def test_parser_raises_only_query_syntax_errors(text: str) -> None:
    try:
        node = parse(text)
    except QuerySyntaxError as err:
        assert 0 <= err.position <= len(text)
    else:
        assert isinstance(node, ast.Node)
        assert parse(node.to_query()) == node


def test_hints_name_keywords_not_token_types() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("entity:Ann AND )")
    assert info.value.hint and "_KW" not in info.value.hint and "META_KEY" not in info.value.hint


@pytest.mark.parametrize("text", ['"NOT;"', '"AND-so"', '"OR,"', '"NOT"'])
def test_a_value_starting_with_an_operator_word_is_quoted_back(text: str) -> None:
    node = parse(text)
    assert parse(node.to_query()) == node


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("date:2024-05-01..2024-04-01", "write the earlier date first: 2024-04-01..2024-05-01"),
        ("foo^abc", "a boost is a number above 0 right after the word"),
        ("OR Biscuit", 'to search for the word, put it in quotes: "OR"'),
    ],
)
def test_the_hint_says_how_to_write_it(text: str, hint: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.hint and hint in info.value.hint
    assert parse('"OR" Biscuit') == parse("'OR' Biscuit")  # quoted, the word is searched


@pytest.mark.parametrize("text", ["speaker:OR", "entity:NOT", "topic(AND)", "meta.state = OR"])
def test_an_operator_word_as_a_value_is_a_value(text: str) -> None:
    """Only a free word that is an operator out of place is refused; as the value of a
    scope, pattern or condition it is read as before (and printed back quoted)."""
    node = parse(text)
    assert parse(node.to_query()) == node
