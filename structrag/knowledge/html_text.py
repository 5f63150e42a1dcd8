"""The visible text of an HTML page, with its headings, ``<pre>`` blocks and tables.

Built on the standard library's tolerant :class:`html.parser.HTMLParser`: real pages are
rarely valid, and a dependency would buy little for text extraction. Left out are the
parts a reader never sees as content (``<head>`` apart from its ``<title>``, scripts,
styles, templates, ``<noscript>``, SVG, embedded frames), site navigation (``<nav>``),
and anything marked ``hidden``, ``aria-hidden="true"`` or ``display: none``.

Whitespace is collapsed as a browser renders it, except inside ``<pre>``; block elements
end a paragraph (a blank line), list items, table rows and ``<br>`` a line, and a row's
cells are joined with `` | `` so a table reads as lines of columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from html.parser import HTMLParser

from structrag.knowledge.document import Block, Heading

__all__ = ["HtmlText", "declared_charset", "extract_html"]

#: Elements whose content is never shown as page text.
_SKIPPED = frozenset(
    {
        "head",
        "script",
        "style",
        "template",
        "noscript",
        "svg",
        "math",
        "iframe",
        "object",
        "canvas",
        "nav",
        "select",
        "button",
    }
)
_VOID = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    }
)
#: Elements that start and end a paragraph (a blank line around them).
_PARAGRAPH = frozenset(
    {
        "p",
        "article",
        "section",
        "main",
        "header",
        "footer",
        "aside",
        "blockquote",
        "figure",
        "ul",
        "ol",
        "dl",
        "form",
        "fieldset",
        "address",
        "details",
        "hr",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "pre",
        "table",
    }
)
#: Elements that start and end a line.
_LINE = frozenset({"div", "li", "dt", "dd", "tr", "figcaption", "summary", "caption", "legend"})
_HEADING = {f"h{n}": n for n in range(1, 7)}
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.IGNORECASE)
_SPACE = re.compile(r"[ \t\n\r\f\v\xa0\u200b]+")
_META_CHARSET = re.compile(
    rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE
)


@dataclass(frozen=True)
class HtmlText:
    text: str
    headings: tuple[Heading, ...]
    blocks: tuple[Block, ...]
    #: The ``<title>``, collapsed; ``None`` when absent or empty.
    title: str | None


def declared_charset(data: bytes) -> str | None:
    """The charset a page declares in a ``<meta>`` tag near its top, if any."""
    match = _META_CHARSET.search(data[:4096])
    return match.group(1).decode("ascii") if match else None


def _hidden(attrs: list[tuple[str, str | None]]) -> bool:
    for name, value in attrs:
        if name == "hidden":
            return True
        if name == "aria-hidden" and (value or "").strip().lower() == "true":
            return True
        if name == "style" and value and _HIDDEN_STYLE.search(value):
            return True
    return False


class _Extractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.size = 0
        self.headings: list[Heading] = []
        self.blocks: list[Block] = []
        self.title: str | None = None
        # The skipped element being passed over, and how deep inside it we are.
        self._skip_tag: str | None = None
        self._skip_depth = 0
        self._in_title = False
        self._title_parts: list[str] = []
        self._pending_break = 0  # 1: a line break, 2: a blank line, before the next text
        self._pending_space = False
        self._pending_cell = False
        self._heading: tuple[int, int | None] | None = None  # level, start of its text
        self._pre_depth = 0
        self._pre_parts: list[str] = []
        self._table_depth = 0
        self._table_start: int | None = None
        self._row_has_cell = False
        self._last_text_end = 0

    # -- output -----------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        self.parts.append(text)
        self.size += len(text)

    def _flush(self) -> None:
        """Write the separator owed before the next piece of text."""
        if self.size:
            if self._pending_break:
                self._emit("\n" * self._pending_break)
            elif self._pending_cell:
                self._emit(" | ")
            elif self._pending_space:
                self._emit(" ")
        self._pending_break = 0
        self._pending_space = False
        self._pending_cell = False

    def _start_of_text(self) -> None:
        if self._heading is not None and self._heading[1] is None:
            self._heading = (self._heading[0], self.size)
        if self._table_depth and self._table_start is None:
            self._table_start = self.size

    def _break(self, strength: int) -> None:
        self._pending_break = max(self._pending_break, strength)

    # -- parser events ----------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth += 1
            elif tag == "body" and self._skip_tag == "head":  # </head> left out
                self._skip_tag, self._skip_depth = None, 0
            elif tag == "title" and self._skip_tag == "head":
                self._in_title = True
            return
        if tag == "title":
            self._in_title = True
            return
        if tag not in _VOID and (tag in _SKIPPED or _hidden(attrs)):
            self._skip_tag, self._skip_depth = tag, 1
            return
        self._open(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip_tag is None and not _hidden(attrs):
            self._open(tag)
            if tag not in _VOID:
                self._close(tag)

    def _open(self, tag: str) -> None:
        if tag == "br":
            self._break(1)
        elif tag in _PARAGRAPH:
            self._break(2)
        elif tag in _LINE:
            self._break(1)
        if tag in _HEADING:
            self._heading = (_HEADING[tag], None)
        elif tag == "pre":
            self._pre_depth += 1
        elif tag == "table":
            if self._table_depth == 0:
                self._table_start = None
            self._table_depth += 1
        elif tag == "tr":
            self._row_has_cell = False
        elif tag in ("td", "th"):
            if self._row_has_cell:
                self._pending_cell = True
            self._row_has_cell = True

    def handle_endtag(self, tag: str) -> None:
        if self._skip_tag is not None:
            if tag == self._skip_tag:
                self._skip_depth -= 1
                if self._skip_depth == 0:
                    self._skip_tag = None
            elif tag == "title":
                self._end_title()
            return
        if tag == "title":
            self._end_title()
            return
        self._close(tag)

    def _end_title(self) -> None:
        if self._in_title and self.title is None:
            title = _SPACE.sub(" ", "".join(self._title_parts)).strip()
            self.title = title or None
        self._in_title = False
        self._title_parts = []

    def _close(self, tag: str) -> None:
        if tag in _HEADING and self._heading is not None:
            self._end_heading()
        elif tag == "pre" and self._pre_depth:
            self._pre_depth -= 1
            if self._pre_depth == 0:
                self._end_pre()
        elif tag == "table" and self._table_depth:
            self._table_depth -= 1
            if self._table_depth == 0:
                self._end_table()
        if tag in _PARAGRAPH:
            self._break(2)
        elif tag in _LINE:
            self._break(1)

    def _end_table(self) -> None:
        if self._table_start is not None and self._last_text_end > self._table_start:
            self.blocks.append(Block("table", self._table_start, self._last_text_end))
        self._table_start = None

    def _end_heading(self) -> None:
        if self._heading is None:
            return
        level, start = self._heading
        self._heading = None
        if start is not None and self._last_text_end > start:
            # the title is filled in from the final text (see extract_html)
            self.headings.append(Heading(level, "", start, self._last_text_end))

    def finish(self) -> str:
        """Close what the page left open; the text."""
        self.close()
        if self._pre_depth:
            self._pre_depth = 0
            self._end_pre()
        if self._heading is not None:
            self._end_heading()
        if self._table_depth:
            self._end_table()
        return "".join(self.parts)

    def _end_pre(self) -> None:
        # As browsers do, drop the line break right after <pre>; keep the indentation of
        # the first line, and everything else exactly as written.
        raw = "".join(self._pre_parts)
        self._pre_parts = []
        raw = raw[2:] if raw.startswith("\r\n") else raw.removeprefix("\n")
        body = raw.rstrip()
        first = len(body) - len(body.lstrip("\r\n"))
        body = body[first:]
        if not body.strip():
            return
        self._break(2)
        self._flush()
        self._start_of_text()
        start = self.size
        self._emit(body)
        self._last_text_end = self.size
        if not self._table_depth:
            self.blocks.append(Block("code", start, self.size))
        self._break(2)

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self._title_parts.append(data)
            return
        if self._skip_tag is not None:
            return
        if self._pre_depth:
            self._pre_parts.append(data)
            return
        words = _SPACE.split(data)
        if data[:1] and _SPACE.match(data[:1]):
            self._pending_space = True
        first = True
        for word in words:
            if not word:
                continue
            if not first:
                self._pending_space = True
            self._flush()
            self._start_of_text()
            self._emit(word)
            self._last_text_end = self.size
            first = False
        if data and _SPACE.match(data[-1]):
            self._pending_space = True


def extract_html(html: str) -> HtmlText:
    """The visible text of ``html`` and its structure (see the module docstring)."""
    parser = _Extractor()
    parser.feed(html)
    text = parser.finish()
    headings = tuple(
        Heading(h.level, _SPACE.sub(" ", text[h.start : h.end]).strip(), h.start, h.end)
        for h in parser.headings
    )
    return HtmlText(text, headings, tuple(parser.blocks), parser.title)
