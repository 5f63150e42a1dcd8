"""The answer context: the best knowledge and messages packed into a token budget.

Layout: a few lines of the entities and topics the query hit (at most
``knowledge_share`` of the budget, 3% by default), then the ranked messages rendered
``[8 May 2023] Caroline: text``, then, while budget remains, the messages nearest to the
question by embedding (classic vector RAG). Token counts use tiktoken; the context never
exceeds the budget, and ``message_ids`` lists exactly the messages whose text is in it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from structrag.naming import DOCUMENT_ROOM
from structrag.timeparse import format_date

if TYPE_CHECKING:  # kept out of imports: the CLI checks budgets before it loads an index
    from structrag.models import Message
    from structrag.store.protocols import LineFields, StoredMessage

MESSAGES_HEADER = "Messages:"
#: The largest token budget a context may be asked for: more than any model reads, so a
#: larger number is a mistake. The Python API, the CLI and the server hold to it.
MAX_BUDGET = 1_000_000


def budget_problem(budget: int) -> str | None:
    """What is wrong with a token budget, or None when it is one."""
    if isinstance(budget, bool) or not isinstance(budget, int) or budget < 1 or budget > MAX_BUDGET:
        return f"budget must be from 1 to {MAX_BUDGET:,} tokens, not {budget!r}"
    return None


class TokenCounter(Protocol):
    """Anything that counts tokens in a string."""

    name: str

    def count(self, text: str) -> int: ...


def count_within(counter: TokenCounter, text: str, cap: int | None = None) -> int:
    """The tokens of ``text`` when they are at most ``cap``, else ``cap + 1``. By default
    (``cap`` :data:`MAX_BUDGET`) a line's count: exact for any line that can fit a budget,
    ``MAX_BUDGET + 1`` for one that cannot. A counter with a ``count_within`` method
    (:class:`~structrag.tokens.TiktokenCounter`) counts a long text only as far as that
    takes; any other counts it all."""
    if cap is None:
        cap = MAX_BUDGET
    within = getattr(counter, "count_within", None)
    if within is not None:
        return int(within(text, cap))
    return min(counter.count(text), cap + 1)


def tokens_text(tokens: int) -> str:
    """A line's token count for a note: ``120 tokens``, or ``more than 1,000,000 tokens``
    for a count above :data:`MAX_BUDGET` (see :func:`count_within`: not counted further)."""
    if tokens > MAX_BUDGET:
        return f"more than {MAX_BUDGET:,} tokens"
    return f"{tokens} tokens"


class Ranked(Protocol):
    """What packing needs of a ranked message."""

    mkey: int
    score: float
    source: str


@dataclass
class RankedMessage:
    """A message a ranker found (``source``: ``structured``, ``vector`` ...), with its score."""

    mkey: int
    conversation: str
    id: str
    score: float
    source: str = "structured"


@dataclass(frozen=True)
class Line:
    """A message rendered for the context, with its token count (newline included, as
    :func:`count_within` counts it: ``MAX_BUDGET + 1`` for a line longer than any
    budget)."""

    conversation: str
    id: str
    text: str
    tokens: int


@dataclass
class ContextMessage:
    """A message packed into a context: where it came from, why, what it costs, and the
    line it was rendered as."""

    mkey: int
    conversation: str
    id: str
    score: float
    source: str
    tokens: int
    text: str = ""
    #: Whether only the start of its line fits (the best match, longer than the budget).
    cut: bool = False


@dataclass
class AnswerContext:
    text: str
    tokens: int
    budget: int
    messages: list[ContextMessage] = field(default_factory=list)
    knowledge: list[str] = field(default_factory=list)

    @property
    def message_ids(self) -> list[str]:
        return [m.id for m in self.messages]

    def as_dict(self) -> dict[str, Any]:
        return {"context": self.text, "tokens": self.tokens, "message_ids": self.message_ids}


#: A cut line keeps at least this many tokens, else it is left out.
MIN_CUT_TOKENS = 12
CUT_MARK = " …"


def cut_line(line: str, tokens: int, cost: Callable[[str], int]) -> str | None:
    """The longest start of ``line`` (at a space when there is one), marked as cut, that
    costs at most ``tokens``; None when not even :data:`MIN_CUT_TOKENS` fit, or when the
    start would hold no more than the line's labels (``[mem-1a2b] [8 May 2024] Ann:``)."""
    if tokens < MIN_CUT_TOKENS:
        return None
    # Only a start of the line is searched, one found to cost more than ``tokens`` (grown
    # fourfold from 8 characters a token until one does, or the whole line): a line of
    # megabytes is not counted whole at every step.
    high = min(len(line), 8 * tokens)
    while high < len(line) and cost(line[:high] + CUT_MARK) <= tokens:
        high = min(len(line), 4 * high)
    low = 0  # the longest prefix length that fits lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if cost(line[:middle] + CUT_MARK) <= tokens:
            low = middle
        else:
            high = middle - 1
    start = line[:low]
    if " " in start[len(start) // 2 :]:
        start = start[: start.rindex(" ")]
    start = start.rstrip()
    if cost(start + CUT_MARK) < MIN_CUT_TOKENS // 2 or len(start) <= _text_start(line):
        return None
    return start + CUT_MARK


_LABELS = re.compile(r"(?:\[[^\]\n]*\]\s*|[^\s\[\]]+ (?=\[))*(?:[^\s:\[\]]{1,60}:\s)?")


def _text_start(line: str) -> int:
    """Where a context line's text starts, after its bracketed labels (ids, a room, the
    date) and the speaker."""
    found = _LABELS.match(line)
    return found.end() if found else 0


def render_message(stored: StoredMessage) -> str:
    """``[8 May 2023] Caroline: text`` (no date bracket when the message has none); a
    document fragment is labelled with where it comes from: ``[guide.md §Install] text``."""
    return render_line(stored.message)


def render_line(fields: LineFields | Message) -> str:
    """A message's line (see :func:`render_message`) from the fields it shows."""
    label = (
        fields.metadata.get("label")
        if fields.metadata and fields.conversation.startswith(DOCUMENT_ROOM)
        else None
    )
    if label:
        return f"[{label}] {fields.text}"
    who = f"{fields.speaker}: " if fields.speaker else ""
    when = f"[{format_date(fields.timestamp)}] " if fields.timestamp else ""
    return f"{when}{who}{fields.text}"


def build_context(
    lines: Callable[[Sequence[int]], dict[int, Line]],
    counter: TokenCounter,
    ranked: Sequence[Ranked],
    fill: Sequence[Ranked],
    budget: int,
    *,
    knowledge: Sequence[str] = (),
    knowledge_share: float = 0.03,
    max_misses: int = 64,
    batch: int = 64,
) -> AnswerContext:
    """Pack knowledge lines, ranked messages, then vector fill, within ``budget`` tokens.

    ``lines`` renders messages (by mkey) with their token counts (newline included; see
    :class:`Line`: a count above :data:`MAX_BUDGET` only says the line fits no budget).
    Looking for a message that still fits stops after ``max_misses`` misses in a row.
    The best ranked message, when it alone is longer than what is left, is cut to fit
    (:func:`cut_line`): a long document fragment must not give way to weaker lines.
    """
    parts: list[str] = []
    used = 0
    knowledge_lines: list[str] = []
    share = int(budget * knowledge_share)
    cost: Callable[[str], int] = lambda line: counter.count(line + "\n")  # noqa: E731

    def cost_within(cap: int) -> Callable[[str], int]:
        """:func:`cost` for what is compared with ``cap`` only: counted no further."""
        return lambda line: count_within(counter, line + "\n", cap)

    for line in knowledge:
        if used + cost(line) > share:
            break
        parts.append(line)
        knowledge_lines.append(line)
        used += cost(line)
    if knowledge_lines:
        parts.append(MESSAGES_HEADER)
        used += counter.count(MESSAGES_HEADER + "\n")
    chosen: list[ContextMessage] = []
    seen: set[int] = set()
    for source in (ranked, fill):
        misses = 0
        for start in range(0, len(source), batch):
            if misses >= max_misses or used >= budget:
                break
            part = [r for r in source[start : start + batch] if r.mkey not in seen]
            rendered = lines([r.mkey for r in part])
            for item in part:
                entry = rendered.get(item.mkey)
                if entry is None or not entry.text[_text_start(entry.text) :].strip():
                    continue  # gone, or a message without text (its labels alone)
                cut = False
                if used + entry.tokens > budget and source is ranked and not chosen and not misses:
                    start_of = cut_line(entry.text, budget - used, cost_within(budget - used))
                    if start_of is not None:
                        entry = replace(entry, text=start_of, tokens=cost(start_of))
                        cut = True
                if used + entry.tokens > budget:
                    misses += 1
                    if misses >= max_misses:
                        break
                    continue
                misses = 0
                parts.append(entry.text)
                used += entry.tokens
                seen.add(item.mkey)
                chosen.append(
                    ContextMessage(
                        item.mkey,
                        entry.conversation,
                        entry.id,
                        item.score,
                        item.source,
                        entry.tokens,
                        entry.text,
                        cut,
                    )
                )
    text = "\n".join(parts)
    tokens = counter.count(text)
    # Tokens of a joined text are at most the sum of its lines'; this guards the rare case
    # where a merge across a line break costs one more.
    # Messages were appended last, after the knowledge lines and their header.
    while tokens > budget and parts:
        dropped = parts.pop()
        if chosen:
            chosen.pop()
        elif dropped != MESSAGES_HEADER:
            knowledge_lines.pop()
        text = "\n".join(parts)
        tokens = counter.count(text)
    return AnswerContext(text, tokens, budget, chosen, knowledge_lines)
