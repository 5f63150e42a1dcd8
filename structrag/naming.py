"""Names every layer agrees on, in a module that imports nothing (the command line reads
it before it loads anything heavy)."""

from __future__ import annotations

#: A knowledge document's fragments are the messages of the conversation named by this
#: prefix and the document's id (:func:`document_conversation`); no other room may start so.
DOCUMENT_ROOM = "doc:"


def document_conversation(document_id: str) -> str:
    """The conversation of a document's fragments."""
    return DOCUMENT_ROOM + document_id
