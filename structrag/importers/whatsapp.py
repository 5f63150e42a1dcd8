"""WhatsApp chat exports ("Export chat" -> without media or with media), as text.

Two layouts, both with the date and time as the phone's locale writes them:

* Android: ``12/03/2023, 14:02 - Ana Souza: text`` (also ``3/12/23, 2:02 PM - ...``,
  ``12.03.23, 14:02 - ...``, ``2023-03-12 14:02 - ...``);
* iOS: ``[12/03/2023, 14:02:05] Ana Souza: text``, with U+200E marks before attachments
  and system lines, and a narrow no-break space before ``PM``;
* Korean phones, year first and 오전/오후 (AM/PM) before the time: Android
  ``2024. 3. 12. 오후 2:05 - Ana: text``, iOS ``[2024. 3. 12. 오후 2:05:33] Ana: text``.

A line without that prefix continues the message above (multi-line messages). Lines that
are not someone saying something become the conversation's ``metadata.events`` (time,
line, kind and text), never speakers or message text: system lines (the end-to-end
encryption notice, "Ana added Bo", "changed the subject", group name lines on iOS),
``<Media omitted>`` / ``image omitted`` / ``<attached: ...>`` without a caption, deleted
messages and missed calls. A shared file with a caption stays a message, the file name
in ``metadata.attachment``; so does media left out with a caption below it (``<Media
omitted>``, ``image omitted``, or on iOS any marked placeholder with lines below it,
whatever its language), WhatsApp's placeholder in ``metadata.media``;
``<This message was edited>`` becomes ``metadata.edited``. Android's placeholders for left
out media and deleted messages are known in English, German, French, Spanish, Portuguese,
Italian and Dutch.

Day or month first is decided once per file from its dates: a first number above 12
settles day-first, a second one above 12 month-first, dots are day-first. When no date
settles it the file is read day-first (the default) with a warning; the choice and its
reason are in the conversation's ``metadata.date_order``. Times are the phone's local
time, as written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import partial
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
from structrag.timeparse import DateOrderVotes, parse_datetime

_SP = r"[ \u00a0\u202f]"
_DATE = r"\d{1,4}[./-]\d{1,2}[./-]\d{2,4}\.?"
_TIME = rf"\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:{_SP}?[AaPp]\.?{_SP}?[Mm]\.?)?"
#: A word some locales put between the date and the time ("12/03/2023 à 14:02").
_AT = rf"(?:{_SP}(?:à|um|om|alle|a las|klo|kl\.?))?"
_ANDROID_RE = re.compile(
    rf"^(?P<date>{_DATE}),?{_AT}{_SP}(?P<time>{_TIME}){_SP}[-–]{_SP}(?P<rest>.*)$"
)
_IOS_RE = re.compile(rf"^\[(?P<date>{_DATE}),?{_SP}(?P<time>{_TIME})\]{_SP}(?P<rest>.*)$")
# Korean phones write the year first with a dot and a space after each part, and 오전 (AM)
# or 오후 (PM) before a 12-hour time: Android "2024. 3. 12. 오후 2:05 - Name: text" (also
# "24. 3. 12. ..."), iOS "[2024. 3. 12. 오후 2:05:33] Name: text"; 24-hour phones leave
# the marker out.
_KO_DATE = rf"(?P<y>\d{{2}}|\d{{4}})\.{_SP}?(?P<m>\d{{1,2}})\.{_SP}?(?P<d>\d{{1,2}})\."
_KO_TIME = rf"(?:(?P<half>오전|오후){_SP}?)?(?P<clock>\d{{1,2}}:\d{{2}}(?::\d{{2}})?)"
_KO_ANDROID_RE = re.compile(rf"^{_KO_DATE},?{_SP}{_KO_TIME}{_SP}[-–]{_SP}(?P<rest>.*)$")
_KO_IOS_RE = re.compile(rf"^\[{_KO_DATE},?{_SP}{_KO_TIME}\]{_SP}(?P<rest>.*)$")
_NAME_RE = re.compile(r"^(?P<name>[^:\n]{1,80}?): (?P<text>.*)$|^(?P<bare>[^:\n]{1,80}?):$")
_MARKS = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\ufeff"
_NO_MARKS = str.maketrans("", "", _MARKS)
# Lines WhatsApp writes itself; checked before "Name: text" so that a subject change
# whose new subject holds ": " is not read as someone speaking.
_SYSTEM_RE = re.compile(
    r"Messages and calls are end-to-end encrypted"
    r"|Messages to this (?:group|chat) are now (?:secured|end-to-end)"
    r"|created (?:group|this group)"
    r"|changed the (?:subject|group description|group name)"
    r"|changed this group's (?:icon|settings|description)"
    r"|deleted this group's icon"
    r"|joined using this group's invite link"
    r"|^\S.{0,80}? (?:added|removed) \S"
    r"|^\S.{0,80}? left$"
    r"|changed (?:their|your) phone number"
    r"|security code (?:with \S.{0,80} )?changed"
    r"|You're now an admin|is now an admin"
    r"|disappearing messages",
    re.IGNORECASE,
)
# WhatsApp's own lines only: "<Media omitted>", "image omitted", "<attached: x.jpg>", and
# a document's "report.pdf • 3 pages document omitted" (a file name before it); never a
# typed sentence that ends so ("the appendix of the contract document omitted").
_MEDIA_RE = re.compile(
    r"^(?:<Media omitted>|(?:image|video|audio|sticker|GIF|GIF image|Contact card) omitted"
    # Android's placeholder on phones set to German, French, Spanish, Portuguese, Italian
    # and Dutch.
    r"|<(?:Medien ausgeschlossen|M[ée]dias omis|Multimedia omitido|M[íi]dia oculta"
    r"|Media omessi|Media weggelaten)>"
    r"|<View once (?:voice message|photo|video|audio|message|media) omitted>"
    r"|<attached: (?P<file>[^>]+)>)$",
    re.IGNORECASE,
)
#: Android writes a view-once photo or voice message as the word "null".
_VIEW_ONCE = "null"
#: iOS: a document with its details before the file, "report.pdf • 3 pages <attached: ...>".
_ATTACHED_TAIL_RE = re.compile(r"^(?P<before>\S.*?)[ \u200e]*<attached: (?P<file>[^>]+)>$")
#: What iOS marks with U+200E in a person's own message: a poll, a shared location. The
#: message stays theirs (other marked lines are WhatsApp's own).
_SHARED_RE = re.compile(r"^(?P<kind>POLL|Location|live location shared)\b", re.IGNORECASE)
_FILE_OMITTED = (" document omitted", " contact card omitted")
_FILE_NAME_RE = re.compile(r"\S\.\w{2,5}$")


def _file_omitted(text: str) -> bool:
    """A document WhatsApp left out, as it writes it: the file's name, perhaps details
    after bullets, then "document omitted" ("report.pdf • 3 pages document omitted");
    read with string splits (a pattern for it backtracks badly on long lines)."""
    lowered = text.lower()
    ending = next((e for e in _FILE_OMITTED if lowered.endswith(e)), None)
    if ending is None:
        return lowered.strip() in ("document omitted", "contact card omitted")
    name = text[: -len(ending)].split("•")[0].strip()
    return bool(_FILE_NAME_RE.search(name))


_ANDROID_FILE_RE = re.compile(r"^(?P<file>\S.*?\.\w{2,5}) \(file attached\)$")
_DELETED_RE = re.compile(
    r"^(?:This message was deleted(?: by admin \S.{0,80})?|You deleted this message"
    r"|Waiting for this message(?:\. This may take a while)?"
    # The same on phones set to German, French, Spanish, Portuguese, Italian and Dutch.
    r"|Diese Nachricht wurde gelöscht|Du hast diese Nachricht gelöscht"
    r"|Ce message a été supprimé|Vous avez supprimé ce message"
    r"|Se eliminó este mensaje|Eliminaste este mensaje|Este mensaje fue eliminado"
    r"|Mensagem apagada|Você apagou esta mensagem|Esta mensagem foi apagada"
    r"|Questo messaggio è stato eliminato|Hai eliminato questo messaggio"
    r"|Dit bericht is verwijderd|Je hebt dit bericht verwijderd)\.?$",
    re.I,
)
# A call's line as WhatsApp writes it ("Missed voice call", "Voice call, 12 min", "Video
# call. Answered on other device"), not a message that starts with the words ("Video call
# tomorrow at 5?").
_CALL_RE = re.compile(
    r"^(?:Missed )?(?:group )?(?:voice|video) call"
    r"(?:[,.]\s*(?:tap to call back|click to call back|answered on other device|no answer"
    r"|\d+\s*(?:sec|min|hr|hour|minute|second)s?(?:\s+\d+\s*(?:sec|min)s?)?))?\.?$",
    re.IGNORECASE,
)
_EDITED = "<This message was edited>"


#: The start of a dated line that is not whole: a date and the start of a time ("14:0",
#: "14:04") after it, as a message's first line has them. Only a line written the way the
#: file's own dated lines are counts (see :func:`_garbled`): a message line that starts
#: with a date another way ("12 March 2023 was ...", "13/03/2023 10:00 standup" in a file
#: of "12/03/2023, 14:02 - "), or a date alone (a list of dates), stays message text.
_HEADERISH_RE = re.compile(rf"^(?P<ios>\[)?(?P<date>{_DATE})(?P<comma>,?){_AT}{_SP}\d{{1,2}}:")
#: How many garbled lines one warning lists by number.
_GARBLED_SHOWN = 5


def _date_shape(date: str) -> str:
    """A date's layout: its separators, and which parts have four digits
    (``12/03/2023`` and ``3/1/2024`` are ``d/d/y``; ``12.03.23`` is ``d.d.d``)."""
    return re.sub(r"\d+", lambda m: "y" if len(m.group()) > 2 else "d", date.rstrip("."))


def _garbled(line: str, entry: dict[str, Any]) -> bool:
    """Whether a line that is no dated line starts as one of this file's would (its
    layout, its way of writing dates) with a time after the date: a message line that
    was cut or garbled, not a line of the message above."""
    found = _HEADERISH_RE.match(line.lstrip(_MARKS))
    if found is None or bool(found.group("ios")) != entry["ios"] or "shape" not in entry:
        return False
    return bool(
        _date_shape(found.group("date")) == entry["shape"]
        and bool(found.group("comma")) == entry["comma"]
    )


def _prefix(line: str) -> re.Match[str] | None:
    bare = line.lstrip(_MARKS)
    return (
        _IOS_RE.match(bare)
        or _ANDROID_RE.match(bare)
        or _KO_IOS_RE.match(bare)
        or _KO_ANDROID_RE.match(bare)
    )


def _when(match: re.Match[str]) -> tuple[str, str]:
    """The date and time of a dated line, as written; a Korean line's as ISO date and a
    12-hour time with AM/PM, which read the same whatever the file's day/month order."""
    if "half" not in match.re.groupindex:
        return match.group("date"), match.group("time")
    year = match.group("y")
    date = f"{'20' + year if len(year) == 2 else year}-{int(match.group('m')):02d}-" + (
        f"{int(match.group('d')):02d}"
    )
    half = match.group("half")
    clock = match.group("clock")
    return date, f"{clock} {'AM' if half == '오전' else 'PM'}" if half else clock


def looks_like_whatsapp(text: str) -> bool:
    """The first non-blank line is a dated WhatsApp line."""
    for line in file_lines(text[:4096]):
        if line.strip(_MARKS + " \t"):
            return _prefix(line) is not None
    return False


def _conversation_id(path: Path) -> str:
    # iOS exports are always "_chat.txt"; the folder it was unzipped to names the chat.
    # (resolved: "_chat.txt" typed in that folder is named by it too)
    folder = path.resolve().parent.name
    if path.stem.lower() in ("_chat", "chat") and folder:
        return folder
    return path.stem


def load_whatsapp(path: Path, text: str, options: LoadOptions) -> ParsedSource:
    return load_text(path, "whatsapp", text, options, plan_whatsapp)


def stream_whatsapp(path: Path, options: LoadOptions) -> StreamedSource:
    """A WhatsApp export checked and read line by line (see :func:`stream_text`)."""
    return stream_text(path, "whatsapp", options, plan_whatsapp)


def _entries(
    path: Path, lines: Lines, garbled: list[int] | None = None
) -> Iterator[dict[str, Any]]:
    """The dated lines of an export, each with the lines that continue it. A continuation
    line that starts like one of the file's dated lines but is not one (cut off, or
    without its `` - ``) stays with the message above; its number goes to ``garbled``."""
    entry: dict[str, Any] | None = None
    for lineno, line in lines:
        match = _prefix(line)
        if match is None:
            if entry is not None:
                if garbled is not None and _garbled(line, entry):
                    garbled.append(lineno)
                entry["body"].append(line)
            elif line.strip(_MARKS + " \t"):
                raise InputError(
                    path,
                    f"not a WhatsApp export line: {line.strip()[:60]!r}",
                    line=lineno,
                    hint="a WhatsApp export starts every message with its date and time, "
                    "like '12/03/2023, 14:02 - Name: text' or '[12/03/2023, 14:02:05] Name: "
                    "text'; check the file, or pass another --format",
                )
            continue
        if entry is not None:
            yield entry
        date, time = _when(match)
        entry = {
            "line": lineno,
            "date": date,
            "time": time,
            "ios": line.lstrip(_MARKS).startswith("["),
            "rest": match.group("rest"),
            "body": [],
        }
        if "half" not in match.re.groupindex:  # Korean dates: no garbled-line check
            entry["shape"] = _date_shape(date)
            bare = line.lstrip(_MARKS)
            entry["comma"] = bare[match.end("date") : match.end("date") + 1] == ","
    if entry is not None:
        yield entry


def plan_whatsapp(path: Path, lines: Lines, options: LoadOptions) -> TextReading:
    """Read an export's dates once to settle day/month order; how to read its messages."""
    votes = DateOrderVotes()
    found = 0
    garbled: list[int] = []
    for entry in _entries(path, lines, garbled):
        votes.add(entry["date"])
        found += 1
    if not found:
        raise InputError(path, "no WhatsApp messages found", hint="the file is empty")
    dates = votes.choice(options.date_order)
    warnings = dates.notes(path)
    if garbled:
        shown = ", ".join(str(n) for n in garbled[:_GARBLED_SHOWN])
        more = f" and {len(garbled) - _GARBLED_SHOWN} more" if len(garbled) > _GARBLED_SHOWN else ""
        warnings.append(
            f"{path}: {'line' if len(garbled) == 1 else 'lines'} {shown}{more} "
            f"{'starts' if len(garbled) == 1 else 'start'} with a date and time like a "
            "message but cannot be read as one (cut off, or without its sender): kept as "
            "text of the message above; check the export"
        )
    parse = partial(parse_datetime, order=dates.order)
    events: list[dict[str, Any]] = []

    def raws(numbered: Lines) -> Iterator[RawMessage]:
        events.clear()
        for entry in _entries(path, numbered):
            when = f"{entry['date']} {entry['time']}"
            raw, event = _entry(entry, when)
            if raw is not None:
                yield raw
            if event is not None:
                moment = parse(when)
                event["time"] = moment.isoformat() if moment else when
                events.append(event)

    def people() -> set[str]:
        """Who sent only media, calls or deleted messages is in the chat too."""
        return {event["speaker"] for event in events if event.get("speaker")}

    def conversation(count: int) -> Conversation:
        if not count:
            raise InputError(
                path,
                "the chat has no messages, only system lines, media and deleted messages",
                hint="export the chat again with its messages",
            )
        metadata: dict[str, Any] = {
            "source": str(path),
            "format": "whatsapp",
            "date_order": dates.basis,
        }
        add_events(metadata, events)
        conv_id = options.conversation or _conversation_id(path)
        return Conversation(id=conv_id, name=_conversation_id(path), metadata=metadata)

    return TextReading(
        raws=raws,
        conversation=conversation,
        parse_time=lambda value: parse(value) if isinstance(value, str) else None,
        warnings=warnings,
        people=people,
    )


def _entry(entry: dict[str, Any], when: str) -> tuple[RawMessage | None, dict[str, Any] | None]:
    """One dated line (and its continuation lines): a message, or an event."""
    rest: str = entry["rest"]
    lineno: int = entry["line"]
    continuation = "\n".join(entry["body"])
    plain = rest.strip(_MARKS + " ")

    def event(kind: str, text: str, speaker: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"line": lineno, "kind": kind, "text": text.strip(_MARKS + " ")}
        if speaker:
            out["speaker"] = speaker
        return out

    name_match = _NAME_RE.match(rest)
    label = name_match.group("name") or name_match.group("bare") if name_match else None
    if name_match is None or (not entry["ios"] and _SYSTEM_RE.search(label or "")):
        # Android writes its own lines without a "Name:" label (a ": " in them is inside
        # a quoted subject: 'Ana changed the subject from "Trip: Porto" to ...').
        full = (plain + ("\n" + continuation if continuation.strip() else "")).strip()
        return None, event("system", full)
    name = (label or "").strip(_MARKS + " ")
    said = name_match.group("text") or ""
    marked = said.startswith(_MARKS[0]) or said.startswith(_MARKS[1])
    said = said.strip(_MARKS + " ")
    edited = False
    if said.endswith(_EDITED):
        said, edited = said[: -len(_EDITED)].rstrip(), True
    body = "\n".join([said, *entry["body"]])
    if continuation.rstrip().endswith(_EDITED):
        body, edited = body.rstrip()[: -len(_EDITED)].rstrip(), True
    bare = said.translate(_NO_MARKS)  # iOS marks words inside its own lines too
    media = _MEDIA_RE.match(bare) or _ATTACHED_TAIL_RE.match(bare)
    omitted = bool(media) or _file_omitted(bare) or (not entry["ios"] and bare == _VIEW_ONCE)
    if omitted and not continuation.strip():
        out = event("media", said, name)
        if media and media.group("file"):
            out["attachment"] = media.group("file").strip()
        return None, out
    if _DELETED_RE.match(said):
        return None, event("deleted", said, name)
    if _CALL_RE.match(bare) and not continuation.strip():
        return None, event("call", said, name)
    shared = _SHARED_RE.match(bare) if marked else None
    if marked and entry["ios"] and not omitted and not shared and continuation.strip():
        # iOS's own lines are one line each: a marked line with lines below it is media
        # left out with its caption, whatever language the phone wrote the placeholder in
        # ("<U+200E>Bild weggelassen", "<U+200E>image absente"): the caption is the message.
        omitted = not _SYSTEM_RE.search(said)
    if marked and not omitted and not shared and (entry["ios"] or _SYSTEM_RE.search(said)):
        # iOS marks its own lines: "Trip to Porto: <U+200E>Ana added Bo" (the group's name
        # in the speaker's place), "Ana: <U+200E>Messages and calls are end-to-end ...".
        return None, event("system", said)
    if entry["ios"] and _SYSTEM_RE.search(said) and re.search("end-to-end", said, re.I):
        return None, event("system", said)
    metadata: dict[str, Any] = {"source_line": lineno}
    attached = (media.group("file") if media else None) or None
    android_file = _ANDROID_FILE_RE.match(said)
    if android_file:
        attached = android_file.group("file")
    if attached:
        metadata["attachment"] = attached.strip()
        body = body.partition("\n")[2]  # the caption, on the lines below the file
        if not body.strip():
            return None, event("media", said, name)
    elif omitted and bare != _VIEW_ONCE:
        # Media left out of the export with its caption below ("<Media omitted>",
        # "image omitted", "report.pdf • 3 pages document omitted"): the caption is the
        # message, WhatsApp's placeholder is kept in metadata.media.
        metadata["media"] = bare.strip()
        body = body.partition("\n")[2]
        if not body.strip():  # no caption (an edited placeholder): media, as without one
            return None, event("media", said, name)
    if media and media.groupdict().get("before"):
        metadata["document"] = media.group("before").strip()
    if shared:
        metadata["shared"] = shared.group("kind").lower()
    if edited:
        metadata["edited"] = True
    return (
        RawMessage(
            text=clean_text(body.replace(_MARKS[0], "")),
            location=f"line {lineno}",
            speaker=name or None,
            timestamp=when,
            metadata=metadata,
        ),
        None,
    )
