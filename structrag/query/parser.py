"""Query text -> lark parse tree -> typed AST (:mod:`structrag.query.ast`).

The grammar is ``grammars/query.lark``, shipped in the package as ``structrag.grammars``
and loaded through the package loader. Every failure, from the lexer, the parser or the
checks on values (dates, comparators, argument names), is a
:class:`~structrag.errors.QuerySyntaxError` carrying the position and a caret.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from structrag.errors import QueryPlanError, QuerySyntaxError
from structrag.query import ast
from structrag.query.timeexpr import TimeRange, absolute_range, understood

GRAMMAR_PACKAGE = "structrag.grammars"
#: Longer queries are refused: parsing and running grow with length (a query of 20,000
#: characters has a few thousand terms at most, and runs in about a second).
MAX_QUERY_CHARS = 20_000
#: Deeper nesting is refused: brackets, NOT, AND and OR groups inside one another, counted
#: as the levels of the AST (``((a OR b) c)`` is two; brackets around one item add none).
#: Rendering, compiling and running a query walk its tree recursively.
MAX_QUERY_DEPTH = 100
GRAMMAR_FILE = "query.lark"
_ESCAPE = re.compile(r"\\(.)")


@lru_cache(maxsize=1)
def grammar_text() -> str:
    return resources.files(GRAMMAR_PACKAGE).joinpath(GRAMMAR_FILE).read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(grammar_text(), parser="lalr", propagate_positions=True, maybe_placeholders=False)


@dataclass(frozen=True)
class _Value:
    text: str
    pos: int
    phrase: bool
    #: Double quotes: a phrase whose words go together (see :class:`ast.Term`).
    together: bool = False
    #: Where the value ends in the query (after its closing quote).
    end: int = 0


class _Star:
    """``*`` while transforming: any value (``None`` in the AST)."""


_STAR = _Star()


class _Problem(Exception):
    def __init__(
        self, pos: int, message: str, hint: str | None = None, *, runs: bool = False
    ) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message
        self.hint = hint
        #: It parses, but cannot run (a :class:`QueryPlanError`).
        self.runs = runs


#: ``negated=`` of an action: yes (only what was not done), no (only what was), * (both).
_NEGATED = {"yes": True, "true": True, "no": False, "false": False}


_ACTION_ARGS = {"subject", "verb", "object", "indirect_object", "to", "indirect"}
#: What an operator needs, said when one stands where it cannot (``AND`` alone, ``OR x``).
_OPERATORS = {
    "AND": "AND needs a word or pattern on each side",
    "OR": "OR needs a word or pattern on each side",
    "NOT": "NOT needs a word or pattern after it",
}


@v_args(inline=True)
class _ToAst(Transformer):  # type: ignore[type-arg]
    def __init__(self, text: str) -> None:
        super().__init__()
        #: The query, which a boost keeps with its position (see :class:`ast.Boost`).
        self.text = text

    def word(self, token: Token) -> _Value:
        start = token.start_pos or 0
        return _Value(str(token), start, False, end=start + len(token))

    def phrase(self, token: Token) -> _Value:
        raw = str(token)[1:-1]
        together = str(token)[0] in '"“'  # double quotes, straight or typographic
        start = token.start_pos or 0
        return _Value(_ESCAPE.sub(r"\1", raw), start, True, together, end=start + len(token))

    def wildcard(self, token: Token) -> _Star:
        return _STAR

    def term(self, value: _Value, fuzzy: Token | None = None) -> ast.Term:
        _fuzzy_after(value, fuzzy)
        if not value.phrase and value.text in _OPERATORS:
            # The lexer reads an operator out of place as a word ("OR x", "AND" alone);
            # as a scope's or pattern's value (speaker:OR) it is a value.
            raise _Problem(
                value.pos,
                _OPERATORS[value.text],
                hint=f'to search for the word, put it in quotes: "{value.text}"',
            )
        # A quoted single word is just a word; a phrase is several words kept together.
        phrase = value.phrase and len(value.text.split()) > 1
        return ast.Term(
            value.text, phrase=phrase, fuzzy=fuzzy is not None, together=phrase and value.together
        )

    def kind_term(self, keyword: Token, value: _Value, fuzzy: Token | None = None) -> ast.Term:
        _fuzzy_after(value, fuzzy)
        phrase = value.phrase and len(value.text.split()) > 1
        return ast.Term(
            value.text,
            phrase=phrase,
            kinds=True,
            fuzzy=fuzzy is not None,
            together=phrase and value.together,
        )

    def named_argument(self, name: Token, value: Any) -> tuple[str, Any, int]:
        return (str(name), value, name.start_pos or 0)

    @v_args(inline=True, meta=True)
    def positional_argument(self, meta: Any, value: Any) -> tuple[None, Any, int]:
        pos = value.pos if isinstance(value, _Value) else getattr(meta, "start_pos", 0)
        return (None, value, pos)

    def arguments(self, *items: tuple[str | None, Any, int]) -> list[tuple[str | None, Any, int]]:
        return list(items)

    # -- patterns -------------------------------------------------------------------------

    def entity_short(self, keyword: Token, value: _Value) -> ast.EntityPattern:
        return ast.EntityPattern(name=value.text)

    def entity_call(self, keyword: Token, arguments: list[Any] | None = None) -> ast.EntityPattern:
        name: str | None = None
        named = False  # the name given (a name of * too)
        types: list[str] = []
        facets: list[ast.FacetCondition] = []
        for index, (key, value, pos) in enumerate(arguments or []):
            if isinstance(value, ast.EntityPattern):
                raise _Problem(pos, "an entity pattern cannot contain another entity pattern")
            text = None if value is _STAR else value.text
            if key is None and index != 0:
                raise _Problem(
                    pos,
                    "only the first argument of entity(...) may be unnamed",
                    hint="write name=..., type=... or facet.NAME=...",
                )
            if key is None or key == "name":
                if named:
                    raise _Problem(
                        pos,
                        "name is given twice",
                        hint="an entity has one name; for either of two, write "
                        "(entity:A OR entity:B)",
                    )
                name, named = text, True
            elif key == "type":
                if text is not None:
                    types.append(text.lower())
            elif key.startswith("facet."):
                facet = key[len("facet.") :]
                if not facet or "" in facet.split("."):
                    raise _Problem(
                        pos,
                        f"{key!r} names no facet",
                        hint="write facet.NAME=VALUE, e.g. facet.color=blue",
                    )
                facets.append(ast.FacetCondition(facet, text))
            else:
                raise _Problem(
                    pos,
                    f"entity(...) has no argument {key!r}",
                    hint="use name=, type= or facet.NAME=",
                )
        pattern = ast.EntityPattern(name=name, types=tuple(types), facets=tuple(facets))
        if name is None and not types and not facets:
            raise _Problem(
                keyword.start_pos or 0,
                f"{pattern.to_query()} matches every entity",
                hint="give it a name, a type=... or a facet.NAME=...",
                runs=True,
            )
        return pattern

    def type_pattern(self, keyword: Token, value: _Value) -> ast.EntityPattern:
        return ast.EntityPattern(types=(value.text.lower(),))

    def topic(self, keyword: Token, value: _Value) -> ast.TopicPattern:
        return ast.TopicPattern(value.text)

    def action(self, keyword: Token, arguments: list[Any] | None = None) -> ast.ActionPattern:
        slots: dict[str, Any] = {}
        order = ["subject", "verb", "object", "indirect_object"]
        for index, (key, value, pos) in enumerate(arguments or []):
            if key is None:
                if slots and any(k is not None for k, _, _ in (arguments or [])[:index]):
                    raise _Problem(pos, "positional arguments must come before named ones")
                if index >= len(order):
                    raise _Problem(
                        pos,
                        "action(...) takes at most four positional arguments",
                        hint="action(subject, verb, object, indirect_object)",
                    )
                role = order[index]
            elif key in _ACTION_ARGS:
                role = "indirect_object" if key in ("to", "indirect") else key
            elif key == "negated":
                if "negated" in slots:
                    raise _Problem(pos, "negated is given twice", hint=_NEGATED_HINT)
                slots["negated"] = _negated(value, pos)
                continue
            else:
                raise _Problem(
                    pos,
                    f"action(...) has no argument {key!r}",
                    hint="use subject=, verb=, object=, to= or negated=",
                )
            if role in slots:
                raise _Problem(
                    pos,
                    f"{role} is given twice",
                    hint=f"an action has one {role.replace('_', ' ')}; for either of two, "
                    "write (action(...) OR action(...))",
                )
            if isinstance(value, _Value):
                value = value.text
            elif value is _STAR:
                value = None
            if role == "verb" and isinstance(value, ast.EntityPattern):
                raise _Problem(pos, "the verb of an action cannot be an entity pattern")
            slots[role] = value
        pattern = ast.ActionPattern(**slots)
        if all(slots.get(role) is None for role in ast.ROLES):
            raise _Problem(
                keyword.start_pos or 0,
                f"{pattern.to_query()} matches every action"
                + (
                    " (negated= only narrows the actions a subject, verb or object finds)"
                    if pattern.negated is not None
                    else ""
                ),
                hint="give it a subject, a verb or an object",
                runs=True,
            )
        return pattern

    # -- scopes ---------------------------------------------------------------------------

    def scope(self, keyword: Token, value: _Value) -> ast.Node:
        key = str(keyword)
        text = value.text.strip()
        if not text:
            raise _Problem(value.pos, f"{key}: needs a value")
        if key in ("speaker", "from"):
            return ast.PeopleScope("speaker", text)
        if key == "to":
            return ast.PeopleScope("to", text)
        if key == "conversation":
            return ast.ConversationScope(text)
        if key == "tag":
            return ast.TagScope(text)
        if key == "source":
            source = text.lower()
            if source in ("knowledge", "documents", "document"):
                return ast.SourceScope("knowledge")
            if source in ("conversations", "conversation", "messages", "chat"):
                return ast.SourceScope("conversations")
            raise _Problem(
                value.pos,
                f"source:{text} is not a source",
                hint="source:knowledge (documents) or source:conversations",
            )
        if key in ("document", "section"):
            return ast.DocumentScope(text, key)  # type: ignore[arg-type]
        if key == "during":
            return ast.DuringScope(text)
        if key == "when":
            if not understood(text):
                raise _Problem(
                    value.pos,
                    f"cannot read {text!r} as a time",
                    hint='e.g. when:"last May", when:2023-05, when:"3 weeks ago"',
                )
            return ast.TimeScope(None, None, text, "when")
        return self.date_scope(keyword, value)  # date:, after:, before: have DATE_KW

    def date_range(self, *parts: Any) -> _Value:
        """``A..B`` with its ends bare or quoted, spaces around ``..`` or not; one end may
        be left open. Read as one value, as ``date:"A..B"`` is."""
        ends = [part for part in parts if isinstance(part, _Value)]
        dots = next(part for part in parts if isinstance(part, Token))
        left = ends[0].text.strip() if ends and ends[0].pos < (dots.start_pos or 0) else ""
        right = ends[-1].text.strip() if ends and ends[-1].pos > (dots.start_pos or 0) else ""
        start = ends[0].pos if left else dots.start_pos or 0
        if not left and not right:
            raise _Problem(
                start,
                "a date range needs a date on at least one side of '..'",
                hint="e.g. date:2023-05-01..2023-05-31, after:2023-05-01 or before:2023-06-01",
            )
        return _Value(f"{left}..{right}", start, any(end.phrase for end in ends))

    def date_scope(self, keyword: Token, value: _Value) -> ast.Node:
        key = str(keyword)
        text = value.text.strip()
        if not text:
            raise _Problem(value.pos, f"{key}: needs a value")
        if text.replace(" ", "") == "..":
            raise _Problem(
                value.pos,
                "a date range needs a date on at least one side of '..'",
                hint="e.g. date:2023-05-01..2023-05-31, after:2023-05-01 or before:2023-06-01",
            )
        found = _time_range(text)
        if found is None:
            left, dots, right = text.partition("..")
            if dots and _time_end(left) is not None and _time_end(right) is not None:
                raise _Problem(  # both dates, the later one first
                    value.pos,
                    f"the range {text!r} ends before it starts",
                    hint=f"write the earlier date first: {right.strip()}..{left.strip()}",
                )
            hint = 'use YYYY, YYYY-MM, YYYY-MM-DD, "8 May 2023" or a range A..B'
            if dots and _time_end(left) is not None:
                hint += f'; a range open at its end is quoted when words follow: {key}:"{left}.."'
            elif ":" in text:
                hint += ", with a time: YYYY-MM-DDTHH:MM or YYYY-MM-DDTHH:MM:SS"
            raise _Problem(value.pos, f"cannot read {text!r} as a date", hint=hint)
        if key == "after":
            return ast.TimeScope(found.end, None, text, "after")
        if key == "before":
            return ast.TimeScope(None, found.start, text, "before")
        return ast.TimeScope(found.start, found.end, text, "date")

    def relation(self, key: Token, comparator: Token, value: _Value) -> ast.MetaFilter:
        op = str(comparator)
        return ast.MetaFilter(str(key)[len("meta.") :], op, value.text)  # type: ignore[arg-type]

    # -- boolean --------------------------------------------------------------------------

    def negation(self, item: ast.Node) -> ast.Not:
        return ast.Not(item)

    @v_args(inline=True, meta=True)
    def boost(self, meta: Any, item: ast.Node, token: Token) -> ast.Node:
        factor = float(str(token)[1:])
        if factor <= 0:
            raise _Problem(token.start_pos or 0, "a boost must be above 0", hint="e.g. word^0.5")
        if isinstance(item, ast.Term):
            return replace(item, weight=item.weight * factor)
        return ast.Boost(item, factor, source=(self.text, getattr(meta, "start_pos", 0) or 0))

    def conjunction(self, *items: ast.Node) -> ast.And:
        return ast.And(tuple(items))

    def juxtaposition(self, *items: ast.Node) -> ast.Or:
        return ast.Or(tuple(items))

    def disjunction(self, *items: ast.Node) -> ast.Or:
        return ast.Or(tuple(items), explicit=True)


_NEGATED_HINT = (
    'negated=no: only what was done; negated=yes: only what was not ("I didn\'t"); '
    "leave it out for both"
)


def _negated(value: Any, pos: int) -> bool | None:
    """The value of ``negated=``: yes/true, no/false, or * (both, as without it)."""
    if value is _STAR:
        return None
    if isinstance(value, _Value) and value.text.strip().lower() in _NEGATED:
        return _NEGATED[value.text.strip().lower()]
    raise _Problem(pos, "negated= takes yes or no", hint=_NEGATED_HINT)


def _fuzzy_after(value: _Value, fuzzy: Token | None) -> None:
    """A ``~`` belongs right after its word (``lerning~``); one standing apart is refused."""
    if fuzzy is not None and (fuzzy.start_pos or 0) != value.end:
        raise _Problem(
            fuzzy.start_pos or 0,
            "a '~' goes right after its word, with no space",
            hint=f"for the word or the words one edit away, write {_glued(value)}~; for a "
            'literal ~, quote it: "~"',
        )


def _glued(value: _Value) -> str:
    return ast.Term(value.text, phrase=value.phrase, together=value.together).to_query()


#: A date with a time: ``2024-05-21T20:30``, ``2024-05-21 20:30:15``.
_MOMENT = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})(?:t|\s+)(\d{1,2}):(\d{2})(?::(\d{2}))?", re.IGNORECASE
)


def _moment(text: str) -> TimeRange | None:
    """A date with a time, as the minute it names (the second, with seconds): both ends
    of a range are included."""
    found = _MOMENT.fullmatch(text.strip())
    if found is None:
        return None
    year, month, day, hour, minute = (int(found.group(i)) for i in range(1, 6))
    second = found.group(6)
    try:
        start = datetime(year, month, day, hour, minute, int(second or 0))
        return TimeRange(start, start + timedelta(seconds=1 if second else 60))
    except (ValueError, OverflowError):
        return None


def _time_end(text: str) -> TimeRange | None:
    """One end of a range: a date, month or year, or a date with a time."""
    return _moment(text) if ":" in text else absolute_range(text)


def _time_range(text: str) -> TimeRange | None:
    """:func:`absolute_range`, whose ends may also be dates with a time."""
    if ":" not in text:
        return absolute_range(text)
    left, dots, right = text.partition("..")
    if not dots:
        return _moment(text)
    start = _time_end(left) if left.strip() else TimeRange(None, None)
    end = _time_end(right) if right.strip() else TimeRange(None, None)
    if start is None or end is None:
        return None
    if start.start and end.end and end.end <= start.start:
        return None
    return TimeRange(start.start, end.end)


def _tokens_text(token: Any) -> str:
    return str(getattr(token, "value", token))


def parse(text: str) -> ast.Node:
    """Parse a query expression into an AST; raises :class:`QuerySyntaxError`."""
    if not text.strip():
        raise QuerySyntaxError(text, 0, "empty query", hint="type some words or a pattern")
    if len(text) > MAX_QUERY_CHARS:
        raise QuerySyntaxError(
            text[:80],
            0,
            f"the query has {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}",
            hint="split it into several queries",
        )
    try:
        tree = _parser().parse(text)
    except RecursionError:
        raise _too_deep(text) from None
    except UnexpectedCharacters as exc:
        at = int(exc.pos_in_stream or 0)
        char = text[at] if at < len(text) else ""
        hint = None
        if char in "\"'“‘":
            hint = "close the quoted phrase"
        elif char in "”’":
            hint = "this closing quote opens no phrase; a phrase is “...”, \"...\" or '...'"
        elif char in ":=<>!":
            hint = "put values that contain : = < > ! in double quotes"
        elif char == "^":
            hint = "a boost is a number above 0 right after the word: word^2, word^0.5"
        raise QuerySyntaxError(text, at, f"unexpected {char!r}", hint=hint) from None
    except UnexpectedEOF:
        raise _ends_too_early(text) from None
    except UnexpectedToken as exc:
        token = exc.token
        pos = getattr(token, "start_pos", None)
        if token.type == "$END" or pos is None:
            raise _ends_too_early(text) from None
        hint = _expected_hint(exc.expected)
        if token.type == "RPAR" and text.count("(", 0, pos) <= text.count(")", 0, pos):
            hint = "this ')' closes no '(' before it"
        elif token.type == "COMMA":
            hint = _comma_hint(text, pos)
        elif (spaced := _SPACED_TIME.search(text, 0, pos)) and (
            time := _TIME_AFTER.match(text, pos)
        ):
            written = f"{spaced.group(2)}T{spaced.group(3)}{time.group(0)}"
            hint = f"a date with a time is written {spaced.group(1)}:{written}"
        elif token.type == "COLON" and (value := _SCOPE_VALUE_BEFORE.search(text, 0, pos)):
            whole = _VALUE_AFTER.match(text, value.start(2))
            written = whole.group(0) if whole else value.group(2)
            hint = f"a value that holds ':' goes in double quotes: {value.group(1)}:\"{written}\""
        elif token.type == "COLON" and (field := _WORD_BEFORE.search(text, 0, pos)):
            hint = (
                f"{field.group(1)!r} is not a field: the scopes are {scope_names()}, and "
                "entity:, type:, topic:, kind:, meta.KEY; put a value that holds ':' in "
                "double quotes"
            )
        raise QuerySyntaxError(
            text, pos, f"unexpected {_tokens_text(token)!r}", hint=hint
        ) from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark input errors
        raise QuerySyntaxError(text, getattr(exc, "pos_in_stream", 0) or 0, str(exc)) from None
    if deep := _too_deep_at(tree, text):
        raise deep
    try:
        node = _ToAst(text).transform(tree)
    except RecursionError:
        raise _too_deep(text) from None
    except VisitError as exc:
        problem = exc.orig_exc
        if isinstance(problem, _Problem):
            error = QueryPlanError if problem.runs else QuerySyntaxError
            raise error(text, problem.pos, problem.message, hint=problem.hint) from None
        if isinstance(problem, RecursionError):  # pragma: no cover - the depth check is first
            raise _too_deep(text) from None
        raise
    if not isinstance(node, ast.Node):
        raise QuerySyntaxError(text, 0, "empty query")
    return node


def _ends_too_early(text: str) -> QuerySyntaxError:
    last = text.rstrip().rsplit(None, 1)[-1]
    if last in _OPERATORS:  # "Biscuit OR"
        return QuerySyntaxError(text, len(text.rstrip()) - len(last), _OPERATORS[last])
    return QuerySyntaxError(
        text, len(text), "the query ends too early", hint="close brackets and finish patterns"
    )


#: The parse tree's nodes that become nested AST nodes (And, Or, Not, Boost).
_NESTING = {"disjunction", "juxtaposition", "conjunction", "negation", "boost"}


def _too_deep_at(tree: Tree[Token], text: str) -> QuerySyntaxError | None:
    """The error for a tree nested more than :data:`MAX_QUERY_DEPTH` levels, at the start
    of its first level too many (at its '(' when one opens it); ``None`` if it is not.
    Walks the tree without recursion."""
    stack: list[tuple[Tree[Token], int]] = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if node.data in _NESTING:
            depth += 1
            if depth > MAX_QUERY_DEPTH:
                return _too_deep(text, _opening(text, getattr(node.meta, "start_pos", 0)))
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))
    return None


def _opening(text: str, at: int) -> int:
    """``at``, or the '(' that opens the group starting there."""
    before = text[:at].rstrip()
    return len(before) - 1 if before.endswith("(") else at


def _too_deep(text: str, at: int | None = None) -> QuerySyntaxError:
    if at is None:  # where the brackets are deepest
        depth, deepest, at = 0, 0, 0
        for i, char in enumerate(text):
            depth += char == "("
            depth -= char == ")"
            if depth > deepest:
                deepest, at = depth, i
    return QuerySyntaxError(
        text,
        at,
        f"the query nests more than {MAX_QUERY_DEPTH} levels deep",
        hint="use fewer nested brackets and NOTs: a OR b OR c needs no brackets",
    )


_NAMES = {
    "WORD": "a word",
    "STRING": "a quoted phrase",
    "RPAR": "')'",
    "LPAR": "'('",
    "COMMA": "','",
    "COLON": "':'",
    "STAR": "'*'",
    "COMPARATOR": "a comparison (=, <, contains)",
    "ENTITY_KW": "entity",
    "KIND_KW": "kind",
    "TYPE_KW": "type",
    "TOPIC_KW": "topic",
    "ACTION_KW": "action(...)",
    "SCOPE_KW": "a scope (speaker:, when:, ...)",
    "DATE_KW": "a date scope (date:, after:, before:)",
    "DATE_WORD": "a date",
    "RANGE": "'..'",
    "META_KEY": "meta.<key>",
    "NAME": "an argument name",
    "EQUAL": "'='",
    "FUZZY": "'~'",
    "BOOST": "a boost (^2)",
    "$END": "the end of the query",
}


_WORD_BEFORE = re.compile(r"([\w.-]+)\s*$")
#: ``conversation:slack:general``: a scope's bare value, then a ':' (ids that importers
#: make hold one).
_SCOPE_VALUE_BEFORE = re.compile(r"\b([a-z_]+):([^\s:()\"']+)$")
_VALUE_AFTER = re.compile(r"[^\s()\"']+")


@lru_cache(maxsize=1)
def scope_names() -> str:
    """The scope keywords of the grammar, as a hint lists them: ``speaker:, from:, ...``
    (the date scopes, a terminal of their own, after ``tag:``)."""
    names: list[str] = []
    for terminal in ("SCOPE_KW", "DATE_KW"):
        if found := re.search(rf"{terminal}[.\d]*: /\(([^)]*)\)", grammar_text()):
            names.extend(found.group(1).split("|"))
    if "tag" in names and "date" in names:  # the order the README lists them in
        dates = [n for n in ("date", "after", "before") if n in names]
        rest = [n for n in names if n not in dates]
        at = rest.index("tag") + 1
        names = rest[:at] + dates + rest[at:]
    return ", ".join(f"{name}:" for name in names) if names else "speaker:"


def _expected_hint(expected: set[str]) -> str | None:
    """What could stand there, in the words of the README: a terminal without a name
    here (the operators, lark's own) is left out, never shown as it is."""
    names = sorted({_NAMES[e] for e in expected if e in _NAMES})
    if not names:
        return None
    return "expected " + ", ".join(names[:6])


#: ``after:2024-05-21 20:30``: a date scope's date, a space and the hour before a ':'.
_SPACED_TIME = re.compile(r"\b(date|after|before)\s*:\s*(\d{4}-\d{1,2}-\d{1,2})\s+(\d{1,2})$")
_TIME_AFTER = re.compile(r":\d{2}(?::\d{2})?[^\s()\"']*")

#: ``speaker:Marco,Priya``: a field, its value, and the values after commas.
_LIST_BEFORE = re.compile(r"\b([A-Za-z_]+)\s*:\s*([^\s:()\"',]+)\s*$")
_LIST_AFTER = re.compile(r"(?:\s*,\s*[^\s:()\"',]+)+")


def _comma_hint(text: str, at: int) -> str:
    """What to write instead of a ',' outside a pattern's arguments: for a field's list of
    values (``speaker:Marco,Priya``), an OR of the field, or the whole value quoted."""
    before = _LIST_BEFORE.search(text, 0, at)
    after = _LIST_AFTER.match(text, at)
    if before is None or after is None:
        if text.count("(", 0, at) > text.count(")", 0, at) and text[:at].rstrip()[-1:] in "(,":
            return "an argument goes before each ','; * is any value"
        return (
            "words and patterns are separated by spaces (commas separate the arguments "
            "of entity(...) and action(...)); a value that holds ',' goes in double quotes"
        )
    field = before.group(1)
    values = [before.group(2), *(v.strip() for v in after.group(0).split(",") if v.strip())]
    either = " OR ".join(f"{field}:{ast.quote(v)}" for v in values)
    if text[: before.start()].strip() or text[after.end() :].strip():
        either = f"({either})"
    whole = text[before.start(2) : after.end()]
    return (
        f"a {field}: takes one value; for any of them, write {either}; for one value "
        f"that holds ',', quote it: {field}:{ast.double_quoted(whole)}"
    )
