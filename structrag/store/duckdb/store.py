"""The DuckDB store: one file (``structrag.duckdb``), the source of truth of an index.

:class:`DuckDBStore` opens (creating or upgrading the schema when writable), reads
(:class:`~structrag.store.duckdb.reader.DuckDBReader`) and starts the one transaction per
ingested source (:class:`~structrag.store.duckdb.writer.DuckDBTransaction`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

import duckdb

from structrag.errors import IndexStateError
from structrag.models import Conversation, SemanticRef
from structrag.store.duckdb import schema
from structrag.store.duckdb.lease import CursorLease, Lease, others_waiting
from structrag.store.duckdb.reader import DuckDBReader, damaged_store, unreadable
from structrag.store.duckdb.staging import (
    NO_CHECKPOINT,
    StagedTransaction,
    checkpoint,
    current_setting,
)
from structrag.store.duckdb.writer import DuckDBTransaction, Owner, replace_digests, utc_now
from structrag.store.protocols import ExtractionRecord, SourceRecord, StoredMessage
from structrag.store.workspace import WRITER_LOCK

DB_FILENAME = "structrag.duckdb"
#: The log size from which a commit of small sources (:class:`SourcesTransaction`) is
#: followed by a checkpoint: DuckDB's own threshold (it checkpoints by itself at the
#: commit that takes its log past 16 MiB, under the store's memory limit).
CHECKPOINT_LOG_BYTES = 16 * 1024 * 1024


#: What an index directory may hold before its store exists: the text index, the writer
#: lock and the other dot-entries an index keeps, DuckDB's log and spill folder, Ray's
#: shards; and the ``lost+found`` at the root of a volume mounted for the index.
_INDEX_ENTRIES = frozenset(
    {
        "whoosh",
        "ray-shards",
        "server.json",
        f"{DB_FILENAME}.wal",
        f"{DB_FILENAME}.tmp",
        "lost+found",
    }
)


def may_write(directory: Path) -> bool:
    """Whether this process may write the index at ``directory``: its folder, and its
    store and writer lock where they exist (a read-only folder or file system, files of
    another user: no)."""
    files = (directory / DB_FILENAME, directory / WRITER_LOCK)
    return os.access(directory, os.W_OK) and all(
        not path.exists() or os.access(path, os.W_OK) for path in files
    )


def refuse_foreign_folder(directory: Path) -> None:
    """Refuse to create an index in a directory that holds files of its own (a folder of
    chats or documents, the home folder): the index's files would be mixed with them. An
    empty or missing directory, or one holding only an index's own entries or hidden
    files (``.gitkeep``, ``.DS_Store``), is fine."""
    try:
        entries = sorted(
            entry.name
            for entry in directory.iterdir()
            if not entry.name.startswith(".") and entry.name not in _INDEX_ENTRIES
        )
    except (FileNotFoundError, NotADirectoryError):
        return
    except OSError as exc:
        raise IndexStateError(
            f"cannot read the index directory {directory}: {exc.strerror}",
            hint="point --db at a new or existing directory you can write to",
        ) from exc
    if entries:
        shown = ", ".join(entries[:3]) + (
            f" and {len(entries) - 3} more" if len(entries) > 3 else ""
        )
        raise IndexStateError(
            f"{directory} is not an index (it has no {DB_FILENAME}) and holds other files "
            f"({shown}); an index is not created among them",
            hint="pass --db a new or empty directory (structrag creates it), or the directory "
            "of an existing index",
        )


class DuckDBStore(DuckDBReader):
    """A :class:`~structrag.store.protocols.KnowledgeStore` on one DuckDB file."""

    def __init__(self, directory: str | Path, *, read_only: bool = False, create: bool = True):
        self.directory = Path(directory)
        self.path = self.directory / DB_FILENAME
        self.read_only = read_only
        self._generation: tuple[int, int] | None = None  # (lease.opened, generation)
        self._ids_lock = threading.Lock()
        self._next_mkey = self._next_ref = 0
        #: The view of the store (times opened, generation) the next ids were read in.
        self._ids_view: tuple[int, int] | None = None
        if not self.path.exists():
            if read_only or not create:
                raise IndexStateError(
                    f"no index at {self.directory}",
                    hint=f"create one with `structrag ingest FILE --db {self.directory}`",
                )
            refuse_foreign_folder(self.directory)
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise IndexStateError(
                    f"cannot create the index directory {self.directory}: {exc.strerror}",
                    hint="point --db at a new or existing directory you can write to",
                ) from exc
        self._lease = Lease(self.path, read_only=read_only, on_open=self._check_schema)
        try:
            with self._lease.using():
                pass  # open now: a missing, locked or damaged index says so at once
        except BaseException:
            self._lease.close()
            raise

    def _check_schema(self, con: duckdb.DuckDBPyConnection) -> None:
        try:
            found = schema.stored_version(con)
        except duckdb.IOException as exc:  # the file opened, and its first read failed
            if not unreadable(exc):
                raise
            raise damaged_store(self.path, exc) from None
        if found == schema.SCHEMA_VERSION:
            return
        if found is None and not self.read_only:
            con.execute("BEGIN TRANSACTION")
            schema.create(con)
            con.execute("COMMIT")
            return
        if found is None:  # read-only: a first write was killed before it made the tables
            raise IndexStateError(
                f"no index at {self.directory}: its {DB_FILENAME} holds no tables yet (the "
                "first write to it stopped before it made them)",
                hint=f"create the index with `structrag ingest FILE --db {self.directory}` "
                "(it writes into that file)",
            )
        if schema.OLDEST_UPGRADABLE <= found < schema.SCHEMA_VERSION:
            if self.read_only:
                raise SchemaUpgradeNeeded(found)
            schema.upgrade(con, found)
            return
        raise IndexStateError(
            f"index {self.directory} has schema version {found}, this structrag reads "
            f"version {schema.SCHEMA_VERSION} (and upgrades {schema.OLDEST_UPGRADABLE} and later)",
            hint="re-create the index with this version of structrag, or use the version "
            "that wrote it",
        )

    # -- meta -----------------------------------------------------------------------------

    def close(self) -> None:
        self._lease.close()

    @contextmanager
    def reading(self) -> Iterator[None]:
        """One consistent view for a block of reads: no other process writes meanwhile
        (and this one gives way to a waiting process only between such blocks)."""
        with self._lease.using():
            yield

    def hold(self) -> duckdb.DuckDBPyConnection:
        """The connection, kept (by this thread) until :meth:`let_go`."""
        return self._lease.hold()

    def let_go(self) -> None:
        self._lease.let_go()

    def release(self) -> None:
        """Let other processes at the file now (the next use opens it again)."""
        self._lease.release()

    def get_setting(self, key: str) -> str | None:
        row = self._first("SELECT value FROM meta WHERE key = ?", [key])
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str) -> None:
        self._run(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )

    def generation(self) -> int:
        """The number of committed writes. Cached while the connection stays open (no other
        process can write meanwhile); read again after the file was given up and opened
        again, and set by this process's own commits (:meth:`committed`)."""
        with self._lease.using():
            opened = self._lease.opened
            if self._generation is None or self._generation[0] != opened:
                value = int(self.get_setting("generation") or 0)
                self._generation = (opened, value)
            return self._generation[1]

    def committed(self, generation: int) -> None:
        """A transaction of this store committed ``generation`` (numbered from
        :meth:`reserve_ids`, so the ids reserved stay ahead of what is stored)."""
        if self._ids_view == (self._lease.opened, generation - 1):
            self._ids_view = (self._lease.opened, generation)
        self._generation = (self._lease.opened, generation)

    # -- writing --------------------------------------------------------------------------

    def begin(
        self,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> DuckDBTransaction:
        """A write straight into the store (a memory: no ``source``), holding the file
        until it commits; see :class:`DuckDBTransaction`."""
        self._writable()
        return DuckDBTransaction(self, source, conversations, settings)

    def begin_sources(
        self,
        source: SourceRecord,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> SourcesTransaction:
        """A write of several small ingested sources straight into the store, in one
        transaction, holding the file until it commits; see :class:`SourcesTransaction`."""
        self._writable()
        return SourcesTransaction(self, self._wal(), source, conversations, settings)

    def others_waiting(self) -> bool:
        """Whether another process waits for the store's file (a reader, say)."""
        return others_waiting(self.directory) is not None

    def checkpoint(self) -> None:
        """Write what the store's log holds into its file, if it holds anything (small
        sources' commits leave their rows there, see :class:`SourcesTransaction`)."""
        if self.read_only or not _size(self._wal()):
            return
        con = self.hold()
        try:
            checkpoint(con)
        finally:
            self.let_go()

    def _wal(self) -> Path:
        return self.path.with_name(self.path.name + ".wal")

    def write_digests(
        self, conversations: Sequence[str], digest: Callable[[str], bytes | None]
    ) -> None:
        """Store the digests ``digest`` makes of ``conversations`` (dropping theirs), in one
        transaction that leaves the generation as it is: a digest changes no answer, so
        readers and the text index stay as they are."""
        with self._transaction() as con:
            replace_digests(con, conversations, digest)

    def drop_conversation(self, conversation: str) -> None:
        """Delete a conversation's own rows once its messages are gone (their deletion
        is a transaction of its own, before: DuckDB refuses to delete a row whose
        referencing rows went in the same transaction): the conversation, its aliases and
        its digest. Leaves the generation as it is (the messages' deletion moved it)."""
        with self._transaction() as con:
            for table in ("aliases", "digests", "conversations"):
                con.execute(f"DELETE FROM {table} WHERE conversation = ?", [conversation])

    @contextmanager
    def _transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The store's connection held in a transaction of its own: committed when the
        block ends, rolled back when it raises."""
        self._writable()
        con = self.hold()
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                yield con
                con.execute("COMMIT")
            except BaseException:
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
                raise
        finally:
            self.let_go()

    def stage(
        self,
        folder: Path,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> StagedTransaction:
        """An ingest's write, kept in ``folder`` until it commits (the store stays free
        meanwhile); see :class:`StagedTransaction`."""
        self._writable()
        return StagedTransaction(self, folder, source, conversations, settings)

    def _writable(self) -> None:
        if self.read_only:
            raise IndexStateError("the index was opened read-only")

    def reserve_ids(self, messages: int, refs: int) -> tuple[int, int]:
        """Numbers for ``messages`` new messages and ``refs`` new semantic refs, not given
        out before by this process (the writer lock keeps other processes out): the
        first of each range. Writes in flight number their rows from here."""
        with self._ids_lock, self._lease.using():
            view = (self._lease.opened, self.generation())
            if view != self._ids_view:
                # Another process may have written since: start above what is stored.
                stored_mkey, stored_ref = self.next_ids()
                self._next_mkey = max(stored_mkey, self._next_mkey)
                self._next_ref = max(stored_ref, self._next_ref)
                self._ids_view = view
            mkey, ref = self._next_mkey, self._next_ref
            self._next_mkey += messages
            self._next_ref += refs
            return mkey, ref

    def answer_table(self) -> DuckDBAnswerTable:
        """The LLM answer cache, on its own connection (see :class:`DuckDBAnswerTable`)."""
        return DuckDBAnswerTable(self)

    def reader(self) -> ReaderStore:
        """A read-only store on a new connection to this store's database, for another
        thread of this process (a server's readers; see :class:`ReaderStore`). From then on
        this process keeps the file (other processes wait for it until it closes)."""
        return ReaderStore(self)


class SourcesTransaction(DuckDBTransaction):
    """Several small ingested sources (a folder of short chat files) written straight into
    the store in one transaction: each has its ``sources`` row, and its messages name it;
    all of them commit together, or none. A staged write costs a few tenths of a second
    whatever its size (a staging file made, merged, checkpointed), more than extracting a
    file of a few messages.

    Rows added are kept and inserted together (a statement costs milliseconds, whatever
    its rows): the messages one statement per source, everything else in one per table;
    at :meth:`flush`, which the commit and a deletion call first (and the ingest, before it
    reads a conversation whose rows wait here: :meth:`buffered`).

    Its commit leaves DuckDB's own checkpoint out, and checkpoints as a staged merge does
    (:func:`~structrag.store.duckdb.staging.checkpoint`) once the log holds
    :data:`CHECKPOINT_LOG_BYTES`; :meth:`DuckDBStore.checkpoint` writes what is left at the
    end of an ingest."""

    def __init__(
        self,
        store: Owner,
        wal: Path,
        source: SourceRecord,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.wal = wal
        #: ``(source_id, new, changed)`` messages waiting, in the order added.
        self._messages: list[tuple[int | None, list[StoredMessage], list[StoredMessage]]] = []
        self._refs: list[tuple[int, int, SemanticRef]] = []
        self._aliases: dict[tuple[str, str, str], tuple[str, str, str, str]] = {}
        self._embeddings: list[tuple[int, str, list[float]]] = []
        self._extractions: list[ExtractionRecord] = []
        self._waiting: set[str] = set()
        super().__init__(store, source, conversations, settings)

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        if self._messages and self._messages[-1][0] == self.source_id:
            self._messages[-1][1].extend(new)
            self._messages[-1][2].extend(changed)
        else:
            self._messages.append((self.source_id, list(new), list(changed)))
        self._refs.extend(refs)
        for alias in aliases:  # the first of a key stays, as an insert of the next ignores it
            self._aliases.setdefault((alias[0], alias[1], alias[2]), alias)
        self._embeddings.extend(embeddings)
        self._extractions.extend(extractions)
        self._waiting.update(s.message.conversation for s in (*new, *changed))
        self._waiting.update(a[0] for a in aliases)

    def buffered(self) -> set[str]:
        """The conversations with rows added and not inserted yet (reads miss them)."""
        return set(self._waiting)

    def flush(self) -> None:
        """Insert the rows added since the last flush."""
        if not self._waiting and not self._messages:
            return
        try:
            for source_id, new, changed in self._messages:
                self.rows.source_id = source_id
                self.rows.add(new, changed, ())
            self.rows.source_id = self.source_id
            self.rows.add(
                (),
                (),
                self._refs,
                list(self._aliases.values()),
                self._embeddings,
                self._extractions,
            )
        except BaseException:
            self.rollback()
            raise
        self._clear()

    def _clear(self) -> None:
        self._messages, self._refs, self._aliases = [], [], {}
        self._embeddings, self._extractions, self._waiting = [], [], set()

    def delete(self, mkeys: Sequence[int]) -> None:
        self.flush()
        super().delete(mkeys)

    def rollback(self) -> None:
        self._clear()
        super().rollback()

    def next_source(
        self,
        source: SourceRecord,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        """Log the source written so far as finished (its counts, as its record holds
        them now) and start the next one: rows added from now on are ``source``'s."""
        try:
            self._finish_source()
            self._conversations(conversations)
            for key, value in (settings or {}).items():
                self.store.set_setting(key, value)
            self.source = source
            self._log_source(source)
            self.rows.source_id = self.source_id
        except BaseException:
            self.rollback()
            raise

    def _finish_source(self) -> None:
        """What :meth:`DuckDBTransaction.commit` writes of the last source."""
        src = self.source
        assert src is not None
        self.con.execute(
            "UPDATE sources SET finished_at = ?, messages_added = ?, messages_updated = ?, "
            "messages_unchanged = ?, refs_added = ? WHERE source_id = ?",
            [
                utc_now(),
                src.messages_added,
                src.messages_updated,
                src.messages_unchanged,
                src.refs_added,
                self.source_id,
            ],
        )

    def commit(
        self,
        before: Callable[[], None] | None = None,
        digest: Callable[[str], bytes | None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        con = self.store.hold()  # kept past the commit, for the settings and checkpoint
        try:
            try:
                self.flush()
                threshold = current_setting(con, "checkpoint_threshold")
                con.execute(f"SET checkpoint_threshold = '{NO_CHECKPOINT}'")
            except BaseException:
                self.rollback()
                raise
            try:
                generation = super().commit(before, digest, ready)
            finally:
                with suppress(duckdb.Error):
                    con.execute(f"SET checkpoint_threshold = '{threshold}'")
            if _size(self.wal) >= CHECKPOINT_LOG_BYTES:
                checkpoint(con)
            return generation
        finally:
            self.store.let_go()


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ReaderStore(DuckDBStore):
    """A read-only view of a :class:`DuckDBStore` that another thread of the same process
    writes: its own DuckDB connection (a cursor of the writer's, see
    :class:`~structrag.store.duckdb.lease.CursorLease`), which sees committed
    transactions only. Another connection commits, so the generation is read afresh,
    except inside :meth:`snapshot`, where every read sees one committed state (and its
    generation is read once)."""

    def __init__(self, writer: DuckDBStore) -> None:  # opens no file: shares the writer's
        self.directory = writer.directory
        self.path = writer.path
        self.read_only = True
        self._snapshot: int | None = None
        self._generation = None
        self._ids_lock = threading.Lock()
        self._next_mkey = self._next_ref = 0
        self._ids_view = None
        self._lease = CursorLease(writer._lease)

    def generation(self) -> int:
        if self._snapshot is None:  # outside a snapshot: whatever is committed now
            return int(self.get_setting("generation") or 0)
        return self._snapshot

    def committed(self, generation: int) -> None:
        raise IndexStateError("a reader store does not write")

    @contextmanager
    def snapshot(self) -> Iterator[int]:
        """Reads inside see one committed state of the store; yields its generation."""
        con = self._lease.hold()
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                self._snapshot = int(self.get_setting("generation") or 0)
                yield self._snapshot
            finally:
                self._snapshot = None
                with suppress(duckdb.Error):
                    con.execute("ROLLBACK")
        finally:
            self._lease.let_go()


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
        self._store = store
        self._lock = threading.Lock()
        self._closed = False

    @contextmanager
    def _cursor(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A cursor of its own for one call: its own transaction, committed at once."""
        with self._store.using() as con:
            cursor = con.cursor()
            try:
                yield cursor
            finally:
                cursor.close()

    def get_many(
        self, model: str, prompt_version: str, hashes: Sequence[str]
    ) -> dict[str, tuple[str, int, int]]:
        """``hash -> (response JSON, input tokens, output tokens)`` for cached answers."""
        wanted = sorted(set(hashes))
        if not wanted:
            return {}
        with self._lock, self._cursor() as cursor:
            rows = cursor.execute(
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
            with self._cursor() as cursor:
                cursor.execute(
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
        with self._lock, self._cursor() as cursor:
            row = cursor.execute("SELECT count(*) FROM llm_cache").fetchone()
        return int(row[0]) if row else 0

    def close(self) -> None:
        with self._lock:
            self._closed = True
