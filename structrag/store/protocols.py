"""What the core asks of storage: a knowledge store (the source of truth) and a text index.

The ingest pipeline and the query engine only see these protocols; DuckDB and Whoosh sit
behind them (:mod:`structrag.store.duckdb_store`, :mod:`structrag.store.whoosh_index`).
Messages get a store-wide integer key (``mkey``) and semantic refs a store-wide ``ref_id``;
the refs of one message are numbered consecutively, which lets the text index point at a
ref by its position within the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from structrag.models import Conversation, Message, SemanticRef


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: the message plus its store key and its refs' id range."""

    mkey: int
    message: Message
    first_ref: int
    ref_count: int


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
    by ``ingest --retry-failed``."""

    mkey: int
    conversation: str
    message_id: str
    extractor: str
    model: str | None
    error: str | None
    attempts: int


class StoreTransaction(Protocol):
    """One ingest's writes to the store; nothing is visible until :meth:`commit`."""

    def add(
        self,
        new: Sequence[StoredMessage],
        changed: Sequence[StoredMessage],
        refs: Sequence[tuple[int, int, SemanticRef]],
        aliases: Sequence[tuple[str, str, str, float, str]] = (),
        embeddings: Sequence[tuple[int, str, list[float]]] = (),
        extractions: Sequence[ExtractionRecord] = (),
    ) -> None:
        """Add a chunk: new and changed messages, refs as ``(ref_id, mkey, ref)``, aliases
        as ``(conversation, term, related, weight, source)``, embeddings as
        ``(mkey, model, vector)``, and extraction outcomes. A changed message loses its
        old refs, embeddings and outcomes."""
        ...

    def commit(self) -> int:
        """Log the source and commit; returns the new store generation."""
        ...

    def rollback(self) -> None: ...


@dataclass(frozen=True)
class StoreStats:
    conversations: int
    messages: int
    semantic_refs: dict[str, int]
    extractors: dict[str, dict[str, int]]
    sources: int


class KnowledgeStore(Protocol):
    """The relational store; the source of truth for everything in an index."""

    read_only: bool

    def close(self) -> None: ...

    def generation(self) -> int: ...

    def get_setting(self, key: str) -> str | None: ...

    def set_setting(self, key: str, value: str) -> None: ...

    def source_seen(self, sha256: str, fingerprint: str) -> bool: ...

    def message_hashes(
        self, conversations: Iterable[str]
    ) -> dict[tuple[str, str], tuple[int, str, int]]:
        """``(conversation, message id) -> (mkey, content hash, ordinal)``, existing messages."""
        ...

    def next_ids(self) -> tuple[int, int]:
        """The next free ``mkey`` and ``ref_id``."""
        ...

    def begin(self, source: SourceRecord, conversations: list[Conversation]) -> StoreTransaction:
        """Start the transaction of one ingested source."""
        ...

    def failed_messages(self, extractors: Sequence[str]) -> list[StoredMessage]:
        """Messages with a recorded extraction failure by one of ``extractors``."""
        ...

    def stats(self) -> StoreStats: ...

    def conversations(self) -> list[Conversation]: ...

    def messages_by_keys(self, mkeys: Sequence[int]) -> dict[int, StoredMessage]: ...

    def find_message(self, conversation: str | None, message_id: str) -> list[StoredMessage]: ...

    def iter_messages(
        self, conversation: str | None = None, batch: int = 2000
    ) -> Iterator[StoredMessage]: ...

    def refs_for_messages(self, mkeys: Sequence[int]) -> dict[int, list[SemanticRef]]: ...

    def refs_by_ids(self, ref_ids: Sequence[int]) -> dict[int, tuple[int, SemanticRef]]:
        """``ref_id -> (mkey, ref)``."""
        ...

    def iter_refs(
        self, kind: str | None = None, conversation: str | None = None
    ) -> Iterator[tuple[int, SemanticRef]]: ...

    def top_entities(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]: ...

    def top_topics(self, limit: int, conversation: str | None = None) -> list[dict[str, Any]]: ...

    def aliases(self, conversation: str | None = None) -> list[tuple[str, str, float]]: ...

    def sql(
        self, query: str, params: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Run a read-only SQL query with bound parameters."""
        ...


@dataclass(frozen=True)
class IndexedMessage:
    """What the text index holds for one message."""

    mkey: int
    conversation: str
    speaker: str | None
    first_ref: int
    terms: list[str]  # index terms (stems) of the message text
    knowledge: list[list[str]]  # index terms of each ref, in ref order


class TextIndexWriter(Protocol):
    """A pending change to the text index; nothing is visible until :meth:`commit`."""

    def add(self, message: IndexedMessage) -> None: ...

    def delete(self, mkey: int) -> None: ...

    def commit(self, generation: int) -> None: ...

    def cancel(self) -> None: ...


class TextIndex(Protocol):
    """The inverted index: terms -> semantic refs -> messages, and message text."""

    def generation(self) -> int | None: ...

    def writer(self) -> TextIndexWriter: ...

    def rebuild(self, messages: Iterable[IndexedMessage], generation: int) -> int: ...

    def close(self) -> None: ...
