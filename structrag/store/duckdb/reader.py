"""Reads from the DuckDB store: messages, knowledge, and the arrays the query engine needs.

All SQL takes user values as bound parameters. Results are read to the end before the
connection does anything else (DuckDB wants results finished first).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from structrag.errors import ConfigError, IndexStateError, QueryError, StructragError
from structrag.knowledge.records import SOURCE_FILE
from structrag.models import (
    Action,
    Conversation,
    Entity,
    Facet,
    Message,
    SemanticRef,
    Span,
)
from structrag.models import Tag as TagKnowledge
from structrag.models import Topic as TopicKnowledge
from structrag.naming import DOCUMENT_ROOM
from structrag.store.duckdb.lease import Lease
from structrag.store.protocols import (
    LineFields,
    MessageFilter,
    MessageFrame,
    PropertyCondition,
    RefKind,
    RefTable,
    Scope,
    StoredMessage,
    StoreStats,
)

METADATA_EXTRACTOR = "metadata"

_MESSAGE_COLUMNS = (
    "mkey, conversation, message_id, ordinal, speaker, recipients, ts, text, tags, metadata"
)
_COMPARATORS = {"=": "=", "!=": "<>", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
#: A semantic ref's :class:`RefKind` in SQL (the metadata extractor's name bound first).
_KIND_CODE = (
    f"CASE WHEN extractor = ? THEN (CASE kind WHEN 'action' THEN {RefKind.METADATA_ACTION:d} "
    f"ELSE {RefKind.METADATA_ENTITY:d} END) ELSE (CASE kind "
    + " ".join(f"WHEN '{k.name.lower()}' THEN {k:d}" for k in list(RefKind)[:4])
    + " END) END"
)


def first_row(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...] | None:
    """The first row of a result, reading it to the end."""
    rows = result.fetchall()
    return rows[0] if rows else None


def _document_clause(document: str) -> tuple[str, list[Any]]:
    """The fragments of the documents ``document:"..."`` names: by id, by path (as stored,
    relative to the folder added, or as given on the command line: ``docs/handbook.md``
    for ``handbook.md`` added from ``docs/``), by the path's end (``handbook.md`` for
    ``guide/handbook.md``), by the file it was read from, or by title. Compared as
    strings, never as a LIKE pattern (``%`` and ``_`` are themselves)."""
    given = document.strip()
    name = given.replace("\\", "/").removeprefix("./").lower()
    try:
        resolved = str(Path(given).expanduser().resolve()) if given else ""
    except (OSError, RuntimeError, ValueError):
        resolved = ""
    clause = (
        "mkey IN (SELECT f.mkey FROM fragments f JOIN documents d USING (document_id) "
        "WHERE d.document_id = ? OR lower(d.path) = ? OR ends_with(lower(d.path), '/' || ?) "
        "OR ends_with(?, '/' || lower(d.path)) OR lower(d.title) = lower(?) "
        f"OR json_extract_string(d.metadata, '$.{SOURCE_FILE}') = ?)"
    )
    return clause, [given, name, name, name, given, resolved]


def _meta_clause(key: str, op: str, value: str) -> tuple[str, list[Any]]:
    """SQL for ``meta.key OP value`` with the key path and value bound as parameters.

    Numbers compare as numbers when both sides are numeric; text compares case-insensitively.
    """
    path = "$." + key
    if op == "!=":  # a message without the key is not equal to the value either
        clause, bound = _meta_clause(key, "=", value)
        return f"NOT coalesce({clause}, false)", bound
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


_REGEX_SPECIAL = frozenset("\\.^$|?*+()[]{}")


def _heading_line(title: str) -> str:
    """A regular expression (RE2) for a line that is the heading ``title`` (Markdown's
    ``#`` marks allowed), any case."""
    literal = "".join("\\" + c if c in _REGEX_SPECIAL else c for c in title.strip())
    return f"(?im)^[#\\s]*{literal}[\\s:]*$"


def _filled(values: np.ndarray, fill: Any) -> np.ndarray:
    if isinstance(values, np.ma.MaskedArray):
        return np.ma.filled(values, fill)
    return values


def _object_column(values: np.ndarray) -> np.ndarray:
    """A fetched column as an object array of Python values, None for NULL."""
    array = np.empty(len(values), dtype=object)
    if isinstance(values, np.ma.MaskedArray):
        array[:] = list(values.data)
        array[np.ma.getmaskarray(values)] = None
    else:
        array[:] = list(values)
    return array


def _timestamp_column(values: np.ndarray) -> np.ndarray:
    """A fetched TIMESTAMP column in whole seconds (floored, as a datetime's fields are),
    NaT for NULL."""
    if len(values) == 0:
        return np.array([], dtype="datetime64[s]")
    mask = np.ma.getmaskarray(values) if isinstance(values, np.ma.MaskedArray) else None
    data = np.asarray(values.data if mask is not None else values)
    if data.dtype.kind != "M":
        raise TypeError(f"a timestamp column came back as {data.dtype}")
    micros = data.astype("datetime64[us]").astype(np.int64)
    seconds = np.floor_divide(micros, 1_000_000).astype("datetime64[s]")
    if mask is not None:
        seconds[mask] = np.datetime64("NaT")
    seconds[np.isnat(data)] = np.datetime64("NaT")
    return seconds


class DuckDBReader:
    """The read side of :class:`~structrag.store.duckdb.DuckDBStore`."""

    _lease: Lease

    @contextmanager
    def using(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """The connection for one use: its statements and their results (see
        :class:`~structrag.store.duckdb.lease.Lease`)."""
        try:
            with self._lease.using() as con:
                yield con
        except duckdb.IOException as exc:
            if not unreadable(exc):
                raise
            raise damaged_store(self._lease.path, exc) from None

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        with self.using() as con:
            return con.execute(query, params).fetchall()

    def sql_table(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = (), limit: int | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        with self.using() as con:
            try:
                if len(con.extract_statements(query)) > 1:
                    raise ConfigError(
                        "one statement at a time: this holds several",
                        hint="run each statement on its own",
                    )
                cursor = con.execute(query, params)
                rows = cursor.fetchall() if limit is None else cursor.fetchmany(limit)
            except duckdb.Error as exc:  # the user's SQL: DuckDB's own words, no trace
                raise QueryError(
                    "the SQL failed: " + re.sub(r"\n\s*\n", "\n", str(exc).strip()),
                    hint='the views and their columns: structrag sql "SELECT view_name, '
                    "comment FROM duckdb_views() WHERE starts_with(view_name, 'v_')\" (and the "
                    "README's Storage layout)",
                ) from None
            description = cursor.description or ()
            decode = [k for k, d in enumerate(description) if str(d[1]) == "JSON"]
            if decode:  # JSON columns as the values they hold, not their text
                rows = [_json_decoded(row, decode) for row in rows]
            return [str(d[0]) for d in description], rows

    def read_only_problem(self, query: str) -> str | None:
        """What in ``query`` may change the database or run something (``"DELETE
        statements"``), or None when each of its statements only reads."""
        with self.using() as con:
            try:
                statements = con.extract_statements(query)
            except duckdb.Error:
                return None  # it fails as it runs, with DuckDB's own message
        if not statements:
            return "an empty statement"
        for statement in statements:
            kind = statement.type
            if kind == duckdb.StatementType.EXPLAIN and _EXPLAIN_ANALYZE.match(statement.query):
                return "EXPLAIN ANALYZE (it runs the statement)"
            if kind == duckdb.StatementType.PRAGMA:
                name = _PRAGMA_NAME.match(statement.query)
                if name is None or name.group(1).lower() not in _DESCRIBING_PRAGMAS:
                    return "PRAGMAs that do more than describe the database"
            elif kind not in _READING:
                return f"{kind.name} statements"
        return None

    def _first(self, query: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.sql(query, params)
        return rows[0] if rows else None

    def _run(self, query: str, params: Sequence[Any] = ()) -> None:
        """A statement without results."""
        with self.using() as con:
            con.execute(query, params)

    def _scalar(self, query: str, params: Sequence[Any] = ()) -> int:
        row = self._first(query, params)
        return int(row[0]) if row and row[0] is not None else 0

    # -- ingest bookkeeping ---------------------------------------------------------------

    def source_seen(self, sha256: str, fingerprint: str) -> bool:
        row = self._first(
            "SELECT 1 FROM sources WHERE sha256 = ? AND fingerprint = ? LIMIT 1",
            [sha256, fingerprint],
        )
        return row is not None

    def message_hashes(
        self, conversations: Iterable[str]
    ) -> dict[tuple[str, str], tuple[int, int, int]]:
        convs = sorted(set(conversations))
        if not convs:
            return {}
        rows = self.sql(
            "SELECT conversation, message_id, mkey, content_hash, ordinal FROM messages "
            "WHERE conversation IN (SELECT unnest($1::VARCHAR[]))",
            [convs],
        )
        return {(c, i): (int(k), int(h), int(o)) for c, i, k, h, o in rows}

    def conversation_inputs(self, conversations: Iterable[str]) -> dict[str, set[str]]:
        convs = sorted(set(conversations))
        if not convs:
            return {}
        rows = self.sql(
            "SELECT DISTINCT m.conversation, s.path FROM messages m "
            "JOIN sources s ON s.source_id = m.source_id "
            "WHERE m.conversation IN (SELECT unnest($1::VARCHAR[]))",
            [convs],
        )
        found: dict[str, set[str]] = {}
        for conversation, path in rows:
            found.setdefault(str(conversation), set()).add(str(path))
        return found

    def conversations_from(self, path: str) -> set[str]:
        rows = self.sql(
            "SELECT DISTINCT m.conversation FROM messages m "
            "JOIN sources s ON s.source_id = m.source_id WHERE s.path = ?",
            [path],
        )
        return {str(c) for (c,) in rows}

    def message_inputs(self, conversations: Iterable[str]) -> dict[tuple[str, str], str]:
        convs = sorted(set(conversations))
        if not convs:
            return {}
        rows = self.sql(
            "SELECT m.conversation, m.message_id, s.path FROM messages m "
            "JOIN sources s ON s.source_id = m.source_id "
            "WHERE m.conversation IN (SELECT unnest($1::VARCHAR[]))",
            [convs],
        )
        return {(str(c), str(i)): str(p) for c, i, p in rows}

    def next_ids(self) -> tuple[int, int]:
        row = self._first(
            "SELECT (SELECT coalesce(max(mkey), -1) + 1 FROM messages), "
            "(SELECT coalesce(max(ref_id), -1) + 1 FROM semantic_refs)"
        )
        assert row is not None
        return int(row[0]), int(row[1])

    def failed_messages(self, extractors: Sequence[str]) -> list[StoredMessage]:
        return self._messages(
            "mkey IN (SELECT mkey FROM extraction_failures "
            "WHERE extractor IN (SELECT unnest($1::VARCHAR[])))",
            [list(extractors)],
        )

    # -- overview -------------------------------------------------------------------------

    def stats(self) -> StoreStats:
        kinds = {"entity": 0, "action": 0, "topic": 0, "tag": 0}
        for kind, n in self.sql("SELECT kind, count(*) FROM semantic_refs GROUP BY kind"):
            kinds[str(kind)] = int(n)
        extractors: dict[str, dict[str, int]] = {}

        def entry(name: str) -> dict[str, int]:
            return extractors.setdefault(name, {"extracted": 0, "refs": 0, "failed": 0})

        for name, messages, refs in self.sql(
            "SELECT extractor, count(DISTINCT mkey), count(*) FROM semantic_refs "
            "GROUP BY extractor ORDER BY extractor"
        ):
            entry(str(name)).update(extracted=int(messages), refs=int(refs))
        # Extractors that record outcomes count the messages they answered, including those
        # in which they found nothing.
        for name, answered in self.sql(
            "SELECT extractor, count(DISTINCT mkey) FROM extractions GROUP BY extractor"
        ):
            entry(str(name))["extracted"] = int(answered)
        for name, failed in self.sql(
            "SELECT extractor, count(DISTINCT mkey) FROM extraction_failures GROUP BY extractor"
        ):
            entry(str(name))["failed"] = int(failed)
        conversation_kinds = {"histories": 0, "memory_rooms": 0, "documents": 0}
        for kind, n in self.sql(
            "SELECT kind, count(*) FROM (SELECT CASE "
            f"WHEN EXISTS (SELECT 1 FROM documents d WHERE '{DOCUMENT_ROOM}' || d.document_id = "
            "c.conversation) THEN 'documents' "
            "WHEN bool_or(m.agent IS NOT NULL) THEN 'memory_rooms' ELSE 'histories' END AS kind "
            "FROM conversations c LEFT JOIN messages m USING (conversation) "
            "GROUP BY c.conversation) GROUP BY kind"
        ):
            conversation_kinds[str(kind)] = int(n)
        tables = {"messages": 0, "facts": 0, "relationships": 0, "goals": 0, "knowledge": 0}
        for table, n in self.sql("SELECT memory_table, count(*) FROM messages GROUP BY 1"):
            tables[str(table)] = int(n)
        messages = tables.pop("messages")
        return StoreStats(
            conversations=sum(conversation_kinds.values()),
            messages=messages,
            memories=tables,
            semantic_refs=kinds,
            extractors=extractors,
            sources=self._scalar("SELECT count(*) FROM sources"),
            conversation_kinds=conversation_kinds,
        )

    def conversations(self) -> list[Conversation]:
        rows = self.sql("SELECT conversation, name, metadata FROM conversations ORDER BY 1")
        return [
            Conversation(id=r[0], name=r[1], metadata=json.loads(r[2]) if r[2] else {})
            for r in rows
        ]

    def conversation_summaries(self) -> list[dict[str, Any]]:
        # The conversation's own messages: an agent's facts, relationships and goals,
        # and a document's fragments, are rows of the same table that no page shows.
        # A document's conversation says which document it is (kind "document": its
        # id, path, title and fragment count), as `knowledge list` shows it; an agent's
        # room says whose (kind "memory_room", with its agents): a room with memories of
        # any table, a goal or fact alone too, as `stats` counts memory rooms.
        own = "FILTER (WHERE m.memory_table = 'messages')"
        rows = self.sql(
            "WITH docs AS (SELECT d.document_id, d.path, d.title, "
            "(SELECT count(*) FROM fragments f WHERE f.document_id = d.document_id) AS n "
            f"FROM documents d) SELECT c.conversation, c.name, count(m.mkey) {own}, "
            f"min(m.ts) {own}, max(m.ts) {own}, "
            "list_sort(list_distinct(list(m.speaker) FILTER "
            "(WHERE m.memory_table = 'messages' AND m.speaker IS NOT NULL))), "
            "any_value(docs.document_id), any_value(docs.path), any_value(docs.title), "
            "any_value(docs.n), "
            "list_sort(list_distinct(list(m.agent) FILTER (WHERE m.agent IS NOT NULL))) "
            "FROM conversations c LEFT JOIN messages m ON m.conversation = c.conversation "
            f"LEFT JOIN docs ON c.conversation = '{DOCUMENT_ROOM}' || docs.document_id "
            "GROUP BY c.conversation, c.name ORDER BY c.conversation"
        )
        out: list[dict[str, Any]] = []
        for r in rows:
            row: dict[str, Any] = {
                "id": r[0],
                "name": r[1],
                "messages": int(r[2]),
                "first": r[3].isoformat() if r[3] else None,
                "last": r[4].isoformat() if r[4] else None,
                "speakers": list(r[5] or []),
                "kind": "document"
                if r[6] is not None
                else "memory_room"
                if r[10]
                else "conversation",
            }
            if r[6] is None and r[10]:  # an agent's room (rooms of one name are shared)
                row["agents"] = list(r[10])
            if r[6] is not None:
                row.update(
                    {"document_id": r[6], "path": r[7], "title": r[8], "fragments": int(r[9])}
                )
            out.append(row)
        return out

    # -- messages -------------------------------------------------------------------------

    def _messages(
        self, where: str, params: list[Any], limit: int | None = None
    ) -> list[StoredMessage]:
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self.sql(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {where} ORDER BY mkey{tail}", params
        )
        return [_stored(r) for r in rows]

    def messages_by_keys(self, mkeys: Sequence[int]) -> dict[int, StoredMessage]:
        if not len(mkeys):
            return {}
        found = self._messages(
            "mkey IN (SELECT unnest($1::BIGINT[]))", [sorted({int(k) for k in mkeys})]
        )
        return {m.mkey: m for m in found}

    def line_fields(self, mkeys: Sequence[int]) -> dict[int, LineFields]:
        if not len(mkeys):
            return {}
        rows = self.sql(
            "SELECT mkey, conversation, speaker, ts, text, "
            f"CASE WHEN starts_with(conversation, '{DOCUMENT_ROOM}') THEN metadata END "
            "FROM messages WHERE mkey IN (SELECT unnest($1::BIGINT[]))",
            [sorted({int(k) for k in mkeys})],
        )
        return {
            int(mkey): LineFields(conv, speaker, ts, text, json.loads(meta) if meta else None)
            for mkey, conv, speaker, ts, text, meta in rows
        }

    def find_message(self, conversation: str | None, message_id: str) -> list[StoredMessage]:
        if conversation is None:
            return self._messages("message_id = ?", [message_id])
        return self._messages("conversation = ? AND message_id = ?", [conversation, message_id])

    def iter_messages(
        self, conversation: str | None = None, batch: int = 2000, *, table: str | None = None
    ) -> Iterator[StoredMessage]:
        last = -1
        where, params = ["mkey > ?"], []
        if conversation is not None:
            where.append("conversation = ?")
            params.append(conversation)
        if table is not None:
            where.append("memory_table = ?")
            params.append(table)
        while True:
            rows = self._messages(" AND ".join(where), [last, *params], batch)
            if not rows:
                return
            yield from rows
            last = rows[-1].mkey

    # -- semantic refs --------------------------------------------------------------------

    def _refs(self, where: str, params: list[Any]) -> list[tuple[int, SemanticRef]]:
        rows = self.sql(_REF_SELECT.format(where=where), params)
        return [(int(r[1]), _ref(r)) for r in rows]

    def refs_for_messages(self, mkeys: Sequence[int]) -> dict[int, list[SemanticRef]]:
        out: dict[int, list[SemanticRef]] = {int(k): [] for k in mkeys}
        if not out:
            return out
        for mkey, ref in self._refs("mkey IN (SELECT unnest($1::BIGINT[]))", [list(out)]):
            out[mkey].append(ref)
        return out

    def refs_by_ids(self, ref_ids: Sequence[int]) -> dict[int, tuple[int, SemanticRef]]:
        if not len(ref_ids):
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
        # each group is named by its most frequent spelling ("dogs" over "2 dogs"); types:
        # the most frequent among the mentions first
        rows = self.sql(
            "WITH m AS (SELECT e.stem_key, e.name, e.types, r.mkey "
            "  FROM entities e JOIN semantic_refs r USING (ref_id) "
            "  WHERE (? IS NULL OR r.conversation = ?)), "
            "spelt AS (SELECT stem_key, name, count(*) AS n FROM m GROUP BY ALL), "
            "top AS (SELECT stem_key, first(name ORDER BY n DESC, name) AS name, "
            "  sum(n) AS mentions FROM spelt GROUP BY stem_key "
            "  ORDER BY mentions DESC, name LIMIT ?), "
            "seen AS (SELECT stem_key, count(DISTINCT mkey) AS messages "
            "  FROM m SEMI JOIN top USING (stem_key) GROUP BY stem_key), "
            "typed AS (SELECT stem_key, type, count(*) AS n FROM "
            "  (SELECT stem_key, unnest(types) AS type FROM m SEMI JOIN top USING (stem_key)) "
            "  GROUP BY ALL) "
            "SELECT top.name, top.mentions, seen.messages, "
            "  list(typed.type ORDER BY typed.n DESC, typed.type) FILTER (typed.type IS NOT NULL) "
            "FROM top JOIN seen USING (stem_key) LEFT JOIN typed USING (stem_key) "
            "GROUP BY ALL ORDER BY top.mentions DESC, top.name",
            [conversation, conversation, limit],
        )
        return [
            {"name": r[0], "mentions": int(r[1]), "messages": int(r[2]), "types": list(r[3] or [])}
            for r in rows
        ]

    def top_topics(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]:
        # each group is named by its most frequent spelling ("dogs" over "2 dogs")
        rows = self.sql(
            "WITH m AS (SELECT t.stem_key, t.text, r.mkey "
            "  FROM topics t JOIN semantic_refs r USING (ref_id) "
            "  WHERE (? IS NULL OR r.conversation = ?)), "
            "spelt AS (SELECT stem_key, text, count(*) AS n FROM m GROUP BY ALL) "
            "SELECT first(text ORDER BY n DESC, text) AS text, sum(n) AS mentions, "
            "  (SELECT count(DISTINCT mkey) FROM m WHERE m.stem_key = spelt.stem_key) "
            "FROM spelt GROUP BY stem_key ORDER BY mentions DESC, text LIMIT ?",
            [conversation, conversation, limit],
        )
        return [{"topic": r[0], "mentions": int(r[1]), "messages": int(r[2])} for r in rows]

    def aliases(self, conversation: str | None = None) -> list[tuple[str, str, str]]:
        rows = self.sql(
            "SELECT DISTINCT term, related, source FROM aliases "
            "WHERE (? IS NULL OR conversation = ?) ORDER BY ALL",
            [conversation, conversation],
        )
        return [(str(a), str(b), str(s)) for a, b, s in rows]

    # -- for the query engine -------------------------------------------------------------

    def message_frame(self, scope: Scope) -> MessageFrame:
        clauses = ["memory_table IN (SELECT unnest(?::VARCHAR[]))"]
        params: list[Any] = [list(scope.tables)]
        if scope.conversation is not None:
            if "knowledge" in scope.tables and scope.tables != ("knowledge",):
                # a conversation, and the documents beside it
                clauses.append("(conversation = ? OR memory_table = 'knowledge')")
            else:
                clauses.append("conversation = ?")
            params.append(scope.conversation)
        if scope.agent is not None:
            shared = " OR (agent IS NULL AND memory_table = 'knowledge')" if scope.shared else ""
            clauses.append(f"(agent = ?{shared})")
            params.append(scope.agent)
        elif scope.shared:  # no agent's: shared knowledge only
            clauses.append("agent IS NULL")
        with self.using() as con:
            found = con.execute(
                "SELECT mkey, conversation, message_id, ordinal, "
                "coalesce(json_extract_string(metadata, '$.session'), strftime(ts, '%Y-%m-%d'), "
                "'') "
                "AS session, speaker, ts FROM messages WHERE "
                + " AND ".join(clauses)
                + " ORDER BY conversation, ordinal",
                params,
            ).fetchnumpy()
        # Columns as numpy arrays (a NULL is masked): several times faster than rows of
        # tuples on a large index.
        return MessageFrame(
            mkeys=np.asarray(_filled(found["mkey"], 0), dtype=np.int64),
            conversations=_object_column(found["conversation"]),
            ids=_object_column(found["message_id"]),
            ordinals=np.asarray(_filled(found["ordinal"], 0), dtype=np.int64),
            sessions=_object_column(found["session"]),
            speakers=_object_column(found["speaker"]),
            timestamps=_timestamp_column(found["ts"]),
        )

    def documents_named(self, document: str) -> int:
        clause, params = _document_clause(document)
        return self._scalar(
            f"SELECT count(DISTINCT f.document_id) FROM fragments f WHERE f.{clause}", params
        )

    def metadata_keys(self, conversation: str | None) -> list[str]:
        rows = self.sql(
            "SELECT DISTINCT unnest(json_keys(metadata)) FROM messages "
            "WHERE metadata IS NOT NULL AND (? IS NULL OR conversation = ?)",
            [conversation, conversation],
        )
        return sorted(str(k) for (k,) in rows)

    def memory_tables(self) -> set[str]:
        return {str(t) for (t,) in self.sql("SELECT DISTINCT memory_table FROM messages")}

    def ref_table(self, conversation: str | None) -> RefTable:
        with self.using() as con:
            found = con.execute(
                f"SELECT ref_id, mkey, {_KIND_CODE} AS code FROM semantic_refs "
                "WHERE (? IS NULL OR conversation = ?) ORDER BY ref_id",
                [METADATA_EXTRACTOR, conversation, conversation],
            ).fetchnumpy()
        if not len(found["ref_id"]):
            return RefTable.empty()
        return RefTable(
            ref_ids=np.asarray(found["ref_id"], dtype=np.int64),
            mkeys=np.asarray(found["mkey"], dtype=np.int64),
            kinds=np.asarray(found["code"], dtype=np.uint8),
        )

    def refs_meeting(
        self, ref_ids: Sequence[int] | None, conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        if (ref_ids is not None and not len(ref_ids)) or not conditions:
            return []
        if any(c.name == "negated" for c in conditions):
            return self._negated_meeting(ref_ids, conditions)
        if ref_ids is not None:
            return self._candidates_meeting(ref_ids, conditions)
        # One SELECT per condition (the refs with a row that meets it), kept when every
        # condition found the ref.
        parts: list[str] = []
        params: list[Any] = []
        for number, condition in enumerate(conditions):
            if condition.whole_words:  # a value holding the words, at word boundaries
                test = (
                    "len(list_filter(?::VARCHAR[], "
                    "lambda v: contains(' ' || value || ' ', ' ' || v || ' '))) > 0"
                )
            else:
                test = "value IN (SELECT unnest(?::VARCHAR[]))"
            parts.append(
                f"SELECT DISTINCT ref_id, {number} AS c FROM properties WHERE name = ? AND {test}"
            )
            params += [condition.name, list(condition.values)]
        rows = self.sql(
            f"SELECT ref_id FROM ({' UNION ALL '.join(parts)}) GROUP BY ref_id "
            f"HAVING count(*) = {len(conditions)} ORDER BY ref_id",
            params,
        )
        return [int(r) for (r,) in rows]

    def _negated_meeting(
        self, ref_ids: Sequence[int] | None, conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """``negated=yes`` (a negated action: "I didn't make it") is no row of the property
        index: the actions table says it. The refs meeting the other conditions, of them
        the negated actions."""
        rest = [c for c in conditions if c.name != "negated"]
        found = self.refs_meeting(ref_ids, rest) if rest else ref_ids
        if found is not None and not len(found):
            return []
        where, params = "", []
        if found is not None:
            where, params = " AND ref_id IN (SELECT unnest(?::BIGINT[]))", [list(found)]
        rows = self.sql(f"SELECT ref_id FROM actions WHERE negated{where} ORDER BY ref_id", params)
        return [int(r) for (r,) in rows]

    def _candidates_meeting(
        self, ref_ids: Sequence[int], conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """The candidates' rows of the conditions' properties, in one plain SELECT, checked
        here (planning one SELECT per condition cost ~5 ms a call, more than running it).
        The range lets DuckDB skip row groups by their min/max (refs are stored in order)."""
        rows = self.sql(
            "SELECT ref_id, name, value FROM properties WHERE ref_id BETWEEN ? AND ? "
            "AND ref_id IN (SELECT unnest(?::BIGINT[])) AND list_contains(?::VARCHAR[], name)",
            [min(ref_ids), max(ref_ids), list(ref_ids), sorted({c.name for c in conditions})],
        )
        met: dict[int, set[int]] = {}
        for ref_id, name, value in rows:
            for number, condition in enumerate(conditions):
                if condition.name == name and condition.accepts(value):
                    met.setdefault(int(ref_id), set()).add(number)
        return sorted(r for r, numbers in met.items() if len(numbers) == len(conditions))

    def conversation_properties(self, conversation: str) -> dict[int, list[tuple[str, str]]]:
        return _grouped(
            self.sql(
                "SELECT p.ref_id, p.name, p.value FROM properties p "
                "JOIN semantic_refs r USING (ref_id) WHERE r.conversation = ?",
                [conversation],
            )
        )

    def filter_messages(self, condition: MessageFilter) -> list[int]:
        clauses: list[str] = []
        params: list[Any] = []
        if condition.conversation is not None:
            clauses.append("conversation = ?")
            params.append(condition.conversation)
        if condition.speakers:
            clauses.append("lower(speaker) IN (SELECT lower(unnest(?::VARCHAR[])))")
            params.append(list(condition.speakers))
        for column, values in (("recipients", condition.recipients), ("tags", condition.tags)):
            if values:
                clauses.append(
                    f"len(list_intersect(list_transform({column}, lambda x: lower(x)), "
                    "list_transform(?::VARCHAR[], lambda x: lower(x)))) > 0"
                )
                params.append(list(values))
        if condition.start is not None:
            clauses.append("ts >= ?")
            params.append(condition.start)
        if condition.end is not None:
            clauses.append("ts < ?")
            params.append(condition.end)
        for key, op, value in condition.meta:
            clause, bound = _meta_clause(key, op, value)
            clauses.append(clause)
            params.extend(bound)
        if condition.tables:
            clauses.append("memory_table IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(condition.tables))
        if condition.not_tables:
            clauses.append("memory_table NOT IN (SELECT unnest(?::VARCHAR[]))")
            params.append(list(condition.not_tables))
        for document in condition.documents:
            clause, bound = _document_clause(document)
            clauses.append(clause)
            params.extend(bound)
        for section in condition.sections:
            # under the heading, or holding it: a small document is one fragment, holding
            # several sections (a heading is a line of its own in the text)
            clauses.append(
                "mkey IN (SELECT f.mkey FROM fragments f JOIN messages m USING (mkey) WHERE "
                "len(list_filter(f.section, lambda s: contains(lower(s), lower(?)))) > 0 "
                "OR regexp_matches(m.text, ?))"
            )
            params.extend([section, _heading_line(section)])
        where = " AND ".join(clauses) or "TRUE"
        try:
            rows = self.sql(f"SELECT mkey FROM messages WHERE {where}", params)
        except duckdb.Error as exc:  # a JSON path DuckDB cannot read, say
            raise QueryError(
                f"cannot filter messages on {condition}: {exc}",
                hint="meta keys are letters, digits and underscores joined by dots",
            ) from exc
        return [int(r[0]) for r in rows]

    def embedding_matrix(
        self, model: str, conversation: str | None
    ) -> tuple[np.ndarray, np.ndarray]:
        # As numpy columns: a conversion of each float through Python costs more than the
        # query at 100,000 messages.
        with self.using() as con:
            found = con.execute(
                "SELECT e.mkey, e.vector FROM embeddings e JOIN messages m USING (mkey) "
                "WHERE e.model = ? AND (? IS NULL OR m.conversation = ?) ORDER BY e.mkey",
                [model, conversation, conversation],
            ).fetchnumpy()
        if not len(found["mkey"]):
            return np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
        vectors = np.stack([np.asarray(v, dtype=np.float32) for v in found["vector"]])
        return np.asarray(found["mkey"], dtype=np.int64), vectors

    def knowledge_texts(self, ref_ids: Sequence[int]) -> dict[int, tuple[str, str, list[str]]]:
        if not len(ref_ids):
            return {}
        low, high = min(ref_ids), max(ref_ids)
        return _texts(
            self.sql(
                "WITH wanted AS (SELECT unnest(?::BIGINT[]) AS ref_id) "
                "SELECT e.ref_id, 'entity', e.name, e.types FROM entities e "
                "JOIN wanted USING (ref_id) WHERE e.ref_id BETWEEN ? AND ? "
                "UNION ALL SELECT t.ref_id, 'topic', t.text, [] FROM topics t "
                "JOIN wanted USING (ref_id) WHERE t.ref_id BETWEEN ? AND ? "
                "UNION ALL SELECT g.ref_id, 'tag', g.text, [] FROM tag_refs g "
                "JOIN wanted USING (ref_id) WHERE g.ref_id BETWEEN ? AND ?",
                [list(ref_ids), low, high, low, high, low, high],
            )
        )

    def conversation_knowledge_texts(
        self, conversation: str
    ) -> dict[int, tuple[str, str, list[str]]]:
        return _texts(
            self.sql(
                "WITH wanted AS (SELECT ref_id FROM semantic_refs WHERE conversation = ?) "
                "SELECT ref_id, 'entity', name, types FROM entities JOIN wanted USING (ref_id) "
                "UNION ALL SELECT ref_id, 'topic', text, [] FROM topics JOIN wanted USING (ref_id) "
                "UNION ALL SELECT ref_id, 'tag', text, [] FROM tag_refs JOIN wanted USING (ref_id)",
                [conversation],
            )
        )

    def knowledge_vocabulary(self, conversation: str | None) -> list[tuple[str, str, int]]:
        rows = self.sql(
            "SELECT min(e.name), 'entity', count(*) FROM entities e "
            "JOIN semantic_refs r USING (ref_id) "
            "WHERE r.extractor <> ? AND (? IS NULL OR r.conversation = ?) "
            "GROUP BY e.stem_key "
            "UNION ALL "
            "SELECT min(t.text), 'topic', count(*) FROM topics t "
            "JOIN semantic_refs r USING (ref_id) WHERE (? IS NULL OR r.conversation = ?) "
            "GROUP BY t.stem_key",
            [METADATA_EXTRACTOR, conversation, conversation, conversation, conversation],
        )
        return [(str(a), str(b), int(c)) for a, b, c in rows]

    def digest(self, conversation: str) -> bytes | None:
        parts = self.sql(
            "SELECT data FROM digests WHERE conversation = ? ORDER BY part", [conversation]
        )
        return b"".join(bytes(p) for (p,) in parts) if parts else None

    def relation_edges(self, conversation: str | None) -> list[tuple[str, str, str]]:
        # The scope's refs first, then each table joined to them: unnesting the types of
        # every entity in the index before the join costs ~100 ms at 100,000 messages.
        rows = self.sql(
            "WITH wanted AS (SELECT ref_id, extractor FROM semantic_refs "
            "WHERE (? IS NULL OR conversation = ?)), "
            "named AS (SELECT e.name, e.name_lower, e.types FROM entities e "
            "JOIN wanted w USING (ref_id) WHERE w.extractor <> ?) "
            "SELECT a.subject, a.verb, a.object FROM actions a JOIN wanted w USING (ref_id) "
            "WHERE a.subject IS NOT NULL AND a.object IS NOT NULL AND w.extractor <> ? "
            "UNION ALL "
            "SELECT f.value, 'have', e.name FROM entity_facets f JOIN entities e USING (ref_id) "
            "JOIN wanted USING (ref_id) WHERE f.name = 'owner' "
            "UNION ALL "
            "SELECT DISTINCT n.name, 'is', t.type FROM named n, unnest(n.types) AS t(type) "
            "WHERE t.type NOT IN ('name', 'thing', 'person') AND lower(t.type) <> n.name_lower "
            "ORDER BY ALL",
            [conversation, conversation, METADATA_EXTRACTOR, METADATA_EXTRACTOR],
        )
        return [(str(a), str(b), str(c)) for a, b, c in rows]

    # -- the LLM answer cache -------------------------------------------------------------

    def cached_answers(
        self, model: str, prompt_version: str, hashes: Sequence[str]
    ) -> dict[str, tuple[str, int, int]]:
        """``message_hash -> (response JSON, input tokens, output tokens)``."""
        if not hashes:
            return {}
        rows = self.sql(
            "SELECT message_hash, response, input_tokens, output_tokens FROM llm_cache "
            "WHERE model = ? AND prompt_version = ? "
            "AND message_hash IN (SELECT unnest(?::VARCHAR[]))",
            [model, prompt_version, list(hashes)],
        )
        return {str(h): (str(r), int(i), int(o)) for h, r, i, o in rows}

    def holds_nothing(self) -> bool:
        """No ingest committed and no LLM answer cached: a directory that can go."""
        with suppress(duckdb.Error):
            return not self._scalar("SELECT count(*) FROM sources") and not self._scalar(
                "SELECT count(*) FROM llm_cache"
            )
        return False


#: Statements that read: queries (WITH, DESCRIBE, SUMMARIZE and SHOW are SELECTs to
#: DuckDB) and EXPLAIN without ANALYZE; PRAGMAs only of :data:`_DESCRIBING_PRAGMAS`.
_READING = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
_EXPLAIN_ANALYZE = re.compile(r"\s*EXPLAIN\s+ANALY[SZ]E\b", re.IGNORECASE)
_PRAGMA_NAME = re.compile(r"\s*PRAGMA\s+(\w+)", re.IGNORECASE)
_DESCRIBING_PRAGMAS = frozenset(
    {
        "table_info",
        "show",
        "show_tables",
        "show_tables_expanded",
        "database_list",
        "database_size",
        "storage_info",
        "version",
        "metadata_info",
        "functions",
        "collations",
        "platform",
    }
)


def _grouped(rows: list[tuple[Any, ...]]) -> dict[int, list[tuple[str, str]]]:
    out: dict[int, list[tuple[str, str]]] = {}
    for ref_id, name, value in rows:
        out.setdefault(int(ref_id), []).append((str(name), str(value)))
    return out


def _texts(rows: list[tuple[Any, ...]]) -> dict[int, tuple[str, str, list[str]]]:
    return {int(r[0]): (str(r[1]), str(r[2]), list(r[3] or [])) for r in rows}


def _stored(row: tuple[Any, ...]) -> StoredMessage:
    mkey, conv, mid, ordinal, speaker, recipients, ts, text, tags, metadata = row
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
                  'is_bool': f.is_bool, 'units': f.units}} ORDER BY f.position) AS facets
    FROM (SELECT * FROM entity_facets UNION ALL SELECT * FROM action_params) f
    JOIN wanted w ON w.ref_id = f.ref_id GROUP BY f.ref_id
)
SELECT w.ref_id, w.mkey, w.conversation, w.message_id, w.span_start, w.span_end,
       w.extractor, w.extractor_version, w.kind,
       e.name, e.types, a.verbs, a.tense, a.subject, a.object, a.indirect_object, a.negated,
       coalesce(t.text, g.text), wf.facets
FROM wanted w
LEFT JOIN entities e ON e.ref_id = w.ref_id
LEFT JOIN actions a ON a.ref_id = w.ref_id
LEFT JOIN topics t ON t.ref_id = w.ref_id
LEFT JOIN tag_refs g ON g.ref_id = w.ref_id
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
    knowledge: Entity | Action | TopicKnowledge | TagKnowledge
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
        knowledge = TopicKnowledge(text=text)
    elif kind == "tag":
        knowledge = TagKnowledge(text=text)
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


def _json_decoded(row: tuple[Any, ...], columns: Sequence[int]) -> tuple[Any, ...]:
    """``row`` with the JSON text in ``columns`` decoded (NULL stays None)."""
    values = list(row)
    for k in columns:
        if isinstance(values[k], str):
            values[k] = json.loads(values[k])
    return tuple(values)


def unreadable(exc: BaseException) -> bool:
    """Whether a DuckDB error says the file cannot be read (cut short, corrupt), not that
    the query failed, was interrupted or ran out of memory."""
    text = str(exc)
    return isinstance(exc, duckdb.IOException) and ("Could not read" in text or "orrupt" in text)


def damaged_store(path: Path, exc: BaseException) -> IndexStateError:
    """The error of an index whose DuckDB file cannot be read (cut short, damaged)."""
    lines = str(exc).strip().splitlines()
    return IndexStateError(
        f"the index's store {path} cannot be read (damaged or cut short?): "
        f"{lines[0] if lines else type(exc).__name__}",
        hint="it is the index's only record of its messages and knowledge: restore "
        f"{path.name} from a backup, or move the index away and ingest the files again "
        "(the text index is rebuilt from the store, not the other way)",
    )
