"""What the core asks of storage: a knowledge store (the source of truth) and a text index.

The ingest pipeline and the query engine only see these protocols; DuckDB and Whoosh sit
behind them (:mod:`structrag.store.duckdb`, :mod:`structrag.store.whoosh_index`).
Messages get a store-wide integer key (``mkey``) and semantic refs a store-wide ``ref_id``.
The query side learns which message holds a ref, and of what kind it is, from a
:class:`RefTable`; how refs are numbered is the writers' business.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from enum import IntEnum
from pathlib import Path
from typing import Any, Concatenate, NamedTuple, ParamSpec, Protocol, TypeVar

import numpy as np

from structrag.models import Conversation, Message, SemanticRef

#: The memory tables a memory can belong to (every ingested message is in ``messages``).
MEMORY_TABLES = ("messages", "facts", "relationships", "goals", "knowledge")
IMPORTANCE = ("low", "normal", "high")


@dataclass(frozen=True)
class MemoryInfo:
    """What makes a message a memory: its table, owner and bookkeeping."""

    table: str = "messages"
    agent: str | None = None
    world: str | None = None
    importance: str = "normal"
    unique: bool = False
    status: str | None = None
    created_at: datetime | None = None


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: the message plus its store key (and, for a memory written
    through the memory API, what makes it one)."""

    mkey: int
    message: Message
    memory: MemoryInfo | None = None


class LineFields(NamedTuple):
    """What a message's line in an answer context shows
    (:func:`~structrag.query.context.render_line`); ``metadata`` is read for a document's
    fragments only (their label), None otherwise."""

    conversation: str
    speaker: str | None
    timestamp: datetime | None
    text: str
    metadata: Mapping[str, Any] | None


class RefKind(IntEnum):
    """What a semantic ref holds: knowledge from the message text, or from its metadata
    (the speaker and recipients as person entities, "speaker say (to) recipient")."""

    ENTITY = 1
    ACTION = 2
    TOPIC = 3
    TAG = 4
    METADATA_ENTITY = 5
    METADATA_ACTION = 6

    @classmethod
    def of(cls, kind: str, metadata: bool) -> RefKind:
        if metadata:
            return cls.METADATA_ACTION if kind == "action" else cls.METADATA_ENTITY
        return cls[kind.upper()]


@dataclass(frozen=True)
class RefTable:
    """The semantic refs of a scope: ids (sorted), the message holding each, its kind."""

    ref_ids: np.ndarray
    mkeys: np.ndarray
    kinds: np.ndarray  # RefKind values, uint8

    @classmethod
    def empty(cls) -> RefTable:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.uint8))

    def __len__(self) -> int:
        return len(self.ref_ids)

    def locate(self, ref_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of ``ref_ids`` in the table, and which of them are in it."""
        if not len(self.ref_ids) or not len(ref_ids):
            return np.zeros(0, np.int64), np.zeros(len(ref_ids), bool)
        at = np.clip(np.searchsorted(self.ref_ids, ref_ids), 0, len(self.ref_ids) - 1)
        found = self.ref_ids[at] == ref_ids
        return at[found], found

    def kinds_of(self, ref_ids: np.ndarray) -> np.ndarray:
        """The kind of each ref (0 for refs not in the table)."""
        rows, found = self.locate(ref_ids)
        out = np.zeros(len(ref_ids), dtype=np.uint8)
        out[found] = self.kinds[rows]
        return out


@dataclass
class SourceRecord:
    """One row of the ingest log."""

    path: str
    sha256: str
    format: str
    fingerprint: str
    extractor: str
    settings: dict[str, Any]
    started_at: datetime
    messages_added: int = 0
    messages_updated: int = 0
    messages_unchanged: int = 0
    refs_added: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ExtractionRecord:
    """How one message's extraction went, for extractors that say (the LLM): a success
    (``error`` None), or a failure, kept with the message's metadata knowledge and redone
    by ``ingest --retry-failed``. ``prompt_version`` is the version of the prompt the
    model was asked with (None: unknown); a re-ingest with another one extracts the
    message again, even when the model found nothing in it."""

    mkey: int
    conversation: str
    message_id: str
    extractor: str
    model: str | None
    error: str | None
    attempts: int
    prompt_version: str | None = None


class StoreTransaction(Protocol):
    """One ingest's writes to the store; nothing is visible until :meth:`commit`."""

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        """Add a chunk: new and changed messages, refs as ``(ref_id, mkey, ref)``, aliases
        as ``(conversation, term, related, source)``, embeddings as
        ``(mkey, model, vector)``, and extraction outcomes. A changed message loses its
        old refs, embeddings and outcomes."""
        ...

    def delete(self, mkeys: Sequence[int]) -> None:
        """Delete messages and everything derived from them (refs, knowledge, embeddings,
        reads, the facts that rest on them alone)."""
        ...

    def commit(
        self,
        before: Callable[[], None] | None = None,
        digest: Callable[[str], bytes | None] | None = None,
        ready: Callable[[], None] | None = None,
    ) -> int:
        """Log the source and commit; returns the new store generation. ``before`` runs
        inside the transaction just before it commits (with every row in place), to write
        what else belongs to it. Every conversation the transaction wrote loses its stored
        digest; with ``digest``, it gets the one ``digest(conversation)`` makes (reading
        the store inside the transaction), unless that is None. ``ready`` runs last,
        before the commit: what must be done elsewhere before it (its exception rolls the
        transaction back), waited for while the digests were made."""
        ...

    def rollback(self) -> None: ...


@dataclass(frozen=True)
class StoreStats:
    conversations: int
    messages: int
    semantic_refs: dict[str, int]
    extractors: dict[str, dict[str, int]]
    sources: int
    #: The conversations by what they hold: ``histories`` (ingested or written as
    #: conversation history), ``memory_rooms`` (an agent's memories) and ``documents``
    #: (a document's fragments).
    conversation_kinds: dict[str, int] = field(default_factory=dict)
    #: The rows of the other memory tables, which ``messages`` does not count: agents'
    #: ``facts``, ``relationships`` and ``goals``, and ``knowledge`` (documents' fragments
    #: and what agents file as knowledge).
    memories: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class MessageFrame:
    """A columnar view of the messages in a scope, ordered by conversation and ordinal.

    ``sessions`` is what bounds a text window: the message's ``session`` metadata when it
    has one, else its date.
    """

    mkeys: np.ndarray
    conversations: np.ndarray
    ids: np.ndarray
    ordinals: np.ndarray
    sessions: np.ndarray
    speakers: np.ndarray
    timestamps: np.ndarray

    def __len__(self) -> int:
        return len(self.mkeys)


@dataclass(frozen=True)
class Scope:
    """The messages a query runs over: a conversation (or all), the memory tables (ingested
    messages are all in ``messages``), and an agent's memories (None: any agent's, and
    messages of none). With ``shared``, an agent's scope also holds shared knowledge, and
    a scope of no agent holds only what belongs to none (shared knowledge)."""

    conversation: str | None = None
    tables: tuple[str, ...] = ("messages",)
    agent: str | None = None
    shared: bool = False


@dataclass(frozen=True)
class MessageFilter:
    """Conditions on messages (all must hold); values are bound as SQL parameters."""

    conversation: str | None = None
    speakers: tuple[str, ...] = ()
    recipients: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    start: datetime | None = None
    end: datetime | None = None
    meta: tuple[tuple[str, str, str], ...] = ()  # (key, comparator, value)
    #: Memory tables the messages are in (``knowledge``: document fragments).
    tables: tuple[str, ...] = ()
    #: Tables they are not in.
    not_tables: tuple[str, ...] = ()
    #: Documents (path, file name, title or id) the fragments are of.
    documents: tuple[str, ...] = ()
    #: Section headings the fragments are under.
    sections: tuple[str, ...] = ()


@dataclass(frozen=True)
class PropertyCondition:
    """Refs whose property ``name`` has one of ``values`` (normalised keys).

    Names follow KnowPro's property index: ``name``, ``type``, ``facet.name``,
    ``facet.value``, ``verb``, ``subject``, ``object``, ``indirectObject``, ``topic``,
    ``tag``. With ``whole_words`` a value also matches keys that contain its words.
    """

    name: str
    values: tuple[str, ...]
    whole_words: bool = False

    def accepts(self, value: str) -> bool:
        if not self.whole_words:
            return value in self.values
        padded = f" {value} "
        return any(f" {v} " in padded for v in self.values)


class KnowledgeStore(Protocol):
    """The relational store; the source of truth for everything in an index."""

    read_only: bool

    def close(self) -> None: ...

    def generation(self) -> int: ...

    def reading(self) -> AbstractContextManager[None]:
        """A block of reads that sees one committed state of the store throughout."""
        ...

    def get_setting(self, key: str) -> str | None: ...

    def set_setting(self, key: str, value: str) -> None: ...

    def source_seen(self, sha256: str, fingerprint: str) -> bool: ...

    def message_hashes(
        self, conversations: Iterable[str]
    ) -> dict[tuple[str, str], tuple[int, int, int]]:
        """``(conversation, message id) -> (mkey, content hash, ordinal)``, existing messages."""
        ...

    def conversations_from(self, path: str) -> set[str]:
        """The conversations whose messages an ingest of the file at ``path`` (resolved)
        last wrote."""
        ...

    def conversation_inputs(self, conversations: Iterable[str]) -> dict[str, set[str]]:
        """The inputs (their ``sources.path``) whose ingests wrote each conversation's
        messages; a conversation with none (new, or live memories only) is left out."""
        ...

    def message_inputs(self, conversations: Iterable[str]) -> dict[tuple[str, str], str]:
        """``(conversation, message id) -> sources.path`` of the input whose ingest wrote
        it, for the conversations' messages that an ingest wrote."""
        ...

    def next_ids(self) -> tuple[int, int]:
        """The next free ``mkey`` and ``ref_id``."""
        ...

    def reserve_ids(self, messages: int, refs: int) -> tuple[int, int]:
        """Numbers for new messages and refs that nothing else in this process will use:
        the first ``mkey`` and ``ref_id`` of each range."""
        ...

    def begin(
        self,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> StoreTransaction:
        """A transaction straight into the store (``source`` None: a live write), which
        holds the store from its first write to its commit; ``settings`` are index
        settings written with it."""
        ...

    def write_digests(
        self, conversations: Sequence[str], digest: Callable[[str], bytes | None]
    ) -> None:
        """Store the digests ``digest(conversation)`` makes (None: none), replacing those
        of ``conversations``, without a new generation (a digest changes no answer)."""
        ...

    def drop_conversation(self, conversation: str) -> None:
        """Delete a conversation's own rows (the conversation, its aliases and digest),
        once a transaction has deleted its messages."""
        ...

    def stage(
        self,
        folder: Path,
        source: SourceRecord | None,
        conversations: list[Conversation],
        settings: Mapping[str, str] | None = None,
    ) -> StoreTransaction:
        """An ingest's transaction, kept in ``folder`` while it is written and merged into
        the store at commit (the store stays free for other processes meanwhile)."""
        ...

    def failed_messages(self, extractors: Sequence[str]) -> list[StoredMessage]:
        """Messages with a recorded extraction failure by one of ``extractors``."""
        ...

    def stats(self) -> StoreStats: ...

    def conversations(self) -> list[Conversation]: ...

    def conversation_summaries(self) -> list[dict[str, Any]]:
        """Per conversation: id, name, message count, first/last date, speakers."""
        ...

    def messages_by_keys(self, mkeys: Sequence[int]) -> dict[int, StoredMessage]: ...

    def line_fields(self, mkeys: Sequence[int]) -> dict[int, LineFields]:
        """What the context line of each message shows (no whole message is built)."""
        ...

    def find_message(self, conversation: str | None, message_id: str) -> list[StoredMessage]: ...

    def iter_messages(
        self, conversation: str | None = None, batch: int = 2000, *, table: str | None = None
    ) -> Iterator[StoredMessage]:
        """Messages in store order: of one ``conversation``, of one memory ``table``
        (``messages``, ``facts``, ... ``knowledge``) or all."""
        ...

    def refs_for_messages(self, mkeys: Sequence[int]) -> dict[int, list[SemanticRef]]: ...

    def refs_by_ids(self, ref_ids: Sequence[int]) -> dict[int, tuple[int, SemanticRef]]:
        """``ref_id -> (mkey, ref)``."""
        ...

    def iter_refs(
        self, kind: str | None = None, conversation: str | None = None
    ) -> Iterator[tuple[int, SemanticRef]]: ...

    def top_entities(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]: ...

    def top_topics(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]: ...

    def aliases(self, conversation: str | None = None) -> list[tuple[str, str, str]]:
        """``(term, related, source)`` of the aliases of a conversation (all: ``None``)."""
        ...

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run a read-only SQL query with bound parameters."""
        ...

    def read_only_problem(self, query: str) -> str | None:
        """What in a user's ``query`` would change the store (``"a DELETE statement"``),
        or None when it only reads."""
        ...

    def sql_table(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = (), limit: int | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """One statement's result: the names of its columns and its rows (at most
        ``limit``, read no further); JSON columns come decoded (dicts, lists ...)."""
        ...

    # -- for the query engine ---------------------------------------------------------

    def message_frame(self, scope: Scope) -> MessageFrame:
        """The messages of a scope, as arrays, ordered by conversation and ordinal."""
        ...

    def memory_tables(self) -> set[str]:
        """The memory tables that hold at least one message (``messages``, ``knowledge``,
        ``facts`` ...)."""
        ...

    def documents_named(self, document: str) -> int:
        """How many documents ``document:"..."`` names (see its scope)."""
        ...

    def metadata_keys(self, conversation: str | None) -> list[str]:
        """The top-level keys of the messages' metadata (of a conversation, or all),
        sorted."""
        ...

    def digest(self, conversation: str) -> bytes | None:
        """The conversation's digest as an ingest stored it (:mod:`structrag.query.digest`),
        None when it has none: no ingest wrote it, or another write changed it since."""
        ...

    def refs_meeting(
        self, ref_ids: Sequence[int] | None, conditions: Sequence[PropertyCondition]
    ) -> list[int]:
        """The refs among ``ref_ids`` (None: all of them) that meet every condition (the
        property index), sorted."""
        ...

    def conversation_properties(self, conversation: str) -> dict[int, list[tuple[str, str]]]:
        """Property-index rows of every ref of a conversation."""
        ...

    def conversation_knowledge_texts(
        self, conversation: str
    ) -> dict[int, tuple[str, str, list[str]]]:
        """:meth:`knowledge_texts` of every ref of a conversation."""
        ...

    def ref_table(self, conversation: str | None) -> RefTable:
        """Every semantic ref of a conversation (all when ``None``): id, message, kind."""
        ...

    def filter_messages(self, condition: MessageFilter) -> list[int]:
        """mkeys of the messages meeting the filter."""
        ...

    def embedding_matrix(
        self, model: str, conversation: str | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(mkeys, vectors) of a model's message embeddings."""
        ...

    def knowledge_texts(self, ref_ids: Sequence[int]) -> dict[int, tuple[str, str, list[str]]]:
        """``ref_id -> (kind, name or text, types)`` for entity, topic and tag refs."""
        ...

    def knowledge_vocabulary(self, conversation: str | None) -> list[tuple[str, str, int]]:
        """Distinct entity names and topics: ``(text, kind, mentions)``."""
        ...

    def relation_edges(self, conversation: str | None) -> list[tuple[str, str, str]]:
        """``(subject, verb, object)`` of actions with both ends, possessions
        (``owner have entity``) from ``owner`` facets, and types (``entity is type``),
        sorted."""
        ...


@dataclass(frozen=True)
class IndexedMessage:
    """What the text index holds for one message. The message's refs have the
    consecutive ids ``first_ref, first_ref + 1, ...`` (the writer numbers them so)."""

    mkey: int
    conversation: str
    speaker: str | None
    first_ref: int
    terms: list[str]  # index terms (stems) of the message text
    knowledge: list[list[str]]  # index terms of each ref, in ref order
    content: int = 0  # how many of the terms carry content (0: a backchannel, "Yeah.")


class TextIndexWriter(Protocol):
    """A pending change to the text index; nothing is visible until :meth:`commit`."""

    def add(self, message: IndexedMessage) -> None:
        """Add a message's document (after :meth:`delete` of its old one, for an edit)."""
        ...

    def delete(self, mkey: int) -> None:
        """Remove a message's document."""
        ...

    def prepare(self) -> None:
        """Do the slow part of committing now (the store's commit comes next, and the text
        index should follow it closely)."""
        ...

    def commit(self, generation: int) -> None: ...

    def cancel(self) -> None:
        """Give the change up. May be called more than once, and while :meth:`prepare`
        runs on another thread: work it can stop at once (a process writing a segment)
        stops, and what it cannot is waited for."""
        ...


class PostingsLike(Protocol):
    """One term's postings: message keys, and a value per posting (term frequency for
    message text, the semantic ref's id for knowledge)."""

    mkeys: np.ndarray
    values: np.ndarray


class TextIndexReader(Protocol):
    """The read side of the text index, used by the query engine."""

    def catch_up(self, generation: int) -> int | None:
        """Read what was committed up to the store's ``generation`` (another process may
        have written since this one last read); returns the generation the index now
        shows, which lags the store's for a moment after a write in another process."""
        ...

    def docs_of(self, mkeys: np.ndarray) -> np.ndarray:
        """The index's own (live) document numbers of some messages."""
        ...

    def lengths(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(mkeys, number of text terms, number of content terms) of the documents."""
        ...

    def text_postings(self, term: str, docs: np.ndarray) -> PostingsLike: ...

    def terms_with_prefix(self, prefix: str, limit: int = 50) -> list[str]:
        """Message-text terms that start with ``prefix``."""
        ...

    def knowledge_postings(self, term: str, docs: np.ndarray) -> PostingsLike: ...


class TextIndex(TextIndexReader, Protocol):
    """The inverted index: terms -> semantic refs -> messages, and message text."""

    def generation(self) -> int | None:
        """The store generation the index reflects; None when it must be rebuilt (missing,
        or written in an older layout)."""
        ...

    def writer(self) -> TextIndexWriter:
        """A change written straight into the index (one at a time per process)."""
        ...

    def stage(self, folder: Path, *, background: bool = False) -> TextIndexWriter:
        """An ingest's change, indexed into ``folder`` and added to the index at commit;
        in the ``background``, by another process (worth it for a large ingest: it writes
        its part while the store commits)."""
        ...

    def rebuild(self, messages: Iterable[IndexedMessage], generation: int) -> int: ...

    def close(self) -> None: ...


class HasStore(Protocol):
    @property
    def store(self) -> KnowledgeStore: ...


_Self = TypeVar("_Self", bound=HasStore)
_P = ParamSpec("_P")
_R = TypeVar("_R")


def consistent_reads(
    method: Callable[Concatenate[_Self, _P], _R],
) -> Callable[Concatenate[_Self, _P], _R]:
    """Run a method on one committed state of its object's store (another process may
    write between two calls, never during one)."""

    @functools.wraps(method)
    def run(self: _Self, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self.store.reading():
            return method(self, *args, **kwargs)

    return run
