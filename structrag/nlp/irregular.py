"""Irregular word forms as index terms: "bought" and "buy", "went" and "go", "children"
and "child" share no stem, so a query for one would miss messages that say the other.

The table (``irregular.tsv``, one ``stem<TAB>stem`` pair a line, both ways) ships with the
package: it is the exceptions of spaCy's English lemmatizer for verbs and nouns (its
``lemma_exc`` tables, from WordNet's exception lists) whose form and lemma stem apart.
``python -m structrag.nlp.irregular`` writes it again from the installed pipeline, and a
test checks that the shipped table is what that gives; reading it needs no spaCy.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import lru_cache
from importlib import resources
from pathlib import Path

TABLE = "irregular.tsv"
#: The parts of speech whose irregular forms are in the table.
PARTS = ("verb", "noun")


def build() -> list[tuple[str, str]]:
    """The (form stem, lemma stem) pairs of spaCy's lemmatizer exceptions, sorted."""
    from structrag.analysis import stem_words
    from structrag.nlp.lemma import lemma_tables

    tables = lemma_tables()
    pairs: set[tuple[str, str]] = set()
    for part in PARTS:
        _, exceptions, _ = tables[part]
        for form, lemmas in exceptions.items():
            for base in lemmas:
                if not (form.isalpha() and base.isalpha()):
                    continue
                form_stem, base_stem = stem_words([form, base])
                if form_stem != base_stem:
                    pairs.add((form_stem, base_stem))
    return sorted(pairs)


@lru_cache(maxsize=1)
def irregular_forms() -> Mapping[str, tuple[str, ...]]:
    """Stem -> the stems it is an irregular form or lemma of ("bought" <-> "buy")."""
    text = resources.files("structrag.nlp").joinpath(TABLE).read_text(encoding="utf-8")
    found: dict[str, set[str]] = {}
    for line in text.splitlines():
        form, base = line.split("\t")
        found.setdefault(form, set()).add(base)
        found.setdefault(base, set()).add(form)
    return {stem: tuple(sorted(others)) for stem, others in found.items()}


def write(path: Path) -> int:
    pairs = build()
    path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return len(pairs)


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).with_name(TABLE)
    print(f"wrote {write(target)} pairs to {target}")
