"""iMessage conversations exported as text by imessage-exporter (``imessage-exporter -f
txt``): one file per conversation, named after the contact or group, each message a block
of lines ended by a blank line::

    Mar 12, 2024  2:05:33 PM (Read by you after 1 minute)
    Anna
    Hello there

    Mar 12, 2024  2:06:10 PM
    Me
    Hi Anna!

The first line is the time (the hour space-padded, so a single-digit hour follows two
spaces) with an optional read receipt, kept in ``metadata.read``; the second is the sender
(``Me`` is the exporter's name for the phone's owner, marked ``metadata.from_me``); the
text follows, blank lines included, up to the next block. Group events are one line with
the time before them ("Mar 12, 2024  2:07:00 PM Anna named the conversation Trip") and
go to the conversation's ``metadata.events``. Replies the exporter repeats, indented,
under the message they answer are left out there (each is also a message of its own, at
its place); "This message responded to an earlier message." becomes ``metadata.reply``
and a "Tapbacks:" or "Reactions:" list becomes ``metadata.reactions``. Times are the
Mac's local time, as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from structrag.errors import InputError
from structrag.importers.base import (
    Lines,
    LoadOptions,
    ParsedSource,
    RawMessage,
    StreamedSource,
    TextReading,
    add_events,
    clean_text,
    file_lines,
    load_text,
    stream_text,
)
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
#: "Mar 12, 2024  2:05:33 PM", then a read receipt or an event's text.
_STAMP_RE = re.compile(
    rf"^(?P<date>(?:{_MONTHS}) \d{{1,2}}, \d{{4}}) {{1,2}}(?P<time>\d{{1,2}}:\d{{2}}:\d{{2}} [AP]M)"
    r"(?: \((?P<read>Read by .{1,80}? after [^()]{1,80})\))?(?: (?P<rest>\S.*))?$"
)
#: The events the exporter writes on one line after the time.
_EVENT_RE = re.compile(
    r"(?:re)?named the conversation|added .+ to the conversation"
    r"|removed .+ from the conversation|left the conversation|changed their phone number"
    r"|changed the group photo|removed the group photo",
)
#: A transcript's turn, "Alice: text" (a message's text seldom is, line after line).
_TURN_RE = re.compile(r"^[^\s:][^:\n]{0,40}: \S")
_REPLY_INDENT = "    "
_REPLY_NOTE = "This message responded to an earlier message."
_TAPBACKS = ("Tapbacks:", "Reactions:")
_OWNER = "Me"


def _stamp(line: str) -> re.Match[str] | None:
    return _STAMP_RE.match(line.lstrip("\ufeff"))


def looks_like_imessage(text: str) -> bool:
    """The first non-blank line is an imessage-exporter time line, followed by a sender
    (a line that is neither blank, nor a time, nor ``Name: text``), or one of its group
    events; and most blocks (text between blank lines) of the file's start open with a
    time line, as every message does (notes dated at the top, "Mar 12, 2024  2:05:33 PM"
    above a title and ``Name: text`` turns, are a transcript)."""
    head = text[:4096]
    blocks = [b for b in re.split(r"\n[ \t]*\n", head.replace("\r\n", "\n")) if b.strip()]
    opened = sum(1 for b in blocks if _stamp(b.strip("\n").split("\n", 1)[0]))
    if len(blocks) > 1 and 2 * opened <= len(blocks):
        return False
    said = blocks[0].strip("\n").split("\n")[2:] if blocks else []
    if len(said) > 1 and all(_TURN_RE.match(line) for line in said):
        return False  # "Name: text" turns under a dated title: a transcript
    lines = file_lines(head)
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        stamp = _stamp(line)
        if stamp is None:
            return False
        if stamp.group("rest"):
            return stamp.group("read") is None and bool(_EVENT_RE.search(stamp.group("rest")))
        sender = lines[i + 1] if i + 1 < len(lines) else ""
        return bool(sender.strip()) and _stamp(sender) is None and ": " not in sender
    return False


def load_imessage(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    return load_text(path, "imessage", text, options, plan_imessage)


def stream_imessage(path: Path, options: LoadOptions) -> StreamedSource:
    """An imessage-exporter text file checked and read line by line (see
    :func:`stream_text`)."""
    return stream_text(path, "imessage", options, plan_imessage)


def _blocks(path: Path, lines: Lines) -> Iterator[dict[str, Any]]:
    """The file's blocks: a time line (at the file's start or after a blank line) and the
    lines up to the next one."""
    block: dict[str, Any] | None = None
    blank = True
    for lineno, line in lines:
        stamp = _stamp(line) if blank else None
        blank = not line.strip()
        if stamp is None:
            if block is not None:
                block["lines"].append(line)
            elif not blank:
                raise InputError(
                    path,
                    f"not an imessage-exporter line: {line.strip()[:60]!r}",
                    line=lineno,
                    hint="imessage-exporter's text export starts each message with its time, "
                    "like 'Mar 12, 2024  2:05:33 PM', and the sender on the next line; check "
                    "the file, or pass another --format",
                )
            continue
        if block is not None:
            yield block
        block = {"line": lineno, "stamp": stamp, "lines": []}
    if block is not None:
        yield block


def _when(stamp: re.Match[str]) -> str:
    return f"{stamp.group('date')} {stamp.group('time')}"


def plan_imessage(path: Path, lines: Lines, options: LoadOptions) -> TextReading:
    """How to read an export's messages (nothing to settle first: its dates name the
    month)."""
    events: list[dict[str, Any]] = []

    def raws(numbered: Lines) -> Iterator[RawMessage]:
        events.clear()
        for block in _blocks(path, numbered):
            stamp = block["stamp"]
            if stamp.group("rest"):
                event: dict[str, Any] = {"line": block["line"], "kind": "system"}
                event["text"] = "\n".join([stamp.group("rest"), *block["lines"]]).strip()
                moment = parse_datetime(_when(stamp))
                event["time"] = moment.isoformat() if moment else _when(stamp)
                events.append(event)
                continue
            yield _message(block)

    def conversation(count: int) -> Conversation:
        if not count:
            raise InputError(
                path,
                "the conversation has no messages, only group events",
                hint="export the conversation again with imessage-exporter -f txt",
            )
        metadata: dict[str, Any] = {"source": str(path), "format": "imessage"}
        add_events(metadata, events)
        return Conversation(id=options.conversation or path.stem, name=path.stem, metadata=metadata)

    return TextReading(raws=raws, conversation=conversation)


def _message(block: dict[str, Any]) -> RawMessage:
    """A message block: its sender on the line after the time, then its text."""
    stamp = block["stamp"]
    rest: list[str] = list(block["lines"])
    while rest and not rest[-1].strip():
        rest.pop()
    sender = rest.pop(0).strip() if rest else ""
    metadata: dict[str, Any] = {"source_line": block["line"]}
    if stamp.group("read"):
        metadata["read"] = stamp.group("read")
    if sender == _OWNER:
        metadata["from_me"] = True
    text: list[str] = []
    reactions: list[str] = []
    in_reply = in_tapbacks = False
    for line in rest:
        if in_reply:
            if not line.strip() or line.startswith(_REPLY_INDENT):
                continue  # a reply, repeated under the message it answers
            in_reply = False
        if line.startswith(_REPLY_INDENT) and _stamp(line[len(_REPLY_INDENT) :]):
            in_reply = True
            continue
        if in_tapbacks:
            if line.strip() and " by " in line and not line.startswith(" "):
                reactions.append(line.strip())
                continue
            in_tapbacks = False
        if line.strip() in _TAPBACKS:
            in_tapbacks = True
            continue
        if line.strip() == _REPLY_NOTE:
            metadata["reply"] = True
            continue
        text.append(line)
    if reactions:
        metadata["reactions"] = reactions
    return RawMessage(
        text=clean_text("\n".join(text)),
        location=f"line {block['line']}",
        speaker=sender or None,
        timestamp=_when(stamp),
        metadata=metadata,
    )
