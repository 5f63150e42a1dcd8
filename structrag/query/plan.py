"""The plan: small typed operator nodes with ``eval(context) -> Match``.

A query AST compiles into a tree of these (:func:`compile_query`); ``ask`` compiles a
question's AST into a fusion of signals (:func:`compile_ask`). Every node prints itself,
so ``--explain`` shows the plan that ran. Scores are dense arrays over the messages in
scope (:class:`~structrag.query.scope.ScopeData`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from structrag.analysis import query_stems, stems, term_key
from structrag.errors import QueryError
from structrag.query import ast
from structrag.query.scope import ScopeData, zscore
from structrag.query.settings import RankingSettings
from structrag.query.timeexpr import resolve
from structrag.store.protocols import MessageFilter, PropertyCondition

if TYPE_CHECKING:
    from structrag.query.engine import QueryEngine


@dataclass
class Match:
    """What a node found: scores and membership over the scope, and knowledge hits."""

    scores: np.ndarray
    mask: np.ndarray
    refs: dict[int, float] = field(default_factory=dict)
    scored: bool = True

    @classmethod
    def empty(cls, n: int) -> Match:
        return cls(np.zeros(n), np.zeros(n, dtype=bool))

    @classmethod
    def everything(cls, n: int) -> Match:
        return cls(np.zeros(n), np.ones(n, dtype=bool), scored=False)


@dataclass
class Context:
    """What nodes need while running: the engine (store, text index), the scope, settings."""

    engine: QueryEngine
    scope: ScopeData
    settings: RankingSettings
    notes: list[str] = field(default_factory=list)

    @property
    def n(self) -> int:
        return len(self.scope)

    @property
    def anchor(self) -> datetime | None:
        stamps = self.scope.frame.timestamps
        valid = stamps[~np.isnat(stamps)]
        if not len(valid):
            return None
        return datetime.fromisoformat(str(valid.max()))


class PlanNode:
    """A node of the plan."""

    def eval(self, ctx: Context) -> Match:
        raise NotImplementedError

    def label(self) -> str:
        raise NotImplementedError

    def children(self) -> Sequence[PlanNode]:
        return ()

    def explain(self, indent: int = 0) -> str:
        lines = ["  " * indent + self.label()]
        for child in self.children():
            lines.append(child.explain(indent + 1))
        return "\n".join(lines)


# -- text and knowledge terms ----------------------------------------------------------------


@dataclass
class TextMatch(PlanNode):
    """BM25 of weighted stems over message text windows."""

    terms: dict[str, float]

    def label(self) -> str:
        shown = " ".join(f"{t}^{w:g}" if w != 1 else t for t, w in self.terms.items())
        return f"TextMatch [{shown}]"

    def eval(self, ctx: Context) -> Match:
        scores = ctx.scope.bm25(self.terms, ctx.engine.text)
        return Match(scores, scores > 0)


@dataclass
class KnowledgeMatch(PlanNode):
    """Semantic refs whose index terms include the stems, scored by kind and rarity."""

    terms: dict[str, float]
    kinds: str = "eatg"

    def label(self) -> str:
        return f"KnowledgeMatch kinds={self.kinds} [{' '.join(self.terms)}]"

    def eval(self, ctx: Context) -> Match:
        scope, settings = ctx.scope, ctx.settings
        weights = {
            "e": settings.entity_weight,
            "a": settings.action_weight,
            "t": settings.topic_weight,
            "g": settings.topic_weight,
        }
        table = np.zeros(256)
        for code in self.kinds:
            table[ord(code)] = weights.get(code, 0.0)
        scores = np.zeros(ctx.n)
        refs: dict[int, float] = {}
        for term, term_weight in self.terms.items():
            positions, ref_ids = scope.knowledge_arrays(term, ctx.engine.text)
            if not len(positions):
                continue
            weight = table[scope.ref_codes(ref_ids)]
            kept = weight > 0
            if not kept.any():
                continue
            best = np.zeros(ctx.n)
            np.maximum.at(best, positions[kept], weight[kept])
            for ref_id, w in zip(ref_ids[kept].tolist(), weight[kept].tolist(), strict=True):
                refs[ref_id] = refs.get(ref_id, 0.0) + w * term_weight
            df = int(np.count_nonzero(best))
            if not df:
                continue
            idf = math.log(1 + (ctx.n - df + 0.5) / (df + 0.5))
            scores += term_weight * idf * best
        return Match(scores, scores > 0, refs)


# -- patterns (through the store's property index) -------------------------------------------


@dataclass
class PatternMatch(PlanNode):
    """Refs meeting every property condition (KnowPro's property index in DuckDB)."""

    description: str
    conditions: list[PropertyCondition]
    resolve_nested: list[tuple[str, PlanNode]] = field(default_factory=list)

    def label(self) -> str:
        parts = []
        for c in self.conditions:
            op = "~" if c.whole_words else "="
            values = "|".join(c.values) if len(c.values) < 6 else f"{len(c.values)} values"
            parts.append(f"{c.name}{op}{values}")
        nested = [f"{role}<-nested" for role, _ in self.resolve_nested]
        return f"PatternMatch {self.description} [{', '.join(parts + nested)}]"

    def children(self) -> Sequence[PlanNode]:
        return [node for _, node in self.resolve_nested]

    def eval(self, ctx: Context) -> Match:
        conditions = list(self.conditions)
        for role, node in self.resolve_nested:
            inner = node.eval(ctx)
            names = ctx.engine.ref_names(list(inner.refs))
            if not names:
                return Match.empty(ctx.n)
            conditions.append(PropertyCondition(role, tuple(sorted(names)), whole_words=True))
        if not conditions:
            return Match.empty(ctx.n)
        # Candidates from the text index: refs whose terms hold every word of a condition's
        # value; the property index (DuckDB) then checks each condition on its own role.
        candidates: dict[int, int] | None = None
        for condition in conditions:
            found = _refs_with_words(ctx, condition.values)
            candidates = (
                found if candidates is None else {r: m for r, m in candidates.items() if r in found}
            )
            if not candidates:
                return Match.empty(ctx.n)
        assert candidates is not None
        properties = ctx.engine.ref_properties(ctx.scope, sorted(candidates))
        hits = [
            ref
            for ref, values in properties.items()
            if all(any(c.accepts(v) for v in values.get(c.name, ())) for c in conditions)
        ]
        if not hits:
            return Match.empty(ctx.n)
        mkeys = np.array([candidates[r] for r in hits], dtype=np.int64)
        scores = np.minimum(ctx.scope.dense(mkeys, np.ones(len(mkeys))), 3.0)
        return Match(scores, scores > 0, {int(r): 1.0 for r in hits})


def _refs_with_words(ctx: Context, values: Sequence[str]) -> dict[int, int]:
    """Refs in scope (ref_id -> mkey) whose index terms include every word of a value."""
    found: dict[int, int] = {}
    for value in values:
        refs: dict[int, int] | None = None
        for word in value.split():
            hits = ctx.scope.knowledge_refs(word, ctx.engine.text)
            refs = dict(hits) if refs is None else {r: m for r, m in refs.items() if r in hits}
            if not refs:
                break
        found.update(refs or {})
    return found


@dataclass
class TopicMatch(PlanNode):
    """Topic refs containing every stem of the topic text."""

    text: str

    def label(self) -> str:
        return f"TopicMatch {self.text!r}"

    def eval(self, ctx: Context) -> Match:
        wanted = sorted(set(stems(self.text)))
        if not wanted:
            return Match.empty(ctx.n)
        scope = ctx.scope
        topic_codes = np.array([ord("t"), ord("g")], dtype=np.uint8)
        all_positions, all_refs = [], []
        for term in wanted:
            positions, ref_ids = scope.knowledge_arrays(term, ctx.engine.text)
            keep = np.isin(scope.ref_codes(ref_ids), topic_codes)
            # a ref can hold a stem more than once; count each (ref, stem) once
            refs_here, first = np.unique(ref_ids[keep], return_index=True)
            all_refs.append(refs_here)
            all_positions.append(positions[keep][first])
        if not all_refs:
            return Match.empty(ctx.n)
        ref_ids = np.concatenate(all_refs)
        positions = np.concatenate(all_positions)
        unique, index, counts = np.unique(ref_ids, return_index=True, return_counts=True)
        complete = counts == len(wanted)
        scores = np.zeros(ctx.n)
        np.add.at(scores, positions[index[complete]], 1.0)
        refs = {int(r): 1.0 for r in unique[complete].tolist()}
        return Match(scores, scores > 0, refs)


# -- scopes ------------------------------------------------------------------------------


@dataclass
class Filter(PlanNode):
    """Messages meeting relational conditions, evaluated in the store with bound values."""

    description: str
    condition: MessageFilter

    def label(self) -> str:
        return f"Filter {self.description}"

    def eval(self, ctx: Context) -> Match:
        keys = ctx.engine.store.filter_messages(self.condition)
        mask = np.zeros(ctx.n, dtype=bool)
        if keys:
            positions, _ = ctx.scope.positions(np.array(sorted(keys), dtype=np.int64))
            mask[positions] = True
        return Match(np.zeros(ctx.n), mask, scored=False)


@dataclass
class RelativeTime(PlanNode):
    """A time phrase resolved against the scope's latest message date."""

    text: str
    keyword: str

    def label(self) -> str:
        return f"RelativeTime {self.keyword}:{self.text!r}"

    def eval(self, ctx: Context) -> Match:
        anchor = ctx.anchor
        found = resolve(self.text, anchor)
        if found is None:
            ctx.notes.append(f"{self.text!r}: no dated messages to resolve it against")
            return Match.empty(ctx.n)
        ctx.notes.append(
            f"{self.keyword}:{self.text!r} = {found} (anchor {anchor:%Y-%m-%d})"
            if anchor
            else f"{self.text!r} = {found}"
        )
        stamps = ctx.scope.frame.timestamps
        mask = ~np.isnat(stamps)
        if found.start is not None:
            mask &= stamps >= np.datetime64(found.start, "s")
        if found.end is not None:
            mask &= stamps < np.datetime64(found.end, "s")
        return Match(np.zeros(ctx.n), mask, scored=False)


@dataclass
class During(PlanNode):
    """The part of the conversation about a topic: matching messages and their neighbours."""

    inner: PlanNode
    radius: int

    def label(self) -> str:
        return f"During radius={self.radius}"

    def children(self) -> Sequence[PlanNode]:
        return [self.inner]

    def eval(self, ctx: Context) -> Match:
        hits = self.inner.eval(ctx).scores > 0
        frame = ctx.scope.frame
        mask = hits.copy()
        for offset in range(1, self.radius + 1):
            for sign in (-1, 1):
                source = np.clip(np.arange(ctx.n) + sign * offset, 0, max(ctx.n - 1, 0))
                same = (frame.conversations[source] == frame.conversations) & (
                    frame.sessions[source] == frame.sessions
                )
                mask |= hits[source] & same
        return Match(np.zeros(ctx.n), mask, scored=False)


# -- boolean -----------------------------------------------------------------------------


@dataclass
class AllOf(PlanNode):
    items: list[PlanNode]

    def label(self) -> str:
        return "AllOf"

    def children(self) -> Sequence[PlanNode]:
        return self.items

    def eval(self, ctx: Context) -> Match:
        results = [item.eval(ctx) for item in self.items]
        mask = np.ones(ctx.n, dtype=bool)
        for r in results:
            mask &= r.mask
        scores = sum((r.scores for r in results if r.scored), np.zeros(ctx.n))
        refs: dict[int, float] = {}
        for r in results:
            refs.update(r.refs)
        return Match(np.where(mask, scores, 0.0), mask, refs, any(r.scored for r in results))


@dataclass
class AnyOf(PlanNode):
    items: list[PlanNode]

    def label(self) -> str:
        return "AnyOf"

    def children(self) -> Sequence[PlanNode]:
        return self.items

    def eval(self, ctx: Context) -> Match:
        results = [item.eval(ctx) for item in self.items]
        mask = np.zeros(ctx.n, dtype=bool)
        for r in results:
            mask |= r.mask
        scores = sum((r.scores for r in results if r.scored), np.zeros(ctx.n))
        refs: dict[int, float] = {}
        for r in results:
            for ref, score in r.refs.items():
                refs[ref] = refs.get(ref, 0.0) + score
        return Match(scores, mask, refs, any(r.scored for r in results))


@dataclass
class NoneOf(PlanNode):
    item: PlanNode

    def label(self) -> str:
        return "NoneOf"

    def children(self) -> Sequence[PlanNode]:
        return [self.item]

    def eval(self, ctx: Context) -> Match:
        inner = self.item.eval(ctx)
        return Match(np.zeros(ctx.n), ~inner.mask, scored=False)


# -- fusion (ask) --------------------------------------------------------------------------


@dataclass
class SpeakerBoost(PlanNode):
    """Scores of messages spoken by the named people, times ``1 + factor``."""

    inner: PlanNode
    people: list[str]
    factor: float

    def label(self) -> str:
        return f"SpeakerBoost x{1 + self.factor:g} {self.people}"

    def children(self) -> Sequence[PlanNode]:
        return [self.inner]

    def eval(self, ctx: Context) -> Match:
        match = self.inner.eval(ctx)
        wanted = {p.lower() for p in self.people}
        by = np.array([s in wanted for s in ctx.scope.speakers_lower], dtype=bool)
        scores = match.scores * np.where(by, 1.0 + self.factor, 1.0)
        return Match(scores, match.mask, match.refs, match.scored)


@dataclass
class VectorMatch(PlanNode):
    """Cosine similarity of the text with each message's embedding."""

    text: str

    def label(self) -> str:
        return f"VectorMatch {self.text[:40]!r}"

    def eval(self, ctx: Context) -> Match:
        sims = ctx.engine.vector_scores(self.text, ctx.scope)
        if sims is None:
            return Match(np.zeros(ctx.n), np.zeros(ctx.n, dtype=bool), scored=False)
        return Match(sims, sims > 0)


@dataclass
class Fuse(PlanNode):
    """Weighted sum of the signals' z-scores, within the filters' mask."""

    signals: list[tuple[str, float, PlanNode]]
    filters: list[PlanNode]

    def label(self) -> str:
        shown = ", ".join(f"{name}*{w:g}" for name, w, _ in self.signals)
        return f"Fuse [{shown}]" + (
            f" within {len(self.filters)} filter(s)" if self.filters else ""
        )

    def children(self) -> Sequence[PlanNode]:
        return [node for _, _, node in self.signals] + list(self.filters)

    def eval(self, ctx: Context) -> Match:
        mask = np.ones(ctx.n, dtype=bool)
        for f in self.filters:
            mask &= f.eval(ctx).mask
        total = np.zeros(ctx.n)
        evidence = np.zeros(ctx.n, dtype=bool)
        refs: dict[int, float] = {}
        for name, weight, node in self.signals:
            result = node.eval(ctx)
            if not result.scored or weight == 0:
                continue
            total += weight * zscore(np.where(mask, result.scores, 0.0))
            if name != "vector":
                evidence |= result.scores > 0
            for ref, score in result.refs.items():
                refs[ref] = refs.get(ref, 0.0) + weight * score
        return Match(np.where(mask, total, -np.inf), mask & evidence, refs)


# -- compiling ----------------------------------------------------------------------------


@dataclass
class Compiled:
    plan: PlanNode
    people: list[str]


_SCOPES = (
    ast.PeopleScope,
    ast.ConversationScope,
    ast.TagScope,
    ast.TimeScope,
    ast.DuringScope,
    ast.MetaFilter,
)


def _verb_keys(verb: str, engine: QueryEngine) -> tuple[str, ...]:
    base = engine.verb_lemma(verb)
    return tuple(sorted({term_key(v) for v in (verb, base, *VERB_ALIASES.get(base, ()))}))


#: Verbs that ask for the same action ("what did Kevin tell Satya" finds "say").
VERB_ALIASES: dict[str, tuple[str, ...]] = {
    "say": ("tell", "talk", "speak", "mention"),
    "tell": ("say", "talk", "speak", "mention"),
    "talk": ("say", "tell", "speak", "discuss"),
    "speak": ("say", "tell", "talk"),
    "mention": ("say", "tell"),
    "discuss": ("talk",),
    "buy": ("purchase", "get"),
    "purchase": ("buy",),
    "visit": ("go",),
    "go": ("visit", "travel"),
    "travel": ("go", "visit"),
    "love": ("like", "enjoy"),
    "like": ("love", "enjoy"),
    "enjoy": ("like", "love"),
    "start": ("begin",),
    "begin": ("start",),
    "make": ("create", "build"),
    "create": ("make",),
}


def _name_keys(name: str, engine: QueryEngine, ctx_conversation: str | None) -> tuple[str, ...]:
    keys = {term_key(name)}
    keys.update(engine.aliases_for(term_key(name), ctx_conversation))
    return tuple(sorted(k for k in keys if k))


class Compiler:
    """AST -> plan. Needs the engine for aliases, lemmas and the entity graph."""

    def __init__(self, engine: QueryEngine, conversation: str | None, settings: RankingSettings):
        self.engine = engine
        self.conversation = conversation
        self.settings = settings

    # query mode: the AST's boolean structure is the plan
    def compile(self, node: ast.Node) -> PlanNode:
        handler: Callable[[ast.Node], PlanNode] | None = getattr(
            self, "_c_" + type(node).__name__, None
        )
        if handler is None:  # pragma: no cover - every AST node has a handler
            raise TypeError(f"cannot compile {type(node).__name__}")
        return handler(node)

    def _c_Or(self, node: ast.Or) -> PlanNode:
        if node.explicit:
            return AnyOf([self.compile(i) for i in node.items])
        # In a juxtaposed group, scopes restrict the rest instead of adding to it.
        scopes = [i for i in node.items if isinstance(i, _SCOPES)]
        others = [i for i in node.items if not isinstance(i, _SCOPES)]
        if not scopes:
            return AnyOf([self.compile(i) for i in others])
        restricted = [self.compile(s) for s in scopes]
        if others:
            restricted.insert(0, AnyOf([self.compile(i) for i in others]))
        return AllOf(restricted)

    def _c_And(self, node: ast.And) -> PlanNode:
        return AllOf([self.compile(i) for i in node.items])

    def _c_Not(self, node: ast.Not) -> PlanNode:
        return NoneOf(self.compile(node.item))

    def _c_Term(self, node: ast.Term) -> PlanNode:
        terms = self.term_weights([node.text])
        if not terms:
            return AnyOf([])
        return AnyOf([TextMatch(terms), KnowledgeMatch(terms)])

    def _c_EntityPattern(self, node: ast.EntityPattern) -> PlanNode:
        conditions: list[PropertyCondition] = []
        if isinstance(node.name, str):
            conditions.append(
                PropertyCondition(
                    "name", _name_keys(node.name, self.engine, self.conversation), whole_words=True
                )
            )
        for t in node.types:
            conditions.append(PropertyCondition("type", (term_key(t),)))
        for facet in node.facets:
            conditions.append(PropertyCondition("facet.name", (term_key(facet.name),)))
            if isinstance(facet.value, str):
                conditions.append(
                    PropertyCondition("facet.value", (term_key(facet.value),), whole_words=True)
                )
        if not conditions:
            raise QueryError(
                f"{node.to_query()} matches every entity",
                hint="give it a name, a type=... or a facet.NAME=...",
            )
        return PatternMatch(node.to_query(), conditions)

    def _c_ActionPattern(self, node: ast.ActionPattern) -> PlanNode:
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
                    PropertyCondition(
                        role, _name_keys(value, self.engine, self.conversation), whole_words=True
                    )
                )
            elif isinstance(value, ast.EntityPattern):
                nested.append((role, self.compile(value)))
        if isinstance(node.verb, str):
            conditions.append(PropertyCondition("verb", _verb_keys(node.verb, self.engine)))
        return PatternMatch(node.to_query(), conditions, nested)

    def _c_TopicPattern(self, node: ast.TopicPattern) -> PlanNode:
        return TopicMatch(node.text)

    def _c_PeopleScope(self, node: ast.PeopleScope) -> PlanNode:
        names = self.engine.people_named(node.name, self.conversation)
        if node.role == "speaker":
            return Filter(node.to_query(), MessageFilter(speakers=tuple(names)))
        return Filter(node.to_query(), MessageFilter(recipients=tuple(names)))

    def _c_ConversationScope(self, node: ast.ConversationScope) -> PlanNode:
        return Filter(node.to_query(), MessageFilter(conversation=node.conversation))

    def _c_TagScope(self, node: ast.TagScope) -> PlanNode:
        return Filter(node.to_query(), MessageFilter(tags=(node.tag,)))

    def _c_TimeScope(self, node: ast.TimeScope) -> PlanNode:
        if node.keyword == "when":
            return RelativeTime(node.text, node.keyword)
        return Filter(node.to_query(), MessageFilter(start=node.start, end=node.end))

    def _c_DuringScope(self, node: ast.DuringScope) -> PlanNode:
        inner = self._c_Term(ast.Term(node.topic, phrase=True))
        return During(AnyOf([inner, TopicMatch(node.topic)]), self.settings.during_radius)

    def _c_MetaFilter(self, node: ast.MetaFilter) -> PlanNode:
        return Filter(node.to_query(), MessageFilter(meta=((node.key, node.op, node.value),)))

    # -- shared helpers ----------------------------------------------------------------

    def term_weights(
        self, texts: Sequence[str], *, query_stoplist: bool = False
    ) -> dict[str, float]:
        """Stems of the texts with their weights, plus related terms (aliases, fuzzy)."""
        weights: dict[str, float] = {}
        for text in texts:
            for stem in query_stems(text) if query_stoplist else stems(text):
                weights[stem] = weights.get(stem, 0.0) + 1.0
        for stem in list(weights):
            for related, weight in self.engine.related_terms(stem, self.conversation):
                for part in related.split():
                    if part not in weights:
                        weights[part] = weight
        return weights


def compile_query(
    node: ast.Node, engine: QueryEngine, conversation: str | None, settings: RankingSettings
) -> PlanNode:
    """The plan of a query expression (``structrag query``)."""
    return Compiler(engine, conversation, settings).compile(node)


def split_question(node: ast.Node) -> tuple[list[ast.Node], list[ast.Node], list[ast.Term]]:
    """A translated question's parts: (patterns, scopes, terms)."""
    patterns: list[ast.Node] = []
    scopes: list[ast.Node] = []
    terms: list[ast.Term] = []
    for item in ast.walk(node):
        if isinstance(item, ast.Term):
            terms.append(item)
        elif isinstance(item, ast.EntityPattern | ast.ActionPattern | ast.TopicPattern):
            patterns.append(item)
        elif isinstance(item, _SCOPES):
            scopes.append(item)
    return patterns, scopes, terms


def compile_ask(
    node: ast.Node,
    question: str,
    people: list[str],
    engine: QueryEngine,
    conversation: str | None,
    settings: RankingSettings,
    *,
    drop_verbs: bool = False,
    drop_scopes: bool = False,
    related: dict[str, float] | None = None,
) -> PlanNode:
    """The plan of a question: text, knowledge, pattern and vector signals fused by
    z-score, messages by the people it names boosted, its scopes as filters. ``related``
    adds stems found by graph expansion, at their weights."""
    compiler = Compiler(engine, conversation, settings)
    patterns, scopes, terms = split_question(node)
    if drop_verbs:
        patterns = [
            ast.ActionPattern(p.subject, None, p.object, p.indirect_object)
            if isinstance(p, ast.ActionPattern)
            else p
            for p in patterns
        ]
        patterns = [
            p
            for p in patterns
            if not (
                isinstance(p, ast.ActionPattern) and p.object is None and p.indirect_object is None
            )
        ]
    bag = compiler.term_weights([question], query_stoplist=True)
    for person in people:
        for stem in stems(person):
            bag.pop(stem, None)
    for term in terms:
        for stem in stems(term.text):
            bag.setdefault(stem, 1.0)
    for stem, weight in (related or {}).items():
        bag.setdefault(stem, weight)
    if not drop_scopes:
        # A time phrase the scopes apply needs no words in messages ("in July 2024").
        for scope in scopes:
            if isinstance(scope, ast.TimeScope):
                for stem in stems(scope.text):
                    bag.pop(stem, None)
    text: PlanNode = TextMatch(bag)
    if people and settings.speaker_boost:
        text = SpeakerBoost(text, people, settings.speaker_boost)
    signals: list[tuple[str, float, PlanNode]] = [("text", settings.text_weight, text)]
    if settings.knowledge_weight and bag:
        signals.append(("knowledge", settings.knowledge_weight, KnowledgeMatch(bag, "eatg")))
    if settings.pattern_weight and patterns:
        signals.append(
            ("patterns", settings.pattern_weight, AnyOf([compiler.compile(p) for p in patterns]))
        )
    if settings.vector_weight:
        signals.append(("vector", settings.vector_weight, VectorMatch(question)))
    filters = [] if drop_scopes else [compiler.compile(s) for s in scopes]
    return Fuse(signals, filters)
