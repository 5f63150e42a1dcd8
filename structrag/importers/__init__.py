"""Importers: one input (a file, or a folder such as a Slack export) -> a
:class:`ParsedSource`, chosen by ``--format`` or detected.

Formats: ``json`` and ``jsonl`` (generic messages), ``transcript`` (``SPEAKER: text``,
Otter and Zoom text exports), ``webvtt``, ``locomo``, ``typeagent`` (a KnowPro index with
its LLM-extracted knowledge), ``slack`` (a workspace export folder), ``discord``
(DiscordChatExporter JSON), ``whatsapp`` (a chat exported as text), ``imessage``
(imessage-exporter's text export), ``chatgpt``
(``conversations.json`` of a ChatGPT data export) and ``email`` (mbox, ``.eml``, or a
folder of ``.eml``). Detection looks at the extension first and then at the content; see
:func:`detect_format`. :func:`expand_inputs` turns folders into the inputs inside them.
"""

from __future__ import annotations

import fnmatch
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.errors import InputError, UnknownFormatError
from structrag.importers.base import (
    ImportedRefs,
    LoadOptions,
    ParsedSource,
    SourceChanged,
    StreamedSource,
    check_name,
    codec_of,
    decode_text,
    parse_json,
    read_bytes,
    sha256_hex,
    sniff_document,
    with_file_encoding,
)
from structrag.importers.chatgpt import load_chatgpt, looks_like_chatgpt, stream_chatgpt
from structrag.importers.discord import load_discord, looks_like_discord, stream_discord
from structrag.importers.imessage import load_imessage, looks_like_imessage, stream_imessage
from structrag.importers.json_stream import JsonSurvey, survey_json
from structrag.importers.locomo import load_locomo, looks_like_locomo, stream_locomo
from structrag.importers.mail import (
    load_email,
    load_email_folder,
    looks_like_email,
    stream_email,
)
from structrag.importers.messages_json import load_json, load_jsonl, stream_json, stream_jsonl
from structrag.importers.messenger import load_messenger, looks_like_messenger
from structrag.importers.slack import (
    is_slack_folder,
    load_slack,
    looks_like_slack_day,
    stream_slack,
)
from structrag.importers.telegram import load_telegram, looks_like_telegram, stream_telegram
from structrag.importers.transcript import load_transcript, looks_timed, stream_transcript
from structrag.importers.typeagent import load_typeagent, looks_like_typeagent, stream_typeagent
from structrag.importers.webvtt import load_webvtt, looks_like_captions, stream_webvtt
from structrag.importers.whatsapp import load_whatsapp, looks_like_whatsapp, stream_whatsapp

FORMATS: tuple[str, ...] = (
    "json",
    "jsonl",
    "transcript",
    "webvtt",
    "locomo",
    "typeagent",
    "slack",
    "discord",
    "whatsapp",
    "chatgpt",
    "email",
    "messenger",
    "telegram",
    "imessage",
)
ALIASES: dict[str, str] = {
    "vtt": "webvtt",
    "srt": "webvtt",
    "subrip": "webvtt",
    "txt": "transcript",
    "otter": "transcript",
    "zoom": "transcript",
    "ndjson": "jsonl",
    "knowpro": "typeagent",
    "mbox": "email",
    "eml": "email",
    "facebook": "messenger",
    "instagram": "messenger",
}
#: File name endings a folder is searched for (files with no ending are read when their
#: content is an email or an mbox).
KNOWN_SUFFIXES = frozenset(
    {
        ".json",
        ".jsonl",
        ".ndjson",
        ".txt",
        ".md",
        ".transcript",
        ".vtt",
        ".srt",
        ".eml",
        ".mbox",
    }
)
_TEXT_SUFFIXES = (".txt", ".md", ".transcript", "")
# Files of a ChatGPT export that are not conversations.
_CHATGPT_COMPANIONS = frozenset(
    {
        "chat.html",
        "user.json",
        "message_feedback.json",
        "model_comparisons.json",
        "shared_conversations.json",
        "group_chats.json",
    }
)

__all__ = [
    "ALIASES",
    "FORMATS",
    "ImportedRefs",
    "Inputs",
    "LoadOptions",
    "ParsedSource",
    "SourceChanged",
    "StreamedSource",
    "check_regular",
    "detect_format",
    "expand_inputs",
    "known_format",
    "load_source",
    "scan_source",
]


def known_format(fmt: str) -> str | None:
    """The format a ``--format`` name (or alias) stands for; None if it is none."""
    name = ALIASES.get(fmt.lower(), fmt.lower())
    return name if name in FORMATS else None


def _canonical(fmt: str, path: Path) -> str:
    name = known_format(fmt)
    if name is None:
        raise UnknownFormatError(
            path,
            f"unknown format {fmt!r}",
            hint=f"choose one of: {', '.join(FORMATS)}",
        )
    return name


def special_kind(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a folder (following links):
    ``a FIFO``, ``a character device`` ...; None for a file, a folder or a missing path."""
    try:
        mode = path.stat().st_mode
    except (OSError, ValueError):
        return None  # a missing or unreadable path: reading it says what is wrong, by name
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kinds = (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((what for test, what in kinds if test(mode)), "not a regular file")


def check_regular(path: Path) -> None:
    """Refuse, before reading a byte of it, an input that is neither a regular file nor a
    folder: a device such as ``/dev/zero`` never ends and a FIFO may never answer, so
    reading one would hang (and fill memory). Raises :class:`~structrag.errors.InputError`."""
    kind = special_kind(path)
    if kind is None:
        return
    target = f" (a link to {path.resolve()})" if path.is_symlink() else ""
    raise InputError(
        path,
        f"is {kind}{target}, not a regular file: structrag reads files and folders only",
        hint="save what it holds to a regular file and ingest that file",
    )


def _detect_folder(path: Path) -> str:
    if is_slack_folder(path):
        return "slack"
    if any(p.suffix.lower() == ".eml" for p in path.iterdir() if p.is_file()):
        return "email"
    raise InputError(
        path,
        "is a directory, and not one read as a whole (a Slack export, or a folder of .eml files)",
        hint="pass the files inside it, or ingest it with `structrag ingest DIR` / "
        "Index.ingest([DIR]), which read every file of a known kind inside it",
    )


def detect_format(path: Path, text: str) -> tuple[str, Any]:
    """Guess an input's format from its name and text (for a folder, from its files);
    returns it and the parsed JSON when JSON had to be read.

    Rules, in order: a folder is a Slack export (``users.json``/``channels.json``, or day
    files of Slack messages) or a folder of ``.eml``; ``.zip`` is refused (unzip it
    first); ``.jsonl``/``.ndjson`` are JSON Lines, ``.eml``/``.mbox`` email, ``.vtt`` or a
    ``WEBVTT`` first line WebVTT; text starting with an email header block (or an mbox
    ``From`` line) is email, text whose first line is a dated WhatsApp line
    (``12/03/2023, 14:02 - ``, ``[12/03/2023, 14:02:05] ``) is WhatsApp, text whose first
    line is imessage-exporter's ``Mar 12, 2024  2:05:33 PM`` above a sender is iMessage,
    and text whose first line starts ``[00:00:01]`` is a transcript; then JSON (``.json``, or text
    starting with ``{``/``[``) is told apart by its shape: a Slack day file, a
    DiscordChatExporter file (``guild``/``channel``/``messages``), a ChatGPT export (chats
    with ``mapping``), LoCoMo, TypeAgent, else generic messages. Other ``.txt``, ``.md``
    and extension-less files are transcripts.
    """
    if path.is_dir():
        return _detect_folder(path), None
    suffix = path.suffix.lower()
    if suffix == ".zip":
        raise UnknownFormatError(
            path,
            "is a .zip archive",
            hint="unzip it first and pass the folder it makes (a Slack, WhatsApp or ChatGPT "
            "export is a zip of the files structrag reads)",
        )
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl", None
    if suffix in (".eml", ".mbox"):
        return "email", None
    if suffix in (".vtt", ".srt") or looks_like_captions(text):
        return "webvtt", None
    stripped = text.lstrip("\ufeff \t\r\n")
    if suffix != ".json":
        if looks_like_email(text):
            return "email", None
        if looks_like_whatsapp(text):
            return "whatsapp", None
        if looks_like_imessage(text):
            return "imessage", None
        if looks_timed(stripped.split("\n", 1)[0]):
            return "transcript", None
    if suffix == ".json" or stripped.startswith(("{", "[")):
        first_line = stripped.split("\n", 1)[0].strip()
        if suffix != ".json" and first_line.startswith("{") and first_line.endswith("}"):
            rest = stripped.split("\n", 1)[1].strip() if "\n" in stripped else ""
            if rest.startswith("{"):
                return "jsonl", None
        try:
            data = parse_json(path, text)
        except InputError:
            if suffix in _TEXT_SUFFIXES and suffix != "":
                return "transcript", None  # text that merely starts with a bracket
            raise
        return _json_kind(path, data), data
    if suffix in _TEXT_SUFFIXES:
        return "transcript", None
    if suffix in (".csv", ".tsv"):
        raise UnknownFormatError(
            path,
            f"structrag does not read {suffix[1:].upper()} files",
            hint="convert it to JSON Lines, one message a line: "
            '{"speaker": "Ana", "timestamp": "2023-03-12T14:02:00", "text": "..."} '
            "(a .jsonl file), then ingest that",
        )
    raise UnknownFormatError(
        path,
        f"cannot tell the format of a {suffix!r} file",
        hint="a file of 'Name: text' turns is read with --format transcript (or renamed "
        ".txt); a chat export in another layout, converted to JSON Lines (one "
        '{"speaker", "timestamp", "text"} object a line), is read as .jsonl',
    )


def _json_kind(path: Path, data: Any) -> str:
    if looks_like_slack_day(path, data):
        return "slack"
    if looks_like_discord(data):
        return "discord"
    if looks_like_chatgpt(data):
        return "chatgpt"
    if looks_like_locomo(data):
        return "locomo"
    if looks_like_typeagent(data):
        return "typeagent"
    if looks_like_messenger(data):
        return "messenger"
    if looks_like_telegram(data):
        return "telegram"
    return "json"


def load_source(
    path: str | Path, *, format: str | None = None, options: LoadOptions | None = None
) -> ParsedSource:
    """Read and check one input (a file, a Slack export folder, or a folder of ``.eml``);
    its ``sha256`` is that of the bytes parsed, read once. Raises
    :class:`~structrag.errors.InputError`."""
    path = Path(path)
    check_regular(path)
    options = options or LoadOptions()
    fmt = _canonical(format, path) if format else None
    if path.is_dir():
        fmt = fmt or _detect_folder(path)
        if fmt == "slack":
            return load_slack(path, options)
        if fmt == "email":
            return load_email_folder(path, options)
        _detect_folder(path)  # raises: a folder of another format is not one input
    options = with_file_encoding(path, options)
    data = read_bytes(path)
    digest = sha256_hex(data)
    if fmt == "email" or (fmt is None and path.suffix.lower() in (".eml", ".mbox")):
        source = load_email(path, data, options)
    else:
        try:
            text = decode_text(path, data, options.encoding)
        except InputError:
            # Mail declares its own charsets; a mailbox need not decode as one text.
            if fmt is None and looks_like_email(data[:16384].decode("utf-8", "replace")):
                source = load_email(path, data, options)
                source.sha256 = digest
                return source
            raise
        source = _load_text(path, data, text, fmt, options)
    if not source.sha256:
        source.sha256 = digest
    return source


def scan_source(
    path: str | Path, *, format: str | None = None, options: LoadOptions | None = None
) -> ParsedSource | StreamedSource:
    """Check one input for an ingest. JSON Lines, transcripts, WebVTT and WhatsApp exports
    are checked line by line, and JSON documents (generic messages, Discord, ChatGPT and
    Telegram exports, LoCoMo, TypeAgent indexes) one message or chat at a time; they come
    back as a :class:`StreamedSource` that reads their messages again when they are
    written, so their size is not bounded by memory (a TypeAgent index's semantic refs
    wait on disk until their messages are written). A Slack export folder is checked and
    read again one channel at a time; an mbox or a folder of ``.eml`` is checked one
    message at a time and read again thread by thread. Any other input (a single .eml, a
    single ChatGPT chat or LoCoMo sample, a Messenger file: one part of a thread) is
    loaded whole (:func:`load_source`). Raises
    :class:`~structrag.errors.InputError`."""
    path = Path(path)
    check_regular(path)
    options = options or LoadOptions()
    fmt = _canonical(format, path) if format else None
    if path.is_dir():
        if fmt == "slack" or (fmt is None and is_slack_folder(path)):
            return stream_slack(path, options)
        if fmt == "email" or (fmt is None and _detect_folder(path) == "email"):
            return stream_email(path, options) or load_source(path, format=format, options=options)
        return load_source(path, format=format, options=options)
    options = with_file_encoding(path, options)
    if fmt is None:
        fmt = _streamed_kind(path, options)
    elif fmt == "transcript" and _captions_file(path, options):
        fmt = "webvtt"  # `--format zoom` for Zoom's transcript download, which is WebVTT
    if fmt == "jsonl":
        return stream_jsonl(path, options)
    if fmt == "transcript":
        return stream_transcript(path, options)
    if fmt == "whatsapp":
        return stream_whatsapp(path, options)
    if fmt == "imessage":
        return stream_imessage(path, options)
    if fmt == "webvtt":
        return stream_webvtt(path, options)
    if fmt == "email":
        return stream_email(path, options) or load_source(path, format=format, options=options)
    if fmt == _DOCUMENT or fmt in _DOCUMENT_STREAMS:
        return _stream_document(path, fmt, options)
    return load_source(path, format=format, options=options)


#: A JSON document whose format its shape tells (see :func:`_stream_document`).
_DOCUMENT = "json document"
_DOCUMENT_STREAMS: dict[str, Callable[[Path, LoadOptions, JsonSurvey], StreamedSource | None]] = {
    "json": stream_json,
    "chatgpt": stream_chatgpt,
    "locomo": stream_locomo,
    "discord": stream_discord,
    "typeagent": stream_typeagent,
    "telegram": stream_telegram,
}


def _stream_document(
    path: Path, fmt: str, options: LoadOptions, *, tries: int = 3
) -> ParsedSource | StreamedSource:
    """A JSON document read as a stream: a first walk (:func:`survey_json`) tells its
    format from its shape, a second checks its messages, one at a time, and they are read
    again when they are written. Formats (and shapes) not read this way are loaded whole.
    A file that changes between the walks is walked again (``tries`` times)."""
    for _ in range(tries):
        try:
            survey = survey_json(path, options.encoding)
        except InputError:
            if fmt == _DOCUMENT and path.suffix.lower() in _TEXT_SUFFIXES and path.suffix:
                return stream_transcript(path, options)  # text that merely starts with a bracket
            raise
        kind = _json_kind(path, survey.skeleton) if fmt == _DOCUMENT else fmt
        stream = _DOCUMENT_STREAMS.get(kind)
        try:
            source = stream(path, options, survey) if stream else None
        except SourceChanged:
            continue
        if source is None:
            return load_source(path, format=kind, options=options)
        if source.sha256 == survey.sha256:
            return source
    raise InputError(
        path,
        f"the file changed each time it was read ({tries} times) while it was checked",
        hint="ingest it again when nothing is writing to it",
    )


def _streamed_kind(path: Path, options: LoadOptions) -> str | None:
    """The format of a file read as a stream, told from its name and first 64 KB as
    :func:`detect_format` tells it (:data:`_DOCUMENT` for a JSON document, whose shape
    tells its format); None for anything else (an unreadable head)."""
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    if suffix in (".vtt", ".srt"):
        return "webvtt"
    if suffix in (".eml", ".mbox"):
        return "email"
    if suffix not in _TEXT_SUFFIXES and suffix != ".json":
        return None
    try:
        with path.open("rb") as handle:
            head = handle.read(65536)
        text = head.decode(
            codec_of(options.encoding),
            errors="ignore",  # a character cut at the end of the head
        )
    except (OSError, LookupError):
        return None  # load_source says what is wrong
    stripped = text.lstrip("\ufeff \t\r\n")
    if suffix == ".json":
        return None if stripped.startswith("WEBVTT") else _DOCUMENT
    if looks_like_whatsapp(text):
        return "whatsapp"  # an iOS export starts with a bracket: "[12/03/2023, 14:02:05] "
    if looks_like_imessage(text):
        return "imessage"
    first, _, rest = stripped.partition("\n")
    if stripped.startswith(("{", "[")) and not looks_timed(first):
        line = first.strip()
        if line.startswith("{") and line.endswith("}") and rest.strip().startswith("{"):
            return "jsonl"  # as detect_format tells it
        return _DOCUMENT if "\n" in stripped or len(head) < 65536 else None
    return detect_format(path, text)[0]


def _captions_file(path: Path, options: LoadOptions) -> bool:
    """Whether a file is WebVTT or SubRip by its first lines (what ``--format
    transcript`` or ``zoom`` reads as captions)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False  # reading it says what is wrong
    return looks_like_captions(head.decode(codec_of(options.encoding), errors="ignore"))


def _load_text(
    path: Path, data: bytes, text: str, fmt: str | None, options: LoadOptions
) -> ParsedSource:
    parsed: Any = None
    if fmt is None:
        fmt, parsed = detect_format(path, text)
    if fmt == "email":
        return load_email(path, data, options)
    if fmt == "slack":
        return load_slack(path, options, known={path: data})
    if fmt == "jsonl":
        return load_jsonl(path, text, options)
    if fmt == "json":
        return load_json(path, text, options, parsed)
    if fmt == "locomo":
        return load_locomo(path, text, options, parsed)
    if fmt == "typeagent":
        return load_typeagent(path, text, options, parsed)
    if fmt == "discord":
        return load_discord(path, text, options, parsed)
    if fmt == "chatgpt":
        return load_chatgpt(path, text, options, parsed)
    if fmt == "messenger":
        return load_messenger(path, text, options, parsed)
    if fmt == "telegram":
        return load_telegram(path, text, options, parsed)
    if fmt == "whatsapp":
        return load_whatsapp(path, text, options)
    if fmt == "imessage":
        return load_imessage(path, text, options)
    if fmt == "webvtt" or looks_like_captions(text):
        return load_webvtt(path, text, options)  # --format transcript (zoom) on captions too
    return load_transcript(path, text, options)


@dataclass
class Inputs:
    """What a list of paths expands to: the inputs to load, in order (files, and folders
    read as one input), per folder argument a note on the files left out, and for each
    input found in a folder, that folder."""

    paths: list[Path] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    found_in: dict[Path, Path] = field(default_factory=dict)


def expand_inputs(
    paths: Sequence[str | Path] | str | Path, exclude: Sequence[str] | str = ()
) -> Inputs:
    """Files stay as they are; a folder becomes every input of a known kind inside it,
    recursively, in name order. A Slack export (or channel) folder and a folder's ``.eml``
    files are one input each; a ChatGPT export folder is its ``conversations.json``.
    Hidden files and folders (``.git``, ``.DS_Store``), ``__MACOSX`` and structrag indexes
    (a folder holding ``structrag.duckdb``: ``ingest . --db idx``) are passed over;
    other files of no known kind are left out with a note, and so are the files and
    folders inside a folder that an ``exclude`` pattern matches (a shell pattern, matched
    against the name and against the path within the folder: ``README.md``, ``*.md``,
    ``drafts``, ``2023/*.txt``; not inside a Slack export, which is one input, and not a
    single ``.eml`` of a folder whose mails are read together). A folder with no input at
    all is an error. One path may be given as it is, not in a list."""
    out = Inputs()
    if isinstance(paths, str | Path):  # one path, not a sequence of its characters
        paths = [paths]
    for raw in paths:
        path = Path(raw)
        check_name(path)
        if not path.is_dir():
            out.paths.append(path)  # a missing file fails when it is loaded, by name
            continue
        before = len(out.paths)
        left_out: list[tuple[Path, str]] = []
        _walk(path, out.paths, left_out, _Excluded.of(path, exclude))
        for found in out.paths[before:]:
            check_name(found)  # as a file given by name is: the index stores its name
        out.found_in.update((found, path) for found in out.paths[before:] if found != path)
        if len(out.paths) == before:
            excluded = sum(1 for _, why in left_out if why.startswith("--exclude"))
            if excluded:
                raise InputError(
                    path,
                    f"after --exclude, the folder holds no input ({excluded} file(s) or "
                    "folder(s) excluded)",
                    hint="check the --exclude patterns: each is matched against the names "
                    "and the paths within the folder",
                )
            raise InputError(
                path,
                "the folder holds no file of a kind structrag reads"
                + (f" ({len(left_out)} other file(s))" if left_out else ""),
                hint=f"inputs end in {', '.join(sorted(KNOWN_SUFFIXES))}, or are a Slack "
                "export folder; pass --format for a file with another name",
            )
        if left_out:
            shown = ", ".join(
                f"{p.relative_to(path).as_posix()}{'/' if p.is_dir() else ''} ({why})"
                for p, why in left_out[:5]
            )
            more = f" and {len(left_out) - 5} more" if len(left_out) > 5 else ""
            kinds = "file(s) or folder(s)" if any(p.is_dir() for p, _ in left_out) else "file(s)"
            out.skipped.append((str(path), f"left out {len(left_out)} {kinds}: {shown}{more}"))
    out.paths = _oldest_part_first(out.paths)
    return out


_MESSENGER_PART = re.compile(r"message_(\d+)\.json", re.IGNORECASE)


def _oldest_part_first(paths: list[Path]) -> list[Path]:
    """Paths in their order, save a Meta download's parts of one thread (``message_1.json``
    is its newest messages, ``message_2.json`` older ones): those of one folder go highest
    number first, at the place of the first of them, so that the thread is appended
    oldest first."""
    parts: dict[Path, list[Path]] = {}
    for path in paths:
        if _MESSENGER_PART.fullmatch(path.name):
            parts.setdefault(path.parent, []).append(path)
    if not any(len(group) > 1 for group in parts.values()):
        return paths
    out: list[Path] = []
    for path in paths:
        group = parts.get(path.parent) if _MESSENGER_PART.fullmatch(path.name) else None
        if group is None:
            out.append(path)
        elif path == group[0]:
            out.extend(sorted(group, key=_part_number, reverse=True))
    return out


def _part_number(path: Path) -> int:
    found = _MESSENGER_PART.fullmatch(path.name)
    return int(found.group(1)) if found else 0


@dataclass(frozen=True)
class _Excluded:
    """The ``exclude`` patterns of one folder argument."""

    root: Path
    patterns: Sequence[str]

    @classmethod
    def of(cls, root: Path, patterns: Sequence[str] | str) -> _Excluded:
        """Patterns as a user writes them: ``drafts/``, ``./drafts`` and ``drafts\\x.txt``
        mean ``drafts`` and ``drafts/x.txt``; one string is one pattern."""
        if isinstance(patterns, str):
            patterns = (patterns,)
        cleaned = []
        for pattern in patterns:
            pattern = pattern.replace("\\", "/").strip()
            while pattern.startswith("./"):
                pattern = pattern[2:]
            cleaned.append(pattern.rstrip("/") or pattern)
        return cls(root, tuple(p for p in cleaned if p))

    def match(self, path: Path) -> str | None:
        """The first pattern that matches ``path`` (by name, or by its path in the
        folder), if any."""
        within = path.relative_to(self.root).as_posix()
        for pattern in self.patterns:
            if fnmatch.fnmatchcase(path.name, pattern) or fnmatch.fnmatchcase(within, pattern):
                return pattern
        return None


def _walk(
    folder: Path, found: list[Path], left_out: list[tuple[Path, str]], excluded: _Excluded
) -> None:
    if is_slack_folder(folder):  # one input: patterns do not reach inside it
        found.append(folder)
        return
    entries = []
    excluded_mail: list[tuple[Path, str]] = []
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        if entry.name.startswith(".") or entry.name == "__MACOSX":
            continue
        if entry.is_dir() and (entry / "structrag.duckdb").is_file():
            continue  # an index (`ingest . --db idx`): no input, passed over as hidden ones

        pattern = excluded.match(entry)
        if pattern is None:
            kind = special_kind(entry)
            if kind is not None:  # a FIFO or a device (or a link to one): never read
                left_out.append((entry, f"{kind}, not a regular file"))
                continue
            entries.append(entry)
            continue
        # an excluded folder is passed over whole, as hidden ones are
        left_out.append((entry, f"--exclude {pattern}"))
        if entry.suffix.lower() == ".eml" and entry.is_file():
            excluded_mail.append((entry, pattern))
    files = [p for p in entries if p.is_file()]
    names = {p.name for p in files}
    chatgpt = "conversations.json" in names and bool(names & _CHATGPT_COMPANIONS)
    if any(p.suffix.lower() == ".eml" for p in files):
        if excluded_mail:
            mail, pattern = excluded_mail[0]
            raise InputError(
                mail,
                f"--exclude {pattern} leaves out this mail, but the .eml files of a folder "
                "are read together, as one input",
                hint="exclude the whole folder, or move the mail you want left out to "
                "another folder",
            )
        found.append(folder)  # its .eml files, threaded together
    for file in files:
        suffix = file.suffix.lower()
        if suffix == ".eml":
            continue
        if chatgpt and file.name != "conversations.json":
            left_out.append((file, "part of a ChatGPT export, not conversations"))
        elif suffix == ".zip":
            left_out.append((file, "a zip archive: unzip it to read it"))
        elif suffix in KNOWN_SUFFIXES or (suffix == "" and _is_mailbox(file)):
            found.append(file)
        elif (document := _document_kind(file)) is not None:
            left_out.append(
                (
                    file,
                    f"is a {document} document, not a conversation: add it with "
                    "`structrag knowledge add`",
                )
            )
        else:
            left_out.append((file, f"no known kind{f' ({suffix})' if suffix else ''}"))
    for sub in entries:
        if sub.is_dir() and not sub.is_symlink():  # a linked folder could loop
            _walk(sub, found, left_out, excluded)


#: Files that are documents, never conversations, by their extension (as `structrag
#: ingest FILE` says of one given on its own).
_DOCUMENT_SUFFIXES = {".pdf": "PDF", ".docx": "Word", ".html": "HTML", ".htm": "HTML"}


def _document_kind(path: Path) -> str | None:
    """``PDF``, ``Word`` or ``HTML`` for a file of a folder that is a document (by its
    bytes, else its extension), for the note on the files left out; else None."""
    sniffed = {"pdf": "PDF", "docx": "Word"}.get(sniff_document(path) or "")
    return sniffed or _DOCUMENT_SUFFIXES.get(path.suffix.lower())


def _is_mailbox(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            head = handle.read(16384)
    except OSError:
        return False
    return looks_like_email(head.decode("utf-8", "replace"))
