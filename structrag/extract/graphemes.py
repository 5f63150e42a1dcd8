"""Where a character range may start or end without cutting a user-perceived character.

Emoji are often several code points: a flag is two regional indicators (🇯🇵), a family
is emoji joined by zero-width joiners (👨‍👩‍👧), a thumbs-up may carry a skin tone (👍🏽),
a heart a variation selector (❤️). spaCy's tokenizer splits them, so a span cut at a
token could end inside one. :func:`snap` moves a span's ends to grapheme-cluster
boundaries (the rules of Unicode's UAX #29 that matter here: CR LF, combining and
enclosing marks, joiners, variation selectors, emoji modifiers, tags, regional-indicator
pairs, emoji ZWJ sequences and Hangul jamo); :func:`is_symbol` tells an emoji or other
symbol from a word, so a phrase can drop one at its ends.
"""

from __future__ import annotations

import unicodedata

_ZWJ = "\u200d"
_KEYCAP = "\u20e3"

# Hangul jamo (leading consonants, vowels, trailing consonants) and the syllable block.
_L = ((0x1100, 0x115F), (0xA960, 0xA97C))
_V = ((0x1160, 0x11A7), (0xD7B0, 0xD7C6))
_T = ((0x11A8, 0x11FF), (0xD7CB, 0xD7FB))
_SYLLABLES = (0xAC00, 0xD7A3)
# Pictographs outside the "So" category that emoji sequences use.
_PICTOGRAPHS = frozenset({0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x3030, 0x303D})


def _within(cp: int, ranges: tuple[tuple[int, int], ...]) -> bool:
    return any(low <= cp <= high for low, high in ranges)


def _regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def _extend(char: str) -> bool:
    """A code point that joins the character before it (Grapheme_Cluster_Break Extend,
    ZWJ or SpacingMark)."""
    cp = ord(char)
    if 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F or cp in (0x200C, 0x200D):
        return True  # emoji modifiers (skin tones), tags, joiners
    return unicodedata.category(char) in ("Mn", "Me", "Mc")


def _pictographic(char: str) -> bool:
    cp = ord(char)
    if cp in _PICTOGRAPHS or 0x1F000 <= cp <= 0x1FAFF:
        return True
    return cp >= 0x2000 and unicodedata.category(char) == "So"


def _control(char: str) -> bool:
    if char in ("\r", "\n"):
        return True
    category = unicodedata.category(char)
    return category in ("Cc", "Zl", "Zp") or (category == "Cf" and not _extend(char))


def _hangul(before: str, after: str) -> bool:
    """Whether two Hangul code points belong to one syllable (UAX #29 rules GB6-GB8)."""
    a, b = ord(before), ord(after)
    syllable = _SYLLABLES[0] <= a <= _SYLLABLES[1]
    lv = syllable and (a - _SYLLABLES[0]) % 28 == 0
    if _within(a, _L):
        return _within(b, _L) or _within(b, _V) or _SYLLABLES[0] <= b <= _SYLLABLES[1]
    if lv or _within(a, _V):
        return _within(b, _V) or _within(b, _T)
    if syllable or _within(a, _T):
        return _within(b, _T)
    return False


def is_boundary(text: str, i: int) -> bool:
    """Whether a grapheme cluster of ``text`` starts (or the text ends) at offset ``i``."""
    if i <= 0 or i >= len(text):
        return True
    before, after = text[i - 1], text[i]
    if ord(before) < 0x300 and ord(after) < 0x300:  # no mark or emoji: only CR LF joins
        return not (before == "\r" and after == "\n")
    if _control(before) or _control(after):
        return not (before == "\r" and after == "\n")
    if _hangul(before, after):
        return False
    if _extend(after):
        return False
    if before == _ZWJ and _pictographic(after):
        j = i - 2  # an emoji ZWJ sequence: a pictograph, marks, the joiner, a pictograph
        while j >= 0 and _extend(text[j]) and text[j] != _ZWJ:
            j -= 1
        return not (j >= 0 and _pictographic(text[j]))
    if _regional(before) and _regional(after):
        count = 0  # regional indicators pair up from the first of a run
        j = i - 1
        while j >= 0 and _regional(text[j]):
            count += 1
            j -= 1
        return count % 2 == 0
    return True


def snap(text: str, start: int, end: int) -> tuple[int, int]:
    """``[start, end)`` on grapheme-cluster boundaries: a cluster belongs to the span when
    its first code point does, so an end inside one moves past it and a start inside one
    moves to the next. Unchanged where both ends are boundaries already."""
    while end < len(text) and not is_boundary(text, end):
        end += 1
    while start < end and not is_boundary(text, start):
        start += 1
    return start, end


def is_symbol(text: str) -> bool:
    """Whether a token's text is only emoji, other symbols, joiners and marks (``🇯``,
    ``\u200d``, ``❤️``, ``🏽``, ``™``): no letter, digit, punctuation or space, and no
    ASCII. A keycap (``1️⃣``) is a symbol too."""
    if not text or text.isascii():
        return False
    if _KEYCAP in text:
        return True
    return all(
        ord(c) > 0x7F and (unicodedata.category(c) in ("So", "Cf", "Mn", "Me") or _extend(c))
        for c in text
    )
