"""Text as the parser reads it: plain quotes, stage directions blanked out.

Both keep every character where it was, so an offset into the parsed text is an offset
into the message as written.
"""

from __future__ import annotations

import re

from structrag.analysis import wordset

# Typographic quotes the tagger has rarely seen: "I’m" parses as "I" + a verb "’m". Each
# maps to one ASCII character, so offsets into the parsed text are offsets into the original.
_PLAIN_QUOTES = str.maketrans(
    {
        "\u2019": "'",  # right single quotation mark, the usual typographic apostrophe
        "\u2018": "'",  # left single quotation mark
        "\u201b": "'",  # single high-reversed-9 quotation mark
        "\u02bc": "'",  # modifier letter apostrophe
        "\u00b4": "'",  # acute accent typed as an apostrophe
        "\u2032": "'",  # prime
        "\u201c": '"',  # left double quotation mark
        "\u201d": '"',  # right double quotation mark
        "\u201e": '"',  # double low-9 quotation mark
        "\u201f": '"',  # double high-reversed-9 quotation mark
        "\u2033": '"',  # double prime
    }
)


def plain_quotes(text: str) -> str:
    """The text with typographic quotes and apostrophes made ASCII, one character for one
    (so every offset still points at the same character of the original)."""
    return text.translate(_PLAIN_QUOTES)


# Stage directions in transcripts: "[MUSIC]", "(Laughter.)", "(laughs)", "[inaudible]",
# "*sighs*", or a line that is only "Applause". They say what was heard, not what anyone
# said: no entity, topic or action may come from them. A bracketed segment is one when
# every word in it is a sound word or a word that goes with one ("[upbeat music
# playing]", "(both laugh)"), so "[shares sheet music]" (a shared photo's caption) is not.
_STAGE_SOUNDS = wordset(
    "laughter laughs laughing laugh laughed chuckles chuckling chuckle giggles giggling",
    "music applause applauding applauds clapping claps inaudible unintelligible indistinct",
    "crosstalk cross-talk overlapping silence pause pauses sighs sighing coughs coughing",
    "cheering cheers noise static beep beeps bleep bleeps sniffles groans gasps",
)
_STAGE_COMPANIONS = wordset(
    "both all audience everyone crowd background soft upbeat theme intro outro playing",
    "plays continues fades out in up loud loudly voices talking speaking sound sounds",
    "effect effects end of the and",
)
# Unbracketed, a line is a stage direction only when it is one of these words alone:
# "Music!" may answer a question, "Applause." does not.
_STAGE_LINE_WORDS = wordset("laughter applause crosstalk inaudible silence")
_STAGE_BRACKETED_RE = re.compile(r"\[[^\[\]\n]{1,60}\]|\([^()\n]{1,60}\)|\*[^*\n]{1,60}\*")
_STAGE_LINE_RE = re.compile(r"^[^\w\n]*([A-Za-z-]+)[^\w\n]*$", re.MULTILINE)
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]*")


def stage_directions(text: str) -> list[tuple[int, int]]:
    """Character ranges of the stage directions in ``text``, in order."""
    found: list[tuple[int, int]] = []
    if "[" in text or "(" in text or "*" in text:
        for match in _STAGE_BRACKETED_RE.finditer(text):
            words = [w.lower() for w in _WORD_RE.findall(match.group())]
            if (
                words
                and any(w in _STAGE_SOUNDS for w in words)
                and all(w in _STAGE_SOUNDS or w in _STAGE_COMPANIONS for w in words)
            ):
                found.append(match.span())
    for match in _STAGE_LINE_RE.finditer(text):
        word = match.group(1)
        if word.lower() in _STAGE_LINE_WORDS or (word.isupper() and word.lower() in _STAGE_SOUNDS):
            found.append(match.span())
    return sorted(set(found))


def parse_text(text: str) -> str:
    """What the parser reads for ``text``: plain quotes, stage directions blanked out. The
    same length as ``text``, so every offset into it is an offset into the message."""
    parsed = plain_quotes(text)
    for start, end in stage_directions(parsed):
        parsed = parsed[:start] + " " * (end - start) + parsed[end:]
    return parsed
