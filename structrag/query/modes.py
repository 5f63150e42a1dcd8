"""Ranking the messages of a scope by one of four signals, for memory and knowledge
search: ``structured`` (the query compiler, as ``ask`` ranks), ``text`` (BM25 over the
query's words), ``vector`` (embedding similarity) and ``hybrid`` (reciprocal rank fusion,
k = 60, of text and vector, as ElizaOS fuses them)."""

from __future__ import annotations

from typing import Literal

import numpy as np

from structrag.query import ast
from structrag.query.engine import QueryEngine
from structrag.query.question import content_terms
from structrag.store.protocols import Scope

SearchMode = Literal["structured", "text", "vector", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("structured", "text", "vector", "hybrid")
#: Reciprocal rank fusion's constant.
RRF_K = 60


def rank(engine: QueryEngine, query: str, scope: Scope, mode: str) -> list[tuple[int, float]]:
    """``(mkey, score)`` of the scope's messages that ``query`` finds, best first."""
    if mode == "structured":
        found = engine.rank_question(query, scope=scope)
        return [(r.mkey, r.score) for r in found.ranked]
    if mode == "text":
        return text_ranking(engine, query, scope)
    if mode == "vector":
        return vector_ranking(engine, query, scope)
    fused: dict[int, float] = {}
    for ranking in (text_ranking(engine, query, scope), vector_ranking(engine, query, scope)):
        for position, (mkey, _) in enumerate(ranking, start=1):
            fused[mkey] = fused.get(mkey, 0.0) + 1.0 / (RRF_K + position)
    return sorted(fused.items(), key=lambda kv: -kv[1])


def text_ranking(engine: QueryEngine, query: str, scope: Scope) -> list[tuple[int, float]]:
    terms = content_terms(query, set())
    if not terms:
        return []
    result = engine.query(ast.Or(tuple(terms)), scope=scope, limit=None)
    return [(m.mkey, m.score) for m in result.messages]


def vector_ranking(engine: QueryEngine, query: str, scope: Scope) -> list[tuple[int, float]]:
    view = engine.view(scope=scope)
    scores = view.vector_scores(query)
    if scores is None:
        return []
    order = np.argsort(-scores, kind="stable")
    mkeys = view.scope.frame.mkeys
    return [(int(mkeys[i]), float(scores[i])) for i in order.tolist()]
