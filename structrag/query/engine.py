"""The query engine: runs query expressions and questions against an index.

It only knows the store and text-index protocols; the composition root
(:class:`structrag.Index`) hands it the spaCy-based translator and lemmatizer, the
embedder and the token counter. Everything derived from the index (scope arrays,
embeddings, aliases, the entity graph, fuzzy neighbours) is cached per store generation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import networkx as nx
import numpy as np

from structrag.analysis import term_key
from structrag.embeddings import Embedder
from structrag.errors import NotFoundError
from structrag.query import ast
from structrag.query.context import AnswerContext, Line, build_context, render_message
from structrag.query.parser import parse
from structrag.query.plan import Context, Match, compile_ask, compile_query
from structrag.query.scope import ScopeData
from structrag.query.settings import DEFAULT_SETTINGS, RankingSettings
from structrag.store.protocols import KnowledgeStore, TextIndexReader
from structrag.tokens import TokenCounter

#: Suffixes that derive one word from another (in their stemmed form).
DERIVATIONAL_SUFFIXES = frozenset(
    {"er", "or", "ist", "ian", "ment", "ship", "ism", "ness", "ful", "al", "ive", "ic", "ess"}
)


def _by_name(rows: dict[int, list[tuple[str, str]]]) -> dict[int, dict[str, list[str]]]:
    out: dict[int, dict[str, list[str]]] = {}
    for ref, pairs in rows.items():
        grouped: dict[str, list[str]] = {}
        for name, value in pairs:
            grouped.setdefault(name, []).append(value)
        out[ref] = grouped
    return out


class Translation(Protocol):
    """What a question translator returns."""

    query: ast.Node
    people: list[str]
    kind: str
    relations: list[tuple[str, str]]
    notes: list[str]


class Translator(Protocol):
    def translate(self, question: str, speakers: Sequence[str]) -> Translation: ...


@dataclass
class RankedMessage:
    mkey: int
    conversation: str
    id: str
    score: float
    source: str = "structured"


@dataclass
class QueryResult:
    """Ranked semantic refs and messages, with the plan that produced them."""

    query: str
    plan: str
    messages: list[RankedMessage]
    refs: list[tuple[int, float]]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tree: str = ""

    def as_dict(self, *, explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "messages": [
                {"id": m.id, "conversation": m.conversation, "score": m.score}
                for m in self.messages
            ],
            "semantic_refs": [{"ref_id": r, "score": round(s, 4)} for r, s in self.refs],
            "notes": self.notes,
            "seconds": round(self.seconds, 4),
        }
        if explain:
            data["ast"] = self.tree
            data["plan"] = self.plan
        return data


@dataclass
class Answer:
    """An answer context for a question, and how it was found."""

    question: str
    conversation: str | None
    budget: int
    query: str
    kind: str
    plan: str
    context: AnswerContext
    ranked: list[RankedMessage]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tree: str = ""
    #: An answer written by an LLM from the context (``ask --answer``), or why there is none.
    written: dict[str, Any] | None = None

    @property
    def message_ids(self) -> list[str]:
        return self.context.message_ids

    def as_dict(self, *, explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "question": self.question,
            "conversation": self.conversation,
            "budget": self.budget,
            "query": self.query,
            "question_type": self.kind,
            "messages": [
                {
                    "id": m.id,
                    "conversation": m.conversation,
                    "score": m.score,
                    "source": m.source,
                    "tokens": m.tokens,
                }
                for m in self.context.messages
            ],
            "message_ids": self.context.message_ids,
            "context": self.context.text,
            "tokens": self.context.tokens,
            "knowledge": self.context.knowledge,
            "notes": self.notes,
            "seconds": round(self.seconds, 4),
        }
        if explain:
            data["ast"] = self.tree
            data["plan"] = self.plan
        if self.written is not None:
            data["answer"] = self.written
        return data


class QueryEngine:
    def __init__(
        self,
        store: KnowledgeStore,
        text: TextIndexReader,
        *,
        settings: RankingSettings = DEFAULT_SETTINGS,
        embedder: Embedder | None = None,
        counter: TokenCounter | None = None,
        translator: Translator | None = None,
        lemmatize: Callable[[str], str] | None = None,
    ) -> None:
        self.store = store
        self.text = text
        self.settings = settings
        self.embedder = embedder
        self.counter = counter
        self.translator = translator
        self._lemmatize = lemmatize
        self._generation = -1
        self._scopes: dict[str | None, ScopeData] = {}
        self._aliases: dict[str | None, dict[str, list[tuple[str, float]]]] = {}
        self._vectors: dict[str | None, np.ndarray | None] = {}
        self._graphs: dict[str | None, nx.MultiDiGraph] = {}
        self._vocab: dict[str | None, tuple[list[str], np.ndarray] | None] = {}
        self._related: dict[tuple[str | None, str], list[tuple[str, float]]] = {}
        self._speakers: dict[str | None, list[str]] = {}
        self._lines: dict[tuple[str, int], Line] = {}
        self._ref_tables: dict[
            str | None,
            tuple[dict[int, dict[str, list[str]]], dict[int, tuple[str, str, list[str]]]] | None,
        ] = {}

    # -- caches ----------------------------------------------------------------------------

    def _fresh(self) -> None:
        generation = self.store.generation()
        if generation != self._generation:
            self._generation = generation
            for cache in (
                self._scopes,
                self._aliases,
                self._vectors,
                self._graphs,
                self._vocab,
                self._related,
                self._speakers,
                self._lines,
                self._ref_tables,
            ):
                cache.clear()

    def scope(self, conversation: str | None) -> ScopeData:
        if conversation not in self._scopes:
            if conversation is not None and conversation not in {
                c.id for c in self.store.conversations()
            }:
                raise NotFoundError(
                    f"no conversation {conversation!r} in the index",
                    hint="list them with `structrag stats --json` or `structrag conversations`",
                )
            frame = self.store.message_frame(conversation)
            docs = self.text.conversation_docs(conversation)
            mkeys, lengths = self.text.lengths(docs)
            self._scopes[conversation] = ScopeData.build(
                conversation, frame, docs, mkeys, lengths, self.settings
            )
        return self._scopes[conversation]

    def speakers(self, conversation: str | None) -> list[str]:
        if conversation not in self._speakers:
            frame = self.scope(conversation).frame
            self._speakers[conversation] = sorted({s for s in frame.speakers if s})
        return self._speakers[conversation]

    def aliases_for(self, key: str, conversation: str | None) -> list[str]:
        return [related for related, _ in self._alias_table(conversation).get(key, [])]

    def _alias_table(self, conversation: str | None) -> dict[str, list[tuple[str, float]]]:
        if conversation not in self._aliases:
            table: dict[str, list[tuple[str, float]]] = {}
            for term, related, weight in self.store.aliases(conversation):
                table.setdefault(term, []).append((related, weight))
            self._aliases[conversation] = table
        return self._aliases[conversation]

    def people_named(self, name: str, conversation: str | None) -> list[str]:
        """Speakers a name refers to: exact, first name, or an alias ("Mel" -> Melanie)."""
        key = term_key(name)
        keys = {key, *self.aliases_for(key, conversation)}
        found = [
            s
            for s in self.speakers(conversation)
            if term_key(s) in keys or term_key(s.split()[0]) in keys
        ]
        return found or [name]

    def verb_lemma(self, verb: str) -> str:
        return self._lemmatize(verb) if self._lemmatize else verb.lower()

    def _scope_tables(
        self, scope: ScopeData
    ) -> tuple[dict[int, dict[str, list[str]]], dict[int, tuple[str, str, list[str]]]] | None:
        """A conversation's property rows and knowledge texts, loaded once: its refs are
        one id range when it was ingested in one go (else the range is too wide: None)."""
        if scope.conversation is None or not len(scope):
            return None
        if scope.conversation not in self._ref_tables:
            frame = scope.frame
            counts = np.array([len(k) for k in frame.ref_kinds])
            low = int(frame.first_refs.min())
            high = int((frame.first_refs + counts).max()) - 1
            tables = None
            if high - low + 1 <= 4 * max(int(counts.sum()), 1):
                tables = (
                    _by_name(self.store.ref_properties_between(low, high)),
                    self.store.knowledge_texts_between(low, high),
                )
            self._ref_tables[scope.conversation] = tables
        return self._ref_tables[scope.conversation]

    def ref_properties(
        self, scope: ScopeData, ref_ids: Sequence[int]
    ) -> dict[int, dict[str, list[str]]]:
        """Property-index values of some refs, by property name."""
        tables = self._scope_tables(scope)
        if tables is None:
            return _by_name(self.store.ref_properties(ref_ids))
        return {r: tables[0][r] for r in ref_ids if r in tables[0]}

    def knowledge_texts(
        self, scope: ScopeData, ref_ids: Sequence[int]
    ) -> dict[int, tuple[str, str, list[str]]]:
        tables = self._scope_tables(scope)
        if tables is None:
            return self.store.knowledge_texts(ref_ids)
        return {r: tables[1][r] for r in ref_ids if r in tables[1]}

    def ref_names(self, ref_ids: list[int]) -> set[str]:
        """Normalised names of the entities (or topic texts) among some refs."""
        names: set[str] = set()
        for _, ref in self.store.refs_by_ids(ref_ids[:500]).values():
            k = ref.knowledge
            text = getattr(k, "name", None) or getattr(k, "text", None)
            if text:
                names.add(term_key(text))
        return names

    def related_terms(self, stem: str, conversation: str | None) -> list[tuple[str, float]]:
        """Aliases gathered at extraction and fuzzy neighbours in the knowledge vocabulary."""
        cache_key = (conversation, stem)
        if cache_key in self._related:
            return self._related[cache_key]
        found: dict[str, float] = {}
        for related, weight in self._alias_table(conversation).get(stem, []):
            found[related] = max(found.get(related, 0.0), weight * self.settings.alias_weight)
        for form in self._derived_forms(stem):
            found.setdefault(form, self.settings.derived_weight)
        for neighbour, similarity in self._fuzzy(stem, conversation):
            key = term_key(neighbour)
            if key != stem and key not in found:
                found[key] = similarity * self.settings.fuzzy_weight
        result = sorted(found.items(), key=lambda kv: -kv[1])
        self._related[cache_key] = result
        return result

    def _derived_forms(self, stem: str) -> list[str]:
        """Terms of the index that derive from a stem or it from them: teach ~ teacher,
        paint ~ painter. Only known derivational suffixes count (camp is not campaign)."""
        if self.settings.derived_weight <= 0 or len(stem) < 4 or not stem.isalpha():
            return []
        forms = [
            term
            for term in self.text.terms_with_prefix(stem)
            if term != stem and term[len(stem) :] in DERIVATIONAL_SUFFIXES
        ]
        for suffix in DERIVATIONAL_SUFFIXES:
            base = stem[: -len(suffix)]
            if (
                stem.endswith(suffix)
                and len(base) >= 4
                and base in self.text.terms_with_prefix(base, 1)
            ):
                forms.append(base)
        return forms

    def _fuzzy(self, stem: str, conversation: str | None) -> list[tuple[str, float]]:
        if self.embedder is None or self.settings.fuzzy_weight <= 0:
            return []
        if len(stem) < 4 or not stem.isalpha():
            return []
        if conversation not in self._vocab:
            words = sorted(
                {
                    w
                    for text, _, _ in self.store.knowledge_vocabulary(conversation)
                    for w in text.lower().split()
                    if len(w) > 3 and w.isalpha()
                }
            )
            self._vocab[conversation] = (words, self.embedder.encode(words)) if words else None
        vocab = self._vocab[conversation]
        if vocab is None:
            return []
        words, vectors = vocab
        query = self.embedder.encode([stem])[0]
        sims = vectors @ query
        best = np.argsort(-sims)[: self.settings.fuzzy_max]
        return [
            (words[i], float(sims[i])) for i in best if sims[i] >= self.settings.fuzzy_threshold
        ]

    def vector_scores(self, text: str, scope: ScopeData) -> np.ndarray | None:
        """Cosine similarity of ``text`` with every message in scope (None: no vectors)."""
        if self.embedder is None:
            return None
        if scope.conversation not in self._vectors:
            mkeys, vectors = self.store.embedding_matrix(self.embedder.name, scope.conversation)
            if not len(mkeys):
                self._vectors[scope.conversation] = None
            else:
                dense = np.zeros((len(scope), vectors.shape[1]), dtype=np.float32)
                positions, found = scope.positions(mkeys)
                dense[positions] = vectors[found]
                self._vectors[scope.conversation] = dense
        matrix = self._vectors[scope.conversation]
        if matrix is None:
            return None
        query = self.embedder.encode([text])[0]
        return np.asarray(matrix @ query, dtype=np.float64)

    def graph(self, conversation: str | None) -> nx.MultiDiGraph:
        """The entity graph: actions (subject -verb-> object) and possessions."""
        if conversation not in self._graphs:
            graph = nx.MultiDiGraph()
            for subject, verb, obj in self.store.relation_edges(conversation):
                a, b = term_key(subject), term_key(obj)
                if a and b and a != b:
                    graph.add_edge(a, b, verb=verb)
            self._graphs[conversation] = graph
        return self._graphs[conversation]

    def neighbours(
        self, name: str, conversation: str | None, hops: int = 2
    ) -> list[tuple[str, int, str]]:
        """Entities within ``hops`` of a named one: (name key, distance, verb of last edge)."""
        graph = self.graph(conversation)
        start = term_key(name)
        if start not in graph:
            return []
        undirected = graph.to_undirected(as_view=True)
        found: list[tuple[str, int, str]] = []
        frontier = {start}
        seen = {start}
        for hop in range(1, hops + 1):
            nxt: set[str] = set()
            for node in frontier:
                for other in undirected.neighbors(node):
                    if other in seen:
                        continue
                    data: dict[Any, dict[str, Any]] = undirected.get_edge_data(node, other) or {}
                    first: dict[str, Any] = next(iter(data.values()), {})
                    verb = first.get("verb", "")
                    found.append((other, hop, str(verb)))
                    nxt.add(other)
            seen |= nxt
            frontier = nxt
        return found

    def expand_relation(self, owner: str, noun: str, conversation: str | None) -> list[str]:
        """Entities that are the ``noun`` of ``owner`` in the graph, in two hops:
        Caroline -have-> friend <-is- Melanie gives Melanie for "Caroline's friend"."""
        target = term_key(noun)
        found: list[str] = []
        graph = self.graph(conversation).to_undirected(as_view=True)
        for node, hop, _ in self.neighbours(owner, conversation, hops=1):
            if hop != 1 or target not in node.split():
                continue
            for other in graph.neighbors(node):
                edges = graph.get_edge_data(node, other) or {}
                is_a = any(data.get("verb") == "is" for data in edges.values())
                if is_a and other not in (term_key(owner), node) and other not in found:
                    found.append(other)
        return found

    # -- running ---------------------------------------------------------------------------

    @staticmethod
    def _refs_in(match: Match, scope: ScopeData) -> dict[int, float]:
        """The knowledge hits that belong to messages the match kept."""
        if not match.refs:
            return {}
        ids = np.fromiter(match.refs, dtype=np.int64, count=len(match.refs))
        positions, found = scope.ref_positions(ids)
        kept = ids[found][match.mask[positions]]
        return {int(r): match.refs[int(r)] for r in kept.tolist()}

    def _rank(self, match: Match, scope: ScopeData, limit: int | None) -> list[RankedMessage]:
        frame = scope.frame
        candidates = np.flatnonzero(match.mask)
        if match.scored:
            order = candidates[np.argsort(-match.scores[candidates], kind="stable")]
        else:
            order = candidates
        if limit is not None:
            order = order[:limit]
        scores = match.scores[order]
        return [
            RankedMessage(
                int(frame.mkeys[i]),
                str(frame.conversations[i]),
                str(frame.ids[i]),
                round(float(score), 4) if np.isfinite(score) else 0.0,
            )
            for i, score in zip(order.tolist(), scores.tolist(), strict=True)
        ]

    def lines(self, mkeys: Sequence[int]) -> dict[int, Line]:
        """Messages rendered for a context, with token counts (cached per generation)."""
        assert self.counter is not None
        name = self.counter.name
        missing = [k for k in mkeys if (name, k) not in self._lines]
        if missing:
            for mkey, stored in self.store.messages_by_keys(missing).items():
                text = render_message(stored)
                self._lines[(name, mkey)] = Line(
                    stored.message.conversation,
                    stored.message.id,
                    text,
                    self.counter.count(text + "\n"),
                )
        return {k: self._lines[(name, k)] for k in mkeys if (name, k) in self._lines}

    def query(
        self,
        expression: str | ast.Node,
        *,
        conversation: str | None = None,
        limit: int | None = 20,
    ) -> QueryResult:
        """Run a query expression; ranked messages and semantic refs."""
        started = time.perf_counter()
        self._fresh()
        node = parse(expression) if isinstance(expression, str) else expression
        scope = self.scope(conversation)
        plan = compile_query(node, self, conversation, self.settings)
        ctx = Context(self, scope, self.settings)
        match = plan.eval(ctx)
        ranked = self._rank(match, scope, limit)
        refs = sorted(self._refs_in(match, scope).items(), key=lambda kv: (-kv[1], kv[0]))
        return QueryResult(
            query=node.to_query(),
            plan=plan.explain(),
            messages=ranked,
            refs=refs[: (limit or len(refs))],
            notes=ctx.notes,
            seconds=time.perf_counter() - started,
            tree=ast.dump(node),
        )

    def ask(
        self,
        question: str,
        *,
        conversation: str | None = None,
        budget: int = 1000,
        translator: Translator | None = None,
    ) -> Answer:
        """Translate a question, rank messages, and pack an answer context."""
        started = time.perf_counter()
        translator = translator or self.translator
        if translator is None or self.counter is None:
            raise RuntimeError("ask needs a translator and a token counter")
        self._fresh()
        scope = self.scope(conversation)
        translation = translator.translate(question, self.speakers(conversation))
        people: list[str] = []
        for person in translation.people:
            people.extend(p for p in self.people_named(person, conversation) if p not in people)
        notes: list[str] = list(translation.notes)
        related: dict[str, float] = {}
        for owner, noun in translation.relations:
            names = self.expand_relation(owner, noun, conversation)
            if names:
                notes.append(f"graph: {owner}'s {noun} -> {', '.join(names[:5])}")
            for name in names[:5]:
                for part in name.split():
                    related[part] = max(related.get(part, 0.0), self.settings.graph_weight)
        match: Match | None = None
        plan_text = ""
        for drop_verbs, drop_scopes in ((False, False), (True, False), (True, True)):
            plan = compile_ask(
                translation.query,
                question,
                people,
                self,
                conversation,
                self.settings,
                drop_verbs=drop_verbs,
                drop_scopes=drop_scopes,
                related=related,
            )
            ctx = Context(self, scope, self.settings)
            match = plan.eval(ctx)
            notes.extend(ctx.notes)
            plan_text = plan.explain()
            if int(match.mask.sum()) >= self.settings.min_matches:
                break
            what = "verbs" if not drop_verbs else "scopes"
            notes.append(
                f"fewer than {self.settings.min_matches} matches: widened (dropped {what})"
            )
        assert match is not None
        ranked = self._rank(match, scope, None)
        fill: list[RankedMessage] = []
        vector = self.vector_scores(question, scope)
        chosen = {r.mkey for r in ranked}
        if vector is not None:
            # Enough candidates to fill any budget (messages cost at least a few tokens).
            reach = min(len(vector), budget // 4 + 64 + len(chosen))
            order = np.argsort(-vector, kind="stable")[:reach]
            fill = [
                RankedMessage(
                    int(scope.frame.mkeys[i]),
                    str(scope.frame.conversations[i]),
                    str(scope.frame.ids[i]),
                    round(float(vector[i]), 4),
                    "vector",
                )
                for i in order.tolist()
                if int(scope.frame.mkeys[i]) not in chosen
            ]
        context = build_context(
            self.lines,
            self.counter,
            ranked,
            fill,
            budget,
            knowledge=(
                self._knowledge_lines(scope, self._refs_in(match, scope))
                if self.settings.knowledge_share
                else []
            ),
            knowledge_share=self.settings.knowledge_share,
        )
        return Answer(
            question=question,
            conversation=conversation,
            budget=budget,
            query=translation.query.to_query(),
            kind=translation.kind,
            plan=plan_text,
            context=context,
            ranked=ranked,
            notes=notes,
            seconds=time.perf_counter() - started,
            tree=ast.dump(translation.query),
        )

    def _knowledge_lines(self, scope: ScopeData, refs: dict[int, float]) -> list[str]:
        """The best entities and topics hit by the query, one short line each."""
        if not refs:
            return []
        best = sorted(refs.items(), key=lambda kv: -kv[1])[:40]
        found = self.knowledge_texts(scope, [r for r, _ in best])
        entities: dict[str, set[str]] = {}
        topics: list[str] = []
        for ref_id, _ in best:
            if ref_id not in found:
                continue
            kind, text, types = found[ref_id]
            if kind == "entity":
                entities.setdefault(text, set()).update(t for t in types[:2] if t != text.lower())
            elif text not in topics:
                topics.append(text)
        lines = []
        if entities:
            shown = [
                f"{name} ({'/'.join(sorted(types))})" if types else name
                for name, types in list(entities.items())[:8]
            ]
            lines.append("Entities: " + "; ".join(shown))
        if topics:
            lines.append("Topics: " + "; ".join(topics[:6]))
        return lines
