"""The query engine: runs query expressions and questions against an index.

``query``: text -> AST (:mod:`~structrag.query.parser`) -> plan
(:mod:`~structrag.query.compile`) -> ranked messages and semantic refs.
``ask``: question -> translation (a :class:`~structrag.query.question.Translator`) ->
the question's ranked query (:mod:`~structrag.query.question`) -> the same compiler ->
ranked messages -> an answer context within a token budget
(:mod:`~structrag.query.context`), leftover budget filled by vector similarity.

It only knows the store and text-index protocols; the composition root
(:class:`structrag.Index`) hands it the translator, the lemmatizer and the embedder.
What it derives from the index is cached per store generation (:mod:`~structrag.query.derived`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, overload

import numpy as np

from structrag.analysis import term_key
from structrag.embeddings import Embedder
from structrag.errors import QueryError
from structrag.lexicon import Lexicon, default_lexicon
from structrag.memory.store import id_agent, shown_id
from structrag.naming import DOCUMENT_ROOM
from structrag.query import ast
from structrag.query.compile import compile_query
from structrag.query.context import (
    AnswerContext,
    Line,
    RankedMessage,
    TokenCounter,
    build_context,
    tokens_text,
)
from structrag.query.derived import ConversationView, Derived, Evaluation
from structrag.query.limits import check_question
from structrag.query.nodes import Match, PlanNode
from structrag.query.parser import parse
from structrag.query.question import Translation, Translator, question_query, widen
from structrag.query.settings import DEFAULT_SETTINGS, RankingSettings
from structrag.store.protocols import (
    KnowledgeStore,
    PropertyCondition,
    Scope,
    TextIndexReader,
    consistent_reads,
)

#: Messages rendered at a time while packing an answer context.
PACK_BATCH = 64


def _shown_id(stored: str) -> dict[str, str]:
    """A message's id as a view of the whole index shows it: an agent's memory stored
    under its id scoped to the agent (another's memory holds the id in the room) as
    ``id@agent`` (``show`` takes it), with that agent (``id_agent``)."""
    agent = id_agent(stored)
    shown = {"id": shown_id(stored)}
    return shown if agent is None else {**shown, "id_agent": agent}


@dataclass
class QueryResult:
    """Ranked semantic refs and messages, with the plan that produced them."""

    query: str
    plan: str
    messages: Sequence[RankedMessage]
    refs: list[tuple[int, float]]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tree: str = ""
    #: How many messages the query matched (``messages`` holds at most the limit of them).
    matched: int = 0
    #: A document fragment's citation fields, by mkey (see :func:`fragment_citations`).
    citations: dict[int, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self, *, explain: bool = False) -> dict[str, Any]:
        data: dict[str, Any] = {
            "query": self.query,
            "messages": [
                {
                    **_shown_id(m.id),
                    "conversation": m.conversation,
                    "score": m.score,
                    **self.citations.get(m.mkey, {}),
                }
                for m in self.messages
            ],
            "matched": self.matched,
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
    ranked: Sequence[RankedMessage]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    tree: str = ""
    #: An answer written by an LLM from the context (``ask --answer``), or why there is none.
    written: dict[str, Any] | None = None
    #: A document fragment's citation fields, by mkey (see :func:`fragment_citations`).
    citations: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: The agent of each packed memory whose id is shown scoped to it (``id@agent``), by
    #: mkey.
    id_agents: dict[int, str] = field(default_factory=dict)

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
                    **({"id_agent": self.id_agents[m.mkey]} if m.mkey in self.id_agents else {}),
                    "conversation": m.conversation,
                    "score": m.score,
                    "source": m.source,
                    "tokens": m.tokens,
                    **self.citations.get(m.mkey, {}),
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


@dataclass
class RankedQuestion:
    """A question's query and the messages it ranked, best first."""

    node: ast.Or
    kind: str
    plan: str
    ranked: Ranking
    refs: dict[int, float]
    notes: list[str]
    view: ConversationView
    #: Over several conversations, which messages of the view are in those of the people
    #: the question names (or in documents): the ranking keeps to them, and so does the
    #: vector fill. None when the question names no one there, or all is theirs.
    within: np.ndarray | None = None
    #: How many of the query's matches that left out (in other conversations).
    left_out: int = 0


def fragment_citations(
    store: KnowledgeStore, messages: Sequence[tuple[int, str]]
) -> dict[int, dict[str, Any]]:
    """Where each document fragment among ``messages`` (mkey, conversation) is: its
    ``document_id``, the document's ``path``, ``page`` and ``page_end`` (PDF) and
    ``section`` (its heading path), as ``knowledge search --json`` gives them, so that
    ``ask --json`` and ``query --json`` cite fragments without parsing their labels. A
    conversation's messages read nothing."""
    keys = sorted({mkey for mkey, room in messages if room.startswith(DOCUMENT_ROOM)})
    if not keys:
        return {}
    rows = store.sql(
        "SELECT f.mkey, f.document_id, d.path, f.page_start, f.page_end, f.section "
        "FROM fragments f JOIN documents d USING (document_id) "
        "WHERE f.mkey IN (SELECT unnest(?::BIGINT[]))",
        [keys],
    )
    return {
        int(mkey): {
            "document_id": str(document_id),
            "path": str(path),
            "page": None if page is None else int(page),
            "page_end": None if page_end is None else int(page_end),
            "section": list(section or ()),
        }
        for mkey, document_id, path, page, page_end, section in rows
    }


class QueryEngine:
    """Runs queries and questions; see the module docstring."""

    def __init__(
        self,
        store: KnowledgeStore,
        text: TextIndexReader,
        *,
        settings: RankingSettings = DEFAULT_SETTINGS,
        embedder: Embedder | Callable[[], Embedder | None] | None = None,
        translator: Translator | None = None,
        lemmatize: Callable[[str], str] | None = None,
        lexicon: Lexicon | Callable[[], Lexicon] | None = default_lexicon,
    ) -> None:
        self.settings = settings
        self.translator = translator
        self.store = store
        self.derived = Derived(
            store,
            text,
            settings=settings,
            embedder=embedder,
            lemmatize=lemmatize,
            lexicon=lexicon,
        )

    def view(self, conversation: str | None = None, scope: Scope | None = None) -> ConversationView:
        """What the engine knows about a scope: by default a conversation's messages (or
        the whole index's)."""
        return self.derived.view(scope or Scope(conversation=conversation))

    def lines(self, mkeys: Sequence[int], counter: TokenCounter) -> dict[int, Line]:
        """Messages rendered as in an answer context, with their token counts."""
        return self.derived.lines(mkeys, counter)

    def plan(
        self, node: ast.Node, conversation: str | None = None, scope: Scope | None = None
    ) -> PlanNode:
        """The plan a query AST compiles to."""
        return compile_query(node, self.view(conversation, scope), self.settings)

    @consistent_reads
    def query(
        self,
        expression: str | ast.Node,
        *,
        conversation: str | None = None,
        limit: int | None = 20,
        scope: Scope | None = None,
    ) -> QueryResult:
        """Run a query expression; ranked messages and semantic refs."""
        started = time.perf_counter()
        node = parse(expression) if isinstance(expression, str) else expression
        view = self.view(conversation, scope)
        plan = compile_query(node, view, self.settings)
        run = Evaluation(view)
        match = plan.eval(run)
        ranking = _rank(match, view, limit)
        ranked = ranking if limit is None else list(ranking)
        refs = sorted(_refs_in(match, run).items(), key=lambda kv: (-kv[1], kv[0]))
        notes = [*run.notes, *_stopwords_only(node)]
        if not len(ranked):
            notes += _why_nothing(node, view)
        older = older_cjk_analysis(self.store, node.to_query())
        if older:
            notes.append(older)
        asked = " ".join(t.text for t in ast.walk(node) if isinstance(t, ast.Term))
        older = older_identifier_analysis(self.store, self.derived, asked)
        if older:
            notes.append(older)
        return QueryResult(
            query=node.to_query(),
            plan=plan.explain(),
            messages=ranked,
            refs=refs[: (limit or len(refs))],
            notes=notes,
            seconds=time.perf_counter() - started,
            tree=ast.dump(node),
            matched=int(np.count_nonzero(match.mask)),
            citations=fragment_citations(
                self.store, [] if limit is None else [(m.mkey, m.conversation) for m in ranked]
            ),
        )

    @consistent_reads
    def rank_question(
        self,
        question: str,
        *,
        conversation: str | None = None,
        translator: Translator | None = None,
        scope: Scope | None = None,
    ) -> RankedQuestion:
        """Translate a question and rank the messages of a scope with its query (widened
        when it matches too little); what ``ask`` packs, and what memory search returns."""
        check_question(question)
        translator = translator or self.translator
        if translator is None:
            raise QueryError("ask needs a question translator")
        view = self.view(conversation, scope)
        translation = translator.translate(question, view.speakers)
        notes = list(translation.notes)
        people: list[str] = []
        for person in translation.people:
            people.extend(p for p in view.people_named(person) if p not in people)
        node = self._question_query(translation, question, view, people, notes)
        plan, match, run = self._run(node, view)
        # Over several conversations, a question naming people is answered from theirs:
        # the query is widened until it matches enough there, not elsewhere.
        theirs = _people_conversations(view, people) if view.conversation is None else None
        dropped: tuple[str, np.ndarray] | None = None
        for step, what in ((1, "verbs"), (2, "scopes")):
            found = match.mask if theirs is None else match.mask & theirs[1]
            if int(found.sum()) >= self.settings.min_matches:
                break
            wider = widen(node, step)
            if wider is None:
                continue
            notes.append(
                f"fewer than {self.settings.min_matches} matches: widened (dropped {what})"
            )
            if step == 2:
                dropped = self._scope_members(node, view)
            node = wider
            plan, match, run = self._run(node, view)
        notes.extend(run.notes)
        ranked = _rank(match, view, None)
        if dropped is not None and dropped[1].any():
            scopes, members = dropped
            keep = self.settings.scope_keep_max
            ranked = _scope_first(ranked, match, members, keep, view)
            count = int(members.sum())
            which = "messages" if count <= keep else "matching messages"
            notes.append(f"the {which} of {scopes} ({count} in all) come first")
        within = None
        left_out = 0
        if theirs is not None:
            kept = _people_first(ranked, view, people, theirs, notes)
            left_out = len(ranked) - len(kept)
            ranked, within = kept, theirs[1]
        return RankedQuestion(
            node=node,
            kind=translation.kind,
            plan=plan.explain(),
            ranked=ranked,
            refs=_refs_in(match, run),
            notes=notes,
            view=view,
            within=within,
            left_out=left_out,
        )

    def _scope_members(self, node: ast.Or, view: ConversationView) -> tuple[str, np.ndarray] | None:
        """The hard scopes of a question's group (its time phrases) as a query, and which
        messages they hold, before widening drops them; ``None`` when it has none."""
        scopes = [item for item in node.items if isinstance(item, ast.SCOPES)]
        if not scopes:
            return None
        _, match, _ = self._run(ast.And(tuple(scopes)), view)
        return " ".join(s.to_query() for s in scopes), match.mask

    @consistent_reads
    def ask(
        self,
        question: str,
        *,
        counter: TokenCounter,
        conversation: str | None = None,
        budget: int = 1000,
        translator: Translator | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        """Translate a question, rank messages with its query, and pack an answer context
        of at most ``budget`` tokens."""
        started = time.perf_counter()
        found = self.rank_question(
            question, conversation=conversation, translator=translator, scope=scope
        )
        ranked = found.ranked
        # Packed in the ranking's order, except that messages that only ask give way
        # (``question_penalty``); ``Answer.ranked`` stays the query's own ranking.
        packed = ranked
        if self.settings.question_penalty > 0:
            packed = self._demote_questions(ranked, found.view, counter)
        # over several conversations, the nearest of those the question's people are in
        fill = self.nearest(
            question, conversation, set(ranked.mkeys.tolist()), budget, scope, found.within
        )
        # What packing usually reads (in batches of PACK_BATCH): the first two batches of
        # the ranking and one of the fill, looking for messages that still fit once the
        # budget is nearly spent. Read in one query rather than one per batch.
        ahead = ranked.mkeys[: 2 * PACK_BATCH].tolist()
        ahead += [m.mkey for m in fill[: 3 * PACK_BATCH - len(ahead)]]
        context = build_context(
            lambda keys: self.derived.lines(keys, counter, ahead, found.view),
            counter,
            packed,
            fill,
            budget,
            knowledge=self._knowledge_lines(found.view, found.refs),
            knowledge_share=self.settings.knowledge_share,
            max_misses=self.settings.pack_max_misses,
            batch=PACK_BATCH,
        )
        # An agent's memory stored under its id scoped to the agent (another memory holds
        # the id in its room) is shown, prompted and cited as id@agent (`show` takes it).
        id_agents: dict[int, str] = {}
        for message in context.messages:
            agent = id_agent(message.id)
            if agent is not None:
                id_agents[message.mkey] = agent
                message.id = shown_id(message.id)
        notes = found.notes
        for older in (
            older_cjk_analysis(self.store, question),
            older_identifier_analysis(self.store, self.derived, question),
        ):
            if older:
                notes = [*notes, older]
        if not len(packed) and context.messages:
            if not found.left_out:  # (else the note of the people's conversations says so)
                notes = [
                    *notes,
                    "no message matches the question's words (questions are read as English): "
                    "the context holds the messages nearest to it by embedding",
                ]
        elif len(packed):
            best = packed[0]
            best_id = shown_id(best.id)
            first = context.messages[0] if context.messages else None
            if first is not None and first.mkey == best.mkey and first.cut:
                notes = [
                    *notes,
                    f"the best match, {best_id}, is longer than the budget of {budget} tokens: "
                    "the context holds its start; ask with a larger budget for all of it",
                ]
            elif all(m.mkey != best.mkey for m in context.messages):
                line = self.derived.lines([best.mkey], counter, ahead, found.view).get(best.mkey)
                if line is not None:
                    notes = [
                        *notes,
                        f"the best match, {best_id} ({tokens_text(line.tokens)}), does not "
                        f"fit the budget of {budget} tokens: ask with a larger budget",
                    ]
        elif not context.messages and fill:
            # Nothing ranked, and the nearest message by embedding is longer than the
            # budget (the fill is never cut): say so rather than return nothing silently.
            near = fill[0]
            line = self.derived.lines([near.mkey], counter, ahead, found.view).get(near.mkey)
            if line is not None:
                notes = [
                    *notes,
                    "no message matches the question's words (questions are read as English), "
                    f"and the nearest by embedding, {shown_id(near.id)} "
                    f"({tokens_text(line.tokens)}), does not fit the budget of {budget} "
                    "tokens: ask with a larger budget",
                ]
        return Answer(
            question=question,
            conversation=conversation,
            budget=budget,
            query=found.node.to_query(),
            kind=found.kind,
            plan=found.plan,
            context=context,
            ranked=ranked,
            notes=notes,
            seconds=time.perf_counter() - started,
            tree=ast.dump(found.node),
            citations=fragment_citations(
                self.store, [(m.mkey, m.conversation) for m in context.messages]
            ),
            id_agents=id_agents,
        )

    def _demote_questions(
        self, ranked: Ranking, view: ConversationView, counter: TokenCounter
    ) -> Ranking:
        """The ranking with its best ``question_depth`` messages ordered again, the
        messages that only ask lowered by ``question_penalty`` (see :class:`RankingSettings`)."""
        s = self.settings
        depth = min(len(ranked), s.question_depth)
        if depth < 2:
            return ranked
        keys = ranked.mkeys[:depth].tolist()
        lines = self.derived.lines(keys, counter, ranked.mkeys[: 2 * PACK_BATCH].tolist(), view)
        asks = np.array([k in lines and is_question(lines[k].text) for k in keys], dtype=bool)
        if not asks.any():
            return ranked
        scores = ranked.scores[:depth]
        adjusted = scores - s.question_penalty * (float(scores.std()) or 1.0) * asks
        # Within tiers (a dropped time scope's messages stay first): lexsort is stable.
        again = np.lexsort((-adjusted, ranked.tiers[:depth]))
        return ranked.reordered(again)

    def _question_query(
        self,
        translation: Translation,
        question: str,
        view: ConversationView,
        people: list[str],
        notes: list[str],
    ) -> ast.Or:
        s = self.settings
        related: list[tuple[str, float]] = []
        for owner, noun in translation.relations:
            names = view.graph.expand_relation(owner, noun)[: s.graph_max_names]
            if names:
                notes.append(f"graph: {owner}'s {noun} -> {', '.join(names)}")
            related.extend((name, s.graph_weight) for name in names)
        node = question_query(
            translation,
            question,
            people=people,
            related=related,
            prefer=1 + s.speaker_boost,
            facet_boost=s.facet_boost,
        )
        if s.open_object_weight > 0:
            # Only an object that names a category ("books", a ``kind:`` term): the
            # answers name its instances, which the action's object cannot match.
            kinds = {term_key(t.text) for t in node.items if isinstance(t, ast.Term) and t.kinds}
            opened: list[ast.Node] = []
            for item in node.items:
                if (
                    isinstance(item, ast.ActionPattern)
                    and isinstance(item.subject, str)
                    and item.verb is not None
                    and isinstance(item.object, str)
                    and term_key(item.object) in kinds
                ):
                    wider = ast.ActionPattern(item.subject, item.verb, None, None)
                    if wider not in node.items and all(
                        not isinstance(o, ast.Boost) or o.item != wider for o in opened
                    ):
                        opened.append(ast.Boost(wider, s.open_object_weight))
            if opened:
                node = ast.Or(node.items + tuple(opened))
        return node

    def _run(self, node: ast.Node, view: ConversationView) -> tuple[PlanNode, Match, Evaluation]:
        plan = compile_query(node, view, self.settings)
        run = Evaluation(view)
        return plan, plan.eval(run), run

    @consistent_reads
    def nearest(
        self,
        text: str,
        conversation: str | None,
        exclude: set[int],
        budget: int,
        scope: Scope | None = None,
        within: np.ndarray | None = None,
    ) -> list[RankedMessage]:
        """The messages nearest to ``text`` by embedding, best first, leaving out
        ``exclude`` (mkeys): what fills the budget an answer context has left (classic
        vector RAG); enough of them to fill ``budget`` tokens. Empty without vectors.
        ``within`` (a mask over the view's messages) keeps to those it marks."""
        view = self.view(conversation, scope)
        vector = view.vector_scores(text)
        if vector is None:
            return []
        s, frame = self.settings, view.scope.frame
        chosen = exclude
        candidates = len(vector)
        if within is not None and len(within) == len(vector):
            vector = np.where(within, vector, -np.inf)
            candidates = int(np.count_nonzero(within))
        reach = min(candidates, budget // s.fill_tokens_per_message + s.fill_extra + len(chosen))
        order = np.argsort(-vector, kind="stable")[:reach]
        return [
            RankedMessage(
                int(frame.mkeys[i]),
                str(frame.conversations[i]),
                str(frame.ids[i]),
                round(float(vector[i]), 4),
                "vector",
            )
            for i in order.tolist()
            if int(frame.mkeys[i]) not in chosen
        ]

    def _knowledge_lines(self, view: ConversationView, refs: dict[int, float]) -> list[str]:
        """The best entities and topics hit by the query, one short line each."""
        s = self.settings
        if not refs or not s.knowledge_share:
            return []
        best = sorted(refs.items(), key=lambda kv: -kv[1])[: s.summary_refs]
        found = view.knowledge_texts([r for r, _ in best])
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
                for name, types in list(entities.items())[: s.summary_entities]
            ]
            lines.append("Entities: " + "; ".join(shown))
        if topics:
            lines.append("Topics: " + "; ".join(topics[: s.summary_topics]))
        return lines


#: A trailing stage direction or image caption: ``[shares a photo of a dog]``.
_TRAILING_NOTE = re.compile(r"(\s*\[[^\[\]]*\])+\s*$")


@lru_cache(maxsize=65_536)
def is_question(text: str) -> bool:
    """Whether a message ends with a question (a trailing bracketed note aside:
    ``Have you read it? [shares a photo of a book]``)."""
    text = text.rstrip()
    if not text.endswith(("?", "]")):  # no note to take off (a long line: no regex run)
        return False
    return _TRAILING_NOTE.sub("", text).rstrip().endswith("?")


def _refs_in(match: Match, run: Evaluation) -> dict[int, float]:
    """The knowledge hits that belong to messages the match kept."""
    if not match.refs:
        return {}
    ids = np.fromiter(match.refs, dtype=np.int64, count=len(match.refs))
    positions, found = run.ref_positions(ids)
    kept = ids[found][match.mask[positions]]
    return {int(r): match.refs[int(r)] for r in kept.tolist()}


class Ranking(Sequence[RankedMessage]):
    """Ranked messages, best first, made on access: a ranking of a large scope can hold
    tens of thousands of matches, while a caller reads the first few (``mkeys`` and
    ``scores`` are the whole ranking as arrays)."""

    def __init__(
        self,
        order: np.ndarray,
        scores: np.ndarray,
        view: ConversationView,
        tiers: np.ndarray | None = None,
    ) -> None:
        frame = view.scope.frame
        self._frame = frame
        self._order = order
        self.mkeys: np.ndarray = frame.mkeys[order]
        self.scores: np.ndarray = np.where(np.isfinite(scores), np.round(scores, 4), 0.0)
        #: Ranked groups, best first (non-decreasing): a reordering by score stays within
        #: its tier. All 0 unless a dropped time scope's messages come first.
        self.tiers: np.ndarray = tiers if tiers is not None else np.zeros(len(order), dtype=np.int8)

    def __len__(self) -> int:
        return len(self._order)

    @overload
    def __getitem__(self, index: int) -> RankedMessage: ...

    @overload
    def __getitem__(self, index: slice) -> list[RankedMessage]: ...

    def __getitem__(self, index: int | slice) -> RankedMessage | list[RankedMessage]:
        if isinstance(index, slice):
            return [self._message(i) for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._message(index)

    def reordered(self, head: np.ndarray) -> Ranking:
        """The ranking with its first ``len(head)`` messages in the order ``head`` gives
        (positions in this ranking); the rest as they are."""
        order = np.concatenate([self._order[head], self._order[len(head) :]])
        scores = np.concatenate([self.scores[head], self.scores[len(head) :]])
        tiers = np.concatenate([self.tiers[head], self.tiers[len(head) :]])
        out = Ranking.__new__(Ranking)
        out._frame = self._frame
        out._order = order
        out.mkeys = self._frame.mkeys[order]
        out.scores = scores
        out.tiers = tiers
        return out

    def _message(self, position: int) -> RankedMessage:
        i = int(self._order[position])
        return RankedMessage(
            int(self.mkeys[position]),
            str(self._frame.conversations[i]),
            str(self._frame.ids[i]),
            float(self.scores[position]),
        )

    def __iter__(self) -> Iterator[RankedMessage]:
        for position in range(len(self)):
            yield self._message(position)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _rank(match: Match, view: ConversationView, limit: int | None) -> Ranking:
    candidates = np.flatnonzero(match.mask)
    if match.scored:
        order = candidates[np.argsort(-match.scores[candidates], kind="stable")]
    else:
        order = candidates
    if limit is not None:
        order = order[:limit]
    return Ranking(order, match.scores[order].astype(float), view)


def _scope_first(
    ranking: Ranking, match: Match, members: np.ndarray, keep_max: int, view: ConversationView
) -> Ranking:
    """A widened question's ranking with the messages of the scope it dropped first: those
    the wider query matched, in its order; then, when the scope holds at most
    ``keep_max`` messages, the rest of them in conversation order (score 0); then the
    other matches. "What did Nate cook on 9 November 2022?" keeps that day's messages
    ahead of every other day's cooking when none of them says "cook"."""
    order = ranking._order
    inside = members[order]
    head = order[inside]
    rest = order[~inside]
    extra = np.zeros(0, dtype=order.dtype)
    if int(members.sum()) <= keep_max:
        # the ranking holds exactly the messages the match has
        extra = np.flatnonzero(members & ~match.mask).astype(order.dtype)
    new = np.concatenate([head, extra, rest])
    # Ranking reads a score that is not finite (outside a filter) as 0.
    values = np.concatenate([match.scores[head], np.zeros(len(extra)), match.scores[rest]])
    tiers = np.concatenate(
        [
            np.zeros(len(head), dtype=np.int8),
            np.ones(len(extra), dtype=np.int8),
            np.full(len(rest), 2, dtype=np.int8),
        ]
    )
    return Ranking(new, values.astype(float), view, tiers)


def _people_conversations(
    view: ConversationView, people: list[str]
) -> tuple[frozenset[str], np.ndarray] | None:
    """The conversations where the people a question names speak, or are named, and which
    messages of the view are in them (or in documents, which have no speakers: a question
    that names someone may still ask of them); None when none of the people speaks here,
    or every message is theirs."""
    speaking = [p for p in people if p in view.speakers]
    if not speaking:
        return None
    theirs = view.conversations_of(speaking)
    inside = view.in_conversations(theirs)
    if inside.all():
        return None
    return theirs, inside


def _people_first(
    ranking: Ranking,
    view: ConversationView,
    people: list[str],
    theirs: tuple[frozenset[str], np.ndarray],
    notes: list[str],
) -> Ranking:
    """A ranking over several conversations narrowed to those where the people a question
    names speak, or are named ("What books has Melanie read?" over five chats: Melanie's
    chat, not another pair's talk of books; the vector fill keeps to them too). When none
    of its matches is in them, none is kept: another pair's messages do not answer a
    question about these people."""
    conversations, members = theirs
    inside = members[ranking._order]
    if inside.all():
        return ranking
    speaking = [p for p in people if p in view.speakers]
    shown = sorted(conversations)
    where = ", ".join(shown[:5]) + (f" and {len(shown) - 5} more" if len(shown) > 5 else "")
    verbs = "speak or are named" if len(speaking) > 1 else "speaks or is named"
    if inside.any():
        left_out = f"{int((~inside).sum())} matches in other conversations left out"
    else:
        left_out = (
            f"none of the {len(inside)} matches is there: the messages nearest to the "
            "question there fill the context"
        )
    notes.append(
        f"{' and '.join(speaking)} {verbs} in {where}: the answer is looked for there ({left_out})"
    )
    return Ranking(ranking._order[inside], ranking.scores[inside], view, ranking.tiers[inside])


def _stopwords_only(node: ast.Node) -> list[str]:
    """Terms the index cannot search: whatever the query found, it found without them
    (``speaker:Marco the`` is every message of Marco's)."""
    from structrag.analysis import stems

    return [
        f"{item.text!r} is only stopwords: it matches nothing, and the query runs without it"
        for item in ast.walk(node)
        if isinstance(item, ast.Term)
        and not item.fuzzy
        and not item.kinds
        and item.text.strip()
        and not stems(item.text)
    ]


def older_cjk_analysis(store: KnowledgeStore, text: str) -> str | None:
    """A note when ``text`` holds Chinese or Japanese and the index was built before such
    text was analysed into characters and bigrams (each run of it was one term, so its
    messages are not found by word): the index records no ``text_analysis`` (new indexes
    and ``reindex`` do) and some message says words of ``text``."""
    from structrag.analysis import TEXT_ANALYSIS_KEY, has_cjk, words

    if not has_cjk(text) or store.get_setting(TEXT_ANALYSIS_KEY) is not None:
        return None
    pieces = list(dict.fromkeys(w for w in words(text, frozenset(), unigrams=False) if has_cjk(w)))
    if not pieces:
        return None
    rows = store.sql(
        "SELECT 1 FROM messages WHERE "
        + " OR ".join(["contains(text, ?)"] * len(pieces[:16]))
        + " LIMIT 1",
        pieces[:16],
    )
    if not rows:
        return None
    return (
        "messages say Chinese or Japanese words of this search that an index built before "
        "such text was split into characters and bigrams cannot find by word: rebuild it "
        "with `structrag reindex` to search them"
    )


def older_identifier_analysis(store: KnowledgeStore, derived: Derived, text: str) -> str | None:
    """A note when words of ``text`` are parts of identifiers that messages say
    (``retries`` of ``max_retries``) and the index was built before identifiers were
    split into their parts (its ``text_analysis`` lacks ``identifier-parts``): it finds
    such a message by the whole identifier only, not by the word."""
    from structrag.analysis import IDENTIFIER_PARTS, TEXT_ANALYSIS_KEY, query_stopwords, stems

    # An index's analysis only ever becomes newer (``reindex``): read once a generation,
    # and once more before saying it is older.
    if IDENTIFIER_PARTS in derived.text_analysis():
        return None
    parts = derived.identifier_parts()
    if not parts:
        return None
    found = [parts[s] for s in dict.fromkeys(stems(text, query_stopwords())) if s in parts]
    analysis = store.get_setting(TEXT_ANALYSIS_KEY)
    if not found or (analysis is not None and IDENTIFIER_PARTS in analysis.split()):
        return None
    return (
        f"messages say words of this search inside identifiers ({found[0]}) that an index "
        "built before identifiers were split into their parts finds whole only: rebuild it "
        "with `structrag reindex` to search them by their parts"
    )


def _outside_not(node: ast.Node) -> Iterator[ast.Node]:
    """The nodes of a query that are not under a NOT (what a message must be)."""
    if isinstance(node, ast.Not):
        return
    yield node
    if isinstance(node, ast.And | ast.Or):
        for item in node.items:
            yield from _outside_not(item)
    elif isinstance(node, ast.Boost):
        yield from _outside_not(node.item)


def _why_nothing(node: ast.Node, view: ConversationView) -> list[str]:
    """What a query that found nothing asked for that the scope does not have: words no
    message says (with their neighbours one edit away, for a typo), people who say
    nothing in it, conversations the index lacks."""
    from structrag.analysis import stems

    notes: list[str] = []
    for item in ast.walk(node):
        if isinstance(item, ast.Term) and not item.fuzzy and not item.kinds:
            for stem in stems(item.text):
                if view.holds(stem):
                    continue
                near = [c for c, _ in view.corrections(stem)]
                notes.append(
                    f"no message in scope has {item.text!r}"
                    + (
                        f"; write {item.text}~ for the words one edit away ({', '.join(near)})"
                        if near and " " not in item.text
                        else ""
                    )
                )
                break
        elif isinstance(item, ast.PeopleScope) and not set(view.people_named(item.name)) & set(
            view.speakers
        ):
            shown = ", ".join(view.speakers[:8]) + (" ..." if len(view.speakers) > 8 else "")
            notes.append(f"no one called {item.name!r} speaks in scope (speakers: {shown})")
        elif isinstance(item, ast.MetaFilter):
            keys = view.owner.store.metadata_keys(view.conversation)
            if item.key.split(".")[0] not in keys:
                shown = ", ".join(keys[:10]) + (" ..." if len(keys) > 10 else "")
                notes.append(
                    f"no message in scope has the metadata key {item.key!r}"
                    + (f" (keys: {shown})" if keys else " (its messages have no metadata)")
                )
        elif (
            isinstance(item, ast.DocumentScope)
            and item.keyword == "document"
            and not view.owner.store.documents_named(item.value)
        ):
            notes.append(
                f"no document {item.value!r} in the index (by id, path, file name or title): "
                "list them with `structrag knowledge list`"
            )
        elif isinstance(item, ast.ConversationScope) and not view.has_conversation(
            item.conversation
        ):
            notes.append(
                f"no conversation {item.conversation!r} in scope: list them with "
                "`structrag conversations`"
            )
        elif (
            isinstance(item, ast.SourceScope)
            and item.source == "knowledge"
            and "knowledge" not in view.owner.store.memory_tables()
        ):
            notes.append(
                "source:knowledge: the index holds no documents (add them with "
                "`structrag knowledge add`)"
            )
        elif (
            isinstance(item, ast.TimeScope)
            and item.keyword != "when"
            and len(view.scope.frame)
            and np.isnat(view.scope.frame.timestamps.astype("datetime64[us]")).all()
        ):
            notes.append(f"{item.to_query()}: no message in scope has a date")
    for item in _outside_not(node):
        if isinstance(item, ast.EntityPattern):
            notes += _why_no_entity(item, view)
        elif isinstance(item, ast.Term) and item.kinds:
            notes += _why_no_kind(item, view)
    notes += _exclusive_scopes(node)
    return notes


#: ``_why_nothing`` looks for similar entity names among at most this many (a larger
#: index only gets the note that there is none).
SIMILAR_NAMES_MAX = 50_000


def _where(view: ConversationView) -> str:
    return f"conversation {view.conversation!r}" if view.conversation else "the index"


def _has_refs(view: ConversationView, condition: PropertyCondition) -> bool:
    """Whether any entity of the view's conversation (or the index) meets ``condition``
    (one store lookup: this runs only for a query that found nothing)."""
    found = view.owner.store.refs_meeting(None, [condition])
    return bool(found) and bool(view._conversation_refs(found))


def _why_no_entity(item: ast.EntityPattern, view: ConversationView) -> list[str]:
    """``entity:NAME`` and ``type:TYPE`` that no entity of the scope's conversation (or
    the index) has, with the names one might have meant."""
    import difflib

    notes: list[str] = []
    if item.name is not None and not _has_refs(
        view, PropertyCondition("name", view.name_keys(item.name), whole_words=True)
    ):
        names = sorted(
            {
                text
                for text, kind, _ in view.owner.store.knowledge_vocabulary(view.conversation)
                if kind == "entity"
            }
        )
        near: list[str] = []
        if len(names) <= SIMILAR_NAMES_MAX:
            lowered = {name.casefold(): name for name in names}
            near = [
                lowered[n]
                for n in difflib.get_close_matches(item.name.casefold(), list(lowered), n=3)
            ]
        notes.append(
            f"no entity named {item.name!r} in {_where(view)}"
            + (f"; entities with similar names: {', '.join(near)}" if near else "")
            + " (`structrag entities` lists them)"
        )
    for kind in dict.fromkeys(item.types):
        if not _has_refs(view, PropertyCondition("type", (term_key(kind),))):
            counts: dict[str, int] = {}
            for row in view.owner.store.top_entities(200, view.conversation):
                for t in row["types"]:
                    counts[t] = counts.get(t, 0) + int(row["mentions"])
            common = sorted(counts, key=lambda t: (-counts[t], t))
            shown = ", ".join(common[:10]) + (" ..." if len(common) > 10 else "")
            notes.append(
                f"no entity of type {kind!r} in {_where(view)}"
                + (f" (its most common types: {shown})" if shown else "")
            )
    return notes


def _why_no_kind(item: ast.Term, view: ConversationView) -> list[str]:
    """``kind:CATEGORY`` that found nothing: a category the lexicon does not know (with
    the ones one edit away, for a typo), or one none of whose kinds the scope's messages
    say."""
    from structrag.analysis import stems
    from structrag.query.derived import _edits

    found = stems(item.text)
    if not found or any(view.holds(stem) for stem in found):
        return []  # the word itself is there: something else narrowed the query
    lexicon = view.owner.lexicon
    if lexicon is None:
        return []
    keys = list(dict.fromkeys([" ".join(found), found[-1]]))
    known = [key for key in keys if key in lexicon]
    if any(view.kinds(key) for key in known):
        return []  # some of its kinds are in scope
    asked = item.to_query()
    if known:
        members = lexicon.kinds(known[0])
        listed = ", ".join(members[:6]) + (" ..." if len(members) > 6 else "")
        return [f"{asked}: no message in scope has {item.text!r} or a kind of it ({listed})"]
    near = sorted(c for c in _edits(found[-1]) if c in lexicon)[:3]
    return [
        f"{asked}: {item.text!r} is not a category the lexicon of kinds knows, and no "
        "message in scope has it"
        + (f"; did you mean {' or '.join(f'kind:{c}' for c in near)}?" if near else "")
    ]


def _exclusive_scopes(node: ast.Node) -> list[str]:
    """Scopes a query with no OR asks a message to be in at once, that no message can be:
    two speakers, or two date ranges that do not overlap."""
    items = list(_outside_not(node))
    if any(isinstance(i, ast.Or) and i.explicit for i in items):
        return []  # scopes beside each other in a group restrict it; OR gives either
    notes = []
    speakers = [i.name for i in items if isinstance(i, ast.PeopleScope) and i.role == "speaker"]
    said_by = sorted({name.casefold(): name for name in speakers}.values())
    if len(said_by) > 1:
        either = " OR ".join(f"speaker:{ast.quote(n)}" for n in said_by)
        notes.append(
            f"a message has one speaker, and the query asks for {' and '.join(said_by)} at "
            f"once: write {either} for the messages of any of them"
        )
    ranges = [i for i in items if isinstance(i, ast.TimeScope) and i.keyword != "when"]
    starts = [r.start for r in ranges if r.start is not None]
    ends = [r.end for r in ranges if r.end is not None]
    if len(ranges) > 1 and starts and ends and max(starts) >= min(ends):
        shown = " and ".join(r.to_query() for r in ranges)
        notes.append(f"{shown} do not overlap: write OR between them for either")
    return notes
