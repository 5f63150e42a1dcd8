"""Load a document file into a :class:`~structrag.knowledge.document.Document`, and walk
folders for the files that can be loaded.

The format comes from the extension (``.pdf``, ``.md``/``.markdown``, ``.txt``/``.text``,
``.docx``, ``.html``/``.htm``, ``.json``). A file is read once: the SHA-256 is that of the
very bytes that were parsed. Anything that stops a file from being read (an unknown
extension, an empty file, bytes that do not decode, an encrypted or scanned PDF, a damaged
Word file) raises :class:`~structrag.errors.InputError` naming the file and what to do;
so does any other error a reader meets in a file's content (``damaged: ...``, the
original as its ``__cause__``), so a batch skips such files and carries on.

This module wires the format readers together, including the pypdf and python-docx
adapters, which is why it is an adapter module itself (see ``tests/test_architecture.py``).
"""

from __future__ import annotations

import codecs
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from structrag.errors import InputError, UnknownFormatError, shown_path
from structrag.importers.base import (
    decode_text,
    parse_json,
    read_bytes,
    sha256_hex,
    sniff_document,
    too_deep,
)
from structrag.knowledge.document import (
    Document,
    DocumentFormat,
    Heading,
    damaged,
    sections_from_headings,
)
from structrag.knowledge.docx_loader import read_docx
from structrag.knowledge.html_text import declared_charset, extract_html
from structrag.knowledge.json_text import json_strings
from structrag.knowledge.markdown import parse_markdown
from structrag.knowledge.pdf_loader import read_pdf

__all__ = [
    "SUPPORTED_EXTENSIONS",
    "Skipped",
    "WalkResult",
    "document_format",
    "load_document",
    "walk",
]

#: File extensions (lower case) and the format each is read as.
SUPPORTED_EXTENSIONS: dict[str, DocumentFormat] = {
    ".pdf": "pdf",
    ".md": "markdown",
    ".markdown": "markdown",
    ".txt": "text",
    ".text": "text",
    ".docx": "docx",
    ".html": "html",
    ".htm": "html",
    ".json": "json",
}
#: What to do with files that people often try.
_CONVERT_HINTS = {
    ".doc": "save it as .docx (Word 2007 or later) and load that",
    ".rtf": "save it as .docx or .txt and load that",
    ".odt": "save it as .docx and load that",
    ".pages": "export it as .docx or PDF and load that",
    ".zip": "unzip it first and load the folder",
    ".jsonl": "JSON Lines holds conversations: use `structrag ingest`",
    ".xhtml": "rename it to .html",
}


@dataclass(frozen=True)
class Skipped:
    """A path :func:`walk` passed over, and why."""

    path: Path
    reason: str


@dataclass(frozen=True)
class WalkResult:
    """The loadable files found (in name order, each once), and what was passed over."""

    files: tuple[Path, ...]
    skipped: tuple[Skipped, ...]


def _supported_list() -> str:
    return ", ".join(SUPPORTED_EXTENSIONS)


def document_format(path: str | Path) -> DocumentFormat:
    """The format a file is read as, from its extension."""
    path = Path(path)
    suffix = path.suffix.lower()
    found = SUPPORTED_EXTENSIONS.get(suffix)
    if found is None:
        what = f"unsupported file type {suffix!r}" if suffix else "no file extension"
        hint = _CONVERT_HINTS.get(suffix, "convert it to PDF, Markdown or text")
        if not suffix:
            hint = (
                f"if it is text, rename it to {shown_path(path.name)}.txt "
                f"({shown_path(path.name)}.md for Markdown) and add it again"
            )
        raise UnknownFormatError(
            path, f"{what}: documents are read from {_supported_list()}", hint=hint
        )
    return found


#: What to do with a file that is not valid UTF-8 (or its declared charset).
_ENCODING_HINT = (
    "re-save it as UTF-8, or pass --encoding with its real encoding (for example "
    "--encoding cp1252 or --encoding latin-1): files that are not valid UTF-8 are read in it"
)
_DAMAGED_HINT = "check that it is the file you meant and that it was saved completely"
#: What to do with JSON nested deeper than Python's parser goes.
_DEEP_JSON_HINT = (
    "no document nests this deep: the file is damaged or generated; flatten it (a few "
    "levels of keys) and add it again"
)


def load_document(path: str | Path, *, encoding: str = "utf-8") -> Document:
    """Read one document file. Text formats (Markdown, text, JSON, HTML) are read as
    UTF-8 (with or without a byte order mark) when their bytes are valid UTF-8, an HTML
    page next in the charset it declares, and else in ``encoding``: the fallback for the
    files that are not UTF-8, so one Latin-1 file among UTF-8 ones needs no run of its
    own. PDF and DOCX carry their own. Any error of a reader on the file's content raises
    :class:`InputError` (``damaged: ...``, the original error as its ``__cause__``)."""
    path = Path(path)
    if path.is_dir():
        raise InputError(
            path,
            "is a folder, not a document",
            hint="structrag.knowledge.loaders.walk lists the documents inside a folder",
        )
    fmt = document_format(path)
    data = read_bytes(path)
    if not data:
        raise InputError(path, "the file is empty", hint="check that it was saved completely")
    try:
        return _load(path, fmt, data, encoding)
    except (InputError, MemoryError):
        raise
    except Exception as exc:  # any other failure to read the content: this file only
        raise damaged(path, "the file cannot be read", exc, _DAMAGED_HINT) from exc


def _load(path: Path, fmt: DocumentFormat, data: bytes, encoding: str) -> Document:
    digest = sha256_hex(data)
    stem = shown_path(path.stem)
    # The bytes say what a file is when its name does not: a PDF named .md, a Word file
    # named .txt, is read as what it is (a text file named .pdf or .docx is refused below,
    # with a hint to rename it).
    sniffed = sniff_document(path, data)
    if sniffed in ("pdf", "docx") and sniffed != fmt:
        fmt = "pdf" if sniffed == "pdf" else "docx"
    elif fmt in ("pdf", "docx") and sniffed is None:
        _refuse_text(path, data, fmt)
    if fmt == "pdf":
        pdf = read_pdf(path, data)
        return Document(
            str(path),
            fmt,
            pdf.text,
            pdf.title or _first_heading(pdf.headings) or stem,
            digest,
            pages=pdf.pages,
            headings=pdf.headings,
            sections=sections_from_headings(pdf.text, pdf.headings) if pdf.headings else (),
            warnings=pdf.warnings,
        )
    if fmt == "docx":
        word = read_docx(path, data)
        _require_text(path, word.text, "the document has no text")
        return Document(
            str(path),
            fmt,
            word.text,
            word.title or _first_heading(word.headings) or stem,
            digest,
            headings=word.headings,
            sections=sections_from_headings(word.text, word.headings),
            blocks=word.blocks,
        )
    if fmt == "html":
        page, warnings = _decode_html(path, data, encoding)
        html = extract_html(page)
        _require_text(path, html.text, "the page has no visible text")
        return Document(
            str(path),
            fmt,
            html.text,
            html.title or _first_heading(html.headings) or stem,
            digest,
            headings=html.headings,
            sections=sections_from_headings(html.text, html.headings),
            blocks=html.blocks,
            warnings=tuple(warnings),
        )
    text = _decode(path, data, encoding)
    _require_text(path, text, "the file holds only whitespace")
    if fmt == "markdown":
        markdown = parse_markdown(text)
        return Document(
            str(path),
            fmt,
            text,
            markdown.title or _first_heading(markdown.headings) or stem,
            digest,
            headings=markdown.headings,
            sections=sections_from_headings(text, markdown.headings),
            blocks=markdown.blocks,
        )
    if fmt == "json":
        strings = json_strings(_parse_json(path, text))
        _require_text(
            path,
            strings.text,
            "the JSON holds no values (only nulls, blank strings, empty arrays and objects)",
        )
        return Document(
            str(path), fmt, strings.text, strings.title or stem, digest, sections=strings.sections
        )
    return Document(str(path), fmt, text, stem, digest)


def _is_utf8(encoding: str) -> bool:
    try:
        return codecs.lookup(encoding).name == "utf-8"
    except LookupError:
        return False


def _decode(path: Path, data: bytes, encoding: str) -> str:
    """Text as UTF-8 when its bytes are valid UTF-8 (without NUL bytes), else in
    ``encoding`` (when that is another)."""
    if _is_utf8(encoding):
        return decode_text(path, data, "utf-8")
    try:
        return decode_text(path, data, "utf-8")
    except InputError:
        return decode_text(path, data, encoding)


def _decode_html(path: Path, data: bytes, encoding: str) -> tuple[str, list[str]]:
    """A page's text, and what to warn of: UTF-8 when its bytes are valid UTF-8, else
    the charset it declares when they are valid in it, else ``encoding`` (when that is
    not UTF-8: the ``--encoding`` a user gives wins over a declaration the bytes break).

    Valid UTF-8 with characters beyond ASCII is read as UTF-8 whatever the page declares
    (a browser trusts the declaration; but bytes that happen to form UTF-8 sequences are
    almost never Latin-1 text, while pages saved as UTF-8 under an old template's
    ``charset=ISO-8859-1`` are common), and a warning says so."""
    warnings: list[str] = []
    declared = declared_charset(data)
    fallback = None if _is_utf8(encoding) else encoding
    codec: str | None = None
    if declared is not None:
        try:
            codec = codecs.lookup(declared).name
        except LookupError:
            instead = "UTF-8" + (f", else {fallback} (--encoding)" if fallback else "")
            warnings.append(
                f"the page declares the charset {declared!r}, which is unknown: read as {instead}"
            )
    try:
        text = decode_text(path, data, "utf-8")
    except InputError as exc:
        failed = exc
    else:
        if codec is not None and codec != "utf-8" and not data.isascii():
            warnings.append(
                f"the page declares the charset {declared}, but its bytes are UTF-8: read as UTF-8"
            )
        return text, warnings
    if codec is not None and codec != "utf-8":
        try:
            return decode_text(path, data, codec), warnings
        except InputError as exc:
            failed = exc
    if fallback is not None:
        text = decode_text(path, data, fallback)
        if declared is not None and codec is not None:
            warnings.append(
                f"the page declares the charset {declared}, but its bytes are not in it: "
                f"read as {fallback} (--encoding)"
            )
        return text, warnings
    if declared is None:
        raise failed
    said = (
        f"the page declares {declared}"
        if codec is not None
        else f"the page declares the charset {declared!r}, which is unknown"
    )
    raise InputError(
        path,
        f"{failed.detail} ({said})",
        line=failed.line,
        column=failed.column,
        hint=_ENCODING_HINT if "--encoding" in (failed.hint or "") else failed.hint,
    ) from None


def _parse_json(path: Path, text: str) -> object:
    try:
        return parse_json(path, text)
    except InputError as exc:
        if exc.detail == too_deep(path).detail:
            raise too_deep(path, hint=_DEEP_JSON_HINT) from None
        raise
    except ValueError as exc:  # an integer of more digits than Python converts
        raise InputError(
            path,
            "a number in the JSON has more digits than can be read (more than "
            f"{sys.get_int_max_str_digits():,})",
            hint="write such a number as a string (in quotes), or leave it out",
        ) from exc


def _refuse_text(path: Path, data: bytes, fmt: DocumentFormat) -> None:
    """Refuse a text file named ``.pdf`` or ``.docx`` (saying to rename it); any other
    bytes are left to the PDF or Word reader to judge."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return
    if "\x00" in text or not text.strip():
        return
    name = "a PDF" if fmt == "pdf" else "a Word document"
    head = text.lstrip("\ufeff \t\r\n")
    if head[:1] == "<" and re.search(r"<(html|body|p|div|h[1-6])\b", head[:4096], re.I):
        suffix = ".html"
    elif head[:1] in ("{", "["):
        suffix = ".json"
    elif any(line.lstrip().startswith("#") for line in text.splitlines()[:50]):
        suffix = ".md"
    else:
        suffix = ".txt"
    raise InputError(
        path,
        f"this is a text file, not {name}",
        hint=f"rename it to {suffix} and add it again",
    )


def _first_heading(headings: Iterable[Heading]) -> str | None:
    return next((h.title for h in headings if h.title), None)


def _require_text(path: Path, text: str, message: str) -> None:
    if not text.strip():
        raise InputError(path, message, hint="check that this is the file you meant")


def _hidden(path: Path) -> bool:
    return path.name.startswith(".") or path.name == "__MACOSX"


def walk(paths: Iterable[str | Path]) -> WalkResult:
    """Expand ``paths`` into the document files to load: a folder's files recursively, in
    name order, hidden files and folders (``.name``, ``__MACOSX``) passed over; every file
    once. Files of other types, missing paths and links to folders (not followed, so a
    link loop cannot hang the walk) are returned as skipped, with the reason."""
    files: list[Path] = []
    skipped: list[Skipped] = []
    seen: set[Path] = set()

    def add_file(path: Path) -> None:
        try:
            document_format(path)
        except UnknownFormatError as exc:
            skipped.append(Skipped(path, exc.detail + (f" ({exc.hint})" if exc.hint else "")))
            return
        key = path.resolve()
        if key not in seen:
            seen.add(key)
            files.append(path)

    def visit(folder: Path) -> None:
        try:
            entries = sorted(folder.iterdir(), key=lambda p: p.name)
        except OSError as exc:
            skipped.append(Skipped(folder, f"cannot list the folder: {exc.strerror}"))
            return
        for entry in entries:
            if _hidden(entry):
                continue
            if entry.is_dir():
                if entry.is_symlink():
                    skipped.append(Skipped(entry, "a link to a folder: not followed"))
                else:
                    visit(entry)
            elif entry.is_file():
                add_file(entry)
            else:
                skipped.append(Skipped(entry, "not a regular file"))

    for given in paths:
        path = Path(given)
        if path.is_dir():
            visit(path)
        elif path.is_file():
            add_file(path)
        elif path.exists():
            skipped.append(Skipped(path, "not a regular file"))
        else:
            skipped.append(Skipped(path, "not found"))
    return WalkResult(tuple(files), tuple(skipped))
