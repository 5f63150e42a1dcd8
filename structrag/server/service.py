"""The server's engine room: one writer, a pool of readers, background ingest jobs.

A :class:`Service` opens an index once and keeps it warm (the spaCy pipeline, the query
engine's caches). DuckDB lets one process write an index; inside this one, a single
thread writes: :meth:`Service.write` queues work for it and waits, so writes run one at a
time, in the order they came. Reads run at the same time on a pool of readers
(:meth:`Service.read`), each with its own DuckDB connection and text-index reader. A
reader pins one committed state for a whole request (the store's snapshot and the text
index at the same generation), so it never sees half of a write; while a write is under
way, readers see the state before it.

Ingest runs as background jobs (:class:`Job`): every input is checked before the job is
queued (one that is malformed is refused then, and nothing is written; the job checks
again a file that changed while it waited), then each file is one write, so memory
writes queued in the meantime go in between files. A job can be cancelled; the file
being written is then rolled back, files finished before it stay.

With no readers (``readers=0``: ``structrag mcp`` on stdio, one agent's calls) reads run
on the writer's lane too, one call at a time, and nothing pins the index's file: between
calls the process gives it up to another that waits for it (``structrag stats``, a
``memory add``), as every command does.

Reads of memories through the memory API count as reads (``access_count``); here they
run on a read-only connection, so the counts are written afterwards by the writer, in a
batch (:meth:`Service.count_reads`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import re
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from structrag import faults, shapes
from structrag.errors import IndexStateError, NotFoundError, StructragError
from structrag.index import Index, IngestOptions
from structrag.ingest import IngestReport
from structrag.memory.api import Memory
from structrag.memory.records import MemoryRecord
from structrag.memory.store import MemoryQuery
from structrag.query.settings import DEFAULT_SETTINGS, RankingSettings
from structrag.store.duckdb.store import ReaderStore

T = TypeVar("T")
log = logging.getLogger("structrag.server")

#: How long a reader waits for the store and the text index to agree (a writer is
#: between its two commits) before giving up.
PIN_TIMEOUT = 30.0
#: How many finished jobs are remembered.
KEEP_JOBS = 200
#: Context-window line ids that are no memory (profile entries, summaries, observations).
_DERIVED = ("profile-", "summary-", "observation-")


class ServerClosing(StructragError, RuntimeError):
    """The server is shutting down and takes no more writes (HTTP 503)."""


class JobCancelled(StructragError):
    """An ingest job was cancelled; raised inside the write, which rolls back."""


class BatchItemError(StructragError):
    """A question of a batch failed: why, and which one (``number``, from 0; the error's
    ``position``)."""

    def __init__(self, number: int, cause: StructragError) -> None:
        super().__init__(cause.message, hint=cause.hint)
        self.number = number
        self.cause = cause


class ShownError(StructragError):
    """An error as the API shows it, with an upload's temporary paths replaced by the
    names it was uploaded as (``shown``: :func:`error_dict`'s answer); the status is the
    ``cause``'s."""

    def __init__(self, cause: StructragError, shown: dict[str, Any]) -> None:
        super().__init__(str(shown.get("message", cause.message)), hint=shown.get("hint"))
        self.cause = cause
        self.shown = shown


class _Reader:
    """One reader: its own view of the index (see :meth:`Index.reader`)."""

    def __init__(self, writer: Index) -> None:
        self.index = writer.reader()
        store = self.index.store
        if not isinstance(store, ReaderStore):
            raise TypeError("Index.reader() gave a store that is not a ReaderStore")
        self.store = store
        self._seen: int | None = None  # the text-index generation the searcher has

    @contextmanager
    def pinned(self) -> Iterator[Index]:
        """The index at one committed state: the store's snapshot and the text index at
        the same generation.

        The writer commits the store, then the text index, then marks the text index
        with the store's generation. Reading that mark, then (re)opening the text index,
        then the store's generation inside a snapshot, then the mark again, and finding
        all three equal, proves the text index holds exactly that generation: the mark
        was written after its commit, and the next commit comes after the store's next
        one, which the snapshot does not see.
        """
        text = self.index.text_index
        deadline = time.monotonic() + PIN_TIMEOUT
        while True:
            stack = ExitStack()
            try:
                mark = text.generation()
                if mark is None or mark != self._seen:
                    text.refresh()
                    self._seen = mark
                generation = stack.enter_context(self.store.snapshot())
                agreed = mark == generation == text.generation()
            except OSError:  # the text index's files moved under us (a commit): again
                agreed = False
            if agreed:
                break
            stack.close()
            self._seen = None
            if time.monotonic() > deadline:
                raise IndexStateError(
                    "the store and the text index did not agree for "
                    f"{PIN_TIMEOUT:g} s (a write seems stuck between its two commits)",
                    hint="restart the server: opening the index repairs the text index",
                )
            time.sleep(0.002)
        with stack:
            yield self.index

    def close(self) -> None:
        self.index.close()


@dataclass
class Job:
    """A background ingest, and how far it got."""

    id: str
    inputs: list[str]
    options: dict[str, Any]
    state: str = "queued"  # queued, checking, running, done, failed, cancelled
    created_at: str = field(default_factory=lambda: _now().isoformat())
    started_at: str | None = None
    finished_at: str | None = None
    #: Messages to read in all (new, edited and unchanged ones of the files that changed),
    #: and how many were read so far.
    total: int = 0
    done: int = 0
    files_total: int = 0
    files_done: int = 0
    current: str | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    error: dict[str, Any] | None = None
    #: Names the job shows for its inputs (uploads are written under temporary paths).
    names: dict[str, str] = field(default_factory=dict)
    uploads: Path | None = None
    cancel: threading.Event = field(default_factory=threading.Event)
    #: The check made before the job was queued (its estimate, the size and time of each
    #: file it read, the store's generation): reused when none of them changed since.
    checked: tuple[dict[str, Any], list[tuple[str, int, int]], int] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": "ingest",
            "state": self.state,
            "inputs": [self.names.get(i, i) for i in self.inputs],
            "options": self.options,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "progress": {
                "messages": self.done,
                "messages_total": self.total,
                "files": self.files_done,
                "files_total": self.files_total,
                "current": self.names.get(self.current, self.current) if self.current else None,
            },
            "reports": self.reports,
            "error": self.error,
        }


class _JobProgress:
    """A :class:`~structrag.ingest.ProgressSink` that counts into a job, and stops the
    ingest (which then rolls back) when the job is cancelled."""

    def __init__(self, job: Job) -> None:
        self.job = job

    def start(self, total: int, label: str) -> None:
        self._check()

    def advance(self, n: int) -> None:
        self._check()
        self.job.done += n

    def finish(self) -> None:
        pass

    def _check(self) -> None:
        if self.job.cancel.is_set():
            raise JobCancelled("the job was cancelled; the file being written was rolled back")


def error_dict(exc: BaseException) -> dict[str, Any]:
    """An error as the API shows it (see :mod:`structrag.server.app`): ``code``,
    ``message``, ``hint`` and, where one applies, ``position``."""
    from structrag.errors import InputErrors, QuerySyntaxError

    if not isinstance(exc, StructragError):
        return {"code": "internal", "message": f"{type(exc).__name__}: {exc}", "hint": None}
    if isinstance(exc, BatchItemError):
        return {**error_dict(exc.cause), "position": exc.number}
    if isinstance(exc, ShownError):
        return dict(exc.shown)
    data: dict[str, Any] = {
        "code": error_code(exc),
        "message": exc.message,
        "hint": exc.hint,
    }
    if isinstance(exc, QuerySyntaxError):
        data.update(position=exc.position, line=exc.line, column=exc.column, snippet=exc.snippet)
    if isinstance(exc, InputErrors):  # each input that failed, as its own error
        data["errors"] = [error_dict(each) for each in exc.errors]
        return data
    line = getattr(exc, "line", None)
    if "position" not in data and isinstance(line, int):
        data["position"] = {"path": getattr(exc, "path", None), "line": line}
        column = getattr(exc, "column", None)
        if isinstance(column, int):
            data["position"]["column"] = column
    return data


def error_code(exc: StructragError) -> str:
    """A stable, machine-readable name for an error: its class, in snake case."""
    name = type(exc).__name__
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


class Service:
    """An index, open for serving: see the module docstring."""

    def __init__(
        self,
        directory: str | Path,
        *,
        readers: int = 2,
        settings: RankingSettings = DEFAULT_SETTINGS,
        warm: bool = True,
    ) -> None:
        if readers < 0:
            raise ValueError("a service's readers are 0 or more")
        self.directory = Path(directory)
        self.instance = secrets.token_hex(8)
        self.started = _now()
        self._started = time.monotonic()
        self.writer = Index(self.directory, settings=settings)
        self.notes = list(self.writer.notes)
        self._write_lane = ThreadPoolExecutor(1, thread_name_prefix="structrag-write")
        self._job_lane = ThreadPoolExecutor(1, thread_name_prefix="structrag-jobs")
        self._readers: queue.LifoQueue[_Reader] = queue.LifoQueue()
        self._all_readers: list[_Reader] = []
        try:
            for _ in range(readers):
                reader = _Reader(self.writer)
                self._all_readers.append(reader)
                self._readers.put(reader)
        except BaseException:
            self._close_indexes()
            raise
        self._closing = threading.Event()
        self._closed = False
        self._jobs: dict[str, Job] = {}
        self._jobs_lock = threading.Lock()
        self._reads: list[tuple[str, tuple[str, ...]]] = []
        self._reads_lock = threading.Lock()
        self._reads_queued = False
        if warm:
            self.warm()

    # -- lanes ----------------------------------------------------------------------------

    def read(self, fn: Callable[[Index], T]) -> T:
        """Run ``fn`` on a reader, at one committed state of the index (with no readers:
        on the writer, in turn with the writes)."""
        if not self._all_readers:
            return self._on_writer(fn)
        while True:
            if self._closed:
                raise ServerClosing("the server has shut down")
            with contextlib.suppress(queue.Empty):
                reader = self._readers.get(timeout=0.5)
                break
        try:
            with reader.pinned() as index:
                return fn(index)
        finally:
            self._readers.put(reader)

    def write(self, fn: Callable[[Index], T]) -> T:
        """Run ``fn`` on the writer (one write at a time, in order) and wait for it."""
        return self.submit_write(fn).result()

    def _on_writer(self, fn: Callable[[Index], T]) -> T:
        """A read with no readers: on the writer's lane, so it never sees half a write."""
        try:
            if self._closed:
                raise RuntimeError("closed")
            future = self._write_lane.submit(fn, self.writer)
        except RuntimeError:  # the lane was shut down
            raise ServerClosing("the server has shut down") from None
        return future.result()

    def submit_write(self, fn: Callable[[Index], T]) -> Future[T]:
        if self._closing.is_set():
            raise ServerClosing(
                "the server is shutting down and takes no more writes",
                hint="wait for it to stop, then start it again",
            )
        return self._write_lane.submit(fn, self.writer)

    def memory_read(self, agent: str, fn: Callable[[Memory], T]) -> T:
        return self.read(lambda index: fn(index.memory(agent)))

    def memory_write(self, agent: str, fn: Callable[[Memory], T]) -> T:
        return self.write(lambda index: fn(index.memory(agent)))

    def warm(self) -> None:
        """Load the pipeline and fill every reader's caches with one question (the first
        question after start then takes milliseconds, not seconds)."""
        from structrag.nlp.pipeline import parse

        parse("Warm the pipeline up before the first request.")
        counts = self.writer.stats()
        if not counts["messages"] and not any(counts["memories"].values()):
            return
        if not self._all_readers:
            self._on_writer(lambda index: index.ask("What happened?", budget=200))
        for reader in self._all_readers:
            with reader.pinned() as index:
                index.ask("What happened?", budget=200)

    # -- what the HTTP API and the MCP tools call (JSON shapes, as the CLI prints) --------

    def stats(self) -> dict[str, Any]:
        return self.read(lambda index: index.stats())

    def conversations(self) -> list[dict[str, Any]]:
        return self.read(lambda index: index.conversation_summaries())

    def messages(
        self, conversation: str, *, offset: int = 0, limit: int = 50, around: str | None = None
    ) -> dict[str, Any]:
        """A page of a conversation's messages; ``around``: the page holding that message
        (one the conversation does not hold is not found, not its first page)."""

        def page(index: Index) -> dict[str, Any]:
            found = shapes.message_page(
                index, conversation, offset=offset, limit=limit, around=around
            )
            if (
                around is not None
                and not index.sql(
                    "SELECT count(*) FROM v_messages WHERE conversation = ? AND message_id = ?",
                    [conversation, around],
                )[0][0]
            ):
                raise NotFoundError(
                    f"no message {around!r} in conversation {conversation!r}",
                    hint="around takes the id of one of the conversation's messages",
                )
            return found

        return self.read(page)

    def show(self, message_id: str, conversation: str | None = None) -> dict[str, Any]:
        return self.read(lambda index: index.show(message_id, conversation))

    def entities(self, top: int = 20, conversation: str | None = None) -> list[dict[str, Any]]:
        return self.read(lambda index: index.entities(top, conversation))

    def entity(self, name: str, conversation: str | None = None) -> dict[str, Any]:
        return self.read(lambda index: shapes.entity_json(index, name, conversation=conversation))

    def topics(self, top: int = 20, conversation: str | None = None) -> list[dict[str, Any]]:
        return self.read(lambda index: index.topics(top, conversation))

    def agents(self) -> list[dict[str, Any]]:
        return self.read(shapes.agents_json)

    def query(
        self,
        expression: str,
        *,
        conversation: str | None = None,
        limit: int = 20,
        explain: bool = False,
    ) -> dict[str, Any]:
        return self.read(
            lambda index: shapes.query_json(
                index,
                index.query(expression, conversation=conversation, limit=limit),
                explain=explain,
            )
        )

    def ask(self, question: str, *, explain: bool = False, **options: Any) -> dict[str, Any]:
        """``options``: those of :meth:`Index.ask` (conversation, budget, encoding,
        translator, answer, sources)."""
        return self.read(
            lambda index: shapes.answer_json(index.ask(question, **options), explain=explain)
        )

    def ask_batch(
        self, questions: Sequence[dict[str, Any]], *, explain: bool = False, **defaults: Any
    ) -> list[dict[str, Any]]:
        """Answers in order. A question that fails stops the batch, and the error says
        which (its index in ``position``), as ``ask --batch`` names the line."""

        def work(index: Index) -> list[dict[str, Any]]:
            faults.point("serve-batch")
            answers = []
            for number, item in enumerate(questions):
                options = {**defaults, **{k: v for k, v in item.items() if v is not None}}
                question, extra = options.pop("question"), options.pop("id", None)
                try:
                    data = shapes.answer_json(index.ask(question, **options), explain=explain)
                except StructragError as exc:
                    raise BatchItemError(number, exc) from exc
                if extra is not None:
                    data["id"] = extra
                answers.append(data)
            return answers

        return self.read(work)

    def add_memory(self, agent: str, text: str, **fields: Any) -> dict[str, Any]:
        """``fields``: those of :meth:`Memory.add`."""
        return self.memory_write(agent, lambda mem: mem.add(text, **fields).as_added())

    def get_memory(self, agent: str, memory_id: str, room: str | None = None) -> dict[str, Any]:
        record = self.memory_read(agent, lambda mem: mem.get(memory_id, room))
        return self.counted(agent, [record])[0].as_dict()

    def recent_memories(self, agent: str, **options: Any) -> list[dict[str, Any]]:
        """``options``: those of :meth:`Memory.recent`."""
        found = self.memory_read(agent, lambda mem: mem.recent(**options))
        return shapes.records_json(self.counted(agent, found))

    def search_memories(self, agent: str, query: str, **options: Any) -> list[dict[str, Any]]:
        """``options``: those of :meth:`Memory.search`."""
        hits = self.memory_read(agent, lambda mem: mem.search(query, **options))
        counted = self.counted(agent, [h.memory for h in hits])
        return [replace(h, memory=m).as_dict() for h, m in zip(hits, counted, strict=True)]

    def count_memories(
        self, agent: str, room: str | None = None, table: str | None = None
    ) -> dict[str, Any]:
        count = self.memory_read(agent, lambda mem: mem.count(room, table))
        return shapes.count_json(agent, room, table, count)

    def update_memory(
        self, agent: str, memory_id: str, room: str | None = None, **fields: Any
    ) -> dict[str, Any]:
        """``fields``: those of :meth:`Memory.update`."""
        return self.memory_write(
            agent, lambda mem: mem.update(memory_id, room=room, **fields).as_dict()
        )

    def remove_conversation(self, conversation: str) -> dict[str, Any]:
        return {"removed": self.write(lambda index: index.remove_conversation(conversation))}

    def remove_memory(self, agent: str, memory_id: str, room: str | None = None) -> dict[str, Any]:
        self.memory_write(agent, lambda mem: mem.remove(memory_id, room))
        return {"removed": 1}

    def remove_memories(
        self, agent: str, room: str | None = None, table: str | None = None
    ) -> dict[str, Any]:
        return {"removed": self.memory_write(agent, lambda mem: mem.remove_all(room, table))}

    def prune(self, agent: str, older_than: str, *, apply: bool, **options: Any) -> dict[str, Any]:
        """``options``: those of :meth:`Memory.prune`; a dry run reads, ``apply`` writes."""
        run = self.memory_write if apply else self.memory_read
        return run(agent, lambda mem: mem.prune(older_than, dry_run=not apply, **options).as_dict())

    def context(self, agent: str, message: str, **options: Any) -> dict[str, Any]:
        """``options``: those of :meth:`Memory.context`."""
        window = self.memory_read(agent, lambda mem: mem.context(message, **options))
        self.count_reads(agent, [i for i in window.ids if not i.startswith(_DERIVED)])
        return window.as_dict()

    def facts(
        self, agent: str, user: str | None, room: str | None, *, history: bool = False
    ) -> list[dict[str, Any]]:
        return self.memory_read(
            agent, lambda mem: shapes.facts_json(mem, user, room, history=history)
        )

    def profile(self, agent: str, user: str, *, history: bool = False) -> list[dict[str, Any]]:
        entries = self.memory_read(agent, lambda mem: mem.profile(user, history=history))
        return [e.as_dict() for e in entries]

    def compact(self, agent: str, room: str, keep_recent: int | None = None) -> dict[str, Any]:
        def work(mem: Memory) -> dict[str, Any]:
            summary = mem.compact(room, keep_recent=keep_recent)
            return shapes.compact_json(summary, mem.observations(room))

        return self.memory_write(agent, work)

    # -- reads of memories ----------------------------------------------------------------

    def counted(self, agent: str, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """Records a reader returned, counted as read: the counts are written by the
        writer shortly (:meth:`count_reads`); the records say what they will be."""
        if not records:
            return list(records)
        self.count_reads(agent, [r.id for r in records])
        now = _now()
        return [replace(r, access_count=r.access_count + 1, last_access=now) for r in records]

    def count_reads(self, agent: str, ids: Sequence[str]) -> None:
        """Record a read of ``agent``'s memories ``ids`` (batched on the writer)."""
        if not ids:
            return
        with self._reads_lock:
            self._reads.append((agent, tuple(ids)))
            if self._reads_queued or self._closing.is_set():
                return
            self._reads_queued = True
        self._write_lane.submit(self._write_reads, self.writer)

    def _write_reads(self, index: Index) -> None:
        with self._reads_lock:
            batches, self._reads = self._reads, []
            self._reads_queued = False
        now = _now()
        for agent, ids in batches:
            try:
                store = index.memory(agent).parts.memory
                # Resolved again here: a memory removed since it was read is not counted.
                found = store.memories(MemoryQuery(agent, ids=ids, include_shared=True))
                store.touch([r.mkey for r in found], now)
            except Exception:  # a read count is not worth failing the writer over
                log.exception("could not count reads of %s's memories", agent)

    # -- ingest jobs ----------------------------------------------------------------------

    def start_ingest(
        self,
        paths: Sequence[str | Path],
        options: IngestOptions,
        *,
        names: dict[str, str] | None = None,
        uploads: Path | None = None,
    ) -> Job:
        """Check the inputs, then queue an ingest job; it runs in the background (see the
        module docstring). Options no input could be read with, an LLM extractor with no
        LLM configured and inputs that fail their check are refused here (the API's 400),
        not by the job; an upload's error names the file as it was uploaded."""
        if self._closing.is_set():
            raise ServerClosing("the server is shutting down and takes no more writes")
        names = dict(names or {})
        options.check()
        if options.extractor in ("llm", "hybrid") and options.llm is None:
            from structrag.llm.config import LLMConfig

            LLMConfig.resolve()  # no endpoint or model configured: a ConfigError now
        inputs = [str(p) for p in paths]

        def check(index: Index) -> tuple[dict[str, Any], int]:
            check_against_index(index, options)
            return index.estimate(inputs, options), index.store.generation()

        try:
            stamps = _stamps(inputs, options)
            estimate, generation = self.read(check)
        except StructragError as exc:
            raise ShownError(exc, _shown(names, error_dict(exc), form=uploads is not None)) from exc
        job = Job(
            id="job-" + secrets.token_hex(6),
            inputs=inputs,
            options=_options_dict(options),
            names=names,
            uploads=uploads,
            checked=(estimate, stamps, generation),
        )
        with self._jobs_lock:
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.finished_at is not None]
            for old in finished[: max(0, len(finished) - KEEP_JOBS)]:
                del self._jobs[old.id]
        self._job_lane.submit(self._run_job, job, options)
        return job

    def estimate(self, paths: Sequence[str], options: IngestOptions) -> dict[str, Any]:
        """What an ingest would do (:meth:`Index.estimate`); reads only."""

        def work(index: Index) -> dict[str, Any]:
            check_against_index(index, options)
            estimate: dict[str, Any] = index.estimate(paths, options)
            return estimate

        try:
            return self.read(work)
        except StructragError as exc:
            raise ShownError(exc, _shown({}, error_dict(exc))) from exc

    def job(self, job_id: str) -> Job:
        with self._jobs_lock:
            found = self._jobs.get(job_id)
        if found is None:
            raise NotFoundError(
                f"no job {job_id!r}", hint="jobs are kept in memory until the server stops"
            )
        return found

    def jobs(self) -> list[Job]:
        with self._jobs_lock:
            return list(self._jobs.values())

    def cancel_job(self, job_id: str) -> Job:
        job = self.job(job_id)
        if job.finished_at is None:
            job.cancel.set()
        return job

    def _run_job(self, job: Job, options: IngestOptions) -> None:
        from structrag.importers import expand_inputs

        job.started_at = _now().isoformat()
        form = job.uploads is not None
        try:
            if job.cancel.is_set():
                raise JobCancelled("the job was cancelled before it started")
            job.state = "checking"
            # Every input is read and checked before anything is written: again, unless
            # no file and nothing in the index changed since the check made before the
            # job was queued (another job may have written what these files clash with).
            checked, job.checked = job.checked, None
            generation = self.read(lambda index: index.store.generation())
            if (
                checked is not None
                and checked[1] == _stamps(job.inputs, options)
                and checked[2] == generation
            ):
                estimate = checked[0]
            else:
                estimate = self.read(lambda index: index.estimate(job.inputs, options))
            job.total = sum(
                s["messages_added"] + s["messages_updated"] + s["messages_unchanged"]
                for s in estimate["sources"]
                if not s["skipped"]
            )
            inputs = expand_inputs(job.inputs, options.exclude)
            job.files_total = len(inputs.paths)
            job.state = "running"
            progress = _JobProgress(job)
            for path in inputs.paths:
                if job.cancel.is_set():
                    raise JobCancelled("the job was cancelled between files")
                job.current = str(path)
                reports = self.write(
                    partial(_ingest_one, path=path, options=options, progress=progress)
                )
                job.reports.extend(_shown(job.names, r.as_dict(), form=form) for r in reports)
                job.files_done += 1
            for folder, why in inputs.skipped:
                job.reports.append({"path": folder, "format": "folder", "skipped": why})
            job.current = None
            job.state = "done"
        except JobCancelled as exc:
            job.state = "cancelled"
            job.error = error_dict(exc)
        except ServerClosing as exc:
            job.state = "cancelled"
            job.error = error_dict(exc)
        except StructragError as exc:
            job.state = "failed"
            job.error = _shown(job.names, error_dict(exc), form=form)
        except Exception as exc:
            log.exception("ingest job %s failed", job.id)
            job.state = "failed"
            job.error = error_dict(exc)
        finally:
            job.finished_at = _now().isoformat()
            if job.uploads is not None:
                shutil.rmtree(job.uploads, ignore_errors=True)

    # -- shutting down --------------------------------------------------------------------

    def begin_shutdown(self) -> None:
        """Take no more writes; cancel the jobs (the running write rolls back)."""
        self._closing.set()
        for job in self.jobs():
            job.cancel.set()

    def close(self) -> None:
        """Finish (or roll back) the running write, then close the index."""
        if self._closed:
            return
        self.begin_shutdown()
        self._job_lane.shutdown(wait=True, cancel_futures=True)
        self._write_lane.shutdown(wait=True)
        self._closed = True
        # Readers in flight finish before their connection closes.
        for _ in self._all_readers:
            with contextlib.suppress(queue.Empty):
                self._readers.get(timeout=PIN_TIMEOUT)
        self._close_indexes()

    def _close_indexes(self) -> None:
        for reader in self._all_readers:
            with contextlib.suppress(Exception):
                reader.close()
        self.writer.close()

    @property
    def uptime(self) -> float:
        return time.monotonic() - self._started

    @property
    def closing(self) -> bool:
        return self._closing.is_set()


#: The folder each upload is written under (``<temp>/structrag-upload-XXXX/<n>/<name>``).
UPLOAD_PREFIX = "structrag-upload-"
#: An upload's temporary folder in a path, with the folders before it.
_UPLOADED = re.compile(
    r"(?:[^\s'\"(]*[/\\])?" + re.escape(UPLOAD_PREFIX) + r"[A-Za-z0-9_]+[/\\]\d+[/\\]"
)
#: An ingest option as the CLI names it in a hint (``--conversation NAME``).
_OPTION = re.compile(
    r"--(format|conversation|encoding|date-order|exclude|force|extractor|embeddings|ner|workers)"
    r"\b(?: ([A-Z][A-Z_]*)\b)?"
)


def _shown(names: dict[str, str], data: Any, *, form: bool = False) -> Any:
    """``data`` (an error or a report, as the API shows it) as a client of the API sees
    it, in every string of it, however deep (the errors of ``input_errors`` are a list of
    dicts): each upload's temporary path replaced by the name it was uploaded as (an
    earlier upload's, which the index recorded, by ``upload:NAME``), and for an upload
    (``form``), the CLI's options in hints by the form's fields (a JSON body's fields are
    the CLI's options, which the CLI going through the server shows as they are)."""
    if isinstance(data, str):
        for path, name in names.items():
            data = data.replace(path, name)
        data = _UPLOADED.sub("upload:", data)
        return _OPTION.sub(_field, data) if form else data
    if isinstance(data, dict):
        return {key: _shown(names, value, form=form) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(_shown(names, value, form=form) for value in data)
    return data


def _field(match: re.Match[str]) -> str:
    """An option of the CLI's as an upload's form field."""
    name, value = match.group(1).replace("-", "_"), match.group(2)
    return f"the form field {name}" + (f" (-F {name}={value})" if value else "")


def check_against_index(index: Index, options: IngestOptions) -> None:
    """Refuse, before a job is queued, options the index cannot take (the job would fail
    on them): an embedding model other than the one the index was built with."""
    index.check_embeddings(options.embeddings, option='"embeddings"')


def _stamps(inputs: Sequence[str], options: IngestOptions) -> list[tuple[str, int, int]]:
    """The files an ingest of ``inputs`` reads, each with its size and modification time
    (a missing one as -1: its check fails by name)."""
    from structrag.importers import expand_inputs

    stamps = []
    for path in expand_inputs(inputs, options.exclude).paths:
        try:
            stat = path.stat()
            stamps.append((str(path), stat.st_size, stat.st_mtime_ns))
        except OSError:
            stamps.append((str(path), -1, -1))
    return stamps


def _ingest_one(
    index: Index, *, path: Path, options: IngestOptions, progress: _JobProgress
) -> list[IngestReport]:
    return index.ingest([path], options, progress=progress)


def _options_dict(options: IngestOptions) -> dict[str, Any]:
    return {
        "format": options.format,
        "conversation": options.conversation,
        "encoding": options.encoding,
        "date_order": options.date_order,
        "extractor": options.extractor if isinstance(options.extractor, str) else "custom",
        "workers": options.workers,
        "ner": options.ner,
        "embeddings": options.embeddings,
        "force": options.force,
        "exclude": list(options.exclude),
    }


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)
