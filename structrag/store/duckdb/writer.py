"""Writes to the DuckDB store: one transaction per ingested source, fed in chunks.

Rows are inserted column-wise through a registered numpy frame
(``INSERT ... SELECT ... FROM frame``), two orders of magnitude faster than
``executemany``. Table and column names are our own constants; values are data.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from typing import Any, Protocol

import duckdb
import numpy as np

from structrag.analysis import term_key
from structrag.models import Action, Conversation, Entity, Facet, SemanticRef
from structrag.store.duckdb.reader import first_row
from structrag.store.interrupted import duckdb_interrupted
from structrag.store.protocols import ExtractionRecord, MemoryInfo, SourceRecord, StoredMessage


class Owner(Protocol):
    """What a transaction needs of its store: the connection and the generation counter."""

    def hold(self) -> duckdb.DuckDBPyConnection: ...

    def let_go(self) -> None: ...

    def generation(self) -> int: ...

    def set_setting(self, key: str, value: str) -> None: ...

    def committed(self, generation: int) -> None: ...


Columns = Sequence[tuple[str, str]]
#: Up to this many rows, values are bound in one statement instead of through a frame
#: (a frame costs about 1.8 ms whatever its size; bound values 0.8 ms for one row and
#: 0.15 ms more for each other).
SMALL_INSERT = 6


def to_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def bulk_insert(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Columns,
    rows: Sequence[tuple[Any, ...]],
    *,
    ignore_existing: bool = False,
) -> None:
    """Insert rows column-wise. With ``ignore_existing``, rows whose key the table already
    holds are left out (``rows`` must not repeat a key)."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    verb = "INSERT OR IGNORE" if ignore_existing else "INSERT"
    if len(rows) <= SMALL_INSERT:
        # A live write adds a row or two to most tables.
        row = "(" + ", ".join(f"?::{sql_type}" for _, sql_type in columns) + ")"
        con.execute(
            f"{verb} INTO {table} ({names}) VALUES {', '.join([row] * len(rows))}",
            [value for r in rows for value in r],
        )
        return
    frame: dict[str, np.ndarray] = {}
    for (name, sql_type), column in zip(columns, zip(*rows, strict=True), strict=True):
        if sql_type in ("BIGINT", "INTEGER") and None not in column:
            frame[name] = np.asarray(column, dtype=np.int64)
        else:
            array = np.empty(len(column), dtype=object)
            array[:] = list(column)
            frame[name] = array
    selects = ", ".join(f'"{name}"::{sql_type}' for name, sql_type in columns)
    con.register("_structrag_rows", frame)
    try:
        con.execute(f"{verb} INTO {table} ({names}) SELECT {selects} FROM _structrag_rows")
    finally:
        con.unregister("_structrag_rows")


#: A digest is stored in parts of this many bytes: DuckDB reads a blob of 32 KB or more
#: several times slower (a first question on a conversation took 3 ms more).
DIGEST_PART = 8_000
#: A conversation of more messages gets no digest (its first question reads the tables):
#: a digest is built whole in memory at commit, about 1 KB per message before it is
#: compressed, and read whole by a first question.
DIGEST_MAX_MESSAGES = 50_000
#: Digest parts are inserted once about this many bytes of them are waiting.
DIGEST_BATCH_BYTES = 16_000_000
DIGEST_COLUMNS: Columns = (("conversation", "VARCHAR"), ("part", "INTEGER"), ("data", "BLOB"))

MESSAGE_COLUMNS: Columns = (
    ("mkey", "BIGINT"),
    ("conversation", "VARCHAR"),
    ("message_id", "VARCHAR"),
    ("ordinal", "INTEGER"),
    ("speaker", "VARCHAR"),
    ("recipients", "VARCHAR[]"),
    ("ts", "TIMESTAMP"),
    ("text", "VARCHAR"),
    ("tags", "VARCHAR[]"),
    ("metadata", "JSON"),
    ("content_hash", "BIGINT"),
    ("source_id", "INTEGER"),
    ("memory_table", "VARCHAR"),
    ("agent", "VARCHAR"),
    ("world", "VARCHAR"),
    ("created_at", "TIMESTAMP"),
    ("importance", "VARCHAR"),
    ("is_unique", "BOOLEAN"),
    ("status", "VARCHAR"),
)
ALIAS_COLUMNS: Columns = (
    ("conversation", "VARCHAR"),
    ("term", "VARCHAR"),
    ("related", "VARCHAR"),
    ("source", "VARCHAR"),
)
EMBEDDING_COLUMNS: Columns = (("mkey", "BIGINT"), ("model", "VARCHAR"), ("vector", "FLOAT[]"))
EXTRACTION_COLUMNS: Columns = (
    ("mkey", "BIGINT"),
    ("conversation", "VARCHAR"),
    ("message_id", "VARCHAR"),
    ("extractor", "VARCHAR"),
    ("model", "VARCHAR"),
    ("attempts", "INTEGER"),
    ("extracted_at", "TIMESTAMP"),
    ("prompt_version", "VARCHAR"),
)
FAILURE_COLUMNS: Columns = (
    ("mkey", "BIGINT"),
    ("conversation", "VARCHAR"),
    ("message_id", "VARCHAR"),
    ("extractor", "VARCHAR"),
    ("model", "VARCHAR"),
    ("error", "VARCHAR"),
    ("attempts", "INTEGER"),
    ("failed_at", "TIMESTAMP"),
    ("prompt_version", "VARCHAR"),
)
_FACET_COLUMNS: Columns = (
    ("ref_id", "BIGINT"),
    ("position", "INTEGER"),
    ("name", "VARCHAR"),
    ("value", "VARCHAR"),
    ("number", "DOUBLE"),
    ("is_bool", "BOOLEAN"),
    ("units", "VARCHAR"),
)
KNOWLEDGE_COLUMNS: dict[str, Columns] = {
    "semantic_refs": (
        ("ref_id", "BIGINT"),
        ("mkey", "BIGINT"),
        ("conversation", "VARCHAR"),
        ("message_id", "VARCHAR"),
        ("kind", "VARCHAR"),
        ("span_start", "INTEGER"),
        ("span_end", "INTEGER"),
        ("extractor", "VARCHAR"),
        ("extractor_version", "VARCHAR"),
    ),
    "entities": (
        ("ref_id", "BIGINT"),
        ("name", "VARCHAR"),
        ("name_lower", "VARCHAR"),
        ("stem_key", "VARCHAR"),
        ("types", "VARCHAR[]"),
    ),
    "entity_facets": _FACET_COLUMNS,
    "actions": (
        ("ref_id", "BIGINT"),
        ("verbs", "VARCHAR[]"),
        ("verb", "VARCHAR"),
        ("tense", "VARCHAR"),
        ("subject", "VARCHAR"),
        ("object", "VARCHAR"),
        ("indirect_object", "VARCHAR"),
        ("negated", "BOOLEAN"),
    ),
    "action_params": _FACET_COLUMNS,
    "topics": (("ref_id", "BIGINT"), ("text", "VARCHAR"), ("stem_key", "VARCHAR")),
    "tag_refs": (("ref_id", "BIGINT"), ("text", "VARCHAR"), ("stem_key", "VARCHAR")),
    "properties": (("name", "VARCHAR"), ("value", "VARCHAR"), ("ref_id", "BIGINT")),
}
#: Every table an ingest fills, with the columns it writes.
TABLE_COLUMNS: dict[str, Columns] = {
    "messages": MESSAGE_COLUMNS,
    **KNOWLEDGE_COLUMNS,
    "aliases": ALIAS_COLUMNS,
    "embeddings": EMBEDDING_COLUMNS,
    "extractions": EXTRACTION_COLUMNS,
    "extraction_failures": FAILURE_COLUMNS,
}
#: The columns an edit of a message changes (the rest is its identity, or its memory).
_EDITABLE_COLUMNS = (
    "ordinal",
    "speaker",
    "recipients",
    "ts",
    "text",
    "tags",
    "metadata",
    "content_hash",
)
#: Tables whose rows belong to a semantic ref (deleted with it).
REF_TABLES = ("entities", "entity_facets", "actions", "action_params", "topics", "tag_refs")
#: Tables whose rows belong to a message, beside its refs.
MESSAGE_TABLES = (
    "semantic_refs",
    "embeddings",
    "extractions",
    "extraction_failures",
    "memory_access",
    "memory_sources",
    "fragments",
)


def _message_row(stored: StoredMessage, source_id: int | None, now: datetime) -> tuple[Any, ...]:
    m = stored.message
    memory = stored.memory or MemoryInfo()
    return (
        stored.mkey,
        m.conversation,
        m.id,
        m.ordinal,
        m.speaker,
        list(m.recipients),
        m.timestamp,
        m.text,
        list(m.tags),
        to_json(m.metadata),
        m.content_hash(),
        source_id,
        memory.table,
        memory.agent,
        memory.world,
        memory.created_at or now,
        memory.importance,
        memory.unique,
        memory.status,
    )


def knowledge_rows(
    refs: Sequence[tuple[int, int, SemanticRef]],
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows of every knowledge table for refs given as ``(ref_id, mkey, ref)``."""
    rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in KNOWLEDGE_COLUMNS}
    props = rows["properties"]

    def facets(table: str, rid: int, items: Iterable[Facet]) -> None:
        for position, f in enumerate(items):
            number = f.value if isinstance(f.value, float) else None
            text = f.value_text() if number is None else f"{f.value:g}"
            rows[table].append(
                (rid, position, f.name, text, number, isinstance(f.value, bool), f.units)
            )

    def prop(rid: int, name: str, value: str | None) -> None:
        if value:
            props.append((name, term_key(value), rid))

    for rid, mkey, ref in refs:
        k = ref.knowledge
        rows["semantic_refs"].append(
            (
                rid,
                mkey,
                ref.conversation,
                ref.message_id,
                k.kind,
                ref.span.start,
                ref.span.end,
                ref.extractor,
                ref.extractor_version,
            )
        )
        if isinstance(k, Entity):
            rows["entities"].append((rid, k.name, k.name.lower(), term_key(k.name), list(k.types)))
            facets("entity_facets", rid, k.facets)
            prop(rid, "name", k.name)
            for t in k.types:
                prop(rid, "type", t)
            for f in k.facets:
                prop(rid, "facet.name", f.name)
                prop(rid, "facet.value", f.value_text())
        elif isinstance(k, Action):
            verb = " ".join(k.verbs)
            rows["actions"].append(
                (
                    rid,
                    list(k.verbs),
                    verb,
                    k.tense,
                    k.subject,
                    k.object,
                    k.indirect_object,
                    k.negated,
                )
            )
            facets("action_params", rid, k.params)
            prop(rid, "verb", verb)
            prop(rid, "subject", k.subject)
            prop(rid, "object", k.object)
            prop(rid, "indirectObject", k.indirect_object)
        else:
            table = "topics" if k.kind == "topic" else "tag_refs"
            rows[table].append((rid, k.text, term_key(k.text)))
            prop(rid, k.kind, k.text)
    return rows


def replace_digests(
    con: duckdb.DuckDBPyConnection,
    conversations: Sequence[str],
    digest: Callable[[str], bytes | None] | None,
) -> None:
    """Delete the digests of ``conversations`` and, with ``digest``, store the ones it
    makes (inside the caller's transaction, whose rows it reads)."""
    if not conversations:
        return
    con.execute(
        "DELETE FROM digests WHERE conversation IN (SELECT unnest(?::VARCHAR[]))",
        [list(conversations)],
    )
    if digest is None:
        return
    sizes = dict(
        con.execute(
            "SELECT conversation, count(*) FROM messages WHERE memory_table = 'messages' "
            "AND conversation IN (SELECT unnest(?::VARCHAR[])) GROUP BY conversation",
            [list(conversations)],
        ).fetchall()
    )
    rows: list[tuple[str, int, bytes]] = []
    for conversation in conversations:
        if not 0 < sizes.get(conversation, 0) <= DIGEST_MAX_MESSAGES:
            continue
        data = digest(conversation)
        if data is not None:
            parts = range(0, len(data), DIGEST_PART)
            rows.extend(
                (conversation, i, data[at : at + DIGEST_PART]) for i, at in enumerate(parts)
            )
        if len(rows) * DIGEST_PART >= DIGEST_BATCH_BYTES:  # a big ingest's, a few at a time
            bulk_insert(con, "digests", DIGEST_COLUMNS, rows)
            rows = []
    bulk_insert(con, "digests", DIGEST_COLUMNS, rows)


def delete_messages(
    con: duckdb.DuckDBPyConnection, mkeys: Sequence[int], *, keep_row: bool
) -> None:
    """Delete what belongs to messages (their refs, knowledge, embeddings, extraction
    outcomes) and, unless ``keep_row``, the messages themselves."""
    keys = [int(k) for k in mkeys]
    if not keys:
        return
    wanted = "(SELECT ref_id FROM semantic_refs WHERE mkey IN (SELECT unnest($1::BIGINT[])))"
    for table in (*REF_TABLES, "properties"):
        con.execute(f"DELETE FROM {table} WHERE ref_id IN {wanted}", [keys])
    for table in MESSAGE_TABLES:
        if keep_row and table in KEPT_ON_EDIT:
            continue
        con.execute(f"DELETE FROM {table} WHERE mkey IN (SELECT unnest($1::BIGINT[]))", [keys])
    if not keep_row:
        # facts that rested on these messages only go with them
        con.execute(
            "DELETE FROM memory_sources WHERE source_mkey IN (SELECT unnest($1::BIGINT[]))",
            [keys],
        )
        con.execute("DELETE FROM messages WHERE mkey IN (SELECT unnest($1::BIGINT[]))", [keys])


#: What an edit of a message keeps (its reads, where a fact came from, its place in a
#: document); the rest is extracted again.
KEPT_ON_EDIT = ("memory_access", "memory_sources", "fragments")


class RowWriter:
    """Inserts an ingest's rows on one connection: messages, their refs and knowledge,
    aliases, embeddings and extraction outcomes. Writing straight into the store, a
    changed message loses its old refs and outcomes and its row is updated; writing into
    a staging file (``staged``), its new row is kept there with a note that it replaces
    the stored one (the merge does the rest)."""

    def __init__(
        self,
        con: duckdb.DuckDBPyConnection,
        source_id: int | None,
        now: datetime,
        *,
        staged: bool = False,
    ) -> None:
        self.con = con
        self.source_id = source_id
        self.now = now
        self.staged = staged
        self.new_mkeys: tuple[int, int] | None = None
        self.changed = False
        #: The conversations whose messages, knowledge or aliases it wrote or deleted.
        self.touched: set[str] = set()

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        rows = list(new)
        self.touched.update(s.message.conversation for s in (*new, *changed))
        self.touched.update(a[0] for a in aliases)
        if changed:
            self.changed = True
            if self.staged:
                rows.extend(changed)
                bulk_insert(
                    self.con, STAGED_CHANGES, (("mkey", "BIGINT"),), [(s.mkey,) for s in changed]
                )
            else:
                self._replace(changed)
        if new:
            first, last = min(s.mkey for s in new), max(s.mkey for s in new)
            if self.new_mkeys is not None:
                first, last = min(first, self.new_mkeys[0]), max(last, self.new_mkeys[1])
            self.new_mkeys = (first, last)
        bulk_insert(
            self.con,
            "messages",
            MESSAGE_COLUMNS,
            [_message_row(s, self.source_id, self.now) for s in rows],
        )
        for table, table_rows in knowledge_rows(refs).items():
            bulk_insert(self.con, table, KNOWLEDGE_COLUMNS[table], table_rows)
        if extractions:
            self._extractions(extractions)
        # The same alias comes back with every edit and re-extraction: keep one.
        bulk_insert(
            self.con, "aliases", ALIAS_COLUMNS, list(aliases), ignore_existing=not self.staged
        )
        bulk_insert(self.con, "embeddings", EMBEDDING_COLUMNS, list(embeddings))

    def _replace(self, changed: Sequence[StoredMessage]) -> None:
        delete_messages(self.con, [m.mkey for m in changed], keep_row=True)
        for stored in changed:
            m = stored.message
            self.con.execute(
                "UPDATE messages SET ordinal = ?, speaker = ?, recipients = ?, ts = ?, "
                "text = ?, tags = ?, metadata = ?, content_hash = ?, "
                # a message extracted again as it was (a retry, --force) stays its file's
                "source_id = CASE WHEN content_hash = ? THEN source_id "
                "ELSE coalesce(?, source_id) END WHERE mkey = ?",
                [
                    m.ordinal,
                    m.speaker,
                    list(m.recipients),
                    m.timestamp,
                    m.text,
                    list(m.tags),
                    to_json(m.metadata),
                    m.content_hash(),
                    m.content_hash(),
                    self.source_id,
                    stored.mkey,
                ],
            )

    def _extractions(self, records: Sequence[ExtractionRecord]) -> None:
        """Successes into ``extractions``, failures into ``extraction_failures``."""
        now = utc_now()
        ok = [
            (
                r.mkey,
                r.conversation,
                r.message_id,
                r.extractor,
                r.model,
                r.attempts,
                now,
                r.prompt_version,
            )
            for r in records
            if r.error is None
        ]
        failed = [
            (
                r.mkey,
                r.conversation,
                r.message_id,
                r.extractor,
                r.model,
                r.error,
                r.attempts,
                now,
                r.prompt_version,
            )
            for r in records
            if r.error is not None
        ]
        bulk_insert(self.con, "extractions", EXTRACTION_COLUMNS, ok)
        bulk_insert(self.con, "extraction_failures", FAILURE_COLUMNS, failed)


#: Tables an ingest fills, in the order a merge copies them (messages first).
STAGED_TABLES = (
    "messages",
    *KNOWLEDGE_COLUMNS,
    "aliases",
    "embeddings",
    "extractions",
    "extraction_failures",
)
#: The staging file's note of the messages that replace stored ones.
STAGED_CHANGES = "staged_changes"


class RowsTransaction:
    """What a transaction that writes through a :class:`RowWriter` shares: rows added
    in the transaction, which rolls back when adding them fails."""

    rows: RowWriter

    def rollback(self) -> None:
        raise NotImplementedError

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        try:
            self.rows.add(new, changed, refs, aliases, embeddings, extractions)
        except BaseException:
            self.rollback()
            raise


class DuckDBTransaction(RowsTransaction):
    """A write straight into the store, visible at commit: a live write (a memory) or
    the merge of a staged ingest. The store's connection is held, by this thread, from
    the first statement to the commit or rollback."""

    def __init__(
        self,
        store: Owner,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> None:
        self.store = store
        self.con = store.hold()
        self.source = source
        self.now = utc_now()
        self._open = True
        try:
            self.con.execute("BEGIN TRANSACTION")
            self._conversations(conversations)
            for key, value in (settings or {}).items():
                self.store.set_setting(key, value)
            self.source_id: int | None = None
            if source is not None:  # an ingest (a live write has no ingest log entry)
                self._log_source(source)
            self.rows = RowWriter(self.con, self.source_id, self.now)
        except BaseException:
            self.rollback()
            raise

    def _conversations(self, conversations: list[Conversation]) -> None:
        """Insert the conversations written (or merge their names and metadata)."""
        for conv in conversations:
            self.con.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?) ON CONFLICT (conversation) "
                "DO UPDATE SET name = coalesce(excluded.name, conversations.name), "
                "metadata = json_merge_patch(conversations.metadata, excluded.metadata)",
                [conv.id, conv.name, to_json(conv.metadata), self.now],
            )

    def _log_source(self, source: SourceRecord) -> None:
        row = first_row(self.con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources"))
        assert row is not None
        self.source_id = int(row[0])
        # The source row goes first: messages refer to it. Its counts come at commit.
        self.con.execute(
            "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, 0, ?)",
            [
                self.source_id,
                source.path,
                source.sha256,
                source.format,
                source.fingerprint,
                source.extractor,
                to_json(source.settings),
                source.started_at,
                self.now,
                to_json(source.warnings),
            ],
        )

    def delete(self, mkeys: Sequence[int]) -> None:
        """Delete messages and everything that belongs to them."""
        try:
            self.rows.changed = True
            self._touch(
                "SELECT DISTINCT conversation FROM messages "
                "WHERE mkey IN (SELECT unnest(?::BIGINT[]))",
                [[int(k) for k in mkeys]],
            )
            delete_messages(self.con, mkeys, keep_row=False)
        except BaseException:
            self.rollback()
            raise

    def merge(self, stage: str) -> None:
        """Copy a staging file's rows (attached as ``stage``) into the store: the
        messages that replace stored ones lose their old knowledge and take the new
        values, the others are inserted, with everything extracted from them."""
        con = self.con
        try:
            self._touch(
                f"SELECT conversation FROM {stage}.messages "
                f"UNION SELECT conversation FROM {stage}.aliases"
            )
            changed = [
                int(r[0])
                for r in con.execute(f"SELECT mkey FROM {stage}.{STAGED_CHANGES}").fetchall()
            ]
            if changed:
                self.rows.changed = True
                delete_messages(con, changed, keep_row=True)
            names = [name for name, _ in MESSAGE_COLUMNS]
            sets = ", ".join(f"{n} = s.{n}" for n in _EDITABLE_COLUMNS)
            con.execute(
                f"UPDATE main.messages AS m SET {sets}, source_id = CASE WHEN "
                "m.content_hash = s.content_hash THEN m.source_id "
                "ELSE coalesce(?, m.source_id) END "
                f"FROM {stage}.messages AS s WHERE m.mkey = s.mkey "
                f"AND s.mkey IN (SELECT mkey FROM {stage}.{STAGED_CHANGES})",
                [self.source_id],
            )
            selects = ", ".join(n if n != "source_id" else "?::INTEGER" for n in names)
            con.execute(
                f"INSERT INTO main.messages ({', '.join(names)}) "
                f"SELECT {selects} FROM {stage}.messages "
                f"WHERE mkey NOT IN (SELECT mkey FROM {stage}.{STAGED_CHANGES})",
                [self.source_id],
            )
            span = first_row(
                con.execute(
                    f"SELECT min(mkey), max(mkey) FROM {stage}.messages "
                    f"WHERE mkey NOT IN (SELECT mkey FROM {stage}.{STAGED_CHANGES})"
                )
            )
            if span is not None and span[0] is not None:
                self.rows.new_mkeys = (int(span[0]), int(span[1]))
            for table in STAGED_TABLES[1:]:
                columns = ", ".join(name for name, _ in TABLE_COLUMNS[table])
                if table == "aliases":
                    con.execute(
                        f"INSERT OR IGNORE INTO main.aliases ({columns}) "
                        f"SELECT DISTINCT {columns} FROM {stage}.aliases"
                    )
                else:
                    con.execute(
                        f"INSERT INTO main.{table} ({columns}) "
                        f"SELECT {columns} FROM {stage}.{table}"
                    )
        except BaseException:
            self.rollback()
            raise

    def _touch(self, query: str, params: Sequence[Any] = ()) -> None:
        """Note the conversations ``query`` names as written by the transaction."""
        self.rows.touched.update(str(c) for (c,) in self.con.execute(query, params).fetchall())

    def commit(
        self,
        before: Callable[[], None] | None = None,
        digest: Callable[[str], bytes | None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Log the source's counts, bump the generation and commit; returns the new
        generation. ``before`` writes what else belongs to the transaction first; then the
        digests of the conversations it wrote go, replaced by ``digest``'s where given;
        then ``ready`` runs (see :meth:`~structrag.store.protocols.StoreTransaction.commit`)."""
        src = self.source
        try:
            if before is not None:
                before()
            self._digests(digest)
            if ready is not None:
                ready()
            if src is not None:
                self.con.execute(
                    "UPDATE sources SET finished_at = ?, messages_added = ?, "
                    "messages_updated = ?, messages_unchanged = ?, refs_added = ? "
                    "WHERE source_id = ?",
                    [
                        utc_now(),
                        src.messages_added,
                        src.messages_updated,
                        src.messages_unchanged,
                        src.refs_added,
                        self.source_id,
                    ],
                )
            generation = self.store.generation() + 1
            updated = self.con.execute(
                "UPDATE meta SET value = ? WHERE key = 'generation'", [str(generation)]
            ).fetchall()
            if not updated or not updated[0][0]:
                self.store.set_setting("generation", str(generation))
            first, last = self.rows.new_mkeys or (None, None)
            self.con.execute(
                "INSERT INTO commits VALUES (?, ?, ?, ?, ?)",
                [generation, utc_now(), first, last, self.rows.changed],
            )
            try:
                self.con.execute("COMMIT")
                self._open = False
                self.store.committed(generation)
            except BaseException as exc:
                self._settle(generation)
                if duckdb_interrupted(exc):
                    raise KeyboardInterrupt from exc
                raise
        except BaseException:
            self.rollback()
            raise
        finally:
            if not self._open:
                self._let_go()
        return generation

    def _settle(self, generation: int) -> None:
        """After COMMIT raised: learn whether it committed anyway (Ctrl-C during a COMMIT
        that DuckDB then finishes raises ``Query interrupted``) and, if so, record it, so
        that the store's generation is not left behind what is stored (the next write
        would number its commit again). What did not commit is rolled back."""
        if not self._open:
            return  # it committed, and was recorded
        with suppress(duckdb.Error):
            self.con.execute("ROLLBACK")  # fails when nothing is open: it committed
        self._open = False
        with suppress(duckdb.Error):
            row = self.con.execute(
                "SELECT count(*) FROM commits WHERE generation = ?", [generation]
            ).fetchone()
            if row is not None and row[0]:
                self.store.committed(generation)

    def _digests(self, digest: Callable[[str], bytes | None] | None) -> None:
        replace_digests(self.con, sorted(self.rows.touched), digest)

    def rollback(self) -> None:
        if self._open:
            self._open = False
            with suppress(duckdb.Error):
                self.con.execute("ROLLBACK")
            self._let_go()

    def _let_go(self) -> None:
        if self.con is not None:
            self.con = None  # type: ignore[assignment]
            self.store.let_go()
