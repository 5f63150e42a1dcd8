"""Document knowledge in an index: :class:`KnowledgeBase` (``index.knowledge``).

Documents (files, or plain strings) are added as shared knowledge or as one agent's. Each
is cut into fragments of at most 512 tokens with 20 tokens of overlap
(:func:`~structrag.knowledge.chunking.chunk`), and every fragment is a memory of the
``knowledge`` table: a message of its document's conversation (``doc:<document id>``),
extracted like any message (entities, actions and topics with spans), in the text index
and in the vectors. So questions draw on documents and conversations in one budget.

* **Ids.** A document's id is deterministic from its path relative to the folder it was
  added from (or the path as given, for a file), the shared flag and the agent; inline
  text's from its content. A fragment's id is ``<document id>-chunk-<n>``. A file is known
  by where it is on disk: added again by another path it is the same document, and
  another file whose path would give an id that is taken (``a/README.md`` after
  ``b/README.md``, both ``README.md`` in their folders) takes its path from the current
  folder instead.
* **Layout.** A folder holding ``shared/`` (or called ``knowledge``) is a knowledge root,
  as ElizaOS lays it out: ``shared/`` is shared, every other folder in it is the knowledge
  of the agent it is named after.
* **Changes.** Adding an unchanged document changes nothing. A changed one replaces its
  fragments in the same transaction as the rest of its owner's documents: fragments whose
  text is unchanged keep their knowledge, edited ones are extracted again, fragments that
  are gone are deleted with everything derived from them. A file renamed with the same
  bytes (its old file gone) is moved: the document under its old path is replaced by one
  under the new, in the same transaction (never both, never neither). A folder's other
  documents whose files are gone are reported (``AddReport.gone``) and kept.
* **Leftovers.** A document's conversation is dropped after the transaction that deleted
  its fragments (DuckDB will not delete it in the same one); one left empty by a write
  that was killed in between is swept by the next ``add``, ``remove`` or ``clear``.
* **Scope.** Search reads shared knowledge and the asking agent's own, never another
  agent's.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import itertools
import os
import re
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from structrag import faults
from structrag.errors import (
    InputError,
    MemoryInputError,
    NotFoundError,
    check_count,
    shown_path,
)
from structrag.importers.base import ParsedSource
from structrag.ingest import Ingestor, ProgressSink
from structrag.knowledge.chunking import Fragment, chunk
from structrag.knowledge.document import Document
from structrag.knowledge.records import (
    SOURCE_FILE,
    AddReport,
    DocumentInfo,
    FragmentInfo,
    KnowledgeHit,
    KnowledgeRows,
    NewDocument,
    Span,
    fragment_label,
)
from structrag.models import Conversation, Message
from structrag.naming import document_conversation
from structrag.query.context import TokenCounter
from structrag.query.engine import QueryEngine
from structrag.query.limits import check_search
from structrag.query.modes import SEARCH_MODES, rank
from structrag.store.protocols import KnowledgeStore, MemoryInfo, Scope, StoreTransaction

#: What ElizaOS cuts knowledge into: fragments of 512 tokens, 20 of them shared with the
#: next fragment.
FRAGMENT_TOKENS = 512
FRAGMENT_OVERLAP = 20
#: Matches returned by default.
DEFAULT_COUNT = 5
#: The name of the shared part of a knowledge folder.
SHARED_FOLDER = "shared"
INLINE_FORMAT = "inline"
_WORD = re.compile(r"\w+")
#: The parts of an identifier that the index holds as terms (``structrag.analysis``).
_PART = re.compile(r"[^\W_]{2,}")
#: A string ending like this names a document file, missing or not.
_DOCUMENT_NAME = re.compile(r"\.(pdf|md|markdown|txt|text|docx|html?|json)$", re.I)


@dataclass(frozen=True)
class Owner:
    """Whose knowledge a document is: shared (``agent`` None) or one agent's."""

    agent: str | None

    @property
    def shared(self) -> bool:
        return self.agent is None

    def key(self) -> str:
        return "shared" if self.agent is None else f"agent:{self.agent}"


@dataclass(frozen=True)
class _Item:
    """One document to add: a file (with the path its id comes from) or inline text."""

    owner: Owner
    label: str  # the path relative to its root, or "inline"
    file: Path | None = None
    text: str | None = None

    @cached_property
    def source_file(self) -> str | None:
        """Where its file is on disk (resolved, as :func:`shown_path` writes it: a name
        that is not UTF-8 has ``\\xe9`` for its odd bytes); None for inline text."""
        return shown_path(self.file.resolve()) if self.file is not None else None

    @property
    def document_id(self) -> str:
        if self.text is not None:
            basis = f"{self.owner.key()}\0inline\0{hashlib.sha256(self.text.encode()).hexdigest()}"
        else:
            basis = f"{self.owner.key()}\0{self.label}"
        return "doc-" + hashlib.sha256(basis.encode("utf-8")).hexdigest()[:16]


@dataclass
class KnowledgeParts:
    """What the knowledge base works with (``Index.knowledge`` wires it)."""

    store: KnowledgeStore
    rows: KnowledgeRows
    #: An ingestor whose new messages are knowledge memories of the given owner.
    ingestor: Callable[[MemoryInfo], Ingestor]
    engine: QueryEngine
    #: Reads one document file; the encoding is for text formats.
    load: Callable[[Path, str], Document]
    #: Files to load under paths, and what was passed over (path, reason).
    walk: Callable[[Sequence[Path]], tuple[list[Path], list[tuple[Path, str]]]]
    counter: TokenCounter
    writing: Callable[[str], AbstractContextManager[None]]
    max_tokens: int = FRAGMENT_TOKENS
    overlap: int = FRAGMENT_OVERLAP


@dataclass
class _Planned:
    """A loaded document, its fragments and what changes."""

    item: _Item
    document: Document
    fragments: list[Fragment]
    status: str  # added, updated, unchanged, moved
    stored: dict[str, int] = field(default_factory=dict)  # fragment id -> mkey
    #: The stored document this one's file was before it moved (renamed, same bytes).
    moved_from: DocumentInfo | None = None


class KnowledgeBase:
    """Documents as knowledge of an index (see the module docstring)."""

    def __init__(self, parts: KnowledgeParts) -> None:
        self.parts = parts

    @property
    def store(self) -> KnowledgeStore:
        return self.parts.store

    # -- adding ---------------------------------------------------------------------------

    def add(
        self,
        items: str | Path | Sequence[str | Path],
        *,
        agent: str | None = None,
        shared: bool = False,
        metadata: dict[str, Any] | None = None,
        progress: ProgressSink | None = None,
        dry_run: bool = False,
        encoding: str = "utf-8",
    ) -> AddReport:
        """Add files, folders (walked recursively) and plain strings (inline knowledge).

        Whose knowledge: ``agent``'s, or shared (``shared=True``, and the default when
        neither is given); a knowledge root folder (with ``shared/`` inside) says it
        itself, file by file, when neither is given. A file that cannot be read (unknown
        type, empty, encrypted or scanned PDF) is reported in ``skipped`` and the rest
        goes on; a missing one, or a string that looks like a path (one word, a URL, a
        line ending in a document's extension) and names nothing, is an error.
        A file's damaged content (a corrupt stream or zip entry) is skipped the same way;
        a PDF page that cannot be read costs that page, which ``warnings`` names.
        ``dry_run`` reports documents, fragments and tokens and writes nothing.
        ``encoding`` is the fallback for text files (Markdown, text, JSON, HTML) whose
        bytes are not valid UTF-8: each is read as UTF-8 (with or without a byte order
        mark) first, an HTML page next in the charset it declares, and else in
        ``encoding``; PDF and Word files carry their own.
        """
        started = time.perf_counter()
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise MemoryInputError(
                f"unknown encoding {encoding!r}",
                hint="name a Python codec, for example utf-8, cp1252 or latin-1",
            ) from None
        if agent is not None and shared:
            raise MemoryInputError(
                "knowledge is either shared or one agent's", hint="pass agent or shared"
            )
        if agent is not None and not agent.strip():
            raise MemoryInputError("the agent name is empty")
        report = AddReport(dry_run=dry_run)
        folders: list[tuple[Owner, Path]] = []
        planned = self._plan(
            self._items(items, agent, shared, report, folders), report, encoding, folders
        )
        report.tokens = sum(f.tokens for p in planned for f in p.fragments)
        report.pages = sum(len(p.document.pages) for p in planned)
        for p in planned:
            report.documents.append(
                {
                    "document_id": p.item.document_id,
                    "path": p.item.label,
                    "agent": p.item.owner.agent,
                    "shared": p.item.owner.shared,
                    "status": p.status,
                    "fragments": len(p.fragments),
                    "tokens": sum(f.tokens for f in p.fragments),
                    **(
                        {
                            "moved_from": {
                                "document_id": p.moved_from.document_id,
                                "path": p.moved_from.path,
                            }
                        }
                        if p.moved_from is not None
                        else {}
                    ),
                }
            )
        report.documents_added = sum(p.status == "added" for p in planned)
        report.documents_updated = sum(p.status in ("updated", "moved") for p in planned)
        report.documents_unchanged = sum(p.status == "unchanged" for p in planned)
        # An unchanged document's fragments are unchanged too (a changed one's are
        # counted as they are written).
        report.fragments_unchanged = sum(
            len(p.fragments) for p in planned if p.status == "unchanged"
        )
        if dry_run:
            self._count_fragments(planned, report)
        else:
            written: list[str] = []  # the documents of the owners committed, for an error
            with self.parts.writing("knowledge add"):
                # the shared documents first, then each agent's (as the README says)
                owners = sorted({p.item.owner for p in planned}, key=lambda o: (o.agent or "",))
                try:
                    for owner in owners:
                        todo = [
                            p for p in planned if p.item.owner == owner and p.status != "unchanged"
                        ]
                        if todo:
                            self._write(owner, todo, metadata, report, progress)
                            written.extend(
                                p.item.label
                                if p.item.file is None
                                else shown_path(str(p.item.file))
                                for p in todo
                            )
                except BaseException as exc:
                    # Ctrl-C, SIGTERM or an error: the CLI names what is committed
                    with contextlib.suppress(AttributeError, TypeError):
                        exc.written = written  # type: ignore[attr-defined]
                    raise
                # A moved file's document under its old path went in its owner's
                # transaction (with the new one); its conversation goes now, with any
                # that an earlier write killed halfway left.
                self._sweep()
        report.seconds = time.perf_counter() - started
        return report

    def _count_fragments(self, planned: list[_Planned], report: AddReport) -> None:
        """A dry run's fragment counts: what writing ``planned`` would add, update, keep
        and remove (its ``_write`` counts them as it writes)."""
        changed = [p for p in planned if p.status != "unchanged"]
        conversations = {document_conversation(p.item.document_id) for p in changed}
        stored = self.parts.store.message_hashes(sorted(conversations))
        for p in changed:
            fragments = _fragment_messages(p)
            for message in fragments:
                found = stored.get((message.conversation, message.id))
                if found is None:
                    report.fragments_added += 1
                elif found[1] != message.content_hash():
                    report.fragments_updated += 1
                else:
                    report.fragments_unchanged += 1
            kept = {m.id for m in fragments}
            report.fragments_removed += sum(fid not in kept for fid in p.stored)
        moved = sorted({p.moved_from.document_id for p in planned if p.moved_from is not None})
        if moved:
            old = self.parts.rows.stored_fragments(moved)
            report.fragments_removed += sum(len(fragments) for fragments in old.values())

    def _items(
        self,
        items: str | Path | Sequence[str | Path],
        agent: str | None,
        shared: bool,
        report: AddReport,
        folders: list[tuple[Owner, Path]],
    ) -> list[_Item]:
        given: Sequence[str | Path] = [items] if isinstance(items, str | Path) else items
        if not given:
            raise MemoryInputError("nothing to add", hint="pass files, folders or text")
        chosen = Owner(agent.strip()) if agent is not None else Owner(None) if shared else None
        out: list[_Item] = []
        for entry in given:
            path = _as_path(entry)
            if path is None:
                text = str(entry)
                if not text.strip():
                    raise MemoryInputError("a knowledge item needs text")
                out.append(_Item(chosen or Owner(None), INLINE_FORMAT, text=text))
                continue
            if path.is_dir():
                out.extend(self._folder(path, chosen, report, folders))
            else:
                label = shown_path(os.path.normpath(str(entry)).replace(os.sep, "/"))
                out.append(_Item(chosen or Owner(None), label, file=path))
        return out

    def _folder(
        self,
        root: Path,
        chosen: Owner | None,
        report: AddReport,
        folders: list[tuple[Owner, Path]],
    ) -> list[_Item]:
        """The documents in a folder; a knowledge root's owners come from its layout."""
        if chosen is None and _is_knowledge_root(root):
            out: list[_Item] = []
            for child in sorted(root.iterdir()):
                if child.name.startswith("."):
                    continue
                if not child.is_dir():
                    report.skipped.append(
                        {
                            "path": shown_path(child),
                            "reason": "a file at the top of a knowledge folder belongs to no "
                            "one: move it into shared/ or an agent's folder",
                        }
                    )
                    continue
                owner = Owner(None if child.name == SHARED_FOLDER else child.name)
                out.extend(self._walked(child, owner, report, folders))
            return out
        return self._walked(root, chosen or Owner(None), report, folders)

    def _walked(
        self, root: Path, owner: Owner, report: AddReport, folders: list[tuple[Owner, Path]]
    ) -> list[_Item]:
        folders.append((owner, root.resolve()))
        files, skipped = self.parts.walk([root])
        for path, reason in skipped:
            report.skipped.append({"path": shown_path(path), "reason": reason})
        # A file name that is not UTF-8 (``caf\xe9.txt`` from an old archive) is kept
        # under the name errors show it by: ids, citations and the store take text only.
        return [
            _Item(owner, shown_path(path.relative_to(root).as_posix()), file=path)
            for path in files
            if path.is_relative_to(root)
        ]

    def _plan(
        self,
        items: list[_Item],
        report: AddReport,
        encoding: str,
        folders: Sequence[tuple[Owner, Path]] = (),
    ) -> list[_Planned]:
        by_id: dict[str, _Item] = {}
        files: set[tuple[str, str]] = set()  # (owner, resolved file) given so far
        added_before = {
            owner.key(): self.parts.rows.document_files(owner.agent)
            for owner in {item.owner for item in items if item.file is not None}
        }
        held = {  # owner -> path -> the resolved file of the stored document
            owner: {label: file for file, label in known.items()}
            for owner, known in added_before.items()
        }
        for item in (_as_added_before(item, added_before) for item in items):
            file = (item.owner.key(), item.source_file) if item.source_file else None
            if file not in files:
                item = _distinct(item, by_id, held.get(item.owner.key(), {}))
            if item.document_id in by_id or file in files:
                report.warnings.append(f"{item.label}: given twice, added once")
                continue
            by_id[item.document_id] = item
            if file is not None:
                files.add(file)
        stored = self.parts.rows.stored_fragments(list(by_id))
        # The owners' stored documents whose files are gone: a file of this add with the
        # same bytes is one of them moved; the others, inside a folder of this add, are
        # reported.
        owners = {item.owner for item in by_id.values() if item.file is not None}
        owners.update(owner for owner, _ in folders)
        orphans = {
            owner: [
                d
                for d in self._owned(owner)
                if d.document_id not in by_id
                and d.metadata.get(SOURCE_FILE)
                and not _on_disk(str(d.metadata[SOURCE_FILE])).exists()
            ]
            for owner in owners
        }
        planned: list[_Planned] = []
        for document_id, item in by_id.items():
            try:
                document = self._load(item, encoding)
            except InputError as exc:
                reason = _reason(exc)
                if self.parts.rows.document(document_id) is not None:
                    reason += (
                        f"; the indexed copy ({document_id}) is kept: fix the file and add "
                        f"it again, or `structrag knowledge remove {document_id}`"
                    )
                where = shown_path(item.file) if item.file is not None else item.label
                report.skipped.append({"path": where, "reason": reason})
                continue
            report.warnings.extend(f"{item.label}: {warning}" for warning in document.warnings)
            fragments = (
                chunk(
                    document,
                    max_tokens=self.parts.max_tokens,
                    overlap=self.parts.overlap,
                    counter=self.parts.counter,
                )
                if document.text.strip()
                else []
            )
            known = self.parts.rows.document(document_id)
            # Unchanged: the same bytes from the same file, and every fragment stored (a
            # fragment deleted some other way is written again; a moved file's new place
            # is recorded, so another file can no longer take it for its own).
            moved_from = None
            if known is None:
                status = "added"
                moved_from = _moved(item, document.sha256, orphans.get(item.owner, []))
                if moved_from is not None:
                    status = "moved"
                    orphans[item.owner].remove(moved_from)
                    report.warnings.append(
                        f"{item.label}: moved from {moved_from.path} (the same bytes): "
                        f"document {moved_from.document_id} is replaced by {document_id}"
                    )
            elif (
                known.sha256 == document.sha256
                and known.metadata.get(SOURCE_FILE) == item.source_file
                and set(stored[document_id]) == {_fragment_id(document_id, f) for f in fragments}
            ):
                status = "unchanged"
            else:
                status = "updated"
            planned.append(
                _Planned(item, document, fragments, status, stored[document_id], moved_from)
            )
        for owner, root in folders:
            for d in orphans.get(owner, []):
                was = Path(str(d.metadata[SOURCE_FILE]))
                if was.is_relative_to(shown_path(root)) and not any(
                    g["document_id"] == d.document_id for g in report.gone
                ):
                    report.gone.append(
                        {"document_id": d.document_id, "path": d.path, "file": str(was)}
                    )
        return planned

    def _owned(self, owner: Owner) -> list[DocumentInfo]:
        """``owner``'s own documents (the shared ones, or the agent's)."""
        found = self.parts.rows.documents(agent=owner.agent, shared=owner.shared)
        return [d for d in found if d.shared == owner.shared and d.agent == owner.agent]

    def _load(self, item: _Item, encoding: str) -> Document:
        if item.file is not None:
            return self.parts.load(item.file, encoding)
        assert item.text is not None
        digest = hashlib.sha256(item.text.encode("utf-8")).hexdigest()
        first = " ".join(item.text.split())[:60]
        return Document(
            path=INLINE_FORMAT, format="text", text=item.text, title=first, sha256=digest
        )

    def _write(
        self,
        owner: Owner,
        planned: list[_Planned],
        metadata: dict[str, Any] | None,
        report: AddReport,
        progress: ProgressSink | None,
    ) -> None:
        """One transaction for one owner's documents: fragments as knowledge memories,
        the vanished ones deleted, the documents' rows written with them, and a moved
        file's document under its old path deleted (fragments and rows) with them."""
        conversations: list[Conversation] = []
        messages: list[Message] = []
        gone: list[int] = []
        new_documents: list[NewDocument] = []
        moved = sorted({p.moved_from.document_id for p in planned if p.moved_from is not None})
        if moved:
            old = self.parts.rows.stored_fragments(moved)
            keys = [mkey for fragments in old.values() for mkey in fragments.values()]
            gone.extend(keys)
            report.fragments_removed += len(keys)
        for p in planned:
            document_id = p.item.document_id
            conversation = document_conversation(document_id)
            conversations.append(Conversation(id=conversation, name=p.item.label))
            fragments = _fragment_messages(p)
            messages.extend(fragments)
            kept = {m.id for m in fragments}
            vanished = [mkey for fid, mkey in p.stored.items() if fid not in kept]
            gone.extend(vanished)
            report.fragments_removed += len(vanished)
            new_documents.append(
                NewDocument(
                    document_id=document_id,
                    conversation=conversation,
                    agent=owner.agent,
                    shared=owner.shared,
                    path=p.item.label,
                    title=p.document.title,
                    format=INLINE_FORMAT if p.item.text is not None else p.document.format,
                    sha256=p.document.sha256,
                    chars=len(p.document.text),
                    pages=len(p.document.pages) or None,
                    metadata={
                        **(metadata or {}),
                        **({SOURCE_FILE: p.item.source_file} if p.item.source_file else {}),
                    },
                    fragments=[
                        (
                            _fragment_id(document_id, f),
                            f.index,
                            f.start,
                            f.end,
                            f.tokens,
                            f.page,
                            f.last_page,
                            f.section,
                        )
                        for f in p.fragments
                    ],
                )
            )
        rows = self.parts.rows

        def documents(transaction: StoreTransaction) -> None:
            rows.write_documents(new_documents)
            if moved:
                rows.forget_documents(moved)

        # The ingest log's path: the files' absolute paths (the first three).
        files = [p.item.source_file or "inline text" for p in planned]
        source = ParsedSource(
            path=", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else ""),
            format="knowledge",
            conversations=conversations,
            messages=messages,
            locations=[m.id for m in messages],
            sha256=hashlib.sha256(
                "\0".join(p.document.sha256 for p in planned).encode()
            ).hexdigest(),
        )
        ingestor = self.parts.ingestor(MemoryInfo(table="knowledge", agent=owner.agent))
        done = ingestor.ingest_source(
            source, progress=progress, force=False, delete=gone, before_commit=documents
        )
        report.fragments_added += done.messages_added
        report.fragments_updated += done.messages_updated
        report.fragments_unchanged += done.messages_unchanged
        report.refs_added += done.refs_added
        report.warnings.extend(done.warnings)

    # -- reading --------------------------------------------------------------------------

    def documents(self, *, agent: str | None = None, every: bool = False) -> list[DocumentInfo]:
        """Shared documents and ``agent``'s own (all of them with ``every``)."""
        return self.parts.rows.documents(agent=agent, shared=True, every=every)

    def show(self, document_id: str) -> tuple[DocumentInfo, list[FragmentInfo]]:
        """A document and its fragments, in order."""
        found = self.parts.rows.document(document_id)
        if found is None:
            raise NotFoundError(
                f"no document {document_id!r}", hint="list them with `structrag knowledge list`"
            )
        return found, self.parts.rows.fragments(document_id)

    def search(
        self,
        query: str,
        *,
        agent: str | None = None,
        count: int = DEFAULT_COUNT,
        threshold: float | None = None,
        mode: str = "structured",
    ) -> list[KnowledgeHit]:
        """Fragments of shared knowledge and of ``agent``'s own that answer ``query``,
        best first (never another agent's). ``threshold`` keeps hits scoring at least
        that much (for ``vector``, a cosine similarity)."""
        if mode not in SEARCH_MODES:
            raise MemoryInputError(
                f"unknown search mode {mode!r}", hint=f"choose one of: {', '.join(SEARCH_MODES)}"
            )
        check_search(query, MemoryInputError, "how do I install it")
        check_count("count", count, MemoryInputError)
        with self.store.reading():
            scope = Scope(tables=("knowledge",), agent=agent, shared=True)
            if not self.parts.rows.documents(agent=agent, shared=True):
                return []
            ranked = rank(self.parts.engine, query, scope, mode)
            wanted = list(
                itertools.islice(
                    ((k, s) for k, s in ranked if threshold is None or s >= threshold), count
                )
            )
            fragments = self.parts.rows.fragments_by_keys([k for k, _ in wanted])
            documents = {d.document_id: d for d in self.documents(agent=agent)}
        words = _query_words(query)
        hits: list[KnowledgeHit] = []
        for mkey, score in wanted:
            fragment = fragments.get(mkey)
            document = documents.get(fragment.document_id) if fragment else None
            if fragment is None or document is None:
                continue
            hits.append(
                KnowledgeHit(
                    fragment=fragment,
                    path=document.path,
                    title=document.title,
                    agent=document.agent,
                    shared=document.shared,
                    score=score,
                    mode=mode,
                    spans=_spans(fragment.text, words),
                )
            )
        return hits

    # -- removing -------------------------------------------------------------------------

    def remove(self, document_id: str) -> int:
        """Delete a document, its fragments and everything extracted from them; returns
        how many fragments went."""
        with self.parts.writing("knowledge remove"):
            if self.parts.rows.document(document_id) is None:
                # A remove killed after its transaction left the document's conversation
                # (empty): removing it again finishes that.
                left = document_conversation(document_id)
                if any(c.id == left for c in self.store.conversations()):
                    self._sweep()
                    return 0
                raise NotFoundError(
                    f"no document {document_id!r}",
                    hint="list them with `structrag knowledge list`",
                )
            return self._forget([document_id])

    def clear(self, *, shared: bool = False, agent: str | None = None) -> int:
        """Delete the shared documents (``shared``), an agent's (``agent``), or both;
        returns how many documents went."""
        if not shared and agent is None:
            raise MemoryInputError(
                "say what to clear", hint="pass shared=True, agent=NAME, or both"
            )
        with self.parts.writing("knowledge clear"):
            ids = [
                d.document_id
                for d in self.parts.rows.documents(agent=agent, shared=shared)
                if (shared and d.shared) or (agent is not None and d.agent == agent)
            ]
            self._forget(ids)
        return len(ids)

    def _forget(self, document_ids: list[str]) -> int:
        """Delete documents (one transaction), then the conversations of every document
        that is gone, these and any an earlier write killed halfway left."""
        if not document_ids:
            self._sweep()
            return 0
        stored = self.parts.rows.stored_fragments(document_ids)
        keys = [mkey for fragments in stored.values() for mkey in fragments.values()]
        rows = self.parts.rows

        def forget(transaction: StoreTransaction) -> None:
            rows.forget_documents(document_ids)

        ingestor = self.parts.ingestor(MemoryInfo(table="knowledge"))
        ingestor.write([], [], [], delete=keys, before_commit=forget)
        faults.point("knowledge-conversations")
        self._sweep()
        return len(keys)

    def _sweep(self) -> None:
        """Drop the conversations of documents that are gone: a document's goes after
        the transaction that deleted its fragments (DuckDB refuses to delete a row whose
        referencing rows went in the same transaction), so a write killed in between
        leaves it, empty, for the next knowledge write to drop."""
        self.parts.rows.drop_empty_conversations()


def _as_path(entry: str | Path) -> Path | None:
    """A path to read, or None for inline text. A ``Path`` is always a path; a string is
    one when it names an existing file or folder, or looks like a path: one word (a
    mistyped folder), a URL, or a line ending in a document's extension (``my notes.txt``).
    Then a missing one is an error, not a document whose text is its name."""
    if isinstance(entry, Path):
        if not entry.exists():
            raise InputError(entry, "no such file or folder", hint="check the path")
        return entry
    text = entry.strip()
    if not text or "\n" in text or len(text) > 4096:
        return None  # blank is no path: Path("") would be the current folder
    candidate = Path(text)
    try:
        if candidate.exists():
            return candidate
    except OSError:
        return None  # too long a name for a file: text
    one_word = len(text.split()) == 1
    if one_word and "://" in text:
        raise InputError(text, "URLs are not fetched", hint="download the page and add the file")
    if one_word:
        raise InputError(
            candidate,
            "no such file or folder",
            hint="check the path; text to add as knowledge is a sentence, not one word",
        )
    if len(text) <= 255 and _DOCUMENT_NAME.search(text):
        raise InputError(
            candidate,
            "no such file",
            hint="check the path; to add text that ends like a file name, end it with a full stop",
        )
    return None


def _as_added_before(item: _Item, added_before: dict[str, dict[str, str]]) -> _Item:
    """``item`` under the path its file was added by before, if it was (``added_before``:
    owner -> resolved file -> path): a document's id comes from its path as given, so one
    file given on its own and then within its folder would be two documents. Files are
    known by where they are on disk (:data:`SOURCE_FILE` in a document's metadata)."""
    if item.source_file is None:
        return item
    label = added_before[item.owner.key()].get(item.source_file)
    return item if label is None or label == item.label else replace(item, label=label)


def _distinct(item: _Item, by_id: dict[str, _Item], held: dict[str, str]) -> _Item:
    """``item``, under its path from the current folder (else its absolute path) when its
    id is another file's: one given earlier in this add (``by_id``), or a stored document's
    whose file is still there (``held``: path -> resolved file). Two files at the same
    path inside the folders they were added from are two documents; a stored document
    whose file is gone is this one moved, and keeps its id (it is updated)."""
    if item.source_file is None or not _taken(item, by_id, held):
        return item
    resolved = Path(item.source_file)
    try:
        here = Path(shown_path(Path.cwd().resolve()))
        relative: str | None = resolved.relative_to(here).as_posix()
    except (OSError, ValueError):  # not under the current folder (or there is none)
        relative = None
    for label in (relative, resolved.as_posix()):
        if label is not None and label != item.label:
            item = replace(item, label=label)
            if not _taken(item, by_id, held):
                break
    return item


def _taken(item: _Item, by_id: dict[str, _Item], held: dict[str, str]) -> bool:
    """Whether ``item``'s id is another file's (see :func:`_distinct`)."""
    earlier = by_id.get(item.document_id)
    if earlier is not None:
        return earlier.source_file != item.source_file
    stored = held.get(item.label)
    return stored is not None and stored != item.source_file and _on_disk(stored).exists()


_ESCAPED_BYTE = re.compile(r"\\x([89a-fA-F][0-9a-fA-F])")


def _on_disk(stored: str) -> Path:
    """The file a stored ``source_file`` names: one whose name is not UTF-8 is stored as
    :func:`shown_path` writes it (``caf\\xe9.txt``), and is found again by its bytes."""
    path = Path(stored)
    if "\\x" not in stored or path.exists():
        return path
    return Path(_ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), stored))


def _reason(exc: InputError) -> str:
    """Why a file was skipped: the error with its line and column (the path is said
    apart), and what to do."""
    where = ""
    if exc.line is not None:
        where = f"line {exc.line}" + (f", column {exc.column}" if exc.column is not None else "")
        where += ": "
    return where + exc.detail + (f" ({exc.hint})" if exc.hint else "")


def _moved(item: _Item, sha256: str, orphans: list[DocumentInfo]) -> DocumentInfo | None:
    """The stored document ``item``'s file was before it moved: one of the owner's whose
    file is gone (``orphans``) with the very same bytes; None if there is none."""
    if item.file is None:
        return None
    same = [d for d in orphans if d.sha256 == sha256]
    # Of several, the one in the same folder, else the one with the same name.
    folder = str(Path(item.source_file or "").parent)
    same.sort(
        key=lambda d: (
            str(Path(str(d.metadata[SOURCE_FILE])).parent) != folder,
            Path(d.path).name != item.file.name if item.file else True,
            d.path,
        )
    )
    return same[0] if same else None


def _fragment_messages(p: _Planned) -> list[Message]:
    """A planned document's fragments as the messages of its conversation."""
    document_id = p.item.document_id
    conversation = document_conversation(document_id)
    return [
        Message(
            conversation=conversation,
            id=_fragment_id(document_id, fragment),
            ordinal=fragment.index,
            text=fragment.text,
            metadata={
                "label": fragment_label(
                    p.item.label, fragment.page, fragment.section, last_page=fragment.last_page
                ),
                "document": document_id,
            },
        )
        for fragment in p.fragments
    ]


def _fragment_id(document_id: str, fragment: Fragment) -> str:
    return f"{document_id}-chunk-{fragment.index}"


def _is_knowledge_root(folder: Path) -> bool:
    return (folder / SHARED_FOLDER).is_dir() or folder.name == "knowledge"


def _query_words(query: str) -> set[str]:
    from structrag.analysis import query_stopwords, stem_words

    stop = query_stopwords()
    return set(stem_words([w for w in _WORD.findall(query.lower()) if w not in stop]))


def _spans(text: str, words: set[str]) -> tuple[Span, ...]:
    """The words of a fragment that match the query's (by stem), and the parts of an
    identifier that do when it does not as a whole (``retries`` in ``max_retries``)."""
    from structrag.analysis import stem_words

    if not words:
        return ()
    found: list[tuple[int, int, str]] = []
    for m in _WORD.finditer(text):
        found.append((m.start(), m.end(), m.group()))
        if "_" in m.group():
            parts = _PART.finditer(text, m.start(), m.end())
            found.extend((p.start(), p.end(), p.group()) for p in parts)
    stems = stem_words([word.lower() for _, _, word in found])
    spans: list[Span] = []
    for (start, end, word), stem in zip(found, stems, strict=True):
        if stem in words and (not spans or start >= spans[-1].end):
            spans.append(Span(start, end, word))
    return tuple(spans)
