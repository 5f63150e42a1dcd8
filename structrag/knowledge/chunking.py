"""Cut a document into fragments that each fit a token budget, along its structure.

Rules, in order:

1. **Sections first.** The document's sections form a tree (a heading's subsections
   under it; JSON values under their keys). A subtree that fits ``max_tokens`` becomes
   one fragment; consecutive sibling subtrees that fit together share one. A subtree too
   big to fit is cut into its own parts (its heading's text, then each subsection), and
   never shares a fragment with its siblings. A heading with no text of its own (``##
   Install`` directly followed by ``### From PyPI``) goes with the part after it rather
   than becoming a fragment of one line.
2. **Then paragraphs, sentences, lines, words.** A section's own text that does not fit
   is cut at blank lines; a paragraph still too big at sentence ends, then at line
   breaks, then between words, and a single "word" longer than the budget (a URL, a hash)
   between characters. Pieces that fit are packed greedily, in order, up to the budget,
   and a piece that had to be cut at a finer level never shares a fragment with its
   neighbours, so fragments end at the coarsest boundary that works.
3. **Code blocks and tables stay whole** whenever they fit ``max_tokens``; one that does
   not is cut at line breaks first.
4. **Overlap only inside a section.** When a section's text is cut into several
   fragments, each one after the first starts with the last words of the one before, as
   many as fit in ``overlap`` tokens (so the overlap is at most ``overlap`` tokens, and
   the fragment still at most ``max_tokens``). Fragments of different sections never
   overlap: no fragment reaches back across a heading.

Every fragment is exactly ``document.text[start:end]``, starts and ends with a
non-whitespace character, has at most ``max_tokens`` tokens as the given counter counts
them, and every non-whitespace character of the document is in at least one fragment.
Its section path is the deepest path holding all of it. The result depends only on the
document, the settings and the counter.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal

from structrag.errors import ConfigError
from structrag.knowledge.document import Document, Section
from structrag.query.context import TokenCounter

__all__ = ["MIN_MAX_TOKENS", "Fragment", "chunk"]

#: The smallest budget accepted: one character can take 4 tokens (a UTF-8 byte each), and
#: a budget with room for overlap must still hold one.
MIN_MAX_TOKENS = 8

_Level = Literal["paragraph", "sentence", "line", "word", "char"]
_NEXT: dict[str, _Level] = {"sentence": "line", "line": "word", "word": "char"}

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’»)\]]*(?=\s)|[。！？]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SPACE = re.compile(r"\s+")
_WORD_START = re.compile(r"(?<!\S)\S")
# Characters per token are rarely above 10; windows of this many characters per token
# bound how much text a search has to tokenize, never what it can find.
_CHARS_PER_TOKEN_CAP = 32


@dataclass(frozen=True)
class Fragment:
    """A piece of a document: ``text == document.text[start:end]``."""

    index: int
    start: int
    end: int
    text: str
    tokens: int
    #: The deepest section path holding the whole fragment (``()`` at the top level).
    section: tuple[str, ...]
    #: PDF: the page the fragment starts on and the page it ends on; else ``None``.
    page: int | None
    last_page: int | None


@dataclass
class _Leaf:
    """A section's own text (for a heading: the heading and the text up to the next one)."""

    path: tuple[str, ...]
    start: int
    end: int
    heading_only: bool


@dataclass
class _Node:
    """A section with its subsections (or, for JSON, a key with the values under it)."""

    path: tuple[str, ...]
    items: list[_Leaf | _Node]

    @property
    def start(self) -> int:
        return self.items[0].start

    @property
    def end(self) -> int:
        return self.items[-1].end


def chunk(
    document: Document,
    *,
    max_tokens: int = 512,
    overlap: int = 20,
    counter: TokenCounter,
) -> list[Fragment]:
    """Cut ``document`` into fragments of at most ``max_tokens`` tokens (see the module
    docstring for the rules). ``counter`` counts tokens, normally
    ``structrag.tokens.get_counter("cl100k_base")``; it is a parameter so this module stays
    free of tokenizer libraries."""
    if max_tokens < MIN_MAX_TOKENS:
        raise ConfigError(
            f"max_tokens must be at least {MIN_MAX_TOKENS}, got {max_tokens}",
            hint="fragments of a few hundred tokens (the default is 512) suit retrieval",
        )
    if not 0 <= overlap <= max_tokens // 2:
        raise ConfigError(
            f"overlap must be between 0 and half of max_tokens ({max_tokens // 2}), got {overlap}",
            hint="an overlap of 5-10% of max_tokens is usual (the default is 20)",
        )
    return _Chunker(document, max_tokens, overlap, counter).run()


class _Chunker:
    def __init__(
        self, document: Document, max_tokens: int, overlap: int, counter: TokenCounter
    ) -> None:
        self.document = document
        self.text = document.text
        self.max = max_tokens
        self.overlap = overlap
        self.counter = counter
        self._counts: dict[tuple[int, int], int] = {}
        self._gaps: dict[str, int] = {}
        self.blocks = document.blocks
        self._block_starts = [b.start for b in document.blocks]
        self.sections = document.sections
        self._section_starts = [s.start for s in document.sections]
        self._heading_ends = {h.start: h.end for h in document.headings}

    # -- helpers ----------------------------------------------------------------------

    def count(self, start: int, end: int) -> int:
        key = (start, end)
        found = self._counts.get(key)
        if found is None:
            found = self.counter.count(self.text[start:end])
            self._counts[key] = found
        return found

    def trim(self, start: int, end: int) -> tuple[int, int]:
        text = self.text
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        return start, end

    # -- the section tree -------------------------------------------------------------

    def _leaves(self) -> list[_Leaf]:
        """The sections as leaves, with any text outside every section as top-level
        leaves, so that nothing is lost."""
        leaves: list[_Leaf] = []
        position = 0

        def gap(start: int, end: int) -> None:
            s, e = self.trim(start, end)
            if s < e:
                leaves.append(_Leaf((), s, e, False))

        for section in self.sections:
            gap(position, section.start)
            s, e = self.trim(section.start, section.end)
            if s < e:
                heading_end = self._heading_ends.get(section.start)
                heading_only = heading_end is not None and heading_end >= e
                leaves.append(_Leaf(section.path, s, e, heading_only))
            position = max(position, section.end)
        gap(position, len(self.text))
        return leaves

    def _tree(self) -> _Node:
        root = _Node((), [])
        stack = [root]
        for leaf in self._leaves():
            while stack[-1].path != leaf.path[: len(stack[-1].path)]:
                stack.pop()
            while len(stack[-1].path) < len(leaf.path):
                child = _Node(leaf.path[: len(stack[-1].path) + 1], [])
                stack[-1].items.append(child)
                stack.append(child)
            stack[-1].items.append(leaf)
        return root

    # -- cutting ----------------------------------------------------------------------

    def run(self) -> list[Fragment]:
        root = self._tree()
        ranges = self._node(root, None) if root.items else []
        fragments: list[Fragment] = []
        for index, (start, end) in enumerate(ranges):
            fragments.append(
                Fragment(
                    index=index,
                    start=start,
                    end=end,
                    text=self.text[start:end],
                    tokens=self.count(start, end),
                    section=self._path(start, end),
                    page=self.document.page_at(start),
                    last_page=self.document.page_at(end - 1),
                )
            )
        return fragments

    def _node(self, node: _Node, lead: int | None) -> list[tuple[int, int]]:
        """Fragments for a subtree too big for one (or the root); ``lead`` extends the
        first one back over headings without text of their own."""
        units: list[tuple[_Leaf | _Node, int]] = []
        pending = lead
        for i, item in enumerate(node.items):
            start = item.start if pending is None else min(pending, item.start)
            if isinstance(item, _Leaf) and item.heading_only and i + 1 < len(node.items):
                pending = start
                continue
            pending = None
            units.append((item, start))
        out: list[tuple[int, int]] = []
        group_start: int | None = None
        group_end = 0
        for item, start in units:
            if self.count(start, item.end) > self.max:
                if group_start is not None:
                    out.append((group_start, group_end))
                    group_start = None
                out.extend(self._unit(item, start))
            elif group_start is not None and self.count(group_start, item.end) <= self.max:
                group_end = item.end
            else:
                if group_start is not None:
                    out.append((group_start, group_end))
                group_start, group_end = start, item.end
        if group_start is not None:
            out.append((group_start, group_end))
        return out

    def _unit(self, item: _Leaf | _Node, start: int) -> list[tuple[int, int]]:
        if isinstance(item, _Node):
            return self._node(item, start if start < item.start else None)
        budget = self.max - self.overlap
        ranges = self._leaf(item, start, budget)
        if self.overlap:
            # the overlap stays in the section's own text, never reaching back into the
            # headings that open its first fragment
            ranges = self._with_overlap(
                ranges, floor=self._heading_ends.get(item.start, item.start)
            )
        return ranges

    def _leaf(self, leaf: _Leaf, start: int, budget: int) -> list[tuple[int, int]]:
        """A section's text cut to ``budget``, its heading (and any text-less headings
        before it, from ``start``) kept with the text that follows rather than alone."""
        head_end = self._heading_ends.get(leaf.start, leaf.start)
        if head_end <= start or self.count(start, head_end) > budget // 2:
            return self._split(start, leaf.end, "paragraph", budget)
        body = self._split(head_end, leaf.end, "paragraph", budget)
        if not body:
            return [self.trim(start, head_end)]
        if self.count(start, body[0][1]) <= budget:
            return [(start, body[0][1]), *body[1:]]
        # make room for the headings in the first piece of the text
        first = self._split(*body[0], "paragraph", budget - self.count(start, head_end))
        if first and self.count(start, first[0][1]) <= budget:
            return [(start, first[0][1]), *first[1:], *body[1:]]
        return [self.trim(start, head_end), *body]

    def _segment(self, start: int, end: int, level: _Level) -> list[tuple[int, int, _Level, bool]]:
        """The pieces of ``[start, end)`` at ``level``: (start, end, the level to cut a
        piece at if it is too big, whether it is a block to keep whole)."""
        pieces: list[tuple[int, int, _Level, bool]] = []
        if level == "paragraph":
            position = start
            first = bisect_right(self._block_starts, start) - 1
            for block in self.blocks[max(first, 0) :]:
                if block.start >= end:
                    break
                b_start, b_end = max(block.start, start), min(block.end, end)
                if b_end <= position:
                    continue
                b_start = max(b_start, position)
                for s, e in self._between(_PARAGRAPH_BREAK, position, b_start):
                    pieces.append((s, e, "sentence", False))
                s, e = self.trim(b_start, b_end)
                if s < e:
                    pieces.append((s, e, "line", True))
                position = b_end
            for s, e in self._between(_PARAGRAPH_BREAK, position, end):
                pieces.append((s, e, "sentence", False))
        elif level == "sentence":
            cuts = [m.end() for m in _SENTENCE_END.finditer(self.text, start, end)]
            position = start
            for cut in [*cuts, end]:
                s, e = self.trim(position, cut)
                if s < e:
                    pieces.append((s, e, "line", False))
                position = cut
        else:
            pattern = _LINE_BREAK if level == "line" else _SPACE
            pieces = [(s, e, _NEXT[level], False) for s, e in self._between(pattern, start, end)]
        return pieces

    def _between(self, pattern: re.Pattern[str], start: int, end: int) -> list[tuple[int, int]]:
        out: list[tuple[int, int]] = []
        position = start
        for match in pattern.finditer(self.text, start, end):
            s, e = self.trim(position, match.start())
            if s < e:
                out.append((s, e))
            position = match.end()
        s, e = self.trim(position, end)
        if s < e:
            out.append((s, e))
        return out

    def _split(self, start: int, end: int, level: _Level, budget: int) -> list[tuple[int, int]]:
        """``[start, end)`` cut at ``level`` (and finer where needed) into pieces of at
        most ``budget`` tokens; a block may take up to ``max_tokens`` alone."""
        start, end = self.trim(start, end)
        if start >= end:
            return []
        if self.count(start, end) <= budget:
            return [(start, end)]
        if level == "char":
            return self._hard_cut(start, end, budget)
        out: list[tuple[int, int]] = []
        run: list[tuple[int, int, int]] = []
        for s, e, finer, whole in self._segment(start, end, level):
            tokens = self.count(s, e)
            if tokens <= budget:
                run.append((s, e, tokens))
                continue
            out.extend(self._pack(run, budget))
            run = []
            if whole and tokens <= self.max:
                out.append((s, e))
            else:
                out.extend(self._split(s, e, finer, budget))
        out.extend(self._pack(run, budget))
        return out

    def _pack(self, pieces: list[tuple[int, int, int]], budget: int) -> list[tuple[int, int]]:
        """Consecutive pieces (each within ``budget``) packed greedily into ranges of at
        most ``budget`` tokens: each range takes as many pieces as fit. Token counts are
        nearly additive, so a sum picks a candidate (the pieces' counts, and the tokens of
        the whitespace between them beyond the one a word takes along) and exact counts
        find the boundary near it: a step at a time, then by doubling and halving, so a
        bad guess (much whitespace) costs a few counts of one range, not one per piece."""
        out: list[tuple[int, int]] = []
        i, n = 0, len(pieces)
        while i < n:
            j, estimate = i + 1, pieces[i][2]
            while j < n:
                more = pieces[j][2] + self._gap(pieces[j - 1][1], pieces[j][0])
                if estimate + more > budget:
                    break
                estimate += more
                j += 1
            j = self._fit(pieces, i, j, budget)
            out.append((pieces[i][0], pieces[j - 1][1]))
            i = j
        return out

    def _fit(self, pieces: list[tuple[int, int, int]], i: int, guess: int, budget: int) -> int:
        """The end (exclusive) of the longest run of pieces from ``i`` that fits
        ``budget``, searched from ``guess``: pieces ``i`` to ``j - 1`` fit for ``j`` up to
        the boundary and not beyond (counts grow with the text), and one piece always
        fits."""
        start = pieces[i][0]

        def fits(j: int) -> bool:
            return self.count(start, pieces[j - 1][1]) <= budget

        n = len(pieces)
        low, high = i + 1, n + 1  # low fits; high does not (n + 1: past the end)
        if guess > low and not fits(guess):
            high, step = guess, 1
            while high - step > low and not fits(high - step):
                high, step = high - step, step * 2
            low = max(low, high - step)
        else:
            low, step = guess, 1
            while low + step <= n and fits(low + step):
                low, step = low + step, step * 2
            high = min(high, low + step)
        while high - low > 1:
            middle = (low + high) // 2
            if fits(middle):
                low = middle
            else:
                high = middle
        return low

    def _gap(self, end: int, start: int) -> int:
        """The tokens of the whitespace between two pieces beyond the one the next
        piece's word takes along (a space or a line break costs none)."""
        if start - end <= 1:
            return 0
        gap = self.text[end:start]
        found = self._gaps.get(gap)
        if found is None:
            found = max(self.counter.count(gap) - 1, 0)
            self._gaps[gap] = found
        return found

    def _hard_cut(self, start: int, end: int, budget: int) -> list[tuple[int, int]]:
        """Text without spaces, cut between characters into the longest pieces that fit."""
        out: list[tuple[int, int]] = []
        position = start
        while position < end:
            high = min(end, position + budget * _CHARS_PER_TOKEN_CAP)
            if self.count(position, high) <= budget:
                cut = high
            else:
                low = position + 1  # one character always fits: at most 4 tokens
                while high - low > 1:
                    middle = (low + high) // 2
                    if self.count(position, middle) <= budget:
                        low = middle
                    else:
                        high = middle
                cut = low
            out.append((position, cut))
            position = cut
        return out

    def _with_overlap(self, ranges: list[tuple[int, int]], floor: int) -> list[tuple[int, int]]:
        """Start each range after the first with the last words of the one before it, as
        many as fit in ``overlap`` tokens without the range passing ``max_tokens``; no
        range starts before ``floor``."""
        out = ranges[:1]
        for (prev_start, prev_end), (start, end) in pairwise(ranges):
            window = max(prev_start + 1, floor, prev_end - self.overlap * _CHARS_PER_TOKEN_CAP)
            words = [m.start() for m in _WORD_START.finditer(self.text, window, prev_end)]
            chosen = start
            for word in reversed(words):
                if self.count(word, prev_end) > self.overlap:
                    break
                chosen = word
            later = [w for w in words if w > chosen]
            while chosen < start and self.count(chosen, end) > self.max:
                chosen = later.pop(0) if later else start
            out.append((chosen, end))
        return out

    # -- labels -----------------------------------------------------------------------

    def _path(self, start: int, end: int) -> tuple[str, ...]:
        """The longest path shared by every section the range touches; ``()`` when any of
        its text lies outside every section."""
        sections = self.sections
        if not sections:
            return ()
        first = max(bisect_right(self._section_starts, start) - 1, 0)
        last = bisect_left(self._section_starts, end)
        touched: list[Section] = [s for s in sections[first:last] if s.end > start]
        if not touched:
            return ()
        position = start
        for section in touched:
            if self.text[position : section.start].strip():
                return ()
            position = max(position, section.end)
        if self.text[position:end].strip():
            return ()
        path = touched[0].path
        for section in touched[1:]:
            shared = 0
            for a, b in zip(path, section.path, strict=False):
                if a != b:
                    break
                shared += 1
            path = path[:shared]
        return path
