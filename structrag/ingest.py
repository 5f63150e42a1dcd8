"""The ingest pipeline: files -> checked messages -> knowledge -> store + text index.

Guarantees:

* **Nothing is written until every input has parsed and checked.** A malformed file
  raises :class:`~structrag.errors.InputError` naming it, and the index is untouched.
* **Incremental.** A file whose bytes and settings were ingested before is skipped; in a
  changed file only new or edited messages are extracted (messages are matched by
  conversation and id, and compared by a content hash).
* **Atomic per source.** Each source is written to the store in one transaction; the
  text index is derived from the store and carries the store generation it reflects, so
  a process killed between the two commits leaves a mismatch that the next open repairs
  by rebuilding the text index from the store.
* **Failures are kept, not fatal.** A message whose extraction failed (an LLM request that
  failed after retries) is stored with the knowledge it has and a failure row, in the same
  transaction; :meth:`Ingestor.retry_failed` re-extracts exactly those messages.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from structrag.analysis import stems, term_key
from structrag.errors import InputError
from structrag.extract.base import (
    METADATA_EXTRACTOR,
    ROLE_FACET_NAMES,
    Estimates,
    Extractor,
    ReportsUsage,
    RetriesFailures,
    outcome_of,
)
from structrag.importers import LoadOptions, ParsedSource, load_source
from structrag.models import Action, Conversation, Entity, Message, SemanticRef, Tag, Topic
from structrag.store.protocols import (
    ExtractionRecord,
    IndexedMessage,
    KnowledgeStore,
    SourceRecord,
    StoredMessage,
    StoreTransaction,
    TextIndex,
    TextIndexWriter,
)


class ProgressSink(Protocol):
    """Receives progress from long work (the CLI draws a bar)."""

    def start(self, total: int, label: str) -> None: ...

    def advance(self, n: int) -> None: ...

    def finish(self) -> None: ...


@dataclass
class IngestReport:
    """What one ingested source did."""

    path: str
    format: str
    conversations: list[str]
    messages_added: int = 0
    messages_updated: int = 0
    messages_unchanged: int = 0
    refs_added: int = 0
    messages_failed: int = 0
    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    llm: dict[str, int | float] | None = None  # LLM work: calls, tokens, failures ...

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "conversations": self.conversations,
            "messages_added": self.messages_added,
            "messages_updated": self.messages_updated,
            "messages_unchanged": self.messages_unchanged,
            "semantic_refs_added": self.refs_added,
            "messages_failed": self.messages_failed,
            "skipped": self.skipped,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
            "llm": self.llm,
        }


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def ref_terms(ref: SemanticRef) -> list[str]:
    """The index terms of one semantic ref (what a term lookup can find it by)."""
    return _knowledge_terms(ref.knowledge)


@lru_cache(maxsize=50_000)
def _knowledge_terms(k: Entity | Action | Topic | Tag) -> list[str]:
    parts: list[str] = []
    if isinstance(k, Entity):
        parts.append(k.name)
        parts.extend(k.types)
        for f in k.facets:
            parts.append(f.value_text())
            if f.name in ROLE_FACET_NAMES:
                # "What is Kevin Scott's job?" asks by the facet's name, not its value.
                parts.append(f.name)
    elif isinstance(k, Action):
        parts.extend(k.verbs)
        parts.extend(p for p in (k.subject, k.object, k.indirect_object) if p)
        parts.extend(f.value_text() for f in k.params)
    elif isinstance(k, Topic | Tag):
        parts.append(k.text)
    return list(dict.fromkeys(stems(" ".join(parts))))


def ref_kinds(refs: Sequence[SemanticRef]) -> str:
    """One character per ref: e/a/t/g for knowledge from the text, E/A for metadata."""
    codes = []
    for ref in refs:
        code = "g" if ref.kind == "tag" else ref.kind[0]
        codes.append(code.upper() if ref.extractor == METADATA_EXTRACTOR else code)
    return "".join(codes)


def indexed_message(stored: StoredMessage, refs: Sequence[SemanticRef]) -> IndexedMessage:
    """The text-index document of one message."""
    return IndexedMessage(
        mkey=stored.mkey,
        conversation=stored.message.conversation,
        speaker=stored.message.speaker,
        first_ref=stored.first_ref,
        terms=stems(stored.message.text),
        knowledge=[ref_terms(r) for r in refs],
    )


def gather_aliases(
    messages: Iterable[Message], refs: Iterable[SemanticRef]
) -> list[tuple[str, str, str, float, str]]:
    """Aliases seen at extraction: first names <-> full names of people, and short forms
    of a speaker's name used in the text ("Mel" for "Melanie")."""
    speakers: dict[str, set[str]] = {}
    for m in messages:
        for person in (m.speaker, *m.recipients):
            if person:
                speakers.setdefault(m.conversation, set()).add(person)
    out: dict[tuple[str, str, str], tuple[float, str]] = {}
    for conv, people in speakers.items():
        for person in people:
            parts = person.split()
            if len(parts) > 1:
                out[(conv, term_key(parts[0]), term_key(person))] = (0.9, "first-name")
                out[(conv, term_key(person), term_key(parts[0]))] = (0.9, "first-name")
    for ref in refs:
        k = ref.knowledge
        if not isinstance(k, Entity) or " " in k.name or len(k.name) < 3:
            continue
        low = k.name.lower()
        for person in speakers.get(ref.conversation, ()):
            first = person.split()[0].lower()
            if first != low and first.startswith(low):
                key = (ref.conversation, term_key(k.name), term_key(person))
                out[key] = (0.8, "short-name")
    return [(c, t, r, w, s) for (c, t, r), (w, s) in sorted(out.items())]


#: Messages per store insert while extraction runs (inserts overlap with extraction).
CHUNK_MESSAGES = 500


@dataclass
class _Chunk:
    new: list[StoredMessage] = field(default_factory=list)
    changed: list[StoredMessage] = field(default_factory=list)
    refs: list[tuple[int, int, SemanticRef]] = field(default_factory=list)
    outcomes: list[ExtractionRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.new) + len(self.changed)


class Ingestor:
    """Runs ingests against a store and a text index with one extractor."""

    def __init__(
        self,
        store: KnowledgeStore,
        text_index: TextIndex,
        extractor: Extractor,
        *,
        embedder: Callable[[list[StoredMessage]], list[tuple[int, str, list[float]]]] | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        self.store = store
        self.text_index = text_index
        self.extractor = extractor
        self.embedder = embedder
        #: Index settings, written in each source's transaction (so a failed first
        #: ingest leaves none behind).
        self.settings = dict(settings or {})

    def fingerprint(self, fmt: str, options: LoadOptions) -> str:
        payload = json.dumps(
            {
                "format": fmt,
                "conversation": options.conversation,
                "encoding": options.encoding,
                "extractor": self.extractor.name,
                "version": self.extractor.version,
                "settings": self.extractor.settings(),
            },
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def ingest(
        self,
        paths: Sequence[str | Path],
        *,
        format: str | None = None,
        options: LoadOptions | None = None,
        progress: ProgressSink | None = None,
        force: bool = False,
    ) -> list[IngestReport]:
        reports, plans = self._sources(paths, format, options or LoadOptions(), force)
        total = sum(len(p[3].messages) for p in plans)
        if progress and total:
            progress.start(total, "extracting")
        try:
            for path, digest, fingerprint, source, report in plans:
                self._ingest_one(path, digest, fingerprint, source, report, progress, force)
        finally:
            if progress and total:
                progress.finish()
        return reports

    def _sources(
        self, paths: Sequence[str | Path], format: str | None, options: LoadOptions, force: bool
    ) -> tuple[list[IngestReport], list[tuple[Path, str, str, ParsedSource, IngestReport]]]:
        """Parse and check every input; the reports, and the sources that need work."""
        if not paths:
            raise InputError("(no input)", "no input files given", hint="pass one or more files")
        # 1. Read and check every input before writing anything.
        parsed: list[tuple[Path, str, ParsedSource]] = []
        for raw_path in paths:
            path = Path(raw_path)
            source = load_source(path, format=format, options=options)
            parsed.append((path, file_sha256(path), source))
        reports: list[IngestReport] = []
        plans = []
        for path, digest, source in parsed:
            fingerprint = self.fingerprint(source.format, options)
            report = IngestReport(
                path=str(path),
                format=source.format,
                conversations=[c.id for c in source.conversations],
                warnings=list(source.warnings),
            )
            reports.append(report)
            if not force and self.store.source_seen(digest, fingerprint):
                report.skipped = "already ingested (same file contents and settings)"
                report.messages_unchanged = len(source.messages)
                continue
            plans.append((path, digest, fingerprint, source, report))
        return reports, plans

    def estimate(
        self,
        paths: Sequence[str | Path],
        *,
        format: str | None = None,
        options: LoadOptions | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """What an ingest of ``paths`` would extract and, for an extractor that can say,
        what it would cost (calls, tokens). Reads the store; writes nothing, calls nothing.
        """
        reports, plans = self._sources(paths, format, options or LoadOptions(), force)
        messages: list[Message] = []
        for _, _, _, source, report in plans:
            todo = self._pending(source, report, None, force)
            report.messages_added = sum(1 for _, _, is_new in todo if is_new)
            report.messages_updated = len(todo) - report.messages_added
            if not source.knowledge:
                messages.extend(m for _, m, _ in todo)
        out: dict[str, Any] = {
            "sources": [r.as_dict() for r in reports],
            "messages_to_extract": len(messages),
            "extractor": self.extractor.name,
        }
        if isinstance(self.extractor, Estimates):
            out["llm"] = self.extractor.estimate(messages)
        return out

    def _ingest_one(
        self,
        path: Path,
        digest: str,
        fingerprint: str,
        source: ParsedSource,
        report: IngestReport,
        progress: ProgressSink | None,
        force: bool = False,
    ) -> None:
        started = time.perf_counter()
        usage_before = self._usage()
        todo = self._pending(source, report, progress, force)
        # 2. Knowledge (imported with the file, or extracted), streamed into the text
        #    index writer as it arrives; nothing is visible until both commits.
        if source.knowledge:
            imported: dict[tuple[str, str], list[SemanticRef]] = {}
            for ref in source.knowledge:
                imported.setdefault((ref.conversation, ref.message_id), []).append(ref)
            knowledge: Iterable[list[SemanticRef]] = [
                imported.get((m.conversation, m.id), []) for _, m, _ in todo
            ]
            if progress:
                progress.advance(len(todo))
        elif todo:
            knowledge = self.extractor.extract(
                [m for _, m, _ in todo], progress.advance if progress else None
            )
        else:
            knowledge = []
        record = SourceRecord(
            path=str(path.resolve()),
            sha256=digest,
            format=source.format,
            fingerprint=fingerprint,
            extractor="import" if source.knowledge else self.extractor.name,
            settings=self.extractor.settings(),
            started_at=datetime.now(UTC).replace(tzinfo=None),
            messages_unchanged=report.messages_unchanged,
            warnings=report.warnings,
        )
        self._write(todo, knowledge, record, source.conversations, report)
        report.seconds = time.perf_counter() - started
        if not source.knowledge:
            report.llm = self._usage_since(usage_before, report.seconds)

    def retry_failed(self, progress: ProgressSink | None = None) -> IngestReport:
        """Re-extract the messages whose extraction failed before (by this extractor, or
        the ones it redoes); a success replaces the message's knowledge and clears its
        failure, a new failure is recorded again."""
        names = (
            self.extractor.failure_extractors
            if isinstance(self.extractor, RetriesFailures)
            else (self.extractor.name,)
        )
        started = time.perf_counter()
        usage_before = self._usage()
        failed = self.store.failed_messages(names)
        report = IngestReport(path="(retry-failed)", format="retry", conversations=[])
        report.conversations = sorted({s.message.conversation for s in failed})
        if not failed:
            report.skipped = "no failed extractions to retry"
            report.llm = self._usage_since(usage_before, 0.0)
            return report
        if progress:
            progress.start(len(failed), "retrying")
        try:
            todo = [(s.mkey, s.message, False) for s in failed]
            knowledge = self.extractor.extract(
                [s.message for s in failed], progress.advance if progress else None
            )
            record = SourceRecord(
                path="(retry-failed)",
                sha256="",
                format="retry",
                fingerprint="retry-failed",
                extractor=self.extractor.name,
                settings=self.extractor.settings(),
                started_at=datetime.now(UTC).replace(tzinfo=None),
            )
            self._write(todo, knowledge, record, [], report)
        finally:
            if progress:
                progress.finish()
        report.seconds = time.perf_counter() - started
        report.llm = self._usage_since(usage_before, report.seconds)
        return report

    def _usage(self) -> dict[str, int | float] | None:
        if isinstance(self.extractor, ReportsUsage):
            return self.extractor.usage_report()
        return None

    def _usage_since(
        self, before: dict[str, int | float] | None, seconds: float
    ) -> dict[str, int | float] | None:
        after = self._usage()
        if before is None or after is None:
            return None
        spent = {k: v - before.get(k, 0) for k, v in after.items()}
        spent["seconds"] = round(seconds, 3)
        return spent

    def _pending(
        self,
        source: ParsedSource,
        report: IngestReport,
        progress: ProgressSink | None,
        force: bool = False,
    ) -> list[tuple[int, Message, bool]]:
        """The messages of ``source`` to write: ``(mkey, message, is_new)`` for new and
        edited ones (and, with ``force``, unchanged ones, extracted again); unchanged ones
        left alone are counted in ``report``."""
        existing = self.store.message_hashes(c.id for c in source.conversations)
        next_mkey, _ = self.store.next_ids()
        max_ordinal: dict[str, int] = {}
        for (conv, _), (_, _, ordinal) in existing.items():
            max_ordinal[conv] = max(ordinal, max_ordinal.get(conv, -1))
        todo: list[tuple[int, Message, bool]] = []  # (mkey, message, is_new)
        for message in source.messages:
            found = existing.get((message.conversation, message.id))
            if found is None:
                ordinal = message.ordinal
                if message.conversation in max_ordinal:
                    max_ordinal[message.conversation] += 1
                    ordinal = max_ordinal[message.conversation]
                    message = message.model_copy(update={"ordinal": ordinal})
                todo.append((next_mkey, message, True))
                next_mkey += 1
            elif force or found[1] != message.content_hash():
                todo.append((found[0], message.model_copy(update={"ordinal": found[2]}), False))
            else:
                report.messages_unchanged += 1
                if progress:
                    progress.advance(1)
        return todo

    def _write(
        self,
        todo: list[tuple[int, Message, bool]],
        knowledge: Iterable[list[SemanticRef]],
        record: SourceRecord,
        conversations: list[Conversation],
        report: IngestReport,
    ) -> None:
        """Store the messages and their knowledge in one transaction, then the text index."""
        _, next_ref = self.store.next_ids()
        transaction = self.store.begin(record, conversations)
        writer: TextIndexWriter | None = None
        chunk = _Chunk()
        try:
            writer = self.text_index.writer()
            for key, value in self.settings.items():
                self.store.set_setting(key, value)  # inside the transaction
            for (mkey, message, is_new), refs in zip(todo, knowledge, strict=True):
                stored = StoredMessage(
                    mkey=mkey,
                    message=message,
                    first_ref=next_ref,
                    ref_count=len(refs),
                    ref_kinds=ref_kinds(refs),
                )
                chunk.refs.extend((next_ref + i, mkey, r) for i, r in enumerate(refs))
                next_ref += len(refs)
                outcome = outcome_of(refs)
                if outcome is not None:
                    chunk.outcomes.append(
                        ExtractionRecord(
                            mkey=mkey,
                            conversation=message.conversation,
                            message_id=message.id,
                            extractor=outcome.extractor,
                            model=outcome.model,
                            error=outcome.error,
                            attempts=outcome.attempts,
                        )
                    )
                (chunk.new if is_new else chunk.changed).append(stored)
                writer.add(indexed_message(stored, refs))
                if len(chunk) >= CHUNK_MESSAGES:
                    self._flush(transaction, chunk, report)
                    chunk = _Chunk()
            self._flush(transaction, chunk, report)
            record.messages_added = report.messages_added
            record.messages_updated = report.messages_updated
            record.refs_added = report.refs_added
            # 3. The store commits first; the text index then says which generation it has.
            generation = transaction.commit()
        except BaseException:
            transaction.rollback()
            if writer is not None:
                writer.cancel()
            # Stop the extractor now (its workers, its requests in flight), not at GC time.
            close = getattr(knowledge, "close", None)
            if callable(close):
                close()
            raise
        assert writer is not None
        writer.commit(generation)

    def _flush(self, transaction: StoreTransaction, chunk: _Chunk, report: IngestReport) -> None:
        touched = chunk.new + chunk.changed
        if not touched:
            return
        transaction.add(
            chunk.new,
            chunk.changed,
            chunk.refs,
            aliases=gather_aliases((s.message for s in touched), (r for _, _, r in chunk.refs)),
            embeddings=self.embedder(touched) if self.embedder else [],
            extractions=chunk.outcomes,
        )
        report.messages_failed += sum(1 for o in chunk.outcomes if o.error is not None)
        report.messages_added += len(chunk.new)
        report.messages_updated += len(chunk.changed)
        report.refs_added += len(chunk.refs)
