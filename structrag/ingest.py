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

import contextlib
import glob
import hashlib
import itertools
import json
import logging
import shlex
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Protocol

from structrag import faults
from structrag.analysis import content_count, stems, term_key
from structrag.errors import CheckpointFailed, ConfigError, InputError, InputErrors, shown_path
from structrag.extract.base import (
    Estimates,
    Extractor,
    ReportsUsage,
    RetriesFailures,
    outcome_of,
    start_extractor,
)
from structrag.importers import (
    ImportedRefs,
    LoadOptions,
    ParsedSource,
    SourceChanged,
    StreamedSource,
    expand_inputs,
    scan_source,
)
from structrag.models import (
    ROLE_FACET_NAMES,
    Action,
    Conversation,
    Entity,
    Message,
    SemanticRef,
    Tag,
    Topic,
)
from structrag.store.protocols import (
    ExtractionRecord,
    IndexedMessage,
    KnowledgeStore,
    MemoryInfo,
    SourceRecord,
    StoredMessage,
    StoreTransaction,
    TextIndex,
    TextIndexWriter,
)
from structrag.store.workspace import new_staging_folder, remove_staging_folder

log = logging.getLogger(__name__)


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
    #: Messages an earlier version of the file had and this one does not, removed.
    messages_removed: int = 0
    refs_added: int = 0
    messages_failed: int = 0
    #: Unchanged messages extracted again (``--force``); counted as unchanged too.
    messages_reextracted: int = 0
    skipped: str | None = None
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    llm: dict[str, int | float] | None = None  # LLM work: calls, tokens, failures ...

    def reset_counts(self) -> None:
        """Forget the counts of a write that was given up (the file changed under it)."""
        self.messages_added = self.messages_updated = self.messages_unchanged = 0
        self.refs_added = self.messages_failed = self.messages_reextracted = 0
        self.messages_removed = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": self.format,
            "conversations": self.conversations,
            "messages_added": self.messages_added,
            "messages_updated": self.messages_updated,
            "messages_unchanged": self.messages_unchanged,
            "messages_reextracted": self.messages_reextracted,
            "messages_removed": self.messages_removed,
            "semantic_refs_added": self.refs_added,
            "messages_failed": self.messages_failed,
            "skipped": self.skipped,
            "warnings": self.warnings,
            "seconds": round(self.seconds, 3),
            "llm": self.llm,
        }


def ref_terms(ref: SemanticRef) -> list[str]:
    """The index terms of one semantic ref (what a term lookup can find it by)."""
    return _terms(_knowledge_parts(ref.knowledge))


def _knowledge_parts(k: Entity | Action | Topic | Tag) -> tuple[str, ...]:
    """The texts a knowledge record's terms are made of."""
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
    return tuple(parts)


# Keyed by the texts, not the record: hashing and comparing a pydantic model costs more
# than taking its texts (an ingest looks up one key per ref, most of them seen before).
@lru_cache(maxsize=50_000)
def _terms(parts: tuple[str, ...]) -> list[str]:
    return list(dict.fromkeys(stems(" ".join(parts), parts=True)))


def indexed_message(
    stored: StoredMessage, refs: Sequence[SemanticRef], first_ref: int | None = None
) -> IndexedMessage:
    """The text-index document of one message; its refs have the consecutive ids
    ``first_ref, first_ref + 1, ...`` (by default, from the refs themselves)."""
    if first_ref is None:
        first_ref = refs[0].ref_id if refs and refs[0].ref_id is not None else 0
    terms = stems(stored.message.text, parts=True)
    return IndexedMessage(
        mkey=stored.mkey,
        conversation=stored.message.conversation,
        speaker=stored.message.speaker,
        first_ref=first_ref,
        terms=terms,
        knowledge=[ref_terms(r) for r in refs],
        content=content_count(terms),
    )


def gather_aliases(
    messages: Iterable[Message], refs: Iterable[SemanticRef]
) -> list[tuple[str, str, str, str]]:
    """Aliases seen at extraction, as ``(conversation, term, related, source)``: first
    names <-> full names of people (``first-name``), and short forms of a speaker's name
    used in the text, "Mel" for "Melanie" (``short-name``). What each is worth is a
    ranking setting (``RankingSettings.alias_sources``)."""
    speakers: dict[str, set[str]] = {}
    for m in messages:
        for person in (m.speaker, *m.recipients):
            if person:
                speakers.setdefault(m.conversation, set()).add(person)
    out: dict[tuple[str, str, str], str] = {}
    for conv, people in speakers.items():
        for person in people:
            parts = person.split()
            if len(parts) > 1:
                out[(conv, term_key(parts[0]), term_key(person))] = "first-name"
                out[(conv, term_key(person), term_key(parts[0]))] = "first-name"
    for ref in refs:
        k = ref.knowledge
        if not isinstance(k, Entity) or " " in k.name or len(k.name) < 3:
            continue
        low = k.name.lower()
        for person in speakers.get(ref.conversation, ()):
            first = person.split()[0].lower()
            if first != low and first.startswith(low):
                out.setdefault((ref.conversation, term_key(k.name), term_key(person)), "short-name")
    return [(c, t, r, s) for (c, t, r), s in sorted(out.items())]


#: Messages per store insert while extraction runs (inserts overlap with extraction).
CHUNK_MESSAGES = 500
#: Messages read, compared with the index and handed to the extractor at a time: an
#: ingest holds one window of a source's messages, however large the file.
WINDOW_MESSAGES = 10_000
#: Times a streamed file that changed while it was written is checked and written again.
CHANGED_RETRIES = 3
#: An input of at least this many messages has its text index segment written by a
#: process of its own (:mod:`structrag.store.segment_process`), while the store merges
#: and makes the digests: that process takes ~0.2 s to start, and a segment of 1,000
#: messages ~0.15 s to write.
SEGMENT_PROCESS_MIN = 1_000
#: An input of at most this many messages is a small one: an ingest writes it straight
#: into the store, in one transaction with the small inputs next to it (see
#: :class:`_Group`), not through a staging file of its own, whose fixed cost (~0.3 s:
#: made, merged, checkpointed) is many times that of extracting a few messages (~2 ms
#: each with spaCy). A day of a chat channel, say; larger inputs keep a commit each.
SMALL_INPUT_MESSAGES = 25
#: Small inputs written in one transaction: up to this many messages ...
GROUP_MESSAGES = 2_000
#: ... and as long as the store has been held (from the first row written) for less than
#: this many seconds, and no other process waits for it: the store is held while the
#: group's later inputs are extracted, so readers in other processes wait up to this long.
GROUP_SECONDS = 0.5
#: Inputs whose check failed that an ingest names before it stops checking the rest.
MAX_FAILED_INPUTS = 10
#: The spaCy extractor's name on its semantic refs (only the hybrid gives them beside the
#: LLM's).
SPACY_EXTRACTOR = "spacy"
#: The LLM extractor's name on its semantic refs, their version its prompt version.
LLM_EXTRACTOR = "llm"

Source = ParsedSource | StreamedSource
Paired = Iterator[tuple["Pending", list[SemanticRef]]]


@dataclass(frozen=True)
class Pending:
    """A message an ingest writes: ``new``, ``edited`` (its content changed), or ``same``
    (unchanged, extracted again with ``--force``); a memory says what makes it one."""

    mkey: int
    message: Message
    status: Literal["new", "edited", "same"]
    memory: MemoryInfo | None = None


@dataclass
class _Plan:
    """An input that needs work, as its check found it (its messages are not kept; a
    streamed source reads them again itself)."""

    path: Path
    digest: str
    fingerprint: str
    report: IngestReport
    messages: int
    streamed: StreamedSource | None = None
    #: It carries its own knowledge (a TypeAgent index): nothing to extract.
    imported: bool = False


@dataclass
class _Chunk:
    new: list[StoredMessage] = field(default_factory=list)
    changed: list[StoredMessage] = field(default_factory=list)  # edited or same
    same: int = 0
    refs: list[tuple[int, int, SemanticRef]] = field(default_factory=list)
    outcomes: list[ExtractionRecord] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.new) + len(self.changed)


class _GroupTransaction(StoreTransaction, Protocol):
    """A store transaction that writes several sources (see :class:`_Group`)."""

    def next_source(
        self,
        source: SourceRecord,
        conversations: list[Conversation],
        settings: dict[str, str] | None = None,
    ) -> None: ...

    def buffered(self) -> set[str]: ...

    def flush(self) -> None: ...


class _GroupStore(Protocol):
    """A store that writes small inputs in groups (the DuckDB store)."""

    def begin_sources(
        self,
        source: SourceRecord,
        conversations: list[Conversation],
        settings: dict[str, str] | None = None,
    ) -> _GroupTransaction: ...

    def others_waiting(self) -> bool: ...

    def checkpoint(self) -> None: ...


@dataclass
class _Group:
    """Consecutive small inputs of one ingest, written straight into the store in one
    transaction (each with its own source record) and one text index segment (staged in
    the group's staging folder, adopted at its commit), instead of one staged write each.

    Each input is whole or absent, as before: the group commits all of them or none (Ctrl-C
    or a crash before its commit leaves none of them, and the inputs of the groups before
    it whole), and the ingest names an input as written once its group committed. The
    store is held from the group's first row (its first input is extracted before) to its
    commit: the group is committed once it holds :data:`GROUP_MESSAGES`, once it has held
    the store :data:`GROUP_SECONDS`, or once another process waits for the store."""

    store: _GroupStore
    numbers: _RefNumbers
    paths: list[str] = field(default_factory=list)
    reports: list[IngestReport] = field(default_factory=list)
    messages: int = 0
    transaction: _GroupTransaction | None = None
    #: The group's text index segment, written in its staging folder.
    writer: TextIndexWriter | None = None
    folder: Path | None = None
    #: When the transaction began (the store held from then on).
    began: float = 0.0

    def full(self) -> bool:
        if self.transaction is None:
            return False
        return (
            self.messages >= GROUP_MESSAGES
            or time.monotonic() - self.began >= GROUP_SECONDS
            or self.store.others_waiting()
        )

    def abort(self) -> None:
        """Roll back what the group wrote (none of its inputs is written)."""
        transaction, writer, folder = self.transaction, self.writer, self.folder
        self.transaction = self.writer = self.folder = None
        try:
            if transaction is not None:
                transaction.rollback()
            if writer is not None:
                writer.cancel()
        finally:
            if folder is not None:
                remove_staging_folder(folder)


def _commit_text(writer: TextIndexWriter, generation: int, folder: Path | None) -> str | None:
    """Commit the text index of a write whose store committed ``generation``, then remove
    its staging ``folder``. When the text index does not commit, its marker still names
    the generation before, so the next open rebuilds it, and so does this process's next
    write (``Ingestor._catch_up_text_index``), before it marks a newer generation.

    The write is in the store by then: a text index the file system refuses (a full
    disk) does not make it fail (reported failed, it would be written twice by the retry
    its error asks for). What to warn of is returned instead; any other error is raised."""
    try:
        faults.point("text-commit")
        writer.commit(generation)
    except OSError as exc:
        with contextlib.suppress(Exception):
            writer.cancel()
        problem = (
            f"the write is in the store, but the text index could not take it "
            f"({exc.strerror or exc}); it is rebuilt from the store when the index next "
            "opens (free space first if the disk is full)"
        )
        return problem
    except BaseException:
        with contextlib.suppress(Exception):
            writer.cancel()
        raise
    finally:
        if folder is not None:
            remove_staging_folder(folder)
    return None


def _whole(reports: list[IngestReport], written: list[str]) -> list[IngestReport]:
    """The reports of the inputs in the index whole: those ``written``, and those found
    already ingested."""
    done = set(written)
    return [r for r in reports if r.skipped or str(r.path) in done]


class IngestInterrupted(KeyboardInterrupt):
    """Ctrl-C during an ingest of several files, some of them written (whole) before it."""

    def __init__(self, written: list[str], reports: list[IngestReport] | None = None) -> None:
        super().__init__(f"interrupted after writing {len(written)} file(s)")
        self.written = written
        #: The reports of the inputs that are in the index whole: those written before the
        #: interruption, and those found already ingested.
        self.reports = reports or []


def stopped(
    exc: BaseException,
    written: list[str],
    stopped_on: str | None,
    reports: list[IngestReport] | None = None,
) -> None:
    """Mark an error that stopped an ingest of several files after some were committed
    (whole): ``exc.written`` lists them and ``exc.reports`` holds their reports (as
    :class:`IngestInterrupted` does), and ``exc.stopped_on`` names the file it stopped on
    (nothing of it was written), if any."""
    with contextlib.suppress(AttributeError, TypeError):  # an exception without a __dict__
        exc.written = written  # type: ignore[attr-defined]
        exc.stopped_on = stopped_on  # type: ignore[attr-defined]
        exc.reports = reports or []  # type: ignore[attr-defined]


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
        workspace: Path | None = None,
        memory: MemoryInfo | None = None,
        digest: Callable[[KnowledgeStore, str], bytes | None] | None = None,
    ) -> None:
        self.store = store
        self.text_index = text_index
        self.extractor = extractor
        self.embedder = embedder
        #: Index settings, written in each source's transaction (so a failed first
        #: ingest leaves none behind).
        self.settings = dict(settings or {})
        #: The index directory, where an ingest keeps its staging folder (None: write
        #: straight into the store).
        self.workspace = workspace
        #: What new messages are as memories (their table and agent; None: plain
        #: conversation history).
        self.memory = memory
        #: Makes the stored digest of a conversation an ingest wrote (see
        #: :mod:`structrag.query.digest`); None: the ingest only drops the old ones.
        self.digest = digest

    def fingerprint(self, fmt: str, options: LoadOptions) -> str:
        settings: dict[str, Any] = {
            "format": fmt,
            "conversation": options.conversation,
            "encoding": options.encoding,
            "extractor": self.extractor.name,
            "version": self.extractor.version,
            "settings": self.extractor.settings(),
        }
        if options.date_order is not None:  # only when set: older fingerprints stay valid
            settings["date_order"] = options.date_order
        if self.memory is not None:
            settings["memory"] = [self.memory.table, self.memory.agent]
        payload = json.dumps(settings, sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()[:24]

    def ingest(
        self,
        paths: Sequence[str | Path] | str | Path,
        *,
        format: str | None = None,
        options: LoadOptions | None = None,
        progress: ProgressSink | None = None,
        force: bool = False,
    ) -> list[IngestReport]:
        options = options or LoadOptions()
        reports, plans = self._sources(paths, format, options, force)
        total = sum(p.messages for p in plans)
        if progress and total:
            progress.start(total, "extracting")
        self._start_extractor(plans)
        written: list[str] = []
        current: _Plan | None = None
        group: _Group | None = None  # small inputs written together (see _Group)
        grouped = False
        try:
            for current in plans:
                if self._groupable(current):
                    if group is None:
                        group = self._group()
                        grouped = True
                    self._ingest_plan(current, format, options, progress, force, group)
                    group.paths.append(str(current.path))
                    group.reports.append(current.report)
                    group.messages += current.messages
                    if group.full():
                        self._commit_group(group, written)
                        group = None
                    continue
                if group is not None:
                    self._commit_group(group, written)
                    group = None
                try:
                    self._ingest_plan(current, format, options, progress, force)
                except CheckpointFailed:
                    written.append(str(current.path))  # committed: a re-run skips it
                    raise
                written.append(str(current.path))
            if group is not None:
                self._commit_group(group, written)
                group = None
            if grouped:
                self._checkpoint()
        except KeyboardInterrupt as exc:
            if group is not None:
                group.abort()
            if written:  # say which files are in: each was committed whole
                raise IngestInterrupted(written, _whole(reports, written)) from exc
            raise
        except Exception as exc:
            if group is not None:
                group.abort()
            if written and current is not None:
                # An error that stopped the ingest (an unusable LLM endpoint, a full disk)
                # after some files were committed, whole: it says which, and where it
                # stopped (the CLI shows them, as after Ctrl-C); none, when it stopped
                # after the last file committed (its checkpoint).
                at = str(current.path)
                stopped(exc, written, None if at in written else at, _whole(reports, written))
            raise
        finally:
            if progress and total:
                progress.finish()
        return reports

    def _groupable(self, plan: _Plan) -> bool:
        """Whether ``plan`` is written with the small inputs beside it (see :class:`_Group`):
        a small input of an ingest (one with a staging folder), into a store that writes
        groups, by an extractor that reads nothing from the store while it extracts (an LLM
        extractor reads its answer cache there, from threads of its own: the group's
        transaction holds the store while the next input is extracted)."""
        return (
            self.workspace is not None
            and self.memory is None
            and plan.messages <= SMALL_INPUT_MESSAGES
            and plan.messages < SEGMENT_PROCESS_MIN  # a group's segment is written here
            and not isinstance(self.extractor, RetriesFailures)
            and self._llm_identity() is None
            and hasattr(self.store, "begin_sources")
        )

    def _group(self) -> _Group:
        store: _GroupStore = self.store  # type: ignore[assignment]  # _groupable checked
        return _Group(store, _RefNumbers(self.store, live=False))

    def _commit_group(self, group: _Group, written: list[str]) -> None:
        """Commit a group's store transaction, then its text index (as :meth:`_write`
        commits one input's); its inputs are then written."""
        transaction, writer = group.transaction, group.writer
        if transaction is None or writer is None:  # none of its inputs needed a write
            written.extend(group.paths)
            return
        try:
            faults.point("store-commit")
            digest, store = self.digest, self.store
            generation = transaction.commit(
                None,
                None if digest is None else (lambda conversation: digest(store, conversation)),
                writer.prepare,
            )
        except CheckpointFailed:
            written.extend(group.paths)  # committed: a re-run skips them
            group.abort()
            raise
        except BaseException:
            group.abort()
            raise
        folder, group.transaction, group.writer, group.folder = group.folder, None, None, None
        written.extend(group.paths)
        problem = _commit_text(writer, generation, folder)
        if problem is not None:
            for report in group.reports:
                report.warnings.append(problem)

    def _checkpoint(self) -> None:
        """Write what small inputs' commits left in the store's log into its file."""
        checkpoint = getattr(self.store, "checkpoint", None)
        if callable(checkpoint):
            checkpoint()

    def _start_extractor(self, plans: Sequence[_Plan]) -> None:
        """Let the extractor start its workers while the first input is read, when an
        input of conversations new to the index will give it all its messages (an input
        that grew by a few messages, or carries its own knowledge, starts nothing)."""
        if not plans:
            return
        known = {c.id for c in self.store.conversations()}
        new = [
            p.messages
            for p in plans
            if not p.imported and not known.intersection(p.report.conversations)
        ]
        if new:
            start_extractor(self.extractor, max(new))

    def _ingest_plan(
        self,
        plan: _Plan,
        format: str | None,
        options: LoadOptions,
        progress: ProgressSink | None,
        force: bool,
        group: _Group | None = None,
    ) -> None:
        """Write one checked input (into ``group``'s transaction, when given). A streamed
        file found changed when its reading ends is given up (nothing of it is written)
        and checked and written again as it is now."""
        for _ in range(CHANGED_RETRIES):
            source = self._reload(plan, format, options, force)
            if source is None:
                return
            try:
                self._ingest_one(
                    plan.path,
                    source.sha256,
                    plan.fingerprint,
                    source,
                    plan.report,
                    progress,
                    force,
                    group=group,
                )
                return
            except SourceChanged:
                plan.streamed = None  # check it again
                plan.report.reset_counts()
        raise InputError(
            plan.path,
            f"the file changed each time it was read ({CHANGED_RETRIES} times) while it "
            "was ingested; nothing of it was written",
            hint="ingest it again when nothing is writing to it",
        )

    def _sources(
        self,
        paths: Sequence[str | Path] | str | Path,
        format: str | None,
        options: LoadOptions,
        force: bool,
    ) -> tuple[list[IngestReport], list[_Plan]]:
        """Parse and check every input; the reports, and the sources that need work.

        Only what the check found is kept, not the messages: each source is read again
        when its turn comes (see :meth:`_reload`), so an ingest of many files holds one
        file's messages at a time."""
        if not paths:
            raise InputError("(no input)", "no input files given", hint="pass one or more files")
        # 1. Read and check every input before writing anything. A folder stands for the
        #    inputs inside it.
        inputs = expand_inputs(paths, options.exclude)
        reports: list[IngestReport] = []
        plans = []
        failed: list[tuple[InputError, Path]] = []  # every input the check fails, said at once
        claimed: dict[str, _Claim] = {}  # conversation -> the first file of it here
        channels: dict[str, tuple[str, str | None]] = {}  # conversation -> channel id, file
        for path in inputs.paths:
            try:
                source = scan_source(path, format=format, options=options)
            except InputError as exc:
                failed.append((exc, path))
                if len(failed) > MAX_FAILED_INPUTS:
                    break
                continue
            if failed:
                continue  # checked only, nothing will be written
            fingerprint = self.fingerprint(source.format, options)
            report = IngestReport(
                path=str(path),
                format=source.format,
                conversations=[c.id for c in source.conversations],
                warnings=list(source.warnings),
            )
            reports.append(report)
            if not force and self._seen(source, fingerprint):
                report.skipped = "already ingested (same file contents and settings)"
                report.messages_unchanged = source.count
                continue
            try:
                self._check_names(path, source, claimed, format, options)
                if not options.conversation:  # a name given merges on purpose
                    self._check_channels(path, source, channels)
            except InputError as exc:
                failed.append((exc, path))
                continue
            except SourceChanged:  # read again for its ids, it was not what was checked
                changed = InputError(
                    path,
                    "the file changed while it was checked; nothing was written",
                    hint="ingest it again when nothing is writing to it",
                )
                failed.append((changed, path))
                continue
            report.warnings.extend(self._written_as_others(path, report.conversations))
            streamed = source if isinstance(source, StreamedSource) else None
            plans.append(
                _Plan(
                    path,
                    source.sha256,
                    fingerprint,
                    report,
                    source.count,
                    streamed,
                    imported=bool(source.knowledge),
                )
            )
        if failed:
            raise _check_failed(failed, inputs.found_in)
        reports.extend(
            IngestReport(path=folder, format="folder", conversations=[], skipped=note)
            for folder, note in inputs.skipped
        )
        return reports, plans

    def _seen(self, source: ParsedSource | StreamedSource, fingerprint: str) -> bool:
        """Whether these bytes were ingested with these settings, and their conversations
        are in the index: a copy of a file under another name ("y.jsonl", a conversation
        of its own) is not the same input."""
        if not self.store.source_seen(source.sha256, fingerprint):
            return False
        ids = [c.id for c in source.conversations]
        if len(self.store.conversation_inputs(ids)) != len(set(ids)):
            return False
        # An LLM extractor's settings seen before may have been replaced since (model A,
        # then B, then A again): its messages must still be extracted as they say.
        if source.knowledge or self._llm_identity() is None:
            return True
        return not self._extracted_otherwise(ids, str(Path(source.path).resolve()))

    def _written_as_others(self, path: Path, conversations: list[str]) -> list[str]:
        """A warning when this file, one conversation, wrote one other conversation
        before (``--conversation family``, then none): its messages are about to be in
        both. A file of several conversations that lost one (an export without a chat
        any more) is no rename, and gets none."""
        earlier = self.store.conversations_from(str(path.resolve()))
        if len(conversations) != 1 or len(earlier) != 1 or earlier == set(conversations):
            return []
        before = sorted(earlier)
        named = ", ".join(repr(c) for c in before)
        return [
            f"this file was ingested before as {named}; this ingest writes it as "
            f"{', '.join(repr(c) for c in conversations)} too, so its messages will be in "
            f"both (to update the earlier one, ingest with --conversation {before[0]}; to "
            f"drop one: structrag remove NAME)"
        ]

    def _check_names(
        self,
        path: Path,
        source: ParsedSource | StreamedSource,
        claimed: dict[str, _Claim],
        format: str | None,
        options: LoadOptions,
    ) -> None:
        """Refuse an input that would replace another file's messages: a conversation
        named after its file ("meeting" for ``b/meeting.txt``) that is already another
        file's (in the index, from a file still on disk, or in this ingest), whose
        messages, numbered by position, would replace the other's; or messages whose ids
        are those of another file's messages in the same conversation (two exports without
        ids given one ``--conversation``). A file that moved (the old path gone, and it
        holds one of its messages still as they were) is the same conversation, and
        updates it; a file of new ids adds to a conversation."""
        ids = [c.id for c in source.conversations]
        if not ids:
            return
        here = path.resolve()
        mine = _message_ids(source.iter_messages)
        if isinstance(source, StreamedSource):
            again = source.read
        else:  # read again if a later input asks: the check keeps no file's messages
            again = lambda: scan_source(path, format=format, options=options).iter_messages()  # noqa: E731
        later = _Claim(path, _message_ids(again))  # one reading for all its conversations
        inputs = self.store.conversation_inputs(ids)
        for conversation in ids:
            claim = claimed.get(conversation)
            if claim is not None and claim.path.resolve() == here:
                claim = None
            written = inputs.get(conversation, set())
            elsewhere = sorted(p for p in written if p != str(here) and Path(p).exists())
            if _named_after(conversation, path) and str(here) not in written:
                other = claim.path if claim is not None else None
                other = other or (Path(elsewhere[0]) if elsewhere else None)
                if other is None and written:
                    self._check_moved(path, conversation, mine(conversation), sorted(written))
                if other is not None:
                    raise InputError(
                        path,
                        f"its conversation {conversation!r}, named after the file, is "
                        f"already that of {shown_path(other)}; its messages would replace "
                        "that file's",
                        hint="rename one of the files, or ingest this one on its own with "
                        "--conversation NAME (a file that replaces the other: move the old "
                        "one away first)",
                    )
            if claim is not None or elsewhere:
                self._check_ids(path, conversation, mine(conversation), claim, elsewhere)
            claimed.setdefault(conversation, later)

    def _check_channels(
        self,
        path: Path,
        source: ParsedSource | StreamedSource,
        channels: dict[str, tuple[str, str | None]],
    ) -> None:
        """Refuse a chat channel (Slack's ``slack:general``) whose conversation is another
        channel's of that name by its channel id, in the index or earlier in this ingest:
        a channel of another workspace, whose messages would be mixed into it. Where either
        has no id (no ``channels.json``), nothing is known, and nothing is refused.
        ``channels``: the channel id of each conversation this ingest has checked, and
        where it comes from."""
        mine = {
            c.id: str(c.metadata["channel_id"])
            for c in source.conversations
            if c.metadata.get("channel_id")
        }
        if not mine:
            return
        stored = {c.id: c.metadata for c in self.store.conversations() if c.id in mine}
        for conversation, channel in mine.items():
            known = channels.get(conversation)
            if known is None and conversation in stored:
                meta = stored[conversation]
                if meta.get("channel_id"):
                    source_path = meta.get("source")
                    known = (str(meta["channel_id"]), str(source_path) if source_path else None)
            if known is not None and known[0] != channel:
                where = f" of {known[1]}" if known[1] else ""
                raise InputError(
                    path,
                    f"its channel {channel} is not the channel of conversation "
                    f"{conversation!r} ({known[0]}{where}): a channel of that name in another "
                    "workspace (or one made again under that name), whose messages it would "
                    "be mixed into",
                    hint="ingest the export's channel folders one by one, this one with "
                    f"--conversation NAME (say --conversation {conversation}-2; the "
                    "conversation's own name merges them)",
                )
            channels.setdefault(conversation, (channel, str(path)))

    def _check_moved(
        self, path: Path, conversation: str, ours: dict[str, int], written: list[str]
    ) -> None:
        """A conversation named after the file, written from files all gone from disk: the
        file moved, if it still holds one of those messages as it was; a file of that
        name with none of them (another meeting's ``transcript.txt``, uploaded again)
        would replace them."""
        theirs = {i: h for (_, i), (_, h, _) in self.store.message_hashes([conversation]).items()}
        if not ours or any(theirs.get(i) == h for i, h in ours.items()):
            return
        raise InputError(
            path,
            f"its conversation {conversation!r}, named after the file, was written from "
            f"{shown_path(Path(written[0]))}, which is gone, and this file holds none of its "
            "messages: they would be replaced",
            hint="ingest it with --conversation NAME, or rename the file",
        )

    def _check_ids(
        self,
        path: Path,
        conversation: str,
        ours: dict[str, int],
        claim: _Claim | None,
        elsewhere: list[str],
    ) -> None:
        """Refuse messages whose ids are those of messages, with other contents, that
        other files still on disk wrote into the conversation (``elsewhere``), or that an
        earlier input of this ingest (``claim``) brings: they would replace them. The
        same message again (a later export that holds an earlier one's) replaces nothing;
        a file that moved away leaves its messages to the file that took its place."""
        if set(ours) != {str(n) for n in range(1, len(ours) + 1)}:
            return  # a file of its own ids: an id it shares is the same message, edited
        theirs: dict[str, tuple[int, str]] = {}
        if elsewhere:
            hashes = self.store.message_hashes([conversation])
            owners = self.store.message_inputs([conversation])
            wanted = set(elsewhere)
            for (_, i), (_, h, _) in hashes.items():
                owner = owners.get((conversation, i))
                if owner in wanted:
                    theirs[i] = (h, owner)
        if claim is not None:
            theirs.update((i, (h, str(claim.path))) for i, h in claim.ids(conversation).items())
        clash = sorted(i for i, h in ours.items() if i in theirs and theirs[i][0] != h)
        if not clash:
            return
        owners_shown = sorted({shown_path(Path(theirs[i][1])) for i in clash})
        shown = ", ".join(repr(i) for i in clash[:3])
        more = " ..." if len(clash) > 3 else ""
        have = "has the id of a message" if len(clash) == 1 else "have ids of messages"
        raise InputError(
            path,
            f"{len(clash)} of its messages in conversation {conversation!r} {have} of "
            f"{' and '.join(owners_shown)} ({shown}{more}), with other contents: they "
            "would replace that file's",
            hint="messages without ids are numbered 1, 2, ...: give this file's "
            "conversation a name of its own (--conversation NAME, or its conversation "
            "field), or its messages ids of their own (a file that replaces the other: "
            "move the old one away first)",
        )

    def _reload(
        self, plan: _Plan, format: str | None, options: LoadOptions, force: bool
    ) -> Source | None:
        """A checked input, read again for its turn. Its hash is always that of the bytes
        parsed (read once): a file that changed since it was checked is ingested as it is
        now, with a warning, never stored under a hash it does not have (the next ingest
        would then take the new version for one already ingested). None: that version is
        in the index already. A streamed source is not read here: its own reading tells
        a change (:class:`SourceChanged`), and :meth:`_ingest_plan` then comes back."""
        if plan.streamed is not None:
            return plan.streamed
        source = scan_source(plan.path, format=format, options=options)
        if source.sha256 != plan.digest:
            plan.report.warnings.append(
                "the file changed while the ingest ran: ingested as it is now"
            )
            plan.report.conversations = [c.id for c in source.conversations]
            if not force and self._seen(source, plan.fingerprint):
                plan.report.skipped = "already ingested (same file contents and settings)"
                plan.report.messages_unchanged = source.count
                return None
            plan.digest = source.sha256
        return source

    def estimate(
        self,
        paths: Sequence[str | Path] | str | Path,
        *,
        format: str | None = None,
        options: LoadOptions | None = None,
        force: bool = False,
    ) -> dict[str, Any]:
        """What an ingest of ``paths`` would extract and, for an extractor that can say,
        what it would cost (calls, tokens). Reads the store; writes nothing, calls nothing.
        """
        options = options or LoadOptions()
        reports, plans = self._sources(paths, format, options, force)
        messages: list[Message] = []
        for plan in plans:
            source, report = self._reload(plan, format, options, force), plan.report
            if source is None:
                continue
            gone: list[int] = []  # what the ingest would remove, as it would
            pending = self._pending(source, report, None, force, gone)
            todo = [p for window in pending for p in window]
            report.messages_removed = len(gone)
            report.messages_added = sum(1 for p in todo if p.status == "new")
            report.messages_updated = sum(1 for p in todo if p.status == "edited")
            report.messages_reextracted = sum(1 for p in todo if p.status == "same")
            report.messages_unchanged += report.messages_reextracted
            if not source.knowledge:
                messages.extend(p.message for p in todo)
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
        path: Path | str,
        digest: str,
        fingerprint: str,
        source: Source,
        report: IngestReport,
        progress: ProgressSink | None,
        force: bool = False,
        delete: Sequence[int] = (),
        before_commit: Callable[[StoreTransaction], None] | None = None,
        group: _Group | None = None,
    ) -> None:
        started = time.perf_counter()
        usage_before = self._usage()
        # a file's messages that its new version no longer has go (another reader, such
        # as the knowledge base, says what to delete itself)
        gone: list[int] | None = [] if isinstance(path, Path) else None
        windows = self._pending(source, report, progress, force, gone)
        # 2. Knowledge (imported with the file, or extracted), streamed into the text
        #    index writer as it arrives, one window of messages at a time; nothing is
        #    visible until both commits.
        if source.knowledge:
            pairs = _imported(windows, source.knowledge, progress)
        else:
            pairs = self._extracted(windows, progress)
        record = SourceRecord(
            # a file's absolute path; another reader's source names itself
            path=str(path.resolve()) if isinstance(path, Path) else path,
            sha256=digest,
            format=source.format,
            fingerprint=fingerprint,
            extractor="import" if source.knowledge else self.extractor.name,
            settings=self.extractor.settings(),
            started_at=datetime.now(UTC).replace(tzinfo=None),
            warnings=report.warnings,
        )
        self._write(
            pairs,
            record,
            source.conversations,
            report,
            delete,
            before_commit,
            size=source.count,
            gone=gone,
            group=group,
        )
        report.seconds = time.perf_counter() - started
        if not source.knowledge:
            report.llm = self._usage_since(usage_before, report.seconds)

    def ingest_source(
        self,
        source: ParsedSource,
        *,
        progress: ProgressSink | None = None,
        force: bool = False,
        delete: Sequence[int] = (),
        before_commit: Callable[[StoreTransaction], None] | None = None,
    ) -> IngestReport:
        """Ingest what another reader made (document fragments, say) as one source: new
        and edited messages extracted and written, ``delete`` (mkeys) deleted, and
        ``before_commit`` writing what else belongs to the same transaction."""
        report = IngestReport(
            path=source.path,
            format=source.format,
            conversations=[c.id for c in source.conversations],
            warnings=list(source.warnings),
        )
        fingerprint = self.fingerprint(source.format, LoadOptions())
        total = source.count
        if progress and total:
            progress.start(total, "extracting")
        try:
            self._ingest_one(
                source.path,
                source.sha256,
                fingerprint,
                source,
                report,
                progress,
                force,
                delete,
                before_commit,
            )
        finally:
            if progress and total:
                progress.finish()
        return report

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
        failed = self._retried_here(failed, report)
        report.conversations = sorted({s.message.conversation for s in failed})
        if not failed:
            report.skipped = "no failed extractions to retry"
            report.llm = self._usage_since(usage_before, 0.0)
            return report
        if progress:
            progress.start(len(failed), "retrying")
        try:
            todo = [Pending(s.mkey, s.message, "edited") for s in failed]
            record = SourceRecord(
                path="(retry-failed)",
                sha256="",
                format="retry",
                fingerprint="retry-failed",
                extractor=self.extractor.name,
                settings=self.extractor.settings(),
                started_at=datetime.now(UTC).replace(tzinfo=None),
            )
            self._write(self._extracted(iter([todo]), progress), record, [], report)
        finally:
            if progress:
                progress.finish()
        report.seconds = time.perf_counter() - started
        report.llm = self._usage_since(usage_before, report.seconds)
        return report

    def _retried_here(
        self, failed: list[StoredMessage], report: IngestReport
    ) -> list[StoredMessage]:
        """The failed messages this extractor redoes: those it extracted (see
        :func:`failed_extractors`). Redoing a ``hybrid`` failure with ``llm`` alone would
        drop its spaCy knowledge, an ``llm`` one with ``hybrid`` would add spaCy's: those
        are left to their own extractor, named in a warning, or in the error when none is
        left to redo."""
        if not failed:
            return failed
        mine = self.extractor.name
        recorded = failed_extractors(self.store, [f.mkey for f in failed])
        others: dict[str, int] = {}
        for f in failed:
            name = recorded.get(f.mkey) or mine
            if name != mine:
                others[name] = others.get(name, 0) + 1
        if not others:
            return failed
        left = ", ".join(f"{n} with --extractor {name}" for name, n in sorted(others.items()))
        if sum(others.values()) == len(failed):
            again = (
                f"retry them with --extractor {next(iter(others))}"
                if len(others) == 1
                else "retry each with its own --extractor"
            )
            raise ConfigError(
                f"the failed extractions were made by another extractor ({left}), not "
                f"--extractor {mine}: {again}"
            )
        report.warnings.append(
            f"failed extractions made by another extractor were left alone ({left}): retry "
            "them with that --extractor"
        )
        return [f for f in failed if (recorded.get(f.mkey) or mine) == mine]

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

    def _extracted(self, windows: Iterable[list[Pending]], progress: ProgressSink | None) -> Paired:
        """Each message with the knowledge the extractor finds in it, a window at a time
        (the extractor's workers stop when this generator is closed)."""
        for window in windows:
            refs = self.extractor.extract(
                [p.message for p in window], progress.advance if progress else None
            )
            try:
                yield from zip(window, refs, strict=True)
            finally:
                close = getattr(refs, "close", None)
                if callable(close):
                    close()

    def _pending(
        self,
        source: Source,
        report: IngestReport,
        progress: ProgressSink | None,
        force: bool = False,
        gone: list[int] | None = None,
    ) -> Iterator[list[Pending]]:
        """The messages of ``source`` to write, in windows of :data:`WINDOW_MESSAGES`: new
        and edited ones (and, with ``force``, unchanged ones, extracted again); unchanged
        ones left alone are counted in ``report``. With ``gone``, once every message was
        read, it holds the mkeys of the messages an earlier ingest of the same file wrote
        that this version does not have (a deleted chat message, another ChatGPT branch)."""
        existing = self.store.message_hashes(c.id for c in source.conversations)
        # Unchanged messages another extractor or LLM made the knowledge of are extracted
        # again (an LLM extractor only: a spaCy re-ingest asks nothing more of the store).
        stale = (
            set()
            if force or not existing or source.knowledge
            else self._extracted_otherwise([c.id for c in source.conversations])
        )
        left: dict[tuple[str, str], int] = {}
        moved: dict[tuple[str, str], int] = {}
        held: set[str] = set()  # conversations of a moved file that still has one of them
        if gone is not None and existing:
            left, moved = self._written_from(source, existing)
        max_ordinal: dict[str, int] = {}
        for (conv, _), (_, _, ordinal) in existing.items():
            max_ordinal[conv] = max(ordinal, max_ordinal.get(conv, -1))
        todo: list[Pending] = []
        numbered = True  # every id is the message's place (1, 2, ...): no ids of the file's
        messages: Iterable[Message] = source.iter_messages()
        shifts: dict[str, int] = {}
        if existing and source.format in WINDOWED_FORMATS:
            messages, shifts = _shifted(messages, existing)
        for message in messages:
            found = existing.get((message.conversation, message.id))
            key = (message.conversation, message.id)
            left.pop(key, None)
            if moved.pop(key, None) is not None and found and found[1] == message.content_hash():
                held.add(message.conversation)
            numbered = numbered and message.id == str(message.ordinal + 1)
            if found is None:
                if message.conversation in max_ordinal:
                    max_ordinal[message.conversation] += 1
                    ordinal = max_ordinal[message.conversation]
                    message = message.model_copy(update={"ordinal": ordinal})
                todo.append(Pending(-1, message, "new"))  # numbered below
            elif force or found[1] != message.content_hash() or key in stale:
                status: Literal["edited", "same"] = (
                    "same" if found[1] == message.content_hash() else "edited"
                )
                kept = message.model_copy(update={"ordinal": found[2]})
                todo.append(Pending(found[0], kept, status))
            else:
                report.messages_unchanged += 1
                if progress:
                    progress.advance(1)
            if len(todo) >= WINDOW_MESSAGES:
                yield self._numbered(todo)
                todo = []
        if todo:
            yield self._numbered(todo)
        left.update((k, v) for k, v in moved.items() if k[0] in held)
        for conversation, shift in shifts.items():
            for place in range(1, shift + 1):
                left.pop((conversation, str(place)), None)
            report.warnings.append(
                f"{conversation}: this export starts at message {shift + 1} of the one "
                f"ingested before (WhatsApp exports a chat's latest messages only): the "
                f"{shift:,} message(s) before it were kept, and the rest lined up by content"
            )
        if gone is not None and left:
            if numbered or source.format in WHOLE_FORMATS:
                gone.extend(sorted(left.values()))
            else:
                report.warnings.append(
                    f"{len(left)} message(s) an earlier version of this file had are not in "
                    "it: kept (a file of its own message ids, such as a Slack or Discord "
                    "export of a date range, may be a part of the history)"
                )

    def _llm_identity(self) -> tuple[str, str, str] | None:
        """``(extractor, model, prompt version)`` of an LLM extractor (``llm``,
        ``hybrid``), what its knowledge of a message depends on; None for any other."""
        if not isinstance(self.extractor, RetriesFailures):
            return None
        settings = self.extractor.settings()
        llm = settings.get("llm", settings)
        if not isinstance(llm, dict) or "model" not in llm or "prompt_version" not in llm:
            return None
        return self.extractor.name, str(llm["model"]), str(llm["prompt_version"])

    def _extracted_otherwise(
        self, conversations: list[str], path: str | None = None
    ) -> set[tuple[str, str]]:
        """The messages of ``conversations`` (as ``(conversation, id)``) whose knowledge
        this LLM extractor would not have made: extracted by another model (or not by an
        LLM), with another prompt version (of their LLM knowledge, or of their recorded
        outcome: a message the model found nothing in has no knowledge to say it), or by
        the other of ``llm`` and ``hybrid`` (the hybrid's messages hold spaCy's knowledge;
        a message of an ``llm`` ingest in which spaCy would find nothing is taken for the
        hybrid's). Messages without text are never sent. A failure is left to
        ``--retry-failed``, whatever prompt it failed with. An outcome of an unknown prompt
        version (NULL: recorded before schema 8, see
        :func:`structrag.store.duckdb.schema._prompt_versions`) is taken for this one's.
        With ``path``, only the messages that file wrote. Empty for an extractor that is
        not an LLM one."""
        identity = self._llm_identity()
        if identity is None or not conversations:
            return set()
        name, model, prompt = identity
        spacy = (
            "EXISTS (SELECT 1 FROM semantic_refs r WHERE r.mkey = m.mkey "
            f"AND r.extractor = '{SPACY_EXTRACTOR}')"
        )
        if name == "hybrid":
            other = f"(NOT {spacy} AND coalesce(s.extractor, '') <> 'hybrid')"
        else:
            other = spacy
        rows = self.store.sql(
            "SELECT m.conversation, m.message_id FROM messages m "
            "LEFT JOIN sources s ON s.source_id = m.source_id "
            "WHERE m.conversation IN (SELECT unnest($1::VARCHAR[])) "
            f"{'AND s.path = $4 ' if path is not None else ''}"
            "AND regexp_matches(m.text, '\\S') AND ("
            "(NOT EXISTS (SELECT 1 FROM extractions e WHERE e.mkey = m.mkey AND e.model = $2) "
            "AND NOT EXISTS (SELECT 1 FROM extraction_failures f WHERE f.mkey = m.mkey "
            "AND f.model = $2)) "
            "OR EXISTS (SELECT 1 FROM semantic_refs r WHERE r.mkey = m.mkey "
            f"AND r.extractor = '{LLM_EXTRACTOR}' AND r.extractor_version <> $3) "
            "OR EXISTS (SELECT 1 FROM extractions e WHERE e.mkey = m.mkey "
            "AND e.prompt_version <> $3) "
            f"OR {other})",
            [conversations, model, prompt, *([path] if path is not None else [])],
        )
        return {(str(c), str(i)) for c, i in rows}

    def _written_from(
        self, source: Source, existing: dict[tuple[str, str], tuple[int, int, int]]
    ) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], int]]:
        """What an earlier version of ``source``'s file wrote into its conversations (key
        -> mkey): the messages from its path, and those from paths gone from disk of a
        conversation named after it (the file moved: they are its own only if it still
        holds one of them, see :meth:`_pending`). A conversation another file on disk
        also writes to gives none: a message may be in both files."""
        path = Path(source.path)
        here = str(path.resolve())
        owners = self.store.message_inputs({c for c, _ in existing})
        paths: dict[str, set[str]] = {}
        for (conversation, _), owner in owners.items():
            paths.setdefault(conversation, set()).add(owner)
        shared = {c for c, found in paths.items() if any(Path(p).exists() for p in found - {here})}
        mine: dict[tuple[str, str], int] = {}
        moved: dict[tuple[str, str], int] = {}
        for key, owner in owners.items():
            if key not in existing or key[0] in shared:
                continue
            if owner == here:
                mine[key] = existing[key][0]
            elif _named_after(key[0], path):
                moved[key] = existing[key][0]
        return mine, moved

    def _numbered(self, todo: list[Pending]) -> list[Pending]:
        """``todo`` with its new messages numbered (and made memories, for a memory)."""
        new = sum(1 for p in todo if p.status == "new")
        next_mkey = self.store.reserve_ids(new, 0)[0] if new else 0
        for i, pending in enumerate(todo):
            if pending.status == "new":
                memory = None
                if self.memory is not None:
                    memory = replace(self.memory, created_at=pending.message.timestamp)
                todo[i] = replace(pending, mkey=next_mkey, memory=memory)
                next_mkey += 1
        return todo

    def write(
        self,
        todo: list[Pending],
        knowledge: Iterable[list[SemanticRef]],
        conversations: list[Conversation],
        *,
        delete: Sequence[int] = (),
        before_commit: Callable[[StoreTransaction], None] | None = None,
    ) -> IngestReport:
        """A live write (a memory): the messages and their knowledge, and the messages to
        delete, in one store transaction with no ingest log entry, then the text index.
        ``before_commit`` writes what else belongs to the same transaction. The knowledge
        is all extracted before the store is touched (the store is held from the first
        row to the commit)."""
        report = IngestReport(path="(live)", format="live", conversations=[])
        pairs = list(zip(todo, knowledge, strict=True))
        reserve = sum(len(refs) for _, refs in pairs)
        self._write(iter(pairs), None, conversations, report, delete, before_commit, reserve)
        for warning in report.warnings:  # a live write's caller has no report to show
            log.warning("%s", warning)
        return report

    def _write(
        self,
        pairs: Paired,
        record: SourceRecord | None,
        conversations: list[Conversation],
        report: IngestReport,
        delete: Sequence[int] = (),
        before_commit: Callable[[StoreTransaction], None] | None = None,
        reserve: int | None = None,
        size: int = 0,
        gone: Sequence[int] | None = None,
        group: _Group | None = None,
    ) -> None:
        """Store the messages and their knowledge in one transaction, then the text index.
        An ingest (with a ``record``) is staged while its knowledge is extracted and merged
        at the end (its text index written by a process of its own from
        :data:`SEGMENT_PROCESS_MIN` messages in its input, ``size``); a live write goes
        straight in, with ``reserve`` ref numbers taken at once. A small input of an ingest
        goes into its ``group``'s transaction (see :class:`_Group`), committed later."""
        if group is not None and record is not None:
            self._write_grouped(pairs, record, conversations, report, gone, group)
            return
        self._catch_up_text_index()
        folder = new_staging_folder(self.workspace) if record and self.workspace else None
        transaction: StoreTransaction | None = None
        writer: TextIndexWriter | None = None
        numbers = _RefNumbers(self.store, live=folder is None)
        if reserve is not None:
            numbers.reserve(reserve)
        settings = self._unsaved_settings()
        identity = self._llm_identity()
        prompt = identity[2] if identity is not None else None
        try:
            if folder is not None:
                transaction = self.store.stage(folder, record, conversations, settings)
                writer = self.text_index.stage(folder, background=size >= SEGMENT_PROCESS_MIN)
            else:
                transaction = self.store.begin(record, conversations, settings)
                writer = self.text_index.writer()
            if delete:
                transaction.delete(delete)
                for mkey in delete:
                    writer.delete(mkey)
            self._fill(transaction, writer, numbers, pairs, record, report, gone, prompt)
            # 3. The store commits first; the text index then says which generation it has.
            # An ingest's text index writes its segment on a thread meanwhile (while the
            # store merges in DuckDB, outside the interpreter's lock, and makes the
            # digests); the store commits only once it is written, so a segment that
            # cannot be written fails the ingest whole, and a store commit that fails (a
            # digest, Ctrl-C) cancels the segment rather than wait for it. A live write has
            # nothing to prepare: no thread.
            prepared = _Beside(writer.prepare, threaded=folder is not None)
            try:
                faults.point("store-commit")
                hook, held, store = before_commit, transaction, self.store
                digest = self.digest if record is not None else None
                generation = transaction.commit(
                    None if hook is None else (lambda: hook(held)),
                    None if digest is None else (lambda conversation: digest(store, conversation)),
                    prepared.wait,
                )
            except BaseException:
                writer.cancel()  # a segment process still writing stops now
                raise
            finally:
                prepared.join()
        except BaseException:
            if transaction is not None:
                transaction.rollback()
            if writer is not None:
                writer.cancel()
            if folder is not None:
                remove_staging_folder(folder)
            # Stop the extractor now (its workers, its requests in flight), not at GC time.
            close = getattr(pairs, "close", None)
            if callable(close):
                close()
            raise
        problem = _commit_text(writer, generation, folder)
        if problem is not None:
            report.warnings.append(problem)

    def _fill(
        self,
        transaction: StoreTransaction,
        writer: TextIndexWriter,
        numbers: _RefNumbers,
        pairs: Iterable[tuple[Pending, list[SemanticRef]]],
        record: SourceRecord | None,
        report: IngestReport,
        gone: Sequence[int] | None,
        prompt: str | None,
    ) -> None:
        """Add the messages and their knowledge to ``transaction`` and ``writer``, a chunk
        at a time, then delete the ``gone`` ones; ``record`` takes the counts."""
        chunk = _Chunk()
        for pending, refs in pairs:
            mkey, message = pending.mkey, pending.message
            stored = StoredMessage(mkey=mkey, message=message, memory=pending.memory)
            first_ref = numbers.take(len(refs))
            if pending.status != "new":
                writer.delete(mkey)
            writer.add(indexed_message(stored, refs, first_ref))
            chunk.refs.extend((first_ref + i, mkey, r) for i, r in enumerate(refs))
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
                        prompt_version=prompt,
                    )
                )
            (chunk.new if pending.status == "new" else chunk.changed).append(stored)
            chunk.same += pending.status == "same"
            if len(chunk) >= CHUNK_MESSAGES:
                self._flush(transaction, chunk, report)
                chunk = _Chunk()
        self._flush(transaction, chunk, report)
        if gone:  # known once every message was read: deleted last
            transaction.delete(gone)
            for mkey in gone:
                writer.delete(mkey)
            report.messages_removed = len(gone)
        if record is not None:
            record.messages_added = report.messages_added
            record.messages_updated = report.messages_updated
            record.messages_unchanged = report.messages_unchanged - report.messages_reextracted
            record.refs_added = report.refs_added

    def _write_grouped(
        self,
        pairs: Paired,
        record: SourceRecord,
        conversations: list[Conversation],
        report: IngestReport,
        gone: Sequence[int] | None,
        group: _Group,
    ) -> None:
        """Add one small input to its group's transaction (begun by the group's first
        input). Its knowledge is all extracted before anything of it is added: an input
        given up (it changed while read, its extraction failed) leaves nothing in the
        transaction."""
        waiting = group.transaction.buffered() if group.transaction is not None else set()
        if group.transaction is not None and waiting & {c.id for c in conversations}:
            group.transaction.flush()  # what this input is compared with must be read
        try:
            extracted = list(pairs)
        except BaseException:
            close = getattr(pairs, "close", None)
            if callable(close):
                close()
            raise
        identity = self._llm_identity()
        prompt = identity[2] if identity is not None else None
        if group.transaction is None:
            self._catch_up_text_index()
            settings = self._unsaved_settings()
            group.transaction = group.store.begin_sources(record, conversations, settings)
            group.began = time.monotonic()
            try:
                assert self.workspace is not None  # see _groupable
                group.folder = new_staging_folder(self.workspace)
                group.writer = self.text_index.stage(group.folder)
            except BaseException:
                group.abort()
                raise
        else:
            settings = self._unsaved_settings()
            group.transaction.next_source(record, conversations, settings)
        assert group.writer is not None
        try:
            self._fill(
                group.transaction,
                group.writer,
                group.numbers,
                extracted,
                record,
                report,
                gone,
                prompt,
            )
        except BaseException:
            group.abort()
            raise

    def _catch_up_text_index(self) -> None:
        """Rebuild the text index from the store when it is behind it: an earlier write of
        this process committed the store and then failed to commit the text index (Ctrl-C,
        a full disk) and the process went on. Done before this write, so that its commit
        never marks the text index with a generation whose documents it does not hold."""
        generation = self.store.generation()
        if self.text_index.generation() != generation:
            self.text_index.rebuild(indexed_documents(self.store), generation)

    def _unsaved_settings(self) -> dict[str, str]:
        """The index settings the store does not hold yet (written with the next write)."""
        unsaved = {k: v for k, v in self.settings.items() if self.store.get_setting(k) != v}
        if not unsaved:
            self.settings = {}  # saved once, they stay (an index's settings never change)
        return unsaved

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
        report.messages_updated += len(chunk.changed) - chunk.same
        report.messages_unchanged += chunk.same
        report.messages_reextracted += chunk.same
        report.refs_added += len(chunk.refs)


def indexed_documents(
    store: KnowledgeStore, advance: Callable[[int], None] | None = None
) -> Iterator[IndexedMessage]:
    """Every message of the store as the text index holds it (to rebuild the index), read
    in batches of 2,000; ``advance`` is told each batch's size once it is yielded."""
    batch: list[StoredMessage] = []
    for stored in store.iter_messages():
        batch.append(stored)
        if len(batch) == 2000:
            yield from _indexed_batch(store, batch, advance)
            batch = []
    yield from _indexed_batch(store, batch, advance)


def _indexed_batch(
    store: KnowledgeStore, batch: list[StoredMessage], advance: Callable[[int], None] | None
) -> Iterator[IndexedMessage]:
    refs = store.refs_for_messages([s.mkey for s in batch])
    for stored in batch:
        yield indexed_message(stored, refs[stored.mkey])
    if advance is not None and batch:
        advance(len(batch))


def failed_extractors(store: KnowledgeStore, mkeys: Sequence[int] | None = None) -> dict[int, str]:
    """The extractor that made each failed extraction (of ``mkeys``; None: all), by mkey:
    ``hybrid`` for a message that holds spaCy's knowledge beside its LLM failure (only the
    hybrid gives both), otherwise the extractor of the ingest that wrote the message, when
    it is an LLM one (a message absent here: unknown)."""
    where = "" if mkeys is None else "AND f.mkey IN (SELECT unnest($1::BIGINT[]))"
    rows = store.sql(
        "SELECT f.mkey, EXISTS (SELECT 1 FROM semantic_refs r WHERE r.mkey = f.mkey AND "
        f"r.extractor = '{SPACY_EXTRACTOR}'), s.extractor "
        "FROM (SELECT DISTINCT mkey FROM extraction_failures) f "
        "JOIN messages m ON m.mkey = f.mkey LEFT JOIN sources s ON s.source_id = m.source_id "
        f"WHERE true {where}",
        [[int(k) for k in mkeys]] if mkeys is not None else [],
    )
    found: dict[int, str] = {}
    for mkey, spacy, source in rows:
        if spacy:
            found[int(mkey)] = "hybrid"
        elif source in ("llm", "hybrid"):
            found[int(mkey)] = str(source)
    return found


@dataclass
class _Claim:
    """An input of this ingest that holds a conversation: its path, and its message ids
    in a conversation (read when asked)."""

    path: Path
    ids: Callable[[str], dict[str, int]]


def _message_ids(read: Callable[[], Iterable[Message]]) -> Callable[[str], dict[str, int]]:
    """A conversation's messages among those ``read`` gives, as ``id -> content hash``,
    read once, the first time they are asked for."""
    found: dict[str, dict[str, int]] | None = None

    def ids(conversation: str) -> dict[str, int]:
        nonlocal found
        if found is None:
            found = {}
            for m in read():
                found.setdefault(m.conversation, {})[m.id] = m.content_hash()
        return found.get(conversation, {})

    return ids


#: Formats of exports that hold a chat's latest messages only: a newer export of a long
#: chat may start later than the one ingested before (see :func:`_shifted`).
WINDOWED_FORMATS = frozenset({"whatsapp"})
#: How many of a file's first messages :func:`_shifted` lines up with an earlier version.
ALIGN_MESSAGES = 5


def _shifted(
    messages: Iterable[Message], existing: dict[tuple[str, str], tuple[int, int, int]]
) -> tuple[Iterator[Message], dict[str, int]]:
    """``messages`` with ids that line up with an earlier version of their file, and the
    shift of each conversation whose ids moved.

    WhatsApp numbers messages by place (1, 2, ...), and exports a chat's latest 40,000
    messages (10,000 with media): a newer export of a long chat starts later than the one
    ingested before. Its message 1 is the earlier one's message ``k + 1``, and by place
    every message would read as edited and the first ``k`` as gone. When a conversation's
    messages are numbered by place, its message 1 is not the earlier version's message 1,
    and one of its first :data:`ALIGN_MESSAGES` messages, message ``n``, is the earlier
    version's message ``k + n`` (the same speaker, time and text), they are renumbered
    from ``k + 1``, ids and ordinals (of several such ``k``, the one at which most of its
    first messages are the earlier version's); the caller keeps the earlier version's
    first ``k``."""
    stream = iter(messages)
    head = list(itertools.islice(stream, ALIGN_MESSAGES))
    firsts: dict[str, list[Message]] = {}
    for message in head:
        firsts.setdefault(message.conversation, []).append(message)
    shifts: dict[str, int] = {}
    for conversation, found in firsts.items():
        by_place = [m.content_hash() for m in found]
        first = existing.get((conversation, "1"))
        if (
            [m.id for m in found] != [str(n) for n in range(1, len(found) + 1)]
            or [m.ordinal for m in found] != list(range(len(found)))
            or first is None
            or first[1] == by_place[0]
        ):
            continue
        # Where the earlier version holds any of the first messages (the first may have
        # been edited since, or exported with its media once and without once): the
        # shift at which most of them are the earlier version's (the rest are edited, or
        # new ones past its last message).
        places = {digest: n for n, digest in reversed(list(enumerate(by_place, start=1)))}
        starts = sorted(
            {
                int(mid) - places[digest]
                for (conv, mid), (_, digest, ordinal) in existing.items()
                if conv == conversation and digest in places and mid == str(ordinal + 1)
            }
        )
        matches = {
            shift: sum(
                (old := existing.get((conversation, str(n + shift)))) is not None
                and old[1] == digest
                for n, digest in enumerate(by_place, start=1)
            )
            for shift in starts
            if shift > 0
        }
        if matches:
            shifts[conversation] = max(matches, key=lambda k: (matches[k], -k))

    def renumbered() -> Iterator[Message]:
        for message in itertools.chain(head, stream):
            shift = shifts.get(message.conversation)
            if shift and message.id.isdigit():
                message = message.model_copy(
                    update={"id": str(int(message.id) + shift), "ordinal": message.ordinal + shift}
                )
            yield message

    return renumbered(), shifts


#: Formats whose files hold their conversations whole (a chat export, a transcript): a
#: message an earlier version had and this one has not was deleted, or its ids moved
#: (WhatsApp numbers messages by place), so it is removed. Files of their own message ids
#: in other formats may hold part of a history (a mailbox holds part of its threads, a
#: Slack export a date range): what they leave out is kept.
WHOLE_FORMATS = frozenset({"whatsapp", "imessage", "transcript", "webvtt", "chatgpt", "locomo"})


def _named_after(conversation: str, path: Path) -> bool:
    """Whether an importer named a conversation after its file: the file's name
    ("meeting"), numbered for a file of several ("locomo-2"), or a WhatsApp chat's folder."""
    stem = path.stem
    if conversation == stem or (
        stem.lower() in ("_chat", "chat") and conversation == path.resolve().parent.name
    ):
        return True
    number = conversation.removeprefix(f"{stem}-")
    return number != conversation and number.isdigit()


def _check_failed(failed: list[tuple[InputError, Path]], found_in: dict[Path, Path]) -> InputError:
    """The error of an ingest whose check of its inputs failed: the one input's error, or
    all of them (the first :data:`MAX_FAILED_INPUTS`). Either says how to leave out the
    files a folder argument brought in (a README or notes beside the chats would
    otherwise stop the whole ingest)."""
    shown = failed[:MAX_FAILED_INPUTS]
    within = [
        glob.escape(shown_path(path.relative_to(found_in[path]).as_posix()))
        for _, path in shown
        if path in found_in
    ]
    flags = " ".join(f"--exclude {shlex.quote(w)}" for w in within)
    over_http = f'(over HTTP: "exclude": {json.dumps(within, ensure_ascii=False)})'
    if len(failed) == 1:
        exc, path = failed[0]
        if within:
            leave_out = (
                f"it was found in the folder {shown_path(found_in[path])}: to leave it out, "
                f"pass {flags} {over_http}"
            )
            exc.hint = f"{exc.hint}; or, {leave_out}" if exc.hint else leave_out
        return exc
    hint = f"to leave out the files found in folders, pass {flags} {over_http}" if within else None
    return InputErrors([exc for exc, _ in shown], more=len(failed) > len(shown), hint=hint)


class _Beside:
    """``work`` run on a thread of its own, started at once (or, not ``threaded``, run
    here and now; :meth:`wait` still raises what it raised)."""

    def __init__(self, work: Callable[[], None], *, threaded: bool = True) -> None:
        self._work = work
        self._failed: list[BaseException] = []
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(target=self._run, name="structrag-beside")
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            self._work()
        except BaseException as exc:  # raised in the caller's thread by wait()
            self._failed.append(exc)

    def join(self) -> None:
        """Wait for the work to end, even through a Ctrl-C (which is raised after it): what
        follows may remove what the work is writing."""
        if self._thread is None:
            return
        interrupted = False
        while True:
            try:
                self._thread.join()
                break
            except KeyboardInterrupt:
                interrupted = True
        if interrupted:
            raise KeyboardInterrupt

    def wait(self) -> None:
        """Wait for the work to end and raise what it raised."""
        self.join()
        if self._failed:
            raise self._failed[0]


class _RefNumbers:
    """Numbers for semantic refs, reserved from the store: one at a time for a live write,
    in blocks for an ingest (a message's refs are numbered consecutively)."""

    BLOCK = 100_000

    def __init__(self, store: KnowledgeStore, *, live: bool) -> None:
        self.store = store
        self.live = live
        self.next = self.end = 0

    def reserve(self, count: int) -> None:
        """Reserve ``count`` numbers now (all a live write needs, in one go)."""
        _, self.next = self.store.reserve_ids(0, count)
        self.end = self.next + count

    def take(self, count: int) -> int:
        if self.next + count > self.end:
            self.reserve(count if self.live else max(count, self.BLOCK))
        first = self.next
        self.next += count
        return first


def _imported(
    windows: Iterable[list[Pending]],
    knowledge: list[SemanticRef] | ImportedRefs,
    progress: ProgressSink | None,
) -> Paired:
    """Each message with the knowledge its file brought for it."""
    if isinstance(knowledge, list):
        imported: dict[tuple[str, str], list[SemanticRef]] = {}
        for ref in knowledge:
            imported.setdefault((ref.conversation, ref.message_id), []).append(ref)

        def refs_of(message: Message) -> list[SemanticRef]:
            return imported.get((message.conversation, message.id), [])

    else:
        refs_of = knowledge.of
    for window in windows:
        if progress:
            progress.advance(len(window))
        for p in window:
            yield p, refs_of(p.message)
