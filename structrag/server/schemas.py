"""The API's request and response bodies (pydantic), as ``/openapi.json`` describes them.

Responses have the shapes the CLI prints with ``--json`` (:mod:`structrag.shapes` builds
both); a request's fields are the CLI command's options.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from structrag.query.context import MAX_BUDGET
from structrag.query.limits import MAX_QUESTION_CHARS

Table = Literal["messages", "facts", "relationships", "goals", "knowledge"]
Importance = Literal["low", "normal", "high"]
Mode = Literal["structured", "text", "vector", "hybrid"]


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Response(BaseModel):
    model_config = ConfigDict(extra="allow")


# -- errors and health ------------------------------------------------------------------


class ErrorBody(BaseModel):
    code: str = Field(description="Machine-readable: query_syntax_error, not_found_error ...")
    message: str = Field(description="What went wrong (a query error keeps its caret lines).")
    hint: str | None = Field(default=None, description="What to do about it.")
    position: Any = Field(
        default=None,
        description="Where: a character offset into a query or a JSON body, or "
        "{path, line, column} of an input file; absent when nothing points anywhere.",
    )
    errors: list[ErrorBody] | None = Field(
        default=None,
        description="input_errors: each input of an ingest that failed its check, in order.",
    )
    request_id: str | None = Field(
        default=None,
        description="internal (a 500): the request's id, under which the server logged it "
        "(every answer carries it in its x-request-id header).",
    )


class ErrorOut(BaseModel):
    error: ErrorBody


class HealthOut(Response):
    status: Literal["ok", "closing"]
    version: str
    instance: str
    uptime_s: float


# -- the index ----------------------------------------------------------------------------


class StatsOut(Response):
    conversations: int
    #: histories, memory_rooms, documents (see ``Index.stats``).
    conversation_kinds: dict[str, int] = {}
    messages: int
    #: facts, relationships, goals, knowledge.
    memories: dict[str, int] = {}
    semantic_refs: dict[str, int]
    extractors: dict[str, dict[str, int]]
    sources: int
    #: The message embeddings the index was built with (None before its first ingest).
    embeddings: str | None = None
    index: str
    size_bytes: int


class ConversationOut(Response):
    id: str
    name: str | None
    messages: int
    first: str | None
    last: str | None
    speakers: list[str]
    kind: Literal["conversation", "memory_room", "document"] = Field(
        default="conversation",
        description="An ingested conversation, an agent's memory room (with its agents), or "
        "a document's fragments (with its document_id, path, title and fragments).",
    )


class MessageOut(Response):
    conversation: str
    id: str
    ordinal: int
    speaker: str | None
    recipients: list[str]
    timestamp: str | None
    tags: list[str]
    metadata: dict[str, Any]
    text: str
    knowledge: list[dict[str, Any]] = Field(
        description="Each semantic ref: ref_id, kind, span [start, end), span_text, "
        "extractor, and its fields (name, types, facets; subject, verbs, object; text)."
    )


class MessagePageOut(Response):
    conversation: str
    total: int
    offset: int
    messages: list[MessageOut]


class EntityOut(Response):
    name: str
    mentions: int
    messages: int
    types: list[str]


class TopicOut(Response):
    topic: str
    mentions: int
    messages: int


class EntityPageOut(Response):
    name: str
    types: list[str]
    mentions: int
    messages: int
    by_month: list[dict[str, Any]]
    occurrences: list[dict[str, Any]]
    related: list[dict[str, Any]]
    actions: list[dict[str, Any]]


class AgentOut(Response):
    agent: str
    memories: int
    tables: dict[str, int]


# -- query and ask ------------------------------------------------------------------------


class QueryIn(Request):
    expression: str = Field(min_length=1, examples=["action(Marco, adopt, *) OR entity:Biscuit"])
    conversation: str | None = None
    limit: int = Field(default=20, ge=1, le=10_000)
    explain: bool = Field(default=False, description="Also return the AST and the plan.")


class QueryMessage(Response):
    id: str
    conversation: str
    score: float
    speaker: str | None = None
    timestamp: str | None = Field(default=None, description="ISO 8601.")
    text: str


class QueryRef(Response):
    ref_id: int
    score: float
    kind: str | None
    text: str | None
    conversation: str | None = Field(default=None, description="Where the ref comes from.")
    message_id: str | None = None


class QueryOut(Response):
    query: str
    messages: list[QueryMessage]
    matched: int = Field(default=0, description="Messages the query matched (beyond limit).")
    semantic_refs: list[QueryRef]
    notes: list[str]
    seconds: float
    ast: str | None = None
    plan: str | None = None


Source = Literal["conversations", "knowledge"]


def _conversations() -> list[Source]:
    return ["conversations"]


class AskIn(Request):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    conversation: str | None = None
    budget: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    encoding: str = "cl100k_base"
    explain: bool = Field(default=False, description="Also return the AST and the plan.")
    translator: Literal["offline", "llm"] = "offline"
    answer: bool = Field(
        default=False, description="Have the server's LLM write an answer from the context."
    )
    sources: list[Source] = Field(
        default_factory=_conversations,
        min_length=1,
        description="What to answer from: conversations, knowledge (document fragments).",
    )


class AskMessage(Response):
    id: str
    conversation: str
    score: float
    source: str
    tokens: int
    text: str


class AskOut(Response):
    question: str
    conversation: str | None
    budget: int
    query: str
    question_type: str
    messages: list[AskMessage]
    message_ids: list[str]
    context: str
    tokens: int
    knowledge: list[str]
    notes: list[str]
    seconds: float
    ast: str | None = None
    plan: str | None = None
    answer: dict[str, Any] | None = None


class BatchQuestion(Request):
    question: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS)
    conversation: str | None = None
    budget: int | None = Field(default=None, ge=1, le=MAX_BUDGET)
    id: str | int | None = None


class AskBatchIn(Request):
    questions: list[BatchQuestion] = Field(min_length=1, max_length=1000)
    conversation: str | None = None
    budget: int = Field(default=1000, ge=1, le=MAX_BUDGET)
    encoding: str = "cl100k_base"
    explain: bool = False
    sources: list[Source] = Field(default_factory=_conversations, min_length=1)


class AskBatchOut(Response):
    answers: list[AskOut]


# -- ingest -------------------------------------------------------------------------------


class IngestIn(Request):
    paths: list[str] = Field(min_length=1, description="Files or folders on the server's machine.")
    format: str | None = None
    conversation: str | None = None
    encoding: str = "utf-8"
    date_order: Literal["dmy", "mdy"] | None = None
    extractor: Literal["spacy", "llm", "hybrid"] = "spacy"
    ner: bool = False
    embeddings: Literal["static", "minilm", "none"] | None = None
    workers: int = Field(
        default=1, ge=1, le=16, description="Extraction processes (forked from the server)."
    )
    force: bool = False
    exclude: list[str] = Field(
        default=[],
        description="Shell patterns of files and folders to leave out of a folder input, "
        "matched against the name and the path within the folder.",
    )


class JobProgress(Response):
    messages: int
    messages_total: int
    files: int
    files_total: int
    current: str | None


class JobOut(Response):
    id: str
    kind: str
    state: Literal["queued", "checking", "running", "done", "failed", "cancelled"]
    inputs: list[str]
    options: dict[str, Any]
    created_at: str
    started_at: str | None
    finished_at: str | None
    progress: JobProgress
    reports: list[dict[str, Any]]
    error: ErrorBody | None


# -- memory -------------------------------------------------------------------------------


class MemoryIn(Request):
    text: str = Field(min_length=1)
    user: str | None = None
    room: str | None = None
    world: str | None = None
    table: Table = "messages"
    importance: Importance = "normal"
    unique: bool = False
    id: str | None = None
    source: str | None = Field(
        default=None, description="For a fact: the id of the memory it comes from."
    )
    metadata: dict[str, Any] | None = None
    timestamp: datetime | None = None
    status: str | None = None


class MemoryUpdate(Request):
    status: Literal["open", "in_progress", "done", "abandoned"] | None = Field(
        default=None, description="A goal's status."
    )
    importance: Importance | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, description="Replaces the memory's metadata whole."
    )


class MemoryOut(Response):
    id: str
    table: str
    agent: str | None
    user: str | None
    room: str
    world: str | None
    text: str
    created_at: str
    ts: str | None
    importance: str
    unique: bool
    status: str | None
    metadata: dict[str, Any]
    access_count: int
    last_access: str | None


class AddedOut(MemoryOut):
    duplicate: bool = Field(
        description="With `unique`: this exact memory was stored already, and nothing was "
        "stored (the other fields given were not applied)."
    )


class HitOut(MemoryOut):
    score: float
    mode: str


class SearchIn(Request):
    query: str = Field(min_length=1)
    room: str | None = None
    table: Table = "messages"
    count: int = Field(default=10, ge=1, le=1000)
    mode: Mode = "structured"
    threshold: float | None = None
    start: datetime | None = None
    end: datetime | None = None
    #: A user's own memories only; memories of these rooms only.
    user: str | None = None
    rooms: list[str] | None = None


class CountOut(Response):
    agent: str
    room: str | None
    table: str | None
    count: int


class RemovedOut(Response):
    removed: int


class PruneIn(Request):
    older_than: str = "90d"
    keep_if_accessed_more_than: int = Field(default=3, ge=0)
    keep_importance: Importance = "high"
    room: str | None = None
    table: Table | None = "messages"
    apply: bool = Field(default=False, description="Delete; without it, say what would go.")


class PruneOut(Response):
    dry_run: bool
    removed: list[str]
    count: int
    kept_important: int
    kept_accessed: int
    seconds: float


class ContextIn(Request):
    message: str
    room: str | None = None
    user: str | None = None
    budget: int = Field(default=4000, ge=1, le=MAX_BUDGET)
    shares: dict[str, float] | None = Field(
        default=None, examples=[{"history": 0.5, "retrieval": 0.3, "profile": 0.2}]
    )
    encoding: str = "cl100k_base"


class SectionOut(Response):
    name: str
    budget: int
    tokens: int
    lines: list[str]
    ids: list[str]


class ContextOut(Response):
    message: str
    room: str
    budget: int
    tokens: int
    sections: list[SectionOut]
    text: str
    seconds: float
    notes: list[str] = []


class FactOut(MemoryOut):
    sources: list[dict[str, Any]]


class ProfileEntryOut(Response):
    entry_id: int
    user: str
    category: str
    predicate: str
    object: str
    text: str
    negated: bool
    confidence: float
    sources: list[str]
    created_at: str
    confirmed_at: str
    superseded_by: int | None
    superseded_at: str | None
    status: str | None = None


class CompactIn(Request):
    room: str
    keep_recent: int | None = Field(default=None, ge=0)


class CompactOut(Response):
    summary: dict[str, Any] | None
    observations: list[dict[str, Any]]
