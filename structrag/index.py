"""The Python API: open an index directory, ingest files, look at what was extracted.

This module is the composition root: it wires the DuckDB store, the Whoosh text index
and an extractor together. The core modules (ingest, query) only know the protocols.

>>> from structrag import Index
>>> with Index("my-index") as index:                       # doctest: +SKIP
...     index.ingest(["chat.jsonl"])
...     print(index.stats()["messages"])
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from structrag.analysis import TEXT_ANALYSIS, TEXT_ANALYSIS_KEY
from structrag.embedders import get_embedder
from structrag.embeddings import EMBEDDERS, Embedder, message_text
from structrag.errors import (
    ConfigError,
    IndexStateError,
    NotFoundError,
    StructragError,
    check_count,
    first_line,
    shown_path,
)
from structrag.extract.base import Extractor, close_extractor
from structrag.gctune import fewer_full_collections
from structrag.llm.base import OfflineLLM, StructuredLLM
from structrag.llm.cache import TableAnswerCache
from structrag.llm.config import LLMConfig
from structrag.models import KNOWLEDGE_KINDS, Conversation, Message, SemanticRef
from structrag.naming import DOCUMENT_ROOM
from structrag.query.engine import Answer, QueryEngine, QueryResult
from structrag.query.settings import DEFAULT_SETTINGS, RankingSettings
from structrag.store.duckdb import DB_FILENAME, DuckDBStore, SchemaUpgradeNeeded, may_write
from structrag.store.protocols import (
    MEMORY_TABLES,
    MemoryInfo,
    Scope,
    StoredMessage,
)
from structrag.store.whoosh_index import WhooshTextIndex, leftover_copies, remove_copies
from structrag.store.workspace import (
    RAY_SHARDS_DIRNAME,
    WriterLock,
    holds_shards,
    lock_timeout,
    sweep_staging,
)
from structrag.timeparse import DateOrder

if TYPE_CHECKING:
    # The ingest modules (and every importer) load when something is written: they are
    # ~55 ms of a cold `structrag ask`, which reads only.
    from structrag.importers import LoadOptions
    from structrag.ingest import Ingestor, IngestReport, ProgressSink
    from structrag.knowledge.base import KnowledgeBase
    from structrag.memory.api import Memory, MemorySettings, RoomCounts
    from structrag.query.digest import DigestBuilder

EXTRACTORS = ("spacy", "llm", "hybrid")
#: Where extraction runs (``IngestOptions.engine``).
ENGINES = ("local", "ray")
#: What ``ask`` can draw on, and the memory table each is.
SOURCES = {"conversations": "messages", "knowledge": "knowledge"}


@dataclass(frozen=True)
class IngestOptions:
    """How to ingest: shared by :meth:`Index.ingest`, :meth:`Index.estimate` (a dry run)
    and the CLI's ``ingest``."""

    #: Input format; detected from each input's name and content when None.
    format: str | None = None
    #: Conversation id for the inputs (default: from each input).
    conversation: str | None = None
    #: Text encoding of the inputs.
    encoding: str = "utf-8"
    #: How to read numeric dates that could be day- or month-first (``12/03/2023``):
    #: ``dmy`` or ``mdy``; None decides per file from its values.
    date_order: DateOrder | None = None
    #: ``spacy`` (offline default), ``llm``, ``hybrid``, or an extractor.
    extractor: str | Extractor = "spacy"
    #: Extraction processes (``engine="ray"``: Ray actors; None: the cluster's free CPUs).
    workers: int | None = 1
    #: Where extraction runs: ``local`` worker processes, or actors on a Ray cluster
    #: (:mod:`structrag.extract.ray_engine`; the index is still written here).
    engine: str = "local"
    #: With ``engine="ray"``: the cluster (``auto`` or ``HOST:PORT``); None: a local Ray.
    address: str | None = None
    #: Also run spaCy's named-entity recognizer (slower).
    ner: bool = False
    #: Message embeddings, fixed at an index's first ingest (None: keep, or ``static``).
    embeddings: str | None = None
    #: Re-read inputs ingested before and extract every message again.
    force: bool = False
    #: The LLM for ``llm``/``hybrid`` (None: from the ``STRUCTRAG_LLM_*`` variables).
    llm: LLMConfig | StructuredLLM | None = None
    #: Store the messages as memories of this agent (each conversation a room, each
    #: speaker a user): history loaded in bulk into an agent's memory.
    agent: str | None = None
    #: Shell patterns of files and folders to leave out of a folder argument, matched
    #: against the name and the path within the folder (``README.md``, ``drafts``).
    exclude: tuple[str, ...] = ()

    @classmethod
    def of(cls, options: IngestOptions | None, changes: dict[str, Any]) -> IngestOptions:
        """``options`` (or the defaults) with keyword changes; unknown names are an error."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(
                f"unknown ingest option(s): {', '.join(unknown)}",
                hint=f"known: {', '.join(sorted(known))}",
            )
        return replace(options or cls(), **changes)

    def check(self) -> None:
        """Raise :class:`ConfigError` for a format or text encoding that no input could be
        read with (a server checks a job's options before it queues the job)."""
        import codecs

        from structrag.importers import FORMATS, known_format

        if self.format is not None and known_format(self.format) is None:
            raise ConfigError(
                f"unknown format {self.format!r}", hint=f"choose one of: {', '.join(FORMATS)}"
            )
        try:
            codecs.lookup(self.encoding)
        except LookupError:
            raise ConfigError(
                f"unknown encoding {self.encoding!r}", hint="use e.g. utf-8, cp1252 or latin-1"
            ) from None

    def load_options(self) -> LoadOptions:
        from structrag.importers import LoadOptions

        return LoadOptions(
            conversation=self.conversation,
            encoding=self.encoding,
            date_order=self.date_order,
            exclude=(self.exclude,) if isinstance(self.exclude, str) else tuple(self.exclude),
        )


def _as_memory(agent: str | None) -> MemoryInfo | None:
    """Ingested history as an agent's memories (``ingest --agent``)."""
    return None if agent is None else MemoryInfo(agent=agent)


def make_extractor(name: str = "spacy", **options: Any) -> Extractor:
    """An extractor by name: ``spacy`` (offline default), ``llm`` or ``hybrid``.

    Options: ``ner`` and ``workers`` (spaCy); ``llm`` (an :class:`LLMConfig`, a
    :class:`~structrag.llm.base.StructuredLLM`, or None to read ``STRUCTRAG_LLM_*``) and
    ``cache`` (an :class:`~structrag.llm.cache.AnswerCache`) for the LLM.
    """
    if name == "spacy":
        from structrag.extract.spacy_extractor import SpacyExtractor

        return SpacyExtractor(ner=bool(options.get("ner", False)), workers=options.get("workers"))
    if name in ("llm", "hybrid"):
        from structrag.extract.llm_extractor import HybridExtractor, LLMExtractor

        llm = LLMExtractor(make_llm(options.get("llm")), cache=options.get("cache"))
        if name == "llm":
            return llm
        return HybridExtractor(make_extractor("spacy", **options), llm)
    raise ConfigError(f"unknown extractor {name!r}", hint=f"choose one of: {', '.join(EXTRACTORS)}")


def make_llm(llm: LLMConfig | StructuredLLM | None = None) -> StructuredLLM:
    """A structured-output LLM client from settings (``None``: from the environment).

    Settings without a base URL give a client that sends nothing (for dry runs)."""
    if llm is None:
        llm = LLMConfig.resolve()
    if not isinstance(llm, LLMConfig):
        return llm
    if not llm.base_url:
        return OfflineLLM(llm.model, llm.public_settings())
    from structrag.llm.client import InstructorLLM

    return InstructorLLM(llm)


class Index:
    """A structrag index directory: ``structrag.duckdb`` plus the ``whoosh/`` text index."""

    def __init__(
        self,
        directory: str | Path,
        *,
        read_only: bool = False,
        create: bool = True,
        settings: RankingSettings = DEFAULT_SETTINGS,
        _parts: tuple[DuckDBStore, WhooshTextIndex] | None = None,
    ) -> None:
        self.directory = Path(directory)
        try:
            str(self.directory).encode("utf-8")
        except UnicodeEncodeError:
            raise IndexStateError(
                f"the index directory name {shown_path(self.directory)} is not valid UTF-8",
                hint="pass --db a directory name in UTF-8",
            ) from None
        self.read_only = read_only
        self.settings = settings
        self.notes: list[str] = []
        self._engine: QueryEngine | None = None
        self._live: tuple[Extractor, Ingestor, RoomCounts] | None = None  # for memories
        self._knowledge: KnowledgeBase | None = None
        #: Extractors kept for the index's life (their worker processes stop at close).
        self._extractors: list[Extractor] = []
        self._llm_client: StructuredLLM | None = None
        self._llm_key: LLMConfig | None = None
        if _parts is None and self.directory.exists() and not self.directory.is_dir():
            raise IndexStateError(
                f"{self.directory} is a file, not an index directory",
                hint="pass a directory to --db",
            )
        #: One writing process at a time (see :mod:`structrag.store.workspace`).
        self.writer_lock = WriterLock(self.directory)
        if _parts is not None:  # a reader of an index this process writes (see reader())
            self.store, self.text_index = _parts
            return
        try:
            self.store = DuckDBStore(self.directory, read_only=read_only, create=create)
        except SchemaUpgradeNeeded:
            # Upgrading needs the write lock: take it briefly, and come back read-only.
            DuckDBStore(self.directory, read_only=False, create=False).close()
            self.notes.append("the index was upgraded to the current schema")
            self.store = DuckDBStore(self.directory, read_only=True)
        try:
            self.text_index = WhooshTextIndex(self.directory, read_only=read_only)
            self._check_text_index()
        except BaseException:
            self.store.close()
            raise

    def reader(self) -> Index:
        """A read-only view of this index for another thread of this process (a server's
        readers): its own store connection, which sees committed writes only
        (``store.snapshot()`` pins one committed state), and its own text-index reader
        (``text_index.refresh()`` moves it to the latest commit)."""
        return Index(
            self.directory,
            read_only=True,
            settings=self.settings,
            _parts=(self.store.reader(), WhooshTextIndex(self.directory, read_only=True)),
        )

    def _check_text_index(self) -> None:
        """Repair a text index behind the store (rebuild it from the store), and remove
        what a killed rebuild left. A read-only open that finds a live writer between its
        store's commit and its text index's waits for the latter instead (see
        :meth:`_await_writer`)."""
        self._sweep_copies()
        expected = self.store.generation()
        found = self.text_index.generation()
        if found == expected:
            if not self.read_only:
                sweep_staging(self.directory)
            return
        if self.read_only:
            if found is not None and found < expected and self._await_writer(expected):
                return
            # Repair needs the write lock: take it briefly, rebuild, and come back read-only.
            self.store.close()
            self.text_index.close()
            try:
                with Index(self.directory, read_only=False, create=False) as writer:
                    self.notes.extend(writer.notes)
            except (IndexStateError, OSError) as exc:
                if found is None or not _cannot_write(self.directory, exc):
                    raise
                # A read-only folder or file system, a full disk: read what there is.
                self.notes.append(
                    f"the text index is behind the store (generation {found} vs {expected}) "
                    f"and cannot be rebuilt here ({first_line(exc)}): word matches may miss "
                    "the latest writes until the index is opened where it can be written"
                )
            self.store = DuckDBStore(self.directory, read_only=True)
            self.text_index = WhooshTextIndex(self.directory, read_only=True)
            return
        with self.writer_lock.held("repair the text index"):
            # Another process may be between its two commits: wait for it, then look again.
            expected = self.store.generation()
            found = self.text_index.generation()
            sweep_staging(self.directory)
            if found == expected:
                return
            count = self.reindex()
        why = (
            "was missing or in an older layout"
            if found is None or self.text_index.created
            else f"was behind the store (generation {found} vs {expected}: a write to the "
            "index was interrupted)"
        )
        self.notes.append(f"the text index {why}; rebuilt it from the store ({count} messages)")

    def _await_writer(self, expected: int) -> bool:
        """Whether the text index reached the store's ``expected`` generation while a
        writer (a live process holding the writer lock: an ingest between its two commits)
        went on. Polls the text index's marker, without the lock, up to
        ``STRUCTRAG_LOCK_TIMEOUT`` seconds; False as soon as nobody holds the lock and the
        text index is still behind (a real leftover: repair it). Then the index reads like
        one opened before that write (the store may be ahead of the text index while a
        writer works; the query engine reads the text index as committed)."""
        holder = self.writer_lock.busy()
        if holder is None:
            return False
        wait = lock_timeout()
        deadline = time.monotonic() + wait
        delay = 0.005
        while True:
            found = self.text_index.generation()
            if found is not None and found >= expected:
                return True
            if holder is None:
                return False
            if time.monotonic() >= deadline:
                raise IndexStateError(
                    f"the text index at {shown_path(self.text_index.path)} is behind the store "
                    f"(generation {found} vs {expected}) while another process writes the "
                    f"index ({holder}); waited {wait:g} s for it to catch up",
                    hint="wait for that write to finish and try again (or raise "
                    "STRUCTRAG_LOCK_TIMEOUT); if the text index is still behind then, "
                    "`structrag reindex --db DIR` rebuilds it",
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
            holder = self.writer_lock.busy()

    def _sweep_copies(self) -> None:
        """Remove the copies a killed rebuild left beside the text index (a read-only open
        too: someone who only asks would keep them), holding the writer lock, and only when
        nobody else holds it (a live rebuild's copy is not a leftover). Free when there are
        none: one listing of the index directory."""
        if not leftover_copies(self.directory):
            return
        if not self.writer_lock.try_acquire("remove a killed rebuild's leftovers"):
            return  # a writer at work (or no write access): a later open removes them
        try:
            remove_copies(leftover_copies(self.directory))
        finally:
            self.writer_lock.release()

    # -- context manager ------------------------------------------------------------------

    def close(self) -> None:
        for extractor in self._extractors:
            close_extractor(extractor)
        self._extractors.clear()
        self.text_index.close()
        self.store.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------

    def ingest(
        self,
        paths: Sequence[str | Path] | str | Path,
        options: IngestOptions | None = None,
        *,
        progress: ProgressSink | None = None,
        retry_failed: bool = False,
        **changes: Any,
    ) -> list[IngestReport]:
        """Ingest files and folders; returns one report per input. See
        :mod:`structrag.ingest` and :class:`IngestOptions` (its fields may also be passed
        as keywords: ``index.ingest(paths, extractor="llm", workers=2)``).

        ``workers > 1`` extracts in worker processes; a script doing that must guard its
        entry point with ``if __name__ == "__main__":`` (as for any multiprocessing).
        ``retry_failed`` re-extracts the messages whose LLM extraction failed before
        (``paths`` may be empty); its report comes last.
        """
        from structrag.ingest import Ingestor

        options = IngestOptions.of(options, changes)
        if self.read_only:
            raise IndexStateError("the index was opened read-only; open it for writing")
        if retry_failed and options.extractor == "spacy":
            raise ConfigError(
                "--retry-failed redoes failed LLM extractions",
                hint="pass --extractor llm (or hybrid) with the LLM settings",
            )
        with (
            self.writer_lock.held("ingest"),
            fewer_full_collections(),
            self._extractor(options, llm=options.llm) as chosen,
        ):
            setting, embedder = self._ingest_embedder(options.embeddings)
            ingestor = Ingestor(
                self.store,
                self.text_index,
                chosen,
                embedder=_embedding_rows(embedder) if embedder is not None else None,
                settings={"embeddings": setting},
                workspace=self.directory,
                memory=_as_memory(options.agent),
                digest=_digest_builder(embedder),
            )
            reports = []
            if paths or not retry_failed:
                reports = ingestor.ingest(
                    paths,
                    format=options.format,
                    options=options.load_options(),
                    progress=progress,
                    force=options.force,
                )
            if retry_failed:
                reports.append(ingestor.retry_failed(progress))
            if options.engine != "ray" and holds_shards(self.directory):
                # Shards a Ray ingest left of messages this one wrote (a Ray ingest sweeps
                # its own: _ray_extractor).
                from structrag.extract.ray_engine import sweep_ingested_shards

                sweep_ingested_shards(self.directory, self.store.message_hashes)
            return reports

    def estimate(
        self,
        paths: Sequence[str | Path] | str | Path,
        options: IngestOptions | None = None,
        **changes: Any,
    ) -> dict[str, Any]:
        """A dry run of :meth:`ingest` with the same options: which messages would be
        extracted and, for the LLM, how many calls and tokens that would take (answers in
        the cache cost nothing). Sends no request and writes nothing."""
        from structrag.ingest import Ingestor

        options = IngestOptions.of(options, changes)
        offline = _offline(options.llm) if options.extractor in ("llm", "hybrid") else None
        with self._extractor(replace(options, workers=1, engine="local"), llm=offline) as chosen:
            ingestor = Ingestor(
                self.store, self.text_index, chosen, memory=_as_memory(options.agent)
            )
            return ingestor.estimate(
                paths,
                format=options.format,
                options=options.load_options(),
                force=options.force,
            )

    @contextmanager
    def _extractor(
        self, options: IngestOptions, *, llm: LLMConfig | StructuredLLM | None
    ) -> Iterator[Extractor]:
        """The extractor the options name (or give), with LLM answers cached in the index."""
        if options.engine not in ENGINES:
            raise ConfigError(
                f"unknown engine {options.engine!r}", hint=f"choose one of: {', '.join(ENGINES)}"
            )
        if options.engine == "ray":
            with self._ray_extractor(options) as chosen:
                yield chosen
            return
        if not isinstance(options.extractor, str):
            yield options.extractor
            return
        cache = TableAnswerCache(self.store.answer_table())
        try:
            chosen = make_extractor(
                options.extractor, ner=options.ner, workers=options.workers, llm=llm, cache=cache
            )
            try:
                yield chosen
            finally:
                close_extractor(chosen)  # its worker processes
        finally:
            cache.close()

    @contextmanager
    def _ray_extractor(self, options: IngestOptions) -> Iterator[Extractor]:
        """spaCy extraction on Ray actors, its shards kept in the index until it is done."""
        if options.extractor != "spacy":
            raise ConfigError(
                "--engine ray runs the spaCy extractor",
                hint="drop --engine ray for the LLM extractor (its requests are already "
                "concurrent), or use --extractor spacy",
            )
        from structrag.extract.ray_engine import RayExtractor, import_ray
        from structrag.extract.spacy_extractor import SpacyExtractor

        import_ray()  # not installed: say how, before reading anything

        extractor = RayExtractor(
            SpacyExtractor(ner=options.ner, workers=1),
            address=options.address,
            workers=options.workers,
            shards=self.directory / RAY_SHARDS_DIRNAME,
            reuse=not options.force,  # --force: extract again, read no shard
        )
        try:
            yield extractor
            # Its batches written, and any other shard of messages now in the index as
            # they were: nothing of them to resume.
            extractor.discard_shards(self.store.message_hashes)
        finally:
            extractor.close()

    def _ingest_embedder(self, requested: str | None) -> tuple[str, Embedder | None]:
        """The index's embedding model: fixed by its first ingest (default ``static``).

        Returns the setting to record and the embedder; the setting is written in the
        ingest's own transaction, so a failed ingest leaves no trace of it.
        """
        current = self.check_embeddings(requested)
        chosen = current or requested or "static"
        return chosen, get_embedder(chosen)

    def check_embeddings(
        self, requested: str | None, *, option: str = "--embeddings"
    ) -> str | None:
        """Refuse an embedding model this index cannot take (unknown, or other than the
        one its first ingest fixed); the index's model (None before its first ingest)."""
        current = self.store.get_setting("embeddings")
        if requested is not None and requested not in EMBEDDERS:
            raise ConfigError(
                f"unknown embedding model {requested!r}", hint=f"choose: {', '.join(EMBEDDERS)}"
            )
        if current is not None and requested is not None and requested != current:
            raise ConfigError(
                f"this index embeds messages with {current!r}, not {requested!r}",
                hint=f"drop {option}, or build a new index with the other model",
            )
        return current

    @property
    def embedder(self) -> Embedder | None:
        return get_embedder(self.store.get_setting("embeddings") or "none")

    # -- querying -------------------------------------------------------------------------

    @property
    def engine(self) -> QueryEngine:
        if self._engine is None:
            from structrag.nlp.lemma import lemma
            from structrag.translate.offline import SpacyTranslator

            self._engine = QueryEngine(
                self.store,
                self.text_index,
                settings=self.settings,
                embedder=lambda: self.embedder,
                translator=SpacyTranslator(),
                lemmatize=lambda word: lemma(word, "VB"),
            )
        return self._engine

    def query(
        self, expression: str, *, conversation: str | None = None, limit: int | None = 20
    ) -> QueryResult:
        """Run a query expression (see the README for the language) over the
        conversations and document knowledge (``source:`` narrows it to one of them), or
        over one ``conversation`` alone (as ``ask`` reads it: the same ranking);
        ``limit`` None: every match."""
        check_count("limit", limit)
        scope = None if conversation is not None else self._scope(None, tuple(SOURCES))
        result = self.engine.query(expression, conversation=conversation, limit=limit, scope=scope)
        if not result.messages:
            result.notes.extend(self._empty_note())
        return result

    def ask(
        self,
        question: str,
        *,
        conversation: str | None = None,
        budget: int = 1000,
        encoding: str = "cl100k_base",
        translator: str = "offline",
        llm: LLMConfig | StructuredLLM | None = None,
        answer: bool = False,
        sources: Sequence[str] | str = ("conversations",),
    ) -> Answer:
        """Answer context for a natural-language question, within ``budget`` tokens.

        ``sources``: ``conversations`` (ingested history and agents' messages) and
        ``knowledge`` (document fragments, each line labelled with its document and
        section), packed in one budget.

        ``translator``: ``offline`` (spaCy) or ``llm`` (the LLM, falling back to offline,
        with a note, when no LLM is configured or the request fails). With
        ``answer=True`` an LLM writes an answer from the context, citing message ids
        (``Answer.written``); without an LLM, ``written`` says why there is none.
        """
        from structrag.query.context import budget_problem
        from structrag.tokens import get_counter

        problem = budget_problem(budget)
        if problem:
            raise ConfigError(problem)

        counter = get_counter(encoding)
        client = self._question_llm(translator, llm, needed=answer)
        chosen = None
        if translator == "llm":
            from structrag.translate.llm import LLMTranslator

            chosen = LLMTranslator(client)
        elif translator != "offline":
            raise ConfigError(f"unknown translator {translator!r}", hint="choose offline or llm")
        scope = self._scope(conversation, sources)
        result = self.engine.ask(
            question,
            counter=counter,
            conversation=conversation,
            budget=budget,
            translator=chosen,
            scope=scope,
        )
        if conversation is not None and scope is not None and "knowledge" in scope.tables:
            result.notes.append(
                f"the conversation {conversation!r} narrows conversations' messages only: "
                'knowledge comes from every document (narrow it with document:"..." in '
                "`structrag query`)"
            )
        if not result.context.messages and scope is None and self._documents_only():
            result.notes.append(
                "the index holds documents and no conversations: ask them with "
                "--sources knowledge (sources=['knowledge'])"
            )
        if not result.context.messages:
            result.notes.extend(self._empty_note())
        elif not result.ranked and scope is None:
            result.notes.extend(self._documents_answer(result.query))
        if answer:
            result.written = self._write_answer(client, question, result)
        return result

    def _scope(self, conversation: str | None, sources: Sequence[str] | str) -> Scope | None:
        if isinstance(sources, str):  # "knowledge", "conversations,knowledge": as the CLI
            sources = [s.strip() for s in sources.split(",") if s.strip()]
        if not sources:
            raise ConfigError("no sources to ask", hint=f"choose from {', '.join(SOURCES)}")
        unknown = sorted(set(sources) - set(SOURCES))
        if unknown:
            raise ConfigError(
                f"unknown source(s): {', '.join(unknown)}",
                hint=f"choose from {', '.join(SOURCES)}",
            )
        tables = tuple(SOURCES[s] for s in SOURCES if s in sources)
        if tables == ("messages",):
            return None  # the default scope
        if conversation is not None and tables == ("knowledge",):
            conversation = None  # documents have conversations of their own
        return Scope(conversation=conversation, tables=tables)

    def _empty_note(self) -> list[str]:
        """A note when the index holds nothing at all: a mistyped path makes a new, empty
        index (``Index(path)`` creates one; ``create=False`` refuses a folder without)."""
        if self.store.sql("SELECT count(*) FROM messages")[0][0]:
            return []
        return [
            f"the index at {shown_path(self.directory)} holds no messages: ingest into it "
            "first (is the path right? Index(path, create=False) refuses a folder that holds "
            "no index)"
        ]

    def _documents_answer(self, expression: str) -> list[str]:
        """A note when no conversation message matches a question that documents do:
        ``ask`` reads conversations unless told otherwise (``query`` reads both)."""
        knowledge = Scope(conversation=None, tables=("knowledge",))
        try:
            found = self.engine.query(expression, limit=1, scope=knowledge)
        except StructragError:
            return []
        if not found.messages:
            return []
        return [
            "documents match the question: ask with --sources conversations,knowledge "
            "(sources=['conversations', 'knowledge']) to draw on them"
        ]

    def _documents_only(self) -> bool:
        """Whether every message of the index is a document's fragment (and it has some)."""
        kinds = self.store.sql(
            "SELECT count(*) FILTER (WHERE starts_with(conversation, ?)), count(*) FROM messages",
            [DOCUMENT_ROOM],
        )[0]
        return bool(kinds[0]) and kinds[0] == kinds[1]

    def _question_llm(
        self, translator: str, llm: LLMConfig | StructuredLLM | None, *, needed: bool
    ) -> StructuredLLM | None:
        """The LLM for translating or answering: ``None`` when it is optional and missing."""
        if translator != "llm" and not needed:
            return None
        if llm is not None and not isinstance(llm, LLMConfig):
            return llm
        # no endpoint at all: none (offline); settings given but wrong: their error
        config = llm if isinstance(llm, LLMConfig) else LLMConfig.resolve_optional()
        if config is None or not config.base_url:
            return None
        if self._llm_key != config:  # any setting changed (a timeout, a key): a new client
            self._llm_client = make_llm(config)
            self._llm_key = config
        return self._llm_client

    def _write_answer(
        self, client: StructuredLLM | None, question: str, result: Answer
    ) -> dict[str, Any]:
        if client is None:
            return {
                "error": "no LLM configured: set --llm-base-url and --llm-model (or "
                "STRUCTRAG_LLM_BASE_URL and STRUCTRAG_LLM_MODEL); the context is the answer",
            }
        from structrag.answer import write_answer
        from structrag.errors import LLMError

        try:
            written = write_answer(
                client, question, result.context, {m.mkey: m.text for m in result.context.messages}
            )
        except LLMError as exc:
            return {"error": f"the LLM did not answer: {exc.message}"}
        return written.as_dict()

    def remove_conversation(self, conversation: str) -> int:
        """Delete an ingested conversation: its messages, everything extracted from them,
        their embeddings and their entries in the text index in one write, then the
        conversation's own rows (its aliases and digest; DuckDB deletes a row that others
        referenced only in a later transaction). The ingest log keeps its sources:
        ingesting the file again brings it back.
        Returns how many messages went. A document's fragments go with
        ``index.knowledge.remove``, an agent's memories with its memory API."""
        from structrag.extract.spacy_extractor import SpacyExtractor
        from structrag.ingest import Ingestor

        if self.read_only:
            raise IndexStateError("the index was opened read-only; open it for writing")
        self.check_conversation(conversation)
        if conversation.startswith(DOCUMENT_ROOM):
            raise ConfigError(
                f"{conversation!r} holds a document's fragments",
                hint="remove the document with `structrag knowledge remove ID`",
            )
        with self.writer_lock.held("remove"):
            rows = self.store.sql(
                "SELECT mkey, agent FROM messages WHERE conversation = ?", [conversation]
            )
            agents = sorted({str(agent) for _, agent in rows if agent is not None})
            if agents:
                raise ConfigError(
                    f"{conversation!r} is a memory room of {', '.join(agents)}",
                    hint="remove an agent's memories with `structrag memory remove --all "
                    f"--agent NAME --room {conversation}` (or Memory.remove_all)",
                )
            keys = [int(mkey) for mkey, _ in rows]
            if keys:
                # nothing is extracted: the pipeline is never loaded
                ingestor = Ingestor(self.store, self.text_index, SpacyExtractor(workers=1))
                ingestor.write([], [], [], delete=keys)
            self.store.drop_conversation(conversation)
        return len(keys)

    def reindex(self, progress: ProgressSink | None = None) -> int:
        """Write every conversation's digest again, then rebuild the Whoosh index from the
        store; returns the number of messages."""
        if self.read_only:
            raise IndexStateError("reindex needs the index opened for writing")
        from structrag.ingest import indexed_documents

        conversations = [c.id for c in self.store.conversations()]
        build = _digest_builder(self.embedder)
        if progress:
            progress.start(len(conversations), "digests")

        def digest(conversation: str) -> bytes | None:
            data = build(self.store, conversation)
            if progress:
                progress.advance(1)
            return data

        counts = self.store.stats()
        total = counts.messages + sum(counts.memories.values())  # every row of messages

        try:
            with self.writer_lock.held("reindex"), fewer_full_collections():
                self.store.write_digests(conversations, digest)
                if progress:
                    progress.finish()
                    progress.start(total, "reindexing")
                advance = progress.advance if progress else None
                documents = indexed_documents(self.store, advance)
                count = self.text_index.rebuild(documents, self.store.generation())
                # the text index now holds every message as the analysis splits it today
                self.store.set_setting(TEXT_ANALYSIS_KEY, TEXT_ANALYSIS)
                return count
        finally:
            if progress:
                progress.finish()

    # -- agent memory ---------------------------------------------------------------------

    def memory(self, agent: str, *, settings: MemorySettings | None = None) -> Memory:
        """An agent's memory (see :mod:`structrag.memory.api`): live memories extracted with
        spaCy in this process, searchable as soon as they are added."""
        from structrag.ingest import Ingestor
        from structrag.memory.api import Memory, MemoryParts, MemorySettings, RoomCounts
        from structrag.memory.statement_rules import extract_statements
        from structrag.store.duckdb.memory import DuckDBMemory
        from structrag.tokens import get_counter

        if self._live is None:
            from structrag.extract.spacy_extractor import SpacyExtractor

            live: Extractor = SpacyExtractor(workers=1)
            setting, embedder = self._ingest_embedder(None)
            ingestor = Ingestor(
                self.store,
                self.text_index,
                live,
                embedder=_embedding_rows(embedder) if embedder is not None else None,
                settings={"embeddings": setting},
            )
            self._live = (live, ingestor, RoomCounts())
        extractor, ingestor, rooms = self._live
        parts = MemoryParts(
            store=self.store,
            memory=DuckDBMemory(self.store),
            ingestor=ingestor,
            engine=self.engine,
            extractor=extractor,
            statements=extract_statements,
            writing=self.writer_lock.held,
            rooms=rooms,
            counter=get_counter,
            settings=settings or MemorySettings(),
        )
        return Memory(parts, agent)

    # -- document knowledge ---------------------------------------------------------------

    @property
    def knowledge(self) -> KnowledgeBase:
        """Document knowledge (see :mod:`structrag.knowledge.base`): files and text added
        as shared knowledge or one agent's, searched beside the conversations."""
        if self._knowledge is None:
            self._knowledge = self._knowledge_base(workers=min(2, os.cpu_count() or 1))
        return self._knowledge

    def _knowledge_base(self, *, workers: int) -> KnowledgeBase:
        from structrag.extract.spacy_extractor import SpacyExtractor
        from structrag.ingest import Ingestor
        from structrag.knowledge.base import KnowledgeBase, KnowledgeParts
        from structrag.knowledge.loaders import load_document, walk
        from structrag.store.duckdb.knowledge import DuckDBKnowledge
        from structrag.tokens import get_counter

        extractor = SpacyExtractor(workers=workers)
        self._extractors.append(extractor)

        def ingestor(memory: MemoryInfo) -> Ingestor:
            if self.read_only:
                raise IndexStateError("the index was opened read-only; open it for writing")
            setting, embedder = self._ingest_embedder(None)
            return Ingestor(
                self.store,
                self.text_index,
                extractor,
                embedder=_embedding_rows(embedder) if embedder is not None else None,
                settings={"embeddings": setting},
                workspace=self.directory,
                memory=memory,
            )

        def walked(paths: Sequence[Path]) -> tuple[list[Path], list[tuple[Path, str]]]:
            found = walk(paths)
            return list(found.files), [(s.path, s.reason) for s in found.skipped]

        return KnowledgeBase(
            KnowledgeParts(
                store=self.store,
                rows=DuckDBKnowledge(self.store),
                ingestor=ingestor,
                engine=self.engine,
                load=lambda path, encoding: load_document(path, encoding=encoding),
                walk=walked,
                counter=get_counter("cl100k_base"),
                writing=self.writer_lock.held,
            )
        )

    # -- reading --------------------------------------------------------------------------

    def sql(self, query: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run SQL that reads the index (the ``v_*`` views are the documented way in; see
        the README's "Storage layout"); values are bound as parameters (``?``). Only
        queries run (``SELECT``, ``WITH``, ``DESCRIBE``, ``SHOW``, ``SUMMARIZE``,
        ``EXPLAIN`` and the PRAGMAs that describe, such as ``table_info``): a change made
        beside the index's writer would leave its text index and derived tables saying
        something else. To export, SELECT the rows (or open a copy of the database). One
        statement at a time; SQL that fails raises :class:`QueryError` with DuckDB's
        message."""
        return self.sql_table(query, params)[1]

    def sql_table(
        self, query: str, params: Sequence[Any] = (), *, limit: int | None = None
    ) -> tuple[list[str], list[tuple[Any, ...]]]:
        """:meth:`sql` of one statement, with the names of the result's columns, reading
        at most ``limit`` rows (``structrag sql``)."""
        self._check_reads(query)
        return self.store.sql_table(query, params, limit)

    def _check_reads(self, query: str) -> None:
        problem = self.store.read_only_problem(query)
        if problem:
            raise ConfigError(
                f"SQL on an index runs statements that read, not {problem}: {query.strip()[:80]!r}",
                hint="change the index through its API (ingest, memory, knowledge, remove); "
                "to work on a copy of the data, SELECT it into a DuckDB database of your own",
            )

    def stats(self) -> dict[str, Any]:
        """Counts: conversations (and of them histories, memory rooms and documents),
        messages (of conversations: ingested, and agents' ``messages`` memories), the rows
        of the other memory tables (facts, relationships, goals, knowledge: documents'
        fragments and agents' notes), semantic refs by kind (of all of them), extractors,
        sources; and the message embeddings the index was built with (None before its
        first ingest)."""
        s = self.store.stats()
        return {
            "conversations": s.conversations,
            "conversation_kinds": s.conversation_kinds,
            "messages": s.messages,
            "memories": s.memories,
            "semantic_refs": s.semantic_refs,
            "extractors": s.extractors,
            "sources": s.sources,
            "embeddings": self.store.get_setting("embeddings"),
            "index": str(self.directory),
            "size_bytes": _dir_size(self.directory),
        }

    def conversations(self) -> list[Conversation]:
        return self.store.conversations()

    def conversation_summaries(self) -> list[dict[str, Any]]:
        """Each conversation's id, name, message count, date range and speakers."""
        return self.store.conversation_summaries()

    def messages(
        self, conversation: str | None = None, *, table: str | None = "messages"
    ) -> Iterator[StoredMessage]:
        """The messages (of one conversation), in store order: by default those of
        conversations, ingested or written by agents (as the ``v_messages`` view has them);
        ``table`` another memory table (``facts``, ``relationships``, ``goals``, or
        ``knowledge``: document fragments), or None for every row of the store."""
        if table is not None and table not in MEMORY_TABLES:
            raise ConfigError(
                f"no memory table {table!r}", hint=f"use one of: {', '.join(MEMORY_TABLES)}"
            )
        return self.store.iter_messages(conversation, table=table)

    def refs(
        self, kind: str | None = None, conversation: str | None = None
    ) -> Iterator[SemanticRef]:
        """All semantic refs, optionally of one kind (``entity``, ``action``, ``topic``,
        ``tag``)."""
        if kind is not None and kind not in KNOWLEDGE_KINDS:
            raise ConfigError(
                f"no kind of knowledge {kind!r}", hint=f"use one of: {', '.join(KNOWLEDGE_KINDS)}"
            )
        self.check_conversation(conversation)  # checked now, not at the first ref
        return (ref for _, ref in self.store.iter_refs(kind, conversation))

    def show(self, message_id: str, conversation: str | None = None) -> dict[str, Any]:
        """A message and its knowledge with spans. ``conversation/id``, as ``query`` and
        ``ask`` print a message of an index of many conversations, names both; an agent's
        memory whose id another memory holds in its room is ``id@agent``, as they print
        it (an id as written is found first: a plain id may hold "@")."""
        from structrag.memory.store import id_agent, scoped_readings, shown_id

        def find(where: str | None, wanted: str) -> list[StoredMessage]:
            found = self.store.find_message(where, wanted)
            for scoped in [] if found else scoped_readings(wanted):
                found += self.store.find_message(where, scoped)
            return found

        found = find(conversation, message_id)
        if not found and conversation is None:
            slashes = [i for i, c in enumerate(message_id) if c == "/"]
            for at in slashes:  # a conversation id may hold "/" too: try each split
                found = find(message_id[:at], message_id[at + 1 :])
                if found:
                    break
        if not found:
            where = f" in conversation {conversation!r}" if conversation else ""
            raise NotFoundError(
                f"no message with id {message_id!r}{where}",
                hint="list conversations with `structrag conversations`; ids come from the "
                "input file",
            )
        if len(found) > 1:
            convs = ", ".join(sorted(s.message.conversation for s in found))
            raise NotFoundError(
                f"message id {message_id!r} exists in several conversations: {convs}",
                hint="pass --conversation to pick one",
            )
        shown = self.shown(found)[0]
        agent = id_agent(found[0].message.id)
        if agent is not None:
            shown.update(id=shown_id(found[0].message.id), id_agent=agent)
        return shown

    def shown(self, messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
        """Messages and their knowledge with spans, as :meth:`show` gives them (the refs
        of all of them read at once)."""
        refs = self.store.refs_for_messages([s.mkey for s in messages])
        return [_shown(stored.message, refs[stored.mkey]) for stored in messages]

    def entities(self, top: int = 20, conversation: str | None = None) -> list[dict[str, Any]]:
        """The most mentioned entities, merged by normalised name."""
        check_count("top", top)
        self.check_conversation(conversation)
        return self.store.top_entities(top, conversation)

    def topics(self, top: int = 20, conversation: str | None = None) -> list[dict[str, Any]]:
        """The most mentioned topics."""
        check_count("top", top)
        self.check_conversation(conversation)
        return self.store.top_topics(top, conversation)

    def check_conversation(self, conversation: str | None) -> None:
        """Raise :class:`NotFoundError` unless the index holds ``conversation`` (or it is None)."""
        if conversation is not None and conversation not in {
            c.id for c in self.store.conversations()
        }:
            raise NotFoundError(
                f"no conversation {conversation!r} in the index",
                hint="list them with `structrag conversations`",
            )


def _shown(message: Message, refs: Sequence[SemanticRef]) -> dict[str, Any]:
    return {
        "conversation": message.conversation,
        "id": message.id,
        "ordinal": message.ordinal,
        "speaker": message.speaker,
        "recipients": list(message.recipients),
        "timestamp": message.timestamp.isoformat() if message.timestamp else None,
        "tags": list(message.tags),
        "metadata": message.metadata,
        "text": message.text,
        "knowledge": [
            {
                "ref_id": r.ref_id,
                "kind": r.kind,
                "span": [r.span.start, r.span.end],
                "span_text": message.text[r.span.start : r.span.end],
                "extractor": f"{r.extractor}/{r.extractor_version}",
                **r.knowledge.model_dump(mode="json", exclude_defaults=True),
            }
            for r in refs
        ],
    }


def _digest_builder(embedder: Embedder | None) -> DigestBuilder:
    """What writes a conversation's digest (:mod:`structrag.query.digest`) for an index
    whose messages ``embedder`` embeds, with the default token counter of ``ask``."""
    from structrag.query.digest import digest_builder
    from structrag.tokens import get_counter

    return digest_builder(None if embedder is None else embedder.name, get_counter())


def _embedding_rows(
    embedder: Embedder,
) -> Callable[[list[StoredMessage]], list[tuple[int, str, list[float]]]]:
    def rows(messages: list[StoredMessage]) -> list[tuple[int, str, list[float]]]:
        texts = [message_text(s.message.speaker, s.message.text) for s in messages]
        vectors = embedder.encode(texts)
        return [
            (s.mkey, embedder.name, vector.tolist())
            for s, vector in zip(messages, vectors, strict=True)
        ]

    return rows


def _dir_size(path: Path) -> int:
    """The bytes of the files under ``path``. An ingest may be writing beside a reader
    (its staging folder comes and goes): what vanishes during the walk is not counted."""
    total = 0
    for folder, _, files in os.walk(path):  # a folder that vanishes is skipped
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += (Path(folder) / name).stat().st_size
    return total


def _offline(llm: LLMConfig | StructuredLLM | None) -> LLMConfig | StructuredLLM:
    """The same LLM settings, without the endpoint: a dry run must not send anything."""
    if llm is None:
        llm = LLMConfig.resolve(require_endpoint=False)
    if isinstance(llm, LLMConfig):
        return OfflineLLM(llm.model, llm.public_settings())
    return OfflineLLM(llm.model, llm.settings())


def estimate_ingest(
    directory: str | Path,
    paths: Sequence[str | Path] | str | Path,
    options: IngestOptions | None = None,
    **changes: Any,
) -> dict[str, Any]:
    """:meth:`Index.estimate` for an index directory that may not exist yet: an existing
    index is opened read-only, a missing one is stood in for by an empty temporary index
    (nothing is created at ``directory``)."""
    directory = Path(directory)
    options = IngestOptions.of(options, changes)
    if (directory / DB_FILENAME).exists():
        with Index(directory, read_only=True) as index:
            estimate: dict[str, Any] = index.estimate(paths, options)
            return estimate
    with (
        tempfile.TemporaryDirectory(prefix="structrag-dry-run-") as scratch,
        Index(Path(scratch) / "index") as index,
    ):
        result = index.estimate(paths, options)
        for source in result["sources"]:
            source["note"] = f"no index at {directory} yet: every message is new"
        return result


def _cannot_write(directory: Path, exc: BaseException) -> bool:
    """Whether ``exc`` (opening the index to write) says this process cannot write it: a
    folder it may not write, a read-only file system, a full disk."""
    if not may_write(directory):
        return True
    text = str(exc)
    return any(
        cause in text
        for cause in ("Permission denied", "Read-only file system", "No space left", "no space")
    ) or (isinstance(exc, OSError) and exc.errno in (errno.EACCES, errno.EROFS, errno.ENOSPC))


def ingest_into(
    directory: str | Path,
    paths: Sequence[str | Path] | str | Path,
    options: IngestOptions | None = None,
    *,
    progress: ProgressSink | None = None,
    retry_failed: bool = False,
) -> tuple[list[IngestReport], list[str]]:
    """Ingest into the index at ``directory``, creating it when needed: the reports, and
    the notes opening the index gave (a text index rebuilt, an upgrade). When an ingest
    that created the directory fails and leaves nothing in it (no ingest committed, no LLM
    answer paid for, no Ray shard extracted), the directory goes too: a failed first
    ingest leaves no trace."""
    directory = Path(directory)
    created = not directory.exists()
    empty = False
    try:
        with Index(directory) as index:
            try:
                reports = index.ingest(paths, options, progress=progress, retry_failed=retry_failed)
            except BaseException:
                empty = index.store.holds_nothing() and not holds_shards(directory)
                raise
            return reports, list(index.notes)
    except BaseException:
        if created and empty:
            shutil.rmtree(directory, ignore_errors=True)
        raise


def open_index(directory: str | Path, *, read_only: bool = False) -> Index:
    """Open (or create, unless ``read_only``) an index directory."""
    return Index(directory, read_only=read_only, create=not read_only)
