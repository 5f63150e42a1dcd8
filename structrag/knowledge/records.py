"""What document knowledge stores and returns: documents, their fragments, search hits,
and the report of an add. Plain records; the store (DuckDB's ``documents`` and
``fragments`` tables, see :mod:`structrag.store.duckdb.knowledge`) reads and writes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

#: The metadata key of where a document's file is on disk (resolved): a file added again
#: by another path (on its own, then within its folder) is the same document.
SOURCE_FILE = "source_file"


@dataclass(frozen=True)
class DocumentInfo:
    """A stored document."""

    document_id: str
    path: str
    title: str
    format: str
    agent: str | None
    shared: bool
    sha256: str
    chars: int
    pages: int | None
    fragments: int
    tokens: int
    metadata: dict[str, Any]
    added_at: datetime

    def as_dict(self) -> dict[str, Any]:
        return {
            "document_id": self.document_id,
            "path": self.path,
            "title": self.title,
            "format": self.format,
            "agent": self.agent,
            "shared": self.shared,
            "sha256": self.sha256,
            "chars": self.chars,
            "pages": self.pages,
            "fragments": self.fragments,
            "tokens": self.tokens,
            "metadata": self.metadata,
            "added_at": self.added_at.isoformat(),
        }


@dataclass(frozen=True)
class FragmentInfo:
    """A stored fragment: where it sits in its document, and its text."""

    fragment_id: str
    document_id: str
    index: int
    start: int
    end: int
    tokens: int
    page: int | None
    page_end: int | None
    section: tuple[str, ...]
    text: str

    def as_dict(self) -> dict[str, Any]:
        return {
            "fragment_id": self.fragment_id,
            "document_id": self.document_id,
            "index": self.index,
            "start": self.start,
            "end": self.end,
            "tokens": self.tokens,
            "page": self.page,
            "page_end": self.page_end,
            "section": list(self.section),
            "text": self.text,
        }


@dataclass(frozen=True)
class NewDocument:
    """A document to store with the fragments cut from it (their message ids and
    places); its fragments' messages are written by the same transaction."""

    document_id: str
    conversation: str
    agent: str | None
    shared: bool
    path: str
    title: str
    format: str
    sha256: str
    chars: int
    pages: int | None
    metadata: dict[str, Any]
    #: (message id, index, start, end, tokens, page, page_end, section) per fragment.
    fragments: Sequence[tuple[str, int, int, int, int, int | None, int | None, tuple[str, ...]]]


@dataclass(frozen=True)
class Span:
    """Where a search matched inside a fragment (offsets into the fragment's text)."""

    start: int
    end: int
    text: str


@dataclass(frozen=True)
class KnowledgeHit:
    """A fragment a search found."""

    fragment: FragmentInfo
    path: str
    title: str
    agent: str | None
    shared: bool
    score: float
    mode: str
    spans: tuple[Span, ...] = ()

    @property
    def label(self) -> str:
        return fragment_label(
            self.path, self.fragment.page, self.fragment.section, last_page=self.fragment.page_end
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.fragment.as_dict(),
            "path": self.path,
            "title": self.title,
            "agent": self.agent,
            "shared": self.shared,
            "label": self.label,
            "score": round(self.score, 6),
            "mode": self.mode,
            "spans": [{"start": s.start, "end": s.end, "text": s.text} for s in self.spans],
        }


@dataclass
class AddReport:
    """What an add did, document by document."""

    documents_added: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    fragments_added: int = 0
    fragments_updated: int = 0
    fragments_unchanged: int = 0
    fragments_removed: int = 0
    tokens: int = 0
    pages: int = 0
    refs_added: int = 0
    documents: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: Stored documents of a folder added whose files are gone (kept): document_id,
    #: path and file.
    gone: list[dict[str, str]] = field(default_factory=list)
    dry_run: bool = False
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "documents_added": self.documents_added,
            "documents_updated": self.documents_updated,
            "documents_unchanged": self.documents_unchanged,
            "fragments_added": self.fragments_added,
            "fragments_updated": self.fragments_updated,
            "fragments_unchanged": self.fragments_unchanged,
            "fragments_removed": self.fragments_removed,
            "tokens": self.tokens,
            "pages": self.pages,
            "semantic_refs_added": self.refs_added,
            "documents": self.documents,
            "skipped": self.skipped,
            "warnings": self.warnings,
            "gone": self.gone,
            "seconds": round(self.seconds, 3),
        }


def fragment_label(
    path: str, page: int | None, section: Sequence[str], *, last_page: int | None = None
) -> str:
    """How a context line names a fragment's place: ``guide.md §Install``,
    ``handbook.pdf p. 3 §Safety``, ``handbook.pdf pp. 3-4`` (a fragment over two pages).
    A relative path is shown whole (a folder's layout tells ``a/README.md`` from
    ``b/README.md``); one that is absolute or leaves its folder (``..``) by its last folder
    and name, so context lines do not carry a home folder."""
    parts = [_shown_path(path)]
    pages = page_label(page, last_page)
    if pages:
        parts.append(pages)
    if section:
        parts.append(f"§{section[-1]}")
    return " ".join(parts)


def page_label(page: int | None, last_page: int | None) -> str | None:
    """``p. 3``, ``pp. 3-4``, or None for a document without pages."""
    if page is None:
        return None
    if last_page is None or last_page == page:
        return f"p. {page}"
    return f"pp. {page}-{last_page}"


def _shown_path(path: str) -> str:
    names = [n for n in path.split("/") if n not in ("", ".", "..")]
    if path.startswith("/") or ".." in path.split("/"):
        names = names[-2:]
    return "/".join(names) or path


class KnowledgeRows(Protocol):
    """Documents and fragments in the store (DuckDB: :mod:`structrag.store.duckdb.knowledge`)."""

    def documents(
        self, *, agent: str | None = None, shared: bool | None = None, every: bool = False
    ) -> list[DocumentInfo]:
        """Documents in path order: shared ones (``shared=True``), an agent's own
        (``agent``), both (``agent`` and ``shared=True``), or all (``every``)."""
        ...

    def document(self, document_id: str) -> DocumentInfo | None: ...

    def document_files(self, agent: str | None) -> dict[str, str]:
        """The owner's (``agent``; None: shared) documents added from files: each file
        (resolved, the ``source_file`` of its metadata) -> the document's path."""
        ...

    def fragments(self, document_id: str) -> list[FragmentInfo]:
        """A document's fragments, in order."""
        ...

    def fragments_by_keys(self, mkeys: Sequence[int]) -> dict[int, FragmentInfo]: ...

    def stored_fragments(self, document_ids: Sequence[str]) -> dict[str, dict[str, int]]:
        """``document id -> {fragment id: mkey}`` of stored fragments."""
        ...

    def write_documents(self, documents: Sequence[NewDocument]) -> None:
        """Store (or replace) documents and where their fragments sit; called inside the
        transaction that writes the fragments' messages."""
        ...

    def forget_documents(self, document_ids: Sequence[str]) -> None:
        """Delete document rows (their fragments' messages go in the same transaction)."""
        ...

    def drop_empty_conversations(self) -> None:
        """Delete the conversations of documents that are gone (after their transaction)."""
        ...
