"""What a loaded document is: its full text and the structure that points into it.

Every piece of structure (a page, a heading, a section, a code block or table) is a
character range into :attr:`Document.text`, never a copy of the text, so a fragment, an
extracted entity or an answer's citation can always be mapped back to the exact page and
section path it came from. The records are frozen: a document is read once and then only
looked at.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

from structrag.errors import InputError

__all__ = [
    "Block",
    "BlockKind",
    "Document",
    "DocumentFormat",
    "Heading",
    "Page",
    "Section",
    "damaged",
    "sections_from_headings",
]

DocumentFormat = Literal["pdf", "markdown", "text", "docx", "html", "json"]
BlockKind = Literal["code", "table"]


@dataclass(frozen=True)
class Page:
    """One PDF page: its number as printed by a viewer (1-based) and its text's range."""

    number: int
    start: int
    end: int


@dataclass(frozen=True)
class Heading:
    """A heading: its level (1 = top), its title as shown, and the range of the heading's
    own text (for Markdown the whole ``## Title`` line) in the document text."""

    level: int
    title: str
    start: int
    end: int


@dataclass(frozen=True)
class Section:
    """A stretch of text that belongs under one section path.

    For documents with headings, a section runs from its heading to the next heading
    (its subsections are sections of their own), and ``path`` holds the titles from the
    top heading down, e.g. ``("Install", "From PyPI")``; text before the first heading has
    the empty path. For JSON every string value is a section whose path is its JSON path
    split at the keys, e.g. ``("install", "steps[2]")``.
    """

    path: tuple[str, ...]
    start: int
    end: int


@dataclass(frozen=True)
class Block:
    """A unit that reads badly when cut: a fenced code block, a ``<pre>``, a table.
    The chunker keeps it in one fragment whenever it fits the token budget."""

    kind: BlockKind
    start: int
    end: int
    #: The code block's language (the word after the opening fence), if any.
    info: str = ""


@dataclass(frozen=True)
class Document:
    """A file's text as extracted, with its structure as ranges into ``text``.

    ``sha256`` is the digest of the very bytes that were parsed (read once), so a store
    never pairs one version's text with another version's hash.
    """

    path: str
    format: DocumentFormat
    text: str
    title: str
    sha256: str
    #: PDF only: one entry per page, in order; pages are separated by a blank line.
    pages: tuple[Page, ...] = ()
    #: Headings in document order (Markdown, DOCX, HTML; PDF outline entries).
    headings: tuple[Heading, ...] = ()
    #: Sections in document order, never overlapping; see :class:`Section`.
    sections: tuple[Section, ...] = ()
    #: Code blocks and tables, in document order, never overlapping.
    blocks: tuple[Block, ...] = ()
    #: What could not be read of a document that was still read (a damaged PDF page),
    #: for the add report: ``page 3: its text could not be read (damaged stream)``.
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Loaders build these; a range out of order is a loader bug, caught here rather
        # than as a wrong citation much later.
        size = len(self.text)
        for kind, items in (
            ("page", self.pages),
            ("section", self.sections),
            ("block", self.blocks),
            ("heading", self.headings),
        ):
            previous_end = 0
            for item in items:
                if not 0 <= item.start <= item.end <= size:
                    raise ValueError(f"{kind} range {item.start}:{item.end} outside the text")
                if kind != "heading" and item.start < previous_end:
                    raise ValueError(f"{kind} ranges overlap or are out of order")
                previous_end = item.end

    @cached_property
    def _section_starts(self) -> list[int]:
        return [s.start for s in self.sections]

    @cached_property
    def _page_starts(self) -> list[int]:
        return [p.start for p in self.pages]

    def section_path(self, offset: int) -> tuple[str, ...]:
        """The section path of the character at ``offset`` (empty outside every section)."""
        index = bisect_right(self._section_starts, offset) - 1
        if index >= 0 and offset < self.sections[index].end:
            return self.sections[index].path
        return ()

    def page_at(self, offset: int) -> int | None:
        """The number of the page holding ``offset``; between two pages, the next one.
        ``None`` for documents without pages."""
        if not self.pages:
            return None
        index = bisect_right(self._page_starts, offset) - 1
        if index < 0:
            return self.pages[0].number
        page = self.pages[index]
        if offset >= page.end and index + 1 < len(self.pages):
            return self.pages[index + 1].number
        return page.number


def error_name(exc: BaseException) -> str:
    """An exception's class as a reader would look it up: ``RecursionError``, but
    ``zlib.error`` (a bare ``error`` says nothing)."""
    kind = type(exc)
    module = kind.__module__
    return kind.__qualname__ if module == "builtins" else f"{module}.{kind.__qualname__}"


def damaged(path: str | Path, what: str, exc: Exception, hint: str) -> InputError:
    """The error for a file whose content a reader failed on in a way it does not name
    (a corrupt zip entry, a broken stream, structures nested beyond Python's recursion
    limit): ``damaged: <what> (<the error>)``, the original as its ``__cause__``. Readers
    raise it at their boundary so that one bad file of a batch is skipped with its
    reason, never a traceback that stops the rest."""
    reason = str(exc).strip()
    if len(reason) > 200:
        reason = reason[:200] + "…"
    shown = f"{error_name(exc)}: {reason}" if reason else error_name(exc)
    error = InputError(path, f"damaged: {what} ({shown})", hint=hint)
    error.__cause__ = exc
    return error


def sections_from_headings(text: str, headings: Sequence[Heading]) -> tuple[Section, ...]:
    """Sections for a document with headings: one before the first heading (if it holds
    anything but whitespace), then one per heading up to the next heading.

    A heading's path is the titles of the open headings above it plus its own; a level
    that is skipped (``#`` then ``###``) simply adds no title.
    """
    sections: list[Section] = []
    first = headings[0].start if headings else len(text)
    if text[:first].strip():
        sections.append(Section((), 0, first))
    open_headings: list[Heading] = []
    for i, heading in enumerate(headings):
        while open_headings and open_headings[-1].level >= heading.level:
            open_headings.pop()
        open_headings.append(heading)
        end = headings[i + 1].start if i + 1 < len(headings) else len(text)
        path = tuple(h.title for h in open_headings)
        sections.append(Section(path, heading.start, end))
    return tuple(sections)
