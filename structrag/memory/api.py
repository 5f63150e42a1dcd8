"""The memory API: an agent writes memories as they happen and reads back what matters.

>>> mem = index.memory(agent="support-bot")                        # doctest: +SKIP
>>> m = mem.add("I moved to Lisbon last month", user="priya", room="dm-priya")
>>> mem.search("where does Priya live?", count=5)
>>> mem.context("Can you book me a table nearby?", room="dm-priya", budget=4000)

Every memory is a message of the index (so files and live memories are one store) and
goes through the same extraction: it is extracted, stored and searchable when ``add``
returns. A message from a user also updates what the agent knows of them: statements
("I live in X", "my sister X", "I prefer X") become facts and relationships, grounded in
the message that states them, and entries of the user's profile (a newer statement that
contradicts an older one supersedes it; the history stays). An agent reads its own
memories only, and knowledge shared with every agent.
"""

from __future__ import annotations

import contextlib
import logging
import re
import secrets
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from structrag import faults
from structrag.errors import (
    Committed,
    MemoryInputError,
    NotFoundError,
    WriteInterrupted,
    check_count,
    first_line,
)
from structrag.extract.base import Extractor
from structrag.ingest import Ingestor, Pending
from structrag.memory.compaction import digest
from structrag.memory.records import (
    DEFAULT_ROOM,
    GOAL_STATUSES,
    IMPORTANCE_LEVELS,
    MEMORY_TABLES,
    MemoryHit,
    MemoryRecord,
    Observation,
    ProfileEntry,
    PruneReport,
    RoomSummary,
)
from structrag.memory.statements import (
    PREDICATES,
    Statement,
    describe,
    same_subject,
    supersedes,
)
from structrag.memory.store import (
    ID_SCOPE,
    AgentIds,
    MemoryQuery,
    MemoryStore,
    NewProfileEntry,
    SourceRow,
    scoped_id,
    visible_id,
)
from structrag.memory.supersession import SUPERSEDED, Supersession
from structrag.memory.window import (
    DEFAULT_SHARES,
    ContextWindow,
    Lines,
    assemble,
    held_by_share,
)
from structrag.models import Conversation, Message
from structrag.naming import DOCUMENT_ROOM
from structrag.query.context import TokenCounter, budget_problem
from structrag.query.engine import QueryEngine
from structrag.query.limits import MAX_QUESTION_CHARS, check_search
from structrag.query.modes import SEARCH_MODES, Hits, rank
from structrag.store.interrupted import duckdb_interrupted
from structrag.store.protocols import (
    KnowledgeStore,
    MemoryInfo,
    Scope,
    StoreTransaction,
    consistent_reads,
)

log = logging.getLogger(__name__)

_AGE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}

StatementReader = Callable[[Sequence[Message]], list[list[Statement]]]


def parse_age(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w`` -> a timedelta."""
    match = _AGE.match(text)
    if not match:
        raise MemoryInputError(
            f"cannot read {text!r} as an age", hint="write a number and a unit: 90d, 12h, 2w"
        )
    try:
        age = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
        utc_now() - age  # an age before year 1 is no age
    except OverflowError:
        raise MemoryInputError(
            f"the age {text!r} reaches before the calendar starts",
            hint="write an age of at most a few thousand years, e.g. 3650d",
        ) from None
    return age


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def _check_table(table: str | None) -> None:
    if table is not None and table not in MEMORY_TABLES:
        raise MemoryInputError(
            f"unknown memory table {table!r}", hint=f"choose one of: {', '.join(MEMORY_TABLES)}"
        )


class RoomCounts:
    """What live writes remember about rooms between calls: the next ordinal of a room
    and how many of its messages no summary covers. Valid while the store's generation
    is the one they were counted at (this process's own writes keep them up to date;
    another process's write drops them)."""

    def __init__(self) -> None:
        self.generation = -1
        self.next_ordinal: dict[str, int] = {}
        self.unsummarised: dict[tuple[str, str], int] = {}
        #: Whether this process has made the profile entries of an index written before
        #: entries cited facts cite them (:meth:`Memory._writing`; once per index).
        self.entries_cite_facts = False

    def check(self, generation: int) -> None:
        if generation != self.generation:
            self.generation = generation
            self.next_ordinal.clear()
            self.unsummarised.clear()


@dataclass(frozen=True)
class MemoryParts:
    """What the memory API works with (the composition root, ``Index.memory``, wires it)."""

    store: KnowledgeStore
    memory: MemoryStore
    ingestor: Ingestor
    engine: QueryEngine
    extractor: Extractor
    statements: StatementReader | None
    counter: Callable[[str], TokenCounter]
    settings: MemorySettings = field(default_factory=lambda: MemorySettings())
    #: Holds the index's writer lock around a write (what it is for, for others to see).
    writing: Callable[[str], AbstractContextManager[None]] = lambda what: nullcontext()
    #: Room counts shared by the memories of one index in this process.
    rooms: RoomCounts = field(default_factory=RoomCounts)
    #: Each agent's supersession, as of the store generation it was read at, with the
    #: store keys of the messages it names.
    replaced: dict[str, tuple[int, Supersession, dict[int, str]]] = field(default_factory=dict)


@dataclass(frozen=True)
class MemorySettings:
    """When compaction runs, and what a context window holds."""

    #: A room is compacted when it holds more than this many messages not yet summarised
    #: (0: never automatically; ``Memory.compact`` still works).
    compact_after: int = 200
    #: Compaction leaves this many of the newest messages out of the summary.
    keep_recent: int = 50
    #: How a context window's budget is shared.
    shares: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_SHARES))
    #: At most this many memories, knowledge fragments and facts are retrieved.
    retrieve_memories: int = 20
    retrieve_knowledge: int = 10
    retrieve_facts: int = 10


class _Landing:
    """What one write of :class:`Memory` (a public call, with the writes it runs inside
    it: an add's compaction) has committed so far, for an interrupt to say."""

    def __init__(self) -> None:
        self.done: list[str] = []
        self.data: dict[str, Any] | None = None
        self.unfinished: list[str] = []

    def committed(self) -> Committed | None:
        if not self.done:
            return None
        return Committed(self.done, self.data or {}, self.unfinished)


def _counted(count: int, noun: str, plural: str) -> str:
    return f"{count:,} {noun if count == 1 else plural}"


def _listed(ids: Sequence[str], most: int = 20) -> str:
    """Ids for a message: all of them, or the first ``most`` and how many more."""
    more = f" and {len(ids) - most:,} more" if len(ids) > most else ""
    return ", ".join(ids[:most]) + more


def _interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C: Python's, or a DuckDB query it stopped."""
    return isinstance(exc, KeyboardInterrupt) or duckdb_interrupted(exc)


class Memory:
    """One agent's memory (see the module docstring).

    Each write (``add``, ``update``, ``remove``, ``remove_all``, ``prune`` with
    ``dry_run=False``, ``compact``) commits its change in one store transaction, whole or
    not at all. Ctrl-C that stops it after that commit (while the text index is written,
    or while the room is compacted after an ``add``: a transaction of its own) raises
    :class:`~structrag.errors.WriteInterrupted`, a ``KeyboardInterrupt`` whose
    ``committed`` (a :class:`~structrag.errors.Committed`) says what did commit: its lines
    (``done``: "added memory 3f2a... to ...", with the id to use rather than adding it
    again), what did not finish (``unfinished``) and the write's result as JSON
    (``data``: for ``add``, the record). Ctrl-C before the commit is raised as it came:
    nothing of the write was stored. An error other than Ctrl-C in an ``add``'s
    compaction does not fail the add (it stored the memory): it is logged as a warning,
    and the next add to the room compacts it. :attr:`last_committed` says what the last
    write that returned committed (for an interrupt that comes after it, while closing).
    """

    #: What this object's last write that returned committed (None: none yet, or it
    #: changed nothing); shared by the threads using the object.
    last_committed: Committed | None = None

    def __init__(self, parts: MemoryParts, agent: str) -> None:
        _expect("agent", agent, str, optional=False)
        if not agent.strip():
            raise MemoryInputError(
                "an agent name is needed", hint='e.g. index.memory("support-bot")'
            )
        self.agent = agent.strip()
        # Ids given when adding are the agent's own: one another agent holds in the room
        # is stored scoped to this agent, and read back as given (see AgentIds).
        if not isinstance(parts.memory, AgentIds) or parts.memory.agent != self.agent:
            inner = parts.memory.inner if isinstance(parts.memory, AgentIds) else parts.memory
            parts = replace(parts, memory=AgentIds(inner, self.agent))
        self.parts = parts
        #: The write under way in a thread (its :class:`_Landing`).
        self._local = threading.local()

    @property
    def store(self) -> KnowledgeStore:
        return self.parts.store

    @contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """A write: Ctrl-C that stops it after it committed something (see
        :meth:`_committing`) is raised as :class:`~structrag.errors.WriteInterrupted`,
        saying what; a write inside another (an add's compaction) is part of it."""
        landing: _Landing | None = getattr(self._local, "landing", None)
        if landing is not None:
            with self._locked(what):
                yield
            return
        landing = self._local.landing = _Landing()
        try:
            with self._locked(what):
                yield
        except BaseException as exc:
            committed = landing.committed()
            if committed is None or not _interrupt(exc) or isinstance(exc, WriteInterrupted):
                raise
            raise WriteInterrupted(committed) from exc
        else:
            self.last_committed = landing.committed()
        finally:
            self._local.landing = None

    @contextmanager
    def _committing(
        self,
        done: Callable[[], str],
        data: Callable[[], dict[str, Any]],
        *,
        unfinished: str | None = None,
    ) -> Iterator[None]:
        """One transaction of a write (its ``ingestor.write``): once it has committed
        (when it returns, or when the store's generation says it did after all), the
        write's :class:`_Landing` has ``done()`` (and ``data()`` when it is the write's
        first); when it did not, ``unfinished`` (if given) is what says so."""
        landing: _Landing | None = getattr(self._local, "landing", None)
        if landing is None:  # not inside _writing: nothing to tell
            yield
            return
        store = self.parts.store
        before = store.generation()
        try:
            yield
        except BaseException:
            # When it cannot tell: said as not committed (as it may not be).
            now: int = before
            text: int | None = before
            with contextlib.suppress(Exception):
                now = store.generation()
                text = self.parts.ingestor.text_index.generation()
            if now > before:
                self._landed(landing, done, data)
                if text is None or text < now:
                    landing.unfinished.append(
                        "the text index did not take the change in yet: it catches up when "
                        "the index next opens (or on its next write)"
                    )
            elif unfinished is not None:
                landing.unfinished.append(unfinished)
            raise
        self._landed(landing, done, data)

    @staticmethod
    def _landed(
        landing: _Landing, done: Callable[[], str], data: Callable[[], dict[str, Any]]
    ) -> None:
        landing.done.append(done())
        if landing.data is None:
            landing.data = data()

    @contextmanager
    def _locked(self, what: str) -> Iterator[None]:
        """The index's writer lock held for a write. The first write of this process to
        an index written before profile entries cited facts (they cite the messages that
        stated them) makes its entries cite the facts, relationships and goals made from
        those messages first, in a transaction of its own: goals' statuses, removing a
        fact, and ``remove("profile-N")`` then work on them as on new ones."""
        with self.parts.writing(what):
            rooms, memory = self.parts.rooms, self.parts.memory
            if not rooms.entries_cite_facts:
                if memory.cite_derived(dry_run=True):

                    def cite(transaction: StoreTransaction) -> None:
                        memory.cite_derived()

                    self.parts.ingestor.write([], [], [], before_commit=cite)
                rooms.entries_cite_facts = True
            yield

    # -- writing --------------------------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        user: str | None = None,
        room: str | None = None,
        world: str | None = None,
        table: str = "messages",
        metadata: dict[str, Any] | None = None,
        unique: bool = False,
        importance: str = "normal",
        timestamp: datetime | None = None,
        id: str | None = None,
        status: str | None = None,
        source: str | None = None,
    ) -> MemoryRecord:
        """Store a memory; it is extracted and searchable when this returns.

        ``unique``: an exact duplicate already in the room and table is returned instead
        of stored again (its ``duplicate`` is true; the other arguments are not applied).
        ``source`` (facts and relationships): the id of the memory (a message or a
        document fragment) the fact comes from; the fact is checked against its text
        (``grounded``)."""
        _expect("text", text, str, optional=False)
        for name, value in (("user", user), ("room", room), ("world", world), ("id", id)):
            _expect(name, value, str)
        _expect("source", source, str)
        _expect("status", status, str)
        _expect("metadata", metadata, dict)
        _expect("unique", unique, bool, optional=False)
        _expect("timestamp", timestamp, datetime)
        if not text.strip():
            raise MemoryInputError("a memory needs text", hint="pass the message or fact text")
        if id is not None:
            _check_id(id)
        if timestamp is not None and timestamp.tzinfo is not None:
            timestamp = timestamp.astimezone(UTC).replace(tzinfo=None)  # stored as naive UTC
        _check_table(table)
        _check_importance(importance)
        _check_status(status, table)
        room = _room(room)
        with self._writing("memory add"):
            return self._add(
                text,
                user,
                room,
                world,
                table,
                metadata,
                unique,
                importance,
                timestamp,
                id,
                status,
                source,
            )

    def _add(
        self,
        text: str,
        user: str | None,
        room: str,
        world: str | None,
        table: str,
        metadata: dict[str, Any] | None,
        unique: bool,
        importance: str,
        timestamp: datetime | None,
        id: str | None,
        status: str | None,
        source: str | None,
    ) -> MemoryRecord:
        if unique:
            found = self.parts.memory.duplicate(self.agent, room, table, text)
            if found is not None:
                return replace(found, duplicate=True)
        now = utc_now()
        source_row = self._source(source, text) if source is not None else None
        message = Message(
            conversation=room,
            id=id or _new_id(),
            ordinal=self._next_ordinal(room),
            speaker=user,
            recipients=(self.agent,) if user and user != self.agent else (),
            timestamp=timestamp or now,
            text=text,
            metadata=dict(metadata or {}),
        )
        info = MemoryInfo(
            table=table,
            agent=self.agent,
            world=world,
            importance=importance,
            unique=unique,
            status=status if status is not None else ("open" if table == "goals" else None),
            created_at=now,
        )
        if id is not None and self.parts.store.find_message(room, message.id):
            # Ids are the agent's own: only its own memory with the id is a clash (and
            # named); another agent's memory, or an ingested message, holding the id in
            # the room is not this agent's to know of: this one is stored under the id
            # scoped to the agent, and read back as given.
            if self.parts.memory.count_memories(MemoryQuery(self.agent, ids=(id,), room=room)):
                raise MemoryInputError(
                    f"room {room!r} already has a memory of agent {self.agent!r} with id {id!r}",
                    hint="leave id out to have one made, or remove that memory first",
                )
            message = message.model_copy(update={"id": scoped_id(id, self.agent)})
        derived = (
            self._statements(message, user, stated=table != "messages")
            if table in _READ_TABLES and user
            else []
        )
        record = MemoryRecord(
            id=visible_id(message.id),
            table=table,
            agent=self.agent,
            user=user,
            room=room,
            world=world,
            text=text,
            created_at=now,
            ts=message.timestamp,
            importance=importance,
            unique=unique,
            status=info.status,
            metadata=dict(message.metadata),
            access_count=0,
            last_access=None,
        )
        where = f"agent {self.agent!r}, room {room!r}, table {table}"
        with self._committing(lambda: f"added memory {record.id} ({where})", record.as_added):
            mkey = self._write([(message, info)], derived, source_row, now, own=table != "messages")
        rooms = self.parts.rooms
        rooms.check(self.parts.store.generation() - 1)
        rooms.generation += 1  # this write's: the counts follow it
        rooms.next_ordinal[room] = message.ordinal + 1
        if table == "messages":
            key = (self.agent, room)
            if key in rooms.unsummarised:
                rooms.unsummarised[key] += 1
            if self.parts.settings.compact_after:
                self._compact_if_due(room)
        return replace(record, mkey=mkey)

    def update(
        self,
        memory_id: str,
        *,
        room: str | None = None,
        status: str | None = None,
        importance: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> MemoryRecord:
        """Change a memory's ``status`` (a goal's: open, in_progress, done, abandoned),
        ``importance`` or ``metadata`` (replaced whole); what is not given stays. The text
        does not change (its knowledge is extracted from it): remove the memory and add the
        new text. ``room`` as for :meth:`get`."""
        _expect("memory_id", memory_id, str, optional=False)
        _expect("room", room, str)
        _expect("status", status, str)
        _expect("metadata", metadata, dict)
        if status is None and importance is None and metadata is None:
            raise MemoryInputError(
                "nothing to change", hint="give a status, an importance or metadata"
            )
        if importance is not None:
            _check_importance(importance)
        with self._writing("memory update"):
            found = self._find(memory_id, room=room)
            if status is not None:
                _check_status(status, found.table)
            changed = replace(
                found,
                status=found.status if status is None else status,
                importance=found.importance if importance is None else importance,
                metadata=found.metadata if metadata is None else dict(metadata),
            )
            memory = self.parts.memory

            def record(transaction: StoreTransaction) -> None:
                memory.update_memory(
                    found.mkey, changed.status, changed.importance, changed.metadata
                )

            with self._committing(
                lambda: f"updated memory {found.id} (agent {self.agent!r}, room {found.room!r})",
                changed.as_dict,
            ):
                self.parts.ingestor.write([], [], [], before_commit=record)
            return self._find(memory_id, room=found.room)

    def _source(self, source: str, text: str) -> SourceRow:
        """The source of a stated fact: a memory of this agent's (or shared knowledge),
        and whether the fact's words are in it."""
        found = self._find(source, include_shared=True)
        kind = "fragment" if found.table == "knowledge" else "message"
        return SourceRow(
            mkey=-1,
            kind=kind,
            source_mkey=found.mkey,
            source_ref=found.id,
            start=None,
            end=None,
            confidence=1.0,
            grounded=_grounded(text, found.text, found.user),
        )

    def _statements(self, message: Message, user: str, *, stated: bool = False) -> list[Statement]:
        """What a message says of people. ``stated``: a fact, relationship or goal the
        agent wrote of the user ("priya lives in Berlin"): the user's name at its start is
        read as the name it is, however it is written."""
        reader = self.parts.statements
        if reader is None:
            return []
        named: str | None = None  # the name as the parse was given it, when not as written
        if stated:
            text = message.text
            lead = text[: len(user)]
            if lead.lower() == user.lower() and lead != user[:1].upper() + user[1:]:
                named = user[:1].upper() + user[1:]
                message = message.model_copy(update={"text": named + text[len(user) :]})
        (found,) = reader([message])
        if named is None:
            return found
        # Said of the user by the name as given ("priya lives in Berlin"), as a message's
        # statements are, not by the capitalised name the parse was given.
        return [
            replace(
                s,
                subject=user,
                text=describe(
                    user, s.predicate, s.object, negated=s.negated, tense=s.tense, detail=s.detail
                ),
            )
            if s.subject == named
            else s
            for s in found
        ]

    def _write(
        self,
        memories: list[tuple[Message, MemoryInfo]],
        statements: list[Statement],
        source_row: SourceRow | None,
        now: datetime,
        *,
        own: bool = False,
    ) -> int:
        """Memories and what derives from them (facts, relationships, goals, profile
        entries), extracted and written in one transaction; the first memory's key.
        ``own``: the statements are the first memory's own (a fact the agent added): no
        memory is made of them, the profile entries cite that memory, and its metadata
        says the statement (as a derived fact's does)."""
        parts = self.parts
        stated = [] if own else [s for s in statements if s.category in _STATEMENT_TABLES]
        if own and statements:
            message, info = memories[0]
            first = statements[0]
            said = {
                "subject": first.subject,
                "predicate": first.predicate,
                "object": first.object,
                "negated": first.negated,
            }
            message = message.model_copy(update={"metadata": {**said, **message.metadata}})
            memories = [(message, info), *memories[1:]]
        # A goal the user states again while it is still wanted is the same goal: its
        # memory is grounded in this message too (one goal, one status: marking it done
        # finishes it), not made twice. So is a fact or relationship said again in its
        # room while it holds (one memory, grounded in each message that says it).
        again: dict[int, int] = {}
        speaker = memories[0][0].speaker
        if speaker and stated:
            tables = {_STATEMENT_TABLES[s.category] for s in stated}
            held = {
                **(
                    self._held_facts(speaker, memories[0][0].conversation)
                    if tables - {"goals"}
                    else {}
                ),
                **(self._wanted_goals(speaker) if "goals" in tables else {}),
            }
            for position, statement in enumerate(stated):
                table = _STATEMENT_TABLES[statement.category]
                key = (table, statement.predicate, statement.object.strip().lower())
                mkey = held.get((*key, statement.negated))
                if mkey is not None and _about(statement, speaker):
                    again[position] = mkey
        next_mkey, _ = parts.store.reserve_ids(len(memories) + len(stated) - len(again), 0)
        todo: list[Pending] = []
        for message, info in memories:
            todo.append(Pending(next_mkey, message, "new", info))
            next_mkey += 1
        source_mkey = todo[0].mkey
        facts: list[tuple[Statement, Pending]] = []
        cited: list[tuple[Statement, int]] = []
        if stated:
            message = memories[0][0]
            for position, statement in enumerate(stated):
                if position in again:
                    cited.append((statement, again[position]))
                    continue
                table = _STATEMENT_TABLES[statement.category]
                fact = Message(
                    conversation=message.conversation,
                    id=_new_id(),
                    ordinal=message.ordinal,
                    speaker=message.speaker,
                    recipients=message.recipients,
                    timestamp=message.timestamp,
                    text=statement.text,
                    metadata={
                        "subject": statement.subject,
                        "predicate": statement.predicate,
                        "object": statement.object,
                        "negated": statement.negated,
                        "from": visible_id(message.id),
                    },
                )
                pending = Pending(
                    next_mkey,
                    fact,
                    "new",
                    MemoryInfo(
                        table=table,
                        agent=self.agent,
                        world=memories[0][1].world,
                        status="open" if table == "goals" else None,
                        created_at=now,
                    ),
                )
                next_mkey += 1
                todo.append(pending)
                facts.append((statement, pending))
                cited.append((statement, pending.mkey))
        # What each statement's profile entry cites: the memory made of it (removing that
        # memory forgets the entry; removing the message removes it with the memory, unless
        # another message states it too), or the memory itself when it is the agent's own
        # statement.
        if own:
            cited = [(s, source_mkey) for s in statements]
        knowledge = list(parts.extractor.extract([p.message for p in todo]))
        rooms = {p.message.conversation for p in todo}
        said_at = memories[0][0].timestamp or now

        def derive(transaction: StoreTransaction) -> None:
            rows = [
                SourceRow(
                    pending.mkey,
                    "message",
                    source_mkey,
                    None,
                    statement.start,
                    statement.end,
                    statement.confidence,
                    True,
                )
                for statement, pending in facts
            ]
            rows += [
                SourceRow(
                    mkey,
                    "message",
                    source_mkey,
                    None,
                    stated[position].start,
                    stated[position].end,
                    stated[position].confidence,
                    True,
                )
                for position, mkey in again.items()
            ]
            if source_row is not None:
                rows.append(
                    SourceRow(
                        source_mkey,
                        source_row.kind,
                        source_row.source_mkey,
                        source_row.source_ref,
                        None,
                        None,
                        source_row.confidence,
                        source_row.grounded,
                    )
                )
            parts.memory.add_sources(rows)
            user = memories[0][0].speaker
            if user and cited:
                self._update_profile(user, cited, said_at, now)

        known = parts.rooms.next_ordinal
        parts.ingestor.write(
            todo,
            knowledge,
            [Conversation(id=room) for room in sorted(rooms) if known.get(room, 0) == 0],
            before_commit=derive,
        )
        return source_mkey

    def _update_profile(
        self,
        user: str,
        cited: Sequence[tuple[Statement, int]],
        said_at: datetime,
        now: datetime,
    ) -> None:
        """Add, confirm or supersede profile entries for what the user said of themselves
        (each statement with the memory its entry cites), said at ``said_at``: of two
        statements that conflict, the one said later holds, whichever was written last
        (history imported after newer messages gives way to them)."""
        store = self.parts.memory
        current = store.profile_entries(self.agent, user, sources=False)
        when = self._said_at(user)
        for statement, mkey in cited:
            if not _about(statement, user):
                continue
            same = next(
                (
                    e
                    for e in current
                    if e.predicate == statement.predicate
                    and e.object.lower() == statement.object.lower()
                    and e.negated == statement.negated
                ),
                None,
            )
            if same is not None:
                store.confirm_profile_entry(same.entry_id, mkey, now)
                when[same.entry_id] = max(when.get(same.entry_id, said_at), said_at)
                continue
            entry = NewProfileEntry(
                agent=self.agent,
                user=user,
                category=statement.category,
                predicate=statement.predicate,
                object=statement.object,
                text=statement.text,
                negated=statement.negated,
                confidence=statement.confidence,
                source_mkeys=(mkey,),
                at=now,
            )
            entry_id = store.add_profile_entry(entry)
            conflicting = [e for e in current if supersedes(statement, _as_statement(e))]
            older = [e for e in conflicting if when.get(e.entry_id, said_at) <= said_at]
            newer = [e for e in conflicting if e not in older]
            for old in older:
                store.supersede_profile_entry(old.entry_id, entry_id, now)
            current = [e for e in current if e not in older]
            if newer:  # said before what holds now: history, superseded from the start
                latest = max(newer, key=lambda e: (when.get(e.entry_id, said_at), e.entry_id))
                store.supersede_profile_entry(entry_id, latest.entry_id, now)
                continue
            current.append(entry.stored(entry_id))
            when[entry_id] = said_at

    def _said_at(self, user: str) -> dict[int, datetime]:
        """When each of the user's current profile entries was last said: the latest time
        of the memories it cites and of the messages they were made from (a goal stated
        again is said when the latest of its messages was)."""
        rows = self.parts.store.sql(
            "SELECT e.entry_id, max(coalesce(m.ts, m.created_at)), "
            "max(coalesce(src.ts, src.created_at)) FROM (SELECT entry_id, "
            "unnest(source_mkeys) AS k FROM profile_entries WHERE agent = ? "
            "AND lower(user_name) = lower(?) AND superseded_by IS NULL) e "
            "JOIN messages m ON m.mkey = e.k "
            "LEFT JOIN memory_sources s ON s.mkey = e.k AND s.source_kind = 'message' "
            "LEFT JOIN messages src ON src.mkey = s.source_mkey GROUP BY e.entry_id",
            [self.agent, user],
        )
        return {
            int(r[0]): max(t for t in r[1:] if t is not None)
            for r in rows
            if r[1] is not None or r[2] is not None
        }

    def _wanted_goals(self, user: str) -> dict[tuple[str, str, str, bool], int]:
        """The user's goals still wanted (open, in progress) made of their messages (not
        those the agent added itself: removing a message must not take those), by their
        statement (table, predicate, object, negated): the newest goal memory's key."""

        def wanted(goal: MemoryRecord) -> bool:
            return goal.status not in _FINISHED and "from" in goal.metadata

        return self._statements_of(user, ("goals",), wanted)

    def _held_facts(self, user: str, room: str) -> dict[tuple[str, str, str, bool], int]:
        """The user's facts and relationships made of their messages in ``room`` that hold
        (no later statement superseded them), by their statement (table, predicate,
        object, negated): the newest memory's key. Not those of other rooms (a room's
        facts are its own: clearing a room leaves another room's), nor those the agent
        added itself (removing a message must not take those)."""
        replaced = self._supersession()

        def held(record: MemoryRecord) -> bool:
            return record.room == room and "from" in record.metadata and replaced.holds(record)

        return self._statements_of(user, ("facts", "relationships"), held)

    def _statements_of(
        self, user: str, tables: tuple[str, ...], keep: Callable[[MemoryRecord], bool]
    ) -> dict[tuple[str, str, str, bool], int]:
        """The memories of ``tables`` made of what ``user`` said of themselves that
        ``keep`` keeps, by their statement (table, predicate, object, negated): the
        newest memory's key."""
        found: dict[tuple[str, str, str, bool], int] = {}
        for record in self.parts.memory.memories(MemoryQuery(self.agent, tables=tables, user=user)):
            meta = record.metadata
            subject = meta.get("subject")
            if not isinstance(subject, str) or not isinstance(meta.get("predicate"), str):
                continue
            if not same_subject(subject, user) or not keep(record):
                continue
            key = (record.table, meta["predicate"], str(meta.get("object", "")).strip().lower())
            found.setdefault((*key, bool(meta.get("negated"))), record.mkey)
        return found

    def _rooms_of(self, user: str) -> list[str]:
        """The rooms a user has spoken in, to this agent."""
        rows = self.parts.store.sql(
            "SELECT DISTINCT conversation FROM messages WHERE agent = ? "
            "AND lower(speaker) = lower(?) AND memory_table = 'messages'",
            [self.agent, user],
        )
        return [str(r[0]) for r in rows]

    def _next_ordinal(self, room: str) -> int:
        rooms = self.parts.rooms
        rooms.check(self.parts.store.generation())
        if room not in rooms.next_ordinal:
            rows = self.parts.store.sql(
                "SELECT coalesce(max(ordinal), -1) + 1 FROM messages WHERE conversation = ?",
                [room],
            )
            rooms.next_ordinal[room] = int(rows[0][0])
        return rooms.next_ordinal[room]

    # -- reading --------------------------------------------------------------------------

    def _one(self, memory_id: str, room: str | None = None) -> MemoryRecord:
        found = self.parts.memory.memories(MemoryQuery(self.agent, ids=(memory_id,), room=room))
        if not found:
            raise NotFoundError(f"agent {self.agent!r} has no memory {memory_id!r}")
        return found[0]

    def _find(
        self, memory_id: str, *, room: str | None = None, include_shared: bool = False
    ) -> MemoryRecord:
        found = self.parts.memory.memories(
            MemoryQuery(self.agent, ids=(memory_id,), room=room, include_shared=include_shared)
        )
        if not found:
            where = f" in room {room!r}" if room is not None else ""
            raise NotFoundError(
                f"agent {self.agent!r} has no memory {memory_id!r}{where}",
                hint="memory ids come from adding, listing (recent) and searching memories; "
                "another agent's memories are not visible",
            )
        if len(found) > 1:
            rooms = ", ".join(sorted(m.room for m in found))
            raise MemoryInputError(
                f"memory id {memory_id!r} is in several rooms ({rooms})",
                hint="say which room: room=... in Python, --room on the command line, "
                "?room= over HTTP",
            )
        return found[0]

    def _touch(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Count a read of each record; the records as they are after it."""
        if not records or self.parts.store.read_only:
            return list(records)
        now = utc_now()
        self.parts.memory.touch([r.mkey for r in records], now)
        return [replace(r, access_count=r.access_count + 1, last_access=now) for r in records]

    @consistent_reads
    def get(self, memory_id: str, room: str | None = None) -> MemoryRecord:
        """One memory by id (counts as a read); ``room`` where two rooms have the id
        (ids given when adding are unique within a room)."""
        _expect("memory_id", memory_id, str, optional=False)
        _expect("room", room, str)
        derived = _DERIVED_ID.match(memory_id)
        if derived and not self._has(memory_id, room):
            found = self._behind(derived.group(1), int(derived.group(2)), memory_id)
        else:
            found = self._find(memory_id, room=room, include_shared=True)
        if found.table != "knowledge":  # marked as search, recent and facts mark it
            found = self._supersession().mark(found)
        return self._touch([found])[0]

    def _has(self, memory_id: str, room: str | None) -> bool:
        """Whether the agent has a memory of its own with that id (in that room)."""
        return bool(
            self.parts.memory.count_memories(MemoryQuery(self.agent, ids=(memory_id,), room=room))
        )

    def _behind(self, kind: str, number: int, line_id: str) -> MemoryRecord:
        """The memory a context line's ``profile-N`` stands for (the newest fact,
        relationship or goal stating the entry). A summary or an observation is no memory
        of its own: ``remove`` takes its id, ``get`` says where to read it."""
        if kind != "profile":
            where = "summaries(room)" if kind == "summary" else "observations(room)"
            raise MemoryInputError(
                f"{line_id} is a room {'summary' if kind == 'summary' else 'observation'}, "
                "not a memory: it has no record to get",
                hint=f"{where} lists it (`structrag memory compact` prints them); "
                f"remove({line_id!r}) removes it",
            )
        entry = self._entry(number, line_id)
        records = self._cited(entry)
        if records:
            return _deciding(records)
        raise NotFoundError(f"agent {self.agent!r} has no memory behind {line_id}")

    def _entry(self, number: int, line_id: str) -> ProfileEntry:
        entry = next(
            (
                e
                for e in self.parts.memory.profile_entries(
                    self.agent, current_only=False, sources=False
                )
                if e.entry_id == number
            ),
            None,
        )
        if entry is None:
            raise NotFoundError(
                f"agent {self.agent!r} has no profile entry {line_id}",
                hint="profile entries come from profile(user) and the context window's lines",
            )
        return entry

    def _cited(self, entry: ProfileEntry) -> list[MemoryRecord]:
        """The memories a stored profile entry cites, by their keys (an id names one
        memory within a room only: another room's memory with the same id is not
        cited)."""
        found = self.parts.memory.memories_by_keys(entry.source_mkeys)
        return [found[k] for k in entry.source_mkeys if k in found]

    @consistent_reads
    def recent(
        self,
        room: str | None = None,
        count: int = 20,
        *,
        table: str | None = "messages",
        start: datetime | None = None,
        end: datetime | None = None,
        user: str | None = None,
    ) -> list[MemoryRecord]:
        """The newest memories (of a room, a table, a time range), newest first."""
        _check_table(table)
        check_count("count", count, MemoryInputError)
        found = self.parts.memory.memories(
            MemoryQuery(
                self.agent,
                room=room,
                tables=(table,) if table else None,
                start=start,
                end=end,
                user=user,
                include_shared=table == "knowledge",  # as search and get see it
            ),
            limit=count,
        )
        if table != "knowledge":  # marked as search, context and facts mark them
            replaced = self._supersession()
            found = [replaced.mark(r) for r in found]
        return self._touch(found)

    @consistent_reads
    def count(self, room: str | None = None, table: str | None = None) -> int:
        """How many memories are stored (of a room, of a table; the knowledge table
        counts the shared knowledge the agent reads too). Superseded facts count: they
        are kept as history (:meth:`facts` lists those that still hold)."""
        _check_table(table)
        return self.parts.memory.count_memories(
            MemoryQuery(
                self.agent,
                room=room,
                tables=(table,) if table else None,
                include_shared=table == "knowledge",
            )
        )

    @consistent_reads
    def search(
        self,
        query: str,
        *,
        room: str | None = None,
        table: str = "messages",
        count: int = 10,
        mode: str = "structured",
        threshold: float | None = None,
        start: datetime | None = None,
        end: datetime | None = None,
        user: str | None = None,
        rooms: Sequence[str] | None = None,
    ) -> list[MemoryHit]:
        """The memories that best answer ``query``, best first.

        Modes: ``structured`` (the query compiler, as ``ask`` ranks), ``text`` (BM25 over
        the query's words), ``vector`` (embedding similarity), ``hybrid`` (reciprocal rank
        fusion, k = 60, of text and vector). All of them honour the room, table and time
        filters; ``user`` keeps a user's own memories (what they said, the facts they
        stated), ``rooms`` those of these rooms. ``threshold`` keeps hits scoring at least
        that much (for ``vector``, a cosine similarity)."""
        _check_table(table)
        if mode not in SEARCH_MODES:
            raise MemoryInputError(
                f"unknown search mode {mode!r}", hint=f"choose one of: {', '.join(SEARCH_MODES)}"
            )
        _expect("query", query, str, optional=False)
        for name, value in (("room", room), ("user", user)):
            _expect(name, value, str)
        if rooms is not None and (
            isinstance(rooms, str) or not all(isinstance(r, str) for r in rooms)
        ):
            raise MemoryInputError(
                f"rooms must be a list of room names, not {rooms!r:.40}", hint='e.g. ["dm-priya"]'
            )
        check_search(query, MemoryInputError, "where does Sam live")
        check_count("count", count, MemoryInputError)
        # memories' times are naive UTC: a time with a zone is read as that instant
        start, end = (
            t.astimezone(UTC).replace(tzinfo=None) if t is not None and t.tzinfo else t
            for t in (start, end)
        )
        scope = Scope(
            conversation=room,
            tables=(table,),
            agent=self.agent,
            shared=table == "knowledge",
        )
        if room is not None and not self.parts.memory.count_memories(
            MemoryQuery(self.agent, room=room, include_shared=table == "knowledge")
        ):
            return []
        ranked = rank(self.parts.engine, query, scope, mode)
        replaced = self._supersession() if table != "knowledge" else Supersession.none()
        if replaced.replaced_by and table == "messages":
            # Text search is the words themselves: what replaced a message it finds is
            # raised, never brought in; the other modes bring it in.
            ranked = self._replacements_raised(
                ranked, replaced, self.parts.replaced[self.agent][2], bring=mode != "text"
            )
        hits: list[MemoryHit] = []
        # Records are read a batch of the ranking at a time, not all of it: vector and
        # hybrid rank every memory in scope, and reading them all costs time in
        # proportion to the agent's memories, not to ``count``.
        position, batch = 0, max(2 * count, 50)
        while position < len(ranked) and len(hits) < count:
            chunk = ranked[position : position + batch]
            position += len(chunk)
            batch *= 4
            records = self.parts.memory.memories_by_keys([k for k, _ in chunk])
            for mkey, score in chunk:
                record = records.get(mkey)
                if record is None or (threshold is not None and score < threshold):
                    continue
                when = record.ts or record.created_at
                if (start is not None and when < start) or (end is not None and when >= end):
                    continue
                if user is not None and (record.user or "").lower() != user.lower():
                    continue
                if rooms is not None and record.room not in rooms:
                    continue
                if record.table != table or (room is not None and record.room != room):
                    continue  # a replacement brought in from outside the search's scope
                hits.append(MemoryHit(replaced.mark(record), score, mode))
                if len(hits) >= count:
                    break
        touched = self._touch([h.memory for h in hits])
        return [replace(h, memory=m) for h, m in zip(hits, touched, strict=True)]

    # -- removing -------------------------------------------------------------------------

    def remove(self, memory_id: str, room: str | None = None) -> None:
        """Delete a memory and everything derived from it: its semantic refs, index terms,
        embedding, reads, and the facts, profile entries, observations and summaries that
        rest on it alone (``room`` as for :meth:`get`). A fragment of a document is
        removed with its document (``index.knowledge.remove``)."""
        _expect("memory_id", memory_id, str, optional=False)
        _expect("room", room, str)
        with self._writing("memory remove"):
            derived = _DERIVED_ID.match(memory_id)
            if derived and not self._has(memory_id, room):
                self._remove_line(derived.group(1), int(derived.group(2)), memory_id)
                return
            found = self._find(memory_id, room=room)
            document = found.metadata.get("document")
            if found.table == "knowledge" and document:
                raise MemoryInputError(
                    f"{memory_id} is a fragment of document {document}",
                    hint=f"remove the document: `structrag knowledge remove {document}`",
                )
            where = f"agent {self.agent!r}, room {found.room!r}, table {found.table}"
            with self._committing(
                lambda: f"removed memory {found.id} ({where}) and what rests on it alone",
                lambda: {"removed": 1, "ids": [found.id]},
            ):
                self._delete([found.mkey])

    def _remove_line(self, kind: str, number: int, line_id: str) -> None:
        """Remove what a context line cites by a ``profile-N``, ``summary-N`` or
        ``observation-N`` id: a profile entry goes with the facts, relationships and goals
        that state it (their messages stay); a summary or an observation goes with what
        the same compaction made of those messages (their summary and observations; the
        messages stay, and a later compaction summarises them again)."""
        if kind == "profile":
            entry = self._entry(number, line_id)
            # An entry of an index written before entries cited facts may still cite a
            # message no fact was made from with its statement (one removed since): the
            # entry goes, the message stays, as the messages of the facts do.
            keys = [r.mkey for r in self._cited(entry) if r.table != "messages"]
            with self._committing(
                lambda: f"removed {line_id} of agent {self.agent!r} and the memories stating it",
                lambda: {"removed": 1, "ids": [line_id]},
            ):
                self._delete(keys, entry=entry.entry_id)
            return
        if kind == "summary":
            found = [(s.room, s.sources) for s in self.summaries() if s.summary_id == number]
        else:
            found = [(o.room, o.sources) for o in self.observations() if o.observation_id == number]
        if not found:
            raise NotFoundError(
                f"agent {self.agent!r} has no room {kind} {line_id}",
                hint="room summaries and observations come from compact(room) and the "
                "context window's lines",
            )
        (where, sources), memory = found[0], self.parts.memory
        keys = (
            memory.memory_keys(MemoryQuery(self.agent, ids=sources, room=where)) if sources else []
        )
        if not keys:
            raise MemoryInputError(f"{line_id} rests on no message of agent {self.agent!r}")

        def forget(transaction: StoreTransaction) -> None:
            memory.forget_derived(self.agent, keys)

        with self._committing(
            lambda: f"removed {line_id} of agent {self.agent!r} (and what its compaction made)",
            lambda: {"removed": 1, "ids": [line_id]},
        ):
            self.parts.ingestor.write([], [], [], before_commit=forget)

    def remove_all(self, room: str | None = None, table: str | None = None) -> int:
        """Delete every memory of a room (or all of the agent's), of a table (or all);
        returns how many. The fragments of documents stay: documents are removed as a
        whole (``index.knowledge.remove`` and ``clear``)."""
        _check_table(table)
        with self._writing("memory remove"):
            keys = self.parts.memory.memory_keys(
                MemoryQuery(
                    self.agent, room=room, tables=(table,) if table else None, fragments=False
                )
            )
            scope = ", ".join(
                [f"agent {self.agent!r}"]
                + ([f"room {room!r}"] if room is not None else [])
                + ([f"table {table}"] if table else [])
            )
            with (
                self._committing(
                    lambda: f"removed {_counted(len(keys), 'memory', 'memories')} ({scope})",
                    lambda: {"removed": len(keys)},
                )
                if keys
                else nullcontext()
            ):
                self._delete(keys)
        return len(keys)

    def _delete(
        self, mkeys: Sequence[int], *, derived: bool = True, entry: int | None = None
    ) -> None:
        """Delete memories, and with ``derived`` what rests on them alone (facts,
        relationships, goals). Without it (pruning old history), what was learned from
        them stays: each such memory keeps its text, its ``memory_sources`` row still
        names the message's key (whose id now reads as none), and its metadata records
        ``source_removed``: when, and the id of the message that was removed. ``entry``:
        a profile entry deleted with them (whatever it still cites)."""
        if not mkeys and entry is None:
            return
        memory = self.parts.memory
        learned = memory.derived_only_from(mkeys)
        keys = sorted(set(mkeys) | set(learned)) if derived else sorted(set(mkeys))
        kept = [] if derived else sorted(set(learned) - set(mkeys))
        records = memory.memories_by_keys(kept) if kept else {}
        named = memory.sources(kept) if kept else {}
        removed_at = utc_now().isoformat()

        def forget(transaction: StoreTransaction) -> None:
            memory.forget_profile_sources(keys)
            memory.forget_derived(self.agent, keys)
            if entry is not None:
                memory.remove_profile_entry(entry)
            for mkey, record in records.items():
                sources = [r.source_id for r in named.get(mkey, []) if r.source_id]
                memory.update_memory(
                    mkey,
                    record.status,
                    record.importance,
                    {
                        **record.metadata,
                        "source_removed": {"at": removed_at, "ids": sources},
                    },
                )

        self.parts.ingestor.write([], [], [], delete=keys, before_commit=forget)

    def prune(
        self,
        older_than: str = "90d",
        *,
        keep_if_accessed_more_than: int = 3,
        keep_importance: str = "high",
        room: str | None = None,
        table: str | None = "messages",
        dry_run: bool = True,
    ) -> PruneReport:
        """Delete memories older than ``older_than`` (``90d``, ``12h``), except those at
        least ``keep_importance`` and those read more than ``keep_if_accessed_more_than``
        times; with ``dry_run`` (the default), only say what would go. A memory's age is
        that of its time (``timestamp``, for history written in afterwards), else of when it
        was written. The deletion is one transaction. The fragments of documents stay (see
        :meth:`remove_all`)."""
        started = time.perf_counter()
        _check_table(table)
        if keep_importance not in IMPORTANCE_LEVELS:
            raise MemoryInputError(
                f"unknown importance {keep_importance!r}", hint="choose low, normal or high"
            )
        cutoff = utc_now() - parse_age(older_than)
        old = self.parts.memory.memories(
            MemoryQuery(self.agent, room=room, tables=(table,) if table else None, fragments=False),
            newest_first=False,
        )
        old = [m for m in old if (m.ts or m.created_at) < cutoff]
        level = IMPORTANCE_LEVELS.index(keep_importance)
        rank: dict[str, int] = {name: i for i, name in enumerate(IMPORTANCE_LEVELS)}
        important = [m for m in old if rank.get(m.importance, 1) >= level]
        rest = [m for m in old if m not in important]
        accessed = [m for m in rest if m.access_count > keep_if_accessed_more_than]
        gone = [m for m in rest if m.access_count <= keep_if_accessed_more_than]

        def report() -> PruneReport:
            return PruneReport(
                dry_run=dry_run,
                removed=[m.id for m in gone],
                kept_important=len(important),
                kept_accessed=len(accessed),
                seconds=time.perf_counter() - started,
            )

        if not dry_run:
            with (
                self._writing("memory prune"),
                self._committing(
                    lambda: (
                        f"pruned {_counted(len(gone), 'memory', 'memories')} of agent "
                        f"{self.agent!r}: {_listed([m.id for m in gone])}"
                    ),
                    lambda: report().as_dict(),
                )
                if gone
                else nullcontext(),
            ):
                self._delete([m.mkey for m in gone], derived=False)
        return report()

    # -- what the agent knows -------------------------------------------------------------

    def profile(self, user: str, *, history: bool = False) -> list[ProfileEntry]:
        """What the agent knows about a user; with ``history``, superseded entries and
        finished goals (``done``, ``abandoned``: see their ``status``) too."""
        _expect("user", user, str, optional=False)
        return [e for e, _ in self._entries(user, current_only=not history)]

    def _entries(
        self, user: str | None, *, current_only: bool = True
    ) -> list[tuple[ProfileEntry, frozenset[str]]]:
        """Profile entries (of a user, or of every user) as the API shows them, each with
        the rooms it was said in. An entry cites the memories made of its statements (a
        fact, a relationship, a goal: removing one forgets it); it is shown with the
        messages that stated them (a memory whose message is gone, or that the agent
        added itself, stands for itself), and a goal's entry with the goal's status (a
        finished goal is no longer current)."""
        memory = self.parts.memory
        entries = memory.profile_entries(self.agent, user, current_only=current_only, sources=False)
        # The cited memories by their keys (ids name a memory within a room only).
        cited = memory.memories_by_keys(sorted({k for e in entries for k in e.source_mkeys}))
        derived = [r for r in cited.values() if r.table != "messages" and "from" in r.metadata]
        stated = memory.sources([r.mkey for r in derived]) if derived else {}
        said_in: dict[int, list[SourceRow]] = {}
        for record in derived:
            rows = [
                row
                for row in stated.get(record.mkey, [])
                if row.kind == "message" and row.source_id is not None
            ]
            if rows:
                said_in[record.mkey] = rows
        # A goal stated again, maybe in another room, is said there too (one goal memory,
        # grounded in each message): the rooms of the messages it was not made from.
        elsewhere = memory.memories_by_keys(
            sorted(
                {
                    row.source_mkey
                    for mkey, rows in said_in.items()
                    for row in rows
                    if row.source_mkey is not None
                    and row.source_id != cited[mkey].metadata.get("from")
                }
            )
        )
        shown: list[tuple[ProfileEntry, frozenset[str]]] = []
        for entry in entries:
            records = [cited[k] for k in entry.source_mkeys if k in cited]
            goals = [r for r in records if r.table == "goals"]
            status = _deciding(goals).status if goals else None
            if current_only and status in _FINISHED:
                continue
            sources = tuple(
                dict.fromkeys(
                    i
                    for r in records
                    for i in (
                        [str(row.source_id) for row in said_in[r.mkey]]
                        if r.mkey in said_in
                        else [r.id]
                    )
                )
            )
            rooms = frozenset(r.room for r in records) | {
                elsewhere[row.source_mkey].room
                for r in records
                for row in said_in.get(r.mkey, [])
                if row.source_mkey in elsewhere
            }
            shown.append((replace(entry, sources=sources, status=status), rooms))
        return shown

    def facts(
        self, user: str | None = None, room: str | None = None, *, history: bool = False
    ) -> list[MemoryRecord]:
        """Facts and relationships (derived from messages, or stated) that still hold,
        newest first; with ``history``, those a later statement superseded too, with
        status ``superseded`` (see :mod:`structrag.memory.supersession`)."""
        records = self.parts.memory.memories(
            MemoryQuery(self.agent, room=room, tables=("facts", "relationships"), user=user)
        )
        replaced = self._supersession()
        if history:
            return [replaced.mark(r) for r in records]
        # A fact said again is one fact (the newest, whose sources say where it was said).
        seen: set[tuple[str, str]] = set()
        current = []
        for record in records:
            key = ((record.user or "").lower(), record.text.strip().lower())
            if replaced.holds(record) and key not in seen:
                seen.add(key)
                current.append(record)
        return current

    @staticmethod
    def _replacements_raised(
        ranked: Hits, replaced: Supersession, ids: dict[int, str], *, bring: bool = True
    ) -> Hits:
        """The ranking with the messages that replaced a superseded one right before it
        (``ids``: the store keys of the messages the supersession names), brought in
        (``bring``) when the ranking lacks them (a search for "where does Priya live?" that finds "I
        live in Porto" and not "I moved to Lisbon" returns Lisbon before Porto). The
        caller keeps to the search's filters (room, table, user, time)."""
        keys = {mid: mkey for mkey, mid in ids.items()}
        present = {int(k) for k in ranked.mkeys[np.isin(ranked.mkeys, list(ids))]}
        todo = [ids[int(k)] for k in ranked.mkeys if int(k) in present]
        brought: list[int] = []
        while todo and bring:
            for newer in sorted(replaced.replaced_by.get(todo.pop(0), ())):
                key = keys.get(newer)
                if key is not None and key not in present:
                    present.add(key)
                    brought.append(key)
                    todo.append(newer)
        if brought:  # at the end, with the lowest score: raised below, where they belong
            low = float(ranked.scores[-1]) if len(ranked) else 0.0
            ranked = Hits(
                np.concatenate([ranked.mkeys, np.asarray(brought, dtype=ranked.mkeys.dtype)]),
                np.concatenate([ranked.scores.astype(float), np.full(len(brought), low)]),
            )
        positions = np.flatnonzero(np.isin(ranked.mkeys, list(ids)))
        named = {int(p): ids[int(ranked.mkeys[p])] for p in positions}
        order = replaced.reorder(len(ranked), named)
        if order is None:
            return ranked
        # Scores keep to the order (a raised message takes the score of the one it now
        # stands before): a threshold never keeps the superseded message and drops the
        # one that replaced it.
        scores = np.maximum.accumulate(ranked.scores[order].astype(float)[::-1])[::-1]
        return Hits(ranked.mkeys[order], scores)

    def _supersession(self) -> Supersession:
        """What the agent's profiles hold as replaced (read again after any write)."""
        generation = self.parts.store.generation()
        cached = self.parts.replaced.get(self.agent)
        if cached is None or cached[0] != generation:
            # One query: every entry with the keys of the messages that stated it.
            replaced = Supersession.of(self.parts.memory.profile_statements(self.agent))
            cached = (generation, replaced, {int(k): k for k in replaced.messages()})
            self.parts.replaced[self.agent] = cached
        return cached[1]

    def sources(self, memory_id: str) -> list[SourceRow]:
        """Where a fact comes from."""
        found = self._find(memory_id)
        return self.parts.memory.sources([found.mkey]).get(found.mkey, [])

    def observations(self, room: str | None = None) -> list[Observation]:
        return self.parts.memory.observations(self.agent, room)

    def summaries(self, room: str | None = None) -> list[RoomSummary]:
        return self.parts.memory.summaries(self.agent, room)

    # -- compaction -----------------------------------------------------------------------

    def _compact_if_due(self, room: str) -> None:
        rooms = self.parts.rooms
        key = (self.agent, room)
        if key not in rooms.unsummarised:
            summaries = self.summaries(room)
            after = summaries[-1].last_ordinal if summaries else -1
            rows = self.parts.store.sql(
                "SELECT count(*) FROM messages WHERE conversation = ? AND agent = ? "
                "AND memory_table = 'messages' AND ordinal > ?",
                [room, self.agent, after],
            )
            rooms.unsummarised[key] = int(rows[0][0])
        if rooms.unsummarised[key] > self.parts.settings.compact_after:
            landing: _Landing | None = getattr(self._local, "landing", None)
            landed = len(landing.done) if landing is not None else 0
            try:
                self.compact(room)
            except BaseException as exc:
                if not isinstance(exc, Exception) or _interrupt(exc):
                    if landing is not None and len(landing.done) == landed:
                        landing.unfinished.append(
                            f"the compaction of room {room!r} did not finish (it writes in a "
                            "transaction of its own: nothing of it was written); it runs "
                            "again on the next add to the room"
                        )
                    raise
                # The add has committed: an error would say it failed, and its retry would
                # store the memory twice. The room stays due, so the next add tries again.
                log.warning(
                    "the memory was added, but the compaction of room %r failed (%s); it runs "
                    "again on the next add to the room",
                    room,
                    first_line(exc),
                )
                return
            rooms.unsummarised.pop(key, None)

    def compact(self, room: str, *, keep_recent: int | None = None) -> RoomSummary | None:
        """Summarise the room's messages older than its ``keep_recent`` newest that no
        summary covers yet (offline, extractively: the period, the people, the topics and
        the actions stated), and record the observations in them (decisions, open
        questions, topics of interest). The messages stay stored and searchable. Returns
        the new summary, or None when there was nothing to summarise."""
        with self._writing("memory compact"):
            return self._compact(room, keep_recent)

    def _compact(self, room: str, keep_recent: int | None) -> RoomSummary | None:
        keep = self.parts.settings.keep_recent if keep_recent is None else keep_recent
        summaries = self.summaries(room)
        after = summaries[-1].last_ordinal if summaries else -1
        rows = self.parts.store.sql(
            "SELECT mkey FROM messages WHERE conversation = ? AND agent = ? "
            "AND memory_table = 'messages' AND ordinal > ? ORDER BY ordinal",
            [room, self.agent, after],
        )
        keys = [int(r[0]) for r in rows]
        older = keys[: max(len(keys) - keep, 0)]
        if not older:
            return None
        stored = self.parts.store.messages_by_keys(older)
        messages = [stored[k] for k in older if k in stored]
        refs = self.parts.store.refs_for_messages(older)
        found = digest(messages, refs, agent=self.agent)
        memory = self.parts.memory
        made: list[int] = []

        def record(transaction: StoreTransaction) -> None:
            made.append(
                memory.add_summary(
                    self.agent,
                    room,
                    found.summary,
                    "extractive",
                    older,
                    messages[0].message.ordinal,
                    messages[-1].message.ordinal,
                )
            )
            for finding in found.findings:
                last = max(finding.sources, default=older[-1])
                when = stored[last].message.timestamp if last in stored else None
                memory.add_observation(
                    self.agent,
                    room,
                    when,
                    finding.kind,
                    finding.topic,
                    finding.insight,
                    finding.importance,
                    finding.sources,
                )

        def made_json() -> dict[str, Any]:
            summary = {"summary_id": made[0] if made else None, "room": room}
            return {"summary": {**summary, "text": found.summary, "covers": len(older)}}

        # The summary and its observations appear together.
        with self._committing(
            lambda: (
                f"compacted room {room!r} of agent {self.agent!r} into summary-"
                f"{made[0] if made else '?'} ({_counted(len(older), 'message', 'messages')})"
            ),
            made_json,
        ):
            faults.point("memory-compact")
            self.parts.ingestor.write([], [], [], before_commit=record)
        return next(s for s in memory.summaries(self.agent, room) if s.summary_id == made[0])

    # -- the context window ---------------------------------------------------------------

    @consistent_reads
    def context(
        self,
        message: str,
        *,
        room: str | None = None,
        budget: int = 4000,
        user: str | None = None,
        shares: dict[str, float] | None = None,
        encoding: str = "cl100k_base",
    ) -> ContextWindow:
        """The sections an agent puts in its prompt before answering ``message`` in
        ``room``, never over ``budget`` tokens (see :mod:`structrag.memory.window`)."""
        started = time.perf_counter()
        _expect("message", message, str, optional=False)
        for name, value in (("room", room), ("user", user)):
            _expect(name, value, str)
        problem = budget_problem(budget)
        if problem:
            raise MemoryInputError(problem)
        given = room
        room = _room(room)
        settings = self.parts.settings
        history = self._history(room)
        # With no user given, the window is about the room's one user, from what they
        # said in this room; in a room where several users speak it guesses no one (the
        # last speaker need not be whom the agent answers), and retrieval keeps to this
        # room: another room of theirs is not this room's to read.
        asked_for = user
        if user is None:
            speakers = {m.user.lower(): m.user for m in history[1] if m.user}
            speakers.pop(self.agent.lower(), None)
            user = next(iter(speakers.values())) if len(speakers) == 1 else None
        shares = shares or settings.shares
        counter = self.parts.counter(encoding)
        # What the message is searched by: any message gives the window (history, the
        # profile); one with no words retrieves nothing, and a long one is searched by
        # its start.
        query, notes = _searchable(message)
        if not history[1]:  # a new conversation; or a room name mistyped, or none given
            which = f"room {room!r}" + (" (no room was given)" if given is None else "")
            notes.append(
                f"{which} holds no messages of agent {self.agent!r} yet: the window has no "
                "history (a new conversation, or not the room the conversation is in)"
            )
        # What history shows within its own share is not retrieved again; the older
        # messages of the room are (history holds its newest ones only).
        seen = held_by_share("history", history[0], budget, shares, counter)
        candidates: dict[str, Lines] = {
            "history": history[0],
            "retrieval": self._retrieval(query, seen, room, asked_for) if query else [],
            "profile": self._about(query, user, room, own_room=asked_for is None),
        }
        window = assemble(
            message, room, budget, candidates, shares, counter, first={"history": history[2]}
        )
        window.notes = notes
        window.seconds = time.perf_counter() - started
        return window

    def _history(self, room: str) -> tuple[Lines, list[MemoryRecord], str | None]:
        """History lines, best first: the newest message after the summaries, the latest
        summary, then the older messages after the summaries (the window shows the
        summary first, then the messages oldest first); the room's newest messages,
        summarised or not (who speaks in it, after a compaction that kept none); and the
        summary's line id."""
        summaries = self.summaries(room)
        newest = self.parts.memory.memories(
            MemoryQuery(self.agent, room=room, tables=("messages",)), limit=200
        )
        covered = {source for summary in summaries for source in summary.sources}
        replaced = self._supersession()
        recent = [replaced.mark(m) for m in newest if m.id not in covered]
        lines: Lines = [(_line(m), m.id) for m in recent]
        if not summaries:
            return lines, newest, None
        latest = summaries[-1]
        line_id = f"summary-{latest.summary_id}"
        summary = (
            f"[{line_id}, {len(latest.sources)} messages] {latest.text}",
            line_id,
        )
        # The newest message first (what the reply answers), then the summary: it shows
        # at a budget that holds only a few of the messages after it.
        lines.insert(min(1, len(lines)), summary)
        return lines, newest, line_id

    def _retrieval(self, message: str, seen: set[str], room: str, user: str | None) -> Lines:
        """Memories that answer the message: of this room and, when the caller names the
        user, of the rooms they speak in (another user's private room is not theirs to
        read; with no user named, this room's alone)."""
        settings = self.parts.settings
        lines: Lines = []
        rooms = [room] if user is None else sorted({room, *self._rooms_of(user)})
        hits = self.search(
            message, table="messages", count=settings.retrieve_memories + len(seen), rooms=rooms
        )
        lines.extend(
            (_line(h.memory, room=True), h.memory.id) for h in hits if h.memory.id not in seen
        )
        lines = lines[: settings.retrieve_memories]
        if self.parts.memory.count_memories(
            MemoryQuery(self.agent, tables=("knowledge",), include_shared=True)
        ):
            # Ranked as a structured search ranks them (the fragment that names what the
            # message asks about first); fused ranks, whose embedding side ranks alike
            # fragments close together, only add what that leaves room for.
            count = settings.retrieve_knowledge
            hits = self.search(message, table="knowledge", count=count)
            if len(hits) < count:
                shown = {h.memory.id for h in hits}
                more = self.search(message, table="knowledge", count=count, mode="hybrid")
                hits += [h for h in more if h.memory.id not in shown][: count - len(hits)]
            for hit in hits:
                lines.append((_knowledge_line(hit.memory), hit.memory.id))
        return lines

    def _about(self, query: str, user: str | None, room: str, *, own_room: bool = False) -> Lines:
        """The profile section: the user's profile entries, their open goals, the facts
        that answer ``query`` (none when it is empty), the room's observations.
        ``own_room``: the user was not named; only what they said in this room."""
        settings = self.parts.settings
        lines: Lines = []
        shown = self._entries(user) if user else []
        if own_room:
            shown = [(e, rooms) for e, rooms in shown if room in rooms]
        entries = [e for e, _ in shown]
        # Those that share words with the message first, then the most recently said: a
        # long-known user's oldest entries must not fill the section.
        wanted = _content_stems(query)
        entries.sort(key=lambda e: (-len(wanted & _entry_stems(e)), -e.confirmed_at.timestamp()))
        for entry in entries:
            cited = ", ".join(entry.sources[-3:])
            lines.append(
                (f"[profile-{entry.entry_id} <- {cited}] {entry.text}", f"profile-{entry.entry_id}")
            )
        # A fact the profile already states (its entry was made from it) is not repeated,
        # nor one said twice; the facts are the user's own.
        said = {entry.text.strip().lower() for entry in entries}
        stating = {k for entry in entries for k in entry.source_mkeys}
        if user:  # goals the agent keeps for the user (added, or stated), still wanted
            goals = self.parts.memory.memories(
                MemoryQuery(
                    self.agent, tables=("goals",), user=user, room=room if own_room else None
                ),
                limit=settings.retrieve_facts,
            )
            for goal in goals:
                text = goal.text.strip().lower()
                if goal.status in _FINISHED or text in said or goal.mkey in stating:
                    continue
                said.add(text)
                status = f"({goal.status}) " if goal.status and goal.status != "open" else ""
                lines.append((f"[{goal.id}] goal: {status}{_indented(goal.text)}", goal.id))
        counted = self.count(table="facts") + self.count(table="relationships")
        if query and user and counted:
            for table in ("facts", "relationships"):
                for hit in self.search(
                    query,
                    table=table,
                    count=settings.retrieve_facts,
                    user=user,
                    rooms=[room] if own_room else None,
                ):
                    text = hit.memory.text.strip().lower()
                    if hit.memory.status == SUPERSEDED or text in said:
                        continue
                    said.add(text)
                    lines.append((f"[{hit.memory.id}] {hit.memory.text}", hit.memory.id))
        for observation in _by_kind(self.observations(room), 5):
            lines.append(
                (
                    f"[observation-{observation.observation_id}] {observation.kind}: "
                    f"{observation.insight}",
                    f"observation-{observation.observation_id}",
                )
            )
        return lines


#: A goal's statuses once it is no longer wanted.
_FINISHED = frozenset({"done", "abandoned"})


def _deciding(records: Sequence[MemoryRecord]) -> MemoryRecord:
    """Of the memories a profile entry cites, the one that stands for it (its status is
    the entry's, ``get("profile-N")`` returns it): the newest goal still wanted, else
    the newest memory. A goal stated again is one goal memory (see ``Memory._write``);
    two arise where the agent added the goal itself or it was stated again once done."""
    newest = sorted(records, key=lambda r: (r.ts or r.created_at, r.mkey), reverse=True)
    wanted = [r for r in newest if r.table == "goals" and r.status not in _FINISHED]
    return (wanted or newest)[0]


#: The tables whose memories are read for statements: a user's messages, and the facts,
#: relationships and goals the agent writes of a user.
_READ_TABLES = frozenset({"messages", "facts", "relationships", "goals"})

_STATEMENT_TABLES = {
    "fact": "facts",
    "personal": "facts",
    "preference": "facts",
    "style": "facts",
    "relationship": "relationships",
    "goal": "goals",
}


def _searchable(message: str) -> tuple[str, list[str]]:
    """What a context window searches for a message, and a note when it is not the whole
    message: nothing for one with no words ("👍", "?"), the start of one longer than a
    question may be (cut at a space)."""
    if not any(c.isalnum() for c in message):
        return "", []
    query = message.strip()
    if len(query) <= MAX_QUESTION_CHARS:
        return query, []
    cut = query[:MAX_QUESTION_CHARS]
    space = cut.rfind(" ", MAX_QUESTION_CHARS // 2)
    cut = (cut[:space] if space > 0 else cut).rstrip()
    if not any(c.isalnum() for c in cut):
        return "", [
            f"the message has {len(message):,} characters and no words in its first "
            f"{MAX_QUESTION_CHARS:,}: nothing was retrieved for it"
        ]
    return cut, [
        f"the message has {len(message):,} characters: memories and knowledge were "
        f"retrieved for its first {len(cut):,} (a search takes at most "
        f"{MAX_QUESTION_CHARS:,})"
    ]


def _expect(name: str, value: Any, kind: type, *, optional: bool = True) -> None:
    """A clear error for a value of the wrong type (an agent's code passing an id as a
    number, bytes for text), not an AttributeError deep inside."""
    if value is None and optional:
        return
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        wanted = {str: "text (a str)", dict: "a dict", bool: "True or False"}.get(
            kind, kind.__name__
        )
        raise MemoryInputError(
            f"{name} must be {wanted}{' or None' if optional else ''}, "
            f"not {type(value).__name__} {value!r:.40}"
        )


def _by_kind(observations: Sequence[Observation], count: int) -> list[Observation]:
    """At most ``count`` observations, the kinds taking turns (a decision, an open
    question, a topic of interest, ...), each kind's most important first: a room's many
    topics of interest must not crowd out what was decided."""
    kinds: dict[str, list[Observation]] = {}
    for observation in observations:  # most important first
        kinds.setdefault(observation.kind, []).append(observation)
    order = sorted(kinds, key=lambda k: (k != "decision", k != "open_question", k))
    chosen: list[Observation] = []
    turn = 0
    while len(chosen) < count and any(turn < len(kinds[k]) for k in order):
        chosen += [kinds[k][turn] for k in order if turn < len(kinds[k])]
        turn += 1
    return chosen[:count]


def _check_importance(importance: str) -> None:
    if importance not in IMPORTANCE_LEVELS:
        raise MemoryInputError(
            f"unknown importance {importance!r}", hint="choose low, normal or high"
        )


def _check_status(status: str | None, table: str) -> None:
    """A status is a goal's, one of :data:`GOAL_STATUSES`."""
    if status is None:
        return
    if table != "goals":
        raise MemoryInputError(
            f"a status is for goals, not {table}",
            hint="leave the status out, or add the memory to the goals table",
        )
    if status not in GOAL_STATUSES:
        raise MemoryInputError(
            f"unknown goal status {status!r}", hint=f"choose one of: {', '.join(GOAL_STATUSES)}"
        )


#: Memory ids that a route of the HTTP API takes for itself (``.../memories/count``), and
#: those a URL path cannot hold (``.`` and ``..`` are resolved away before routing).
RESERVED_IDS = frozenset({"count", ".", ".."})
#: The ids a context window's lines give to what is not a memory of its own: a profile
#: entry, a room summary, an observation (``remove`` takes them; ``get`` a profile entry).
_DERIVED_ID = re.compile(r"^(profile|summary|observation)-([0-9]+)$")


def _check_id(memory_id: str) -> None:
    """An id given when adding: not one the HTTP routes or a context window's lines take
    for something else, and no control characters (a URL or a command line cannot hold
    them, and the store marks an id scoped to its agent with one)."""
    if memory_id == "count":
        raise MemoryInputError(
            "a memory's id cannot be 'count': GET .../memories/count is the route of the "
            "memories' count over HTTP, so that memory could not be read by its id",
            hint="choose another id (or none: one is made up)",
        )
    if memory_id in RESERVED_IDS:
        raise MemoryInputError(
            f"a memory's id cannot be {memory_id!r}: a URL path resolves '.' and '..' away, "
            f"so GET .../memories/{memory_id} could not read that memory over HTTP",
            hint="choose another id (or none: one is made up)",
        )
    if _DERIVED_ID.match(memory_id):
        raise MemoryInputError(
            f"a memory's id cannot be {memory_id!r}: context windows cite profile entries, "
            "room summaries and observations by ids of that form",
            hint="choose another id (or none: one is made up)",
        )
    if ID_SCOPE in memory_id or any(unicodedata.category(c) == "Cc" for c in memory_id):
        raise MemoryInputError(
            f"a memory's id cannot hold control characters: {memory_id!r:.60}",
            hint="choose an id of printable characters (or none: one is made up)",
        )


def _room(room: str | None) -> str:
    """A room as given (no room: the default one); a blank name, or one of the names
    documents' fragments live in (``doc:...``), is refused."""
    if room is None:
        return DEFAULT_ROOM
    name = room.strip()
    if not name:
        raise MemoryInputError(
            "the room name is empty", hint="name the room, or leave it out for the default room"
        )
    if name.startswith(DOCUMENT_ROOM):
        raise MemoryInputError(
            f"room {name!r}: names that start with {DOCUMENT_ROOM} are documents'",
            hint="name the room otherwise; documents are added with index.knowledge.add",
        )
    return name


def _line(memory: MemoryRecord, *, room: bool = False) -> str:
    """A memory as a context line: ``[mem-1a2b] [8 May 2024] Priya: text``; one a later
    statement superseded says so before its text."""
    from structrag.timeparse import format_date

    when = memory.ts or memory.created_at
    where = f"{memory.room} " if room else ""
    who = f"{memory.user}: " if memory.user else ""
    old = "(superseded) " if memory.status == SUPERSEDED else ""
    return f"[{memory.id}] {where}[{format_date(when)}] {who}{old}{_indented(memory.text)}"


def _knowledge_line(memory: MemoryRecord) -> str:
    """A knowledge fragment as a context line, labelled with its document and section."""
    source = memory.metadata.get("label") or memory.room
    return f"[{memory.id}] [{source}] {_indented(memory.text)}"


def _indented(text: str) -> str:
    """A memory's text with its later lines indented: a line of its own that reads like
    a section header (``## About the user``) or another memory's line cannot pass for
    one in the window."""
    return _LINE_BREAK.sub("\n    ", text.strip())


_LINE_BREAK = re.compile(r"[ \t]*(?:\r\n?|\n|\u2028|\u2029)[ \t]*")


def _new_id() -> str:
    return "mem-" + secrets.token_hex(6)


def _about(statement: Statement, user: str) -> bool:
    """Whether a statement is about the user (their name, or their first name)."""
    return same_subject(statement.subject, user)


def _as_statement(entry: Any) -> Statement:
    return Statement(
        category=entry.category,
        subject=entry.user,
        predicate=entry.predicate,
        object=entry.object,
        text=entry.text,
        start=0,
        end=0,
        negated=entry.negated,
        tense="present",
        confidence=entry.confidence,
    )


_WORD = re.compile(r"\w\w+")


def _grounded(fact: str, source: str, speaker: str | None = None) -> bool:
    """Whether the fact's content words occur in its source text, the speaker's name
    counting as said ("I work at Initech" grounds "Sam works at Initech"), as in the LLM
    extractor's grounding. An ungrounded fact is kept, but marked."""
    from structrag.analysis import stem_words

    wanted = _content_stems(fact)
    have = set(stem_words(_WORD.findall(f"{speaker or ''} {source}".lower())))
    return bool(wanted) and wanted <= have


def _entry_stems(entry: ProfileEntry) -> set[str]:
    """A profile entry's words, and those of what it implies ("moved to Lisbon": "lives
    in"), so that "where do I live?" finds it."""
    implied = PREDICATES[entry.predicate].implies if entry.predicate in PREDICATES else ()
    return _content_stems(" ".join([entry.text, *(p.replace("_", " ") for p in implied)]))


def _content_stems(text: str) -> set[str]:
    """The stems of a text's words that are not stop words."""
    from structrag.analysis import query_stopwords, stem_words

    stop = query_stopwords()
    return set(stem_words([w for w in _WORD.findall(text.lower()) if w not in stop]))
