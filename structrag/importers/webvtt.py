"""WebVTT captions (meeting recordings, podcasts; Zoom's transcript download is WebVTT),
and SubRip (``.srt``: numbered cues, ``00:00:01,000 --> 00:00:03,000``) read the same way.

Cues carry the speaker in a voice tag (``<v Kevin Scott>``) or as a ``Name:`` prefix,
also after a subtitle's dash (``- Ana: ...``) or a news caption's chevrons
(``>> BOB: ...``); a line of a cue that starts so opens a message of its own.
Consecutive cues from the same speaker are merged into one message until a pause of 60
seconds (a cue where several voices speak is one message per voice; cues of no speaker,
captions, are joined up to 400 characters or a pause of 5 seconds); markup (and SubRip's
``{\an8}`` position tags) is removed and character references decoded
(``&amp;`` is ``&``); ``metadata.start`` and
``metadata.end`` keep the cue times in seconds and ``metadata.cues`` the cue ids. NOTE,
STYLE and REGION blocks are skipped, and so are the header lines after ``WEBVTT``
(``Kind: captions``, ``Language: en``), which go into the conversation's
``metadata.header``. Message timestamps are set only when the file's
header gives a date (``WEBVTT - 2023-05-01T10:00:00``); cue times are offsets from it.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from datetime import timedelta
from itertools import chain
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
    clean_text,
    load_text,
    stream_text,
)
from structrag.importers.transcript import _LABEL_RE, _speaker
from structrag.models import Conversation
from structrag.timeparse import parse_datetime

_TS = r"(?:(\d+):)?(\d{1,2}):(\d{2})[.,](\d{1,3})"
_TIMING_RE = re.compile(rf"^\s*{_TS}\s*-->\s*{_TS}(?:\s+.*)?$")
_VOICE_RE = re.compile(r"<v(?:\.[\w.-]+)?\s+([^>]+)>")
_TAG_RE = re.compile(r"</?[^>]+>|\{\\[^{}\n]*\}")
#: What opens a speaker's line in subtitles ("- Ana: Hi") and news captions (">> BOB:").
_TURN_MARK_RE = re.compile(r"^(?:-|>>+)[ \t]*")


def looks_like_captions(text: str) -> bool:
    """WebVTT (a ``WEBVTT`` first line) or SubRip (a cue number, then a timing line; or
    a timing line first) by the first lines of ``text``."""
    head = [line.strip() for line in text.lstrip("\ufeff \t\r\n")[:4096].splitlines()[:3]]
    if not head:
        return False
    if head[0].startswith("WEBVTT"):
        return True
    if _TIMING_RE.match(head[0]):
        return True
    return head[0].isdigit() and len(head) > 1 and bool(_TIMING_RE.match(head[1]))


def _seconds(groups: tuple[str | None, ...]) -> float:
    hours, minutes, secs, millis = groups
    return (
        int(hours or 0) * 3600
        + int(minutes or 0) * 60
        + int(secs or 0)
        + int((millis or "0").ljust(3, "0")) / 1000
    )


def load_webvtt(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    return load_text(path, "webvtt", text, options, plan_webvtt)


def stream_webvtt(path: Path, options: LoadOptions) -> StreamedSource:
    """A WebVTT file checked and read line by line (see :func:`stream_text`)."""
    return stream_text(path, "webvtt", options, plan_webvtt)


def plan_webvtt(path: Path, lines: Lines, options: LoadOptions) -> TextReading:
    """Read the ``WEBVTT`` line and the header after it; the cues are read from the line
    that ends the header (see :class:`TextReading`)."""
    numbered = iter(lines)
    first = next(((n, line) for n, line in numbered if line.strip()), None)
    second = next(numbered, (0, "")) if first is not None else (0, "")
    srt = first is not None and (
        bool(_TIMING_RE.match(first[1].lstrip("\ufeff")))
        or (first[1].strip().lstrip("\ufeff").isdigit() and bool(_TIMING_RE.match(second[1])))
    )
    if first is None or not (first[1].lstrip("\ufeff").startswith("WEBVTT") or srt):
        raise InputError(
            path,
            "not a WebVTT or SubRip file: the first line must start with 'WEBVTT', or be a "
            "cue number above a timing line ('00:00:01,000 --> 00:00:03,000')",
            line=first[0] if first else 1,
            hint="plain 'SPEAKER: text' transcripts are read with --format transcript",
        )
    header: dict[str, str] = {}
    base = None if srt else parse_datetime(first[1].lstrip("\ufeff")[6:].strip(" -\t"))
    cues_from = first[0] if srt else first[0] + 1
    # The header runs from the WEBVTT line to the first blank line: "Kind: captions",
    # "Language: en" and the like (YouTube and Zoom write them). A cue timing ends it too.
    for lineno, line in [] if srt else chain([second] if second[0] else [], numbered):
        cues_from = lineno
        if not line.strip() or "-->" in line:
            break
        key, sep, value = line.partition(":")
        if sep and key.strip():
            header[key.strip()] = value.strip()
        cues_from = lineno + 1
    warnings: list[str] = []

    def raws(lines: Lines) -> Iterator[RawMessage]:
        warnings.clear()
        pending: RawMessage | None = None
        block: list[str] = []
        block_line = 0
        for lineno, line in chain(lines, [(0, "")]):  # a blank line ends the last block
            if lineno and lineno < cues_from:
                continue
            if line.strip():
                if not block:
                    block_line = lineno
                block.append(line)
                continue
            if block:
                for new in _cue(path, block, block_line, pending, base, warnings):
                    if pending is not None:
                        yield pending
                    pending = new
            block = []
        if pending is not None:
            yield pending

    def conversation(count: int) -> Conversation:
        if not count:
            raise InputError(path, "no cues with text found")
        metadata: dict[str, Any] = {"source": str(path), "format": "srt" if srt else "webvtt"}
        if header:
            metadata["header"] = header
        return Conversation(id=options.conversation or path.stem, metadata=metadata)

    return TextReading(raws=raws, conversation=conversation, warnings=warnings)


def _cue(
    path: Path,
    block: list[str],
    lineno: int,
    previous: RawMessage | None,
    base: Any,
    warnings: list[str],
) -> list[RawMessage]:
    """The messages a cue block starts, in order: none when it adds to ``previous`` (the
    same speaker) or is not a cue (NOTE, STYLE, REGION, no text); one per voice when
    several speak in it (``<v Bo>Thanks.</v>`` then ``<v Carla>Me too.</v>``)."""
    head = block[0].strip()
    if head.startswith(("NOTE", "STYLE", "REGION")):
        return []
    timing_at = 0 if "-->" in block[0] else 1
    if timing_at >= len(block) or "-->" not in block[timing_at]:
        raise InputError(
            path,
            f"cue has no timing line ('00:00:01.000 --> 00:00:04.000'): {head[:60]!r}",
            line=lineno,
            hint="fix or delete this block",
        )
    match = _TIMING_RE.match(block[timing_at])
    if not match:
        raise InputError(
            path,
            f"malformed cue timing {block[timing_at].strip()!r}",
            line=lineno + timing_at,
            hint="cue timings look like '00:01:02.500 --> 00:01:05.000'",
        )
    cue_id = block[0].strip() if timing_at == 1 else None
    begin, end = _seconds(match.groups()[:4]), _seconds(match.groups()[4:])
    payload = block[timing_at + 1 :]
    if not payload:
        warnings.append(f"{path}: line {lineno}: cue with no text skipped")
        return []
    started: list[RawMessage] = []
    for speaker, body in _voices("\n".join(payload)):
        if not body:
            continue
        last = started[-1] if started else previous
        if last is not None and _continues(last, speaker, begin):
            last.text = f"{last.text} {body}".strip()
            last.metadata["end"] = end
            if cue_id and cue_id not in last.metadata.setdefault("cues", []):
                last.metadata["cues"].append(cue_id)
            continue
        if (
            speaker is None
            and last is not None
            and last.speaker is not None
            and _gap(last, begin) < _PAUSE
        ):
            speaker = last.speaker  # a long turn goes on in a message of its own
        metadata: dict[str, Any] = {"start": begin, "end": end, "source_line": lineno}
        if cue_id:
            metadata["cues"] = [cue_id]
        started.append(
            RawMessage(
                text=body,
                location=f"line {lineno}",
                speaker=speaker,
                timestamp=base + timedelta(seconds=begin) if base else None,
                metadata=metadata,
            )
        )
    return started


#: Cues without a speaker (captions) are joined into one message up to this length, or
#: until a pause of ``_PAUSE`` seconds: a caption file is not one message.
_CAPTION_CHARS = 400
_PAUSE = 5.0
#: Cues of one speaker are one message until a pause this long (seconds): a speaker who
#: comes back 45 minutes later starts a new message.
_SPEAKER_PAUSE = 60.0
#: Untagged cues after a speaker's are theirs while they follow without a pause, joined
#: up to this length (then the turn goes on in a message of its own).
_TURN_CHARS = 2000


def _gap(last: RawMessage, begin: float) -> float:
    return begin - float(last.metadata.get("end", begin))


def _continues(last: RawMessage, speaker: str | None, begin: float) -> bool:
    """Whether a cue's text from ``speaker`` (None: no voice or label) adds to ``last``:
    the same speaker's, or an untagged cue after a pause shorter than ``_PAUSE`` while
    ``last`` is shorter than a caption's (no speaker) or a turn's (a speaker's) limit."""
    if speaker is not None:
        return speaker == last.speaker and _gap(last, begin) < _SPEAKER_PAUSE
    limit = _CAPTION_CHARS if last.speaker is None else _TURN_CHARS
    return len(last.text) < limit and _gap(last, begin) < _PAUSE


def _voices(joined: str) -> list[tuple[str | None, str]]:
    """A cue's text split at its voice tags: ``(speaker, text)`` in order, the text
    before the first tag (or a cue without one) of no voice, or of a ``Name:`` label;
    markup removed and character references (``&amp;``) decoded."""
    parts: list[tuple[str | None, str]] = []
    at, speaker = 0, None
    for voice in _VOICE_RE.finditer(joined):
        parts.append((speaker, joined[at : voice.start()]))
        at, speaker = voice.end(), voice.group(1).strip()
    parts.append((speaker, joined[at:]))
    out: list[tuple[str | None, str]] = []
    for who, raw in parts:
        body = clean_text(html.unescape(_TAG_RE.sub("", raw)))
        if who is not None:
            out.append((who, body))
            continue
        # "Name:" at the start of a line (after a subtitle's "- " or a news caption's
        # ">>") opens a speaker's part; other lines go on with the part before them
        lines: list[str] = []
        for line in body.split("\n"):
            bare = _TURN_MARK_RE.sub("", line, count=1)
            label = _LABEL_RE.match(bare)
            name = _speaker(label) if label else None
            if label and name:
                if lines or who is not None:
                    out.append((who, "\n".join(lines).strip()))
                who, lines = name, [(label.group("text") or "").strip()]
            else:
                lines.append(line)
        out.append((who, "\n".join(lines).strip()))
    return out
