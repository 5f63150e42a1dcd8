"""Statements about people, and when a newer statement supersedes an older one.

A chat agent's long-term memory keeps what people said about themselves and each other
("I live in Lisbon", "my sister Ana", "please keep it short") as :class:`Statement` records:
who it is about, a normalised relation from :data:`PREDICATES`, the value as written, and
the character span of the message that says it. Memory has to know which statements still
hold: "I moved to Lisbon" replaces "I live in Porto", "I don't like sushi anymore" replaces
"I like sushi", while "I like tea" leaves "I like coffee" alone. :func:`supersedes` is that
rule, a pure function of two statements, and :func:`current_statements` applies it to a
history.

This module is core: it knows no parser. :mod:`structrag.memory.statement_rules` finds
statements in messages with spaCy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, get_args

from structrag.analysis import wordset
from structrag.errors import StructragError
from structrag.models import Tense

Category = Literal["fact", "relationship", "preference", "personal", "style", "goal"]
#: What a statement is about. ``fact``: where a person lives, works and studies, and what
#: their job is; ``personal``: who the person is (age, origin, pets, the name they go by);
#: ``relationship``: the people in their life; ``preference``: what they like and dislike;
#: ``goal``: what they want or plan to do; ``style``: how they want to be answered.
CATEGORIES: tuple[Category, ...] = get_args(Category)
TENSES: tuple[Tense, ...] = get_args(Tense)


class StatementError(StructragError, ValueError):
    """A statement that breaks its own rules: an unknown predicate, a category that is
    not the predicate's, a span that ends before it starts, a confidence outside 0..1."""


@dataclass(frozen=True)
class Predicate:
    """One normalised relation and the rules memory applies to it.

    ``pattern`` renders a statement as a short sentence: ``{s}`` is the subject, ``{o}``
    the object, ``{d}`` the detail (what the text calls the relation, "sister"), ``{a}``
    the article for the object and ``{ao}`` the object with an article when it lacks one;
    ``<verb>`` is conjugated for the tense and negation. ``named`` is used when the
    statement has a detail ("Ana is Priya's sister", "Priya has a dog named Max") and
    ``plain`` when the object only names a kind ("Priya has a sister").
    """

    name: str
    category: Category
    #: A newer value replaces the older (a person lives in one place at a time).
    single: bool
    pattern: str
    description: str
    #: Predicates a statement of this one also states: "moved to Lisbon" => lives in Lisbon.
    implies: tuple[str, ...] = ()
    #: The predicate that says the opposite of the same object (likes / dislikes).
    opposite: str | None = None
    #: Tenses in which a statement says what holds now. "I lived in Porto" says nothing
    #: about today; "I moved to Lisbon" (past) does: the move's result holds.
    current: frozenset[Tense] = frozenset(("present",))
    named: str | None = None
    plain: str | None = None
    #: The detail a rendering uses when the statement has none.
    noun: str | None = None


_SINCE: frozenset[Tense] = frozenset(("present", "past"))
_AHEAD: frozenset[Tense] = frozenset(("present", "future"))


def _relation(name: str, noun: str, description: str, *, single: bool = False) -> Predicate:
    return Predicate(
        name,
        "relationship",
        single,
        "{o} <be> {s}'s {d}",
        description,
        plain="{s} <have> {ao}",
        noun=noun,
    )


def _style(name: str, single: bool, pattern: str, description: str) -> Predicate:
    return Predicate(name, "style", single, pattern, description)


_TABLE: tuple[Predicate, ...] = (
    # -- facts ---------------------------------------------------------------------------
    Predicate("lives_in", "fact", True, "{s} <live> in {o}", "where the person lives"),
    Predicate(
        "moved_to",
        "fact",
        True,
        "{s} <move> to {o}",
        "where the person moved (so lives now)",
        implies=("lives_in",),
        current=_SINCE,
    ),
    Predicate("works_at", "fact", True, "{s} <work> at {o}", "the employer or workplace"),
    Predicate("job", "fact", True, "{s} <be> {a} {o}", "what the person does for a living"),
    Predicate("studies", "fact", False, "{s} <study> {o}", "a subject the person studies"),
    Predicate("studies_at", "fact", True, "{s} <study> at {o}", "the person's school"),
    # -- personal --------------------------------------------------------------------------
    Predicate("age", "personal", True, "{s}'s age <be> {o}", "how old the person is"),
    Predicate("from", "personal", False, "{s} <be> from {o}", "where the person comes from"),
    Predicate(
        "grew_up_in",
        "personal",
        False,
        "{s} <grow> up in {o}",
        "where the person grew up",
        current=_SINCE,
    ),
    Predicate(
        "has_pet",
        "personal",
        False,
        "{s} <have> {ao}",
        "a pet: its name, or its kind when unnamed",
        named="{s} <have> {ad} {d} named {o}",
        plain="{s} <have> {ao}",
        noun="pet",
    ),
    Predicate("goes_by", "personal", True, "{s} <go> by {o}", "the name the person uses"),
    Predicate(
        "allergic_to",
        "personal",
        False,
        "{s} <be> allergic to {o}",
        "what the person is allergic to",
    ),
    # -- relationships (the object is the other person) ------------------------------------
    _relation("sibling", "sibling", "a sister or brother"),
    _relation("partner", "partner", "a partner, girlfriend, boyfriend, fiance", single=True),
    Predicate(
        "married_to",
        "relationship",
        True,
        "{s} <be> married to {o}",
        "a wife or husband",
        implies=("partner",),
        current=_SINCE,
        named="{o} <be> {s}'s {d}",
        plain="{s} <have> {ao}",
        noun="spouse",
    ),
    _relation("parent", "parent", "a mother or father"),
    _relation("child", "child", "a son, daughter or kid"),
    _relation("relative", "relative", "a cousin, aunt, uncle, grandparent..."),
    _relation("friend", "friend", "a friend"),
    _relation("colleague", "colleague", "a colleague or coworker"),
    _relation("boss", "boss", "the person's boss or manager", single=True),
    _relation("neighbor", "neighbor", "a neighbour"),
    _relation("roommate", "roommate", "a roommate or flatmate"),
    # -- preferences -----------------------------------------------------------------------
    Predicate(
        "likes",
        "preference",
        False,
        "{s} <like> {o}",
        "something the person likes, loves or enjoys",
        opposite="dislikes",
        named="{s}'s favorite {d} <be> {o}",
    ),
    Predicate(
        "dislikes",
        "preference",
        False,
        "{s} <dislike> {o}",
        "something the person dislikes or hates",
        opposite="likes",
    ),
    Predicate("prefers", "preference", False, "{s} <prefer> {o}", "what the person prefers"),
    # -- goals (the object is what the person would do) ------------------------------------
    Predicate("wants_to", "goal", False, "{s} <want> to {o}", "what they want", current=_AHEAD),
    Predicate("plans_to", "goal", False, "{s} <plan> to {o}", "what they plan", current=_AHEAD),
    Predicate(
        "goal",
        "goal",
        False,
        "{s}'s goal <be> to {o}",
        "a goal, dream or aim the person names",
        current=_AHEAD,
        named="{s}'s {d} <be> to {o}",
    ),
    # -- style: how the person wants to be answered ----------------------------------------
    _style("answer_length", True, "{s} <want> {o} answers", "short, concise, detailed..."),
    _style("emojis", True, "{s} <want> {o}", "whether answers may use emojis"),
    _style("tone", True, "{s} <want> {a} {o} tone", "formal, casual, friendly..."),
    _style("answer_language", True, "{s} <want> answers in {o}", "the language to answer in"),
    _style("speaks_style", False, "{s} <want> {o}", "other forms: bullet points, examples"),
)

#: Every predicate by name.
PREDICATES: Mapping[str, Predicate] = MappingProxyType({p.name: p for p in _TABLE})


def _check_table() -> None:
    for p in _TABLE:
        missing = [q for q in (*p.implies, p.opposite) if q is not None and q not in PREDICATES]
        if missing:  # pragma: no cover - a mistake in the table above
            raise StatementError(f"predicate {p.name} names unknown predicates {missing}")


_check_table()


def implied(predicate: str) -> frozenset[str]:
    """The predicates a statement of ``predicate`` states: itself and what it implies,
    transitively."""
    found = {predicate}
    todo = [predicate]
    while todo:
        for q in PREDICATES[todo.pop()].implies:
            if q not in found:
                found.add(q)
                todo.append(q)
    return frozenset(found)


@dataclass(frozen=True)
class Statement:
    """One thing a message says about a person, with where it says it.

    ``message.text[start:end]`` is the part of the message that states it and contains
    ``object`` as written. Make one with :meth:`make`, which fills ``category`` and
    ``text`` from the predicate.
    """

    category: Category
    #: Who it is about: the speaker's name for I/me/my, the recipient's for "you", else
    #: the name as written ("Marco", "Priya's sister").
    subject: str
    predicate: str
    #: The value as written in the message: "Lisbon", "Ana", "run a marathon".
    object: str
    #: A short canonical sentence: "Priya lives in Lisbon".
    text: str
    start: int
    end: int
    negated: bool = False
    tense: Tense = "present"
    #: How often the pattern that found it is right, 0..1.
    confidence: float = 0.8
    #: What the text calls the relation or the kind of the object: "sister" (sibling),
    #: "dog" (has_pet), "food" ("my favorite food is pizza"), "dream" (goal).
    detail: str | None = field(default=None)

    def __post_init__(self) -> None:
        spec = PREDICATES.get(self.predicate)
        if spec is None:
            raise StatementError(
                f"unknown predicate {self.predicate!r}; known: {', '.join(sorted(PREDICATES))}"
            )
        if self.category != spec.category:
            raise StatementError(
                f"predicate {self.predicate} is a {spec.category}, not a {self.category}"
            )
        if self.tense not in TENSES:
            raise StatementError(f"tense {self.tense!r} is not one of {', '.join(TENSES)}")
        if not 0 <= self.start <= self.end:
            raise StatementError(f"span [{self.start}, {self.end}) is not a span")
        if not 0.0 <= self.confidence <= 1.0:
            raise StatementError(f"confidence {self.confidence} is outside 0..1")
        if not self.subject.strip() or not self.object.strip():
            raise StatementError("a statement needs a subject and an object")

    @classmethod
    def make(
        cls,
        subject: str,
        predicate: str,
        object: str,
        *,
        start: int,
        end: int,
        negated: bool = False,
        tense: Tense = "present",
        confidence: float = 0.8,
        detail: str | None = None,
    ) -> Statement:
        """A statement with its category and text filled from :data:`PREDICATES`."""
        spec = PREDICATES.get(predicate)
        if spec is None:
            raise StatementError(f"unknown predicate {predicate!r}")
        return cls(
            category=spec.category,
            subject=subject,
            predicate=predicate,
            object=object,
            text=describe(subject, predicate, object, negated=negated, tense=tense, detail=detail),
            start=start,
            end=end,
            negated=negated,
            tense=tense,
            confidence=confidence,
            detail=detail,
        )

    @property
    def current(self) -> bool:
        """Whether it says what holds now (by its tense), so it can supersede or be
        superseded: "I lived in Porto" is history, "I moved to Lisbon" holds now."""
        return self.tense in PREDICATES[self.predicate].current

    @property
    def specific(self) -> bool:
        """Whether the object is a value, not just the kind of thing the detail names:
        "Max" (a dog named Max) and "Lisbon" are; "a dog" and "two kids" are not."""
        return specific(self.object, self.detail)


# -- rendering ---------------------------------------------------------------------------

# Third person singular and past of the verbs the patterns use.
_FORMS = {
    "be": ("is", "was"),
    "have": ("has", "had"),
    "go": ("goes", "went"),
    "grow": ("grows", "grew"),
    "study": ("studies", "studied"),
    "prefer": ("prefers", "preferred"),
    "plan": ("plans", "planned"),
    "live": ("lives", "lived"),
    "move": ("moves", "moved"),
    "work": ("works", "worked"),
    "like": ("likes", "liked"),
    "dislike": ("dislikes", "disliked"),
    "want": ("wants", "wanted"),
}
_VERB_SLOT = re.compile(r"<(\w+)>")
_DETERMINERS = wordset("a an the my your his her its our their this that these those some any")
_QUANTITIES = wordset("two three four five six seven eight nine ten many several few lots lot")


def _conjugate(verb: str, tense: Tense, negated: bool) -> str:
    third, past = _FORMS[verb]
    if tense == "future":
        return f"will not {verb}" if negated else f"will {verb}"
    form = past if tense == "past" else third
    if not negated:
        return form
    if verb == "be":
        return f"{form} not"
    return f"{'did' if tense == 'past' else 'does'} not {verb}"


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"


def _with_article(phrase: str) -> str:
    first = phrase.split(maxsplit=1)[0].lower() if phrase.strip() else ""
    if first in _DETERMINERS or first in _QUANTITIES or first[:1].isdigit():
        return phrase
    if phrase.endswith("s") and not phrase.endswith("ss"):  # a plural: "kids", "cats"
        return phrase
    return f"{_article(phrase)} {phrase}"


def describe(
    subject: str,
    predicate: str,
    object: str,
    *,
    negated: bool = False,
    tense: Tense = "present",
    detail: str | None = None,
) -> str:
    """A short sentence for a statement: "Priya lives in Lisbon", "Ana is Priya's sister",
    "Priya does not like sushi". Goals are told as present intentions ("Priya wants to
    run a marathon"), whatever the tense of the thing wanted."""
    spec = PREDICATES[predicate]
    if spec.plain is not None and not specific(object, detail):
        pattern = spec.plain
    elif detail and spec.named is not None:
        pattern = spec.named
    else:
        pattern = spec.pattern
    if spec.category == "goal" and tense == "future":
        tense = "present"
    first = object.split(maxsplit=1)[0] if object.strip() else ""
    if spec.category == "goal" and first.endswith("ing"):
        pattern = pattern.replace("to {o}", "{o}")  # "Priya's goal is running a marathon"
    d = detail or spec.noun or ""
    # Verbs first, in the pattern alone: the names and things filled in after it may hold
    # anything, "<b>" or "<3" included, and are never read as verb slots.
    pattern = _VERB_SLOT.sub(lambda m: _conjugate(m.group(1), tense, negated), pattern)
    return pattern.format(
        s=subject, o=object, d=d, a=_article(object), ao=_with_article(object), ad=_article(d)
    )


# -- comparing ---------------------------------------------------------------------------

_SPACE = re.compile(r"\s+")
_EDGE_PUNCT = " \t\n.,;:!?\"'()[]"


def normalize(value: str) -> str:
    """A value as memory compares it: case-folded, white space collapsed, without edge
    punctuation or a leading determiner ("the harbour" = "Harbour")."""
    words = _SPACE.sub(" ", value.casefold()).strip(_EDGE_PUNCT).split(" ")
    while len(words) > 1 and words[0] in _DETERMINERS:
        words = words[1:]
    return " ".join(words)


def specific(object: str, detail: str | None) -> bool:
    """Whether ``object`` is a value rather than the kind ``detail`` names ("a dog" with
    detail "dog", "two kids" with detail "kids" are kinds; "Max" is a value)."""
    if not detail:
        return True
    obj, kind = normalize(object), normalize(detail)
    return not (obj == kind or obj.endswith(" " + kind))


def _owner_and_rest(name: str) -> tuple[str, str]:
    """ "Priya's sister" -> ("priya", "sister"); "Priya Shah" -> ("priya shah", "")."""
    low = _SPACE.sub(" ", name.casefold().replace("\u2019", "'")).strip()
    owner, sep, rest = low.partition("'s ")
    return (owner, rest) if sep else (low, "")


def same_subject(a: str, b: str) -> bool:
    """Whether two subjects name the same person by simple rules: case and spacing do not
    count, and a first name matches a full name that starts with it ("Priya" = "Priya
    Shah", not "Priya Shah" = "Priya Rao"). "Priya's sister" matches "priya shah's
    sister". A caller that knows more (nicknames, a user profile) passes its own
    function to :func:`supersedes`."""
    owner_a, rest_a = _owner_and_rest(a)
    owner_b, rest_b = _owner_and_rest(b)
    if rest_a != rest_b or not owner_a or not owner_b:
        return False
    words_a, words_b = owner_a.split(), owner_b.split()
    short, long = sorted((words_a, words_b), key=len)
    return long[: len(short)] == short


SamePerson = Callable[[str, str], bool]


def supersedes(new: Statement, old: Statement, *, same_person: SamePerson = same_subject) -> bool:
    """Whether ``new`` (said later) replaces ``old``, so that ``old`` no longer holds.

    Both must say what holds now (:attr:`Statement.current`) about the same person. Then
    ``new`` supersedes ``old`` when

    * both state a single-valued predicate (directly or by implication: "moved to Lisbon"
      states "lives in Lisbon") with different specific objects, neither negated: "I live
      in Lisbon" replaces "I live in Porto";
    * they state the same object with opposite polarity, the negated one's predicate
      being one the other states: "I don't live in Porto anymore" replaces "I moved to
      Porto", and "I like sushi again" replaces "I don't like sushi" (but "I didn't move
      to Porto" leaves "I live in Porto" alone);
    * they are opposite predicates on the same object, neither negated: "I hate sushi"
      replaces "I like sushi".

    Multi-valued predicates never supersede each other otherwise ("I like tea" leaves
    "I like coffee"), a restatement supersedes nothing, and an object that only names a
    kind ("my husband", "a dog") is no value to conflict with a name. The rule is
    symmetric: which of two conflicting statements wins is the caller's order in time.
    """
    if not (new.current and old.current) or not same_person(new.subject, old.subject):
        return False
    new_states, old_states = implied(new.predicate), implied(old.predicate)
    same_object = normalize(new.object) == normalize(old.object)
    if same_object and new.negated != old.negated:
        negative, positive = (new, old) if new.negated else (old, new)
        return negative.predicate in implied(positive.predicate)
    if new.negated or old.negated:
        return False
    shared = new_states & old_states
    if shared:
        return (
            not same_object
            and new.specific
            and old.specific
            and any(PREDICATES[p].single for p in shared)
        )
    opposite = PREDICATES[new.predicate].opposite
    return same_object and opposite is not None and opposite == old.predicate


def current_statements(
    statements: Sequence[Statement], *, same_person: SamePerson = same_subject
) -> list[Statement]:
    """The statements, oldest first, that no later one supersedes (in their order).

    Quadratic in the number of statements: call it on one person's statements, or on a
    conversation's, not on a whole archive at once.
    """
    kept: list[Statement] = []
    for i, old in enumerate(statements):
        if not any(supersedes(new, old, same_person=same_person) for new in statements[i + 1 :]):
            kept.append(old)
    return kept
