"""Memory reads and writes on the DuckDB store (:class:`structrag.memory.store.MemoryStore`).

It shares the store's connection, so what it writes while an ingest or memory transaction
is open (held by the same thread) commits or rolls back with it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from structrag.memory.records import MemoryRecord, Observation, ProfileEntry, RoomSummary
from structrag.memory.store import MemoryQuery, NewProfileEntry, SourceRow
from structrag.naming import DOCUMENT_ROOM
from structrag.store.duckdb.reader import DuckDBReader
from structrag.store.duckdb.writer import to_json

_MEMORY_SELECT = """
SELECT m.mkey, m.message_id, m.memory_table, m.agent, m.speaker, m.conversation, m.world,
       m.text, m.created_at, m.ts, m.importance, m.is_unique, m.status, m.metadata,
       coalesce(a.access_count, 0), a.last_access
FROM messages m LEFT JOIN memory_access a USING (mkey)
"""


def _record(row: tuple[Any, ...]) -> MemoryRecord:
    (mkey, mid, table, agent, user, room, world, text, created, ts, importance, unique) = row[:12]
    status, metadata, count, last = row[12:]
    return MemoryRecord(
        id=str(mid),
        table=str(table),
        agent=agent,
        user=user,
        room=str(room),
        world=world,
        text=str(text),
        created_at=created,
        ts=ts,
        importance=str(importance),
        unique=bool(unique),
        status=status,
        metadata=json.loads(metadata) if metadata else {},
        access_count=int(count),
        last_access=last,
        mkey=int(mkey),
    )


def _where(query: MemoryQuery) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if query.agent is None:
        clauses.append("m.agent IS NULL")
    elif query.include_shared:
        clauses.append("(m.agent = ? OR (m.agent IS NULL AND m.memory_table = 'knowledge'))")
        params.append(query.agent)
    else:
        clauses.append("m.agent = ?")
        params.append(query.agent)
    if query.ids is not None:
        clauses.append("m.message_id IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(query.ids))
    if query.room is not None:
        clauses.append("m.conversation = ?")
        params.append(query.room)
    if query.tables is not None:
        clauses.append("m.memory_table IN (SELECT unnest(?::VARCHAR[]))")
        params.append(list(query.tables))
    if query.user is not None:
        clauses.append("lower(m.speaker) = lower(?)")
        params.append(query.user)
    if query.start is not None:
        clauses.append("coalesce(m.ts, m.created_at) >= ?")
        params.append(query.start)
    if query.end is not None:
        clauses.append("coalesce(m.ts, m.created_at) < ?")
        params.append(query.end)
    if not query.fragments:
        clauses.append("NOT starts_with(m.conversation, ?)")
        params.append(DOCUMENT_ROOM)
    return " AND ".join(clauses), params


class DuckDBMemory:
    """A :class:`~structrag.memory.store.MemoryStore` on the store's DuckDB connection."""

    def __init__(self, store: DuckDBReader) -> None:
        self._store = store
        self._sql = store.sql
        self._run = store._run
        self._first = store._first

    def _ids(self, mkeys: Sequence[int]) -> dict[int, str]:
        if not mkeys:
            return {}
        rows = self._sql(
            "SELECT mkey, message_id FROM messages WHERE mkey IN (SELECT unnest(?::BIGINT[]))",
            [list({int(k) for k in mkeys})],
        )
        return {int(k): str(i) for k, i in rows}

    # -- memories -----------------------------------------------------------------------

    def memories(
        self, query: MemoryQuery, *, limit: int | None = None, newest_first: bool = True
    ) -> list[MemoryRecord]:
        where, params = _where(query)
        order = "DESC" if newest_first else "ASC"
        tail = f" LIMIT {int(limit)}" if limit is not None else ""
        rows = self._sql(
            f"{_MEMORY_SELECT} WHERE {where} "
            f"ORDER BY coalesce(m.ts, m.created_at) {order}, m.mkey {order}{tail}",
            params,
        )
        return [_record(r) for r in rows]

    def memories_by_keys(self, mkeys: Sequence[int]) -> dict[int, MemoryRecord]:
        if not len(mkeys):
            return {}
        rows = self._sql(
            f"{_MEMORY_SELECT} WHERE m.mkey IN (SELECT unnest(?::BIGINT[]))",
            [sorted({int(k) for k in mkeys})],
        )
        return {r.mkey: r for r in map(_record, rows)}

    def count_memories(self, query: MemoryQuery) -> int:
        where, params = _where(query)
        row = self._first(f"SELECT count(*) FROM messages m WHERE {where}", params)
        return int(row[0]) if row else 0

    def memory_keys(self, query: MemoryQuery) -> list[int]:
        where, params = _where(query)
        rows = self._sql(f"SELECT m.mkey FROM messages m WHERE {where}", params)
        return [int(r[0]) for r in rows]

    def duplicate(self, agent: str, room: str, table: str, text: str) -> MemoryRecord | None:
        rows = self._sql(
            f"{_MEMORY_SELECT} WHERE m.agent = ? AND m.conversation = ? AND m.memory_table = ? "
            "AND m.text = ? ORDER BY m.mkey LIMIT 1",
            [agent, room, table, text],
        )
        return _record(rows[0]) if rows else None

    def update_memory(
        self, mkey: int, status: str | None, importance: str, metadata: dict[str, Any]
    ) -> None:
        self._run(
            "UPDATE messages SET status = ?, importance = ?, metadata = ? WHERE mkey = ?",
            [status, importance, to_json(metadata), mkey],
        )

    def touch(self, mkeys: Sequence[int], at: datetime) -> None:
        keys = sorted({int(k) for k in mkeys})
        if not keys:
            return
        self._run(
            "INSERT INTO memory_access SELECT k, 1, ? FROM (SELECT unnest(?::BIGINT[]) AS k) "
            "ON CONFLICT (mkey) DO UPDATE SET access_count = memory_access.access_count + 1, "
            "last_access = excluded.last_access",
            [at, keys],
        )

    # -- where facts come from ----------------------------------------------------------

    def add_sources(self, rows: Sequence[SourceRow]) -> None:
        if not rows:
            return
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?)"] * len(rows))
        self._run(
            f"INSERT INTO memory_sources VALUES {values}",
            [
                value
                for r in rows
                for value in (
                    r.mkey,
                    r.kind,
                    r.source_mkey,
                    r.source_ref,
                    r.start,
                    r.end,
                    r.confidence,
                    r.grounded,
                )
            ],
        )

    def sources(self, mkeys: Sequence[int]) -> dict[int, list[SourceRow]]:
        out: dict[int, list[SourceRow]] = {}
        if not len(mkeys):
            return out
        rows = self._sql(
            "SELECT s.mkey, s.source_kind, s.source_mkey, s.source_ref, s.span_start, s.span_end, "
            "s.confidence, s.grounded, m.message_id FROM memory_sources s "
            "LEFT JOIN messages m ON m.mkey = s.source_mkey "
            "WHERE s.mkey IN (SELECT unnest(?::BIGINT[])) ORDER BY s.rowid",
            [sorted({int(k) for k in mkeys})],
        )
        for mkey, kind, source, ref, start, end, confidence, grounded, source_id in rows:
            out.setdefault(int(mkey), []).append(
                SourceRow(
                    int(mkey),
                    str(kind),
                    None if source is None else int(source),
                    ref,
                    start,
                    end,
                    float(confidence),
                    bool(grounded),
                    source_id,
                )
            )
        return out

    def derived_only_from(self, mkeys: Sequence[int]) -> list[int]:
        keys = sorted({int(k) for k in mkeys})
        if not keys:
            return []
        rows = self._sql(
            "SELECT mkey FROM memory_sources GROUP BY mkey "
            "HAVING bool_and(source_mkey IN (SELECT unnest(?::BIGINT[]))) "
            "AND bool_or(source_mkey IS NOT NULL)",
            [keys],
        )
        return [int(r[0]) for r in rows]

    # -- user profiles ------------------------------------------------------------------

    def profile_entries(
        self,
        agent: str,
        user: str | None = None,
        *,
        current_only: bool = True,
        sources: bool = True,
    ) -> list[ProfileEntry]:
        clauses, params = ["agent = ?"], [agent]
        if user is not None:
            clauses.append("lower(user_name) = lower(?)")
            params.append(user)
        if current_only:
            clauses.append("superseded_by IS NULL")
        rows = self._sql(
            "SELECT * FROM profile_entries WHERE " + " AND ".join(clauses) + " ORDER BY entry_id",
            params,
        )
        ids = self._ids([k for r in rows for k in (r[9] or [])]) if sources else {}
        return [
            ProfileEntry(
                entry_id=int(r[0]),
                agent=str(r[1]),
                user=str(r[2]),
                category=str(r[3]),
                predicate=str(r[4]),
                object=str(r[5]),
                text=str(r[6]),
                negated=bool(r[7]),
                confidence=float(r[8]),
                sources=tuple(ids[int(k)] for k in (r[9] or []) if int(k) in ids),
                created_at=r[10],
                confirmed_at=r[11],
                superseded_by=None if r[12] is None else int(r[12]),
                superseded_at=r[13],
                source_mkeys=tuple(int(k) for k in (r[9] or [])),
            )
            for r in rows
        ]

    def profile_statements(self, agent: str) -> list[ProfileEntry]:
        # Each cited memory stands for the messages it was made from (a derived memory:
        # metadata 'from', and a 'message' source still stored), else for itself.
        rows = self._sql(
            "WITH cited AS (SELECT entry_id, unnest(source_mkeys) AS k, "
            "generate_subscripts(source_mkeys, 1) AS pos FROM profile_entries WHERE agent = ?), "
            "said AS (SELECT s.mkey, s.source_mkey, s.rowid AS r FROM memory_sources s "
            "JOIN messages src ON src.mkey = s.source_mkey WHERE s.source_kind = 'message'), "
            "stating AS (SELECT c.entry_id, c.pos, coalesce(said.source_mkey, c.k) AS k, "
            "coalesce(said.r, -1) AS r FROM cited c JOIN messages m ON m.mkey = c.k "
            "LEFT JOIN said ON said.mkey = c.k AND m.memory_table <> 'messages' "
            "AND (m.metadata -> 'from') IS NOT NULL), "
            "lists AS (SELECT entry_id, list(k ORDER BY pos, r) AS keys FROM stating "
            "GROUP BY entry_id) "
            "SELECT p.entry_id, p.user_name, p.category, p.predicate, p.object, p.text, "
            "p.negated, p.confidence, p.created_at, p.confirmed_at, p.superseded_by, "
            "p.superseded_at, lists.keys FROM profile_entries p "
            "LEFT JOIN lists USING (entry_id) WHERE p.agent = ? ORDER BY p.entry_id",
            [agent, agent],
        )
        return [
            ProfileEntry(
                entry_id=int(r[0]),
                agent=agent,
                user=str(r[1]),
                category=str(r[2]),
                predicate=str(r[3]),
                object=str(r[4]),
                text=str(r[5]),
                negated=bool(r[6]),
                confidence=float(r[7]),
                sources=tuple(dict.fromkeys(str(int(k)) for k in (r[12] or []))),
                created_at=r[8],
                confirmed_at=r[9],
                superseded_by=None if r[10] is None else int(r[10]),
                superseded_at=r[11],
            )
            for r in rows
        ]

    def cite_derived(self, *, dry_run: bool = False) -> int:
        # Entries written before entries cited facts cite the stating messages: each such
        # message key becomes the keys of the memories made from it with the entry's
        # statement (kept where there is none).
        old = self._sql(
            "SELECT p.entry_id, p.agent, p.predicate, lower(p.object), p.negated, "
            "p.source_mkeys, lower(p.user_name) FROM profile_entries p "
            "WHERE p.entry_id IN (SELECT c.entry_id "
            "FROM (SELECT entry_id, unnest(source_mkeys) AS k FROM profile_entries) c "
            "JOIN messages m ON m.mkey = c.k WHERE m.memory_table = 'messages') "
            "ORDER BY p.entry_id"
        )
        if not old:
            return 0
        said = sorted({int(k) for r in old for k in (r[5] or [])})
        rows = self._sql(
            "SELECT s.source_mkey, d.mkey, d.agent, d.metadata ->> 'predicate', "
            "lower(d.metadata ->> 'object'), d.metadata ->> 'negated', "
            "lower(coalesce(d.metadata ->> 'subject', '')) FROM memory_sources s "
            "JOIN messages d ON d.mkey = s.mkey WHERE s.source_kind = 'message' "
            "AND s.source_mkey IN (SELECT unnest(?::BIGINT[])) "
            "AND d.memory_table IN ('facts', 'relationships', 'goals') ORDER BY d.mkey",
            [said],
        )
        # keyed by whom the statement is about too: one message may say the same of two
        # people ("I live in Berlin. My sister Anna lives in Berlin.")
        made: dict[tuple[int, str, str, str, bool, str], list[int]] = {}
        for source, mkey, agent, predicate, obj, negated, subject in rows:
            key = (int(source), str(agent), str(predicate), str(obj), negated == "true", subject)
            made.setdefault(key, []).append(int(mkey))
        ids: list[int] = []
        keys: list[list[int]] = []
        for entry_id, agent, predicate, obj, negated, cited, user in old:
            now: list[int] = []
            for k in cited or []:
                key = (int(k), str(agent), str(predicate), str(obj), bool(negated), str(user))
                now += made.get(key, [k])
            now = list(dict.fromkeys(int(k) for k in now))
            if now != [int(k) for k in cited or []]:
                ids.append(int(entry_id))
                keys.append(now)
        if ids and not dry_run:
            self._run(
                "UPDATE profile_entries SET source_mkeys = n.keys FROM (SELECT "
                "unnest(?::BIGINT[]) AS id, unnest(?::BIGINT[][]) AS keys) n "
                "WHERE profile_entries.entry_id = n.id",
                [ids, keys],
            )
        return len(ids)

    def remove_profile_entry(self, entry_id: int) -> None:
        # What it superseded is superseded by what superseded it (Porto -> Berlin ->
        # Madrid without Berlin is Porto -> Madrid); current again only when it was.
        self._run(
            "UPDATE profile_entries SET superseded_by = r.superseded_by, "
            "superseded_at = CASE WHEN r.superseded_by IS NULL THEN NULL "
            "ELSE profile_entries.superseded_at END "
            "FROM (SELECT superseded_by FROM profile_entries WHERE entry_id = ?) r "
            "WHERE profile_entries.superseded_by = ?",
            [entry_id, entry_id],
        )
        self._run("DELETE FROM profile_entries WHERE entry_id = ?", [entry_id])

    def _next_id(self, table: str, column: str) -> int:
        row = self._first(f"SELECT coalesce(max({column}), 0) + 1 FROM {table}")
        assert row is not None
        return int(row[0])

    def add_profile_entry(self, entry: NewProfileEntry) -> int:
        entry_id = self._next_id("profile_entries", "entry_id")
        self._run(
            "INSERT INTO profile_entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL)",
            [
                entry_id,
                entry.agent,
                entry.user,
                entry.category,
                entry.predicate,
                entry.object,
                entry.text,
                entry.negated,
                entry.confidence,
                list(entry.source_mkeys),
                entry.at,
                entry.at,
            ],
        )
        return entry_id

    def confirm_profile_entry(self, entry_id: int, mkey: int, at: datetime) -> None:
        self._run(
            "UPDATE profile_entries SET confirmed_at = ?, source_mkeys = CASE WHEN "
            "list_contains(source_mkeys, ?) THEN source_mkeys ELSE "
            "list_append(source_mkeys, ?) END WHERE entry_id = ?",
            [at, mkey, mkey, entry_id],
        )

    def supersede_profile_entry(self, entry_id: int, by: int, at: datetime) -> None:
        self._run(
            "UPDATE profile_entries SET superseded_by = ?, superseded_at = ? WHERE entry_id = ?",
            [by, at, entry_id],
        )

    def forget_profile_sources(self, mkeys: Sequence[int]) -> None:
        keys = sorted({int(k) for k in mkeys})
        if not keys:
            return
        self._run(
            "UPDATE profile_entries SET source_mkeys = list_filter(source_mkeys, "
            "lambda k: NOT list_contains(?::BIGINT[], k)) "
            "WHERE len(list_intersect(source_mkeys, ?::BIGINT[])) > 0",
            [keys, keys],
        )
        gone = [
            int(r[0])
            for r in self._sql("SELECT entry_id FROM profile_entries WHERE len(source_mkeys) = 0")
        ]
        for entry_id in gone:  # each keeps the chain it was in whole
            self.remove_profile_entry(entry_id)

    # -- observations and summaries ------------------------------------------------------

    def add_observation(
        self,
        agent: str,
        room: str,
        ts: datetime | None,
        kind: str,
        topic: str,
        insight: str,
        importance: float,
        source_mkeys: Sequence[int],
    ) -> int:
        observation_id = self._next_id("observations", "observation_id")
        self._run(
            "INSERT INTO observations VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [observation_id, agent, room, ts, kind, topic, insight, importance, list(source_mkeys)],
        )
        return observation_id

    def observations(self, agent: str, room: str | None = None) -> list[Observation]:
        rows = self._sql(
            "SELECT observation_id, room, ts, kind, topic, insight, importance, source_mkeys "
            "FROM observations WHERE agent = ? AND (? IS NULL OR room = ?) "
            "ORDER BY importance DESC, observation_id",
            [agent, room, room],
        )
        ids = self._ids([k for r in rows for k in (r[7] or [])])
        return [
            Observation(
                observation_id=int(r[0]),
                room=str(r[1]),
                ts=r[2],
                kind=str(r[3]),
                topic=str(r[4]),
                insight=str(r[5]),
                importance=float(r[6]),
                sources=tuple(ids[int(k)] for k in (r[7] or []) if int(k) in ids),
            )
            for r in rows
        ]

    def add_summary(
        self,
        agent: str,
        room: str,
        text: str,
        method: str,
        source_mkeys: Sequence[int],
        first_ordinal: int,
        last_ordinal: int,
    ) -> int:
        summary_id = self._next_id("room_summaries", "summary_id")
        self._run(
            "INSERT INTO room_summaries VALUES (?, ?, ?, ?, ?, ?, ?, ?, now()::TIMESTAMP)",
            [
                summary_id,
                agent,
                room,
                text,
                method,
                list(source_mkeys),
                first_ordinal,
                last_ordinal,
            ],
        )
        return summary_id

    def summaries(self, agent: str, room: str | None = None) -> list[RoomSummary]:
        rows = self._sql(
            "SELECT summary_id, room, text, method, source_mkeys, first_ordinal, last_ordinal, "
            "created_at FROM room_summaries WHERE agent = ? AND (? IS NULL OR room = ?) "
            "ORDER BY room, last_ordinal",
            [agent, room, room],
        )
        ids = self._ids([k for r in rows for k in (r[4] or [])])
        return [
            RoomSummary(
                summary_id=int(r[0]),
                room=str(r[1]),
                text=str(r[2]),
                method=str(r[3]),
                sources=tuple(ids[int(k)] for k in (r[4] or []) if int(k) in ids),
                first_ordinal=int(r[5]),
                last_ordinal=int(r[6]),
                created_at=r[7],
            )
            for r in rows
        ]

    def forget_derived(self, agent: str, mkeys: Sequence[int]) -> None:
        keys = sorted({int(k) for k in mkeys})
        if not keys:
            return
        for table in ("observations", "room_summaries"):
            self._run(
                f"DELETE FROM {table} WHERE agent = ? "
                "AND len(list_intersect(source_mkeys, ?::BIGINT[])) > 0",
                [agent, keys],
            )
