"""The DuckDB store: one file (``structrag.duckdb``), the source of truth of an index.

:class:`DuckDBStore` opens (creating or upgrading the schema when writable), reads
(:class:`~structrag.store.duckdb.reader.DuckDBReader`) and starts the one transaction per
ingested source (:class:`~structrag.store.duckdb.writer.DuckDBTransaction`).
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from structrag.errors import IndexStateError
from structrag.models import Conversation
from structrag.store.duckdb import schema
from structrag.store.duckdb.reader import DuckDBReader, first_row
from structrag.store.duckdb.writer import DuckDBTransaction, utc_now
from structrag.store.protocols import SourceRecord

DB_FILENAME = "structrag.duckdb"


class DuckDBStore(DuckDBReader):
    """A :class:`~structrag.store.protocols.KnowledgeStore` on one DuckDB file."""

    def __init__(self, directory: str | Path, *, read_only: bool = False, create: bool = True):
        self.directory = Path(directory)
        self.path = self.directory / DB_FILENAME
        self.read_only = read_only
        self._generation: int | None = None
        if not self.path.exists():
            if read_only or not create:
                raise IndexStateError(
                    f"no index at {self.directory}",
                    hint=f"create one with `structrag ingest FILE --db {self.directory}`",
                )
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise IndexStateError(
                    f"cannot create the index directory {self.directory}: {exc.strerror}",
                    hint="point --db at a new or existing directory you can write to",
                ) from exc
        self.con = _connect(self.path, read_only=read_only)
        try:
            self._check_schema()
        except BaseException:
            self.con.close()
            raise

    def _check_schema(self) -> None:
        found = schema.stored_version(self.con)
        if found == schema.SCHEMA_VERSION:
            return
        if found is None and not self.read_only:
            self.con.execute("BEGIN TRANSACTION")
            schema.create(self.con)
            self.con.execute("COMMIT")
            return
        if found is not None and schema.OLDEST_UPGRADABLE <= found < schema.SCHEMA_VERSION:
            if self.read_only:
                raise SchemaUpgradeNeeded(found)
            schema.upgrade(self.con, found)
            return
        raise IndexStateError(
            f"index {self.directory} has schema version {found}, this structrag reads "
            f"version {schema.SCHEMA_VERSION} (and upgrades {schema.OLDEST_UPGRADABLE} and later)",
            hint="re-create the index with this version of structrag, or use the version "
            "that wrote it",
        )

    # -- meta -----------------------------------------------------------------------------

    def close(self) -> None:
        with suppress(duckdb.Error):
            self.con.close()

    def get_setting(self, key: str) -> str | None:
        row = first_row(self.con.execute("SELECT value FROM meta WHERE key = ?", [key]))
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str) -> None:
        self.con.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )

    def generation(self) -> int:
        """The number of committed ingests. Cached: only this connection can write (DuckDB
        locks the file), so it changes only through :meth:`committed`."""
        if self._generation is None:
            self._generation = int(self.get_setting("generation") or 0)
        return self._generation

    def committed(self, generation: int) -> None:
        """A transaction of this store committed ``generation``."""
        self._generation = generation

    # -- writing --------------------------------------------------------------------------

    def begin(
        self, source: SourceRecord | None, conversations: list[Conversation]
    ) -> DuckDBTransaction:
        """Start an ingest's transaction (see :class:`DuckDBTransaction`); a live write (a
        memory added through the memory API) has no source."""
        if self.read_only:
            raise IndexStateError("the index was opened read-only")
        return DuckDBTransaction(self, source, conversations)

    def answer_table(self) -> DuckDBAnswerTable:
        """The LLM answer cache, on its own connection (see :class:`DuckDBAnswerTable`)."""
        return DuckDBAnswerTable(self)

    def reader(self) -> ReaderStore:
        """A read-only store on a new connection to this store's database, for another
        thread of this process (a server's readers; see :class:`ReaderStore`)."""
        return ReaderStore(self)


class ReaderStore(DuckDBStore):
    """A read-only view of a :class:`DuckDBStore` that another thread of the same process
    writes: its own DuckDB connection (a cursor), which sees committed transactions only.
    Another connection commits, so the generation is read afresh, except inside
    :meth:`snapshot`, where every read sees one committed state (and its generation is
    read once)."""

    def __init__(self, writer: DuckDBStore) -> None:  # opens no file: shares the writer's
        self.directory = writer.directory
        self.path = writer.path
        self.read_only = True
        self._generation = None
        self.con = writer.con.cursor()

    def generation(self) -> int:
        if self._generation is None:  # outside a snapshot: whatever is committed now
            return int(self.get_setting("generation") or 0)
        return self._generation

    def committed(self, generation: int) -> None:
        raise IndexStateError("a reader store does not write")

    @contextmanager
    def snapshot(self) -> Iterator[int]:
        """Reads inside see one committed state of the store; yields its generation."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            self._generation = int(self.get_setting("generation") or 0)
            yield self._generation
        finally:
            self._generation = None
            with suppress(duckdb.Error):
                self.con.execute("ROLLBACK")


class SchemaUpgradeNeeded(IndexStateError):
    """A read-only open found an index that needs upgrading (which needs the write lock)."""

    def __init__(self, found: int) -> None:
        super().__init__(
            f"the index has schema version {found}; it is upgraded to "
            f"{schema.SCHEMA_VERSION} the next time it is opened for writing",
            hint="run any writing command once (e.g. `structrag reindex --db DIR`)",
        )
        self.found = found


class DuckDBAnswerTable:
    """LLM answers in the ``llm_cache`` table, written through a cursor of their own (a
    separate DuckDB connection to the same database, with its own transactions) and
    committed one by one, so answers survive when the ingest's transaction rolls back or
    the process is killed. One lock serialises the worker threads (a DuckDB connection
    refuses concurrent calls)."""

    def __init__(self, store: DuckDBStore) -> None:
        self.read_only = store.read_only
        self._con = store.con.cursor()
        self._lock = threading.Lock()
        self._closed = False

    def get_many(
        self, model: str, prompt_version: str, hashes: Sequence[str]
    ) -> dict[str, tuple[str, int, int]]:
        """``hash -> (response JSON, input tokens, output tokens)`` for cached answers."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        with self._lock:
            rows = self._con.execute(
                "SELECT message_hash, response, input_tokens, output_tokens FROM llm_cache "
                "WHERE model = ? AND prompt_version = ? "
                "AND message_hash IN (SELECT unnest($3::VARCHAR[]))",
                [model, prompt_version, wanted],
            ).fetchall()
        return {str(h): (str(r), int(i), int(o)) for h, r, i, o in rows}

    def put(
        self,
        model: str,
        prompt_version: str,
        message_hash: str,
        response: str,
        input_tokens: int,
        output_tokens: int,
    ) -> None:
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
                    response,
                    input_tokens,
                    output_tokens,
                    utc_now(),
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


def lock_timeout() -> float:
    """Seconds to wait for another process's lock on an index before giving up
    (``STRUCTRAG_LOCK_TIMEOUT``, default 10)."""
    try:
        return max(0.0, float(os.environ.get("STRUCTRAG_LOCK_TIMEOUT", "10")))
    except ValueError:
        return 10.0


def _connect(path: Path, *, read_only: bool) -> duckdb.DuckDBPyConnection:
    """Open the DuckDB file. DuckDB lets one process write or many read: when another
    process holds the file, wait for it (up to :func:`lock_timeout`), then say so."""
    deadline = time.monotonic() + lock_timeout()
    delay = 0.05
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" not in text.lower():
                raise IndexStateError(f"cannot open {path}: {text}") from exc
            if time.monotonic() >= deadline:
                holder = re.search(r"PID (\d+)", text)
                who = f" (process {holder.group(1)})" if holder else ""
                raise IndexStateError(
                    f"the index at {path.parent} is in use by another process{who}; waited "
                    f"{lock_timeout():g} s",
                    hint="one process writes an index at a time, and none reads it while one "
                    "writes: wait for the other command to finish, raise "
                    "STRUCTRAG_LOCK_TIMEOUT, or run `structrag serve` and let every command "
                    "go through it",
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        except duckdb.Error as exc:
            raise IndexStateError(
                f"{path} is not a structrag index or is damaged: {exc}",
                hint="point --db at an index directory, or re-create the index",
            ) from exc
