"""Extraction on real text: a podcast transcript (Behind the Tech, episode 53) and
sentences like it, through the real spaCy pipeline.

Each test names an error seen on that transcript: typographic apostrophes parsed as verbs,
book titles cut or merged, stage directions taken for knowledge, a person's job lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from structrag.extract.spacy_extractor import SpacyExtractor, is_verb_word, plain_quotes
from structrag.importers import load_source
from structrag.models import Action, Entity, Message, SemanticRef

EPISODE_53 = Path(__file__).parent / "fixtures" / "typeagent" / "Episode_53_AdrianTchaikovsky.txt"


@pytest.fixture(scope="module")
def extractor() -> SpacyExtractor:
    return SpacyExtractor(workers=1)


@pytest.fixture(scope="module")
def episode(extractor: SpacyExtractor) -> list[tuple[Message, list[SemanticRef]]]:
    messages = load_source(EPISODE_53, format="transcript").messages
    return list(zip(messages, extractor.extract(messages), strict=True))


def _message(text: str, speaker: str = "Kevin Scott", to: Sequence[str] = ()) -> Message:
    return Message(
        conversation="c", id="1", ordinal=0, speaker=speaker, recipients=tuple(to), text=text
    )


def _extract(extractor: SpacyExtractor, text: str, **kw: object) -> list[SemanticRef]:
    refs = next(iter(extractor.extract([_message(text, **kw)])))  # type: ignore[arg-type]
    return [r for r in refs if r.extractor == "spacy"]


def _entities(refs: Sequence[SemanticRef]) -> dict[str, Entity]:
    return {r.knowledge.name: r.knowledge for r in refs if isinstance(r.knowledge, Entity)}


def _actions(refs: Sequence[SemanticRef]) -> list[Action]:
    return [r.knowledge for r in refs if isinstance(r.knowledge, Action)]


# -- typographic quotes ---------------------------------------------------------------------


def test_plain_quotes_keeps_every_offset() -> None:
    text = "I’m “sure” it’s Kevin‘s, isnʼt it? ´twas"
    plain = plain_quotes(text)
    assert len(plain) == len(text)
    assert plain == "I'm \"sure\" it's Kevin's, isn't it? 'twas"


@pytest.mark.parametrize(
    "verb", ["'s", "’s", "'re", "'m", "'ve", "'d", "'ll", "n't", "s", "re", "’", "-", "do-", ""]
)
def test_contraction_pieces_and_punctuation_are_not_verbs(verb: str) -> None:
    assert not is_verb_word(verb)


@pytest.mark.parametrize("verb", ["be", "go", "sign", "e-mail", "re-read"])
def test_words_are_verbs(verb: str) -> None:
    assert is_verb_word(verb)


def test_curly_apostrophes_parse_like_plain_ones(extractor: SpacyExtractor) -> None:
    curly = "I’m writing a book that’s about spiders, and we’re “publishing” it. They’ve read it."
    plain = curly.replace("’", "'").replace("“", '"').replace("”", '"')
    curly_refs = _extract(extractor, curly)
    plain_refs = _extract(extractor, plain)
    assert [r.knowledge for r in curly_refs if not isinstance(r.knowledge, Entity)] == [
        r.knowledge for r in plain_refs if not isinstance(r.knowledge, Entity)
    ]
    assert [r.span for r in curly_refs] == [r.span for r in plain_refs]
    acts = _actions(curly_refs)
    assert any(a.verbs == ("write",) and a.object == "book" for a in acts)
    assert all(is_verb_word(v) for a in acts for v in a.verbs)
    for ref in curly_refs:
        if isinstance(ref.knowledge, Entity):
            assert curly[ref.span.start : ref.span.end] == ref.knowledge.name


def test_no_action_verb_on_the_transcript_is_a_contraction_or_punctuation(
    episode: list[tuple[Message, list[SemanticRef]]],
) -> None:
    verbs = [v for _, refs in episode for a in _actions(refs) for v in a.verbs]
    assert len(verbs) > 500
    assert [v for v in verbs if not is_verb_word(v)] == []


def test_transcript_spans_point_at_the_original_text(
    episode: list[tuple[Message, list[SemanticRef]]],
) -> None:
    checked = 0
    for message, refs in episode:
        for ref in refs:
            assert ref.span.within(message.text)
            if isinstance(ref.knowledge, Entity) and ref.extractor == "spacy":
                assert message.text[ref.span.start : ref.span.end] == ref.knowledge.name
                checked += 1
    assert checked > 500
