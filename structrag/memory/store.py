"""What the memory API asks of storage, beside the knowledge store's messages and refs.

Memories are messages (:mod:`structrag.store.protocols`); this protocol adds reading them
as memories, read counts, where facts come from, user profiles, observations and room
summaries. Writes made while a store transaction is open belong to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Protocol

from structrag.memory.records import MemoryRecord, Observation, ProfileEntry, RoomSummary


@dataclass(frozen=True)
class MemoryQuery:
    """Which memories: all conditions hold. ``agent`` None means memories of no agent
    (ingested for everyone); ``include_shared`` adds shared knowledge (no agent) to an
    agent's own."""

    agent: str | None
    ids: tuple[str, ...] | None = None
    room: str | None = None
    tables: tuple[str, ...] | None = None
    user: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    include_shared: bool = False
    #: False leaves out the fragments of documents (the knowledge base manages them).
    fragments: bool = True


@dataclass(frozen=True)
class SourceRow:
    """Where a fact or relationship memory comes from (see ``memory_sources``)."""

    mkey: int
    kind: str  # message, tool, fragment, stated
    source_mkey: int | None
    source_ref: str | None
    start: int | None
    end: int | None
    confidence: float
    grounded: bool
    #: The memory id (or document fragment id) of ``source_mkey``, as the store reads it
    #: back; not stored (the key is).
    source_id: str | None = None


@dataclass(frozen=True)
class NewProfileEntry:
    """A profile entry to store (its id comes from the store)."""

    agent: str
    user: str
    category: str
    predicate: str
    object: str
    text: str
    negated: bool
    confidence: float
    source_mkeys: tuple[int, ...]
    at: datetime

    def stored(self, entry_id: int) -> ProfileEntry:
        """The entry as stored under ``entry_id`` (its sources' ids left out)."""
        return ProfileEntry(
            entry_id=entry_id,
            agent=self.agent,
            user=self.user,
            category=self.category,
            predicate=self.predicate,
            object=self.object,
            text=self.text,
            negated=self.negated,
            confidence=self.confidence,
            sources=(),
            created_at=self.at,
            confirmed_at=self.at,
            source_mkeys=self.source_mkeys,
        )


class MemoryStore(Protocol):
    """Memory reads and writes on the store (DuckDB: :mod:`structrag.store.duckdb.memory`)."""

    def memories(
        self, query: MemoryQuery, *, limit: int | None = None, newest_first: bool = True
    ) -> list[MemoryRecord]: ...

    def memories_by_keys(self, mkeys: Sequence[int]) -> dict[int, MemoryRecord]: ...

    def count_memories(self, query: MemoryQuery) -> int: ...

    def memory_keys(self, query: MemoryQuery) -> list[int]:
        """mkeys of the memories a query selects."""
        ...

    def duplicate(self, agent: str, room: str, table: str, text: str) -> MemoryRecord | None:
        """An identical memory already in that room and table, if any."""
        ...

    def update_memory(
        self, mkey: int, status: str | None, importance: str, metadata: dict[str, Any]
    ) -> None:
        """Set a memory's status, importance and metadata (inside the caller's write)."""
        ...

    def touch(self, mkeys: Sequence[int], at: datetime) -> None:
        """Count a read of each memory (committed at once outside a transaction)."""
        ...

    def add_sources(self, rows: Sequence[SourceRow]) -> None: ...

    def sources(self, mkeys: Sequence[int]) -> dict[int, list[SourceRow]]: ...

    def derived_only_from(self, mkeys: Sequence[int]) -> list[int]:
        """Memories whose every source is among ``mkeys`` (they go when those go)."""
        ...

    def profile_entries(
        self,
        agent: str,
        user: str | None = None,
        *,
        current_only: bool = True,
        sources: bool = True,
    ) -> list[ProfileEntry]:
        """A user's (or every user's) profile entries, with the keys of the memories they
        cite (``source_mkeys``); ``sources=False`` leaves the ids of those memories out
        (one query less)."""
        ...

    def profile_statements(self, agent: str) -> list[ProfileEntry]:
        """Every profile entry of the agent, current and superseded, in one query, each
        with, as its ``sources``, the store keys (as text) of the messages that stated it:
        those each cited memory was made from, or the memory itself where it is the
        agent's own or its message is gone (what :class:`Supersession` is made of)."""
        ...

    def cite_derived(self, *, dry_run: bool = False) -> int:
        """Make the profile entries of an index written before entries cited facts (they
        cite the stating messages) cite the facts, relationships and goals made from those
        messages with the entry's statement (a message with none stays cited); how many
        entries changed (``dry_run``: would change; nothing is written)."""
        ...

    def remove_profile_entry(self, entry_id: int) -> None:
        """Delete a profile entry (what it superseded holds again)."""
        ...

    def add_profile_entry(self, entry: NewProfileEntry) -> int: ...

    def confirm_profile_entry(self, entry_id: int, mkey: int, at: datetime) -> None: ...

    def supersede_profile_entry(self, entry_id: int, by: int, at: datetime) -> None: ...

    def forget_profile_sources(self, mkeys: Sequence[int]) -> None:
        """Drop messages from the entries that cite them; an entry left with no source goes
        (and what it superseded holds again)."""
        ...

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
    ) -> int: ...

    def observations(self, agent: str, room: str | None = None) -> list[Observation]: ...

    def add_summary(
        self,
        agent: str,
        room: str,
        text: str,
        method: str,
        source_mkeys: Sequence[int],
        first_ordinal: int,
        last_ordinal: int,
    ) -> int: ...

    def summaries(self, agent: str, room: str | None = None) -> list[RoomSummary]: ...

    def forget_derived(self, agent: str, mkeys: Sequence[int]) -> None:
        """Drop observations and summaries that rest on any of these messages."""
        ...


#: Between a memory's id and its agent's name in the id it is stored under, when another
#: agent's memory (or an ingested message) already holds the id in that room: ids given
#: when adding are the agent's own (see :class:`AgentIds`). A given id cannot hold it.
ID_SCOPE = "\x1f"


def scoped_id(memory_id: str, agent: str) -> str:
    """The id a memory is stored under when its own is taken in its room by someone else."""
    return f"{memory_id}{ID_SCOPE}{agent}"


def visible_id(stored: str) -> str:
    """The id a memory was given, from the id it is stored under."""
    return stored.partition(ID_SCOPE)[0]


#: How a view of the whole index (``query``, ``ask``, ``show``) writes an id stored scoped
#: to its agent: ``n1@support-bot`` (printable, one word, and cited back as it is written;
#: ``show`` takes it). A plain id may hold "@" too: ``show`` finds an id as written first.
SHOWN_SCOPE = "@"


def shown_id(stored: str) -> str:
    """An id as a view of the whole index shows it: a scoped one as ``id@agent``."""
    memory_id, scoped, agent = stored.partition(ID_SCOPE)
    return f"{memory_id}{SHOWN_SCOPE}{agent}" if scoped else stored


def id_agent(stored: str) -> str | None:
    """The agent an id is scoped to (None for an id stored as given)."""
    _, scoped, agent = stored.partition(ID_SCOPE)
    return agent if scoped else None


def scoped_readings(shown: str) -> list[str]:
    """The scoped ids an id written as :func:`shown_id` writes them may stand for: each
    "@" read in turn as the mark (an agent's name, or an id, may hold "@" too)."""
    return [
        shown[:at] + ID_SCOPE + shown[at + 1 :]
        for at, c in enumerate(shown)
        if c == SHOWN_SCOPE and 0 < at < len(shown) - 1
    ]


def _visible_ids(ids: Sequence[str]) -> tuple[str, ...]:
    return tuple(visible_id(i) for i in ids)


class AgentIds:
    """A :class:`MemoryStore` that reads and writes one agent's memories under the ids the
    agent gave them: a memory stored under :func:`scoped_id` (its id was taken in its room
    by another agent's memory or an ingested message) is found by, and returned with, the
    id it was given. Every other call passes through."""

    def __init__(self, inner: MemoryStore, agent: str) -> None:
        self.inner = inner
        self.agent = agent

    def _query(self, query: MemoryQuery) -> MemoryQuery:
        if query.ids is None or query.agent is None:
            return query
        ids = tuple(query.ids) + tuple(scoped_id(i, query.agent) for i in query.ids)
        return replace(query, ids=ids)

    @staticmethod
    def _record(record: MemoryRecord) -> MemoryRecord:
        if ID_SCOPE not in record.id:
            return record
        return replace(record, id=visible_id(record.id))

    def memories(
        self, query: MemoryQuery, *, limit: int | None = None, newest_first: bool = True
    ) -> list[MemoryRecord]:
        found = self.inner.memories(self._query(query), limit=limit, newest_first=newest_first)
        return [self._record(r) for r in found]

    def memories_by_keys(self, mkeys: Sequence[int]) -> dict[int, MemoryRecord]:
        return {k: self._record(r) for k, r in self.inner.memories_by_keys(mkeys).items()}

    def count_memories(self, query: MemoryQuery) -> int:
        return self.inner.count_memories(self._query(query))

    def memory_keys(self, query: MemoryQuery) -> list[int]:
        return self.inner.memory_keys(self._query(query))

    def duplicate(self, agent: str, room: str, table: str, text: str) -> MemoryRecord | None:
        found = self.inner.duplicate(agent, room, table, text)
        return None if found is None else self._record(found)

    def update_memory(
        self, mkey: int, status: str | None, importance: str, metadata: dict[str, Any]
    ) -> None:
        self.inner.update_memory(mkey, status, importance, metadata)

    def touch(self, mkeys: Sequence[int], at: datetime) -> None:
        self.inner.touch(mkeys, at)

    def add_sources(self, rows: Sequence[SourceRow]) -> None:
        self.inner.add_sources(rows)

    def sources(self, mkeys: Sequence[int]) -> dict[int, list[SourceRow]]:
        return {
            k: [
                r if r.source_id is None else replace(r, source_id=visible_id(r.source_id))
                for r in rows
            ]
            for k, rows in self.inner.sources(mkeys).items()
        }

    def derived_only_from(self, mkeys: Sequence[int]) -> list[int]:
        return self.inner.derived_only_from(mkeys)

    def profile_entries(
        self,
        agent: str,
        user: str | None = None,
        *,
        current_only: bool = True,
        sources: bool = True,
    ) -> list[ProfileEntry]:
        found = self.inner.profile_entries(agent, user, current_only=current_only, sources=sources)
        return [replace(e, sources=_visible_ids(e.sources)) for e in found]

    def profile_statements(self, agent: str) -> list[ProfileEntry]:
        return self.inner.profile_statements(agent)

    def cite_derived(self, *, dry_run: bool = False) -> int:
        return self.inner.cite_derived(dry_run=dry_run)

    def remove_profile_entry(self, entry_id: int) -> None:
        self.inner.remove_profile_entry(entry_id)

    def add_profile_entry(self, entry: NewProfileEntry) -> int:
        return self.inner.add_profile_entry(entry)

    def confirm_profile_entry(self, entry_id: int, mkey: int, at: datetime) -> None:
        self.inner.confirm_profile_entry(entry_id, mkey, at)

    def supersede_profile_entry(self, entry_id: int, by: int, at: datetime) -> None:
        self.inner.supersede_profile_entry(entry_id, by, at)

    def forget_profile_sources(self, mkeys: Sequence[int]) -> None:
        self.inner.forget_profile_sources(mkeys)

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
        return self.inner.add_observation(
            agent, room, ts, kind, topic, insight, importance, source_mkeys
        )

    def observations(self, agent: str, room: str | None = None) -> list[Observation]:
        found = self.inner.observations(agent, room)
        return [replace(o, sources=_visible_ids(o.sources)) for o in found]

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
        return self.inner.add_summary(
            agent, room, text, method, source_mkeys, first_ordinal, last_ordinal
        )

    def summaries(self, agent: str, room: str | None = None) -> list[RoomSummary]:
        found = self.inner.summaries(agent, room)
        return [replace(s, sources=_visible_ids(s.sources)) for s in found]

    def forget_derived(self, agent: str, mkeys: Sequence[int]) -> None:
        self.inner.forget_derived(agent, mkeys)
