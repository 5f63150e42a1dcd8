"""The lexicon protocol: coarse word categories and related words, used for entity types,
topic selection and query expansion. The WordNet implementation lives in
:mod:`structrag.extract.wordnet`.
"""

from __future__ import annotations

from typing import Protocol


class Lexicon(Protocol):
    """Word knowledge that does not come from the conversation itself."""

    name: str

    def categories(self, word: str) -> list[str]:
        """Coarse categories of a noun lemma, most likely sense first (e.g. ``activity``)."""
        ...

    def is_abstract(self, word: str) -> bool:
        """True when the noun's main sense is an abstraction (an idea, a state, an act)."""
        ...
