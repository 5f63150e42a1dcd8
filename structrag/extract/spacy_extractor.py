"""The offline extractor: entities, actions and topics from spaCy's parse.

* **Entities**: proper-noun names (and spaCy's named entities when ``ner=True``) plus
  salient noun chunks, with types (``person`` for speakers and NER people, the NER label,
  otherwise the head noun) and
  facets (possessor, numbers, adjectives). Titles keep their small words ("Empire in Black
  and Gold"); "and" between two names makes two entities ("Kevin and Christina"). A role
  or job the text states ("Kevin Scott, Chief Technology Officer for Microsoft", "Adrian is
  a sci-fi author", "I work as a nurse") is a ``job`` facet of the person.
* **Actions**: subject-verb-object(-indirect object) from the dependency parse, with
  negation, tense, particles (``sign up``), prepositional params, and subjects inherited
  through ``xcomp``/``conj`` chains ("I want to adopt" -> speaker adopt). First- and
  second-person pronouns resolve to the speaker and (single) recipient.
* **Topics**: multi-word key phrases.

The parser reads each message with typographic quotes made plain ("I’m" would parse as
"I" and a verb "’m") and stage directions ("[MUSIC]", "(Laughter.)") blanked out, both
without moving a character, so every span points into the message as written. No span
ends inside an emoji of several code points (🇯🇵, 👍🏽, 👨‍👩‍👧), and names and topics
drop emoji at their ends ("the 3rd 🇯🇵" is "3rd").

Speed: the pipeline runs ``tok2vec``, ``tagger`` and ``parser`` only (plus ``ner`` when
asked); the attribute ruler and lemmatizer are replaced by a tag->POS table and a cached
rule lemmatizer, which are several times faster on chat-length messages. Large inputs are
spread over worker processes.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import multiprocessing
import os
import re
import select
import signal
import sys
import threading
import time
import warnings
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, Any

from structrag.analysis import wordset
from structrag.extract.base import MAX_EXTRACT_CHARS, Progress, metadata_knowledge
from structrag.extract.graphemes import is_symbol, snap
from structrag.gctune import freeze_before_fork, unfreeze
from structrag.models import (
    ROLE_FACET_NAMES,
    Action,
    Entity,
    Facet,
    Message,
    SemanticRef,
    Span,
    Tag,
    Tense,
    Topic,
    unchecked,
)
from structrag.nlp.lemma import is_verb_word, lemma, lemma_tables
from structrag.nlp.matmul import for_extraction
from structrag.nlp.names import is_name_token
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline, pipe, set_pos
from structrag.nlp.text import parse_text

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc, Token
    from spacy.tokens import Span as SpacySpan


EXTRACTOR_NAME = "spacy"
#: 2: base-form lemmas, plain quotes, no stage directions, titles, job facets.
EXTRACTOR_VERSION = "2"
#: Messages are parsed in pieces of at most this many characters.
MAX_PIECE_CHARS = 20_000
#: Below this many messages, extraction runs in-process (worker start-up costs ~1 s).
PARALLEL_MIN_MESSAGES = 400

#: What the rules find in a message: ``(knowledge, start, end)`` in the message's text.
Item = tuple[Entity | Action | Topic | Tag, int, int]
#: The extractor and version on this extractor's refs, as packed.
_SPACY = (EXTRACTOR_NAME, EXTRACTOR_VERSION)

#: Batches queued or running per worker process.
IN_FLIGHT_PER_WORKER = 3

_NER_TYPES = {
    "PERSON": "person",
    "ORG": "organization",
    "GPE": "place",
    "LOC": "place",
    "FAC": "facility",
    "NORP": "group",
    "PRODUCT": "product",
    "EVENT": "event",
    "WORK_OF_ART": "work",
    "LAW": "law",
    "LANGUAGE": "language",
}
_DETERMINERS = wordset(
    "a an the this that these those my your his her its our their some any every each all",
    "no another such what which whose",
)
# Head nouns too vague to be an entity or a topic on their own.
_VAGUE = wordset(
    "thing things stuff lot lots bit kind sort way ways time times day days one ones",
    "something anything everything nothing someone anyone everyone somebody anybody",
    "everybody nobody part parts fact case point place guys guy people person folks yeah",
    "yes hey hi hello wow oh okay ok sure thanks thank bunch couple end today tomorrow",
    "yesterday week weeks month months year years moment",
)
_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours"})
_SECOND_PERSON = frozenset({"you", "your", "yours", "yourself", "yourselves"})
_SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass"})
_OBJECT_DEPS = frozenset({"dobj", "obj", "attr", "oprd", "acomp"})
_TITLES = frozenset({"mr", "mrs", "ms", "dr", "prof", "sir", "madam", "mr.", "mrs.", "ms.", "dr."})
_LIGHT_VERBS = frozenset({"be", "have", "do", "get", "go", "make", "let", "know", "think"})
_SPACE_RE = re.compile(r"\s+")
# Small words inside names: "Children of Time", "Barnes & Noble", "Ludwig van Beethoven".
_TITLE_JOINERS = wordset("of the and & de von van der del da la le")
# Prepositions that title case leaves in lower case ("Empire in Black and Gold"); inside
# a name only when the parse hangs them on a one-word name before them (_joins_title).
_TITLE_PREPOSITIONS = wordset(
    "in on for to with by into over under upon without beyond through against among"
)


def _norm_phrase(tokens: Sequence[Token], text: str) -> tuple[str, int, int] | None:
    """Strip leading determiners/possessives and trailing punctuation from a token run,
    and emoji or other symbols at either end ("the 3rd 🇯🇵" is "3rd"); the span never
    ends inside a character made of several code points."""
    items = list(tokens)
    while items and (
        items[0].lower_ in _DETERMINERS
        or items[0].tag_ in ("PRP$", "DT", "POS", "PDT")
        or items[0].is_punct
        or items[0].is_space
        or is_symbol(items[0].text)
    ):
        items.pop(0)
    while items and (
        items[-1].is_punct
        or items[-1].tag_ == "POS"
        or items[-1].is_space
        or is_symbol(items[-1].text)
    ):
        items.pop()
    if not items:
        return None
    start, end = snap(text, items[0].idx, items[-1].idx + len(items[-1].text))
    phrase = _SPACE_RE.sub(" ", text[start:end]).strip()
    if not phrase or not any(c.isalnum() for c in phrase):
        return None
    return phrase, start, end


class _Context:
    """Per-message facts the extraction rules need (who "I" and "you" are).

    ``text`` is the piece of the message as written; the doc was parsed from
    :func:`_parse_text` of it, which has the same length, so token offsets index both and
    names are cut from what the message says.
    """

    __slots__ = ("chunk_of", "chunks", "me", "message", "offset", "people", "text", "you")

    def __init__(self, message: Message, offset: int, doc: Doc, text: str | None = None) -> None:
        self.message = message
        self.offset = offset
        self.text = doc.text if text is None else text
        self.chunks: list[SpacySpan] = list(doc.noun_chunks)
        self.chunk_of: dict[int, SpacySpan] = {}
        for chunk in self.chunks:
            for i in range(chunk.start, chunk.end):
                self.chunk_of[i] = chunk
        self.me = message.speaker
        self.you = message.recipients[0] if len(message.recipients) == 1 else None
        self.people = {p.lower() for p in (message.speaker, *message.recipients) if p}
        for p in list(self.people):
            self.people.update(p.split())


class SpacyExtractor:
    """Offline knowledge extraction on spaCy (``en_core_web_sm`` by default)."""

    name = EXTRACTOR_NAME
    version = EXTRACTOR_VERSION

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        ner: bool = False,
        workers: int | None = None,
        batch_size: int = 256,
        metadata: bool = True,
    ) -> None:
        self.model = model
        self.ner = ner
        self.workers = workers if workers is not None else min(2, os.cpu_count() or 1)
        self.batch_size = batch_size
        self.metadata = metadata
        self._nlp: Language | None = None
        self._pool: ProcessPoolExecutor | None = None
        self._frozen = False  # freeze_before_fork() called for the pool

    def settings(self) -> dict[str, object]:
        return {
            "model": self.model,
            "ner": self.ner,
        }

    # -- pipeline ---------------------------------------------------------------------

    @property
    def nlp(self) -> Language:
        if self._nlp is None:
            self._nlp = load_pipeline(self.model, ner=self.ner)
        return self._nlp

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        if self.workers > 1 and len(messages) >= PARALLEL_MIN_MESSAGES:
            yield from self._extract_parallel(messages, progress)
            return
        for refs in self._extract_local(messages):
            yield refs
            if progress:
                progress(1)

    def _extract_local(self, messages: Sequence[Message]) -> Iterator[list[SemanticRef]]:
        for message, items in zip(messages, self._items(messages), strict=True):
            yield self._finish(message, [_ref(message, *item) for item in items])

    def _extract_packed(self, messages: Sequence[Message]) -> Iterator[list[tuple[Any, ...]]]:
        """:meth:`_extract_local`'s refs of each message as :func:`pack_refs` packs them,
        packed from what the rules found (no refs built only to be taken apart)."""
        for message, items in zip(messages, self._items(messages), strict=True):
            rows = pack_refs(metadata_knowledge(message)) if self.metadata else []
            rows.extend(_pack_knowledge(k, (start, end, *_SPACY)) for k, start, end in items)
            yield rows

    def _items(self, messages: Sequence[Message]) -> Iterator[list[Item]]:
        """What the rules find in each message (see :func:`extract_items`), in order."""
        pieces: list[tuple[int, int, str, str]] = []
        for i, message in enumerate(messages):
            pieces.extend((i, *p) for p in _pieces(message.text[:MAX_EXTRACT_CHARS]))
        results: list[list[Item]] = [[] for _ in messages]
        done = 0
        docs = pipe(self.nlp, [p[3] for p in pieces], batch_size=self.batch_size)
        for (index, offset, text, _), doc in zip(pieces, docs, strict=True):
            while done < index:
                yield results[done]
                done += 1
            set_pos(doc)
            results[index].extend(extract_items(doc, _Context(messages[index], offset, doc, text)))
        while done < len(messages):
            yield results[done]
            done += 1

    def _finish(self, message: Message, refs: list[SemanticRef]) -> list[SemanticRef]:
        if self.metadata:
            return metadata_knowledge(message) + refs
        return refs

    def _extract_parallel(
        self, messages: Sequence[Message], progress: Progress | None
    ) -> Iterator[list[SemanticRef]]:
        """Spread batches over worker processes (see :meth:`_workers`)."""
        # Small batches first, so results (and the caller's writing) start early.
        batches: list[list[Message]] = []
        start = 0
        while start < len(messages):
            size = 64 if len(batches) < self.workers * 2 else 256
            batches.append(list(messages[start : start + size]))
            start += size
        done = 0
        # A window of batches in flight, not all of them: results the writer has not
        # taken yet are held here, so a writer slower than the workers would otherwise
        # gather the whole input's knowledge in memory.
        window = IN_FLIGHT_PER_WORKER * self.workers
        in_flight: deque[Future[list[list[tuple[Any, ...]]]]] = deque()
        try:
            pool = self._workers()
            sent = 0
            for batch in batches:
                while sent < len(batches) and len(in_flight) < window:
                    in_flight.append(pool.submit(_worker_extract, batches[sent]))
                    sent += 1
                packed = in_flight.popleft().result()
                for message, rows in zip(batch, packed, strict=True):
                    yield unpack_refs(message, rows)
                done += len(batch)
                if progress:
                    progress(len(batch))
        except BrokenProcessPool:
            self.close()
            warnings.warn(
                "parallel extraction failed to start worker processes (a script that calls "
                "structrag must guard its entry point with `if __name__ == '__main__':`); "
                "continuing in one process",
                RuntimeWarning,
                stacklevel=2,
            )
            for local in self._extract_local(messages[done:]):
                yield local
                if progress:
                    progress(1)
        finally:
            for future in in_flight:  # stopped early: drop what is queued
                future.cancel()

    def start(self, messages: int) -> None:
        """Start the worker processes now if ``messages`` will be extracted by them, so
        they fork and set up while the ingest reads and numbers its input. Only where
        workers are forked (Linux): spawned ones load the pipeline each, and need the
        caller's script to guard its entry point."""
        if (
            self.workers > 1
            and messages >= PARALLEL_MIN_MESSAGES
            and sys.platform.startswith("linux")
        ):
            self._workers().submit(_worker_ready)

    def _workers(self) -> ProcessPoolExecutor:
        """The worker processes, started on first use and kept until :meth:`close` (an
        ingest of many files starts them once, while it holds one file's messages).

        On Linux they are forked from this process with the pipeline loaded, so they
        start at once and share the model's memory, and a script that calls structrag
        needs no ``if __name__ == "__main__":`` guard. Elsewhere they are spawned (each
        loads the pipeline) and the caller's script must guard its entry point, as for
        any multiprocessing. A fork server would keep workers smaller still, but it runs
        the caller's script again in each worker, as spawning does."""
        if self._pool is None:
            method = "fork" if sys.platform.startswith("linux") else "spawn"
            if method == "fork":
                _ = self.nlp
                lemma_tables()
                # the pipeline, out of the collectors' way
                self._frozen = freeze_before_fork()
            self._pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context(method),
                initializer=_worker_init,
                initargs=((self.model, self.ner, self.batch_size), os.getpid()),
            )
        return self._pool

    def close(self) -> None:
        """Stop the worker processes, if any were started."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        if self._frozen:
            unfreeze()
            self._frozen = False


# -- worker processes --------------------------------------------------------------------

_WORKER: SpacyExtractor | None = None


def _exit_with(owner: int) -> None:
    """End this worker when ``owner``, the process it extracts for, dies: a ``kill -9`` of
    an ingest must not leave workers holding hundreds of MB each. Workers started by the
    fork server are its children, not the owner's, so the kernel's parent-death signal
    would not reach them: a thread waits on the owner itself (a pidfd on Linux; elsewhere
    it polls)."""
    if os.getppid() == owner and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            if libc.prctl(1, signal.SIGTERM, 0, 0, 0) == 0:  # PR_SET_PDEATHSIG
                if os.getppid() != owner:  # it died before the call took effect
                    os._exit(1)
                return
    try:
        handle: int | None = os.pidfd_open(owner)
    except ProcessLookupError:
        os._exit(1)
    except (OSError, AttributeError):  # no pidfd here: poll
        handle = None

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])  # readable once the owner has exited
        else:
            while _alive(owner):
                time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="structrag-owner-watch").start()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _worker_init(config: tuple[str, bool, int], owner: int) -> None:
    global _WORKER
    # Ctrl-C reaches the whole process group. The owner handles it and stops the pool; a
    # worker that died of it could hold the result queue's lock and hang the pool's
    # shutdown (and each printed a traceback).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # SIGTERM kills a worker (the CLI's handler, inherited by a fork, would make it an
    # exception the pool's loop survives): the kernel sends it when the owner dies.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    _exit_with(owner)
    model, ner, batch_size = config
    _WORKER = SpacyExtractor(model=model, ner=ner, workers=1, batch_size=batch_size)
    # The pipeline (forked with this process, or loaded here): numpy's products, one
    # BLAS thread (the workers already use every core between them).
    for_extraction(_WORKER.nlp)


def _worker_ready() -> None:
    """Nothing: submitted to start the workers (a pool forks them at its first task)."""


def _worker_extract(messages: list[Message]) -> list[list[tuple[Any, ...]]]:
    assert _WORKER is not None
    return list(_WORKER._extract_packed(messages))


def pack_refs(refs: Sequence[SemanticRef]) -> list[tuple[Any, ...]]:
    """A message's refs as plain tuples, to send to another process (see below)."""
    return [_pack(r) for r in refs]


def unpack_refs(message: Message, rows: Sequence[tuple[Any, ...]]) -> list[SemanticRef]:
    """The refs :func:`pack_refs` packed, for ``message``."""
    return [_unpack(message, r) for r in rows]


# Refs cross the process boundary as plain tuples: unpickling pydantic models costs
# more than parsing the messages, and these were validated when the worker built them.


def _pack_facets(facets: tuple[Facet, ...]) -> tuple[tuple[Any, ...], ...]:
    return tuple((f.name, f.value, f.units) for f in facets)


def _pack(ref: SemanticRef) -> tuple[Any, ...]:
    head = (ref.span.start, ref.span.end, ref.extractor, ref.extractor_version)
    return _pack_knowledge(ref.knowledge, head)


def _pack_knowledge(k: Entity | Action | Topic | Tag, head: tuple[Any, ...]) -> tuple[Any, ...]:
    if isinstance(k, Entity):
        return ("entity", *head, k.name, k.types, _pack_facets(k.facets))
    if isinstance(k, Action):
        return (
            "action",
            *head,
            k.verbs,
            k.tense,
            k.subject,
            k.object,
            k.indirect_object,
            k.negated,
            _pack_facets(k.params),
        )
    return (k.kind, *head, k.text)


def _unpack_facets(items: tuple[tuple[Any, ...], ...]) -> tuple[Facet, ...]:
    return tuple(unchecked(Facet, {"name": n, "value": v, "units": u}) for n, v, u in items)


def _unpack(message: Message, packed: tuple[Any, ...]) -> SemanticRef:
    kind, start, end, extractor, version, *rest = packed
    knowledge: Entity | Action | Topic | Tag
    if kind == "entity":
        knowledge = unchecked(
            Entity,
            {"kind": kind, "name": rest[0], "types": rest[1], "facets": _unpack_facets(rest[2])},
        )
    elif kind == "action":
        verbs, tense, subject, obj, indirect, negated, params = rest
        knowledge = unchecked(
            Action,
            {
                "kind": kind,
                "verbs": verbs,
                "tense": tense,
                "subject": subject,
                "object": obj,
                "indirect_object": indirect,
                "negated": negated,
                "params": _unpack_facets(params),
            },
        )
    elif kind == "topic":
        knowledge = unchecked(Topic, {"kind": kind, "text": rest[0]})
    else:
        knowledge = unchecked(Tag, {"kind": kind, "text": rest[0]})
    return unchecked(
        SemanticRef,
        {
            "ref_id": None,
            "conversation": message.conversation,
            "message_id": message.id,
            "span": unchecked(Span, {"start": start, "end": end}),
            "knowledge": knowledge,
            "extractor": extractor,
            "extractor_version": version,
        },
    )


def _pieces(text: str) -> list[tuple[int, str, str]]:
    """The pieces of a message to parse: (offset, text as written, text to parse). A piece
    starts at its first character that is not white space once stage directions are blanked
    out: a parse that opens on white space tags the next word as a name ("Right")."""
    pieces = []
    for offset, piece in _split(text):
        parsed = parse_text(piece)
        lead = len(parsed) - len(parsed.lstrip())
        if lead < len(parsed):
            pieces.append((offset + lead, piece[lead:], parsed[lead:]))
    return pieces


#: A blank line (a paragraph ends), and a Markdown heading line: the text is parsed in
#: blocks cut there, so that no name or phrase runs from one into the next (a heading
#: "# Configuration" over "Set max_retries to 5" made the name "Configuration Set"). A
#: single line break stays inside a block: text wrapped at a width breaks sentences so.
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_HEADING = re.compile(r"^#{1,6}[ \t][^\n]*(?:\n|$)", re.MULTILINE)


def _blocks(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of each block of ``text`` (see :data:`_BLANK_LINE`)."""
    if "\n" not in text:
        return [(0, len(text))]
    cuts = {0, len(text)}
    cuts.update(m.end() for m in _BLANK_LINE.finditer(text))
    for m in _HEADING.finditer(text):
        cuts.update((m.start(), m.end()))
    return list(itertools.pairwise(sorted(cuts)))


def _split(text: str) -> list[tuple[int, str]]:
    """Cut a text into pieces at blocks (:func:`_blocks`), and a long block at paragraph
    or sentence ends, keeping offsets."""
    pieces: list[tuple[int, str]] = []
    for first, last in _blocks(text):
        start = first
        while start < last:
            end = min(last, start + MAX_PIECE_CHARS)
            if end < last:
                cut = max(text.rfind("\n", start, end), text.rfind(". ", start, end))
                if cut > start + MAX_PIECE_CHARS // 2:
                    end = cut + 1
            if text[start:end].strip():
                pieces.append((start, text[start:end]))
            start = end
    return pieces


# -- the extraction rules ------------------------------------------------------------------


def extract_doc(doc: Doc, ctx: _Context) -> list[SemanticRef]:
    """All knowledge in one parsed piece of a message."""
    return [_ref(ctx.message, *item) for item in extract_items(doc, ctx)]


def extract_items(doc: Doc, ctx: _Context) -> list[Item]:
    """All knowledge in one parsed piece of a message, as ``(knowledge, start, end)``: the
    span in the message, on grapheme boundaries."""
    items: list[tuple[Any, int, int]] = []
    _entities(doc, ctx, items)
    _actions(doc, ctx, items)
    _topics(ctx, items)
    found: list[Item] = []
    for knowledge, begin, finish in items:
        # A name's span is on grapheme boundaries already (_norm_phrase); an action's
        # may start or end at a token inside an emoji sequence.
        start, end = snap(ctx.text, begin, finish)
        found.append((knowledge, start + ctx.offset, end + ctx.offset))
    return found


def _ref(
    message: Message, knowledge: Entity | Action | Topic | Tag, start: int, end: int
) -> SemanticRef:
    return SemanticRef(
        conversation=message.conversation,
        message_id=message.id,
        span=Span(start=start, end=end),
        knowledge=knowledge,
        extractor=EXTRACTOR_NAME,
        extractor_version=EXTRACTOR_VERSION,
    )


def _proper_runs(doc: Doc) -> Iterator[list[Token]]:
    """Names: maximal runs of name tokens with the small words of titles inside them
    ("Children of Time", "Empire in Black and Gold"), cut where "and" joins two names
    ("Kevin and Christina", "Shadows of the Apt and Children of Time")."""
    run: list[Token] = []
    for token in doc:
        if is_name_token(token) or (run and _joins_title(token, run)):
            run.append(token)
            continue
        if run:
            yield from _split_coordination(run)
            run = []
    if run:
        yield from _split_coordination(run)


def _joins_title(token: Token, run: list[Token]) -> bool:
    """Whether a lower-case word continues the name in ``run``: a joiner followed (maybe
    after an article) by another name token. "of", "the", "&" and the particles of
    surnames always may. Another preposition only when it hangs on a one-word name before
    it: titles are made so ("Empire in Black and Gold", "Alice in Wonderland", "A Dance
    with Dragons"), while after a longer name, or on the verb, it starts a description
    ("Commander Data in Star Trek", "met Kevin in Boston"). "from" and "at" never do:
    they say where a person is from or works ("Satya from Microsoft")."""
    low = token.lower_
    if low not in _TITLE_JOINERS and low not in _TITLE_PREPOSITIONS:
        return False
    doc = token.doc
    j = token.i + 1
    if j < len(doc) and doc[j].lower_ in ("the", "a", "an") and low != "the":
        j += 1
    if j >= len(doc) or not is_name_token(doc[j]):
        return False
    if low in _TITLE_JOINERS:
        return True
    return len(run) == 1 and token.head.i == run[0].i and token.dep_ == "prep"


def _split_coordination(run: list[Token]) -> Iterator[list[Token]]:
    """Cut a run at each "and" that coordinates two names. An "and" inside a phrase of a
    title ("Empire in Black and Gold": "Gold" is coordinated with "Black", the object of
    "in") stays; one whose second conjunct hangs on the head of the first part ("Kevin
    and Christina", "Shadows of the Apt and Children of Time") joins two names, and so
    does one the parse says nothing about."""
    part: list[Token] = []
    for k, token in enumerate(run):
        if token.lower_ == "and" and part and not _inner_coordination(part, run[k + 1 :]):
            yield part
            part = []
            continue
        part.append(token)
    if part:
        yield part


def _top(tokens: Sequence[Token]) -> Token:
    """The token of a run that the rest hangs on: "Scott" of "Kevin Scott", "Empire" of
    "Empire in Black and Gold" (the parse's head, not the last word)."""
    inside = {t.i for t in tokens}
    return next((t for t in tokens if t.head.i not in inside or t.head.i == t.i), tokens[-1])


def _inner_coordination(left: list[Token], right: list[Token]) -> bool:
    inside = {t.i for t in left}
    top = _top(left)
    return any(t.dep_ == "conj" and t.head.i in inside and t.head.i != top.i for t in right)


def _entity_types(
    head: Token,
    name: str,
    ctx: _Context,
    ner_label: str | None,
    title: bool = False,
) -> tuple[str, ...]:
    """Types of an entity, most specific first. A ``title`` (a capitalised run with small
    words inside, "Children of Time") is a name: its head noun says nothing of what it
    names (the book is not a child)."""
    types: list[str] = []
    low = name.lower()
    if ner_label:
        mapped = _NER_TYPES.get(ner_label)
        if mapped:
            types.append(mapped)
    if low in ctx.people or (head.i > 0 and head.doc[head.i - 1].lower_.rstrip(".") in _TITLES):
        types.insert(0, "person")
    common = head.tag_ in ("NN", "NNS") and not title
    head_lemma = lemma(head.text, head.tag_) if common else low
    if common:
        types.append(head_lemma)
    if not types:
        types.append("name" if title or head.tag_ in ("NNP", "NNPS") else "thing")
    return tuple(dict.fromkeys(t for t in types if t))


def _without_address(tokens: Sequence[Token], head: Token) -> Sequence[Token]:
    """A phrase without what comes before an interjection or a comma ahead of its head:
    "Hey Caroline" and "art's amazing, Caroline" address Caroline. Punctuation inside a
    word ("Jean-Luc", "T-shirt") cuts nothing."""
    cut = 0
    for k, token in enumerate(tokens):
        if token.i >= head.i:
            break
        parted = token.is_punct and bool(token.whitespace_) and token.tag_ != "HYPH"
        if parted or token.tag_ == "UH" or token.dep_ == "intj":
            cut = k + 1
    return tokens[cut:]


def _entities(doc: Doc, ctx: _Context, items: list[tuple[Any, int, int]]) -> None:
    seen: set[str] = set()
    ner_labels: dict[int, str] = {}
    for ent in doc.ents:
        for token in ent:
            ner_labels[token.i] = ent.label_
    roles = _roles(doc, ctx)

    def add(
        tokens: Sequence[Token], head: Token, facets: tuple[Facet, ...] = (), title: bool = False
    ) -> None:
        normed = _norm_phrase(_without_address(tokens, head), ctx.text)
        if normed is None:
            return
        name, start, end = normed
        key = name.lower()
        # A name seen before in the piece comes again only with a role stated here.
        if (key in seen and head.i not in roles) or key in _VAGUE or len(name) < 2:
            return
        label = ner_labels.get(head.i)
        if label in ("DATE", "TIME", "CARDINAL", "ORDINAL", "PERCENT", "MONEY", "QUANTITY"):
            return
        seen.add(key)
        types = _entity_types(head, name, ctx, label, title)
        role = _apposition(head)
        if role and role not in types:
            types = (*types, role)
        jobs = roles.pop(head.i, [])
        for pronoun, person in (("me", ctx.me), ("you", ctx.you)):
            if person and key == person.lower():
                jobs = [*roles.pop(pronoun, []), *jobs]
        if jobs:
            facets = (*facets, *_job_facets(jobs))
            if "person" not in types:
                types = ("person", *types)
        items.append((Entity(name=name, types=types, facets=facets), start, end))

    for ent in doc.ents:
        if ent.label_ in _NER_TYPES:
            add(list(ent), ent.root)
    for run in _proper_runs(doc):
        while run and run[-1].lower_ in _TITLE_JOINERS:
            run = run[:-1]
        if not run:
            continue
        add(run, _top(run), title=any(t.lower_ in _TITLE_JOINERS for t in run))
    for chunk in ctx.chunks:
        root = _chunk_root(chunk)
        if root is None or root.tag_ not in ("NN", "NNS", "NNP", "NNPS") or root.lower_ in _VAGUE:
            continue
        tokens = [
            t
            for t in chunk
            if not (
                t.tag_ in ("JJ", "JJR", "JJS")
                and t.i < root.i
                and t.dep_ == "amod"
                and not _is_compound_adj(t)
            )
        ]
        add(tokens, root, _facets(root, ctx))
    # A role whose person was not an entity's head above ("Ana" inside a longer chunk).
    for i in [k for k in roles if isinstance(k, int)]:
        around = ctx.chunk_of.get(i)
        add([t for t in around if t.i <= i] if around is not None else [doc[i]], doc[i])
    # Roles of "I" and "you" ("I work as a nurse"): on an entity named after the speaker
    # (or the one listener), spanning the statement, unless the text names them too.
    for person, statements in _people_roles(roles, ctx).items():
        if person.lower() in seen:
            continue
        seen.add(person.lower())
        start = min(s for _, s, _ in statements)
        end = max(e for _, _, e in statements)
        entity = Entity(name=person, types=("person",), facets=_job_facets(statements))
        items.append((entity, start, end))


# -- roles: what a person does for a living, or their part in the conversation -------------

#: The facet that holds a person's job or role ("Chief Technology Officer for Microsoft").
JOB_FACET = ROLE_FACET_NAMES[0]
# Nouns that name a role by themselves (the endings in _is_agent_noun find most others:
# writer, reporter, scientist, librarian, assistant, student, engineer, trainee).
_ROLE_NOUNS = wordset(
    "host guest cohost co-host nurse chef cook doctor judge coach pilot clerk nanny maid",
    "poet author officer lawyer ceo cto cfo coo cmo cio vp president chair head advocate",
    "architect barista vet surgeon dentist cop detective soldier marine model athlete",
    "mentor intern attorney scholar expert specialist fellow staff faculty crew agent",
    "diplomat tutor principal dean priest pastor rabbi imam monk nun deputy chief",
    "mayor senator governor minister secretary analyst critic guide",
)
# Person nouns that say how someone relates to others, how old they are or what they are
# like, not what they do: "Melanie is a great mom", "Ana, my cousin", "I was a teenager".
_NOT_ROLES = wordset(
    "friend buddy pal mate bestie bff partner wife husband spouse boyfriend girlfriend",
    "fiance fiancee mom mother dad father parent son daughter child kid baby brother",
    "sister sibling cousin aunt uncle niece nephew grandma grandpa grandmother",
    "grandfather grandparent grandson granddaughter grandchild neighbor neighbour",
    "roommate classmate relative family member fan lover beginner winner loser",
    "dreamer believer follower supporter user reader viewer listener survivor human",
    "man woman person guy gal lady gentleman girl boy client patient customer owner",
    "newcomer foreigner stranger teenager teen adult toddler youngster sucker career",
    "reminder computer",
)
_ROLE_CUT_DEPS = frozenset({"relcl", "acl", "appos", "conj", "cc", "punct", "advcl", "parataxis"})
# Prepositions that stay in a role ("nurse at the hospital", "professor of physics");
# others start a comparison or an aside ("writer like you").
_ROLE_PREPOSITIONS = wordset("at for of in with on from")
_HYPOTHETICAL = wordset("would could might should may 'd")


def _is_role_noun(token: Token) -> bool:
    """Whether a noun names a role or a job: a listed one ("host", "CTO") or, for a common
    noun, an agent noun by its ending ("writer", "scientist", "assistant"), unless it says
    how someone relates to others ("friend", "mom", "fan"). A capitalised noun counts only
    when listed: "Chief Technology Officer" is a title, "Turner" a surname."""
    if not token.tag_.startswith("NN"):
        return False
    word = lemma(token.text, token.tag_) if token.tag_ in ("NN", "NNS") else token.lower_
    last = word.rsplit("-", 1)[-1]
    if word in _NOT_ROLES or last in _NOT_ROLES:
        return False
    if word in _ROLE_NOUNS or last in _ROLE_NOUNS:
        return True
    if token.tag_ in ("NNP", "NNPS"):
        return word in ("manager", "director", "engineer", "developer", "editor", "producer")
    return _is_agent_noun(word)


def _is_agent_noun(word: str) -> bool:
    """A noun for someone who does something, by its ending: "-er"/"-or" on a verb that
    is not itself a verb ("writer", "reporter", "runner", "creator"; not "shelter" or
    "mirror", which come from no verb, nor "matter" or "offer", which are verbs); "-ist",
    "-ian", "-ant", "-ent", "-eer", "-ee"; compounds of "-man", "-woman", "-person"."""
    if len(word) > 5 and word.endswith(("er", "or")):
        verbs = lemma_tables()["verb"][0]
        stem = word[:-2]
        return word not in verbs and (
            stem in verbs or stem + "e" in verbs or (stem[-1] == stem[-2] and stem[:-1] in verbs)
        )
    if len(word) > 5 and word.endswith(("ist", "ian", "eer")):
        return True
    if len(word) > 6 and word.endswith(("ant", "ent", "ee")):
        return True
    return word.endswith(("man", "woman", "person")) and len(word) > 7


def _role_phrase(head: Token, ctx: _Context) -> tuple[str, int, int] | None:
    """The words of a role, from its head noun: "Chief Technology Officer for Microsoft",
    "sci-fi author"; without the article, a relative clause ("who's written dozens of
    books") or a list that follows."""
    cut: set[int] = set()
    for child in head.children:
        if child.dep_ in _ROLE_CUT_DEPS or (
            child.dep_ == "prep" and child.lower_ not in _ROLE_PREPOSITIONS
        ):
            cut.update(t.i for t in child.subtree)
    tokens: list[Token] = []
    for token in head.subtree:
        if token.i in cut:
            if token.i > head.i:
                break
            continue
        tokens.append(token)
    return _norm_phrase(tokens, ctx.text)


def _roles(doc: Doc, ctx: _Context) -> dict[int | str, list[tuple[str, int, int]]]:
    """Roles stated in a parsed piece, by the token of the person's name (its head) or, for
    "I" and "you", by "me" and "you": (role, start, end) where the text states it.

    * apposition: "Kevin Scott, Chief Technology Officer for Microsoft"; "your host,
      Kevin Scott"; "I'm Christina Warren, Senior Developer Advocate at GitHub" (the
      parser often makes the role a conjunct: a comma and no "and" tell it apart);
    * copula: "Adrian is a sci-fi author", "I'm your host";
    * "work as": "I work as a nurse".
    """
    roles: dict[int | str, list[tuple[str, int, int]]] = {}

    def note(person: Token, role_head: Token, start: int, *, copula: bool = False) -> None:
        key = _person_key(person, ctx, copula=copula)
        if key is None or key == role_head.i or not _is_role_noun(role_head):
            return
        phrase = _role_phrase(role_head, ctx)
        if phrase is None:
            return
        text, begin, end = phrase
        statements = roles.setdefault(key, [])
        if text.lower() not in (t.lower() for t, _, _ in statements):
            statements.append((text, min(start, begin), end))

    for token in doc:
        dep = token.dep_
        if dep == "appos" and token.head.tag_.startswith("NN"):
            # "Kevin Scott, Chief Technology Officer" and "your host, Kevin Scott" (but not
            # "Thanks for the offer, Maria!", where the name is whom the speaker addresses).
            note(token.head, token, token.head.idx)
            if not _addressed(token) and any(
                c.dep_ in ("det", "poss") for c in token.head.children
            ):
                note(token, token.head, token.head.idx)
        elif dep == "conj" and token.tag_.startswith("NN") and _comma_conjunct(token):
            note(token.head, token, token.head.idx)
        elif dep == "attr" and _states(token.head, "be") and not _negated(token):
            subject = _subject(token.head)
            if subject is not None:
                note(subject, token, subject.idx, copula=True)
        elif dep == "pobj" and token.head.lower_ == "as" and _states(token.head.head, "work"):
            subject = _subject(token.head.head)
            if subject is not None:
                note(subject, token, subject.idx)
    return roles


def _person_key(person: Token, ctx: _Context, *, copula: bool) -> int | str | None:
    """Whose role it is: "me" or "you" for those pronouns, else the token of a person's
    name; in a copula also the name beside its subject ("My friend Ana is a nurse")."""
    if person.tag_ == "PRP":
        if person.lower_ in ("i", "me"):
            return "me"
        return "you" if person.lower_ == "you" else None
    if is_name_token(person) or (person.tag_.startswith("NN") and person.lower_ in ctx.people):
        return person.i
    if copula:
        named = [c for c in person.children if c.dep_ == "appos" and is_name_token(c)]
        if named:
            return named[0].i
    return None


def _states(verb: Token, word: str) -> bool:
    """Whether ``verb`` is ``word`` said as a fact: not "would be", "could work as"."""
    return (
        verb.tag_.startswith("VB")
        and lemma(verb.text, verb.tag_) == word
        and not any(c.dep_ == "aux" and c.lower_ in _HYPOTHETICAL for c in verb.children)
    )


def _negated(attribute: Token) -> bool:
    """ "I'm not a writer", "I'm no writer"."""
    return any(c.dep_ == "neg" for c in attribute.head.children) or any(
        c.dep_ == "det" and c.lower_ == "no" for c in attribute.children
    )


def _addressed(name: Token) -> bool:
    """Whether a name ends its sentence after a comma: the person spoken to ("Nice
    reminder, Gina!"), not one introduced ("your host, Kevin Scott, ...")."""
    after = name.doc[name.i + 1] if name.i + 1 < len(name.doc) else None
    return after is None or after.text in (".", "!", "?", "!!", "...") or after.is_space


def _comma_conjunct(token: Token) -> bool:
    """A conjunct set off by a comma alone ("Christina Warren, Senior Developer Advocate"):
    an apposition the parser took for a list ("Kevin, Satya and Ana" has its "and")."""
    head = token.head
    between = token.doc[head.i + 1 : token.i]
    return (
        any(t.text == "," for t in between)
        and not any(t.dep_ == "cc" for t in head.children)
        and all(t.dep_ != "conj" or t.i == token.i for t in head.children)
    )


def _people_roles(
    roles: dict[int | str, list[tuple[str, int, int]]], ctx: _Context
) -> dict[str, list[tuple[str, int, int]]]:
    """The roles of "I" and "you", by the person's name (the speaker, the one listener)."""
    people: dict[str, list[tuple[str, int, int]]] = {}
    for key, person in (("me", ctx.me), ("you", ctx.you)):
        if person and key in roles:
            people.setdefault(person, []).extend(roles[key])
    return people


def _job_facets(statements: list[tuple[str, int, int]]) -> tuple[Facet, ...]:
    """One job facet per role, in the order stated ("host" said twice counts once)."""
    texts: dict[str, str] = {}
    for text, _, _ in statements:
        texts.setdefault(text.lower(), text)
    return tuple(Facet(name=JOB_FACET, value=text) for text in texts.values())


def _apposition(head: Token) -> str | None:
    """The common noun a name stands beside ("my friend Melanie", "Ana, my cousin"): a
    type of the named entity, which links it to the noun's owner in the entity graph."""
    if head.dep_ == "appos" and head.head.tag_ in ("NN", "NNS"):
        return lemma(head.head.text, head.head.tag_)
    for child in head.children:
        if child.dep_ == "appos" and child.tag_ in ("NN", "NNS"):
            return lemma(child.text, child.tag_)
    return None


def _is_compound_adj(token: Token) -> bool:
    # "support group" keeps nouns; adjectives like "LGBTQ" tagged JJ but capitalised stay.
    return token.text[:1].isupper()


def _facets(root: Token, ctx: _Context) -> tuple[Facet, ...]:
    facets: list[Facet] = []
    for child in root.children:
        if child.dep_ == "poss":
            owner = _resolve(child, ctx)
            if owner:
                facets.append(Facet(name="owner", value=owner))
        elif child.dep_ == "nummod" and child.like_num:
            try:
                facets.append(Facet(name="count", value=float(child.text.replace(",", ""))))
            except ValueError:
                facets.append(Facet(name="count", value=child.lower_))
        elif child.dep_ == "amod" and child.tag_ in ("JJ", "JJR", "JJS"):
            facets.append(Facet(name="quality", value=child.lower_))
    return tuple(facets)


def _resolve(token: Token, ctx: _Context) -> str | None:
    """A pronoun's referent when the message makes it clear, else None."""
    low = token.lower_
    if low in _FIRST_PERSON:
        return ctx.me
    if low in _SECOND_PERSON:
        return ctx.you
    return None


def _phrase(token: Token, ctx: _Context) -> str | None:
    if token.tag_ in ("PRP", "PRP$") or token.pos_ == "PRON":
        return _resolve(token, ctx)
    chunk = ctx.chunk_of.get(token.i)
    if chunk is not None:
        normed = _norm_phrase(list(chunk), ctx.text)
        return normed[0] if normed else None
    if is_symbol(token.text):  # an emoji the parser took for a word
        return None
    if token.tag_ in ("JJ", "JJR", "JJS", "CD"):
        return token.text
    if token.tag_.startswith("VB"):
        return lemma(token.text, token.tag_)
    if token.tag_.startswith("NN"):
        tokens = [t for t in token.subtree if t.i <= token.i][-4:]
        normed = _norm_phrase(tokens, ctx.text)
        return normed[0] if normed else None
    return None


def _tense(verb: Token) -> Tense:
    aux = [c for c in verb.children if c.dep_ in ("aux", "auxpass")]
    for a in aux:
        if a.lower_ in ("will", "'ll", "shall", "wo", "gonna"):
            return "future"
    head = verb.head
    if (
        verb.dep_ == "xcomp"
        and head.lower_ == "going"
        and any(c.lower_ in ("am", "is", "are", "'m", "'re", "'s") for c in head.children)
    ):
        return "future"
    if verb.tag_ == "VBD" or any(a.tag_ == "VBD" for a in aux):
        return "past"
    if verb.tag_ == "VBN" and any(a.lower_ in ("have", "has", "'ve", "had") for a in aux):
        return "past"
    return "present"


def _subject(verb: Token) -> Token | None:
    seen = 0
    current = verb
    while seen < 4:
        for child in current.children:
            if child.dep_ in _SUBJECT_DEPS:
                return child
        if current.dep_ in ("xcomp", "conj", "advcl") and current.head is not current:
            current = current.head
            seen += 1
            continue
        return None
    return None


_MODALS = frozenset({"will", "would", "can", "could", "should", "may", "might", "must"})


def _actions(doc: Doc, ctx: _Context, items: list[tuple[Any, int, int]]) -> None:
    for verb in doc:
        is_verb = verb.tag_.startswith("VB") or verb.tag_ == "MD"
        if not is_verb or verb.dep_ in ("aux", "auxpass", "amod", "compound"):
            continue
        verb_lemma = lemma(verb.text, verb.tag_)
        if verb_lemma in _MODALS or not is_verb_word(verb_lemma):
            continue
        subject_tok = _subject(verb)
        subject = _phrase(subject_tok, ctx) if subject_tok is not None else None
        obj: str | None = None
        indirect: str | None = None
        params: list[Facet] = []
        verbs = [verb_lemma]
        used = [verb.i] + ([subject_tok.i] if subject_tok is not None else [])
        for child in verb.children:
            dep = child.dep_
            if dep == "prt":
                if is_verb_word(child.lower_):
                    verbs.append(child.lower_)
            elif dep in _OBJECT_DEPS and obj is None:
                obj = _phrase(child, ctx)
                used.append(child.i)
            elif dep == "dative":
                indirect = _phrase(child, ctx)
                used.append(child.i)
            elif dep in ("prep", "agent"):
                pobj = next((c for c in child.children if c.dep_ == "pobj"), None)
                if pobj is None:
                    continue
                value = _phrase(pobj, ctx)
                if value is None:
                    continue
                if (
                    child.lower_ in ("to", "for")
                    and indirect is None
                    and (obj is not None or verb_lemma in ("say", "tell", "give", "send", "show"))
                ):
                    indirect = value
                else:
                    params.append(Facet(name=child.lower_, value=value))
                used.append(pobj.i)
        if verb_lemma in _LIGHT_VERBS and obj is None and not params:
            continue
        if subject is None and obj is None:
            continue
        negated = any(c.dep_ == "neg" for c in verb.children) or any(
            c.dep_ == "neg" for c in verb.head.children if verb.dep_ == "xcomp"
        )
        # The span covers the words: an emoji the parser made an object stands for the
        # words of its noun chunk ("the city hospital 🏥": "hospital"), or for nothing.
        worded = [w.i for w in (_word(doc[i], ctx) for i in used) if w is not None] or used
        first = doc[min(worded)]
        last = doc[max(worded)]
        action = Action(
            verbs=tuple(verbs),
            tense=_tense(verb),
            subject=subject,
            object=obj,
            indirect_object=indirect,
            negated=negated,
            params=tuple(params[:4]),
        )
        items.append((action, first.idx, last.idx + len(last.text)))


def _chunk_root(chunk: SpacySpan) -> Token | None:
    """The head of a noun chunk, or its last word when the parser made an emoji its head
    ("the big family farm 👨‍👩‍👧": "farm"); None when it has no word."""
    root = chunk.root
    if not is_symbol(root.text):
        return root
    words = [t for t in chunk if t.i < root.i and not is_symbol(t.text)]
    return words[-1] if words else None


def _word(token: Token, ctx: _Context) -> Token | None:
    """The token itself, or for an emoji the head word of its noun chunk (if any)."""
    if not is_symbol(token.text):
        return token
    chunk = ctx.chunk_of.get(token.i)
    return _chunk_root(chunk) if chunk is not None else None


def _topics(ctx: _Context, items: list[tuple[Any, int, int]]) -> None:
    seen: set[str] = set()
    for chunk in ctx.chunks:
        root = _chunk_root(chunk)
        if root is None or root.tag_ not in ("NN", "NNS", "NNP", "NNPS") or root.lower_ in _VAGUE:
            continue
        if any(t.is_punct for t in chunk):
            continue
        normed = _norm_phrase(list(chunk), ctx.text)
        if normed is None:
            continue
        text, start, end = normed
        content = [
            t for t in chunk if t.tag_.startswith(("NN", "JJ", "VBG")) and not is_symbol(t.text)
        ]
        if len(content) < 2:
            continue
        key = text.lower()
        if key in seen:
            continue
        seen.add(key)
        items.append((Topic(text=text), start, end))
