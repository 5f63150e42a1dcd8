"""The memory data model: memories, search hits, profile entries, observations, summaries.

A memory is a message in one of the memory tables (``messages``, ``facts``,
``relationships``, ``goals``, ``knowledge``) that belongs to an agent, a user (the speaker)
and a room (the conversation), optionally a world. It goes through the same extraction as
any message, so every memory has entities, actions and topics with spans.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

MemoryTable = Literal["messages", "facts", "relationships", "goals", "knowledge"]
Importance = Literal["low", "normal", "high"]
MEMORY_TABLES: tuple[MemoryTable, ...] = (
    "messages",
    "facts",
    "relationships",
    "goals",
    "knowledge",
)
IMPORTANCE_LEVELS: tuple[Importance, ...] = ("low", "normal", "high")
GoalStatus = Literal["open", "in_progress", "done", "abandoned"]
#: A goal's status (``open`` when added); other memories have none.
GOAL_STATUSES: tuple[GoalStatus, ...] = ("open", "in_progress", "done", "abandoned")
#: A memory in a room no one named lives here (a fact stated to the agent directly).
DEFAULT_ROOM = "default"


@dataclass(frozen=True)
class MemoryRecord:
    """One memory, as the memory API returns it."""

    id: str
    table: str
    agent: str | None
    user: str | None
    room: str
    world: str | None
    text: str
    created_at: datetime
    ts: datetime | None
    importance: str
    unique: bool
    status: str | None
    metadata: dict[str, Any]
    access_count: int
    last_access: datetime | None
    #: The store's key of the memory (internal; stable while the memory exists).
    mkey: int = field(repr=False, compare=False, default=-1)
    #: An ``add(..., unique=True)`` found this exact memory stored already and stored
    #: nothing (the fields it was given were not applied).
    duplicate: bool = field(repr=False, compare=False, default=False)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "table": self.table,
            "agent": self.agent,
            "user": self.user,
            "room": self.room,
            "world": self.world,
            "text": self.text,
            "created_at": self.created_at.isoformat(),
            "ts": self.ts.isoformat() if self.ts else None,
            "importance": self.importance,
            "unique": self.unique,
            "status": self.status,
            "metadata": self.metadata,
            "access_count": self.access_count,
            "last_access": self.last_access.isoformat() if self.last_access else None,
        }

    def as_added(self) -> dict[str, Any]:
        """What ``add`` returns as JSON: the memory, and whether it was stored already."""
        return {**self.as_dict(), "duplicate": self.duplicate}


@dataclass(frozen=True)
class MemoryHit:
    """A memory a search found, its score and which signal found it."""

    memory: MemoryRecord
    score: float
    mode: str

    def as_dict(self) -> dict[str, Any]:
        return {**self.memory.as_dict(), "score": round(self.score, 6), "mode": self.mode}


@dataclass(frozen=True)
class PruneReport:
    """What :meth:`~structrag.memory.api.Memory.prune` would remove (``dry_run``) or
    removed, and what it kept for being important or often read."""

    dry_run: bool
    removed: list[str]
    kept_important: int
    kept_accessed: int
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "removed": self.removed,
            "count": len(self.removed),
            "kept_important": self.kept_important,
            "kept_accessed": self.kept_accessed,
            "seconds": round(self.seconds, 4),
        }


@dataclass(frozen=True)
class ProfileEntry:
    """Something an agent knows about a user, with the messages that state it."""

    entry_id: int
    agent: str
    user: str
    category: str
    predicate: str
    object: str
    text: str
    negated: bool
    confidence: float
    #: Memory ids of the stating messages, oldest first (a fact whose message was pruned,
    #: or one the agent added itself, is its own source).
    sources: tuple[str, ...]
    created_at: datetime
    confirmed_at: datetime
    superseded_by: int | None = None
    superseded_at: datetime | None = None
    #: A goal's status, from the goal memories that state it (``done`` and ``abandoned``
    #: goals are no longer current); None for what is not a goal.
    status: str | None = None
    #: The store keys of the memories the entry cites: the facts, relationships and goals
    #: made from its statements, or the agent's own (internal; ids are unique within a
    #: room only, keys everywhere).
    source_mkeys: tuple[int, ...] = field(repr=False, compare=False, default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "entry_id": self.entry_id,
            "user": self.user,
            "category": self.category,
            "predicate": self.predicate,
            "object": self.object,
            "text": self.text,
            "negated": self.negated,
            "confidence": self.confidence,
            "sources": list(self.sources),
            "created_at": self.created_at.isoformat(),
            "confirmed_at": self.confirmed_at.isoformat(),
            "superseded_by": self.superseded_by,
            "superseded_at": self.superseded_at.isoformat() if self.superseded_at else None,
            "status": self.status,
        }


@dataclass(frozen=True)
class Observation:
    """A decision made, a question left open, or a topic of strong interest in a room."""

    observation_id: int
    room: str
    ts: datetime | None
    kind: str
    topic: str
    insight: str
    importance: float
    sources: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {
            "observation_id": self.observation_id,
            "room": self.room,
            "ts": self.ts.isoformat() if self.ts else None,
            "kind": self.kind,
            "topic": self.topic,
            "insight": self.insight,
            "importance": self.importance,
            "sources": list(self.sources),
        }


@dataclass(frozen=True)
class RoomSummary:
    """A summary of a room's older messages (compaction); the messages stay."""

    summary_id: int
    room: str
    text: str
    method: str
    sources: tuple[str, ...]
    first_ordinal: int
    last_ordinal: int
    created_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "summary_id": self.summary_id,
            "room": self.room,
            "text": self.text,
            "method": self.method,
            "covers": len(self.sources),
            "sources": list(self.sources),
            "first_ordinal": self.first_ordinal,
            "last_ordinal": self.last_ordinal,
            "created_at": self.created_at.isoformat(),
        }
