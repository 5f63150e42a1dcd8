"""Plain-text transcripts: ``SPEAKER: text`` turns that may run over several lines.

A line that starts with a speaker label opens a turn; the lines after it, up to the next
label, belong to that turn (stage directions such as ``[MUSIC]`` included). A label is
one to five words in capitals (``KEVIN SCOTT:``) or in Title Case (``Kevin Scott:``),
optionally with a ``[00:12:03]`` or ``(00:12:03)`` time next to it. Lines before the first
turn (titles, episode headers) are kept as the conversation's ``header`` metadata. All-caps
names are stored in Title Case. Each turn's line in the file it was first ingested from is kept
in ``metadata.source_line`` (left out of the content hash: lines moving is not an edit).
"""

from __future__ import annotations

import re
from pathlib import Path

from structrag.errors import InputError
from structrag.importers.base import (
    LoadOptions,
    ParsedSource,
    RawMessage,
    clean_text,
    file_lines,
    finish,
)
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_LABEL_RE = re.compile(
    rf"^\s*(?:\[(?P<t1>{_TIME})\]\s*)?"
    r"(?P<name>[A-Z][A-Za-z0-9.'’\-]*(?:[ \t]+[A-Z0-9][A-Za-z0-9.'’\-]*){0,4})"
    rf"[ \t]*(?:[\[(](?P<t2>{_TIME})[\])])?[ \t]*:(?:[ \t]+(?P<text>.*)|[ \t]*$)"
)
# Title-case labels that are really the start of a sentence or a header field.
_NOT_SPEAKERS = frozenset(
    {
        "note",
        "notes",
        "update",
        "warning",
        "important",
        "subject",
        "date",
        "time",
        "re",
        "fwd",
        "ps",
        "p.s.",
        "tip",
        "example",
        "summary",
        "question",
        "answer",
        "step",
        "edit",
        "source",
        "transcript",
        "episode",
        "title",
        "q",
        "a",
    }
)


def _speaker(match: re.Match[str]) -> str | None:
    name = match.group("name").strip()
    words = name.split()
    if name.lower() in _NOT_SPEAKERS or not any(c.isalpha() for c in name):
        return None
    letters = [c for c in name if c.isalpha()]
    if all(c.isupper() for c in letters):
        return " ".join(w.capitalize() if w.isalpha() else w for w in words)
    if all(w[0].isupper() for w in words) and len(words) <= 4:
        return name
    return None


def load_transcript(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    header: list[str] = []
    raws: list[RawMessage] = []
    current: RawMessage | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            current.text = clean_text("\n".join(body))
            raws.append(current)

    for lineno, line in enumerate(file_lines(text), start=1):
        match = _LABEL_RE.match(line)
        speaker = _speaker(match) if match else None
        if match and speaker:
            close()
            offset = match.group("t1") or match.group("t2")
            current = RawMessage(
                text="",
                location=f"line {lineno}",
                speaker=speaker,
                metadata={"source_line": lineno, **({"offset": offset} if offset else {})},
            )
            body = [match.group("text") or ""]
        elif current is None:
            if line.strip():
                header.append(line.strip())
        else:
            body.append(line)
    close()
    if not raws:
        raise InputError(
            path,
            "no 'SPEAKER: text' turns found",
            hint="a transcript turn starts with the speaker's name and a colon, e.g. "
            "'KEVIN SCOTT: Hello'; for other layouts pass --format json or jsonl",
        )
    conv_id = options.conversation or path.stem
    metadata: dict[str, object] = {"source": str(path), "format": "transcript"}
    if header:
        metadata["header"] = "\n".join(header)
    conversation = Conversation(id=conv_id, name=header[0] if header else None, metadata=metadata)
    return finish(path, "transcript", conversation, raws, parse_time=parse_datetime)
