"""Irregular word forms as index terms: "bought" and "buy", "went" and "go", "children"
and "child" share no stem, so a query for one would miss messages that say the other.

The table (``irregular.tsv``, one ``stem<TAB>stem`` pair a line) ships with the package:
the exceptions of spaCy's English lemmatizer for verbs and nouns (from WordNet's exception
lists) whose form and lemma stem apart. :mod:`structrag.nlp.irregular` writes it from the
installed pipeline (``python -m structrag.nlp.irregular``), and a test checks that the
shipped table is what that gives; reading it needs no spaCy.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from importlib import resources

TABLE = "irregular.tsv"


@lru_cache(maxsize=1)
def irregular_forms() -> Mapping[str, tuple[str, ...]]:
    """Stem -> the stems it is an irregular form or lemma of ("bought" <-> "buy")."""
    text = resources.files("structrag.lexicon").joinpath(TABLE).read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        form, base = line.split("\t")
        found.setdefault(form, set()).add(base)
        found.setdefault(base, set()).add(form)
    return {stem: tuple(sorted(others)) for stem, others in found.items()}
