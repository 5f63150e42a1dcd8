"""Kinds of things: categories and the words for their kinds, for questions that ask for a
category ("What sports does John like?", "Which cities has Jon visited?").

The evidence of such a question names instances of the category ("I'm off to do some
taekwondo!", "I was in Chicago") and rarely the category word itself. The lexicon maps a
category (``sport``, ``martial art``, ``city``, ``pet``, ``hobby`` ...) to the words for
its kinds (``tennis``, ``surfing``; ``taekwondo``, ``judo``; ``Chicago``, ``Rome`` ...), so
``kind:sport`` in a query also finds the messages that name a sport.

The table ships with the package (``kinds.tsv.gz``): it is derived from WordNet 3.0 (see
``WORDNET_LICENSE``) by :mod:`structrag.lexicon.build`, plus a few categories of our own
that WordNet does not model as classes (hobbies, pets). Keys are analysed with the shared
chain (:func:`structrag.analysis.term_key`), so ``sports`` finds ``sport`` and
``martial arts`` finds ``martial art``.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Mapping
from functools import lru_cache
from importlib import resources

from structrag.analysis import term_key

TABLE = "kinds.tsv.gz"


class Lexicon:
    """Category key -> keys of the words for its kinds (both analysed by ``term_key``).

    Members are analysed when their category is first asked for, so loading the table
    costs only its categories."""

    def __init__(self, table: Mapping[str, Iterable[str]]) -> None:
        self._raw: dict[str, list[str]] = {}
        for category, members in table.items():
            self._raw.setdefault(term_key(category), []).extend(members)
        self._kinds: dict[str, tuple[str, ...]] = {}

    def __len__(self) -> int:
        return len(self._raw)

    def __contains__(self, key: str) -> bool:
        return key in self._raw

    def kinds(self, key: str) -> tuple[str, ...]:
        """The keys of the kinds of a category key (``sport`` -> ``tenni``, ``surf`` ...);
        empty for a word that is no category."""
        found = self._kinds.get(key)
        if found is None:
            members = dict.fromkeys(term_key(m) for m in self._raw.get(key, ()))
            members.pop(key, None)
            members.pop("", None)
            found = self._kinds[key] = tuple(members)
        return found


def read_table(lines: Iterable[str]) -> dict[str, list[str]]:
    """``category<TAB>member|member|...`` lines (``#`` starts a comment line)."""
    table: dict[str, list[str]] = {}
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        category, _, members = line.rstrip("\n").partition("\t")
        table.setdefault(category, []).extend(m for m in members.split("|") if m)
    return table


@lru_cache(maxsize=1)
def default_lexicon() -> Lexicon:
    """The lexicon shipped with the package (read once per process)."""
    data = resources.files(__package__).joinpath(TABLE).read_bytes()
    return Lexicon(read_table(gzip.decompress(data).decode("utf-8").splitlines()))
