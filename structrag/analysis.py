"""The one analysis chain shared by indexing and querying: words -> lower case -> stems.

Words are runs of two or more word characters; a short stoplist is dropped at index time
and spaCy's longer English stoplist at query time (question words, pronouns, auxiliaries),
so "What did Caroline research?" looks up ``carolin`` and ``research``. Stems come from the
Snowball English stemmer (PyStemmer), so ``agencies`` finds ``agency``.

Chinese and Japanese are written without spaces between words, so a run of Han ideographs,
Hiragana and Katakana is no word of its own: without a segmenter it becomes its characters
and their overlapping bigrams, in order (``寿司屋`` -> ``寿 寿司 司 司屋 屋``), the
unigram-and-bigram scheme of Lucene's CJK bigram filter. A word inside a sentence then
finds the sentence (``寿司`` is a bigram of ``我喜欢吃寿司``; ``猫`` a character of
``我的猫很可爱``), and the query side asks for every term of a word (see
:func:`cjk_words`). Korean is written with spaces and stays words. Text without any of
these characters takes the plain path, term for term what it always was.

An identifier joined by underscores (``max_retries``, ``user_profile``, ``__init__``) is a
word, and in the index its parts of two or more characters are terms too, after it
(``max_retries`` -> ``max_retries max retries``, ``parts=True``): "retries" finds a
document that says "set max_retries". A query asks for an identifier whole, as written:
it finds that identifier, not every message with "max" (which matters under AND and NOT),
and an index built before the parts finds it too. A phrase may run through an
identifier's parts ("max retries", "retries value"; see :func:`phrase_stems`). camelCase
is not split: in what people write, a capital inside a word marks a name (LeBron,
YouTube, JavaScript) far more often than an identifier, and lower-casing comes first.
Text without an underscore takes the plain path, term for term as before.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

import Stemmer

WORD_RE = re.compile(r"\b\w\w+\b")

#: The index setting (DuckDB ``meta``) that records how message text was analysed into
#: terms, and its value now, features separated by spaces: Chinese and Japanese as
#: characters and bigrams, identifiers with their parts. An index without it was built
#: before both (its CJK runs are single terms), one with ``cjk-bigrams`` alone before the
#: parts; ``reindex`` sets it.
TEXT_ANALYSIS_KEY = "text_analysis"
TEXT_ANALYSIS = "cjk-bigrams identifier-parts"
#: The feature of ``TEXT_ANALYSIS`` that says identifiers are indexed with their parts;
#: an index whose value lacks it (``cjk-bigrams``, or none) holds them whole only.
IDENTIFIER_PARTS = "identifier-parts"

#: Han ideographs (with the iteration marks 々〆〇), Hiragana, Katakana (the prolonged
#: sound mark ー too, the middle dot ・ not), half-width Katakana: the scripts written
#: without spaces between words.
_CJK = (
    "\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u31f0-\u31ff"
    "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\U00020000-\U0003134f"
)
_CJK_RE = re.compile(f"[{_CJK}]")
#: In text with CJK characters: a run of them (word characters only, so no unassigned
#: code point), or a word of two or more other word characters, as ``WORD_RE`` has it.
_CJK_WORD_RE = re.compile(rf"((?:(?=\w)[{_CJK}])+)|[^\W{_CJK}]{{2,}}")


def has_cjk(text: str) -> bool:
    """Whether ``text`` has a Chinese or Japanese character (see the module docstring)."""
    return not text.isascii() and _CJK_RE.search(text) is not None


def _grams(run: str) -> list[str]:
    """A CJK run's characters and overlapping bigrams, in order: ``abc`` -> a ab b bc c."""
    out = [run[0]]
    for i in range(1, len(run)):
        out.append(run[i - 1 : i + 1])
        out.append(run[i])
    return out


def cjk_runs(text: str) -> list[str]:
    """The runs of Chinese and Japanese characters in ``text``, as written."""
    if not has_cjk(text):
        return []
    return [m.group(1) for m in _CJK_WORD_RE.finditer(text.lower()) if m.group(1)]


def cjk_words(text: str) -> list[tuple[str, ...]]:
    """The index terms of each CJK run of two or more characters in ``text``: the terms a
    query word written in these scripts (``北京大学``) needs together, where words of
    other scripts count one by one."""
    return [tuple(_grams(run)) for run in cjk_runs(text) if len(run) > 1]


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

    contracted = {"n't", "'s", "nt", "ll", "ve"}  # "I'll", "we've": what a word finder leaves
    return frozenset(STOP_WORDS) | INDEX_STOPWORDS | contracted | {"said", "says", "saying"}


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


def _parts(word: str, stop: frozenset[str]) -> list[str]:
    """An identifier's parts of two or more characters, stopwords dropped (``__init__``
    -> init, ``is_active`` -> active)."""
    return [p for p in word.split("_") if len(p) > 1 and p not in stop]


def _with_parts(found: list[str], stop: frozenset[str]) -> list[str]:
    """``found`` with the parts of each identifier after it (see the module docstring)."""
    out: list[str] = []
    for word in found:
        out.append(word)
        if "_" in word:
            out.extend(_parts(word, stop))
    return out


def words(
    text: str,
    stop: frozenset[str] = INDEX_STOPWORDS,
    *,
    unigrams: bool = True,
    parts: bool = False,
) -> list[str]:
    """Lower-cased words of ``text`` without stopwords (unstemmed); a CJK run gives its
    characters and bigrams, or with ``unigrams=False`` its bigrams alone (a run of one
    character still gives it); with ``parts`` (the index's terms) an identifier is
    followed by its parts."""
    lowered = text.lower()
    if not has_cjk(lowered):
        found = [w for w in WORD_RE.findall(lowered) if w not in stop]
        return _with_parts(found, stop) if parts and "_" in lowered else found
    out: list[str] = []
    for m in _CJK_WORD_RE.finditer(lowered):
        run = m.group(1)
        if not run:
            word = m.group()
            if word not in stop:
                out.append(word)
                if parts and "_" in word:
                    out.extend(_parts(word, stop))
        elif unigrams or len(run) == 1:
            out.extend(_grams(run))
        else:
            out.extend(run[i - 1 : i + 1] for i in range(1, len(run)))
    return out


def stems(text: str, stop: frozenset[str] = INDEX_STOPWORDS, *, parts: bool = False) -> list[str]:
    """The terms of ``text``: its words, stopwords dropped, stemmed; with ``parts``, the
    index terms of a message (identifiers followed by their parts)."""
    return list(_STEMMER.stemWords(words(text, stop, parts=parts)))


def phrase_stems(text: str) -> list[list[str]]:
    """The stem sequences of a message's text in which a quoted phrase counts as said:
    its words and, when it has identifiers, the same with each identifier as its parts
    (``max_retries value`` holds "max_retries value", "max retries", "retries value")."""
    found = stems(text)
    if "_" not in text:
        return [found]
    return [found, stems(text.replace("_", " "))]


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
