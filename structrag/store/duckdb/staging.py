"""An ingest staged beside the store, then merged into it in one short transaction.

Extraction takes minutes for a large file; holding the store's file that long would shut
every other process out (DuckDB lets one process write a file, or many read it). So an
ingest writes its rows into a staging file of its own (in its staging folder, see
:mod:`structrag.store.workspace`) while it extracts, with the store free for readers
meanwhile, and takes the store only to copy the rows over: about half a second for a
million rows (DuckDB copies column-wise from the attached file).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import duckdb

from structrag.errors import CheckpointFailed
from structrag.models import Conversation
from structrag.store.duckdb.lease import MEMORY_LIMIT
from structrag.store.duckdb.writer import (
    STAGED_CHANGES,
    TABLE_COLUMNS,
    DuckDBTransaction,
    Owner,
    RowsTransaction,
    RowWriter,
    utc_now,
)
from structrag.store.protocols import SourceRecord

_STAGED_DELETES = "staged_deletes"

T = TypeVar("T")


#: DuckDB's memory limit while a staged ingest is merged into the store.
MERGE_MEMORY_LIMIT = "256MB"
#: What DuckDB may keep cached once a merge is committed: the blocks it read and wrote
#: stay in its buffer pool otherwise, up to the store's limit. Files of 25,000 LoCoMo
#: messages ingested one after the other left ~25 MB more in the pool after each (30 MB
#: after the first, 127 MB after the fifth), and the writer of a 40-file,
#: 1,000,000-message ingest peaked at 1,976 MB against 1,049 MB at 100,000; with this,
#: 30 MB after each.
AFTER_MERGE_LIMIT = "32MB"
#: A log size DuckDB never reaches: its own checkpoint is left out of a merge's commit.
NO_CHECKPOINT = "1TB"


class StagedTransaction(RowsTransaction):
    """One ingest's writes: chunks go into the staging file; :meth:`commit` merges them
    into the store (and only then takes its file)."""

    def __init__(
        self,
        store: Owner,
        folder: Path,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.folder = folder
        self.path = folder / "store.duckdb"
        self.source = source
        self.conversations = conversations
        self.settings = dict(settings or {})
        self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(
            str(self.path), config={"memory_limit": "256MB"}
        )
        try:
            for table, columns in TABLE_COLUMNS.items():
                body = ", ".join(f"{name} {sql_type}" for name, sql_type in columns)
                self._con.execute(f"CREATE TABLE {table} ({body})")
            for table in (STAGED_CHANGES, _STAGED_DELETES):
                self._con.execute(f"CREATE TABLE {table} (mkey BIGINT)")
            self.rows = RowWriter(self._con, None, utc_now(), staged=True)
        except BaseException:
            self.rollback()
            raise

    def delete(self, mkeys: Sequence[int]) -> None:
        assert self._con is not None
        try:
            self._con.executemany(
                f"INSERT INTO {_STAGED_DELETES} VALUES (?)", [[int(k)] for k in mkeys]
            )
        except BaseException:
            self.rollback()
            raise

    def commit(
        self,
        before: Callable[[], None] | None = None,
        digest: Callable[[str], bytes | None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Merge the staged rows into the store in one transaction (``before`` writes what
        else belongs to it, once the rows are in, ``digest`` the digests of the
        conversations written, and ``ready`` runs last); returns the new store
        generation."""
        assert self._con is not None
        try:
            deletes = [
                int(r[0])
                for r in self._con.execute(f"SELECT mkey FROM {_STAGED_DELETES}").fetchall()
            ]
            self._con.close()
            self._con = None
            con = self.store.hold()
            try:
                con.execute(f"ATTACH '{_quoted(self.path)}' AS stage (READ_ONLY)")
                try:
                    generation = self._merge(con, deletes, before, digest, ready)
                finally:
                    with contextlib.suppress(duckdb.Error):
                        con.execute("DETACH stage")
            finally:
                self.store.let_go()
        finally:
            self._discard()
        return generation

    def _merge(
        self,
        con: duckdb.DuckDBPyConnection,
        deletes: Sequence[int],
        before: Callable[[], None] | None,
        digest: Callable[[str], bytes | None] | None,
        ready: Callable[[], None] | None,
    ) -> int:
        """Merge the attached stage in one transaction, its inserts with DuckDB held to
        :data:`MERGE_MEMORY_LIMIT` (the merge of a million messages otherwise took ~900 MB
        more, the peak of the whole ingest) and its commit under the store's own limit; a
        merge that runs out of memory is done again under the store's own limit. The
        commit writes the log only; the checkpoint follows, see :func:`checkpoint`."""
        for limit in (MERGE_MEMORY_LIMIT, MEMORY_LIMIT):
            con.execute(f"SET memory_limit = '{limit}'")
            transaction: DuckDBTransaction | None = None
            try:
                try:
                    transaction = DuckDBTransaction(
                        self.store, self.source, self.conversations, self.settings
                    )
                    if deletes:
                        transaction.delete(deletes)
                    transaction.merge("stage")
                except duckdb.OutOfMemoryException:
                    if transaction is not None:
                        transaction.rollback()
                    if limit == MEMORY_LIMIT:
                        raise
                    continue
                # The commit writes the merged rows out: under the store's own limit, as
                # before (at 1M messages it failed to pin a block under the merge's), and
                # without DuckDB's own checkpoint, which comes after it, on its own.
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
                commit = functools.partial(transaction.commit, before, digest, ready)
                generation = commit_then_checkpoint(con, commit)
                # A lower limit evicts what is cached and not pinned (what is pinned stays:
                # then DuckDB refuses the limit, and nothing is lost but the memory).
                with contextlib.suppress(duckdb.OutOfMemoryException):
                    con.execute(f"SET memory_limit = '{AFTER_MERGE_LIMIT}'")
                return generation
            finally:
                with contextlib.suppress(duckdb.Error):  # a fatal error closed it, say
                    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
        raise AssertionError("unreachable: the last limit raises")  # pragma: no cover

    def rollback(self) -> None:
        self._discard()

    def _discard(self) -> None:
        if self._con is not None:
            with contextlib.suppress(duckdb.Error):
                self._con.close()
            self._con = None
        for leftover in (self.path, self.path.with_name(self.path.name + ".wal")):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()


def commit_then_checkpoint(con: duckdb.DuckDBPyConnection, commit: Callable[[], T]) -> T:
    """Run ``commit`` (what commits the open transaction on ``con``) with DuckDB's own
    checkpoint left out of it, then :func:`checkpoint`; returns what ``commit`` did."""
    threshold = current_setting(con, "checkpoint_threshold")
    con.execute(f"SET checkpoint_threshold = '{NO_CHECKPOINT}'")
    try:
        result = commit()
    finally:
        con.execute(f"SET checkpoint_threshold = '{threshold}'")
    checkpoint(con)
    return result


def checkpoint(con: duckdb.DuckDBPyConnection) -> None:
    """Write what the store's log holds into its file, with DuckDB held to
    :data:`MERGE_MEMORY_LIMIT`; under the store's own limit if that is too little.

    DuckDB checkpoints by itself at the commit that takes its log past 16 MiB, and then
    under the store's limit (1 GB): in a 1,000,000-message ingest of 40 files, one commit
    in three or four took 300-700 MB more than the rest (the writer's peak of the whole
    ingest), and a store of 975,000 messages given copies of a 25,000-message file showed
    the same: 969 MB at its fifth commit, against 463 with this checkpoint
    (``benchmarks/checkpoint_memory.py``). The data is committed before: a checkpoint
    that fails (out of memory twice, or another transaction in the way) loses nothing,
    and the next one writes it."""
    for limit in (MERGE_MEMORY_LIMIT, MEMORY_LIMIT):
        try:
            con.execute(f"SET memory_limit = '{limit}'")
            con.execute("CHECKPOINT")
            return
        except duckdb.OutOfMemoryException:
            continue
        except duckdb.FatalException as exc:  # the connection is gone (a full disk, say)
            raise CheckpointFailed(
                "the write was committed to the store's log, but DuckDB could not write "
                f"its checkpoint and closed the store: {_first_line(exc)}",
                hint="free space (or fix what the message names), then run the command "
                "again: opening the index replays the log, nothing committed is lost, and "
                "what was written is not written twice",
            ) from None
        except duckdb.Error:
            return
        finally:
            with contextlib.suppress(duckdb.Error):
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")


def _first_line(exc: BaseException) -> str:
    """What a fatal DuckDB error says went wrong: its ``Original error`` (a full disk: "No
    space left on device") when it names one, else its first line."""
    text = str(exc)
    found = re.search(r'Original error: "?([^"\n]+)', text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return found.group(1).strip() if found else (lines[0] if lines else type(exc).__name__)


def current_setting(con: duckdb.DuckDBPyConnection, name: str) -> str:
    """A DuckDB setting's current value, as ``SET`` takes it back."""
    row = con.execute("SELECT current_setting(?)", [name]).fetchone()
    assert row is not None
    return str(row[0])


def _quoted(path: Path) -> str:
    return str(path).replace("'", "''")
