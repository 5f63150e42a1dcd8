"""The DuckDB store: messages, semantic refs and their typed tables, the property index,
aliases, embeddings and the ingest log, in one file (``structrag.duckdb``).

It is the source of truth: the Whoosh index is rebuilt from it. Writes go through a
:class:`DuckDBTransaction`, one per ingested source, fed in chunks while extraction is still
running; rows are inserted column-wise (``INSERT ... SELECT unnest($1), ...``), two orders of
magnitude faster than ``executemany``. All SQL takes user values as bound parameters.

Tables (see :data:`SCHEMA`): ``meta``, ``conversations``, ``messages`` (with the ``ts``
time index column), ``semantic_refs`` (provenance) and the typed knowledge tables
``entities``, ``actions``, ``topics``, ``tags`` and ``facets`` (entity facets and action
params), ``properties`` (name/value -> ref, as in KnowPro's property index), ``aliases``,
``embeddings``, ``sources`` (the ingest log with file hashes), ``extraction_failures``
(messages whose extraction failed, written with the message), ``extractions`` (messages an
extractor that records outcomes, the LLM, answered) and ``llm_cache`` (LLM answers, see
:mod:`structrag.store.duckdb_llm_cache`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from structrag.analysis import term_key
from structrag.errors import IndexStateError, StructragError
from structrag.models import (
    Action,
    Conversation,
    Entity,
    Facet,
    Message,
    SemanticRef,
    Span,
    Tag,
    Topic,
)
from structrag.store.protocols import (
    ExtractionRecord,
    MessageFilter,
    MessageFrame,
    SourceRecord,
    StoredMessage,
    StoreStats,
)

SCHEMA_VERSION = "2"
DB_FILENAME = "structrag.duckdb"

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE TABLE IF NOT EXISTS conversations (
    id VARCHAR PRIMARY KEY, name VARCHAR, metadata JSON, created_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS messages (
    mkey BIGINT PRIMARY KEY,
    conversation VARCHAR NOT NULL,
    id VARCHAR NOT NULL,
    ordinal INTEGER NOT NULL,
    speaker VARCHAR,
    recipients VARCHAR[],
    ts TIMESTAMP,
    text VARCHAR NOT NULL,
    tags VARCHAR[],
    metadata JSON,
    content_hash BIGINT NOT NULL,
    first_ref BIGINT NOT NULL,
    ref_count INTEGER NOT NULL,
    ref_kinds VARCHAR NOT NULL,
    source_id INTEGER,
    UNIQUE (conversation, id)
);
CREATE TABLE IF NOT EXISTS semantic_refs (
    ref_id BIGINT, mkey BIGINT, conversation VARCHAR, message_id VARCHAR, kind VARCHAR,
    span_start INTEGER, span_end INTEGER, extractor VARCHAR, extractor_version VARCHAR
);
CREATE TABLE IF NOT EXISTS entities (
    ref_id BIGINT, name VARCHAR, name_key VARCHAR, types VARCHAR[]
);
CREATE TABLE IF NOT EXISTS facets (
    ref_id BIGINT, name VARCHAR, value VARCHAR, number DOUBLE, is_bool BOOLEAN, units VARCHAR
);
CREATE TABLE IF NOT EXISTS actions (
    ref_id BIGINT, verbs VARCHAR[], verb VARCHAR, tense VARCHAR, subject VARCHAR,
    object VARCHAR, indirect_object VARCHAR, negated BOOLEAN
);
CREATE TABLE IF NOT EXISTS topics (ref_id BIGINT, text VARCHAR, text_key VARCHAR);
CREATE TABLE IF NOT EXISTS tags (ref_id BIGINT, text VARCHAR, text_key VARCHAR);
CREATE TABLE IF NOT EXISTS properties (name VARCHAR, value VARCHAR, ref_id BIGINT);
CREATE TABLE IF NOT EXISTS aliases (
    conversation VARCHAR, term VARCHAR, related VARCHAR, weight DOUBLE, source VARCHAR
);
CREATE TABLE IF NOT EXISTS embeddings (mkey BIGINT, model VARCHAR, vector FLOAT[]);
CREATE TABLE IF NOT EXISTS sources (
    source_id INTEGER PRIMARY KEY, path VARCHAR, sha256 VARCHAR, format VARCHAR,
    fingerprint VARCHAR, extractor VARCHAR, settings JSON, started_at TIMESTAMP,
    finished_at TIMESTAMP, messages_added INTEGER, messages_updated INTEGER,
    messages_unchanged INTEGER, refs_added INTEGER, warnings JSON
);
CREATE TABLE IF NOT EXISTS extractions (
    mkey BIGINT, conversation VARCHAR, message_id VARCHAR, extractor VARCHAR, model VARCHAR,
    attempts INTEGER, extracted_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS extraction_failures (
    mkey BIGINT, conversation VARCHAR, message_id VARCHAR, extractor VARCHAR, model VARCHAR,
    error VARCHAR, attempts INTEGER, failed_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS llm_cache (
    model VARCHAR, prompt_version VARCHAR, message_hash VARCHAR, response JSON,
    input_tokens INTEGER, output_tokens INTEGER, created_at TIMESTAMP,
    PRIMARY KEY (model, prompt_version, message_hash)
);
"""

_MESSAGE_COLUMNS = (
    "mkey, conversation, id, ordinal, speaker, recipients, ts, text, tags, metadata, "
    "first_ref, ref_count, ref_kinds"
)


_COMPARATORS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}


def _meta_clause(key: str, op: str, value: str) -> tuple[str, list[Any]]:
    """SQL for ``meta.key OP value`` with the key path and value bound as parameters.

    Numbers compare as numbers when both sides are numeric; text compares case-insensitively.
    """
    path = "$." + key
    if op == "contains":
        return "contains(lower(json_extract_string(metadata, ?)), lower(?))", [path, value]
    sql_op = _COMPARATORS[op]
    try:
        number = float(value)
    except ValueError:
        return f"lower(json_extract_string(metadata, ?)) {sql_op} lower(?)", [path, value]
    return (
        f"TRY_CAST(json_extract_string(metadata, ?) AS DOUBLE) {sql_op} ?",
        [path, number],
    )


def _first_row(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of a result, reading it to the end (DuckDB 2 wants results finished
    before the connection does other work)."""
    rows = result.fetchall()
    return rows[0] if rows else None


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _bulk(
    con: duckdb.DuckDBPyConnection,
    table: str,
    columns: Sequence[tuple[str, str]],
    values: Sequence[list[Any]],
    *,
    new_only: bool = False,
) -> None:
    """Insert rows column-wise. ``table`` and ``columns`` are our own constants; with
    ``new_only``, rows the table already holds (and repeats) are left out; the table
    must have a ``conversation`` column, which bounds the comparison.

    The columns are handed to DuckDB as numpy arrays through a registered view, which
    converts several times faster than list parameters and far faster than executemany.
    """
    if not values or not values[0]:
        return
    frame: dict[str, np.ndarray] = {}
    for (name, sql_type), column in zip(columns, values, strict=True):
        if sql_type in ("BIGINT", "INTEGER") and None not in column:
            frame[name] = np.asarray(column, dtype=np.int64)
        else:
            array = np.empty(len(column), dtype=object)
            array[:] = column
            frame[name] = array
    selects = ", ".join(f'"{name}"::{sql_type}' for name, sql_type in columns)
    names = ", ".join(name for name, _ in columns)
    con.register("_structrag_rows", frame)
    try:
        rows = f"SELECT {selects} FROM _structrag_rows"
        if new_only:  # compared within the conversations of the rows only
            rows += (
                f" EXCEPT SELECT {names} FROM {table} WHERE conversation IN "
                "(SELECT DISTINCT conversation FROM _structrag_rows)"
            )
        con.execute(f"INSERT INTO {table} ({names}) {rows}")
    finally:
        con.unregister("_structrag_rows")


class DuckDBStore:
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
        try:
            self.con = duckdb.connect(str(self.path), read_only=read_only)
        except duckdb.IOException as exc:
            text = str(exc)
            if "lock" in text.lower():
                raise IndexStateError(
                    f"the index at {self.directory} is in use by another process",
                    hint="wait for the other structrag command (an ingest?) to finish, then "
                    "try again",
                ) from exc
            raise IndexStateError(f"cannot open {self.path}: {text}") from exc
        except duckdb.Error as exc:
            raise IndexStateError(
                f"{self.path} is not a structrag index or is damaged: {exc}",
                hint="point --db at an index directory, or re-create the index",
            ) from exc
        if not read_only:
            self.con.execute(SCHEMA)
            if self.get_setting("schema_version") is None:
                self.set_setting("schema_version", SCHEMA_VERSION)
                self.set_setting("generation", "0")
        version = self.get_setting("schema_version")
        if version != SCHEMA_VERSION:
            self.con.close()
            raise IndexStateError(
                f"index {self.directory} has schema version {version}, this structrag "
                f"reads version {SCHEMA_VERSION}",
                hint="re-create the index with this version of structrag",
            )

    # -- meta ---------------------------------------------------------------------------

    def close(self) -> None:
        with suppress(duckdb.Error):
            self.con.close()

    def get_setting(self, key: str) -> str | None:
        try:
            row = _first_row(self.con.execute("SELECT value FROM meta WHERE key = ?", [key]))
        except duckdb.CatalogException:
            return None
        return None if row is None else str(row[0])

    def set_setting(self, key: str, value: str) -> None:
        self.con.execute(
            "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            [key, value],
        )

    def generation(self) -> int:
        """The number of committed ingests. Cached: only this connection can write (DuckDB
        locks the file), so it changes only through :meth:`DuckDBTransaction.commit`."""
        if self._generation is None:
            self._generation = int(self.get_setting("generation") or 0)
        return self._generation

    def holds_nothing(self) -> bool:
        """No ingest committed and no LLM answer cached: a directory that can go."""
        if self.generation():
            return False
        row = _first_row(self.con.execute("SELECT count(*) FROM llm_cache"))
        return not row or not row[0]

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        return self.con.execute(query, params).fetchall()

    # -- ingest -------------------------------------------------------------------------

    def source_seen(self, sha256: str, fingerprint: str) -> bool:
        row = _first_row(
            self.con.execute(
                "SELECT 1 FROM sources WHERE sha256 = ? AND fingerprint = ? LIMIT 1",
                [sha256, fingerprint],
            )
        )
        return row is not None

    def message_hashes(
        self, conversations: Iterable[str]
    ) -> dict[tuple[str, str], tuple[int, int, int]]:
        convs = sorted(set(conversations))
        if not convs:
            return {}
        rows = self.con.execute(
            "SELECT conversation, id, mkey, content_hash, ordinal FROM messages "
            "WHERE conversation IN (SELECT unnest($1::VARCHAR[]))",
            [convs],
        ).fetchall()
        return {(c, i): (int(k), int(h), int(o)) for c, i, k, h, o in rows}

    def next_ids(self) -> tuple[int, int]:
        row = _first_row(
            self.con.execute(
                "SELECT (SELECT coalesce(max(mkey), -1) + 1 FROM messages), "
                "(SELECT coalesce(max(first_ref + ref_count), 0) FROM messages)"
            )
        )
        assert row is not None
        return int(row[0]), int(row[1])

    def begin(self, source: SourceRecord, conversations: list[Conversation]) -> DuckDBTransaction:
        """Start an ingest's transaction (see :class:`DuckDBTransaction`)."""
        if self.read_only:
            raise IndexStateError("the index was opened read-only")
        return DuckDBTransaction(self, source, conversations)

    def failed_messages(self, extractors: Sequence[str]) -> list[StoredMessage]:
        """Messages with a recorded extraction failure by one of ``extractors``."""
        try:
            return self._messages(
                "mkey IN (SELECT mkey FROM extraction_failures "
                "WHERE extractor IN (SELECT unnest($1::VARCHAR[])))",
                [list(extractors)],
            )
        except duckdb.CatalogException:
            return []

    # -- reads --------------------------------------------------------------------------

    def stats(self) -> StoreStats:
        con = self.con

        def scalar(sql: str) -> int:
            row = _first_row(con.execute(sql))
            return int(row[0]) if row and row[0] is not None else 0

        kinds = {"entity": 0, "action": 0, "topic": 0, "tag": 0}
        for kind, n in con.execute(
            "SELECT kind, count(*) FROM semantic_refs GROUP BY kind"
        ).fetchall():
            kinds[str(kind)] = int(n)
        extractors: dict[str, dict[str, int]] = {}
        for name, messages, refs in con.execute(
            "SELECT extractor, count(DISTINCT mkey), count(*) FROM semantic_refs "
            "GROUP BY extractor ORDER BY extractor"
        ).fetchall():
            extractors[str(name)] = {"extracted": int(messages), "refs": int(refs), "failed": 0}
        with suppress(duckdb.CatalogException):  # an old index opened read-only
            # Extractors that record outcomes count the messages they answered, including
            # those in which they found nothing.
            for name, answered in con.execute(
                "SELECT extractor, count(DISTINCT mkey) FROM extractions GROUP BY extractor"
            ).fetchall():
                entry = extractors.setdefault(str(name), {"extracted": 0, "refs": 0, "failed": 0})
                entry["extracted"] = int(answered)
            for name, failed in con.execute(
                "SELECT extractor, count(DISTINCT mkey) FROM extraction_failures GROUP BY extractor"
            ).fetchall():
                entry = extractors.setdefault(str(name), {"extracted": 0, "refs": 0, "failed": 0})
                entry["failed"] = int(failed)
        return StoreStats(
            conversations=scalar("SELECT count(*) FROM conversations"),
            messages=scalar("SELECT count(*) FROM messages"),
            semantic_refs=kinds,
            extractors=extractors,
            sources=scalar("SELECT count(*) FROM sources"),
        )

    def conversation_summaries(self) -> list[dict[str, Any]]:
        rows = self.con.execute(
            "SELECT c.id, c.name, count(m.mkey), min(m.ts), max(m.ts), "
            "list_sort(list_distinct(list(m.speaker) FILTER (WHERE m.speaker IS NOT NULL))) "
            "FROM conversations c LEFT JOIN messages m ON m.conversation = c.id "
            "GROUP BY c.id, c.name ORDER BY c.id"
        ).fetchall()
        return [
            {
                "id": r[0],
                "name": r[1],
                "messages": int(r[2]),
                "first": r[3].isoformat() if r[3] else None,
                "last": r[4].isoformat() if r[4] else None,
                "speakers": list(r[5] or []),
            }
            for r in rows
        ]

    def conversations(self) -> list[Conversation]:
        rows = self.con.execute(
            "SELECT id, name, metadata FROM conversations ORDER BY id"
        ).fetchall()
        return [
            Conversation(id=r[0], name=r[1], metadata=json.loads(r[2]) if r[2] else {})
            for r in rows
        ]

    def _messages(
        self, where: str, params: list[Any], limit: int | None = None
    ) -> list[StoredMessage]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self.con.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY mkey{tail}", params
        ).fetchall()
        return [_stored(r) for r in rows]

    def messages_by_keys(self, mkeys: Sequence[int]) -> dict[int, StoredMessage]:
        if not mkeys:
            return {}
        found = self._messages(
            "mkey IN (SELECT unnest($1::BIGINT[]))", [sorted({int(k) for k in mkeys})]
        )
        return {m.mkey: m for m in found}

    def find_message(self, conversation: str | None, message_id: str) -> list[StoredMessage]:
        if conversation is None:
            return self._messages("id = ?", [message_id])
        return self._messages("conversation = ? AND id = ?", [conversation, message_id])

    def iter_messages(
        self, conversation: str | None = None, batch: int = 2000
    ) -> Iterator[StoredMessage]:
        last = -1
        while True:
            if conversation is None:
                rows = self._messages("mkey > ?", [last], batch)
            else:
                rows = self._messages("conversation = ? AND mkey > ?", [conversation, last], batch)
            if not rows:
                return
            yield from rows
            last = rows[-1].mkey

    def _refs(self, where: str, params: list[Any]) -> list[tuple[int, SemanticRef]]:
        rows = self.con.execute(_REF_SELECT.format(where=where), params).fetchall()
        return [(int(r[1]), _ref(r)) for r in rows]

    def refs_for_messages(self, mkeys: Sequence[int]) -> dict[int, list[SemanticRef]]:
        out: dict[int, list[SemanticRef]] = {int(k): [] for k in mkeys}
        if not mkeys:
            return out
        for mkey, ref in self._refs("mkey IN (SELECT unnest($1::BIGINT[]))", [list(out)]):
            out[mkey].append(ref)
        return out

    def refs_by_ids(self, ref_ids: Sequence[int]) -> dict[int, tuple[int, SemanticRef]]:
        if not ref_ids:
            return {}
        found = self._refs(
            "ref_id IN (SELECT unnest($1::BIGINT[]))", [sorted({int(r) for r in ref_ids})]
        )
        return {ref.ref_id: (mkey, ref) for mkey, ref in found if ref.ref_id is not None}

    def iter_refs(
        self, kind: str | None = None, conversation: str | None = None
    ) -> Iterator[tuple[int, SemanticRef]]:
        clauses, params = ["TRUE"], []
        if kind:
            clauses.append("kind = ?")
            params.append(kind)
        if conversation:
            clauses.append("conversation = ?")
            params.append(conversation)
        yield from self._refs(" AND ".join(clauses), params)

    def top_entities(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]:
        rows = self.con.execute(
            "SELECT min(e.name) AS name, e.name_key, count(*) AS mentions, "
            "count(DISTINCT r.mkey) AS messages, "
            "list_distinct(flatten(list(e.types))) AS types "
            "FROM entities e JOIN semantic_refs r USING (ref_id) "
            "WHERE (? IS NULL OR r.conversation = ?) "
            "GROUP BY e.name_key ORDER BY mentions DESC, name LIMIT ?",
            [conversation, conversation, limit],
        ).fetchall()
        return [
            {"name": r[0], "mentions": int(r[2]), "messages": int(r[3]), "types": sorted(r[4])}
            for r in rows
        ]

    def top_topics(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]:
        rows = self.con.execute(
            "SELECT min(t.text) AS text, count(*) AS mentions, count(DISTINCT r.mkey) "
            "FROM topics t JOIN semantic_refs r USING (ref_id) "
            "WHERE (? IS NULL OR r.conversation = ?) "
            "GROUP BY t.text_key ORDER BY mentions DESC, text LIMIT ?",
            [conversation, conversation, limit],
        ).fetchall()
        return [{"topic": r[0], "mentions": int(r[1]), "messages": int(r[2])} for r in rows]

    def aliases(self, conversation: str | None = None) -> list[tuple[str, str, float]]:
        rows = self.con.execute(
            "SELECT term, related, max(weight) FROM aliases "
            "WHERE (? IS NULL OR conversation = ?) GROUP BY term, related",
            [conversation, conversation],
        ).fetchall()
        return [(str(a), str(b), float(w)) for a, b, w in rows]

    # -- for the query engine -------------------------------------------------------------

    def message_frame(self, conversation: str | None) -> MessageFrame:
        rows = self.con.execute(
            "SELECT mkey, conversation, id, ordinal, "
            "coalesce(json_extract_string(metadata, '$.session'), strftime(ts, '%Y-%m-%d'), ''), "
            "speaker, ts, first_ref, ref_kinds FROM messages "
            "WHERE (? IS NULL OR conversation = ?) ORDER BY conversation, ordinal",
            [conversation, conversation],
        ).fetchall()
        columns = list(zip(*rows, strict=True)) if rows else [()] * 9

        def objects(values: Sequence[Any]) -> np.ndarray:
            array = np.empty(len(values), dtype=object)
            array[:] = list(values)
            return array

        return MessageFrame(
            mkeys=np.asarray(columns[0], dtype=np.int64),
            conversations=objects(columns[1]),
            ids=objects(columns[2]),
            ordinals=np.asarray(columns[3], dtype=np.int64),
            sessions=objects(columns[4]),
            speakers=objects(columns[5]),
            timestamps=np.array(
                [
                    np.datetime64(t, "s") if t is not None else np.datetime64("NaT")
                    for t in columns[6]
                ],
                dtype="datetime64[s]",
            ),
            first_refs=np.asarray(columns[7], dtype=np.int64),
            ref_kinds=objects(columns[8]),
        )

    def ref_properties(self, ref_ids: Sequence[int]) -> dict[int, list[tuple[str, str]]]:
        out: dict[int, list[tuple[str, str]]] = {}
        if not ref_ids:
            return out
        # The range lets DuckDB skip row groups by their min/max (refs are stored in order).
        rows = self.con.execute(
            "SELECT ref_id, name, value FROM properties WHERE ref_id BETWEEN ? AND ? "
            "AND ref_id IN (SELECT unnest(?::BIGINT[]))",
            [min(ref_ids), max(ref_ids), list(ref_ids)],
        ).fetchall()
        for ref_id, name, value in rows:
            out.setdefault(int(ref_id), []).append((str(name), str(value)))
        return out

    def ref_properties_between(self, low: int, high: int) -> dict[int, list[tuple[str, str]]]:
        out: dict[int, list[tuple[str, str]]] = {}
        rows = self.con.execute(
            "SELECT ref_id, name, value FROM properties WHERE ref_id BETWEEN ? AND ?",
            [low, high],
        ).fetchall()
        for ref_id, name, value in rows:
            out.setdefault(int(ref_id), []).append((str(name), str(value)))
        return out

    def filter_messages(self, condition: MessageFilter) -> list[int]:
        clauses: list[str] = []
        params: list[Any] = []
        if condition.conversation is not None:
            clauses.append("conversation = ?")
            params.append(condition.conversation)
        if condition.speakers:
            clauses.append("lower(speaker) IN (SELECT lower(unnest(?::VARCHAR[])))")
            params.append(list(condition.speakers))
        if condition.recipients:
            clauses.append(
                "len(list_intersect(list_transform(recipients, lambda x: lower(x)), "
                "list_transform(?::VARCHAR[], lambda x: lower(x)))) > 0"
            )
            params.append(list(condition.recipients))
        if condition.tags:
            clauses.append(
                "len(list_intersect(list_transform(tags, lambda x: lower(x)), "
                "list_transform(?::VARCHAR[], lambda x: lower(x)))) > 0"
            )
            params.append(list(condition.tags))
        if condition.start is not None:
            clauses.append("ts >= ?")
            params.append(condition.start)
        if condition.end is not None:
            clauses.append("ts < ?")
            params.append(condition.end)
        for key, op, value in condition.meta:
            clause, values = _meta_clause(key, op, value)
            clauses.append(clause)
            params.extend(values)
        where = " AND ".join(clauses) or "TRUE"
        rows = self.con.execute(f"SELECT mkey FROM messages WHERE {where}", params).fetchall()
        return [int(r[0]) for r in rows]

    def embedding_matrix(
        self, model: str, conversation: str | None
    ) -> tuple[np.ndarray, np.ndarray]:
        rows = self.con.execute(
            "SELECT e.mkey, e.vector FROM embeddings e JOIN messages m USING (mkey) "
            "WHERE e.model = ? AND (? IS NULL OR m.conversation = ?) ORDER BY e.mkey",
            [model, conversation, conversation],
        ).fetchall()
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
        mkeys = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return mkeys, np.asarray([r[1] for r in rows], dtype=np.float32)

    def knowledge_texts(self, ref_ids: Sequence[int]) -> dict[int, tuple[str, str, list[str]]]:
        if not ref_ids:
            return {}
        low, high = min(ref_ids), max(ref_ids)
        rows = self.con.execute(
            "WITH wanted AS (SELECT unnest(?::BIGINT[]) AS ref_id) "
            "SELECT e.ref_id, 'entity', e.name, e.types FROM entities e "
            "JOIN wanted USING (ref_id) WHERE e.ref_id BETWEEN ? AND ? "
            "UNION ALL SELECT t.ref_id, 'topic', t.text, [] FROM topics t "
            "JOIN wanted USING (ref_id) WHERE t.ref_id BETWEEN ? AND ? "
            "UNION ALL SELECT g.ref_id, 'tag', g.text, [] FROM tags g JOIN wanted USING (ref_id) "
            "WHERE g.ref_id BETWEEN ? AND ?",
            [list(ref_ids), low, high, low, high, low, high],
        ).fetchall()
        return {int(r[0]): (str(r[1]), str(r[2]), list(r[3] or [])) for r in rows}

    def knowledge_texts_between(self, low: int, high: int) -> dict[int, tuple[str, str, list[str]]]:
        rows = self.con.execute(
            "SELECT ref_id, 'entity', name, types FROM entities WHERE ref_id BETWEEN ? AND ? "
            "UNION ALL SELECT ref_id, 'topic', text, [] FROM topics WHERE ref_id BETWEEN ? AND ? "
            "UNION ALL SELECT ref_id, 'tag', text, [] FROM tags WHERE ref_id BETWEEN ? AND ?",
            [low, high, low, high, low, high],
        ).fetchall()
        return {int(r[0]): (str(r[1]), str(r[2]), list(r[3] or [])) for r in rows}

    def knowledge_vocabulary(self, conversation: str | None) -> list[tuple[str, str, int]]:
        rows = self.con.execute(
            "SELECT min(e.name), 'entity', count(*) FROM entities e "
            "JOIN semantic_refs r USING (ref_id) "
            "WHERE r.extractor <> 'metadata' AND (? IS NULL OR r.conversation = ?) "
            "GROUP BY e.name_key "
            "UNION ALL "
            "SELECT min(t.text), 'topic', count(*) FROM topics t "
            "JOIN semantic_refs r USING (ref_id) WHERE (? IS NULL OR r.conversation = ?) "
            "GROUP BY t.text_key",
            [conversation, conversation, conversation, conversation],
        ).fetchall()
        return [(str(a), str(b), int(c)) for a, b, c in rows]

    def relation_edges(self, conversation: str | None) -> list[tuple[str, str, str]]:
        rows = self.con.execute(
            "SELECT a.subject, a.verb, a.object FROM actions a JOIN semantic_refs r USING (ref_id) "
            "WHERE a.subject IS NOT NULL AND a.object IS NOT NULL AND r.extractor <> 'metadata' "
            "AND (? IS NULL OR r.conversation = ?) "
            "UNION ALL "
            "SELECT f.value, 'have', e.name FROM facets f JOIN entities e USING (ref_id) "
            "JOIN semantic_refs r USING (ref_id) "
            "WHERE f.name = 'owner' AND (? IS NULL OR r.conversation = ?) "
            "UNION ALL "
            "SELECT DISTINCT e.name, 'is', t.type FROM entities e "
            "JOIN semantic_refs r USING (ref_id), unnest(e.types) AS t(type) "
            "WHERE r.extractor <> 'metadata' AND t.type NOT IN ('name', 'thing', 'person') "
            "AND lower(t.type) <> lower(e.name) AND (? IS NULL OR r.conversation = ?)",
            [conversation] * 6,
        ).fetchall()
        return [(str(a), str(b), str(c)) for a, b, c in rows]


class DuckDBTransaction:
    """One ingest's writes: messages and refs arrive in chunks, all visible at commit."""

    def __init__(
        self, store: DuckDBStore, source: SourceRecord, conversations: list[Conversation]
    ) -> None:
        self.store = store
        self.con = store.con
        self.source = source
        self.con.execute("BEGIN TRANSACTION")
        self._open = True
        try:
            now = datetime.now(UTC).replace(tzinfo=None)
            for conv in conversations:
                self.con.execute(
                    "INSERT INTO conversations VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE "
                    "SET name = coalesce(excluded.name, conversations.name), "
                    "metadata = json_merge_patch(conversations.metadata, excluded.metadata)",
                    [conv.id, conv.name, _json(conv.metadata), now],
                )
            row = _first_row(
                self.con.execute("SELECT coalesce(max(source_id), 0) + 1 FROM sources")
            )
            assert row is not None
            self.source_id = int(row[0])
        except BaseException:
            self.rollback()
            raise

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, float, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        try:
            if changed:
                self._replace(changed)
            _insert_messages(self.con, new, self.source_id)
            _insert_refs(self.con, refs)
            if extractions:
                _insert_extractions(self.con, extractions)
            if aliases:
                # The same alias comes back with every edit and re-extraction: keep one.
                _bulk(self.con, "aliases", _ALIAS_COLUMNS, _columns(aliases), new_only=True)
            if embeddings:
                _bulk(self.con, "embeddings", _EMBEDDING_COLUMNS, _columns(embeddings))
        except BaseException:
            self.rollback()
            raise

    def _replace(self, changed: Sequence[StoredMessage]) -> None:
        con = self.con
        keys = [m.mkey for m in changed]
        for table in ("entities", "facets", "actions", "topics", "tags", "properties"):
            con.execute(
                f"DELETE FROM {table} WHERE ref_id IN (SELECT ref_id FROM semantic_refs "
                "WHERE mkey IN (SELECT unnest($1::BIGINT[])))",
                [keys],
            )
        for table in ("semantic_refs", "embeddings", "extractions", "extraction_failures"):
            con.execute(f"DELETE FROM {table} WHERE mkey IN (SELECT unnest($1::BIGINT[]))", [keys])
        for stored in changed:
            m = stored.message
            con.execute(
                "UPDATE messages SET ordinal = ?, speaker = ?, recipients = ?, ts = ?, "
                "text = ?, tags = ?, metadata = ?, content_hash = ?, first_ref = ?, "
                "ref_count = ?, ref_kinds = ?, source_id = ? WHERE mkey = ?",
                [
                    m.ordinal,
                    m.speaker,
                    list(m.recipients),
                    m.timestamp,
                    m.text,
                    list(m.tags),
                    _json(m.metadata),
                    m.content_hash(),
                    stored.first_ref,
                    stored.ref_count,
                    stored.ref_kinds,
                    self.source_id,
                    stored.mkey,
                ],
            )

    def commit(self) -> int:
        """Log the source, bump the generation and commit; returns the new generation."""
        src = self.source
        try:
            self.con.execute(
                "INSERT INTO sources VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    self.source_id,
                    src.path,
                    src.sha256,
                    src.format,
                    src.fingerprint,
                    src.extractor,
                    _json(src.settings),
                    src.started_at,
                    datetime.now(UTC).replace(tzinfo=None),
                    src.messages_added,
                    src.messages_updated,
                    src.messages_unchanged,
                    src.refs_added,
                    _json(src.warnings),
                ],
            )
            generation = self.store.generation() + 1
            self.store.set_setting("generation", str(generation))
            self.con.execute("COMMIT")
            self._open = False
            self.store._generation = generation
        except BaseException:
            self.rollback()
            raise
        return generation

    def rollback(self) -> None:
        if self._open:
            self._open = False
            with suppress(duckdb.Error):
                self.con.execute("ROLLBACK")


def _columns(rows: Sequence[tuple[Any, ...]]) -> list[list[Any]]:
    return [list(c) for c in zip(*rows, strict=True)]


_ALIAS_COLUMNS = [
    ("conversation", "VARCHAR"),
    ("term", "VARCHAR"),
    ("related", "VARCHAR"),
    ("weight", "DOUBLE"),
    ("source", "VARCHAR"),
]
_EMBEDDING_COLUMNS = [("mkey", "BIGINT"), ("model", "VARCHAR"), ("vector", "FLOAT[]")]
_MESSAGE_TYPES = {
    "mkey": "BIGINT",
    "conversation": "VARCHAR",
    "id": "VARCHAR",
    "ordinal": "INTEGER",
    "speaker": "VARCHAR",
    "recipients": "VARCHAR[]",
    "ts": "TIMESTAMP",
    "text": "VARCHAR",
    "tags": "VARCHAR[]",
    "metadata": "JSON",
    "content_hash": "BIGINT",
    "first_ref": "BIGINT",
    "ref_count": "INTEGER",
    "ref_kinds": "VARCHAR",
    "source_id": "INTEGER",
}


def _insert_messages(
    con: duckdb.DuckDBPyConnection, messages: Sequence[StoredMessage], source_id: int
) -> None:
    if not messages:
        return
    rows = [
        (
            s.mkey,
            s.message.conversation,
            s.message.id,
            s.message.ordinal,
            s.message.speaker,
            list(s.message.recipients),
            s.message.timestamp,
            s.message.text,
            list(s.message.tags),
            _json(s.message.metadata),
            s.message.content_hash(),
            s.first_ref,
            s.ref_count,
            s.ref_kinds,
            source_id,
        )
        for s in messages
    ]
    _bulk(con, "messages", list(_MESSAGE_TYPES.items()), _columns(rows))


_EXTRACTION_COLUMNS = [
    ("mkey", "BIGINT"),
    ("conversation", "VARCHAR"),
    ("message_id", "VARCHAR"),
    ("extractor", "VARCHAR"),
    ("model", "VARCHAR"),
    ("attempts", "INTEGER"),
    ("extracted_at", "TIMESTAMP"),
]
_FAILURE_COLUMNS = [
    ("mkey", "BIGINT"),
    ("conversation", "VARCHAR"),
    ("message_id", "VARCHAR"),
    ("extractor", "VARCHAR"),
    ("model", "VARCHAR"),
    ("error", "VARCHAR"),
    ("attempts", "INTEGER"),
    ("failed_at", "TIMESTAMP"),
]


def _insert_extractions(
    con: duckdb.DuckDBPyConnection, records: Sequence[ExtractionRecord]
) -> None:
    """Successes into ``extractions``, failures into ``extraction_failures``."""
    now = datetime.now(UTC).replace(tzinfo=None)
    ok = [
        (r.mkey, r.conversation, r.message_id, r.extractor, r.model, r.attempts, now)
        for r in records
        if r.error is None
    ]
    failed = [
        (r.mkey, r.conversation, r.message_id, r.extractor, r.model, r.error, r.attempts, now)
        for r in records
        if r.error is not None
    ]
    if ok:
        _bulk(con, "extractions", _EXTRACTION_COLUMNS, _columns(ok))
    if failed:
        _bulk(con, "extraction_failures", _FAILURE_COLUMNS, _columns(failed))


_REF_TABLES: dict[str, list[tuple[str, str]]] = {
    "semantic_refs": [
        ("ref_id", "BIGINT"),
        ("mkey", "BIGINT"),
        ("conversation", "VARCHAR"),
        ("message_id", "VARCHAR"),
        ("kind", "VARCHAR"),
        ("span_start", "INTEGER"),
        ("span_end", "INTEGER"),
        ("extractor", "VARCHAR"),
        ("extractor_version", "VARCHAR"),
    ],
    "entities": [
        ("ref_id", "BIGINT"),
        ("name", "VARCHAR"),
        ("name_key", "VARCHAR"),
        ("types", "VARCHAR[]"),
    ],
    "facets": [
        ("ref_id", "BIGINT"),
        ("name", "VARCHAR"),
        ("value", "VARCHAR"),
        ("number", "DOUBLE"),
        ("is_bool", "BOOLEAN"),
        ("units", "VARCHAR"),
    ],
    "actions": [
        ("ref_id", "BIGINT"),
        ("verbs", "VARCHAR[]"),
        ("verb", "VARCHAR"),
        ("tense", "VARCHAR"),
        ("subject", "VARCHAR"),
        ("object", "VARCHAR"),
        ("indirect_object", "VARCHAR"),
        ("negated", "BOOLEAN"),
    ],
    "topics": [("ref_id", "BIGINT"), ("text", "VARCHAR"), ("text_key", "VARCHAR")],
    "tags": [("ref_id", "BIGINT"), ("text", "VARCHAR"), ("text_key", "VARCHAR")],
    "properties": [("name", "VARCHAR"), ("value", "VARCHAR"), ("ref_id", "BIGINT")],
}


def _insert_refs(
    con: duckdb.DuckDBPyConnection, refs: Sequence[tuple[int, int, SemanticRef]]
) -> None:
    """Rows of every knowledge table for a chunk of refs, then one insert per table."""
    if not refs:
        return
    rows: dict[str, list[tuple[Any, ...]]] = {t: [] for t in _REF_TABLES}
    base, ents, facets, acts = (
        rows["semantic_refs"],
        rows["entities"],
        rows["facets"],
        rows["actions"],
    )
    props = rows["properties"]

    def add_facets(rid: int, items: Iterable[Facet]) -> None:
        for f in items:
            number = f.value if isinstance(f.value, float) else None
            text = f.value_text() if number is None else f"{f.value:g}"
            facets.append((rid, f.name, text, number, isinstance(f.value, bool), f.units))

    def prop(rid: int, name: str, value: str | None) -> None:
        if value:
            props.append((name, term_key(value), rid))

    for rid, mkey, ref in refs:
        k = ref.knowledge
        base.append(
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
            ents.append((rid, k.name, term_key(k.name), list(k.types)))
            add_facets(rid, k.facets)
            prop(rid, "name", k.name)
            for t in k.types:
                prop(rid, "type", t)
            for f in k.facets:
                prop(rid, "facet.name", f.name)
                prop(rid, "facet.value", f.value_text())
        elif isinstance(k, Action):
            verb = " ".join(k.verbs)
            acts.append(
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
            add_facets(rid, k.params)
            prop(rid, "verb", verb)
            prop(rid, "subject", k.subject)
            prop(rid, "object", k.object)
            prop(rid, "indirectObject", k.indirect_object)
        else:
            rows["topics" if k.kind == "topic" else "tags"].append((rid, k.text, term_key(k.text)))
            prop(rid, k.kind, k.text)
    for table, spec in _REF_TABLES.items():
        if rows[table]:
            _bulk(con, table, spec, _columns(rows[table]))


def _stored(row: tuple[Any, ...]) -> StoredMessage:
    (
        mkey,
        conv,
        mid,
        ordinal,
        speaker,
        recipients,
        ts,
        text,
        tags,
        metadata,
        first_ref,
        ref_count,
        ref_kinds,
    ) = row
    return StoredMessage(
        mkey=int(mkey),
        message=Message(
            conversation=conv,
            id=mid,
            ordinal=int(ordinal),
            speaker=speaker,
            recipients=tuple(recipients or ()),
            timestamp=ts,
            text=text,
            tags=tuple(tags or ()),
            metadata=json.loads(metadata) if metadata else {},
        ),
        first_ref=int(first_ref),
        ref_count=int(ref_count),
        ref_kinds=str(ref_kinds),
    )


_REF_SELECT = """
WITH wanted AS (
    SELECT ref_id, mkey, conversation, message_id, span_start, span_end, extractor,
           extractor_version, kind
    FROM semantic_refs WHERE {where}
),
wanted_facets AS (
    SELECT f.ref_id,
           list({{'name': f.name, 'value': f.value, 'number': f.number,
                  'is_bool': f.is_bool, 'units': f.units}} ORDER BY f.rowid) AS facets
    FROM facets f JOIN wanted w ON w.ref_id = f.ref_id GROUP BY f.ref_id
)
SELECT w.ref_id, w.mkey, w.conversation, w.message_id, w.span_start, w.span_end,
       w.extractor, w.extractor_version, w.kind,
       e.name, e.types, a.verbs, a.tense, a.subject, a.object, a.indirect_object, a.negated,
       coalesce(t.text, g.text), wf.facets
FROM wanted w
LEFT JOIN entities e ON e.ref_id = w.ref_id
LEFT JOIN actions a ON a.ref_id = w.ref_id
LEFT JOIN topics t ON t.ref_id = w.ref_id
LEFT JOIN tags g ON g.ref_id = w.ref_id
LEFT JOIN wanted_facets wf ON wf.ref_id = w.ref_id
ORDER BY w.ref_id
"""


def _facet(row: dict[str, Any]) -> Facet:
    value: str | float | bool
    if row["number"] is not None:
        value = float(row["number"])
    elif row["is_bool"]:
        value = row["value"] == "true"
    else:
        value = row["value"] or ""
    return Facet(name=row["name"], value=value, units=row["units"])


def _ref(row: tuple[Any, ...]) -> SemanticRef:
    (
        ref_id,
        _mkey,
        conv,
        mid,
        start,
        end,
        extractor,
        version,
        kind,
        name,
        types,
        verbs,
        tense,
        subject,
        obj,
        indirect,
        negated,
        text,
        facets,
    ) = row
    facet_list = tuple(_facet(f) for f in facets or ())
    knowledge: Entity | Action | Topic | Tag
    if kind == "entity":
        knowledge = Entity(name=name, types=tuple(types or ()), facets=facet_list)
    elif kind == "action":
        knowledge = Action(
            verbs=tuple(verbs or ()),
            tense=tense,
            subject=subject,
            object=obj,
            indirect_object=indirect,
            negated=bool(negated),
            params=facet_list,
        )
    elif kind == "topic":
        knowledge = Topic(text=text)
    elif kind == "tag":
        knowledge = Tag(text=text)
    else:
        raise StructragError(f"semantic ref {ref_id} has unknown kind {kind!r}")
    return SemanticRef(
        ref_id=int(ref_id),
        conversation=conv,
        message_id=mid,
        span=Span(start=int(start), end=int(end)),
        knowledge=knowledge,
        extractor=extractor,
        extractor_version=version,
    )
