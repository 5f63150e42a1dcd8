"""A message's document in the Whoosh text index, and a fast way to add it.

:func:`document` is the document as Whoosh's own ``add_document`` takes it (the fields of
:mod:`structrag.store.whoosh_index`'s schema); :func:`add_document` adds the same document
to a segment writer without going through Whoosh's analysers. Both the index's own
writers and the segment process (:mod:`structrag.store.segment_process`) use it; this
module imports nothing of structrag's, so that process starts light.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any, NamedTuple

from whoosh.compat import dumps as whoosh_dumps
from whoosh.system import pack_uint

if TYPE_CHECKING:
    from structrag.store.protocols import IndexedMessage

#: Separators of the ``knowledge`` field's value (see the schema's tokenizer).
GROUP = "\x1e"
UNIT = "\x1f"


def document(message: IndexedMessage | DocumentFields) -> dict[str, Any]:
    """The message's document as Whoosh's ``add_document`` takes it (the schema's
    tokenizer splits ``text`` and ``knowledge`` again): what :func:`add_document` is
    checked against."""
    return {
        "key": str(message.mkey),
        "conv": message.conversation,
        "speaker": (message.speaker or "").lower(),
        "text": " ".join(message.terms),
        "knowledge": GROUP.join(
            f"{i}{UNIT}{' '.join(terms)}" for i, terms in enumerate(message.knowledge) if terms
        ),
        "mkey": message.mkey,
        "first_ref": message.first_ref,
        "length": len(message.terms),
        "content": message.content,
    }


#: The fields whose terms a document posts, and their formats' names (the text index
#: checks its schema against them when it is imported).
POSTED = {"key": "Existence", "conv": "Existence", "speaker": "Existence"}
POSTED |= {"text": "Frequency", "knowledge": "Positions"}
#: The numeric columns of a document.
COLUMNS = ("mkey", "first_ref", "length", "content")
#: What :meth:`whoosh.writing.PostingPool.add` counts for a posting, besides its term and
#: value bytes and its field name: the pool writes a sorted run once its count passes its
#: limit.
_POSTING_OVERHEAD = 28 + 4 * 5 + 21 + 26 + 18 + 16 + 21


class DocumentFields(NamedTuple):
    """An :class:`~structrag.store.protocols.IndexedMessage`'s fields, as the segment
    process (:mod:`structrag.store.segment_process`) receives them."""

    mkey: int
    conversation: str
    speaker: str | None
    first_ref: int
    terms: list[str]
    knowledge: list[list[str]]
    content: int


def add_document(writer: Any, message: IndexedMessage | DocumentFields) -> None:
    """Add ``message``'s document to a Whoosh segment writer: what
    ``writer.add_document(**document(message))`` does, postings, columns and all (a
    test reads both segments back and compares every term's postings and statistics,
    the columns, lengths and stored fields), in less than half its time.

    Whoosh's own path runs each field's value through its analyzer and format, a token
    object and a generator at a time, then hands the pool one posting per call; the
    terms here arrive analysed, so the postings are built straight from them (UTF-8
    terms; ``Existence`` postings weigh 1.0, ``Frequency`` ones their count with the
    count packed, ``Positions`` ones their count with the position deltas encoded as
    :class:`~whoosh.formats.Positions` encodes them)."""
    writer._check_state()
    docnum = writer.docnum
    postings: list[tuple[str, bytes, int, float, bytes]] = [
        ("key", str(message.mkey).encode(), docnum, 1.0, b""),
        ("conv", message.conversation.encode(), docnum, 1.0, b""),
        ("speaker", (message.speaker or "").lower().encode(), docnum, 1.0, b""),
    ]
    counts: dict[str, int] = {}
    for term in " ".join(message.terms).split():
        counts[term] = counts.get(term, 0) + 1
    postings.extend(
        ("text", term.encode(), docnum, float(n), pack_uint(n)) for term, n in counts.items()
    )
    positions: dict[str, list[int]] = {}
    for position, terms in enumerate(message.knowledge):
        for term in " ".join(terms).split():
            positions.setdefault(term, []).append(position)
    for term, at in positions.items():
        deltas = [at[0], *(b - a for a, b in itertools.pairwise(at))]
        value = pack_uint(len(deltas)) + whoosh_dumps(deltas, 2)
        postings.append(("knowledge", term.encode(), docnum, float(len(at)), value))
    pool = writer.pool
    pool.fieldnames.update(POSTED)
    pool.currentsize += sum(
        _POSTING_OVERHEAD + len(p[0]) + 2 * len(p[1]) + len(p[4]) for p in postings
    )
    pool.current.extend(postings)
    if pool.currentsize > pool.limit:
        pool.save()
    per_doc = writer.perdocwriter
    per_doc.start_doc(docnum)
    schema = writer.schema
    values = (message.mkey, message.first_ref, len(message.terms), message.content)
    for name, value in zip(COLUMNS, values, strict=True):
        per_doc.add_column_value(name, schema[name].column_type, value)
    per_doc.finish_doc()
    writer._added = True
    writer.docnum += 1
