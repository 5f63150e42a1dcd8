"""Plan nodes: small typed operators with ``eval(ctx) -> Match``.

A query compiles into a tree of these (:mod:`structrag.query.compile`). Nodes know
nothing of the engine, the store or the text index: everything they read comes through
:class:`PlanContext`, a small protocol the engine implements for one scope. Scores are
dense arrays over the messages in scope, so boolean operators are array operations.
Every node prints itself, so ``--explain`` shows the plan that ran.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import numpy as np

from structrag.analysis import stems
from structrag.query.scope import ScopeData, zscore
from structrag.query.settings import RankingSettings
from structrag.query.timeexpr import resolve
from structrag.store.protocols import MessageFilter, PropertyCondition, RefKind


class PlanContext(Protocol):
    """What plan nodes read while running, for one scope of messages."""

    @property
    def scope(self) -> ScopeData: ...

    @property
    def settings(self) -> RankingSettings: ...

    @property
    def notes(self) -> list[str]: ...

    def text_scores(self, terms: Mapping[str, float]) -> np.ndarray:
        """BM25 of weighted stems over each message's text window."""
        ...

    def text_holders(self, terms: Iterable[str]) -> np.ndarray:
        """Which messages hold any of the stems in their own text."""
        ...

    def phrase_holders(self, phrase: Sequence[str]) -> np.ndarray:
        """Which messages hold the stems one after another in their own text."""
        ...

    def knowledge_hits(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """(scope positions, ref ids) of the semantic refs whose index terms hold ``term``."""
        ...

    def refs_having(self, conditions: Sequence[PropertyCondition]) -> dict[int, int]:
        """Refs in scope (ref id -> scope position) meeting every condition, found by the
        property index alone (no index term to start from)."""
        ...

    def ref_kinds(self, ref_ids: np.ndarray) -> np.ndarray:
        """The :class:`RefKind` of each ref (0 when unknown)."""
        ...

    def ref_positions(self, ref_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Scope positions of the messages holding ``ref_ids``, and which were found."""
        ...

    def refs_meeting(
        self, ref_ids: Sequence[int], conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """The refs among ``ref_ids`` that meet every condition (the property index)."""
        ...

    def ref_names(self, ref_ids: Sequence[int]) -> set[str]:
        """Normalised names of the entities (or topic texts) among refs."""
        ...

    def filter_mask(self, condition: MessageFilter) -> np.ndarray:
        """Which messages in scope meet a relational condition."""
        ...

    def vector_scores(self, text: str) -> np.ndarray | None:
        """Cosine similarity of ``text`` with each message (None: no vectors)."""
        ...


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
    def membership(cls, mask: np.ndarray) -> Match:
        """A match that only says which messages belong (a filter)."""
        return cls(np.zeros(len(mask)), mask, scored=False)


class PlanNode:
    """A node of the plan."""

    def eval(self, ctx: PlanContext) -> Match:
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


def _size(ctx: PlanContext) -> int:
    return len(ctx.scope)


# -- text and knowledge terms ----------------------------------------------------------------


def _whole_label(whole: Sequence[tuple[str, ...]]) -> str:
    """The words of :attr:`TextMatch.whole` groups as written (``北 北京 京`` -> 北京)."""
    shown = ["".join(group[0::2]) for group in whole if len(group) > 1]
    return f" whole [{' '.join(shown)}]" if shown else ""


def _group_stems(whole: Sequence[tuple[str, ...]]) -> set[str]:
    return {stem for group in whole for stem in group}


@dataclass
class TextMatch(PlanNode):
    """BM25 of weighted stems over message text windows. An ``own`` match (the words of
    ``AND`` and ``NOT``) holds only the messages whose own text has a stem: "NOT pottery"
    leaves out the messages that say it, not the ones next to them.

    The stems of a ``whole`` group (a Chinese or Japanese word's characters and bigrams,
    :func:`~structrag.analysis.cjk_words`) count only where the window (or, ``own``, the
    message) has every stem of the group: ``北京大学`` is not any message with ``大``. A
    stem in a group counts on its own too when a group of one holds it (a word that has
    it alone)."""

    terms: dict[str, float]
    own: bool = False
    whole: tuple[tuple[str, ...], ...] = ()

    def label(self) -> str:
        shown = " ".join(f"{t}^{w:g}" if w != 1 else t for t, w in self.terms.items())
        return f"TextMatch{' own' if self.own else ''} [{shown}]{_whole_label(self.whole)}"

    def eval(self, ctx: PlanContext) -> Match:
        grouped = _group_stems(self.whole) & self.terms.keys()
        if not grouped:
            scores = ctx.text_scores(self.terms)
            if self.own:
                scores = np.where(ctx.text_holders(self.terms), scores, 0.0)
            return Match(scores, scores > 0)
        loose = {t: w for t, w in self.terms.items() if t not in grouped}
        n = _size(ctx)
        scores = ctx.text_scores(loose) if loose else np.zeros(n)
        if self.own and loose:
            scores = np.where(ctx.text_holders(loose), scores, 0.0)
        # BM25 is a sum over terms: each grouped stem's share, where a group of it is met
        parts = {t: ctx.text_scores({t: self.terms[t]}) for t in grouped}
        held = {t: ctx.text_holders([t]) for t in grouped} if self.own else {}
        allowed = {t: np.zeros(n, dtype=bool) for t in grouped}
        for group in self.whole:
            if not set(group) <= grouped:
                continue
            met = np.ones(n, dtype=bool)
            for t in group:
                met &= held[t] if self.own else parts[t] > 0
            for t in group:
                allowed[t] |= met
        for t, part in parts.items():
            scores = scores + np.where(allowed[t], part, 0.0)
        return Match(scores, scores > 0)


#: The knowledge kinds a term can match, with the setting that weighs each.
_KIND_WEIGHTS = {
    RefKind.ENTITY: "entity_weight",
    RefKind.ACTION: "action_weight",
    RefKind.TOPIC: "topic_weight",
    RefKind.TAG: "topic_weight",
}


@dataclass
class KnowledgeMatch(PlanNode):
    """Semantic refs (from message text, not metadata) whose index terms include the
    stems, scored by kind and rarity; a stem of a ``whole`` group (see :class:`TextMatch`)
    counts for the refs that hold every stem of the group."""

    terms: dict[str, float]
    whole: tuple[tuple[str, ...], ...] = ()

    def label(self) -> str:
        return f"KnowledgeMatch [{' '.join(self.terms)}]{_whole_label(self.whole)}"

    def eval(self, ctx: PlanContext) -> Match:
        n, settings = _size(ctx), ctx.settings
        table = np.zeros(256)
        for kind, name in _KIND_WEIGHTS.items():
            table[kind] = getattr(settings, name)
        scores = np.zeros(n)
        refs: dict[int, float] = {}
        hits = {term: ctx.knowledge_hits(term) for term in self.terms}
        allowed: dict[str, set[int]] = {t: set() for t in _group_stems(self.whole) & hits.keys()}
        for group in self.whole:
            if set(group) <= allowed.keys():
                met = set.intersection(*(set(hits[t][1].tolist()) for t in group))
                for t in group:
                    allowed[t] |= met
        for term, term_weight in self.terms.items():
            positions, ref_ids = hits[term]
            if term in allowed and len(positions):
                keep = np.isin(ref_ids, np.fromiter(allowed[term], dtype=ref_ids.dtype))
                positions, ref_ids = positions[keep], ref_ids[keep]
            if not len(positions):
                continue
            weight = table[ctx.ref_kinds(ref_ids)]
            kept = weight > 0
            if not kept.any():
                continue
            best = np.zeros(n)
            np.maximum.at(best, positions[kept], weight[kept])
            for ref_id, w in zip(ref_ids[kept].tolist(), weight[kept].tolist(), strict=True):
                refs[ref_id] = refs.get(ref_id, 0.0) + w * term_weight
            df = int(np.count_nonzero(best))
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            scores += term_weight * idf * best
        return Match(scores, scores > 0, refs)


# -- patterns (through the store's property index) -------------------------------------------


#: The property-index row of a negated action (``I didn't make it``): ``negated=yes``.
NEGATED = PropertyCondition("negated", ("yes",))


@dataclass
class PatternMatch(PlanNode):
    """Refs meeting every property condition (KnowPro's property index). ``negated``
    (actions): ``False`` keeps the refs without the :data:`NEGATED` property, ``True`` only
    those with it, ``None`` both. ``empty_note``: said when nothing matches."""

    description: str
    conditions: list[PropertyCondition]
    nested: list[tuple[str, PlanNode]] = field(default_factory=list)
    negated: bool | None = None
    empty_note: str | None = None

    def label(self) -> str:
        parts = []
        for c in self.conditions:
            op = "~" if c.whole_words else "="
            values = "|".join(c.values) if len(c.values) < 6 else f"{len(c.values)} values"
            parts.append(f"{c.name}{op}{values}")
        nested = [f"{role}<-nested" for role, _ in self.nested]
        if self.negated is not None:
            nested.append(f"negated={'yes' if self.negated else 'no'}")
        return f"PatternMatch {self.description} [{', '.join(parts + nested)}]"

    def children(self) -> Sequence[PlanNode]:
        return [node for _, node in self.nested]

    def eval(self, ctx: PlanContext) -> Match:
        match = self._eval(ctx)
        if self.empty_note is not None and not match.mask.any():
            ctx.notes.append(self.empty_note)
        return match

    def _eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        conditions = list(self.conditions)
        for role, node in self.nested:
            inner = node.eval(ctx)
            best = sorted(inner.refs, key=lambda r: -inner.refs[r])
            names = ctx.ref_names(best[: ctx.settings.nested_max_refs])
            if not names:
                return Match.empty(n)
            conditions.append(PropertyCondition(role, tuple(sorted(names)), whole_words=True))
        if not conditions:
            return Match.empty(n)
        # Candidates from the text index: refs whose terms hold every word of a condition's
        # value; the property index then checks each condition on its own role. A facet's
        # name is no condition to start from (it is an index term only for a job or a
        # role, and any ref may hold the word "owner"): with nothing else, candidates
        # come from the property index itself (entity(facet.owner=*)).
        # A value of no index words for its symbols ("C++", "AT&T": the analysis drops
        # them) is looked for in the property index itself; one of stopwords alone
        # ("who") matches nothing, as before.
        named = [c for c in conditions if c.name != "facet.name"]
        symbols = any(_only_symbols(v) for c in named for v in c.values)
        candidates = (
            _candidates(ctx, named) if named and not symbols else ctx.refs_having(conditions)
        )
        if not candidates:
            return Match.empty(n)
        hits = ctx.refs_meeting(sorted(candidates), conditions)
        if hits and self.negated is not None:
            flagged = set(ctx.refs_meeting(hits, [NEGATED]))
            hits = [r for r in hits if (r in flagged) == self.negated]
        if not hits:
            return Match.empty(n)
        scores = np.zeros(n)
        np.add.at(scores, np.array([candidates[r] for r in hits], dtype=np.int64), 1.0)
        scores = np.minimum(scores, ctx.settings.pattern_cap)
        return Match(scores, scores > 0, {int(r): 1.0 for r in hits})


def _only_symbols(value: str) -> bool:
    """Whether a pattern's value has no index word because of its symbols ("c++"), not
    because its words are stopwords."""
    return not stems(value) and any(not (c.isalnum() or c.isspace() or c in "'’-.,") for c in value)


def _candidates(ctx: PlanContext, conditions: Sequence[PropertyCondition]) -> dict[int, int]:
    """Refs in scope (ref id -> scope position) whose index terms hold the words of a
    value of every condition."""
    candidates: dict[int, int] | None = None
    for condition in conditions:
        found = _refs_with_words(ctx, condition.values)
        candidates = (
            found if candidates is None else {r: p for r, p in candidates.items() if r in found}
        )
        if not candidates:
            return {}
    return candidates or {}


def _refs_with_words(ctx: PlanContext, values: Sequence[str]) -> dict[int, int]:
    """Refs in scope (ref id -> scope position) whose index terms hold every word of a
    value."""
    found: dict[int, int] = {}
    for value in values:
        refs: dict[int, int] | None = None
        for word in value.split():
            positions, ref_ids = ctx.knowledge_hits(word)
            hits = dict(zip(ref_ids.tolist(), positions.tolist(), strict=True))
            refs = hits if refs is None else {r: p for r, p in refs.items() if r in hits}
            if not refs:
                break
        found.update(refs or {})
    return found


@dataclass
class TopicMatch(PlanNode):
    """Topic (and tag) refs holding every stem of the topic text."""

    text: str

    def label(self) -> str:
        return f"TopicMatch {self.text!r}"

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        wanted = sorted(set(stems(self.text)))
        if not wanted:
            return Match.empty(n)
        topical = np.array([RefKind.TOPIC, RefKind.TAG], dtype=np.uint8)
        all_positions, all_refs = [], []
        for term in wanted:
            positions, ref_ids = ctx.knowledge_hits(term)
            keep = np.isin(ctx.ref_kinds(ref_ids), topical)
            # a ref can hold a stem more than once; count each (ref, stem) once
            refs_here, first = np.unique(ref_ids[keep], return_index=True)
            all_refs.append(refs_here)
            all_positions.append(positions[keep][first])
        ref_ids = np.concatenate(all_refs)
        positions = np.concatenate(all_positions)
        unique, index, counts = np.unique(ref_ids, return_index=True, return_counts=True)
        complete = counts == len(wanted)
        scores = np.zeros(n)
        np.add.at(scores, positions[index[complete]], 1.0)
        return Match(scores, scores > 0, {int(r): 1.0 for r in unique[complete].tolist()})


# -- scopes ----------------------------------------------------------------------------------


@dataclass
class Filter(PlanNode):
    """Messages meeting relational conditions, evaluated in the store with bound values."""

    description: str
    condition: MessageFilter

    def label(self) -> str:
        return f"Filter {self.description}"

    def eval(self, ctx: PlanContext) -> Match:
        return Match.membership(ctx.filter_mask(self.condition))


@dataclass
class RelativeTime(PlanNode):
    """A time phrase resolved against the latest message date of each conversation in
    scope ("last week" in a chat is the week before its last message; in an index of
    many conversations, each counts from its own)."""

    text: str
    keyword: str

    def label(self) -> str:
        return f"RelativeTime {self.keyword}:{self.text!r}"

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        starts, ends, latest = ctx.scope.latest_dates
        # Phrases count in days: one resolution per distinct latest day.
        days, which = np.unique(latest // DAY, return_inverse=True)
        ranges = [resolve(self.text, _day(int(d))) for d in days]
        if not any(ranges):
            found = resolve(self.text, None)
            ctx.notes.append(
                f"{self.text!r} = {found}"
                if found is not None
                else f"{self.text!r}: no dated messages to resolve it against"
            )
            return Match.empty(n)
        # A day the phrase cannot be resolved from lets nothing pass; an open end, all.
        low = np.array([_seconds(r.start, -NEVER) if r else NEVER for r in ranges])
        high = np.array([_seconds(r.end, NEVER) if r else -NEVER for r in ranges])
        lengths = ends - starts
        rows = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
        run = np.repeat(np.arange(len(starts)), lengths)
        seconds = ctx.scope.seconds
        mask = np.zeros(n, dtype=bool)
        held = seconds[rows]
        mask[rows] = (held >= low[which][run]) & (held < high[which][run])
        shown = {str(r) for r in ranges if r is not None}
        if len(shown) == 1:
            anchor = _day(int(latest.max()) // DAY)
            ctx.notes.append(
                f"{self.keyword}:{self.text!r} = {shown.pop()} (anchor {anchor:%Y-%m-%d})"
            )
        else:
            ctx.notes.append(
                f"{self.keyword}:{self.text!r} counted from each conversation's latest "
                f"message ({len(starts)} conversations)"
            )
        return Match.membership(mask)


#: Seconds in a day; a bound no time reaches.
DAY = 86_400
NEVER = np.iinfo(np.int64).max


def _day(day: int) -> datetime:
    """The start of a day counted from the epoch, as a naive UTC time."""
    return datetime.fromtimestamp(day * DAY, UTC).replace(tzinfo=None)


def _seconds(when: datetime | None, otherwise: int) -> int:
    """A naive UTC time in epoch seconds; ``otherwise`` for an open bound."""
    if when is None:
        return otherwise
    return int(np.datetime64(when, "s").astype(np.int64))


@dataclass
class Phrase(PlanNode):
    """The messages whose own text has a quoted phrase's words together (by stem,
    stopwords aside): ``"support group"`` holds "a support group", "support-group
    meetings", not "support from the group"."""

    text: str
    stems: tuple[str, ...]

    def label(self) -> str:
        return f"Phrase {self.text!r}"

    def eval(self, ctx: PlanContext) -> Match:
        return Match.membership(ctx.phrase_holders(self.stems))


@dataclass
class During(PlanNode):
    """The part of the conversation about a topic: matching messages and their neighbours
    in the same session."""

    inner: PlanNode
    radius: int

    def label(self) -> str:
        return f"During radius={self.radius}"

    def children(self) -> Sequence[PlanNode]:
        return [self.inner]

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        hits = self.inner.eval(ctx).scores > 0
        frame = ctx.scope.frame
        mask = hits.copy()
        for offset in range(1, self.radius + 1):
            for sign in (-1, 1):
                source = np.clip(np.arange(n) + sign * offset, 0, max(n - 1, 0))
                same = (frame.conversations[source] == frame.conversations) & (
                    frame.sessions[source] == frame.sessions
                )
                mask |= hits[source] & same
        return Match.membership(mask)


# -- boolean ---------------------------------------------------------------------------------


@dataclass
class AllOf(PlanNode):
    items: list[PlanNode]

    def label(self) -> str:
        return "AllOf"

    def children(self) -> Sequence[PlanNode]:
        return self.items

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        results = [item.eval(ctx) for item in self.items]
        mask = np.ones(n, dtype=bool)
        for r in results:
            mask &= r.mask
        scores = sum((r.scores for r in results if r.scored), np.zeros(n))
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

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        results = [item.eval(ctx) for item in self.items]
        mask = np.zeros(n, dtype=bool)
        for r in results:
            mask |= r.mask
        scores = sum((r.scores for r in results if r.scored), np.zeros(n))
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

    def eval(self, ctx: PlanContext) -> Match:
        return Match.membership(~self.item.eval(ctx).mask)


# -- ranked groups ---------------------------------------------------------------------------


@dataclass
class Prefer(PlanNode):
    """Scores of the messages a soft scope holds, times ``factor`` (``speaker:Kevin^1.5``)."""

    inner: PlanNode
    scope: PlanNode
    factor: float

    def label(self) -> str:
        return f"Prefer x{self.factor:g}"

    def children(self) -> Sequence[PlanNode]:
        return [self.inner, self.scope]

    def eval(self, ctx: PlanContext) -> Match:
        match = self.inner.eval(ctx)
        held = self.scope.eval(ctx).mask
        scores = match.scores * np.where(held, self.factor, 1.0)
        return Match(scores, match.mask, match.refs, match.scored)


@dataclass
class VectorMatch(PlanNode):
    """Cosine similarity of the text with each message's embedding."""

    text: str

    def label(self) -> str:
        return f"VectorMatch {self.text[:40]!r}"

    def eval(self, ctx: PlanContext) -> Match:
        sims = ctx.vector_scores(self.text)
        if sims is None:
            return Match.membership(np.zeros(_size(ctx), dtype=bool))
        return Match(sims, sims > 0)


@dataclass
class Fuse(PlanNode):
    """A ranked group: a weighted sum of its signals' z-scores, within its filters.

    Messages qualify when a signal other than the vector one has evidence for them; the
    z-scores are taken over the messages the filters keep, so a signal's weight means the
    same whatever the size of the scope."""

    signals: list[tuple[str, float, PlanNode]]
    filters: list[PlanNode]

    def label(self) -> str:
        shown = ", ".join(f"{name}*{w:g}" for name, w, _ in self.signals)
        within = f" within {len(self.filters)} filter(s)" if self.filters else ""
        return f"Fuse [{shown}]{within}"

    def children(self) -> Sequence[PlanNode]:
        return [node for _, _, node in self.signals] + list(self.filters)

    def eval(self, ctx: PlanContext) -> Match:
        n = _size(ctx)
        mask = np.ones(n, dtype=bool)
        for f in self.filters:
            mask &= f.eval(ctx).mask
        total = np.zeros(n)
        evidence = np.zeros(n, dtype=bool)
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
