"""Small chats written for search tests: each message of interest apart from the next."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

#: Small talk put between the messages of a chat (by three speakers, three turns), so that
#: the text window of one (its neighbours' words count too) does not reach the next.
FILLER = [
    "The weather was lovely on the weekend.",
    "I finally fixed the leaking kitchen tap.",
    "The train was late again this morning.",
]
FILLER_SPEAKERS = ("Sam", "Lu", "Di")


def spaced_chat(path: Path, chat: Sequence[tuple[str, str, str]]) -> Path:
    """Write ``chat`` ((id, speaker, text) each) as JSON lines with ``FILLER`` after every
    message (ids ``<id>f0`` .. ``<id>f2``); returns ``path``."""
    rows = []
    for message_id, speaker, text in chat:
        rows.append({"id": message_id, "speaker": speaker, "text": text})
        for j, filler in enumerate(FILLER):
            rows.append({"id": f"{message_id}f{j}", "speaker": FILLER_SPEAKERS[j], "text": filler})
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return path


#: Plain English text and its index terms, as they were before CJK pairs and identifier
#: parts (what those changes must leave as it is).
PLAIN_TERMS = [
    (
        "What did Caroline research about the agencies?",
        ["what", "did", "carolin", "research", "about", "agenc"],
    ),
    (
        "I booked the flights to Tokyo for April, x-ray & C++ 2024!",
        ["book", "flight", "tokyo", "april", "ray", "2024"],
    ),
]
