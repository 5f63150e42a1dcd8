"""A conversation's digest: what a first question on it reads, written at ingest.

A first ``ask`` on a conversation builds its :class:`~structrag.query.derived.ConversationView`
from about ten reads of the store (the message frame, the refs, aliases, the knowledge
vocabulary, relation edges, message vectors, and the messages it renders), each a scan of
a large table. An ingest writes, for every conversation it touched, one
:class:`ConversationDigest` holding their results, in the same transaction as the rows
they come from (``digests`` table; any other write to a conversation deletes its digest,
see :class:`~structrag.store.duckdb.writer.DuckDBTransaction`). A view reads it in one
query instead; without a digest (a live write since, an index written before digests) it
reads the tables as before, and the answer is the same either way.

A digest is stored as bytes: a JSON header (the text columns and lists, and where each
numeric array lies) followed by the arrays' raw bytes, the whole compressed with zlib.
Reading one runs no code from the file (no pickle).
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from structrag.query.context import TokenCounter, count_within, render_line
from structrag.store.protocols import KnowledgeStore, MessageFrame, RefTable, Scope
from structrag.version import __version__

#: Bumped when what a digest holds, or how it is made, changes: a digest of another
#: version (or written by another release of structrag) is not read. What it is made by:
#: :meth:`DigestContent.to_bytes`, :func:`build_digest`, :func:`vocabulary_words`,
#: :func:`~structrag.query.context.render_line` (and ``format_date``), and the store
#: methods it calls; ``tests/test_digest.py`` fails when their code changes and this
#: does not. Making the lines from their fields alone instead of whole messages
#: (``4518b45``) changed that code and not one byte of a digest (tested): same version.
DIGEST_VERSION = 1

#: Messages read from the store at a time while their lines are rendered.
RENDER_BATCH = 2_000

_MAGIC = b"SRD"
_VERSION = struct.Struct("<H")
_LENGTH = struct.Struct("<I")


@dataclass
class DigestContent:
    """What a digest holds: the store's answers about one conversation's messages
    (``Scope(conversation=...)``), as :func:`build_digest` gathers them."""

    frame: MessageFrame
    refs: RefTable
    aliases: list[tuple[str, str, str]]
    #: The words of its knowledge vocabulary (see :func:`vocabulary_words`).
    words: list[str]
    edges: list[tuple[str, str, str]]
    #: The embedding model of ``vectors`` (None: the index stores none).
    model: str | None
    vector_mkeys: np.ndarray
    vectors: np.ndarray
    #: The token counter ``tokens`` were counted with.
    counter: str
    #: Each frame message rendered as in a context, and its tokens (with its newline; as
    #: :func:`~structrag.query.context.count_within` counts them: a line longer than any
    #: budget is not counted to its end).
    lines: list[str]
    tokens: np.ndarray

    def to_bytes(self) -> bytes:
        f = self.frame
        arrays: dict[str, np.ndarray] = {
            "mkeys": f.mkeys.astype(np.int64),
            "ordinals": f.ordinals.astype(np.int64),
            "timestamps": f.timestamps.astype("datetime64[s]").view(np.int64),
            "ref_ids": self.refs.ref_ids.astype(np.int64),
            "ref_mkeys": self.refs.mkeys.astype(np.int64),
            "ref_kinds": self.refs.kinds.astype(np.uint8),
            "vector_mkeys": self.vector_mkeys.astype(np.int64),
            "vectors": self.vectors.astype(np.float32),
            "tokens": self.tokens.astype(np.int32),
        }
        texts = _Texts()
        columns = {
            "ids": texts.add(f.ids.tolist()),
            "sessions": texts.add(f.sessions.tolist()),
            "speakers": texts.add(f.speakers.tolist()),
            "lines": texts.add(self.lines),
            "words": texts.add(self.words),
            **{f"aliases{i}": texts.add([a[i] for a in self.aliases]) for i in range(3)},
            **{f"edges{i}": texts.add([e[i] for e in self.edges]) for i in range(3)},
        }
        arrays["text_ends"] = np.array(texts.ends, dtype=np.int64)
        layout: dict[str, list[Any]] = {}
        offset = 0
        for name, array in arrays.items():
            layout[name] = [array.dtype.str, list(array.shape), offset]
            offset += array.nbytes
        header = {
            "structrag": __version__,
            "model": self.model,
            "counter": self.counter,
            "arrays": layout,
            "columns": columns,
            "text": "".join(texts.parts),
        }
        head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()
        body = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays.values())
        packed = zlib.compress(_LENGTH.pack(len(head)) + head + body, 1)
        return _MAGIC + _VERSION.pack(DIGEST_VERSION) + packed


class _Texts:
    """String columns kept as one text and where each string ends in it: a first
    question reads a few hundred of a digest's strings, not its tens of thousands."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.ends: list[int] = []
        self._length = 0

    def add(self, values: Sequence[str | None]) -> tuple[int, int, list[int]]:
        """Append a column; returns (its first string's number, count, where it is None)."""
        first = len(self.ends)
        nulls = []
        for at, value in enumerate(values):
            if value is None:
                nulls.append(at)
                value = ""
            self.parts.append(value)
            self._length += len(value)
            self.ends.append(self._length)
        return first, len(values), nulls


class ConversationDigest:
    """A stored digest, read: its frame and refs at once, its strings as they are asked
    for (a message's line when it is packed, the edges when a question names a relation)."""

    def __init__(self, conversation: str, header: dict[str, Any], body: memoryview) -> None:
        self._header = header
        arrays: dict[str, np.ndarray] = {}
        for name, (dtype, shape, offset) in header["arrays"].items():
            count = int(np.prod(shape))
            flat = np.frombuffer(body, dtype=np.dtype(dtype), count=count, offset=offset)
            # copied: a view kept for the generation holds its arrays, not the whole buffer
            arrays[name] = flat.reshape(shape).copy()
        self._text: str = header["text"]
        self._ends: np.ndarray = arrays["text_ends"]
        n = len(arrays["mkeys"])
        self.frame = MessageFrame(
            mkeys=arrays["mkeys"],
            conversations=_objects([conversation] * n),
            ids=_objects(self._column("ids")),
            ordinals=arrays["ordinals"],
            sessions=_objects(self._column("sessions")),
            speakers=_objects(self._column("speakers")),
            timestamps=arrays["timestamps"].view("datetime64[s]"),
        )
        self.refs = RefTable(arrays["ref_ids"], arrays["ref_mkeys"], arrays["ref_kinds"])
        self.model: str | None = header["model"]
        self.vector_mkeys = arrays["vector_mkeys"]
        self.vectors = arrays["vectors"]
        self.counter: str = header["counter"]
        self.tokens = arrays["tokens"]
        self._lines_first = int(header["columns"]["lines"][0])

    @classmethod
    def from_bytes(cls, conversation: str, data: bytes) -> ConversationDigest | None:
        """The digest ``data`` holds; None when it is of another version or release, or
        cannot be read (damaged), when the tables are read instead."""
        start = len(_MAGIC) + _VERSION.size
        if len(data) < start or not data.startswith(_MAGIC):
            return None
        if _VERSION.unpack_from(data, len(_MAGIC))[0] != DIGEST_VERSION:
            return None
        try:
            raw = zlib.decompress(data[start:])
            (size,) = _LENGTH.unpack_from(raw)
            header = json.loads(raw[_LENGTH.size : _LENGTH.size + size])
            if header.get("structrag") != __version__:
                return None
            return cls(conversation, header, memoryview(raw)[_LENGTH.size + size :])
        except (zlib.error, struct.error, ValueError, KeyError, TypeError, AttributeError):
            return None

    def _string(self, number: int) -> str:
        start = int(self._ends[number - 1]) if number else 0
        return self._text[start : int(self._ends[number])]

    def _column(self, name: str) -> list[Any]:
        first, count, nulls = self._header["columns"][name]
        stops = self._ends[first : first + count].tolist()
        starts = [int(self._ends[first - 1]) if first else 0, *stops[:-1]]
        text = self._text
        values: list[Any] = [text[a:b] for a, b in zip(starts, stops, strict=False)]
        for at in nulls:
            values[at] = None
        return values

    def line(self, position: int) -> str:
        """The rendered line of the frame's message at ``position``."""
        return self._string(self._lines_first + position)

    def lines(self) -> list[str]:
        return self._column("lines")

    def aliases(self) -> list[tuple[str, str, str]]:
        return list(zip(*(self._column(f"aliases{i}") for i in range(3)), strict=True))

    def words(self) -> list[str]:
        return self._column("words")

    def edges(self) -> list[tuple[str, str, str]]:
        return list(zip(*(self._column(f"edges{i}") for i in range(3)), strict=True))


def _objects(values: list[Any]) -> np.ndarray:
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def vocabulary_words(rows: Iterable[tuple[str, str, int]]) -> list[str]:
    """The words fuzzy matching compares a question's words with: those of the knowledge
    vocabulary (:meth:`~structrag.store.protocols.KnowledgeStore.knowledge_vocabulary`),
    lowercased, alphabetic and longer than three letters, sorted."""
    return sorted(
        {w for text, _, _ in rows for w in text.lower().split() if len(w) > 3 and w.isalpha()}
    )


def build_digest(
    store: KnowledgeStore, conversation: str, model: str | None, counter: TokenCounter
) -> DigestContent | None:
    """A conversation's digest from the store as it is (inside a write's transaction:
    with its rows); None when it has no messages (nothing to save a first question)."""
    frame = store.message_frame(Scope(conversation=conversation))
    if not len(frame):
        return None
    keys = frame.mkeys.tolist()
    lines: list[str] = []
    for at in range(0, len(keys), RENDER_BATCH):
        shown = store.line_fields(keys[at : at + RENDER_BATCH])
        lines.extend(render_line(shown[int(k)]) for k in keys[at : at + RENDER_BATCH])
    if model is not None:
        vector_mkeys, vectors = store.embedding_matrix(model, conversation)
    else:
        vector_mkeys, vectors = np.zeros(0, np.int64), np.zeros((0, 0), np.float32)
    return DigestContent(
        frame=frame,
        refs=store.ref_table(conversation),
        aliases=store.aliases(conversation),
        words=vocabulary_words(store.knowledge_vocabulary(conversation)),
        edges=store.relation_edges(conversation),
        model=model if len(vector_mkeys) else None,
        vector_mkeys=vector_mkeys,
        vectors=vectors,
        counter=counter.name,
        lines=lines,
        tokens=np.array([count_within(counter, line + "\n") for line in lines], dtype=np.int32),
    )


#: Builds the stored form of a conversation's digest, given the store and its id.
DigestBuilder = Callable[[KnowledgeStore, str], "bytes | None"]


def digest_builder(model: str | None, counter: TokenCounter) -> DigestBuilder:
    """What an ingest calls for each conversation it wrote (see the module)."""

    def build(store: KnowledgeStore, conversation: str) -> bytes | None:
        digest = build_digest(store, conversation, model, counter)
        return None if digest is None else digest.to_bytes()

    return build
