"""TypeAgent / KnowPro index files (``*_index_data.json``, microsoft/typeagent-py).

Imports the messages (``textChunks`` joined by newlines, ``metadata.speaker`` and
``listeners``/``recipients``, ``tags``, ``timestamp``) and the LLM-extracted
``semanticRefs`` as knowledge, so an index built by an LLM elsewhere can be queried here.
Message ids are the KnowPro message ordinals (``"0"``, ``"1"`` ...). KnowPro locates
knowledge to a text chunk, not a character range, so each imported ref's span is the first
occurrence of its name (or topic text) in that chunk, or the whole chunk when the text is
not there verbatim. The extractor is recorded as ``typeagent`` with the file's version.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    StreamedSource,
    clean_text,
    expect,
    finish,
    parse_json,
    str_list,
)
from structrag.importers.json_stream import JsonStream, JsonSurvey, message_opens
from structrag.importers.messages_json import KeyedRaw, check_messages, checked_source
from structrag.models import (
    Action,
    Conversation,
    Entity,
    Facet,
    Knowledge,
    Message,
    SemanticRef,
    Span,
    Tag,
    Tense,
    Topic,
)
from structrag.timeparse import parse_datetime

EXTRACTOR = "typeagent"
_NONE = {None, "", "none"}
_TENSES: dict[str, Tense] = {"past": "past", "present": "present", "future": "future"}


def looks_like_typeagent(data: Any) -> bool:
    if not isinstance(data, dict):
        return False
    msgs = data.get("messages")
    return "semanticRefs" in data or (
        isinstance(msgs, list)
        and bool(msgs)
        and isinstance(msgs[0], dict)
        and "textChunks" in msgs[0]
    )


def load_typeagent(path: Path, text: str, options: LoadOptions, data: Any = None) -> ParsedSource:
    if data is None:
        data = parse_json(path, text)
    expect(path, data, dict, "the top level", "a TypeAgent index")
    messages = expect(path, data.get("messages"), list, "messages", "'messages'")
    conv_id = _conversation_id(path, data, options)
    raws: list[RawMessage] = []
    chunk_starts: list[list[int]] = []
    for i, msg in enumerate(messages):
        raw, starts = _raw_message(path, msg, i)
        raws.append(raw)
        chunk_starts.append(starts)
    version = _version(path, data.get("fileHeader"))
    source = finish(
        path,
        "typeagent",
        _conversation(path, conv_id, data.get("nameTag"), data.get("tags")),
        raws,
        parse_time=parse_datetime,
        default_recipients=False,
    )
    texts = [m.text for m in source.messages]
    refs = data.get("semanticRefs") or []
    expect(path, refs, list, "semanticRefs", "'semanticRefs'")
    skipped = 0
    for r, ref in enumerate(refs):
        ordinal, chunk, knowledge = _checked_ref(path, ref, r)
        _in_range(
            path, r, ordinal, chunk, len(chunk_starts[ordinal]) if ordinal < len(texts) else None
        )
        if knowledge is None:
            skipped += 1
            continue
        source.knowledge.append(
            _ref(conv_id, ordinal, knowledge, texts[ordinal], chunk_starts[ordinal], chunk, version)
        )
    if skipped:
        source.warnings.append(_skipped(path, skipped))
    return source


def stream_typeagent(path: Path, options: LoadOptions, survey: JsonSurvey) -> StreamedSource | None:
    """A TypeAgent index checked in one walk that holds one message or semantic ref at a
    time (its term indexes are walked, not held), and walked again for its messages when
    they are written. Its semantic refs, which KnowPro does not keep in message order, go
    to a temporary SQLite database while it is checked (:class:`_SpilledRefs`), and are
    looked up there message by message. SQLite keeps it in memory up to its page cache,
    then in a file it unlinks on opening (in ``SQLITE_TMPDIR`` or ``TMPDIR``, else
    ``/var/tmp``), so nothing is left behind, even by a killed process. The same
    messages, knowledge and warnings as :func:`load_typeagent`. None for a document of
    another shape (:func:`load_typeagent` says what is wrong with it)."""
    data = survey.skeleton
    if not (
        isinstance(data, dict)
        and isinstance(data.get("messages"), list)
        and isinstance(data.get("semanticRefs") or [], list)
        and isinstance(data.get("fileHeader") or {}, dict)
        and isinstance(data.get("tags") or [], list)
        and not isinstance(data.get("nameTag"), dict | list)
        and survey.length("messages")  # an index of no messages is loaded as it is
    ):
        return None
    conv_id = _conversation_id(path, data, options)
    version = _version(path, data.get("fileHeader"))
    spill = _SpilledRefs(conv_id, version)
    tags: list[Any] = []

    def raws(stream: JsonStream, checking: bool = False) -> Iterator[KeyedRaw]:
        for event in stream:
            at = event.path
            if len(at) != 2:
                continue
            if at[0] == "messages":
                i = int(at[1])
                raw, starts = _raw_message(path, event.value, i)
                if checking:
                    spill.add_message(i, starts)
                yield i, raw, None
            elif checking and at[0] == "semanticRefs":
                spill.add_ref(path, event.value, int(at[1]))
            elif checking and at[0] == "tags":
                tags.append(event.value)

    stream = JsonStream(path, message_opens, options.encoding)
    check = check_messages(
        path,
        raws(stream, checking=True),
        options,
        default=conv_id,
        keyed_by_line=False,
        default_recipients=False,
    )
    spill.checked(path)
    source = checked_source(
        path,
        "typeagent",
        options,
        check,
        stream.sha256,
        raws,
        lambda p, e: JsonStream(p, message_opens, e),
        conversations=[_conversation(path, conv_id, data.get("nameTag"), tags)],
    )
    source.knowledge = spill
    if spill.skipped:
        source.warnings.append(_skipped(path, spill.skipped))
    return source


class _SpilledRefs:
    """A TypeAgent index's semantic refs in a private temporary SQLite database (see
    :func:`stream_typeagent`), with where each message's text chunks start, so that a
    message's refs come back with their spans when it is written."""

    _BATCH = 2_000

    def __init__(self, conversation: str, version: str) -> None:
        self.conversation = conversation
        self.version = version
        self.skipped = 0
        self._count = 0
        self._refs: list[tuple[int, int, int, str]] = []
        self._messages: list[tuple[int, int, str]] = []
        self._lock = threading.Lock()
        self._db = sqlite3.connect("", check_same_thread=False)
        self._db.executescript(
            "CREATE TABLE messages (ordinal INTEGER PRIMARY KEY, chunks INTEGER NOT NULL,"
            " starts TEXT NOT NULL);"
            "CREATE TABLE refs (seq INTEGER PRIMARY KEY, ordinal INTEGER NOT NULL,"
            " chunk INTEGER NOT NULL, knowledge TEXT NOT NULL);"
        )
        weakref.finalize(self, self._db.close)

    def __len__(self) -> int:
        return self._count

    def add_message(self, ordinal: int, starts: list[int]) -> None:
        self._messages.append((ordinal, len(starts), json.dumps(starts)))
        if len(self._messages) >= self._BATCH:
            self._flush()

    def add_ref(self, path: Path, ref: Any, seq: int) -> None:
        ordinal, chunk, knowledge = _checked_ref(path, ref, seq)
        if knowledge is None:
            self.skipped += 1
            return
        self._refs.append((seq, ordinal, chunk, _KNOWLEDGE.dump_json(knowledge).decode()))
        self._count += 1
        if len(self._refs) >= self._BATCH:
            self._flush()

    def _flush(self) -> None:
        self._db.executemany("INSERT INTO messages VALUES (?, ?, ?)", self._messages)
        self._db.executemany("INSERT INTO refs VALUES (?, ?, ?, ?)", self._refs)
        self._messages.clear()
        self._refs.clear()

    def checked(self, path: Path) -> None:
        """Once every message and ref was added: the first ref (in the file's order) whose
        message or chunk is not there is an :class:`InputError`, as :func:`load_typeagent`
        gives it; then the refs are indexed by message."""
        self._flush()
        bad = self._db.execute(
            "SELECT r.seq, r.ordinal, r.chunk, m.chunks FROM refs r"
            " LEFT JOIN messages m ON m.ordinal = r.ordinal"
            " WHERE m.ordinal IS NULL OR r.chunk >= m.chunks"
            " ORDER BY r.seq LIMIT 1"
        ).fetchone()
        if bad is not None:
            _in_range(path, *bad)
        self._db.execute("CREATE INDEX refs_by_message ON refs (ordinal, seq)")
        self._db.commit()

    def of(self, message: Message) -> list[SemanticRef]:
        ordinal = int(message.id)
        with self._lock:
            rows = self._db.execute(
                "SELECT r.chunk, r.knowledge, m.starts FROM refs r JOIN messages m"
                " USING (ordinal) WHERE ordinal = ? ORDER BY r.seq",
                (ordinal,),
            ).fetchall()
        if not rows:
            return []
        starts: list[int] = json.loads(rows[0][2])
        return [
            _ref(
                self.conversation,
                ordinal,
                _KNOWLEDGE.validate_json(knowledge),
                message.text,
                starts,
                chunk,
                self.version,
            )
            for chunk, knowledge, _ in rows
        ]


_KNOWLEDGE: TypeAdapter[Knowledge] = TypeAdapter(Knowledge)


def _conversation_id(path: Path, data: dict[str, Any], options: LoadOptions) -> str:
    return options.conversation or str(data.get("nameTag") or path.stem)


def _version(path: Path, header: Any) -> str:
    header = expect(path, header or {}, dict, "fileHeader", "fileHeader")
    return str(header.get("version", "0"))


def _conversation(path: Path, conv_id: str, name: Any, tags: Any) -> Conversation:
    return Conversation(
        id=conv_id,
        name=str(name) if name else None,
        metadata={"source": str(path), "format": "typeagent", "tags": tags or []},
    )


def _skipped(path: Path, count: int) -> str:
    return f"{path}: {count} semantic ref(s) of unknown kind skipped"


def _raw_message(path: Path, msg: Any, i: int) -> tuple[RawMessage, list[int]]:
    """One message (``messages[i]``), and where each of its text chunks starts in its text
    (the chunks joined by newlines)."""
    where = f"messages[{i}]"
    expect(path, msg, dict, where, "a message")
    chunks = expect(path, msg.get("textChunks"), list, f"{where}.textChunks", "textChunks")
    starts, parts, offset = [], [], 0
    for c, chunk in enumerate(chunks):
        expect(path, chunk, str, f"{where}.textChunks[{c}]", "a text chunk")
        starts.append(offset)
        parts.append(chunk)
        offset += len(chunk) + 1
    meta = msg.get("metadata") or {}
    expect(path, meta, dict, f"{where}.metadata", "metadata")
    speaker = meta.get("speaker")
    recipients = meta.get("listeners", meta.get("recipients"))
    extra = {k: v for k, v in meta.items() if k not in ("speaker", "listeners", "recipients")}
    raw = RawMessage(
        text="\n".join(parts),
        location=where,
        id=str(i),
        speaker=str(speaker) if speaker else None,
        recipients=str_list(path, recipients, f"{where}.metadata.listeners"),
        timestamp=msg.get("timestamp"),
        tags=str_list(path, msg.get("tags"), f"{where}.tags"),
        metadata=extra,
    )
    return raw, starts


def _checked_ref(path: Path, ref: Any, r: int) -> tuple[int, int, Knowledge | None]:
    """``semanticRefs[r]``: its message and chunk ordinals, and its knowledge (None for a
    kind not imported)."""
    where = f"semanticRefs[{r}]"
    expect(path, ref, dict, where, "a semantic ref")
    text_range = expect(path, ref.get("range") or {}, dict, f"{where}.range", "a range")
    start = expect(path, text_range.get("start") or {}, dict, f"{where}.range.start", "a location")
    ordinal = start.get("messageOrdinal")
    chunk = start.get("chunkOrdinal", 0) or 0
    if not isinstance(ordinal, int) or isinstance(ordinal, bool) or ordinal < 0:
        raise _not_there(path, r, "messageOrdinal", ordinal)
    if not isinstance(chunk, int) or isinstance(chunk, bool) or chunk < 0:
        raise _not_there(path, r, "chunkOrdinal", chunk)
    return ordinal, chunk, _knowledge(path, ref, where)


def _in_range(path: Path, r: int, ordinal: int, chunk: int, chunks: int | None) -> None:
    """Raise for ``semanticRefs[r]`` when its message is not there (``chunks`` None) or
    has no chunk ``chunk`` (``chunks``: the message's chunk count)."""
    if chunks is None:
        raise _not_there(path, r, "messageOrdinal", ordinal)
    if chunk >= chunks:
        raise _not_there(path, r, "chunkOrdinal", chunk)


def _not_there(path: Path, r: int, field: str, value: Any) -> InputError:
    """The error for ``semanticRefs[r]`` whose ``messageOrdinal`` or ``chunkOrdinal`` names
    no message or chunk of the index."""
    what = "message" if field == "messageOrdinal" else "chunk"
    return InputError(path, f"at semanticRefs[{r}].range: {field} {value!r} is not a {what}")


def _ref(
    conversation: str,
    ordinal: int,
    knowledge: Knowledge,
    text: str,
    starts: list[int],
    chunk: int,
    version: str,
) -> SemanticRef:
    begin = starts[chunk]
    end = starts[chunk + 1] - 1 if chunk + 1 < len(starts) else len(text)
    return SemanticRef(
        conversation=conversation,
        message_id=str(ordinal),
        span=_locate(knowledge, text[begin:end], begin, len(text)),
        knowledge=knowledge,
        extractor=EXTRACTOR,
        extractor_version=version,
    )


def _locate(knowledge: Knowledge, chunk: str, begin: int, text_len: int) -> Span:
    needle = ""
    if isinstance(knowledge, Entity):
        needle = knowledge.name
    elif isinstance(knowledge, Topic | Tag):
        needle = knowledge.text
    elif isinstance(knowledge, Action) and knowledge.verbs:
        needle = knowledge.verbs[0]
    at = chunk.lower().find(needle.lower()) if needle else -1
    if at >= 0:
        return Span(start=begin + at, end=begin + at + len(needle))
    return Span(start=min(begin, text_len), end=min(begin + len(chunk), text_len))


def _facet(path: Path, value: Any, where: str) -> Facet:
    expect(path, value, dict, where, "a facet")
    name = str(value.get("name", "")).strip() or "value"
    raw = value.get("value")
    units = None
    if isinstance(raw, dict):
        units = raw.get("units")
        raw = raw.get("amount")
    if not isinstance(raw, str | int | float | bool):
        raw = "" if raw is None else str(raw)
    if isinstance(raw, int) and not isinstance(raw, bool):
        raw = float(raw)
    return Facet(name=name, value=raw, units=str(units) if units else None)


def _name(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and value.strip().lower() in _NONE):
        return None
    return str(value).strip()


def _knowledge(path: Path, ref: dict[str, Any], where: str) -> Knowledge | None:
    kind = ref.get("knowledgeType")
    body: dict[str, Any] = expect(
        path, ref.get("knowledge"), dict, f"{where}.knowledge", "knowledge"
    )
    if kind == "entity":
        types = str_list(path, body.get("type"), f"{where}.knowledge.type")
        facets = tuple(
            _facet(path, f, f"{where}.knowledge.facets[{i}]")
            for i, f in enumerate(body.get("facets") or [])
        )
        name = clean_text(str(body.get("name") or ""))
        if not name:
            return None
        return Entity(name=name, types=tuple(t.lower() for t in types), facets=facets)
    if kind == "action":
        verbs = str_list(path, body.get("verbs"), f"{where}.knowledge.verbs")
        tense = str(body.get("verbTense") or body.get("verb_tense") or "present").lower()
        params: list[Facet] = []
        for i, param in enumerate(body.get("params") or []):
            if isinstance(param, str):
                params.append(Facet(name="detail", value=param))
            else:
                params.append(_facet(path, param, f"{where}.knowledge.params[{i}]"))
        subject_facet = body.get("subjectEntityFacet")
        if isinstance(subject_facet, dict):
            facet = _facet(path, subject_facet, f"{where}.knowledge.subjectEntityFacet")
            params.append(facet.model_copy(update={"name": f"subject {facet.name}"}))
        return Action(
            verbs=tuple(v.lower() for v in verbs) or ("do",),
            tense=_TENSES.get(tense, "present"),
            subject=_name(body.get("subjectEntityName")),
            object=_name(body.get("objectEntityName")),
            indirect_object=_name(body.get("indirectObjectEntityName")),
            params=tuple(params),
        )
    if kind in ("topic", "tag"):
        text = clean_text(str(body.get("text") or ""))
        if not text:
            return None
        return Topic(text=text) if kind == "topic" else Tag(text=text)
    return None
