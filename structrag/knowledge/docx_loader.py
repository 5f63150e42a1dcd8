"""Word (``.docx``) text with python-docx: paragraphs, headings and tables, in body order.

Each non-empty paragraph becomes a paragraph of the text (joined with blank lines). A
paragraph whose style is a heading style (``Heading 1`` .. ``Heading 9``, or a custom
style based on one) is a heading of that level, which gives every later offset its
section path. A table becomes one line per row with its cells joined by `` | `` (a cell
merged across columns is written once) and is recorded as a block the chunker keeps
whole. Headers, footers, footnotes, comments and text boxes are not read.

A file that cannot be read raises :class:`~structrag.errors.InputError`: one that is no
Word document says so, and any other error of the reader (a corrupt compressed entry, a
zip feature it does not support, XML nested beyond the recursion limit) says the file
is damaged.
"""

from __future__ import annotations

import io
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import docx
from docx.opc.exceptions import PackageNotFoundError
from docx.styles.style import BaseStyle
from docx.table import Table
from docx.text.paragraph import Paragraph

from structrag.errors import InputError
from structrag.knowledge.document import Block, Heading, damaged

__all__ = ["DocxText", "read_docx"]

PARAGRAPH_SEPARATOR = "\n\n"
_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


@dataclass(frozen=True)
class DocxText:
    text: str
    headings: tuple[Heading, ...]
    blocks: tuple[Block, ...]
    #: The core properties' title, else the first paragraph in the ``Title`` style.
    title: str | None


def _style_names(style: BaseStyle | None) -> list[str]:
    names: list[str] = []
    seen = 0
    while style is not None and seen < 10:  # base styles can, in a broken file, loop
        names.append(style.name or "")
        style = getattr(style, "base_style", None)
        seen += 1
    return names


def _heading_level(paragraph: Paragraph) -> int | None:
    for name in _style_names(paragraph.style):
        match = _HEADING_STYLE.match(name.strip())
        if match:
            return int(match.group(1))
    return None


def _table_text(table: Table) -> str:
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell appears once per column it spans
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


_DAMAGED_HINT = (
    "the file is damaged: open it in Word (or LibreOffice) and save it again, or re-download it"
)


def read_docx(path: Path, data: bytes) -> DocxText:
    """The text, headings and tables of the Word document in ``data``; any error of the
    reader becomes an :class:`InputError` naming the file."""
    try:
        return _read(path, data)
    except (InputError, MemoryError):
        raise
    except Exception as exc:  # zlib.error, NotImplementedError, RecursionError, ...
        raise damaged(path, "the Word document cannot be read", exc, _DAMAGED_HINT) from exc


def _a_damaged_docx(error: Exception, data: bytes) -> bool:
    """Whether a file the reader failed on is a Word document that is damaged: a zip that
    does not open (cut short), or one that holds a Word document's parts, one of them
    broken; not a whole zip of another kind (an .odt renamed), nor no zip at all."""
    if not data.startswith(b"PK\x03\x04"):
        return False
    if isinstance(error, zipfile.BadZipFile):
        return True
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            names = set(archive.namelist())
    except (zipfile.BadZipFile, OSError, ValueError):
        return True
    return bool(names & {"word/document.xml", "[Content_Types].xml"})


def _read(path: Path, data: bytes) -> DocxText:
    try:
        document = docx.Document(io.BytesIO(data))
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError, SyntaxError) as exc:
        # (lxml's XMLSyntaxError, for a damaged part inside the zip, is a SyntaxError)
        if _a_damaged_docx(exc, data):
            raise damaged(path, "the Word document cannot be read", exc, _DAMAGED_HINT) from exc
        raise InputError(
            path,
            f"not a readable Word document ({type(exc).__name__}: {exc})",
            hint="save it as .docx (Word 2007 or later); older .doc files are not read",
        ) from exc
    parts: list[str] = []
    headings: list[Heading] = []
    blocks: list[Block] = []
    title_paragraph: str | None = None
    size = 0
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            body = item.text.strip()
            kind: str | None = None
            level = _heading_level(item) if body else None
            if (
                body
                and title_paragraph is None
                and "title" in (n.lower() for n in _style_names(item.style))
            ):
                title_paragraph = " ".join(body.split())
        else:
            body = _table_text(item)
            kind = "table"
            level = None
        if not body:
            continue
        if parts:
            parts.append(PARAGRAPH_SEPARATOR)
            size += len(PARAGRAPH_SEPARATOR)
        start, size = size, size + len(body)
        parts.append(body)
        if level is not None:
            headings.append(Heading(level, " ".join(body.split()), start, size))
        if kind == "table":
            blocks.append(Block("table", start, size))
    title = (document.core_properties.title or "").strip() or title_paragraph
    return DocxText("".join(parts), tuple(headings), tuple(blocks), title)
