"""The context window: what an agent puts in its prompt, never over a token budget.

Sections, each with its share of the budget (defaults: 50% history, 30% retrieval, 20%
profile and facts; configurable), a share a section does not use passed on to the
others, and every line citing the memory it comes from:

* **history**: the room's latest summary, then its most recent messages (oldest first);
* **retrieval**: the agent's memories (older ones of the room too, and other rooms') and
  knowledge (its own and shared) that answer the message, by structured and hybrid
  search, without what history shows;
* **profile**: what the agent knows about the user, the relevant facts and the room's
  observations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from structrag.errors import MemoryInputError
from structrag.query.context import TokenCounter, cut_line

#: A section's candidate lines, best first: (line, memory id).
Lines = list[tuple[str, str]]
DEFAULT_SHARES = {"history": 0.5, "retrieval": 0.3, "profile": 0.2}
#: The order sections appear in (and are offered leftover budget in).
ORDER = ("history", "retrieval", "profile")
TITLES = {
    "history": "Conversation so far",
    "retrieval": "Relevant memories and knowledge",
    "profile": "About the user",
}


@dataclass
class Section:
    """One part of a context window."""

    name: str
    budget: int
    lines: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    tokens: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "budget": self.budget,
            "tokens": self.tokens,
            "lines": self.lines,
            "ids": self.ids,
        }


@dataclass
class ContextWindow:
    """The sections an agent puts in its prompt, and their text (at most ``budget``
    tokens, counted as ``tokens``)."""

    message: str
    room: str
    budget: int
    sections: list[Section]
    text: str
    tokens: int
    seconds: float = 0.0
    #: What the window could not do as asked (a message too long to search whole).
    notes: list[str] = field(default_factory=list)

    @property
    def ids(self) -> list[str]:
        return [i for s in self.sections for i in s.ids]

    def as_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "room": self.room,
            "budget": self.budget,
            "tokens": self.tokens,
            "sections": [s.as_dict() for s in self.sections],
            "text": self.text,
            "seconds": round(self.seconds, 4),
            "notes": list(self.notes),
        }


def check_shares(shares: dict[str, float]) -> dict[str, float]:
    """Shares normalised to sum to 1, in :data:`ORDER`."""
    unknown = set(shares) - set(ORDER)
    values = list(shares.values())
    total = sum(values)
    if (
        unknown
        or not all(math.isfinite(v) and v >= 0 for v in values)
        or not (0 < total < math.inf)
    ):
        raise MemoryInputError(
            f"bad context shares {shares}",
            hint="give history, retrieval and profile non-negative shares (weights, "
            "scaled to sum to 1), e.g. history 0.5, retrieval 0.3, profile 0.2",
        )
    return {name: shares.get(name, 0.0) / total for name in ORDER}


def held_by_share(
    name: str, lines: Lines, budget: int, shares: dict[str, float], counter: TokenCounter
) -> set[str]:
    """The ids of a section's first lines that fit in its own share of ``budget``: what
    :func:`assemble` shows of it whatever the other sections hold."""
    allowance = int(budget * check_shares(shares)[name])
    used = counter.count(f"## {TITLES[name]}\n")
    held: set[str] = set()
    for line, memory_id in lines:
        used += counter.count(line + "\n")
        if used > allowance:
            break
        held.add(memory_id)
    return held


def assemble(
    message: str,
    room: str,
    budget: int,
    candidates: dict[str, Lines],
    shares: dict[str, float],
    counter: TokenCounter,
    *,
    chronological: Sequence[str] = ("history",),
    first: dict[str, str | None] | None = None,
) -> ContextWindow:
    """Fill each section from its candidates within its share, pass unused budget on in
    :data:`ORDER`, and render the window. Sections named in ``chronological`` are filled
    from their first candidate on (the best) but shown in reverse order (oldest first),
    save the line of id ``first[section]`` (a room's summary), shown at their top.
    A memory shows once: a candidate another section already shows is passed over."""
    first = first or {}
    shares = check_shares(shares)
    headers = {name: f"## {TITLES[name]}" for name in ORDER}
    cost: Callable[[str], int] = lambda line: counter.count(line + "\n")  # noqa: E731
    sections = {name: Section(name, int(budget * shares[name])) for name in ORDER}
    taken = dict.fromkeys(ORDER, 0)  # candidates looked at
    shown: set[str] = set()

    def fill(section: Section, allowance: int, *, last: bool) -> int:
        """Add lines while they fit in ``allowance`` more tokens; what it used. In the
        ``last`` pass (the spare budget), a section's first line that is still too long
        is cut to fit (a pasted document must not hide the newest message, or the best
        memory), and a later line that does not fit ends a chronological section (it
        shows an unbroken stretch) and is passed over in the others."""
        used = 0
        lines = candidates.get(section.name, [])
        header = 0 if section.lines else cost(headers[section.name])
        while taken[section.name] < len(lines):
            line, memory_id = lines[taken[section.name]]
            if memory_id in shown:
                taken[section.name] += 1
                continue
            need = cost(line) + header
            if used + need > allowance:
                if not last:
                    break
                cut = None if section.lines else cut_line(line, allowance - used - header, cost)
                if cut is None:
                    if section.name in chronological:
                        break
                    taken[section.name] += 1
                    continue
                line, need = cut, cost(cut) + header
            section.lines.append(line)
            section.ids.append(memory_id)
            shown.add(memory_id)
            used += need
            header = 0
            taken[section.name] += 1
        return used

    spare = 0
    for name in ORDER:
        section = sections[name]
        used = fill(section, section.budget, last=False)
        section.tokens = used
        spare += section.budget - used
    for name in ORDER:  # unused shares go to the sections that have more to show
        if spare <= 0:
            break
        section = sections[name]
        used = fill(section, spare, last=True)
        section.tokens += used
        spare -= used
    for name in chronological:
        section = sections[name]
        section.lines.reverse()
        section.ids.reverse()
        lead = first.get(name)
        if lead in section.ids:
            at = section.ids.index(lead)
            section.ids.insert(0, section.ids.pop(at))
            section.lines.insert(0, section.lines.pop(at))
    blocks = [
        "\n".join([headers[name], *sections[name].lines]) for name in ORDER if sections[name].lines
    ]
    text = "\n".join(blocks)
    tokens = counter.count(text)
    # Joining can merge tokens across a line break: drop trailing lines until it fits.
    while tokens > budget:
        last = next(name for name in reversed(ORDER) if sections[name].lines)
        section = sections[last]
        index = -1
        if last in chronological:  # the oldest message, before the line shown first
            index = 1 if len(section.ids) > 1 and section.ids[0] == first.get(last) else 0
        section.lines.pop(index)
        section.ids.pop(index)
        blocks = ["\n".join([headers[n], *sections[n].lines]) for n in ORDER if sections[n].lines]
        text = "\n".join(blocks)
        tokens = counter.count(text)
    for section in sections.values():
        section.tokens = (
            counter.count("\n".join([headers[section.name], *section.lines]))
            if section.lines
            else 0
        )
    return ContextWindow(message, room, budget, [sections[n] for n in ORDER], text, tokens)
