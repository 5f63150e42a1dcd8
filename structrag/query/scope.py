"""The messages a query runs over, as arrays, and the text scorers that use them.

A :class:`ScopeData` is built once per (store generation, conversation) and shared by
every query on it: the message frame from the store, each message's position, its text
length, and the neighbour tables of the text window. Scores are dense float arrays over
the frame, so boolean operators are array operations.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from structrag.query.settings import RankingSettings
from structrag.store.protocols import MessageFrame, TextIndexReader

#: A message without a time, in :attr:`ScopeData.seconds` (NaT as an integer).
NO_TIME = np.iinfo(np.int64).min


@dataclass
class ScopeData:
    """Arrays describing the messages of one scope, in conversation order."""

    conversation: str | None
    frame: MessageFrame
    docs: np.ndarray
    lengths: np.ndarray
    settings: RankingSettings
    #: Content terms per message: 0 for a backchannel ("Yeah.", "Right, right.").
    contents: np.ndarray | None = None
    _order: np.ndarray = field(init=False, repr=False)
    _sorted: np.ndarray = field(init=False, repr=False)
    neighbours: list[tuple[float, np.ndarray, np.ndarray]] = field(init=False, repr=False)
    window_lengths: np.ndarray = field(init=False, repr=False)
    speakers_lower: np.ndarray = field(init=False, repr=False)
    turns: np.ndarray = field(init=False, repr=False)
    mate_weight: float = field(init=False, repr=False)
    text_factor: np.ndarray = field(init=False, repr=False)
    _term_cache: dict[str, tuple[np.ndarray, int]] = field(default_factory=dict, repr=False)
    _knowledge_arrays: dict[str, tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, repr=False
    )

    def __post_init__(self) -> None:
        frame = self.frame
        n = len(frame)
        self._order = np.argsort(frame.mkeys, kind="stable")
        self._sorted = frame.mkeys[self._order]
        # Turns: runs of messages by one speaker in a session. With ``window_turns`` the
        # window's offsets count turns, so in a chat where people send three short
        # messages in a row, the message before a reply is the other person's whole turn.
        # A message without a speaker (a document's fragment) is a turn of its own.
        index = np.arange(n)
        if self.settings.window_turns and n:
            spoken = np.array([bool(s) for s in frame.speakers], dtype=bool)
            same = np.zeros(n, dtype=bool)
            same[1:] = (
                spoken[1:]
                & (frame.speakers[1:] == frame.speakers[:-1])
                & (frame.sessions[1:] == frame.sessions[:-1])
                & (frame.conversations[1:] == frame.conversations[:-1])
            )
            turns = np.cumsum(~same) - 1
        else:
            turns = index
        self.turns = turns
        first = np.flatnonzero(np.r_[True, turns[1:] != turns[:-1]]) if n else index
        count = int(turns[-1]) + 1 if n else 0
        self.neighbours = []
        for offset, weight in sorted(self.settings.window.items()):
            if offset == 0:
                continue
            source = np.clip(np.arange(count) + offset, 0, max(count - 1, 0))
            valid = (np.arange(count) + offset >= 0) & (np.arange(count) + offset < count)
            if count:
                at, there = first, first[source]
                valid &= frame.conversations[there] == frame.conversations[at]
                valid &= frame.sessions[there] == frame.sessions[at]
            self.neighbours.append((weight, source, valid))
        #: The weight of the other messages of a message's own turn: as a next message.
        window = self.settings.window
        self.mate_weight = max(window.get(-1, 0.0), window.get(1, 0.0))
        self.window_lengths = self.windowed(self.lengths.astype(np.float64))
        self.speakers_lower = np.array([(s or "").lower() for s in frame.speakers], dtype=object)
        contents = self.contents if self.contents is not None else self.lengths
        #: What a message's text score is multiplied by: backchannels match only through
        #: their neighbours' words, and should not crowd out the messages they answer.
        self.text_factor = np.where(contents > 0, 1.0, self.settings.backchannel_weight)

    @classmethod
    def build(
        cls,
        conversation: str | None,
        frame: MessageFrame,
        docs: np.ndarray,
        mkeys: np.ndarray,
        lengths: np.ndarray,
        contents: np.ndarray,
        settings: RankingSettings,
    ) -> ScopeData:
        """A scope from the frame and the text index's per-message term counts."""
        order = np.argsort(frame.mkeys, kind="stable")
        ordered = frame.mkeys[order]
        dense = np.zeros(len(frame), dtype=np.float64)
        dense_contents = np.zeros(len(frame), dtype=np.float64)
        if len(ordered) and len(mkeys):
            at = np.clip(np.searchsorted(ordered, mkeys), 0, len(ordered) - 1)
            found = ordered[at] == mkeys
            dense[order[at[found]]] = lengths[found]
            dense_contents[order[at[found]]] = contents[found]
        return cls(conversation, frame, docs, dense, settings, dense_contents)

    def __len__(self) -> int:
        return len(self.frame)

    @cached_property
    def latest_dates(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each conversation's run of messages (the frame is in conversation order)
        that has a dated message: its start, its end and its latest date in epoch
        seconds; what relative time phrases count from."""
        frame = self.frame
        n = len(frame)
        if not n:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty, empty
        convs = frame.conversations
        starts = np.flatnonzero(np.r_[True, convs[1:] != convs[:-1]])
        ends = np.r_[starts[1:], n]
        latest = np.maximum.reduceat(self.seconds, starts)
        dated = latest != NO_TIME
        return starts[dated], ends[dated], latest[dated]

    @cached_property
    def seconds(self) -> np.ndarray:
        """Each message's time in epoch seconds (:data:`NO_TIME` for none)."""
        return self.frame.timestamps.astype("datetime64[s]").astype(np.int64)

    def knowledge_arrays(self, term: str, reader: TextIndexReader) -> tuple[np.ndarray, np.ndarray]:
        """(frame positions, ref ids) of the refs in scope whose terms include ``term``
        (cached)."""
        cached = self._knowledge_arrays.get(term)
        if cached is None:
            postings = reader.knowledge_postings(term, self.docs)
            positions, found = self.positions(postings.mkeys)
            cached = (positions, postings.values[found])
            if len(self._knowledge_arrays) > 4096:
                self._knowledge_arrays.clear()
            self._knowledge_arrays[term] = cached
        return cached

    def positions(self, mkeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Frame positions of ``mkeys``, and which of them are in the scope at all."""
        if not len(mkeys) or not len(self._sorted):
            return np.zeros(0, np.int64), np.zeros(len(mkeys), bool)
        at = np.searchsorted(self._sorted, mkeys)
        at = np.clip(at, 0, len(self._sorted) - 1)
        found = self._sorted[at] == mkeys
        return self._order[at[found]], found

    def windowed(self, values: np.ndarray) -> np.ndarray:
        """Each message's weighted sum of ``values`` over its text window: its own value
        (``window[0]``), the rest of its turn, and the turns around it."""
        own = self.settings.window.get(0, 0.0)
        if not len(values):
            return np.zeros(0, dtype=np.float64)
        turns = self.turns
        per_turn = np.bincount(turns, weights=values, minlength=int(turns[-1]) + 1)
        out = own * values + self.mate_weight * (per_turn[turns] - values)
        around = np.zeros(len(per_turn), dtype=np.float64)
        for weight, source, valid in self.neighbours:
            around += weight * np.where(valid, per_turn[source], 0.0)
        return np.asarray(out + around[turns], dtype=np.float64)

    def dense(self, mkeys: np.ndarray, values: np.ndarray) -> np.ndarray:
        """A dense array over the frame from sparse (mkey, value) pairs (summed)."""
        out = np.zeros(len(self), dtype=np.float64)
        positions, found = self.positions(mkeys)
        np.add.at(out, positions, values[found].astype(np.float64))
        return out

    # -- text: BM25 over context windows ------------------------------------------------

    def window_tf(self, term: str, reader: TextIndexReader) -> tuple[np.ndarray, int]:
        """Window term frequencies of a term and its window document frequency."""
        cached = self._term_cache.get(term)
        if cached is not None:
            return cached
        postings = reader.text_postings(term, self.docs)
        own = self.dense(postings.mkeys, postings.values)
        window = self.windowed(own) if own.any() else own
        result = (window, int(np.count_nonzero(window)))
        if len(self._term_cache) > 4096:
            self._term_cache.clear()
        self._term_cache[term] = result
        return result

    def holding(self, terms: Iterable[str], reader: TextIndexReader) -> np.ndarray:
        """Which messages hold any of the terms in their own text (not their window's)."""
        mask = np.zeros(len(self), dtype=bool)
        for term in terms:
            postings = reader.text_postings(term, self.docs)
            positions, _ = self.positions(postings.mkeys)
            mask[positions] = True
        return mask

    def bm25(self, weighted_terms: dict[str, float], reader: TextIndexReader) -> np.ndarray:
        """BM25 of a bag of (stem -> query weight) over the text windows."""
        n = len(self)
        scores = np.zeros(n, dtype=np.float64)
        if not n or not weighted_terms:
            return scores
        k1, b = self.settings.k1, self.settings.b
        average = float(self.window_lengths.mean()) or 1.0
        norm = k1 * (1 - b + b * self.window_lengths / average)
        for term, weight in weighted_terms.items():
            tf, df = self.window_tf(term, reader)
            if not df:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            scores += weight * idf * tf * (k1 + 1) / (tf + norm)
        weighted: np.ndarray = scores * self.text_factor
        return weighted


def zscore(values: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the scope; zeros when the values are all equal."""
    if not len(values):
        return values
    std = float(values.std())
    if std == 0.0:
        return np.zeros_like(values)
    return (values - float(values.mean())) / std
