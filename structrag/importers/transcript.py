"""Plain-text transcripts: ``SPEAKER: text`` turns, and the timestamped layouts that
meeting tools export. One layout is chosen per file (the one most of its lines fit):

* **labels**: a line that starts with a speaker label opens a turn; the lines after it, up
  to the next label, belong to that turn (stage directions such as ``[MUSIC]`` included).
  A label is one to five words in capitals (``KEVIN SCOTT:``) or in Title Case (``Kevin
  Scott:``, ``Jürgen Müller:``, ``Speaker 2:``), in any script with capitals, optionally with a
  ``[00:12:03]`` or ``(00:12:03)`` time next to it.
* **timed** (Zoom and others): every turn starts with a time, ``00:00:01 Name: text``,
  ``[00:00:01] Name: text``, or Zoom's chat ``14:02:05 From Ana Souza to Everyone: text``
  (a message sent "to" one person is addressed to them, with ``metadata.private``). Any
  name is accepted after a time, lower case included.
* **headed** (Otter.ai, Zoom closed captions): a heading line with the name and a time,
  ``Ana Souza  0:03`` or ``[Ana Souza] 14:02:05``, then the turn's text on the lines below.

Lines before the first turn (titles, episode headers) are kept as the conversation's
``header`` metadata. All-caps names are stored in Title Case. The time written with a turn
is kept as ``metadata.offset`` (as written: these exports give no date). Each turn's line
in the file it was first ingested from is kept in ``metadata.source_line`` (left out of the
content hash: lines moving is not an edit).

An email (a header block with ``From:`` and ``Subject:``) or a WhatsApp export is refused,
with the right ``--format`` to use: their header lines must never become speakers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from pathlib import Path

from structrag.errors import InputError
from structrag.importers.base import (
    Lines,
    LoadOptions,
    ParsedSource,
    RawMessage,
    StreamedSource,
    TextReading,
    clean_text,
    load_text,
    stream_text,
)
from structrag.importers.mail import looks_like_email
from structrag.importers.whatsapp import looks_like_whatsapp
from structrag.models import Conversation

_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_LABEL_RE = re.compile(
    rf"^\s*(?:\[(?P<t1>{_TIME})\]\s*)?"
    # words of letters in any script ("Jürgen", "Øyvind", "Élodie", "李雷"), or a handle
    # ("@carla", "bob_92"); case is checked by _speaker, which the pattern cannot do for
    # every script. A note in brackets may follow: "ANA SOUZA (CEO):", "MARIA [via phone]:"
    r"(?P<name>@?[^\W\d_][\w.'’\-]*(?:[ \t]+[^\W_][\w.'’\-]*){0,6})"
    rf"[ \t]*(?:[\[(](?P<t2>{_TIME})[\])]|[\[(](?P<note>[^\[\]()\n:]{{1,40}})[\])])?"
    # a colon and a space (or the line's end); a full-width colon needs no space
    r"[ \t]*(?::(?=[ \t]|$)|：)[ \t]*(?P<text>.*)$"
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
        # Email and HTTP-style headers, which must never become speakers.
        "from",
        "to",
        "cc",
        "bcc",
        "sent",
        "reply-to",
        "in-reply-to",
        "references",
        "message-id",
        "mime-version",
        "content-type",
        "content-transfer-encoding",
        "received",
        "return-path",
        "delivered-to",
        "kind",
        "language",
        "attendees",
        "participants",
        "agenda",
        "location",
    }
)
_T = r"\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?"
_TIMED_RE = re.compile(
    rf"^\s*(?:\[(?P<t1>{_T})\]|(?P<t2>{_T}))[ \t]+(?:From[ \t]+)?"
    r"(?P<name>[^:\[\]\n]*?[^\W\d_][^:\[\]\n]*?)"
    r"(?:[ \t]+to[ \t]+(?P<to>[^:\n]{1,80}?))?[ \t]*:(?:[ \t]+(?P<text>.*)|[ \t]*$)"
)
_HEADED_RE = re.compile(
    rf"^\s*(?:\[(?P<n1>[^\]\n]{{1,80}})\]|(?P<n2>[^\s:\[][^:\n]{{0,80}}?))"
    rf"[ \t]+(?P<t>{_T})\s*$"
)
# The line Otter.ai adds at the end of its exports.
_FOOTER_RE = re.compile(r"^\s*Transcribed by https?://otter\.ai\s*$", re.IGNORECASE)
_EVERYONE = ("everyone", "everyone (in waiting room)", "all panelists", "hosts and panelists")
_PRIVATE_RE = re.compile(r"\s*\((?:direct message|privately|private)\)\s*$", re.IGNORECASE)


#: Lower-case words between the parts of a name ("Vincent van Gogh", "María de la
#: Cruz", "Jose Maria da Silva Santos Junior").
_PARTICLES = frozenset(
    {
        "van",
        "von",
        "der",
        "den",
        "de",
        "del",
        "della",
        "dei",
        "di",
        "da",
        "das",
        "do",
        "dos",
        "du",
        "la",
        "le",
        "y",
        "e",
        "bin",
        "ibn",
        "al",
        "el",
        "ten",
        "ter",
        "zu",
        "af",
    }
)
#: Words that open a line with a colon in notes and chats without being anyone's name;
#: a one-word label in lower case is a speaker only when it recurs and is none of these.
_NOT_HANDLES = frozenset(
    {"btw", "fyi", "todo", "tldr", "eta", "nb", "ok", "re", "aka", "ie", "eg", "http", "https"}
)
#: How many distinct labels a transcript's first reading counts (to find the ones that
#: recur); memory stays flat for a file of any size.
_MAX_COUNTED = 10_000


def _speaker(match: re.Match[str], recurring: frozenset[str] = frozenset()) -> str | None:
    """The speaker a label names, or None when it is not a name: one to five words in
    capitals or in Title Case (up to seven with text after the colon, lower-case particles
    such as "van" or "de la" between them), a name in a script without capitals
    ("李雷", "أحمد", one to three words), a handle ("@carla", "bob_92"), or any one-word
    label in ``recurring`` (labels that open several lines of the file: "bob:")."""
    name = match.group("name").strip()
    words = name.split()
    if name.lower() in _NOT_SPEAKERS or not any(c.isalpha() for c in name):
        return None
    letters = [c for c in name if c.isalpha()]
    if len(words) == 1 and (name.startswith("@") or any(c.isdigit() or c == "_" for c in name)):
        return name  # a handle: "@carla", "bob_92"
    if not any(c.isupper() or c.islower() for c in letters):
        return name if len(words) <= 3 else None  # no capitals in its script: "李雷"
    if len(words) == 1 and name in recurring and name.lower() not in _NOT_HANDLES:
        return name  # "bob:" at the start of several lines
    if not words[0][0].isupper():
        return None
    said = bool((match.group("text") or "").strip())
    if len(words) > 5 and not said:
        return None  # a long Title Case heading ending in a colon
    if all(c.isupper() for c in letters):
        return " ".join(w.capitalize() if w.isalpha() else w for w in words)
    # Title Case; a number after the first word names a speaker too ("Speaker 2",
    # "Agent 1", "Sprecher 1"), unless the word counts parts of a text ("Step 1")
    numbered = words[0].lower() not in _ENUMERATORS
    particles = sum(1 for w in words[1:-1] if w in _PARTICLES)
    if not all(
        w[0].isupper() or (numbered and w.isdigit()) or (0 < i < len(words) - 1 and w in _PARTICLES)
        for i, w in enumerate(words)
    ):
        return None
    if len(words) <= 4 or particles or said:
        return name
    return None


#: Words that number parts of a text, not people ("Step 1:", "Question 2:").
_ENUMERATORS = frozenset(
    {
        "step",
        "part",
        "item",
        "chapter",
        "section",
        "question",
        "answer",
        "point",
        "phase",
        "day",
        "week",
        "option",
        "slide",
        "page",
        "figure",
        "table",
        "task",
        "round",
        "stage",
        "level",
        "note",
        "rule",
        "tip",
        "example",
        "exercise",
        "problem",
        "issue",
        "version",
        "room",
        "line",
    }
)


def _timed_name(match: re.Match[str]) -> str | None:
    name = " ".join(match.group("name").split())
    if not name or name.lower() in _NOT_SPEAKERS or len(name.split()) > 8:
        return None
    if name.isupper():
        return " ".join(w.capitalize() if w.isalpha() else w for w in name.split())
    return name


def looks_timed(line: str) -> bool:
    """A ``[00:00:01] Name: text`` line (a transcript, though it starts with a bracket)."""
    match = _TIMED_RE.match(line.lstrip("\ufeff"))
    return bool(match and match.group("t1") and _timed_name(match))


def _headed_name(match: re.Match[str]) -> str | None:
    name = " ".join((match.group("n1") or match.group("n2") or "").split())
    if not any(c.isalpha() for c in name) or name.lower() in _NOT_SPEAKERS:
        return None
    return name if len(name.split()) <= 8 else None


def _layout(lines: Iterable[str]) -> tuple[str, frozenset[str]]:
    """The layout most of the file's lines fit (ties go to plain labels), and the
    one-word labels that open more than one line (see :func:`_speaker`)."""
    counts = {"labels": 0, "timed": 0, "headed": 0}
    words: dict[str, int] = {}  # one-word labels not taken for names on their own
    for line in lines:
        timed = _TIMED_RE.match(line)
        if timed and _timed_name(timed):
            counts["timed"] += 1
        headed = _HEADED_RE.match(line)
        if headed and _headed_name(headed):
            counts["headed"] += 1
        label = _LABEL_RE.match(line)
        if label and _speaker(label):
            counts["labels"] += 1
        elif label:
            name = label.group("name").strip()
            one_word = " " not in name and "\t" not in name
            if one_word and (name in words or len(words) < _MAX_COUNTED):
                words[name] = words.get(name, 0) + 1
    recurring = frozenset(name for name, seen in words.items() if seen > 1)
    counts["labels"] += sum(words[name] for name in recurring if name.lower() not in _NOT_HANDLES)
    best = max(counts.values())
    if best and counts["labels"] < best:
        return ("timed" if counts["timed"] == best else "headed"), recurring
    return "labels", recurring


def _refuse_other_formats(path: Path, text: str) -> None:
    if looks_like_email(text[:16384]):
        raise InputError(
            path,
            "this is an email (it starts with From:/Subject: headers), not a transcript",
            line=1,
            hint="pass --format email (or leave --format out: .eml and mbox are detected)",
        )
    if looks_like_whatsapp(text):
        raise InputError(
            path,
            "this is a WhatsApp chat export, not a transcript",
            line=1,
            hint="pass --format whatsapp (or leave --format out: it is detected)",
        )
    lines = [line for line in text.split("\n")[:50] if line.strip()][:6]
    dated = sum(1 for line in lines[1:] if looks_like_whatsapp(line))
    if len(lines) > 2 and dated >= len(lines[1:]) - 1 and dated >= 2:
        raise InputError(
            path,
            "this looks like a WhatsApp chat export whose first line is not a WhatsApp "
            f"line ({lines[0].strip()[:60]!r}), or one in a layout structrag does not read",
            line=1,
            hint="delete the lines above the first dated message and ingest it again "
            "(or pass --format whatsapp to see which line is not read)",
        )


def load_transcript(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    return load_text(path, "transcript", text, options, plan_transcript)


def stream_transcript(path: Path, options: LoadOptions) -> StreamedSource:
    """A transcript checked and read line by line (see :func:`stream_text`)."""
    return stream_text(path, "transcript", options, plan_transcript)


def plan_transcript(path: Path, lines: Lines, options: LoadOptions) -> TextReading:
    """Read a transcript's lines once to choose its layout; how to read its turns."""
    head: list[str] = []
    size = 0

    def noted() -> Iterator[str]:
        nonlocal size
        for _, line in lines:
            if size < 16384:
                head.append(line)
                size += len(line) + 1
            yield line

    layout, recurring = _layout(noted())
    _refuse_other_formats(path, "\n".join(head))
    header: list[str] = []

    def raws(numbered: Lines) -> Iterator[RawMessage]:
        header.clear()
        current: RawMessage | None = None
        body: list[str] = []
        for lineno, line in numbered:
            if _FOOTER_RE.match(line):
                continue
            if layout == "timed":
                line = line.removeprefix("\t")  # Zoom indents a chat message's lines
            turn = _turn(layout, line, lineno, recurring)
            if turn is not None:
                if current is not None:
                    current.text = clean_text("\n".join(body))
                    yield current
                current, first = turn
                body = [first]
            elif current is None:
                if line.strip():
                    header.append(line.strip())
            else:
                body.append(line)
        if current is not None:
            current.text = clean_text("\n".join(body))
            yield current

    def conversation(count: int) -> Conversation:
        if not count:
            raise InputError(
                path,
                "no 'SPEAKER: text' turns found",
                hint="a transcript turn starts with the speaker's name and a colon, e.g. "
                "'KEVIN SCOTT: Hello', or with a time ('00:00:01 Kevin Scott: Hello', "
                "'Kevin Scott  0:01' above the text); for other layouts pass --format json "
                "or jsonl",
            )
        metadata: dict[str, object] = {"source": str(path), "format": "transcript"}
        if layout != "labels":
            metadata["layout"] = layout
        if header:
            metadata["header"] = "\n".join(header)
        return Conversation(
            id=options.conversation or path.stem,
            name=header[0] if header else None,
            metadata=metadata,
        )

    return TextReading(raws=raws, conversation=conversation)


def _turn(
    layout: str, line: str, lineno: int, recurring: frozenset[str] = frozenset()
) -> tuple[RawMessage, str] | None:
    """The turn a line opens in ``layout`` (and its first line of text), or ``None``."""
    speaker: str | None = None
    offset: str | None = None
    first = ""
    recipients: tuple[str, ...] = ()
    extra: dict[str, object] = {}
    if layout == "timed":
        timed = _TIMED_RE.match(line)
        speaker = _timed_name(timed) if timed else None
        if timed and speaker:
            offset, first = timed.group("t1") or timed.group("t2"), timed.group("text") or ""
            to = (timed.group("to") or "").strip()
            if to and to.lower() not in _EVERYONE:
                recipients = (_PRIVATE_RE.sub("", to),)
                extra["private"] = True
    elif layout == "headed":
        headed = _HEADED_RE.match(line)
        speaker = _headed_name(headed) if headed else None
        if headed and speaker:
            offset = headed.group("t")
    else:
        label = _LABEL_RE.match(line)
        speaker = _speaker(label, recurring) if label else None
        if label and speaker:
            offset, first = label.group("t1") or label.group("t2"), label.group("text") or ""
            if label.group("note"):
                extra["speaker_note"] = label.group("note").strip()
    if speaker is None:
        return None
    metadata: dict[str, object] = {"source_line": lineno, **extra}
    if offset:
        metadata["offset"] = offset
    raw = RawMessage(
        text="",
        location=f"line {lineno}",
        speaker=speaker,
        recipients=recipients,
        metadata=metadata,
    )
    return raw, first
