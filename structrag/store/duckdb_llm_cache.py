"""The LLM answer cache in the index's DuckDB file (table ``llm_cache``).

It writes through its own cursor (a separate DuckDB connection to the same database, with
its own transactions) and commits every answer on its own, so answers survive when the
ingest's transaction is rolled back or the process is killed: a re-run pays nothing twice.
One lock serialises the worker threads' use of the cursor (a DuckDB connection refuses
concurrent calls).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from datetime import UTC, datetime

import duckdb

from structrag.llm.cache import CachedAnswer
from structrag.store.duckdb_store import DuckDBStore


class DuckDBAnswerCache:
    """An :class:`~structrag.llm.cache.AnswerCache` on a store's DuckDB database."""

    def __init__(self, store: DuckDBStore) -> None:
        self.read_only = store.read_only
        self._con = store.con.cursor()
        self._lock = threading.Lock()
        self._closed = False

    def get_many(
        self, model: str, prompt_version: str, hashes: Iterable[str]
    ) -> dict[str, CachedAnswer]:
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        with self._lock:
            try:
                rows = self._con.execute(
                    "SELECT message_hash, response, input_tokens, output_tokens FROM llm_cache "
                    "WHERE model = ? AND prompt_version = ? "
                    "AND message_hash IN (SELECT unnest($3::VARCHAR[]))",
                    [model, prompt_version, wanted],
                ).fetchall()
            except duckdb.CatalogException:
                return {}  # an index from before the cache existed, opened read-only
        return {str(h): CachedAnswer(str(r), int(i or 0), int(o or 0)) for h, r, i, o in rows}

    def put(self, model: str, prompt_version: str, message_hash: str, answer: CachedAnswer) -> None:
        if self.read_only:
            return
        with self._lock:
            if self._closed:
                return
            self._con.execute(
                "INSERT INTO llm_cache VALUES (?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO UPDATE SET response = excluded.response, "
                "input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens, "
                "created_at = excluded.created_at",
                [
                    model,
                    prompt_version,
                    message_hash,
                    answer.response,
                    answer.input_tokens,
                    answer.output_tokens,
                    datetime.now(UTC).replace(tzinfo=None),
                ],
            )

    def count(self) -> int:
        with self._lock:
            row = self._con.execute("SELECT count(*) FROM llm_cache").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._con.close()
