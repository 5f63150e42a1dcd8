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
    them (see the module's docstring). Messages are named by their store keys, as text
    (ids are unique within a room only): the entries' ``sources`` as
    :meth:`MemoryStore.profile_statements` gives them."""

    #: (user, predicate, object, negated) of statements that no longer hold.
    statements: frozenset[_Key]
    #: A message with a superseded statement -> the messages that replaced it.
    replaced_by: dict[str, frozenset[str]]
    #: The messages whose every statement was superseded.
    stale: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Sequence[ProfileEntry]) -> Supersession:
        """From every profile entry of an agent, current and superseded, with the
        messages that stated each as its ``sources``."""
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
        """The superseded messages and those that replaced them."""
        found = set(self.replaced_by)
        for newer in self.replaced_by.values():
            found |= newer
        return found

    def holds(self, record: MemoryRecord) -> bool:
        """Whether a memory still holds: False for a fact or relationship whose statement
        was superseded, or a message whose every statement was."""
        if str(record.mkey) in self.stale:
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
        (:meth:`messages`) and their ids. None when nothing moves. One pass over them in
        ranking order: a message is raised only by those above it, whose places are
        settled when it is reached."""
        if not self.replaced_by:
            return None
        where = {mid: position for position, mid in named.items()}
        #: position -> (the position it stands before, how deep in a chain it is)
        anchor: dict[int, tuple[int, int]] = {}
        for position in sorted(named):
            place, depth = anchor.get(position, (position, 0))
            for newer in self.replaced_by.get(named[position], ()):
                below = where.get(newer)
                if below is None or below <= position:
                    continue
                candidate = (place, depth + 1)
                held = anchor.get(below)
                if held is None or (candidate[0], -candidate[1]) < (held[0], -held[1]):
                    anchor[below] = candidate
        if not anchor:
            return None
        moved = sorted(anchor, key=lambda p: (anchor[p][0], -anchor[p][1], p))
        kept = np.ones(size, dtype=bool)
        kept[moved] = False
        order = np.flatnonzero(kept)
        slots = np.searchsorted(order, [anchor[p][0] for p in moved])
        return np.insert(order, slots, moved)
