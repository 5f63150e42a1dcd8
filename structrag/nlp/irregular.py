"""Writes the table of irregular forms (:mod:`structrag.lexicon.irregular`) from spaCy's
English lemmatizer: ``python -m structrag.nlp.irregular [PATH]``."""

from __future__ import annotations

import sys
from pathlib import Path

from structrag.analysis import stem_words, wordset
from structrag.lexicon.irregular import TABLE
from structrag.nlp.lemma import lemma_tables

#: The parts of speech whose irregular forms are in the table.
PARTS = ("verb", "noun")
#: Forms that are common words of their own in a chat, more often than the form: a query
#: for "bite" must not find "a bit tired", nor "see" "a saw", nor "bear" "born". Chosen
#: by hand from the verb forms that WordNet also lists as nouns or adjectives (the
#: others, "ate", "thought", "sang", stay: as nouns they are rare).
OTHER_WORDS = wordset(
    "bit ground rose saw felt found left lay wound fell bound bore born dove shot lit",
    "spat smelt stove rent lead pent rove shod slew cleft clove bade abode kent gelt",
    "gilt redding feed might",
)


def build() -> list[tuple[str, str]]:
    """The (form stem, lemma stem) pairs of the lemmatizer's exceptions, sorted, less the
    forms of :data:`OTHER_WORDS`."""
    tables = lemma_tables()
    pairs: set[tuple[str, str]] = set()
    for part in PARTS:
        _, exceptions, _ = tables[part]
        for form, lemmas in exceptions.items():
            for base in lemmas:
                if not (form.isalpha() and base.isalpha()) or form in OTHER_WORDS:
                    continue
                form_stem, base_stem = stem_words([form, base])
                if form_stem != base_stem:
                    pairs.add((form_stem, base_stem))
    return sorted(pairs)


def write(path: Path) -> int:
    pairs = build()
    path.write_text("".join(f"{a}\t{b}\n" for a, b in pairs), encoding="utf-8")
    return len(pairs)


if __name__ == "__main__":  # pragma: no cover - a maintainer's command
    import structrag.lexicon

    default = Path(structrag.lexicon.__file__).with_name(TABLE)
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default
    print(f"wrote {write(target)} pairs to {target}")
