"""Shared pieces of the importers: reading bytes safely, JSON with positions, message checks.

An importer turns one input (a file, or a folder such as a Slack export) into a
:class:`ParsedSource` without touching the index, so a bad file is rejected before anything
is written. Each message keeps where it came from (a line number or a JSON path) so later
checks can point at it. The source carries the SHA-256 of the very bytes it was parsed
from, so the ingest log never pairs one version's messages with another version's hash.
"""

from __future__ import annotations

import codecs
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from structrag.errors import InputError
from structrag.models import Conversation, Message, SemanticRef
from structrag.timeparse import DateOrder, parse_datetime

#: Messages longer than this are stored whole (and searchable as text), but knowledge is
#: extracted from their first characters only (see ``extract.base.MAX_EXTRACT_CHARS``).
HUGE_MESSAGE_CHARS = 100_000


@dataclass
class ParsedSource:
    """What an importer read from one file, before anything is written to the index."""

    path: str
    format: str
    conversations: list[Conversation]
    messages: list[Message]
    locations: list[str]
    knowledge: list[SemanticRef] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: SHA-256 of the bytes parsed (for a folder, of its files' names and bytes); set by
    #: :func:`structrag.importers.load_source`.
    sha256: str = ""

    @property
    def count(self) -> int:
        return len(self.messages)

    def iter_messages(self) -> Iterator[Message]:
        return iter(self.messages)


class SourceChanged(Exception):
    """A streamed input's bytes changed between its check and its reading."""


class ImportedRefs(Protocol):
    """Knowledge an input brings for its messages, kept outside memory and looked up one
    message at a time as the messages are written (a TypeAgent index's semantic refs)."""

    def __len__(self) -> int: ...

    def of(self, message: Message) -> list[SemanticRef]:
        """The refs of one message, in the input's order."""
        ...


@dataclass
class StreamedSource:
    """A checked input whose messages are read again from the file, one at a time, when
    they are written (a file of millions of messages is never held in memory). Made by
    :func:`structrag.importers.scan_source`; :meth:`iter_messages` raises
    :class:`SourceChanged` at its end when the bytes it read are not the ones checked."""

    path: str
    format: str
    conversations: list[Conversation]
    count: int
    sha256: str
    read: Callable[[], Iterator[Message]]
    warnings: list[str] = field(default_factory=list)
    knowledge: list[SemanticRef] | ImportedRefs = field(default_factory=list)

    def iter_messages(self) -> Iterator[Message]:
        return self.read()


class HashedLines:
    """A text file's lines, numbered from 1 and split at ``\n``, ``\r\n`` or ``\r`` as
    :func:`file_lines` splits them, read in pieces while the SHA-256 of its bytes is
    taken (:attr:`sha256`, once every line was read). Bad bytes raise the error
    :func:`decode_text` gives for them."""

    def __init__(self, path: Path, encoding: str = "utf-8") -> None:
        self.path = path
        self.encoding = encoding
        self.sha256 = ""

    def __iter__(self) -> Iterator[tuple[int, str]]:
        codec = codec_of(self.encoding)
        handle = open_bytes(self.path)
        digest = hashlib.sha256()
        with handle:
            raw = _HashingReader(handle, digest)
            try:
                text = io.TextIOWrapper(io.BufferedReader(raw), encoding=codec, newline=None)
            except LookupError:
                raise InputError(
                    self.path, f"unknown encoding {self.encoding!r}", hint="use e.g. utf-8"
                ) from None
            try:
                for lineno, line in enumerate(text, start=1):
                    if "\x00" in line:
                        raise _nul_bytes(self.path, lineno)
                    yield lineno, line[:-1] if line.endswith("\n") else line
            except UnicodeDecodeError:
                decode_text(self.path, read_bytes(self.path), self.encoding)
                raise  # pragma: no cover - the whole file decoded after all (it changed)
            except UnicodeError as exc:  # e.g. UTF-16 without a byte order mark
                raise undecodable(self.path, self.encoding, exc) from None
        self.sha256 = digest.hexdigest()


class _HashingReader(io.RawIOBase):
    def __init__(self, handle: io.BufferedReader, digest: Any) -> None:
        self.handle = handle
        self.digest = digest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self.handle.readinto(buffer)
        if n:
            self.digest.update(memoryview(buffer)[:n])
        return n or 0


class Hashed(Protocol):
    """A reading of a file that takes the SHA-256 of its bytes (set when read to the end)."""

    sha256: str

    def __iter__(self) -> Iterator[Any]: ...


def read_again(
    path: Path,
    encoding: str,
    digest: str,
    messages: Callable[[Any], Iterator[Message]],
    reader: Callable[[Path, str], Hashed] = HashedLines,
) -> Iterator[Message]:
    """The messages ``messages`` reads from ``path`` (its lines, or what ``reader`` makes
    of it), read again after its check; then :class:`SourceChanged` when the bytes read
    are not the ones checked (``digest``). An error on the way is a change too when the
    bytes differ."""
    lines = reader(path, encoding)
    try:
        yield from messages(lines)
    except (InputError, SourceChanged):
        if file_sha256(path) != digest:  # a changed file, not a bad one
            raise SourceChanged(str(path)) from None
        raise
    if (lines.sha256 or file_sha256(path)) != digest:  # the hash of a reading that ended
        raise SourceChanged(str(path))


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, read in pieces ("" when it cannot be read)."""
    try:
        with path.open("rb") as handle:
            return hashlib.file_digest(handle, "sha256").hexdigest()
    except OSError:
        return ""


@dataclass
class RawMessage:
    """A message as an importer found it, before ids and ordinals are settled."""

    text: str
    location: str
    id: str | None = None
    speaker: str | None = None
    recipients: tuple[str, ...] = ()
    timestamp: Any = None
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    #: False for a system prompt or a tool's output: such a message is not addressed to
    #: the people in the conversation, and nobody addresses it, so it neither gets default
    #: recipients nor counts as one.
    addressable: bool = True


@dataclass(frozen=True)
class LoadOptions:
    """Options the CLI passes through to every importer."""

    conversation: str | None = None
    encoding: str = "utf-8"
    #: How to read numeric dates that could be day- or month-first (``12/03/2023``);
    #: ``None``: decided per file from its values (see :mod:`structrag.timeparse`).
    date_order: DateOrder | None = None
    #: Shell patterns of files and folders to leave out of a folder argument (see
    #: :func:`structrag.importers.expand_inputs`).
    exclude: tuple[str, ...] = ()


def check_name(path: Path) -> None:
    """Refuse a file name that is not valid UTF-8 (the index stores names and derives
    conversation ids from them, as text)."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            path,
            "the file name is not valid UTF-8",
            hint="rename the file (e.g. `convmv -f latin1 -t utf8 FILE`), or copy it to a "
            "name in UTF-8",
        ) from None


def read_bytes(path: Path) -> bytes:
    """A file's bytes, with errors that say what to do."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise InputError(path, "file not found", hint="check the path") from None
    except IsADirectoryError:
        raise InputError(
            path,
            "is a directory, and not one structrag reads as a whole (a Slack export)",
            hint="pass the files inside it, or use `structrag ingest DIR`, which reads every "
            "file of a known kind inside it",
        ) from None
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror}") from exc


#: Byte order marks that name their encoding (UTF-32's first: it starts as UTF-16's does).
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def bom_encoding(head: bytes) -> str | None:
    """The encoding a UTF-16 or UTF-32 byte order mark at the start of ``head`` names
    (the codec reads the mark and drops it); None without one (UTF-8's mark is dropped
    by :func:`codec_of`'s codec)."""
    return next((name for bom, name in _BOMS if head.startswith(bom)), None)


def with_file_encoding(path: Path, options: LoadOptions) -> LoadOptions:
    """``options`` for reading the file at ``path``: a byte order mark names its encoding
    beyond doubt, whatever ``--encoding`` says (a folder may mix a Latin-1 file given by
    ``--encoding`` with one saved as UTF-16)."""
    try:
        with path.open("rb") as handle:
            found = bom_encoding(handle.read(4))
    except OSError:
        return options  # reading it says what is wrong
    if found is None or options.encoding.lower().replace("_", "-") == found:
        return options
    return replace(options, encoding=found)


def codec_of(encoding: str) -> str:
    """The codec that reads a file in ``encoding``: UTF-8 drops a byte order mark."""
    return "utf-8-sig" if encoding.lower().replace("_", "-") in ("utf-8", "utf8") else encoding


def open_bytes(path: Path) -> io.BufferedReader:
    """A file opened for reading bytes, with the errors :func:`read_bytes` gives."""
    try:
        return path.open("rb")
    except OSError:
        read_bytes(path)  # raises the error for it
        raise


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class FolderDigest:
    """The SHA-256 of a folder source: each file's name (relative to the folder) and bytes,
    in the order read, so renaming, adding or editing any file changes it."""

    def __init__(self, root: Path, known: dict[Path, bytes] | None = None) -> None:
        self.root = root
        self._digest = hashlib.sha256()
        self._known = dict(known or {})  # bytes already read (for detection)

    def add(self, path: Path, data: bytes) -> None:
        try:
            name = path.relative_to(self.root).as_posix()
        except ValueError:
            name = path.as_posix()
        self._digest.update(f"{name}\0{len(data)}\0".encode())
        self._digest.update(data)

    def read_text(self, path: Path, encoding: str = "utf-8") -> str:
        """Read one of the folder's files (once), adding it to the digest."""
        data = self._known.pop(path, None)
        if data is None:
            data = read_bytes(path)
        self.add(path, data)
        return decode_text(path, data, encoding)

    def hexdigest(self) -> str:
        return self._digest.hexdigest()


def read_text(path: Path, encoding: str = "utf-8") -> str:
    """Read a file, naming the line and column of the first byte that does not decode."""
    return decode_text(path, read_bytes(path), encoding)


def decode_text(path: Path, data: bytes, encoding: str = "utf-8") -> str:
    """Decode bytes read from ``path``, naming the line and column of the first bad byte
    (a UTF-16 or UTF-32 byte order mark names the encoding, whatever ``encoding`` says)."""
    codec = bom_encoding(data[:4]) or codec_of(encoding)
    try:
        text = data.decode(codec)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        utf16 = data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        raise InputError(
            path,
            f"byte 0x{data[exc.start]:02x} is not valid {encoding}",
            line=line,
            column=column,
            hint=binary_document_hint(path, data)
            or (
                "the file starts with a UTF-16 byte order mark but is not valid UTF-16 after "
                "it: it may be damaged; re-save it as UTF-8"
                if utf16
                else "re-save the file as UTF-8, or pass --encoding with the file's real "
                "encoding (for example --encoding cp1252 or --encoding latin-1)"
            ),
        ) from None
    except LookupError:
        raise InputError(path, f"unknown encoding {encoding!r}", hint="use e.g. utf-8") from None
    except UnicodeError as exc:
        raise undecodable(path, encoding, exc) from None
    if "\x00" in text:
        raise _nul_bytes(path, text.count("\n", 0, text.index("\x00")) + 1, data)
    return text


def _nul_bytes(path: Path, line: int, data: bytes | None = None) -> InputError:
    return InputError(
        path,
        "file contains NUL bytes; it looks binary or UTF-16 encoded",
        line=line,
        hint=binary_document_hint(path, data)
        or "convert it to UTF-8 text, or pass --encoding utf-16 (utf-16le for a file "
        "without a byte order mark)",
    )


#: What a file's first bytes say it is: a PDF, or a zip archive (a Word file holds
#: ``word/document.xml``).
PDF_MAGIC = b"%PDF-"
ZIP_MAGIC = b"PK\x03\x04"


def sniff_document(path: Path, data: bytes | None = None) -> str | None:
    """``"pdf"`` or ``"docx"`` when the bytes (``data``, else the file's) are a PDF or a
    Word document whatever the file is named, ``"zip"`` for another zip archive, else
    None. Only for error hints and loaders: it never raises."""
    import zipfile

    try:
        if data is None:
            with path.open("rb") as handle:
                head = handle.read(8)
        else:
            head = data[:8]
        if head.startswith(PDF_MAGIC):
            return "pdf"
        if not head.startswith(ZIP_MAGIC):
            return None
        with zipfile.ZipFile(io.BytesIO(data) if data is not None else path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile, ValueError, RuntimeError):
        return None
    return "docx" if "word/document.xml" in names else "zip"


def binary_document_hint(path: Path, data: bytes | None = None) -> str | None:
    """What to do with a PDF, a Word file or a zip archive read as text (a PDF renamed
    ``.md``, a ``.docx`` renamed ``.txt``, or a document given to ``structrag ingest``):
    no ``--encoding`` reads those. None for other bytes."""
    kind = sniff_document(path, data)
    if kind is None:
        return None
    if kind == "zip":
        return "this is a zip archive, not text: unzip it and pass the files inside it"
    name, suffix = ("PDF", ".pdf") if kind == "pdf" else ("Word", ".docx")
    rename = "" if path.suffix.lower() == suffix else f"rename it to {suffix}; "
    return (
        f"this is a {name} file, not text: {rename}documents are added with "
        "`structrag knowledge add` (`structrag ingest` reads conversations)"
    )


def undecodable(path: Path, encoding: str, exc: UnicodeError) -> InputError:
    """A file the codec refuses as a whole (not at one byte): UTF-16 without a byte order
    mark, say."""
    return InputError(
        path,
        f"cannot read the file as {encoding}: {exc}",
        hint="for UTF-16 without a byte order mark pass --encoding utf-16le (or utf-16be); "
        "for other files, the encoding they were saved in",
    )


def file_lines(text: str) -> list[str]:
    """The lines of a file's text, split at ``\n`` (and ``\r\n`` or ``\r``) only.

    ``str.splitlines`` also splits at U+2028, U+0085 and other characters that JSON allows
    raw inside strings, which would cut a JSON Lines record in two and shift line numbers.
    """
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def too_deep(path: Path, *, line: int | None = None, hint: str | None = None) -> InputError:
    """The error for JSON nested deeper than Python's parser goes (about 1,000 levels);
    ``hint`` says what to do (by default, for a conversation export)."""
    return InputError(
        path,
        "the JSON is nested too deeply to read (arrays or objects inside each other about "
        "1,000 levels deep)",
        line=line,
        hint=hint or "no conversation export nests this deep: the file is damaged or not an export",
    )


def read_json_lines(
    path: Path, what: str = "a JSON object"
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a JSON Lines file with their line numbers; blank lines are skipped.
    Bad bytes, bad JSON and lines that are not objects raise :class:`InputError`."""
    for lineno, line in enumerate(file_lines(read_text(path)), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, json_error(exc.msg), line=lineno, column=exc.colno) from None
        except RecursionError:
            raise too_deep(path, line=lineno) from None
        check_surrogates(path, line, item, line=lineno)
        if not isinstance(item, dict):
            raise InputError(path, f"each line must be {what}", line=lineno)
        yield lineno, item


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def check_surrogates(path: Path, text: str, data: Any, *, line: int | None = None) -> None:
    """Reject JSON whose ``\\uD800``-style escapes leave a lone surrogate, which no UTF-8
    store can hold, naming where the first one is. ``line``: the text is that line."""
    if _SURROGATE_ESCAPE.search(text) is None:
        return
    try:
        json.dumps(data, ensure_ascii=False).encode("utf-8")
        return  # the escapes form valid pairs
    except UnicodeEncodeError:
        pass
    at = 0
    for match in _SURROGATE_ESCAPE.finditer(text):
        code = int(match.group()[2:], 16)
        after = text[match.end() : match.end() + 6]
        if code < 0xDC00 and _SURROGATE_ESCAPE.fullmatch(after) and int(after[2:], 16) >= 0xDC00:
            continue  # a high surrogate with its low one
        before = text[max(match.start() - 6, 0) : match.start()]
        if code >= 0xDC00 and _SURROGATE_ESCAPE.fullmatch(before) and int(before[2:], 16) < 0xDC00:
            continue  # the low half of a pair
        at = match.start()
        break
    row = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    raise InputError(
        path,
        f"the escape {text[at : at + 6]} is half of a UTF-16 surrogate pair, with no other half",
        line=line if line is not None else row,
        column=column,
        hint="the file has a broken \\u escape; fix or remove it",
    )


def parse_json(path: Path, text: str) -> Any:
    """``json.loads`` with errors that name the line and column, and spot truncation."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise too_deep(path) from None
    except json.JSONDecodeError as exc:
        truncated = exc.pos >= len(text.rstrip())
        raise invalid_json(path, exc.msg, exc.lineno, exc.colno, truncated=truncated) from None
    check_surrogates(path, text, data)
    return data


def invalid_json(
    path: Path, message: str, line: int, column: int, *, truncated: bool
) -> InputError:
    """The error for bad JSON at a line and column; ``truncated``: the file ends there.
    A string left open is truncated too: a decoder given the whole text names where the
    string opens, not the end of the file it ran into."""
    truncated = truncated or message.startswith("Unterminated string")
    hint = (
        "the file ends before the JSON value is complete: it looks truncated; "
        "re-export or re-download it"
        if truncated
        else "the file holds more than one JSON value: for JSON Lines (one object a line) "
        "name it .jsonl or pass --format jsonl"
        if message == "Extra data"
        else "fix the JSON at that position (a validator such as `python -m json.tool` "
        "shows the context)"
    )
    return InputError(path, json_error(message), line=line, column=column, hint=hint)


def json_error(message: str) -> str:
    """A JSON decoder's message as ours: its position is given apart, so "Unterminated
    string starting at" loses its dangling "at"."""
    return f"invalid JSON: {message.removesuffix(' at').removesuffix(' starting')}"


def expect(path: Path, value: Any, kind: type | tuple[type, ...], where: str, what: str) -> Any:
    """Check a JSON value's type, naming its JSON path when it is wrong (``true`` and
    ``false`` are not numbers here, though Python's bool is an int)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(
            dict.fromkeys(
                "integer"
                if t is int and float not in kinds
                else _JSON_NAMES.get(t.__name__, t.__name__)
                for t in kinds
            )
        )
        found = _JSON_NAMES.get(type(value).__name__, type(value).__name__)
        raise InputError(path, f"at {where}: {what} must be a JSON {names}, found {found}")
    return value


def json_path(where: str, suffix: str) -> str:
    """``where`` followed by a JSON path ``suffix`` (``.key`` or ``[i]``), readable when
    ``where`` is "the top level" or "line N" rather than a path."""
    if where == "the top level":
        return suffix.removeprefix(".")
    if where.startswith("line ") and "," not in where:
        return f"{where}, {suffix.removeprefix('.')}"
    return where + suffix


_JSON_NAMES = {
    "dict": "object",
    "list": "array",
    "str": "string",
    "int": "number",
    "float": "number",
    "bool": "boolean",
    "NoneType": "null",
}


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` when it is a JSON object, else an empty one (for optional sub-objects)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` when it is a JSON array, else an empty one (for optional lists)."""
    return value if isinstance(value, list) else []


def as_count(value: Any) -> int:
    """A JSON number as a count (0 when it is not one)."""
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def str_list(path: Path, value: Any, where: str) -> tuple[str, ...]:
    """A JSON string or list of strings as a tuple (``None`` is empty)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,) if value.strip() else ()
    expect(path, value, list, where, "the value")
    out = []
    for i, item in enumerate(value):
        expect(path, item, (str, int, float), f"{where}[{i}]", "each item")
        if str(item).strip():
            out.append(str(item).strip())
    return tuple(out)


def clean_text(text: str) -> str:
    """Normalise line endings and trailing spaces; keeps the words exactly. Line by line,
    not by a pattern: ``[ \t]+\n`` took time quadratic in a run of spaces without a line
    break (a million spaces: hours)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if " \n" in text or "\t\n" in text:
        text = "\n".join(line.rstrip(" \t") for line in text.split("\n"))
    return text.strip()


class ConversationBuilder:
    """Turns one conversation's raw messages, in order, into :class:`Message` objects:
    ids (``1``, ``2`` ... where the input has none), ordinals, default recipients (the
    conversation's other addressable ``speakers``) and parsed times."""

    def __init__(
        self,
        conversation: str,
        speakers: Iterable[str],
        *,
        parse_time: Callable[[Any], Any] = parse_datetime,
        default_recipients: bool = True,
    ) -> None:
        self.conversation = conversation
        self.speakers = sorted(speakers)
        self.parse_time = parse_time
        self.default_recipients = default_recipients
        #: Messages kept so far (the next one's ordinal).
        self.count = 0
        self.notes = MessageNotes()

    def next_id(self, raw: RawMessage) -> str:
        return raw.id if raw.id is not None else str(self.count + 1)

    def message(self, raw: RawMessage) -> Message:
        """The next message (call :meth:`keep` when it is kept). A time it cannot read is
        kept as metadata ``time_text`` and noted."""
        recipients = raw.recipients
        if (
            not recipients
            and self.default_recipients
            and raw.addressable
            and raw.speaker
            and len(self.speakers) > 1
        ):
            recipients = tuple(s for s in self.speakers if s != raw.speaker)
        timestamp = self.parse_time(raw.timestamp)
        if raw.timestamp not in (None, "") and timestamp is None:
            self.notes.unparsed(raw.location)
            raw.metadata.setdefault("time_text", str(raw.timestamp))
        return Message(
            conversation=self.conversation,
            id=self.next_id(raw),
            ordinal=self.count,
            speaker=raw.speaker,
            recipients=recipients,
            timestamp=timestamp,
            text=raw.text,
            tags=raw.tags,
            metadata=raw.metadata,
        )

    def keep(self) -> None:
        self.count += 1


@dataclass
class MessageNotes:
    """What the check of a conversation's messages found worth a warning: empty messages,
    huge ones, times not understood, repeated copies. Counts and the first few, so a
    check of millions of messages holds little."""

    empty: list[str] = field(default_factory=list)
    empty_count: int = 0
    unparsed_first: str | None = None
    unparsed_count: int = 0
    notes: list[str] = field(default_factory=list)

    def look(self, path: Path, raw: RawMessage, msg_id: str) -> None:
        """Note an empty or huge message."""
        self.look_size(path, raw.location, msg_id, len(raw.text), not raw.text.strip())

    def look_size(self, path: Path, location: str, msg_id: str, chars: int, blank: bool) -> None:
        """Note an empty or huge message by its length and whether it is blank."""
        if blank:
            self.empty_count += 1
            if len(self.empty) < 6:
                self.empty.append(msg_id)
        elif chars > HUGE_MESSAGE_CHARS:
            self.notes.append(
                f"{path}: {location}: message {msg_id!r} has {chars:,} "
                f"characters; it is stored whole and searchable; knowledge is extracted from "
                f"its first {HUGE_MESSAGE_CHARS:,} characters"
            )

    def unparsed(self, location: str) -> None:
        self.unparsed_count += 1
        if self.unparsed_first is None:
            self.unparsed_first = location

    def repeated(
        self, path: Path, raw: RawMessage, msg_id: str, conversation: str, first: str, same: bool
    ) -> None:
        """A message id seen before (first at ``first``): a copy with the same content is
        noted (and left out by the caller); different content is an error."""
        if same:
            self.notes.append(
                f"{path}: {raw.location}: message id {msg_id!r} repeats {first} "
                "with the same content; the copy was skipped"
            )
            return
        raise InputError(
            path,
            f"at {raw.location}: message id {msg_id!r} is used twice in conversation "
            f"{conversation!r} with different content (first at {first})",
            hint="message ids must be unique within a conversation; give one of them "
            "another id, or put them in different conversations",
        )

    def warnings(self, path: Path) -> list[str]:
        out = list(self.notes)
        if self.empty_count:
            shown = ", ".join(repr(i) for i in self.empty[:5])
            more = " ..." if self.empty_count > 5 else ""
            out.append(
                f"{path}: {self.empty_count} empty message(s) kept without knowledge: {shown}{more}"
            )
        if self.unparsed_count:
            out.append(
                f"{path}: {self.unparsed_count} timestamp(s) not understood (first at "
                f"{self.unparsed_first}); kept as metadata 'time_text', messages left undated"
            )
        return out


def add_events(metadata: dict[str, Any], events: Sequence[dict[str, Any]]) -> None:
    """A conversation's events (what is no message: media, system lines, deleted
    messages), and how many of each kind, in its ``metadata``; nothing when there are
    none."""
    if not events:
        return
    metadata["events"] = list(events)
    counts: dict[str, int] = {}
    for event in events:
        counts[event["kind"]] = counts.get(event["kind"], 0) + 1
    metadata["event_counts"] = counts


def finish(
    path: Path,
    fmt: str,
    conversation: Conversation,
    raws: list[RawMessage],
    *,
    parse_time: Callable[[Any], Any] = parse_datetime,
    warnings: list[str] | None = None,
    default_recipients: bool = True,
    people: Iterable[str] = (),
) -> ParsedSource:
    """Turn raw messages into checked :class:`Message` objects for one conversation.

    Assigns ids (``1``, ``2`` ... where the input has none) and ordinals, drops exact
    duplicates with a warning, rejects conflicting duplicate ids, and notes empty and huge
    messages. A message with no recipients of its own is addressed to the conversation's
    other speakers, leaving out the ones that are not addressable (system prompts, tools),
    and adding ``people`` (members who did not write).
    """
    builder = ConversationBuilder(
        conversation.id,
        {r.speaker for r in raws if r.speaker and r.addressable} | set(people),
        parse_time=parse_time,
        default_recipients=default_recipients,
    )
    notes = builder.notes
    messages: list[Message] = []
    locations: list[str] = []
    seen: dict[str, int] = {}
    for raw in raws:
        message = builder.message(raw)
        msg_id = message.id
        if msg_id in seen:
            first = seen[msg_id]
            same = messages[first].content_hash() == message.content_hash()
            notes.repeated(path, raw, msg_id, conversation.id, locations[first], same)
            continue
        seen[msg_id] = len(messages)
        notes.look(path, raw, msg_id)
        builder.keep()
        messages.append(message)
        locations.append(raw.location)
    return ParsedSource(
        path=str(path),
        format=fmt,
        conversations=[conversation],
        messages=messages,
        locations=locations,
        warnings=[*(warnings or []), *notes.warnings(path)],
    )


Lines = Iterable[tuple[int, str]]


@dataclass
class TextReading:
    """How to read the messages of a one-conversation text format (a transcript, a
    WhatsApp export), as a first reading of its lines settled it (a layout, a day/month
    order). :attr:`raws` may be called more than once, each call reading the lines it is
    given from the start; :attr:`conversation` is built from what the latest complete call
    of :attr:`raws` saw (a header, events) and the number of messages, and raises
    :class:`InputError` when there are none. Messages of these formats have no ids of their
    own: they are numbered in order."""

    raws: Callable[[Lines], Iterator[RawMessage]]
    conversation: Callable[[int], Conversation]
    parse_time: Callable[[Any], Any] = parse_datetime
    warnings: list[str] = field(default_factory=list)
    #: People in the conversation besides its speakers, as the latest complete call of
    #: :attr:`raws` found them (a WhatsApp member who only sent media): recipients too.
    people: Callable[[], Iterable[str]] = lambda: ()


#: A format's first reading: (path, numbered lines, options) -> how to read its messages.
TextPlanner = Callable[[Path, Lines, LoadOptions], TextReading]


def load_text(
    path: Path, fmt: str, text: str, options: LoadOptions, plan: TextPlanner
) -> ParsedSource:
    """A one-conversation text format read whole (see :func:`stream_text`)."""
    lines = list(enumerate(file_lines(text), start=1))
    reading = plan(path, lines, options)
    raws = list(reading.raws(lines))
    conversation = reading.conversation(len(raws))
    return finish(
        path,
        fmt,
        conversation,
        raws,
        parse_time=reading.parse_time,
        warnings=reading.warnings,
        people=reading.people(),
    )


def stream_text(
    path: Path, fmt: str, options: LoadOptions, plan: TextPlanner, *, tries: int = 3
) -> StreamedSource:
    """A one-conversation text format checked without keeping its messages: a first
    reading plans (:data:`TextPlanner`), a second checks every message (speakers, count,
    empty, huge, times not understood), and the messages are read a third time when they
    are written. Both check readings hash the bytes they read; a file that changes between
    them is read again (``tries`` times, then :class:`InputError`)."""
    for _ in range(tries):
        first = HashedLines(path, options.encoding)
        reading = plan(path, first, options)
        for _ in first:  # a planner may stop early; the hash needs every line
            pass
        second = HashedLines(path, options.encoding)
        speakers: set[str] = set()
        notes = MessageNotes()
        count = 0
        for raw in reading.raws(second):
            count += 1
            notes.look(path, raw, str(count))
            if raw.timestamp not in (None, "") and reading.parse_time(raw.timestamp) is None:
                notes.unparsed(raw.location)
            if raw.speaker and raw.addressable:
                speakers.add(raw.speaker)
        for _ in second:
            pass
        speakers.update(reading.people())
        if first.sha256 == second.sha256:
            break
    else:
        raise InputError(
            path,
            f"the file changed each time it was read ({tries} times) while it was checked",
            hint="ingest it again when nothing is writing to it",
        )
    digest = second.sha256
    conversation = reading.conversation(count)

    def messages(lines: HashedLines) -> Iterator[Message]:
        builder = ConversationBuilder(conversation.id, speakers, parse_time=reading.parse_time)
        for raw in reading.raws(lines):
            message = builder.message(raw)
            builder.keep()
            yield message

    def read() -> Iterator[Message]:
        return read_again(path, options.encoding, digest, messages)

    return StreamedSource(
        path=str(path),
        format=fmt,
        conversations=[conversation],
        count=count,
        sha256=digest,
        read=read,
        warnings=[*reading.warnings, *notes.warnings(path)],
    )


def merge_sources(path: Path, fmt: str, parts: list[ParsedSource]) -> ParsedSource:
    """Join the per-conversation results of a file that holds several conversations."""
    ids = [c.id for p in parts for c in p.conversations]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise InputError(
            path,
            f"conversation id(s) {', '.join(map(repr, dupes))} appear more than once",
            hint="give each conversation its own id",
        )
    return ParsedSource(
        path=str(path),
        format=fmt,
        conversations=[c for p in parts for c in p.conversations],
        messages=[m for p in parts for m in p.messages],
        locations=[loc for p in parts for loc in p.locations],
        knowledge=[k for p in parts for k in p.knowledge],
        warnings=[w for p in parts for w in p.warnings],
    )


def check_one_conversation(path: Path, options: LoadOptions, count: int, what: str) -> None:
    """``--conversation`` names one conversation; refuse it for a file that holds several
    whose message ids are only unique within each (merging them could collide)."""
    if options.conversation and count > 1:
        raise InputError(
            path,
            f"--conversation names one conversation but the input holds {count} {what}",
            hint=f"drop --conversation: each of the {what} becomes its own conversation",
        )
