"""The one analysis chain shared by indexing and querying: words -> lower case -> stems.

Words are runs of two or more word characters; a short stoplist is dropped at index time
and spaCy's longer English stoplist at query time (question words, pronouns, auxiliaries),
so "What did Caroline research?" looks up ``carolin`` and ``research``. Stems come from the
Snowball English stemmer (PyStemmer), so ``agencies`` finds ``agency``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

WORD_RE = re.compile(r"\b\w\w+\b")


def wordset(*lines: str) -> frozenset[str]:
    """A set of words written as space-separated lines."""
    return frozenset(word for line in lines for word in line.split())


#: Dropped from documents: the classic Lucene English stoplist.
INDEX_STOPWORDS = wordset(
    "a an and are as at be but by for if in into is it no not of on or such that the",
    "their then there these they this to was will with",
)


@lru_cache(maxsize=4096)
def fold_accents(text: str) -> str:
    """``text`` without its accents: "Zoe" and "Jurgen" name Zoë and Jürgen."""
    import unicodedata

    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))


@lru_cache(maxsize=1)
def query_stopwords() -> frozenset[str]:
    """Dropped from questions: spaCy's English stoplist (a word list; no model is loaded),
    with the forms of "say" it lacks ("What has Chen said?" asks for what Chen says, not
    for the word)."""
    from spacy.lang.en.stop_words import STOP_WORDS

    return frozenset(STOP_WORDS) | INDEX_STOPWORDS | {"n't", "'s", "nt", "said", "says", "saying"}


#: Words that carry no content on their own: acknowledgements, fillers and stage
#: directions ("Yeah.", "Right, right.", "Haha", "[LAUGHTER]"). A message made only of
#: these and stopwords is a backchannel.
FILLER_WORDS = wordset(
    "yeah yes yep yup yea ya no nope nah ok okay right sure cool great nice wow oh ah aw",
    "aww awww haha hahaha hah lol lmao rofl hmm hm mm mmm mhm huh uh um umm er erm",
    "exactly totally absolutely definitely indeed true thanks thank thx ty congrats",
    "congratulations welcome bye hi hello hey hiya yo lovely awesome amazing wonderful",
    "gosh god omg wait well alright alrighty cheers laughter laughs laughing laugh music",
    "applause crosstalk inaudible silence pause chuckles",
)

_STEMMER = Stemmer.Stemmer("english")
_STEMMER.maxCacheSize = 200_000


def words(text: str, stop: frozenset[str] = INDEX_STOPWORDS) -> list[str]:
    """Lower-cased words of ``text`` without stopwords (unstemmed)."""
    return [w for w in WORD_RE.findall(text.lower()) if w not in stop]


def stems(text: str, stop: frozenset[str] = INDEX_STOPWORDS) -> list[str]:
    """The index terms of ``text``: its words, stopwords dropped, stemmed."""
    return list(_STEMMER.stemWords(words(text, stop)))


def stem_words(items: Iterable[str]) -> list[str]:
    return list(_STEMMER.stemWords(list(items)))


@lru_cache(maxsize=1)
def _filler_stems() -> frozenset[str]:
    return frozenset(stem_words(FILLER_WORDS | query_stopwords()))


def content_count(terms: Iterable[str]) -> int:
    """How many of a message's index terms carry content (not fillers or stopwords)."""
    filler = _filler_stems()
    return sum(1 for term in terms if term not in filler)


def query_stems(text: str) -> list[str]:
    """Index terms of a question or query phrase, with the longer query stoplist."""
    return stems(text, query_stopwords())


@lru_cache(maxsize=100_000)
def term_key(text: str) -> str:
    """A normalised key for a phrase (entity name, topic): its stems joined by spaces."""
    found = stems(text)
    return " ".join(found) if found else text.strip().lower()
