"""What the memory API asks of storage, beside the knowledge store's messages and refs.

Memories are messages (:mod:`structrag.store.protocols`); this protocol adds reading them
as memories, read counts, where facts come from, user profiles, observations and room
summaries. Writes made while a store transaction is open belong to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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
        """A user's (or every user's) profile entries; ``sources=False`` leaves their
        source ids out (one query less)."""
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
