"""Markdown structure: headings (ATX ``##`` and setext underlines) and fenced code blocks.

The text of a Markdown document is its source exactly as written, so every offset maps
straight back into the file; only the structure is parsed, line by line, following the
CommonMark rules that matter for sectioning: a ``#`` inside a fenced code block is not a
heading, a fence that is never closed runs to the end of the document, ``---`` under a
paragraph line is a level-2 heading but after a blank line a rule, and YAML front matter
(``---`` ... ``---`` at the very top) is neither.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from structrag.knowledge.document import Block, Heading

__all__ = ["MarkdownStructure", "parse_markdown"]

_FENCE_OPEN = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_ATX = re.compile(r"^ {0,3}(?P<marks>#{1,6})(?:[ \t]+(?P<title>.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?P<line>=+|-+)[ \t]*$")
_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(?P<title>.+?)[ \t]*$", re.MULTILINE)
# A line that cannot be part of a setext heading's paragraph.
_NOT_PARAGRAPH = re.compile(r"^ {0,3}(?:[-*+][ \t]|\d{1,9}[.)][ \t]|>|<|\|)|^(?: {4}|\t)")


@dataclass(frozen=True)
class MarkdownStructure:
    headings: tuple[Heading, ...]
    blocks: tuple[Block, ...]
    #: ``title:`` from YAML front matter, else the first level-1 heading's title.
    title: str | None


@dataclass(frozen=True)
class _Line:
    start: int
    end: int  # without the line break
    text: str


def _lines(text: str) -> list[_Line]:
    lines: list[_Line] = []
    for match in re.finditer(r"[^\r\n]*(?:\r\n|\r|\n|$)", text):
        if match.start() == len(text) and lines:
            break
        body = match.group().rstrip("\r\n")
        lines.append(_Line(match.start(), match.start() + len(body), body))
    return lines


def _front_matter(lines: list[_Line]) -> tuple[int, str | None]:
    """The number of lines of YAML front matter at the top (0 if none), and its title."""
    if not lines or lines[0].text.rstrip() != "---":
        return 0, None
    for i in range(1, len(lines)):
        if lines[i].text.rstrip() in ("---", "..."):
            body = "\n".join(line.text for line in lines[1:i])
            match = _FRONT_MATTER_TITLE.search(body)
            title = match.group("title").strip("'\"") if match else None
            return i + 1, title or None
    return 0, None


def parse_markdown(text: str) -> MarkdownStructure:
    """Headings and fenced code blocks of a Markdown text, as ranges into it."""
    lines = _lines(text)
    skip, title = _front_matter(lines)
    headings: list[Heading] = []
    blocks: list[Block] = []
    paragraph: list[_Line] = []  # the open paragraph, a setext heading candidate
    i = skip
    while i < len(lines):
        line = lines[i]
        fence = _FENCE_OPEN.match(line.text)
        if fence and not (fence["fence"][0] == "`" and "`" in fence["info"]):
            marker = fence["fence"]
            close = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
            end_index = len(lines) - 1  # an unclosed fence runs to the end
            for j in range(i + 1, len(lines)):
                if close.match(lines[j].text):
                    end_index = j
                    break
            info = fence["info"].strip().split(maxsplit=1)
            blocks.append(Block("code", line.start, lines[end_index].end, info[0] if info else ""))
            paragraph = []
            i = end_index + 1
            continue
        atx = _ATX.match(line.text)
        if atx:
            heading_title = (atx["title"] or "").strip()
            if heading_title:
                headings.append(Heading(len(atx["marks"]), heading_title, line.start, line.end))
            paragraph = []
            i += 1
            continue
        setext = _SETEXT.match(line.text)
        if setext and paragraph:
            level = 1 if setext["line"][0] == "=" else 2
            heading_title = " ".join(p.text.strip() for p in paragraph)
            headings.append(Heading(level, heading_title, paragraph[0].start, line.end))
            paragraph = []
            i += 1
            continue
        if not line.text.strip() or _NOT_PARAGRAPH.match(line.text):
            paragraph = []
        else:
            paragraph.append(line)
        i += 1
    if title is None:
        title = next((h.title for h in headings if h.level == 1), None)
    return MarkdownStructure(tuple(headings), tuple(blocks), title)
