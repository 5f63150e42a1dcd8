"""The typed AST of a query: knowledge patterns, terms, scopes, boosts and boolean nodes.

Every node renders back to query text (:meth:`Node.to_query`), and parsing that text gives
the same tree back: a natural-language question translated into an AST is shown to the
user as an expression that ``structrag query`` runs with the same plan. "Any value" is
``None`` everywhere (written ``*``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Comparator = Literal["=", "!=", "<", "<=", ">", ">=", "contains"]
Role = Literal["subject", "verb", "object", "indirect_object"]
ROLES: tuple[Role, ...] = ("subject", "verb", "object", "indirect_object")

#: What the grammar reads as one word (its WORD terminal, less the apostrophes it allows
#: inside a word: a value holding one is quoted).
_BARE = re.compile(r"[^\s()\"',=:<>!*^~“”‘]+")
#: An operator word followed by a space, a bracket, a double quote or the end reads as the
#: operator ("NOT-boat" is a word): such a value is quoted.
_RESERVED = re.compile(r"(AND|OR|NOT)(?=[\s()\"“‘]|$)")
#: Words that read as a keyword before '(' (``entity (a OR b)``): quoted, so that a word
#: followed by a bracketed group stays a word.
_KEYWORDS = frozenset({"entity", "action", "topic"})


def quote(text: str) -> str:
    """A value as query text: bare when it can be, else double-quoted."""
    if (
        _BARE.fullmatch(text)
        and not _RESERVED.match(text)
        and text not in _KEYWORDS
        and not text.startswith(("meta.", ".."))  # "..x" after a date reads as a range
    ):
        return text
    return double_quoted(text)


def double_quoted(text: str) -> str:
    """A value in double quotes, its quotes and backslashes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Node:
    """Base of every AST node."""

    def to_query(self) -> str:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.to_query()


def weight_text(weight: float) -> str:
    """A boost or weight as query text: ``^0.3`` (nothing for 1)."""
    return "" if weight == 1 else f"^{weight:g}"


@dataclass(frozen=True)
class Term(Node):
    """A free word or quoted phrase, matched against knowledge and message text; its
    ``weight`` (``word^0.3``) scales it within its group. A ``kinds`` term
    (``kind:sport``) also matches the words the lexicon lists as kinds of it (tennis,
    surfing ...), at a lower weight: what a question asking for a category needs. A
    ``fuzzy`` term (``lerning~``) also matches, when no message in scope has it, the
    index terms one edit away (a typo). A ``phrase`` is several words as one term: with
    double quotes (``"support group"``, ``together``) the messages that have them one
    after another come first; with single quotes (``'support group'``, what a question's
    translation writes for a noun phrase) the words count wherever they are."""

    text: str
    phrase: bool = False
    weight: float = 1.0
    kinds: bool = False
    fuzzy: bool = False
    together: bool = False

    def to_query(self) -> str:
        if self.phrase:
            mark = '"' if self.together else "'"
            text = mark + self.text.replace("\\", "\\\\").replace(mark, "\\" + mark) + mark
        else:
            text = quote(self.text)
        prefix = "kind:" if self.kinds else ""
        return prefix + text + ("~" if self.fuzzy else "") + weight_text(self.weight)


@dataclass(frozen=True)
class FacetCondition:
    """``facet.NAME=VALUE``; a ``None`` value asks for the facet with any value."""

    name: str
    value: str | None


@dataclass(frozen=True)
class EntityPattern(Node):
    """An entity by name, type and facets; any part may be left open."""

    name: str | None = None
    types: tuple[str, ...] = ()
    facets: tuple[FacetCondition, ...] = ()

    def to_query(self) -> str:
        if self.name is not None and not self.types and not self.facets:
            return f"entity:{quote(self.name)}"
        if self.name is None and len(self.types) == 1 and not self.facets:
            return f"type:{quote(self.types[0])}"
        return self.to_call()

    def to_query_call(self) -> str:
        """The ``entity(...)`` form, which any argument position accepts."""
        if self.name is not None and not self.types and not self.facets:
            return f"entity:{quote(self.name)}"
        return self.to_call()

    def to_call(self) -> str:
        args = []
        if self.name is not None:
            args.append(f"name={quote(self.name)}")
        args.extend(f"type={quote(t)}" for t in self.types)
        for facet in self.facets:
            value = "*" if facet.value is None else quote(facet.value)
            args.append(f"facet.{facet.name}={value}")
        return f"entity({', '.join(args) or '*'})"


Slot = str | EntityPattern | None


def _slot(value: Slot) -> str:
    if value is None:
        return "*"
    if isinstance(value, str):
        return quote(value)
    return value.to_query_call()


@dataclass(frozen=True)
class ActionPattern(Node):
    """subject - verb - object - indirect object; open parts match anything. ``negated``
    chooses between what was done and what was not ("I didn't make it"): ``False``
    (``negated=no``) only the actions that were done, ``True`` (``negated=yes``) only the
    negated ones, ``None`` (no argument) both."""

    subject: Slot = None
    verb: str | None = None
    object: Slot = None
    indirect_object: Slot = None
    negated: bool | None = None

    def to_query(self) -> str:
        parts = [_slot(self.subject), _slot(self.verb), _slot(self.object)]
        if self.indirect_object is not None:
            parts.append(_slot(self.indirect_object))
        if self.negated is not None:
            parts.append(f"negated={'yes' if self.negated else 'no'}")
        return f"action({', '.join(parts)})"


@dataclass(frozen=True)
class TopicPattern(Node):
    text: str

    def to_query(self) -> str:
        return f"topic:{quote(self.text)}"


# -- scopes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeopleScope(Node):
    """Messages from (``speaker``) or to (``to``) a person."""

    role: Literal["speaker", "to"]
    name: str

    def to_query(self) -> str:
        return f"{self.role}:{quote(self.name)}"


@dataclass(frozen=True)
class ConversationScope(Node):
    conversation: str

    def to_query(self) -> str:
        return f"conversation:{quote(self.conversation)}"


@dataclass(frozen=True)
class TagScope(Node):
    tag: str

    def to_query(self) -> str:
        return f"tag:{quote(self.tag)}"


@dataclass(frozen=True)
class SourceScope(Node):
    """What the messages are: ``knowledge`` (document fragments) or ``conversations``."""

    source: Literal["knowledge", "conversations"]

    def to_query(self) -> str:
        return f"source:{self.source}"


@dataclass(frozen=True)
class DocumentScope(Node):
    """Fragments of a document (``document:``, by path, file name, title or id) or of a
    section of one (``section:``, by heading)."""

    value: str
    keyword: Literal["document", "section"] = "document"

    def to_query(self) -> str:
        return f"{self.keyword}:{quote(self.value)}"


@dataclass(frozen=True)
class TimeScope(Node):
    """Messages dated in ``[start, end)``; ``text`` is how the user wrote it."""

    start: datetime | None
    end: datetime | None
    text: str
    keyword: Literal["date", "after", "before", "when"] = "date"

    def to_query(self) -> str:
        if self.text.endswith(".."):  # open at its end: quoted, or a word after it would end it
            return f"{self.keyword}:{double_quoted(self.text)}"
        return f"{self.keyword}:{quote(self.text)}"


@dataclass(frozen=True)
class DuringScope(Node):
    """The part of a conversation about a topic: matches and the turns around them."""

    topic: str

    def to_query(self) -> str:
        return f"during:{quote(self.topic)}"


@dataclass(frozen=True)
class MetaFilter(Node):
    """A relational filter on message metadata: ``meta.key OP value``."""

    key: str
    op: Comparator
    value: str

    def to_query(self) -> str:
        return f"meta.{self.key} {self.op} {quote(self.value)}"


Scope = (
    PeopleScope
    | ConversationScope
    | TagScope
    | SourceScope
    | DocumentScope
    | TimeScope
    | DuringScope
    | MetaFilter
)
SCOPES = (
    PeopleScope,
    ConversationScope,
    TagScope,
    SourceScope,
    DocumentScope,
    TimeScope,
    DuringScope,
    MetaFilter,
)
Pattern = EntityPattern | ActionPattern | TopicPattern
PATTERNS = (EntityPattern, ActionPattern, TopicPattern)


@dataclass(frozen=True)
class Boost(Node):
    """``item^factor``. A boosted scope is soft: inside a group it does not restrict the
    group, it multiplies the text score of the messages it holds by ``factor``
    (``speaker:Kevin^1.5`` prefers Kevin's messages). A boosted pattern or sub-group is a
    signal of its own in its group: a pattern (or a sub-group without words) weighed
    ``factor`` times a pattern, a sub-group with words (``(knee bakery)^3``) ``factor``
    times the group's words. (A boosted word is a weighted :class:`Term`.)"""

    item: Node
    factor: float
    #: Where it was written, when parsed: the query and the position of the boosted item
    #: in it, for an error's caret (not part of the node's value).
    source: tuple[str, int] | None = field(default=None, compare=False, repr=False)

    def to_query(self) -> str:
        # ^1 is written out: a boosted pattern is a signal of its own, whatever its factor.
        return _wrap(self.item, Boost) + (weight_text(self.factor) or "^1")


# -- boolean ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class And(Node):
    items: tuple[Node, ...]

    def to_query(self) -> str:
        return " AND ".join(_wrap(i, And) for i in self.items)


@dataclass(frozen=True)
class Or(Node):
    """Any of the items; messages matching more of them rank higher."""

    items: tuple[Node, ...]
    explicit: bool = False

    def to_query(self) -> str:
        joiner = " OR " if self.explicit else " "
        return joiner.join(_wrap(i, Or) for i in self.items)


@dataclass(frozen=True)
class Not(Node):
    item: Node

    def to_query(self) -> str:
        return "NOT " + _wrap(self.item, Not)


def _wrap(node: Node, parent: type) -> str:
    """Bracket nested groups (and what a boost applies to), so the text parses back to
    the same tree."""
    text = node.to_query()
    if isinstance(node, And | Or) or (parent is Boost and isinstance(node, Not | Boost)):
        return f"({text})"
    return text


def prefers_alone(items: tuple[Node, ...]) -> tuple[str, str]:
    """The message and hint of a group in which boosted scopes only prefer, with nothing
    beside them to prefer (``knee AND speaker:Marco^2``)."""
    alone = " ".join(i.to_query() for i in items)
    return (
        f"{alone} only prefers, and nothing beside it in its group is there to prefer "
        "(AND, OR and NOT make groups of their operands)",
        "put it beside words or a pattern in one group (knee speaker:Marco^2, not knee AND "
        "speaker:Marco^2), or drop the ^ to restrict",
    )


def has_words(node: Node) -> bool:
    """Whether a node has words that score (not under NOT): a boosted bracketed group
    with words weighs as words do."""
    if isinstance(node, Term):
        return True
    if isinstance(node, And | Or):
        return any(has_words(item) for item in node.items)
    if isinstance(node, Boost):
        return has_words(node.item)
    return False


def restricts(node: Node) -> bool:
    """Whether a node only restricts (scopes, negations and boolean combinations of them):
    in a group it filters instead of scoring."""
    if isinstance(node, (*SCOPES, Not)):
        return True
    if isinstance(node, And | Or):
        return all(restricts(item) for item in node.items)
    return False


def walk(node: Node) -> list[Node]:
    """Every node of a tree, depth first."""
    out = [node]
    if isinstance(node, And | Or):
        for item in node.items:
            out.extend(walk(item))
    elif isinstance(node, Not | Boost):
        out.extend(walk(node.item))
    return out


def dump(node: Node, indent: int = 0) -> str:
    """The AST as an indented tree, for ``--explain``."""
    pad = "  " * indent
    if isinstance(node, And | Or):
        kind = "Or" if isinstance(node, Or) and node.explicit else type(node).__name__
        if isinstance(node, Or) and not node.explicit:
            kind = "AnyOf"
        return "\n".join([pad + kind, *(dump(item, indent + 1) for item in node.items)])
    if isinstance(node, Not):
        return "\n".join([pad + "Not", dump(node.item, indent + 1)])
    if isinstance(node, Boost):
        return "\n".join([f"{pad}Boost x{node.factor:g}", dump(node.item, indent + 1)])
    fields = ", ".join(
        f"{k}={v!r}"
        for k, v in vars(node).items()
        if (v not in (None, (), "", False) or (k == "negated" and v is False))
        and not (k == "weight" and v == 1)
    )
    return f"{pad}{type(node).__name__}({fields})"
