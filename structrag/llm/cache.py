"""The cache of LLM answers: what was paid for is never paid for twice.

Answers are keyed by (model, prompt version, message hash) and hold the validated answer as
JSON plus the tokens it cost. :class:`TableAnswerCache` keeps them in a table of the index
(the DuckDB store's ``llm_cache``, which commits each answer as it arrives, outside the
ingest's transaction), so an interrupted ingest keeps what it bought.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CachedAnswer:
    """One stored answer."""

    response: str  # the validated answer, as JSON
    input_tokens: int
    output_tokens: int


class AnswerCache(Protocol):
    """Stores answers by (model, prompt version, message hash). Safe to call from threads."""

    def get_many(
        self, model: str, prompt_version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        """The cached answers among ``hashes``."""
        ...

    def put(self, model: str, prompt_version: str, message_hash: str, answer: CachedAnswer) -> None:
        """Store an answer durably (committed when this returns)."""
        ...


class AnswerRows(Protocol):
    """A table of answers as plain rows (what a store offers; it knows nothing of LLMs)."""

    def get_many(
        self, model: str, prompt_version: str, hashes: Sequence[str]
    ) -> dict[str, tuple[str, int, int]]: ...

    def put(
        self,
        model: str,
        prompt_version: str,
        message_hash: str,
        response: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None: ...

    def close(self) -> None: ...


class TableAnswerCache:
    """An :class:`AnswerCache` over a store's answer table."""

    def __init__(self, rows: AnswerRows) -> None:
        self.rows = rows

    def get_many(
        self, model: str, prompt_version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        found = self.rows.get_many(model, prompt_version, sorted(set(hashes)))
        return {h: CachedAnswer(r, i, o) for h, (r, i, o) in found.items()}

    def put(self, model: str, prompt_version: str, message_hash: str, answer: CachedAnswer) -> None:
        self.rows.put(
            model,
            prompt_version,
            message_hash,
            answer.response,
            answer.input_tokens,
            answer.output_tokens,
        )

    def close(self) -> None:
        self.rows.close()


class MemoryAnswerCache:
    """An :class:`AnswerCache` in a dict, for scripts and tests that need no index."""

    def __init__(self) -> None:
        self._answers: dict[tuple[str, str, str], CachedAnswer] = {}
        self._lock = threading.Lock()

    def get_many(
        self, model: str, prompt_version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        with self._lock:
            found = ((h, self._answers.get((model, prompt_version, h))) for h in set(hashes))
            return {h: a for h, a in found if a is not None}

    def put(self, model: str, prompt_version: str, message_hash: str, answer: CachedAnswer) -> None:
        with self._lock:
            self._answers[(model, prompt_version, message_hash)] = answer

    def __len__(self) -> int:
        return len(self._answers)
