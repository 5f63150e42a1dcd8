"""Lemmas by spaCy's English rules, from a word and its Penn tag alone (cached).

Checked against spaCy's full pipeline (attribute ruler and lemmatizer on) by
``benchmarks/lemma_agreement.py``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from structrag.nlp.pipeline import DEFAULT_MODEL, TAG_TO_POS, load_pipeline
from structrag.nlp.text import plain_quotes

# Fine tags whose word is its own lemma. spaCy's English lemmatizer checks this first
# (``EnglishLemmatizer.is_base_form``, on the morphology its attribute ruler gives each
# tag): singular nouns (Number=Sing), infinitives (VerbForm=Inf), present verbs that are
# not 3rd person singular (Fin + Pres, no Number) and positive adjectives (Degree=Pos).
# Without it the suffix rules strip words that only look inflected: "guess" -> "gues",
# "bring" -> "bre", "need" -> "nee", "process" -> "proces".
_BASE_FORM_TAGS = frozenset({"NN", "VB", "VBP", "JJ"})


@lru_cache(maxsize=200_000)
def lemma(word: str, tag: str) -> str:
    """A lemma by spaCy's English rules for a word with a Penn tag, cached.

    The extractor runs spaCy without its attribute ruler and lemmatizer (they cost more
    than the rest of the lemma work on chat-length messages), so this redoes what they do
    from the word and its tag alone: the base-form check, then
    ``spacy.pipeline.Lemmatizer.rule_lemmatize`` over the pipeline's own tables, with set
    lookups (spaCy keeps the lemma index as lists, which makes each call scan thousands of
    entries). Deliberate differences, each measured by ``benchmarks/lemma_agreement.py``:

    * A verb tagged as a base form (VB, VBP) that is not a known verb, while an exception
      or a suffix rule makes it one, is lemmatized anyway: the tagger's "I got" (VBP) gives
      "get", not "got"; and callers that have a verb without its tag pass "VB" (the query
      engine lemmatizes a typed "adopted" that way).
    * Where several suffix rules give a known word, the first rule wins ("hoping" ->
      "hope", "riding" -> "ride"); spaCy 3.8 takes the last ("hop", "rid").
    * Contractions get their word whatever the tag ("gon" of "gonna" -> "go", "'d" ->
      "would", or "have" when tagged as a past form), and typographic apostrophes count
      as plain ones ("’s" -> "be").
    """
    low = plain_quotes(word.lower())
    if tag in ("NNP", "NNPS"):
        return low
    if low in _CONTRACTIONS and tag != "POS":
        return "have" if low == "'d" and tag in ("VBD", "VBN") else _CONTRACTIONS[low]
    if low in _VERB_CONTRACTIONS and tag.startswith(("VB", "MD")):
        return _VERB_CONTRACTIONS[low]
    pos = TAG_TO_POS.get(tag, "X").lower()
    if pos not in ("noun", "verb", "adj", "adv"):
        return low
    index, exceptions, rules = lemma_tables()[pos]
    base = tag in _BASE_FORM_TAGS
    if base and (pos != "verb" or low in index):
        return low
    forms: list[str] = []
    oov: list[str] = []
    for old, new in rules:
        if low.endswith(old):
            form = low[: len(low) - len(old)] + new
            if not form:
                continue
            if form in index or not form.isalpha():
                forms.append(form)
            else:
                oov.append(form)
    forms = list(dict.fromkeys(forms))
    for form in exceptions.get(low, []):
        if form not in forms:
            forms.insert(0, form)
    if not forms and not base:
        # spaCy's last resort: a stripped form that is not in the index beats nothing.
        forms.extend(oov)
    return forms[0] if forms else low


# Pieces spaCy's tokenizer cuts contractions into ("gonna" -> "gon" + "na").
_CONTRACTIONS = {
    "'s": "be",
    "'m": "be",
    "'re": "be",
    "'ve": "have",
    "'d": "would",
    "'ll": "will",
    "n't": "not",
    "gon": "go",
    "wan": "want",
}
# Pieces that are also other words ("AI"), so only when tagged as a verb: "can't",
# "won't", "shan't", "ain't".
_VERB_CONTRACTIONS = {"ca": "can", "wo": "will", "sha": "shall", "ai": "be"}
_Tables = dict[str, tuple[frozenset[str], dict[str, list[str]], list[tuple[str, str]]]]


@lru_cache(maxsize=1)
def lemma_tables() -> _Tables:
    pipe: Any = load_pipeline(DEFAULT_MODEL, ner=False).get_pipe("lemmatizer")
    lookups = pipe.lookups
    index = lookups.get_table("lemma_index", {})
    exc = lookups.get_table("lemma_exc", {})
    rules = lookups.get_table("lemma_rules", {})
    return {
        pos: (
            frozenset(index.get(pos, [])),
            dict(exc.get(pos, {})),
            [(old, new) for old, new in rules.get(pos, [])],
        )
        for pos in ("noun", "verb", "adj", "adv")
    }


@lru_cache(maxsize=1)
def _known_words() -> frozenset[str]:
    tables = lemma_tables()
    return frozenset().union(*(index for index, _, _ in tables.values()))


@lru_cache(maxsize=50_000)
def is_known_word(word: str, tag: str) -> bool:
    """Whether a word, or its lemma for the tag, is in the English lemmatizer's word lists
    (about 90,000 nouns, verbs, adjectives and adverbs): a word that is not may be a typo
    ("lerning", "apartmnet")."""
    low = plain_quotes(word.lower())
    known = _known_words()
    if low in known:
        return True
    return any(lemma(low, t) in known for t in dict.fromkeys((tag, "NNS", "VBG", "VBD", "VBZ")))


_VERB_WORD_RE = re.compile(r"[a-z][a-z-]*[a-z]\Z")
# What the tokenizer splits off contractions ("it's", "we're", "can't"); with their
# apostrophe lost (a stray quote character, "it s") they are still not verbs.
_CONTRACTION_PIECES = frozenset({"s", "m", "re", "ve", "d", "ll", "nt", "t"})


def is_verb_word(verb: str) -> bool:
    """Whether ``verb`` may be a verb of an action: a lower-case word of two or more
    letters (inner hyphens allowed), never punctuation or a contraction piece ('s, 're,
    'm, n't). A parser that meets an unusual apostrophe can make one the head of a clause;
    as an action verb it would match every question about "is" or "are"."""
    return bool(_VERB_WORD_RE.match(verb)) and verb not in _CONTRACTION_PIECES
