"""Query compilation: typed AST -> plan of operator nodes.

The AST's boolean structure becomes the plan's: ``AND`` is :class:`AllOf`, ``OR`` is
:class:`AnyOf`, ``NOT`` is :class:`NoneOf`. A juxtaposed group (``a b entity:X
speaker:Kevin``) is a *ranked group* (:class:`Fuse`): its words are scored together
(BM25 over message text windows, and the knowledge they name), its patterns and
sub-expressions add their own signal, its scopes restrict it, and its boosted scopes
prefer. A question is compiled the same way: ``ask`` translates it into such a group
(:mod:`structrag.query.question`), so the query it prints runs with the same plan in
``structrag query``.

Compiling needs a little of the index (aliases, lemmas, the people a name refers to,
related terms): :class:`CompileContext`, which the engine implements for a conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from structrag.analysis import cjk_words, stems, term_key
from structrag.errors import QueryError, QueryPlanError
from structrag.models import ROLE_FACET_NAMES
from structrag.query import ast
from structrag.query.nodes import (
    AllOf,
    AnyOf,
    During,
    Filter,
    Fuse,
    KnowledgeMatch,
    NoneOf,
    PatternMatch,
    Phrase,
    PlanNode,
    Prefer,
    RelativeTime,
    TextMatch,
    TopicMatch,
    VectorMatch,
)
from structrag.query.settings import RankingSettings
from structrag.store.protocols import MessageFilter, PropertyCondition


class CompileContext(Protocol):
    """What compiling needs to know about the index, for one conversation (or all)."""

    def name_keys(self, name: str) -> tuple[str, ...]:
        """Normalised keys a name matches: its own and its aliases ("Mel" ~ Melanie)."""
        ...

    def verb_lemma(self, verb: str) -> str: ...

    def people_named(self, name: str) -> list[str]:
        """The speakers a name refers to (first names and short forms included)."""
        ...

    def related_terms(self, stem: str) -> list[tuple[str, float]]:
        """Terms related to a stem, with weights: aliases, derived forms, fuzzy neighbours."""
        ...

    def corrections(self, stem: str) -> list[tuple[str, float]]:
        """For a fuzzy term (``lerning~``) whose stem no message in scope has, the index
        terms one edit away, with their weights."""
        ...

    def kinds(self, key: str) -> list[tuple[str, float]]:
        """Words for the kinds of a category (``kind:sport``: tennis, surfing ...) that
        occur in the history, as index terms with their weights."""
        ...

    def is_category(self, key: str) -> bool:
        """Whether the lexicon knows ``key`` as a category."""
        ...


class Compiler:
    """AST -> plan, for one conversation (or the whole index)."""

    def __init__(self, context: CompileContext, settings: RankingSettings) -> None:
        self.context = context
        self.settings = settings
        #: Inside AND and NOT, words hold the messages that say them (not their windows).
        self.own = False

    def compile(self, node: ast.Node) -> PlanNode:
        if isinstance(node, ast.Or):
            if node.explicit:
                return AnyOf([self.compile(i) for i in node.items])
            return self.group(node.items)
        if isinstance(node, ast.And):
            return AllOf([self.exact(i) for i in node.items])
        if isinstance(node, ast.Not):
            return NoneOf(self.exact(node.item))
        if isinstance(node, ast.Term | ast.Boost):
            return self.group((node,))
        if isinstance(node, ast.PATTERNS):
            return self.pattern(node)
        if isinstance(node, ast.SCOPES):
            return self.scope(node)
        raise TypeError(f"cannot compile {type(node).__name__}")  # pragma: no cover

    def exact(self, node: ast.Node) -> PlanNode:
        """``node`` as an operand of AND or NOT (see :attr:`own`)."""
        outer, self.own = self.own, True
        try:
            return self.compile(node)
        finally:
            self.own = outer

    # -- ranked groups ----------------------------------------------------------------

    def group(self, items: Sequence[ast.Node]) -> PlanNode:
        """A juxtaposed group: see the module docstring."""
        terms: list[ast.Term] = []
        signals: list[PlanNode] = []  # patterns and sub-expressions
        boosted: list[tuple[PlanNode, float, bool]] = []
        filters: list[PlanNode] = []
        prefers: list[tuple[PlanNode, float]] = []
        soft: list[ast.Boost] = []  # the boosted scopes, as written
        for item in items:
            if isinstance(item, ast.Term):
                terms.append(item)
            elif isinstance(item, ast.Boost):
                inner = item.item
                if isinstance(inner, ast.Term):
                    terms.append(replace(inner, weight=inner.weight * item.factor))
                elif ast.restricts(inner):
                    prefers.append((self.compile(inner), item.factor))
                    soft.append(item)
                else:
                    worded = not isinstance(inner, ast.PATTERNS) and ast.has_words(inner)
                    boosted.append((self.compile(inner), item.factor, worded))
            elif ast.restricts(item):
                filters.append(self.compile(item))
            else:
                signals.append(self.compile(item))
        s = self.settings
        # A quoted phrase prefers the messages that have its words together; under AND
        # and NOT it holds only them ("NOT \"New York\"" is not "NOT new").
        for term in terms:
            together = tuple(stems(term.text)) if term.together else ()
            if len(together) > 1:
                phrase = Phrase(term.text, together)
                if self.own:
                    filters.append(phrase)
                else:
                    prefers.append((phrase, s.phrase_boost))
        # A Chinese or Japanese word stands for its characters and bigrams: they count
        # together (TextMatch ``whole``), and a word of three characters or more is also
        # a phrase, as if in double quotes (two make one bigram, which has them in order).
        whole = _whole_words(terms)
        for term in terms:
            for group in cjk_words(term.text) if not term.together else ():
                if len(group) > 3:
                    phrase = Phrase("".join(group[0::2]), group)
                    if self.own:
                        filters.append(phrase)
                    else:
                        prefers.append((phrase, s.phrase_boost))
        bag = self.term_weights(terms)
        fused: list[tuple[str, float, PlanNode]] = []
        if bag:
            fused.append(("text", s.text_weight, TextMatch(bag, own=self.own, whole=whole)))
            if s.knowledge_weight:
                fused.append(("knowledge", s.knowledge_weight, KnowledgeMatch(bag, whole=whole)))
        if signals:
            fused.append(("patterns", s.pattern_weight, _any(signals)))
        # A boosted pattern is a signal of its own, weighed ``factor`` times a pattern; a
        # boosted bracketed group with words (``(knee bakery)^3``), ``factor`` times the
        # words (as ``knee^3 bakery^3`` would be, but scored as a group of its own).
        for node, factor, worded in boosted:
            if worded:
                fused.append((f"group^{factor:g}", s.text_weight * factor, node))
            else:
                fused.append((f"patterns^{factor:g}", s.pattern_weight * factor, node))
        if bag and s.vector_weight:
            words = " ".join(t.text for t in terms)
            fused.append(("vector", s.vector_weight, VectorMatch(words)))
        if not fused:
            if prefers and not filters:
                message, hint = ast.prefers_alone(tuple(items))
                written = next((b.source for b in soft if b.source is not None), None)
                if written is not None:  # parsed: at the boosted scope, with a caret
                    raise QueryPlanError(*written, message, hint=hint)
                raise QueryError(message, hint=hint)
            return _all(filters)
        if prefers:
            # Preferences scale the first signal: the words when there are any.
            name, weight, node = fused[0]
            for scope, factor in prefers:
                node = Prefer(node, scope, factor)
            fused[0] = (name, weight, node)
        if len(fused) == 1 and fused[0][0].startswith(("patterns", "group")) and not filters:
            return fused[0][2]
        return Fuse(fused, filters)

    def term_weights(self, terms: Sequence[ast.Term]) -> dict[str, float]:
        """Stems of the terms with their weights, plus related terms (aliases, derived
        forms, fuzzy neighbours), the kinds of ``kind:`` terms and the corrections of
        fuzzy terms, at their own weights."""
        weights: dict[str, float] = {}
        added: list[tuple[str, float]] = []
        for term in terms:
            found = stems(term.text)
            for stem in found:
                weights[stem] = weights.get(stem, 0.0) + term.weight
            if term.kinds and found:
                kinds = self._kinds(found, term.weight)
                if not kinds and term.fuzzy:  # "restarants": the kinds of "restaurants"
                    for correction, _ in self.context.corrections(found[-1]):
                        kinds = self._kinds([*found[:-1], correction], term.weight)
                        if kinds:
                            break
                added.extend(kinds)
            if term.fuzzy:
                for stem in found:
                    added.extend(
                        (c, w * min(term.weight, 1.0)) for c, w in self.context.corrections(stem)
                    )
        for stem, weight in list(weights.items()):
            for related, related_weight in self.context.related_terms(stem):
                for part in related.split():
                    if part not in weights:
                        weights[part] = related_weight * min(weight, 1.0)
        for term_added, weight in added:
            weights[term_added] = max(weights.get(term_added, 0.0), weight)
        return weights

    def _kinds(self, found: Sequence[str], weight: float) -> list[tuple[str, float]]:
        """The kinds of a category term's stems: of the whole phrase when the lexicon has
        it ("martial arts"), else of its last word, the head ("European countries")."""
        phrase = " ".join(found)
        for key in (phrase, found[-1]):
            members = self.context.kinds(key)
            if members:
                return [(m, w * min(weight, 1.0)) for m, w in members]
            if key == phrase and len(found) > 1 and self.context.is_category(phrase):
                return []  # "martial arts" is a category: not the kinds of "art"
        return []

    # -- patterns -----------------------------------------------------------------------

    def pattern(self, node: ast.Pattern) -> PlanNode:
        if isinstance(node, ast.TopicPattern):
            return TopicMatch(node.text)
        if isinstance(node, ast.EntityPattern):
            return self.entity(node)
        return self.action(node)

    def entity(self, node: ast.EntityPattern) -> PlanNode:
        conditions: list[PropertyCondition] = []
        if node.name is not None:
            conditions.append(
                PropertyCondition("name", self.context.name_keys(node.name), whole_words=True)
            )
        for t in node.types:
            conditions.append(PropertyCondition("type", (term_key(t),)))
        for facet in node.facets:
            names: tuple[str, ...] = (facet.name,)
            if term_key(facet.name) == term_key(ROLE_FACET_NAMES[0]):
                # a job by any of the names importers and extractors give it (TypeAgent's
                # LLM writes "position")
                names = (*ROLE_FACET_NAMES, "position")
            keys = tuple(dict.fromkeys(term_key(n) for n in names))
            conditions.append(PropertyCondition("facet.name", keys))
            if facet.value is not None:
                conditions.append(
                    PropertyCondition("facet.value", (term_key(facet.value),), whole_words=True)
                )
        if not conditions:  # the parser says so first, at its position
            raise QueryError(
                f"{node.to_query()} matches every entity",
                hint="give it a name, a type=... or a facet.NAME=...",
            )
        note = None
        if len(set(node.types)) > 1:  # every type must hold: say so when none has them all
            either = " OR ".join(f"type:{ast.quote(t)}" for t in node.types)
            note = (
                f"{node.to_query()}: no entity is of every type it lists; for any of them, "
                f"write ({either})"
            )
        return PatternMatch(node.to_query(), conditions, empty_note=note)

    def action(self, node: ast.ActionPattern) -> PlanNode:
        conditions: list[PropertyCondition] = []
        nested: list[tuple[str, PlanNode]] = []
        roles = (
            ("subject", node.subject),
            ("object", node.object),
            ("indirectObject", node.indirect_object),
        )
        for role, value in roles:
            if isinstance(value, str):
                conditions.append(
                    PropertyCondition(role, self.context.name_keys(value), whole_words=True)
                )
            elif isinstance(value, ast.EntityPattern):
                nested.append((role, self.entity(value)))
        if node.verb is not None:
            conditions.append(PropertyCondition("verb", self.verb_keys(node.verb)))
        if not conditions and not nested:  # the parser says so first, at its position
            raise QueryError(
                f"{node.to_query()} matches every action",
                hint="give it a subject, a verb or an object",
            )
        return PatternMatch(node.to_query(), conditions, nested, negated=node.negated)

    def verb_keys(self, verb: str) -> tuple[str, ...]:
        base = self.context.verb_lemma(verb)
        synonyms = self.settings.verb_synonyms.get(base, ())
        return tuple(sorted({term_key(v) for v in (verb, base, *synonyms)}))

    # -- scopes -------------------------------------------------------------------------

    def scope(self, node: ast.Scope) -> PlanNode:
        described = node.to_query()
        if isinstance(node, ast.PeopleScope):
            names = tuple(self.context.people_named(node.name))
            if node.role == "speaker":
                return Filter(described, MessageFilter(speakers=names))
            return Filter(described, MessageFilter(recipients=names))
        if isinstance(node, ast.ConversationScope):
            return Filter(described, MessageFilter(conversation=node.conversation))
        if isinstance(node, ast.TagScope):
            return Filter(described, MessageFilter(tags=(node.tag,)))
        if isinstance(node, ast.SourceScope):
            if node.source == "knowledge":
                return Filter(described, MessageFilter(tables=("knowledge",)))
            return Filter(described, MessageFilter(not_tables=("knowledge",)))
        if isinstance(node, ast.DocumentScope):
            if node.keyword == "section":
                return Filter(described, MessageFilter(sections=(node.value,)))
            return Filter(described, MessageFilter(documents=(node.value,)))
        if isinstance(node, ast.TimeScope):
            if node.keyword == "when":
                return RelativeTime(node.text, node.keyword)
            return Filter(described, MessageFilter(start=node.start, end=node.end))
        if isinstance(node, ast.DuringScope):
            # the messages that say it themselves (not their text windows'): the radius
            # counts from them
            term = ast.Term(node.topic, phrase=" " in node.topic)
            about = self.exact(ast.Or((term,)))
            return During(AnyOf([about, TopicMatch(node.topic)]), self.settings.during_radius)
        return Filter(described, MessageFilter(meta=((node.key, node.op, node.value),)))


def _any(nodes: list[PlanNode]) -> PlanNode:
    return nodes[0] if len(nodes) == 1 else AnyOf(nodes)


def _all(nodes: list[PlanNode]) -> PlanNode:
    if not nodes:
        return AnyOf([])  # a group with nothing in it (only stopwords) matches nothing
    return nodes[0] if len(nodes) == 1 else AllOf(nodes)


def compile_query(node: ast.Node, context: CompileContext, settings: RankingSettings) -> PlanNode:
    """The plan of a query expression."""
    return Compiler(context, settings).compile(node)


def _whole_words(terms: Sequence[ast.Term]) -> tuple[tuple[str, ...], ...]:
    """The stem groups of the terms' Chinese and Japanese words (see
    :class:`~structrag.query.nodes.TextMatch`), with a group of one for each of their
    stems that a term also has outside such a word (``猫 我的猫``: 猫 alone)."""
    groups: list[tuple[str, ...]] = []
    loose: set[str] = set()
    for term in terms:
        runs = cjk_words(term.text)
        if not runs:
            continue
        groups.extend(runs)
        rest = list(stems(term.text))
        for group in runs:
            for stem in group:
                rest.remove(stem)
        loose.update(rest)
    if not groups:
        return ()
    grouped = {stem for group in groups for stem in group}
    for term in terms:
        if not cjk_words(term.text):
            loose.update(stems(term.text))
    singles = [(stem,) for stem in sorted(loose & grouped)]
    return tuple(dict.fromkeys([*groups, *singles]))
