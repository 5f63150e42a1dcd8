"""PDF text with pypdf: the text of every page, each page's range, and the outline.

The pages' texts are joined with a blank line, so a page boundary is also a paragraph
boundary and every offset maps to exactly one page. Headings come from the document
outline (bookmarks), when the PDF has one: each entry is looked for on its target page
and kept only where its title is found, so a heading offset is never a guess.

Refused with an :class:`~structrag.errors.InputError` that says what to do: a file that
is not a PDF, a password-protected PDF, a PDF without extractable text (scanned pages are
images: they need OCR first), and a damaged one that no page can be read of (any error
of the reader, whatever it is, ends here as an ``InputError``). A page that cannot be
read, or whose stream pypdf could only partly decompress, costs that page's text, not
the document's: the document keeps its other pages and says which page lost what in
:attr:`PdfText.warnings`.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from pypdf import PasswordType, PdfReader
from pypdf.errors import DependencyError, FileNotDecryptedError, PyPdfError
from pypdf.generic import Destination

from structrag.errors import InputError
from structrag.knowledge.document import Heading, Page, damaged, error_name

__all__ = ["PdfText", "read_pdf"]

PAGE_SEPARATOR = "\n\n"
_DECRYPT_HINT = (
    "remove the password first, for example `qpdf --decrypt --password=PASSWORD in.pdf "
    "out.pdf`, and load the decrypted copy"
)
_DAMAGED_HINT = "check that the file is a complete PDF; re-export or re-download it"
_PAGE_HINT = "re-export the PDF (for example print it to a new PDF) and try again"


@dataclass(frozen=True)
class PdfText:
    text: str
    pages: tuple[Page, ...]
    headings: tuple[Heading, ...]
    #: The document information's ``/Title``, if set.
    title: str | None
    #: Pages whose text could not be read, or only in part (``page 3: ...``).
    warnings: tuple[str, ...] = ()


def _open(path: Path, data: bytes) -> PdfReader:
    try:
        reader = PdfReader(io.BytesIO(data))
    except DependencyError as exc:
        raise InputError(
            path,
            f"the PDF is encrypted and cannot be opened without an extra library ({exc})",
            hint=_DECRYPT_HINT + ", or `pip install cryptography`",
        ) from exc
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(
            path, f"not a readable PDF ({type(exc).__name__}: {exc})", hint=_DAMAGED_HINT
        ) from exc
    except MemoryError:
        raise
    except Exception as exc:  # anything else pypdf meets in a damaged file
        raise damaged(path, "not a readable PDF", exc, _DAMAGED_HINT) from exc
    if reader.is_encrypted:
        # pypdf has already tried the empty password: a PDF with only an owner password
        # (printing or copying restricted) opens; one that needs a password to view fails.
        try:
            opened = reader.decrypt("") != PasswordType.NOT_DECRYPTED
        except DependencyError as exc:
            raise InputError(
                path,
                f"the PDF is encrypted and cannot be opened without an extra library ({exc})",
                hint=_DECRYPT_HINT + ", or `pip install cryptography`",
            ) from exc
        if not opened:
            raise InputError(
                path, "the PDF is encrypted: it needs a password to open", hint=_DECRYPT_HINT
            )
    return reader


def _flatten(outline: object, level: int = 1) -> Iterator[tuple[int, Destination]]:
    # pypdf's outline is a list of destinations, each optionally followed by a list of
    # its children.
    if isinstance(outline, list):
        for item in outline:
            if isinstance(item, list):
                yield from _flatten(item, level + 1)
            elif isinstance(item, Destination):
                yield level, item


def _outline_headings(reader: PdfReader, text: str, pages: list[Page]) -> tuple[Heading, ...]:
    try:
        entries = [
            (level, str(dest.title or "").strip(), reader.get_destination_page_number(dest))
            for level, dest in _flatten(reader.outline)
        ]
    except MemoryError:
        raise
    except Exception:
        return ()  # a broken outline costs the headings, not the document
    found: list[Heading] = []
    search_from = {page.number: page.start for page in pages}
    for level, title, index in entries:
        if not title or index is None or not 0 <= index < len(pages):
            continue
        page = pages[index]
        words = title.split()
        pattern = re.compile(r"\s+".join(re.escape(w) for w in words))
        match = pattern.search(text, search_from[page.number], page.end)
        if match is None:
            continue
        found.append(Heading(level, " ".join(words), match.start(), match.end()))
        search_from[page.number] = match.end()
    found.sort(key=lambda h: h.start)
    headings: list[Heading] = []
    for heading in found:
        if not headings or heading.start >= headings[-1].end:
            headings.append(heading)
    return tuple(headings)


class _Damage(logging.Handler):
    """Collects what pypdf's stream filters report while a page is read: a stream it
    could only partly decompress (``Error -3 while decompressing data``) has lost text,
    which pypdf logs and goes on without."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted still says something broke
            message = str(record.msg)
        if "decompress" in message.lower():
            self.messages.append(message)

    def take(self) -> list[str]:
        taken, self.messages = self.messages, []
        return taken


@contextmanager
def _quiet_pypdf() -> Iterator[_Damage]:
    # pypdf logs every syntax slip it tolerates in a sloppy PDF as a warning; the text is
    # still usable, so while we read, those stay out of the user's terminal. What its
    # stream filters report (a stream it could not decompress whole) is collected
    # instead: it means text lost, and the add report says so, page by page.
    logger = logging.getLogger("pypdf")
    level = logger.level
    logger.setLevel(logging.ERROR)
    filters = logging.getLogger("pypdf.filters")
    saved = filters.level, filters.propagate
    damage = _Damage()
    filters.setLevel(logging.WARNING)
    filters.propagate = False
    filters.addHandler(damage)
    try:
        yield damage
    finally:
        filters.removeHandler(damage)
        filters.setLevel(saved[0])
        filters.propagate = saved[1]
        logger.setLevel(level)


def read_pdf(path: Path, data: bytes) -> PdfText:
    """The text, pages and outline headings of the PDF in ``data`` (read from ``path``);
    any error of the reader becomes an :class:`InputError` naming the file."""
    with _quiet_pypdf() as damage:
        try:
            return _read(path, data, damage)
        except (InputError, MemoryError):
            raise
        except Exception as exc:
            raise damaged(path, "the PDF cannot be read", exc, _DAMAGED_HINT) from exc


def _read(path: Path, data: bytes, damage: _Damage) -> PdfText:
    reader = _open(path, data)
    try:
        count = len(reader.pages)
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(path, f"cannot read the PDF's pages ({exc})") from exc
    if count == 0:
        raise InputError(path, "the PDF has no pages")
    parts: list[str] = []
    pages: list[Page] = []
    lost: list[tuple[int, str, str]] = []  # page, "could not be read" or so, why
    cause: Exception | None = None
    size = 0
    for number in range(1, count + 1):
        damage.take()
        try:
            page_text = reader.pages[number - 1].extract_text()
        except FileNotDecryptedError as exc:
            raise InputError(
                path, "the PDF is encrypted: it needs a password", hint=_DECRYPT_HINT
            ) from exc
        except MemoryError:
            raise
        except Exception as exc:  # a damaged page: its text is lost, not the others'
            cause = cause or exc
            lost.append((number, "could not be read", _what(exc)))
            page_text = ""
        else:
            streams = damage.take()
            if streams:
                how = "may be incomplete" if page_text.strip() else "could not be read"
                lost.append((number, how, f"damaged stream: {streams[0]}"))
        page_text = page_text.strip()
        if parts:
            parts.append(PAGE_SEPARATOR)
            size += len(PAGE_SEPARATOR)
        pages.append(Page(number, size, size + len(page_text)))
        parts.append(page_text)
        size += len(page_text)
    text = "".join(parts)
    if not text.strip() and lost:
        numbers = [str(number) for number, _, _ in lost]
        which = f"page {numbers[0]}" if len(numbers) == 1 else f"pages {', '.join(numbers)}"
        raise InputError(
            path,
            f"damaged: the text of {which} could not be read ({lost[0][2]})",
            hint=_PAGE_HINT,
        ) from cause
    if not text.strip():
        raise InputError(
            path,
            f"the PDF has {count} page{'s' if count != 1 else ''} but no extractable text: "
            "it looks scanned (pages that are images)",
            hint="run OCR on it first, for example `ocrmypdf in.pdf out.pdf`, and load the result",
        )
    warnings = tuple(
        f"page {number}: its text {how} ({why}); {_PAGE_HINT}" for number, how, why in lost
    )
    title: str | None = None
    try:
        metadata = reader.metadata
        if metadata is not None and metadata.title:
            title = str(metadata.title).strip() or None
    except MemoryError:
        raise
    except Exception:
        title = None
    return PdfText(text, tuple(pages), _outline_headings(reader, text, pages), title, warnings)


def _what(exc: Exception) -> str:
    """An error in a few words: its kind and message, cut short."""
    reason = str(exc).strip()
    if len(reason) > 120:
        reason = reason[:120] + "…"
    return f"{error_name(exc)}: {reason}" if reason else error_name(exc)
