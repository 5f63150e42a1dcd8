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
        ("NOT " * 4000 + "x", 400, "nests more than 100 levels deep"),
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
    line, caret_line = err.snippet.splitlines()
    if not line.startswith("…"):  # a long line is shown around the error
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
        "\u00a0",
        "\u201c",
        "\u201d",
        "\u2018",
        "\u2019",
        "'s",
        "s'",
        "-",
        "2023-05-01",
        " .. ",
        "^2x",
        "after",
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
        ("conversation:slack:general release", 'conversation:"slack:general"'),
        ("speaker:ana release to:mail:ana@x.com", 'to:"mail:ana@x.com"'),
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


# -- nesting ----------------------------------------------------------------------------------


def _nested_or(levels: int) -> str:
    return "(knee OR " * levels + "knee" + ")" * levels


@pytest.mark.parametrize("levels", [101, 250, 500, 1500])
def test_nesting_deeper_than_the_limit_is_a_syntax_error_at_its_bracket(levels: int) -> None:
    """500 levels broke lark's transformer (a VisitError wrapping a RecursionError); 250
    parsed, then rendering the AST back to text recursed too deep."""
    from structrag.query.parser import MAX_QUERY_DEPTH

    assert MAX_QUERY_DEPTH == 100
    text = _nested_or(levels)
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.position == len("(knee OR ") * 100  # the 101st '('
    assert text[info.value.position] == "("
    assert "nests more than 100 levels deep" in str(info.value)


@pytest.mark.parametrize(
    "text",
    [
        _nested_or(100),
        "NOT " * 100 + "knee",
        "(knee NOT " * 50 + "knee" + ")" * 50,  # two levels a bracket: a group and a NOT
        "(" * 49 + "knee" + " speaker:Marco^2)^2" * 49,
    ],
)
def test_nesting_up_to_the_limit_parses_and_renders_back(text: str) -> None:
    node = parse(text)
    assert parse(node.to_query()) == node


def test_a_chain_of_nots_too_long_points_at_the_first_not_too_many() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("NOT " * 101 + "knee")
    assert info.value.position == 400


# -- date ranges ------------------------------------------------------------------------------

_MAY_8_TO_25 = (datetime(2023, 5, 8), datetime(2023, 5, 26))


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ('date:"8 May 2023"..2023-05-25', "8 May 2023..2023-05-25"),
        ('date:"8 May 2023".."25 May 2023"', "8 May 2023..25 May 2023"),
        ('date:2023-05-08.."25 May 2023"', "2023-05-08..25 May 2023"),
        ("date:2023-05-08 ..2023-05-25", "2023-05-08..2023-05-25"),
        ("date:2023-05-08 .. 2023-05-25", "2023-05-08..2023-05-25"),
        ("date:2023-05-08.. 2023-05-25", "2023-05-08..2023-05-25"),
        ("date:2023-05-08..2023-05-25", "2023-05-08..2023-05-25"),
        ('date:"8 May 2023..25 May 2023"', "8 May 2023..25 May 2023"),
    ],
)
def test_a_date_range_reads_its_ends_bare_or_quoted(text: str, written: str) -> None:
    """A quoted end was read as the whole date, and the rest (..2023-05-25) as a word."""
    node = parse(text)
    assert node == ast.TimeScope(*_MAY_8_TO_25, written, "date")
    assert parse(node.to_query()) == node
    assert parse(text + " knee") == ast.Or((node, ast.Term("knee")))


def test_a_range_open_at_one_end_renders_back_before_a_word() -> None:
    for text in ('date:"2023-05-08.." knee', "date:..2023-05-25 knee", "after:2023-05.. "):
        node = parse(text)
        assert parse(node.to_query()) == node, text
    assert parse('date:"2023-05-08.." knee') == ast.Or(
        (ast.TimeScope(datetime(2023, 5, 8), None, "2023-05-08..", "date"), ast.Term("knee"))
    )


def test_a_word_after_an_open_range_is_read_as_its_end_and_the_hint_says_to_quote() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("date:2023-05.. knee")
    assert info.value.position == 5 and "cannot read '2023-05..knee' as a date" in str(info.value)
    assert info.value.hint and 'date:"2023-05.."' in info.value.hint


@pytest.mark.parametrize("text", ["date:..", "date: .. ", 'date:".."', "after:..", "before:.."])
def test_a_range_with_no_end_is_refused(text: str) -> None:
    """date:.. matched every message."""
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert "needs a date on at least one side" in str(info.value)
    assert text[info.value.position] in '."'


# -- operator words, boosts ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Biscuit NOT-boat", ast.Or((ast.Term("Biscuit"), ast.Term("NOT-boat")))),
        ("knee OR-tools", ast.Or((ast.Term("knee"), ast.Term("OR-tools")))),
        ("OR-tools", ast.Term("OR-tools")),
        ("AND.", ast.Term("AND.")),
        ("knee ORacle", ast.Or((ast.Term("knee"), ast.Term("ORacle")))),
        ("knee OR(boat)", ast.Or((ast.Term("knee"), ast.Term("boat")), explicit=True)),
        ("knee NOT\tboat", ast.Or((ast.Term("knee"), ast.Not(ast.Term("boat"))))),
        ('knee NOT"boat"', ast.Or((ast.Term("knee"), ast.Not(ast.Term("boat"))))),
    ],
)
def test_an_operator_word_glued_to_a_word_is_part_of_it(text: str, expected: ast.Node) -> None:
    node = parse(text)
    assert node == expected
    assert parse(node.to_query()) == node


@pytest.mark.parametrize(
    ("text", "position"), [("knee^2bakery", 4), ("a^1e3", 1), ("a^2.5.1", 1), ("(a b)^2x", 5)]
)
def test_a_malformed_boost_is_refused_not_split(text: str, position: int) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.position == position and "unexpected '^'" in str(info.value)
    assert info.value.hint and "boost" in info.value.hint


def test_a_boost_is_ended_by_a_space_a_bracket_or_the_end() -> None:
    assert parse("(a^2.5 b^3)^2") == ast.Boost(
        ast.Or((ast.Term("a", weight=2.5), ast.Term("b", weight=3.0))), 2.0
    )


# -- argument errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ("action(Kevin, entity:x)", 14, "the verb of an action cannot be an entity pattern"),
        ("entity(entity:x)", 7, "cannot contain another entity pattern"),
        ("entity(name=Ann, entity(type=x))", 17, "cannot contain another entity pattern"),
        ("action(Kevin, tell, *, Satya, *)", 30, "at most four positional arguments"),
        ("action(verb=tell, *)", 18, "positional arguments must come before named ones"),
        ("entity(name=Biscuit, name=Luna)", 21, "name is given twice"),
        ("entity(Biscuit, name=Luna)", 16, "name is given twice"),
        ("entity(*, name=Luna)", 10, "name is given twice"),
        ("entity(facet.=x)", 7, "'facet.' names no facet"),
        ("entity(type=pet, facet..age=4)", 17, "'facet..age' names no facet"),
    ],
)
def test_argument_errors_point_at_the_argument(text: str, position: int, message: str) -> None:
    """A positional entity pattern or * was reported at position 0; a second name replaced
    the first."""
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    assert info.value.position == position
    assert message in str(info.value)


def test_several_types_and_facets_are_still_allowed() -> None:
    assert parse("entity(Ann, type=person, type=pet, facet.age=4)") == ast.EntityPattern(
        "Ann", ("person", "pet"), (ast.FacetCondition("age", "4"),)
    )


# -- spaces, quotes, apostrophes ------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "same_as"),
    [
        ("knee\u00a0bakery", "knee bakery"),
        ("knee\u2003bakery\u3000boat", "knee bakery boat"),
        ("speaker:Marco\u00a0knee", "speaker:Marco knee"),
        ("\u201ccooking class\u201d", '"cooking class"'),
        ("\u2018cooking class\u2019", "'cooking class'"),
        ("\u201ccooking class\u201d^2 AND knee", '"cooking class"^2 AND knee'),
        ("topic:\u201cmental health\u201d", 'topic:"mental health"'),
        ("\u2018Marco\u2019s boat\u2019", "'Marco\u2019s boat'"),
    ],
)
def test_unicode_spaces_and_typographic_quotes(text: str, same_as: str) -> None:
    """A no-break space was an unexpected character; “cooking class” was two words with
    quotes in them."""
    assert parse(text) == parse(same_as)


def test_a_lone_typographic_quote_is_an_error_with_a_hint() -> None:
    for text, position in (("\u201ccooking class", 0), ("cooking class\u201d", 13)):
        with pytest.raises(QuerySyntaxError) as info:
            parse(text)
        assert info.value.position == position and info.value.hint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Marco's boat", ast.Or((ast.Term("Marco's"), ast.Term("boat")))),
        (
            "Marco's boat and Priya's bakery",
            ast.Or(tuple(ast.Term(w) for w in ("Marco's", "boat", "and", "Priya's", "bakery"))),
        ),
        ("the Joneses' dog", ast.Or(tuple(ast.Term(w) for w in ("the", "Joneses'", "dog")))),
        ("Marco\u2019s boat", ast.Or((ast.Term("Marco\u2019s"), ast.Term("boat")))),
        ("'Marco's boat'", ast.Term("Marco's boat", phrase=True)),
        ("'it's' 'a b'", ast.Or((ast.Term("it's"), ast.Term("a b", phrase=True)))),
        ("entity:Marco's", ast.EntityPattern("Marco's")),
        ("action(Marco, adopt, Marco's)", ast.ActionPattern("Marco", "adopt", "Marco's")),
    ],
)
def test_an_apostrophe_in_a_word_is_part_of_it(text: str, expected: ast.Node) -> None:
    """Marco's boat failed at the apostrophe; two possessives made a phrase of what lay
    between them."""
    node = parse(text)
    assert node == expected
    assert parse(node.to_query()) == node


@pytest.mark.parametrize(
    "text", ["speaker :Marco", "speaker : Marco", "speaker: Marco", "speaker\u00a0:Marco"]
)
def test_spaces_around_a_scopes_colon_are_allowed_as_for_patterns(text: str) -> None:
    assert parse(text) == parse("speaker:Marco")
    assert parse("date : 2023-05") == parse("date:2023-05")
    assert parse("kind : sport") == parse("kind:sport") and parse("entity :x") == parse("entity:x")


def test_the_field_hint_lists_every_field() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("speakr:Marco")
    hint = info.value.hint or ""
    for field in ("speaker:", "date:", "after:", "before:", "when:", "section:"):
        assert field in hint
    for field in ("entity:", "type:", "topic:", "kind:", "meta.KEY"):
        assert field in hint


# -- rendering back -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '"entity" (knee OR bakery)',
        '"action" (knee OR bakery)',
        '"topic" (knee OR bakery)',
        'entity:"action" (knee bakery)',
        'action(Kevin, "topic", *) (knee bakery)',
        '"NOT-boat" "OR"',
        '"..x" date:2023',
    ],
)
def test_a_keyword_as_a_word_renders_back_quoted(text: str) -> None:
    """'"entity" (knee OR bakery)' was shown as entity (knee OR bakery), which does not
    parse."""
    node = parse(text)
    assert parse(node.to_query()) == node


# -- error display --------------------------------------------------------------------------


def test_a_long_query_shows_a_window_around_the_error() -> None:
    text = "knee " * 3000 + "ab )" + " bakery" * 356
    assert len(text) > 17_000
    with pytest.raises(QuerySyntaxError) as info:
        parse(text)
    err = info.value
    assert err.position == 15_003
    line, caret = err.snippet.splitlines()
    assert line.startswith("…") and line.endswith("…") and len(line) < 90
    assert line[caret.index("^")] == ")"
    assert len(str(err)) < 400


def test_a_multi_line_query_names_the_line() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("knee\nbakery\n  boat )")
    err = info.value
    assert (err.line, err.column) == (3, 8)
    assert "(line 3, column 8)" in str(err)
    assert err.snippet == "  boat )\n       ^"


def test_the_caret_stands_under_the_error_after_tabs_and_wide_characters() -> None:
    import unicodedata

    for text in ("a\tbb\t)", "猫 犬 )", "😀 knee )", "caf\u0065\u0301 )"):
        with pytest.raises(QuerySyntaxError) as info:
            parse(text)
        line, caret = info.value.snippet.splitlines()
        assert "\t" not in line
        width = sum(
            0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1
            for c in line[: line.index(")")]
        )
        assert caret.index("^") == width, text


def test_a_short_single_line_error_looks_as_before() -> None:
    with pytest.raises(QuerySyntaxError) as info:
        parse("date:2023-13")
    assert str(info.value).startswith(
        "query syntax error at position 5 (column 6): cannot read '2023-13' as a date\n"
        "  date:2023-13\n       ^"
    )
    assert info.value.snippet == "date:2023-13\n     ^"
