"""What later statements replaced, as the memory API reads it.

When a user's newer statement supersedes an older one ("I moved to Lisbon" after "I
live in Porto"), the older profile entry is marked superseded (see
:meth:`~structrag.memory.api.Memory._update_profile`). This module carries that mark to
what was made from the older statement:

* a fact or relationship stating it is *superseded*: :meth:`Memory.facts` leaves it out
  unless asked for the history, a search returns it marked, and the context window's
  section about the user leaves it out;
* when a search finds a message with a superseded statement and, below it, the message
  that replaced it, the newer one is raised to right before it (the older one is not
  dropped, nor pushed down: "Porto" still finds "I live in Porto" where it ranked, with
  "I moved to Lisbon" just before it); one whose every statement was superseded is
  marked so.

It is worked out when read, from the profile entries, never stored: removing the newer
message restores the older entry (:meth:`MemoryStore.forget_profile_sources`), and with
it the facts and messages made from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from structrag.memory.records import MemoryRecord, ProfileEntry
from structrag.memory.statements import same_subject

#: The status a superseded fact, relationship or message is returned with.
SUPERSEDED = "superseded"

_Key = tuple[str, str, str, bool]


def _key(user: str, predicate: str, obj: str, negated: bool) -> _Key:
    return (user.strip().lower(), predicate, obj.strip().lower(), bool(negated))


@dataclass(frozen=True)
class Supersession:
    """The statements an agent's profiles hold as replaced, and the messages that stated
    them (see the module's docstring)."""

    #: (user, predicate, object, negated) of statements that no longer hold.
    statements: frozenset[_Key]
    #: A message with a superseded statement -> the ids of the messages that replaced it.
    replaced_by: dict[str, frozenset[str]]
    #: The messages whose every statement was superseded.
    stale: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Sequence[ProfileEntry]) -> Supersession:
        """From every profile entry of an agent, current and superseded (with sources)."""
        by_id = {e.entry_id: e for e in entries}
        current = [e for e in entries if e.superseded_by is None]
        holds = {_key(e.user, e.predicate, e.object, e.negated) for e in current}
        stating_current = {m for e in current for m in e.sources}
        statements: set[_Key] = set()
        replaced_by: dict[str, set[str]] = {}
        for entry in entries:
            if entry.superseded_by is None:
                continue
            key = _key(entry.user, entry.predicate, entry.object, entry.negated)
            if key in holds:  # said again since: it holds
                continue
            statements.add(key)
            newer = by_id.get(entry.superseded_by)
            for message in entry.sources:
                if newer is not None:
                    replaced_by.setdefault(message, set()).update(newer.sources)
        replaced = {m: frozenset(r - {m}) for m, r in replaced_by.items() if r - {m}}
        return cls(
            frozenset(statements),
            replaced,
            frozenset(m for m in replaced if m not in stating_current),
        )

    @classmethod
    def none(cls) -> Supersession:
        return cls(frozenset(), {})

    def messages(self) -> set[str]:
        """The ids of the superseded messages and of those that replaced them."""
        found = set(self.replaced_by)
        for newer in self.replaced_by.values():
            found |= newer
        return found

    def holds(self, record: MemoryRecord) -> bool:
        """Whether a memory still holds: False for a fact or relationship whose statement
        was superseded, or a message whose every statement was."""
        if record.id in self.stale:
            return False
        meta = record.metadata
        subject, user = meta.get("subject"), record.user
        if not (isinstance(subject, str) and user and same_subject(subject, user)):
            return True
        key = _key(
            user,
            str(meta.get("predicate", "")),
            str(meta.get("object", "")),
            bool(meta.get("negated")),
        )
        return key not in self.statements

    def mark(self, record: MemoryRecord) -> MemoryRecord:
        """The record, with status ``superseded`` where it no longer holds."""
        return record if self.holds(record) else replace(record, status=SUPERSEDED)

    def reorder(self, size: int, named: dict[int, str]) -> np.ndarray | None:
        """A ranking's new order (its positions, as an array): a message that replaced a
        superseded one and ranks below it is raised to right before it (the superseded
        message keeps its place, so a search for its own words still finds it there, and
        the newer statement with it); a chain (Porto, then Lisbon, then Berlin) stands
        newest first. ``named`` gives the ranking's positions of the messages of note
        (:meth:`messages`) and their ids. None when nothing moves."""
        if not self.replaced_by:
            return None
        where = {mid: position for position, mid in named.items()}
        seq = sorted(named)  # the named messages, in ranking order
        moved: set[int] = set()
        for _ in range(len(seq)):  # each round raises; a cycle cannot go on for ever
            changed = False
            for position in list(seq):
                for newer in sorted(
                    where[m] for m in self.replaced_by.get(named[position], ()) if m in where
                ):
                    if seq.index(newer) > seq.index(position):
                        seq.remove(newer)
                        seq.insert(seq.index(position), newer)
                        moved.add(newer)
                        changed = True
            if not changed:
                break
        if not moved:
            return None
        kept = np.ones(size, dtype=bool)
        kept[sorted(moved)] = False
        order = np.flatnonzero(kept)
        slots: list[int] = []
        values: list[int] = []
        for i, position in enumerate(seq):
            if position in moved:  # before the next message of note that stayed
                anchor = next(p for p in seq[i:] if p not in moved)
                slots.append(int(np.searchsorted(order, anchor)))
                values.append(position)
        return np.insert(order, slots, values)
