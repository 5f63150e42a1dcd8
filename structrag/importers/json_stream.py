"""A JSON document read as a stream of values, so a file of a million messages is never
held in memory as one parsed tree.

:class:`JsonStream` walks the document from the file in pieces. At the containers its
``opens`` rule names (the top-level array, a ``messages`` array ...) it steps inside and
gives each member as an event of its own; any other value is decoded whole by the standard
library's decoder, so what a value decodes to is exactly what :func:`json.loads` gives for
it. The memory held is one piece of the file and the largest value decoded whole. The
SHA-256 of the bytes read is taken on the way (:attr:`JsonStream.sha256`, once the walk
reached the end). Errors are those of :func:`structrag.importers.base.parse_json`: the
line and column, a hint when the file looks truncated, too deep, bad bytes.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    StreamedSource,
    check_surrogates,
    codec_of,
    decode_text,
    invalid_json,
    open_bytes,
    read_again,
    read_bytes,
    too_deep,
    undecodable,
)
from structrag.models import Conversation, Message, SemanticRef

#: A key or index on the way from the top of the document to a value.
JsonPath = tuple[str | int, ...]
#: Whether to step inside the container at a path: ``opens(path, "[" or "{")``.
Opens = Callable[[JsonPath, str], bool]

_CHUNK = 1 << 18
_WS = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()
#: The longest literal a piece of the file can cut in two (``-Infinity``).
_LITERAL = 10
_NUMBER_CHARS = frozenset("0123456789.eE+-")


class Opened:
    """The value of an event for a container the walk steps inside (its members follow
    as events of their own)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"Opened({self.kind!r})"


ARRAY = Opened("array")
OBJECT = Opened("object")


@dataclass(frozen=True)
class JsonEvent:
    """A value at ``path``: decoded whole, or :data:`ARRAY` / :data:`OBJECT` for a
    container whose members come next."""

    path: JsonPath
    value: Any


class JsonStream:
    """The events of one JSON file, in document order (see the module's docs). Each
    iteration reads the file from its start; :attr:`sha256` is set when one ends."""

    def __init__(
        self, path: Path, opens: Opens, encoding: str = "utf-8", *, chunk: int = _CHUNK
    ) -> None:
        self.path = path
        self.chunk = chunk
        self.opens = opens
        self.encoding = encoding
        self.sha256 = ""
        self._start()

    def _start(self) -> None:
        self._buf = ""
        self._pos = 0
        self._eof = False
        self._line = 1  # the line of _buf[0]
        self._column = 0  # characters before _buf[0] on its line
        self._read: Callable[[int], str] = lambda size: ""

    def __iter__(self) -> Iterator[JsonEvent]:
        self._start()
        try:
            decoder = codecs.getincrementaldecoder(codec_of(self.encoding))()
        except LookupError:
            raise InputError(
                self.path, f"unknown encoding {self.encoding!r}", hint="use e.g. utf-8"
            ) from None
        handle = open_bytes(self.path)
        digest = hashlib.sha256()
        with handle:

            def read(size: int) -> str:
                while True:
                    data = handle.read(size)
                    digest.update(data)
                    try:
                        text: str = decoder.decode(data, final=not data)
                    except UnicodeDecodeError:
                        decode_text(self.path, read_bytes(self.path), self.encoding)
                        raise  # pragma: no cover - the whole file decoded after all (changed)
                    except UnicodeError as exc:  # e.g. UTF-16 without a byte order mark
                        raise undecodable(self.path, self.encoding, exc) from None
                    if text or not data:
                        return text

            self._read = read
            if self._peek() == "":
                self._fail("Expecting value", len(self._buf))
            yield from self._walk(())
            if self._peek() != "":
                self._fail("Extra data", self._pos)
        self.sha256 = digest.hexdigest()

    # -- the buffer ------------------------------------------------------------------

    def _fill(self, grow: bool = False) -> bool:
        """Read the next piece of the file (dropping what was consumed); False at the end.
        ``grow``: a value did not fit in the buffer; read as much again as it holds, so a
        huge value is decoded a few times, not once per piece."""
        if self._eof:
            return False
        if self._pos:
            done = self._buf[: self._pos]
            newlines = done.count("\n")
            if newlines:
                self._line += newlines
                self._column = len(done) - done.rfind("\n") - 1
            else:
                self._column += len(done)
            self._buf = self._buf[self._pos :]
            self._pos = 0
        text = self._read(max(self.chunk, len(self._buf) if grow else 0))
        if not text:
            self._eof = True
            return False
        if "\x00" in text:
            at = len(self._buf) + text.index("\x00")
            self._buf += text
            raise InputError(
                self.path,
                "file contains NUL bytes; it looks binary or UTF-16 encoded",
                line=self._where(at)[0],
                hint="convert it to UTF-8 text, or pass --encoding utf-16",
            )
        self._buf += text
        return True

    def _peek(self) -> str:
        """The next character that is not white space ("" at the end of the file)."""
        while True:
            match = _WS.match(self._buf, self._pos)
            self._pos = match.end() if match else self._pos
            if self._pos < len(self._buf):
                return self._buf[self._pos]
            if not self._fill():
                return ""

    def _where(self, at: int) -> tuple[int, int]:
        newlines = self._buf.count("\n", 0, at)
        if newlines:
            return self._line + newlines, at - self._buf.rfind("\n", 0, at)
        return self._line, self._column + at + 1

    def _fail(self, message: str, at: int) -> None:
        line, column = self._where(at)
        truncated = self._eof and at >= len(self._buf.rstrip())
        raise invalid_json(self.path, message, line, column, truncated=truncated)

    def _value(self) -> Any:
        """Decode the value at the position whole (reading more of the file as needed)."""
        while True:
            start = self._pos
            try:
                value, end = _DECODER.raw_decode(self._buf, start)
            except RecursionError:
                raise too_deep(self.path, line=self._where(start)[0]) from None
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated string") or exc.pos >= (
                    len(self._buf.rstrip()) - _LITERAL
                )
                if cut and not self._eof:
                    self._fill(grow=True)  # decode again with more (at the end: fail here)
                    continue
                self._fail(exc.msg, exc.pos)
            if (
                isinstance(value, int | float)
                and (end >= len(self._buf) or self._buf[end] in _NUMBER_CHARS)
                and not self._eof
            ):
                self._fill()
                continue  # the number may go on in the next piece
            try:
                check_surrogates(self.path, self._buf[start:end], value)
            except InputError as exc:
                line, column = self._where(start)
                first = (exc.line or 1) == 1
                raise InputError(
                    self.path,
                    exc.detail,
                    line=line + (exc.line or 1) - 1,
                    column=(column - 1 + (exc.column or 1)) if first else exc.column,
                    hint=exc.hint,
                ) from None
            self._pos = end
            return value

    # -- the walk --------------------------------------------------------------------

    def _expect(self, what: str) -> None:
        self._fail(what, self._pos)

    def _closed(self, close: str) -> bool:
        """After an item of a container: past its ``,`` (False) or its closing ``close``
        (True); anything else is the error ``json`` reports there."""
        char = self._peek()
        if char == close:
            self._pos += 1
            return True
        if char != ",":
            self._expect("Expecting ',' delimiter")
        self._pos += 1
        return False

    def _walk(self, path: JsonPath) -> Iterator[JsonEvent]:
        char = self._peek()
        if char not in ("[", "{") or not self.opens(path, char):
            yield JsonEvent(path, self._value())
            return
        self._pos += 1
        if char == "[":
            yield JsonEvent(path, ARRAY)
            if self._peek() == "]":
                self._pos += 1
                return
            index = 0
            while True:
                if self._peek() == "":
                    self._expect("Expecting value")
                yield from self._walk((*path, index))
                index += 1
                if self._closed("]"):
                    return
            return
        yield JsonEvent(path, OBJECT)
        if self._peek() == "}":
            self._pos += 1
            return
        while True:
            if self._peek() != '"':
                self._expect("Expecting property name enclosed in double quotes")
            key = self._value()
            if self._peek() != ":":
                self._expect("Expecting ':' delimiter")
            self._pos += 1
            if self._peek() == "":
                self._expect("Expecting value")
            yield from self._walk((*path, key))
            if self._closed("}"):
                return


# -- a first walk: the document's shape -------------------------------------------------

#: How many items of each array the skeleton of a survey keeps.
SKELETON_ITEMS = 5


#: Top-level members of a TypeAgent index that are indexes of its knowledge (as large as
#: the knowledge): walked (see :func:`index_opens`), never held.
INDEX_MEMBERS = frozenset(
    {"semanticIndexData", "relatedTermsIndexData", "threadData", "messageIndexData"}
)


def index_opens(path: JsonPath, char: str) -> bool:
    """Inside a member of a TypeAgent index that is walked and let go (its term indexes):
    step into every array, and into objects down to the depth of a term's entry; the
    small objects below (a ref ordinal and score, a text location) are decoded whole,
    three times fewer events than stepping into each."""
    return char == "[" or len(path) <= 3


#: Top-level members of a Telegram account export (``{"chats": {"list": [chat, ...]}}``)
#: that hold its chats, in the order they are read: walked down to each message (see
#: :func:`account_opens`).
ACCOUNT_GROUPS = ("chats", "left_chats")


def account_opens(path: JsonPath, char: str) -> bool:
    """Inside a member of a Telegram account export that holds chats
    (:data:`ACCOUNT_GROUPS`): step into the object, its ``list``, each chat and the
    chat's ``messages``, so that one message is decoded at a time, never a chat."""
    depth = len(path)
    if depth == 1:
        return True
    if path[1] != "list":
        return False
    if depth == 2:
        return char == "["
    if depth == 3:
        return char == "{" and isinstance(path[2], int)
    return depth == 4 and char == "[" and path[3] == "messages"


def message_opens(path: JsonPath, char: str) -> bool:
    """The containers a walk of a message file steps inside: the top level, the arrays
    right under a top-level object (``messages`` ...), each entry of ``conversations``
    with its ``messages`` array, the chats of a Telegram account export
    (:data:`ACCOUNT_GROUPS`, walked as :func:`account_opens` says) and a TypeAgent
    index's term indexes (:data:`INDEX_MEMBERS`, walked as :func:`index_opens` says).
    Anything else (a message, a chat, a semantic ref) is decoded whole."""
    depth = len(path)
    if depth == 0:
        return True
    if path[0] in INDEX_MEMBERS:
        return index_opens(path, char)
    if path[0] in ACCOUNT_GROUPS and (char == "{" or depth > 1):
        return account_opens(path, char)
    if depth == 1:
        return char == "[" and isinstance(path[0], str)
    if path[0] == "conversations" and isinstance(path[1], int):
        return (depth == 2 and char == "{") or (depth == 3 and path[2] == "messages")
    return False


@dataclass
class JsonSurvey:
    """What a first walk of a JSON document (:func:`survey_json`) found: its
    :attr:`skeleton` (the document with each array it stepped into cut to its first
    :data:`SKELETON_ITEMS` items, enough to tell its format), the :attr:`lengths` of those
    arrays, and per entry of a top-level ``conversations`` array its ``id`` and ``name``
    (:attr:`headers`, which may come after its messages), whether it is an ``object`` and
    whether its ``messages`` are an array."""

    skeleton: Any
    lengths: dict[JsonPath, int]
    headers: dict[int, dict[str, Any]]
    sha256: str

    def length(self, *path: str | int) -> int:
        return self.lengths.get(tuple(path), 0)


def survey_json(path: Path, encoding: str = "utf-8") -> JsonSurvey:
    """Walk a JSON document once, holding no more than its skeleton (see
    :class:`JsonSurvey`). Raises :class:`InputError` for a file that is not JSON."""
    stream = JsonStream(path, message_opens, encoding)
    nodes: dict[JsonPath, Any] = {}
    lengths: dict[JsonPath, int] = {}
    headers: dict[int, dict[str, Any]] = {}
    root: Any = None
    for event in stream:
        at = event.path
        value = [] if event.value is ARRAY else {} if event.value is OBJECT else event.value
        if 2 <= len(at) <= 3 and at[0] == "conversations" and isinstance(at[1], int):
            header = headers.setdefault(at[1], {})
            if len(at) == 2:
                header["object"] = event.value is OBJECT
            elif at[2] in ("id", "name"):
                header[str(at[2])] = value
            elif at[2] == "messages":
                header["messages"] = event.value is ARRAY
        if not at:
            root = nodes[at] = value
            continue
        if isinstance(at[-1], int):
            lengths[at[:-1]] = at[-1] + 1
            if at[-1] >= SKELETON_ITEMS:
                continue
        parent = nodes.get(at[:-1])
        if isinstance(parent, list):
            parent.append(value)
        elif isinstance(parent, dict):
            parent[at[-1]] = value
        else:
            continue  # inside an item the skeleton leaves out
        if isinstance(value, list | dict):
            nodes[at] = value
    return JsonSurvey(skeleton=root, lengths=lengths, headers=headers, sha256=stream.sha256)


# -- formats whose top-level array holds one conversation per item --------------------


def stream_items(
    path: Path,
    fmt: str,
    options: LoadOptions,
    part: Callable[[Any, int], ParsedSource],
) -> StreamedSource:
    """A JSON document whose top-level array holds one conversation per item (a ChatGPT
    export, LoCoMo): each item is read, checked by ``part`` (item, index) and let go; its
    messages are made again from it when they are written. The memory held is one item."""

    def items(stream: JsonStream) -> Iterator[ParsedSource]:
        for event in stream:
            if len(event.path) == 1:
                yield part(event.value, int(event.path[0]))

    def top(at: JsonPath, char: str) -> bool:
        return not at

    stream = JsonStream(path, top, options.encoding)
    conversations: list[Conversation] = []
    warnings: list[str] = []
    knowledge: list[SemanticRef] = []
    count = 0
    ids: set[str] = set()
    dupes: set[str] = set()
    for source in items(stream):
        for conversation in source.conversations:
            (dupes if conversation.id in ids else ids).add(conversation.id)
        conversations.extend(source.conversations)
        warnings.extend(source.warnings)
        knowledge.extend(source.knowledge)
        count += source.count
    if dupes:
        raise InputError(
            path,
            f"conversation id(s) {', '.join(map(repr, sorted(dupes)))} appear more than once",
            hint="give each conversation its own id",
        )
    digest = stream.sha256

    def messages(stream: JsonStream) -> Iterator[Message]:
        for source in items(stream):
            yield from source.messages

    def read() -> Iterator[Message]:
        return read_again(
            path, options.encoding, digest, messages, lambda p, e: JsonStream(p, top, e)
        )

    return StreamedSource(
        path=str(path),
        format=fmt,
        conversations=conversations,
        count=count,
        sha256=digest,
        read=read,
        warnings=warnings,
        knowledge=knowledge,
    )
