"""Which tokens belong to names: shared by the extractor and the question translator."""

from __future__ import annotations

from typing import TYPE_CHECKING

from structrag.analysis import wordset

if TYPE_CHECKING:
    from spacy.tokens import Token

# Capitalised words that open chat messages and are not names.
_GREETINGS = wordset(
    "hey hi hello hiya yo dear thanks thank congrats congratulations wow oh ooh aw aww",
    "yeah yes no ok okay sure cool awesome great good nice lol omg haha",
)


def is_name_token(token: Token) -> bool:
    """Part of a proper name: a proper noun, or a capitalised noun/adjective inside a
    sentence ("Children of Time", "Shadows of the Apt", which the tagger calls NNS/JJ)."""
    if not token.text[:1].isupper():
        return False
    if token.tag_ in ("NNP", "NNPS"):
        return token.lower_ not in _GREETINGS
    return (
        token.tag_ in ("NN", "NNS", "JJ")
        and not opens_sentence(token)
        and token.lower_ not in _GREETINGS
    )


def opens_sentence(token: Token) -> bool:
    """Whether only white space (a blanked stage direction) or an opening bracket stands
    between the token and the start of its sentence: its capital is then no sign of a name
    ("(Laughter.) Right.", "(Okay)"). An opening quote may well start a title."""
    doc = token.doc
    i = token.i
    while i > 0 and not doc[i].is_sent_start:
        before = doc[i - 1]
        if not (before.is_space or before.text in ("(", "[")):
            return False
        i -= 1
    return True
