"""The spaCy extractor on real spaCy: entities, actions, topics, spans, metadata."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from structrag.extract.base import metadata_knowledge
from structrag.extract.spacy_extractor import MAX_PIECE_CHARS, SpacyExtractor, lemma
from structrag.models import Action, Entity, Message, SemanticRef, Topic


def _message(text: str, speaker: str = "Caroline", to: Sequence[str] = ("Melanie",)) -> Message:
    return Message(
        conversation="c", id="1", ordinal=0, speaker=speaker, recipients=tuple(to), text=text
    )


@pytest.fixture(scope="module")
def extractor() -> SpacyExtractor:
    return SpacyExtractor(workers=1)


def _extract(extractor: SpacyExtractor, text: str, **kw: object) -> list[SemanticRef]:
    return next(iter(extractor.extract([_message(text, **kw)])))  # type: ignore[arg-type]


def _actions(refs: list[SemanticRef]) -> list[Action]:
    return [r.knowledge for r in refs if isinstance(r.knowledge, Action) and r.extractor == "spacy"]


def test_entities_with_types_and_proper_noun_titles(extractor: SpacyExtractor) -> None:
    refs = _extract(
        extractor, "My friend Melanie gave me a copy of Children of Time at the library in Boston."
    )
    names = {r.knowledge.name: r.knowledge for r in refs if isinstance(r.knowledge, Entity)}
    assert "Children of Time" in names
    assert "Boston" in names
    assert "library" in names
    assert "person" in names["Melanie"].types
    assert "library" in names["library"].types


def test_actions_resolve_pronouns_negation_and_tense(extractor: SpacyExtractor) -> None:
    acts = _actions(_extract(extractor, "I didn't adopt the puppy. You will love the new shelter."))
    adopt = next(a for a in acts if a.verbs == ("adopt",))
    assert adopt.subject == "Caroline"
    assert adopt.object == "puppy"
    assert adopt.negated
    assert adopt.tense == "past"
    love = next(a for a in acts if a.verbs == ("love",))
    assert love.subject == "Melanie"
    assert love.tense == "future"
    assert not love.negated


def test_xcomp_inherits_subject_and_particles_join_verbs(extractor: SpacyExtractor) -> None:
    acts = _actions(_extract(extractor, "I want to adopt two kids, so I signed up for a class."))
    adopt = next(a for a in acts if a.verbs == ("adopt",))
    assert adopt.subject == "Caroline"
    assert adopt.object == "two kids"
    sign = next(a for a in acts if a.verbs[0] == "sign")
    assert sign.verbs == ("sign", "up")
    assert any(p.name == "for" and p.value == "class" for p in sign.params)


def test_topics_are_multiword_key_phrases(extractor: SpacyExtractor) -> None:
    refs = _extract(extractor, "The LGBTQ support group met after the charity race.")
    topics = {r.knowledge.text for r in refs if isinstance(r.knowledge, Topic)}
    assert {"LGBTQ support group", "charity race"} <= topics


def test_every_span_lies_inside_the_text_and_points_at_the_name(extractor: SpacyExtractor) -> None:
    text = "Caroline moved from Sweden four years ago and now works at an adoption agency."
    refs = _extract(extractor, text)
    assert refs
    for ref in refs:
        assert ref.span.within(text)
        if isinstance(ref.knowledge, Entity) and ref.extractor == "spacy":
            assert text[ref.span.start : ref.span.end] == ref.knowledge.name


def test_huge_messages_are_cut_in_pieces_with_offsets_kept(extractor: SpacyExtractor) -> None:
    sentence = "Marco repaired the old sailboat in Lisbon. "
    text = sentence * (MAX_PIECE_CHARS // len(sentence) * 2 + 3)
    refs = _extract(extractor, text)
    lisbon = [r for r in refs if isinstance(r.knowledge, Entity) and r.knowledge.name == "Lisbon"]
    assert lisbon
    assert any(r.span.start > MAX_PIECE_CHARS for r in refs)
    for ref in refs:
        assert ref.span.within(text)
        if isinstance(ref.knowledge, Entity) and ref.extractor == "spacy":
            assert text[ref.span.start : ref.span.end] == ref.knowledge.name


def test_metadata_knowledge() -> None:
    refs = metadata_knowledge(_message("hello there", speaker="Kevin", to=("Satya", "Ana")))
    people = [r.knowledge.name for r in refs if isinstance(r.knowledge, Entity)]
    assert people == ["Kevin", "Satya", "Ana"]
    says = [r.knowledge for r in refs if isinstance(r.knowledge, Action)]
    assert [(a.subject, a.verbs, a.indirect_object) for a in says] == [
        ("Kevin", ("say",), "Satya"),
        ("Kevin", ("say",), "Ana"),
    ]
    assert all(r.span.start == 0 and r.span.end == len("hello there") for r in refs)
    assert metadata_knowledge(_message("   ")) == []


def test_empty_message_gives_no_knowledge(extractor: SpacyExtractor) -> None:
    assert _extract(extractor, "") == []


@pytest.mark.parametrize(
    ("word", "tag", "expected"),
    [
        ("went", "VBD", "go"),
        ("agencies", "NNS", "agency"),
        ("'s", "VBZ", "be"),
        ("children", "NNS", "child"),
        ("Sweden", "NNP", "sweden"),
    ],
)
def test_lemma(word: str, tag: str, expected: str) -> None:
    assert lemma(word, tag) == expected


def test_parallel_extraction_matches_in_process(extractor: SpacyExtractor) -> None:
    messages = [
        Message(
            conversation="c",
            id=str(i),
            ordinal=i,
            speaker="Ann",
            recipients=("Bo",),
            text=f"Ann bought {i} red apples at the market in Paris.",
        )
        for i in range(40)
    ]
    parallel = SpacyExtractor(workers=2)
    import structrag.extract.spacy_extractor as module

    old = module.PARALLEL_MIN_MESSAGES
    module.PARALLEL_MIN_MESSAGES = 10
    try:
        got = list(parallel.extract(messages))
    finally:
        module.PARALLEL_MIN_MESSAGES = old
    expected = list(extractor.extract(messages))
    assert got == expected
