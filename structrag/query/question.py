"""Question compilation: a natural-language question -> the ranked query that answers it.

A translator (offline on spaCy, or an LLM; both implement :class:`Translator`) reads the
question: the people it names, its patterns (``action(Kevin, tell, *, Satya)``,
``entity:Boston``), phrases, time phrases and possessive relations. :func:`question_query`
turns that reading into one ranked group, written in the query language:

* the translation's patterns and phrases;
* every other content word of the question (the people it names and its time phrases
  left out), weighted by how often it occurs;
* the names the entity graph found for a possessive ("Caroline's friend"), at a low
  weight (``melanie^0.3``);
* a soft scope preferring messages by the people named (``speaker:Melanie^1.5``);
* the time phrases as scopes (``when:"last May"``).

That group is an ordinary query: ``structrag query`` runs it with the same plan.
:func:`widen` loosens it when it matches too little (first the verbs of its actions, then
its scopes).
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from typing import Protocol

from structrag.analysis import cjk_words, query_stopwords, stem_words, stems, words
from structrag.query import ast


@dataclass
class Translation:
    """What a translator makes of a question."""

    #: The translator's structured reading: patterns, phrases and scopes.
    query: ast.Node
    #: People the question names, as written.
    people: list[str] = field(default_factory=list)
    #: The question type: who, when, where, what, how many, yes/no, list ...
    kind: str = "other"
    time_phrases: list[str] = field(default_factory=list)
    #: Possessive relations, (owner, noun): "Caroline's friend" -> ("Caroline", "friend").
    relations: list[tuple[str, str]] = field(default_factory=list)
    #: What the translator wants the user to know (fallbacks, dropped names).
    notes: list[str] = field(default_factory=list)
    #: Words of the question that are no known word (typos: "lerning"); their terms are
    #: fuzzy (``lerning~``).
    unknown: list[str] = field(default_factory=list)


class Translator(Protocol):
    """Turns a question into a :class:`Translation`, given the conversation's speakers."""

    def translate(self, question: str, speakers: Sequence[str]) -> Translation: ...


_WH = ("who", "whom", "whose", "what", "when", "where", "why", "how", "which")
_AUXILIARIES = frozenset(
    [
        "is",
        "are",
        "was",
        "were",
        "did",
        "does",
        "do",
        "has",
        "have",
        "would",
        "could",
        "can",
        "will",
        "should",
    ]
)


def question_kind(tokens: Sequence[str]) -> str:
    """The kind of answer a question wants, from its words."""
    lowered = [w.lower() for w in tokens]
    if not lowered:
        return "other"
    first_wh = next((w for w in lowered if w in _WH), None)
    if first_wh == "how":
        i = lowered.index("how")
        nxt = lowered[i + 1] if i + 1 < len(lowered) else ""
        return f"how {nxt}" if nxt in ("many", "much", "often", "long") else "how"
    if first_wh in ("who", "whom", "whose"):
        return "who"
    if first_wh is not None:
        return first_wh
    if lowered[0] in _AUXILIARIES:
        return "yes/no"
    if lowered[0] in ("list", "name"):
        return "list"
    return "other"


def question_query(
    translation: Translation,
    question: str,
    *,
    people: Sequence[str],
    related: Sequence[tuple[str, float]] = (),
    prefer: float = 1.0,
    facet_boost: float = 1.0,
) -> ast.Or:
    """The ranked group that answers ``question`` (see the module docstring).

    ``people`` are the speakers the question's names resolved to; ``related`` are names
    found by the entity graph, with their weights; ``prefer`` multiplies the text score of
    messages by the people named (1: no preference); ``facet_boost`` weighs an entity
    pattern with facets (a question for "Kevin Scott's job") above other patterns."""
    patterns: list[ast.Node] = []
    phrases: list[ast.Term] = []
    scopes: list[ast.Node] = []
    unknown = {w.lower() for w in translation.unknown}
    for node in ast.walk(translation.query):
        if isinstance(node, ast.PATTERNS) and node not in patterns:
            patterns.append(node)
        elif isinstance(node, ast.Term) and node not in phrases:
            if cjk_words(node.text):
                # Chinese or Japanese: the translator cannot tell a word from the whole
                # question written without spaces; its bigrams are content terms below.
                continue
            if unknown & set(node.text.lower().split()):
                node = replace(node, fuzzy=True)
            phrases.append(node)
        elif isinstance(node, ast.SCOPES) and node not in scopes:
            scopes.append(node)
    left_out = {s for person in people for s in stems(person)}
    for scope in scopes:
        if isinstance(scope, ast.TimeScope):
            left_out.update(stems(scope.text))
    items: list[ast.Node] = [
        ast.Boost(p, facet_boost)
        if facet_boost != 1 and isinstance(p, ast.EntityPattern) and p.facets
        else p
        for p in patterns
    ]
    items.extend(phrases)
    items.extend(content_terms(question, left_out, covered=phrases, unknown=unknown))
    seen = {t.text.lower() for t in phrases} | {
        t.text.lower() for t in items if isinstance(t, ast.Term)
    }
    for name, weight in related:
        if name.lower() not in seen:
            seen.add(name.lower())
            items.append(ast.Term(name, phrase=" " in name, weight=round(weight, 3)))
    if prefer != 1:
        named = {key for p in people for key in (p.lower(), p.split()[0].lower())}
        if items and all(
            isinstance(i, ast.EntityPattern)
            and not i.types
            and not i.facets
            and (i.name or "").lower() in named
            for i in items
        ):
            # "What did Sam say?": the people alone are the signal, and a message that
            # names Sam (Priya's "thanks, Sam", naming him twice with its recipient) would
            # outrank Sam's own; what they said is what is asked for
            prefer *= 2
        items.extend(ast.Boost(ast.PeopleScope("speaker", p), prefer) for p in people)
    items.extend(scopes)
    if not items:
        items = [ast.Term(w) for w in question.split()[:8] if any(c.isalnum() for c in w)]
    return ast.Or(tuple(items))


def content_terms(
    question: str,
    left_out: set[str],
    covered: Sequence[ast.Term] = (),
    unknown: AbstractSet[str] = frozenset(),
) -> list[ast.Term]:
    """The question's content words as terms, one per stem, weighted by how often the
    stem occurs; stems in ``left_out`` are skipped, and so are the words of ``covered``
    phrases (which count as they are). Words in ``unknown`` (typos) become fuzzy terms.
    Chinese and Japanese, written without spaces, give their bigrams (a character alone
    between other text gives itself): a message ranks by how many the question shares."""
    found = words(question, query_stopwords(), unigrams=False)
    counts: dict[str, int] = {}
    first: dict[str, str] = {}
    for word, stem in zip(found, stem_words(found), strict=True):
        counts[stem] = counts.get(stem, 0) + 1
        first.setdefault(stem, word)
    done = set(left_out) | {s for term in covered for s in stems(term.text)}
    return [
        ast.Term(first[stem], weight=float(count), fuzzy=first[stem] in unknown)
        for stem, count in counts.items()
        if stem not in done
    ]


def widen(node: ast.Or, step: int) -> ast.Or | None:
    """A looser version of a question's group: step 1 drops the verbs of its actions
    (and actions left with no object), step 2 also drops its scopes, their words joining
    the group. ``None`` when the step changes nothing, or leaves nothing to rank by."""
    items: list[ast.Node] = []
    changed = False
    for item in node.items:
        if isinstance(item, ast.ActionPattern) and item.verb is not None:
            changed = True
            if item.object is None and item.indirect_object is None:
                continue
            item = ast.ActionPattern(item.subject, None, item.object, item.indirect_object)
        if step >= 2 and isinstance(item, ast.SCOPES):
            changed = True
            if isinstance(item, ast.TimeScope):
                known = {t.text.lower() for t in items if isinstance(t, ast.Term)}
                items.extend(
                    ast.Term(w)
                    for w in words(item.text, query_stopwords())
                    if w not in known and (not w.isdigit() or len(w) == 4)  # a year stays
                )
            continue
        items.append(item)
    signals = [i for i in items if not ast.restricts(i.item if isinstance(i, ast.Boost) else i)]
    if all(isinstance(i, ast.Term) and i.text.isdigit() for i in signals):
        signals = []  # a year alone ranks nothing the question asked about
    if not changed or not signals:
        return None  # nothing left to rank by (a boosted speaker alone, say)
    return ast.Or(tuple(items))
