"""Ranking the messages of a scope by one of four signals, for memory and knowledge
search: ``structured`` (the query compiler, as ``ask`` ranks), ``text`` (BM25 over the
query's words), ``vector`` (embedding similarity) and ``hybrid`` (reciprocal rank fusion,
k = 60, of text and vector, as ElizaOS fuses them)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Literal, overload

import numpy as np

from structrag.analysis import stems
from structrag.query.engine import QueryEngine
from structrag.query.question import content_terms
from structrag.store.protocols import Scope

SearchMode = Literal["structured", "text", "vector", "hybrid"]
SEARCH_MODES: tuple[SearchMode, ...] = ("structured", "text", "vector", "hybrid")
#: Reciprocal rank fusion's constant.
RRF_K = 60


class Hits(Sequence[tuple[int, float]]):
    """``(mkey, score)`` pairs, best first, over two arrays (a search over every memory
    in scope ranks all of them; a caller reads the first few)."""

    def __init__(self, mkeys: np.ndarray, scores: np.ndarray) -> None:
        self.mkeys = mkeys
        self.scores = scores

    def __len__(self) -> int:
        return len(self.mkeys)

    @overload
    def __getitem__(self, index: int) -> tuple[int, float]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[int, float]]: ...

    def __getitem__(self, index: int | slice) -> tuple[int, float] | list[tuple[int, float]]:
        if isinstance(index, slice):
            keys, scores = self.mkeys[index].tolist(), self.scores[index].tolist()
            return [(int(k), float(s)) for k, s in zip(keys, scores, strict=True)]
        return int(self.mkeys[index]), float(self.scores[index])

    def __iter__(self) -> Iterator[tuple[int, float]]:
        return zip(self.mkeys.tolist(), self.scores.tolist(), strict=True)


_NONE = Hits(np.zeros(0, dtype=np.int64), np.zeros(0))


def rank(engine: QueryEngine, query: str, scope: Scope, mode: str) -> Hits:
    """``(mkey, score)`` of the scope's messages that ``query`` finds, best first."""
    if mode == "structured":
        found = engine.rank_question(query, scope=scope).ranked
        return Hits(found.mkeys, found.scores)
    if mode == "text":
        return text_ranking(engine, query, scope)
    if mode == "vector":
        return vector_ranking(engine, query, scope)
    text, vector = text_ranking(engine, query, scope), vector_ranking(engine, query, scope)
    keys = np.concatenate([text.mkeys, vector.mkeys])
    if not len(keys):
        return _NONE
    shares = np.concatenate(
        [1.0 / (RRF_K + np.arange(1, len(r) + 1, dtype=float)) for r in (text, vector)]
    )
    unique, inverse = np.unique(keys, return_inverse=True)
    fused = np.bincount(inverse, weights=shares, minlength=len(unique))
    # best first; ties in the order the mkeys first appear in the text ranking, then vector
    first = np.full(len(unique), len(keys))
    np.minimum.at(first, inverse, np.arange(len(keys)))
    order = np.lexsort((first, -fused))
    return Hits(unique[order], fused[order])


def text_ranking(engine: QueryEngine, query: str, scope: Scope) -> Hits:
    """BM25 of the query's content words (stems, weighted by how often the query says
    them), for the messages whose own text holds one of them: a message next to one that
    does is no hit of its own (the structured mode ranks windows)."""
    weights: dict[str, float] = {}
    for term in content_terms(query, set()):
        for stem in stems(term.text):
            weights[stem] = weights.get(stem, 0.0) + term.weight
    if not weights:
        return _NONE
    view = engine.view(scope=scope)
    data, reader = view.scope, view.owner.text
    scores = np.where(data.holding(weights, reader), data.bm25(weights, reader), 0.0)
    found = np.flatnonzero(scores > 0)
    order = found[np.argsort(-scores[found], kind="stable")]
    return Hits(data.frame.mkeys[order], scores[order].astype(float))


def vector_ranking(engine: QueryEngine, query: str, scope: Scope) -> Hits:
    view = engine.view(scope=scope)
    scores = view.vector_scores(query)
    if scores is None:
        return _NONE
    order = np.argsort(-scores, kind="stable")
    return Hits(view.scope.frame.mkeys[order], scores[order].astype(float))
