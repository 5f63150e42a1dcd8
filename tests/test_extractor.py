"""The spaCy extractor on real spaCy: entities, actions, topics, spans, metadata."""

from __future__ import annotations

import copy
import gc
import os
import pickle
import signal
import sys
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

import pytest

from structrag.extract.base import metadata_knowledge
from structrag.extract.graphemes import is_boundary, snap
from structrag.extract.spacy_extractor import MAX_PIECE_CHARS, SpacyExtractor
from structrag.models import Action, Entity, Message, SemanticRef, Topic
from structrag.nlp.lemma import lemma
from structrag.nlp.pipeline import DEFAULT_MODEL

if TYPE_CHECKING:
    from spacy.language import Language


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


@pytest.mark.parametrize(
    "text", ["Hey Caroline! Great to hear from you!", "The art's amazing, Caroline!"]
)
def test_a_person_addressed_is_an_entity_without_the_greeting(
    extractor: SpacyExtractor, text: str
) -> None:
    names = {r.knowledge.name for r in _extract(extractor, text) if isinstance(r.knowledge, Entity)}
    assert "Caroline" in names
    assert not [n for n in names if n != "Caroline" and "Caroline" in n]


def test_a_hyphen_inside_a_name_cuts_nothing(extractor: SpacyExtractor) -> None:
    text = "Jean-Luc Picard flew to Winston-Salem in a Rolls-Royce with my 5-year-old daughter."
    names = {r.knowledge.name for r in _extract(extractor, text) if isinstance(r.knowledge, Entity)}
    assert {"Jean-Luc Picard", "Winston-Salem", "Rolls-Royce", "5-year-old daughter"} <= names


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


@pytest.mark.parametrize(
    ("text", "joined"),
    [
        ("# Configuration\n\nSet max_retries to 5 to retry failed calls.", "Configuration Set"),
        ("## Setup\nInstall Python and run make.", "Setup Install Python"),
        ("We met Anna.\n\nBoston was cold, Kevin said.", "Anna Boston"),
    ],
)
def test_no_name_runs_from_a_heading_or_paragraph_into_the_next(
    extractor: SpacyExtractor, text: str, joined: str
) -> None:
    refs = _extract(extractor, text)
    spacy = [r for r in refs if r.extractor == "spacy"]
    names = {r.knowledge.name for r in spacy if isinstance(r.knowledge, Entity)}
    assert names
    assert not any(joined in name or "\n" in name for name in names), names
    for ref in spacy:
        assert ref.span.within(text)
        if isinstance(ref.knowledge, Entity):
            assert text[ref.span.start : ref.span.end] == ref.knowledge.name


def test_a_sentence_wrapped_over_lines_is_parsed_whole(extractor: SpacyExtractor) -> None:
    # A single line break is a wrapped line, not a block's end: the action spans it.
    actions = _actions(_extract(extractor, "Yesterday my sister Anna adopted\na small puppy."))
    assert any("adopt" in a.verbs and a.object is not None and "puppy" in a.object for a in actions)


# Messages with emoji of several code points, each emoji its own item: a flag (two
# regional indicators), a ZWJ family, a skin tone, a variation selector, a ZWJ profession
# with a skin tone, and a flag written against a word.
_EMOJI_MESSAGES = [
    ["We land in Tokyo on the 3rd ", "🇯🇵"],
    ["We visited the big family farm ", "👨\u200d👩\u200d👧", " yesterday"],
    ["I love the new coffee place ", "👍🏽"],
    ["Meet the Tokyo team ", "❤\ufe0f", " today"],
    ["My sister ", "👩🏽\u200d⚕\ufe0f", " works at the city hospital ", "🏥", " now"],
    ["Visit Tokyo", "🇯🇵", " soon"],
]


@pytest.mark.parametrize("parts", _EMOJI_MESSAGES, ids=lambda parts: parts[0].split()[-1])
def test_spans_never_split_an_emoji_and_names_end_on_a_word(
    extractor: SpacyExtractor, parts: list[str]
) -> None:
    text = "".join(parts)
    inside: set[int] = set()  # offsets strictly inside an emoji
    at = 0
    for part in parts:
        if not part.isascii():
            inside.update(range(at + 1, at + len(part)))
        at += len(part)
    refs = [r for r in _extract(extractor, text) if r.extractor == "spacy"]
    assert refs
    for ref in refs:
        assert ref.span.within(text)
        assert ref.span.start not in inside and ref.span.end not in inside, ref
        knowledge = ref.knowledge
        if isinstance(knowledge, (Entity, Topic)):
            name = knowledge.name if isinstance(knowledge, Entity) else knowledge.text
            assert text[ref.span.start : ref.span.end] == name
            assert name[0].isalnum() and name[-1].isalnum(), name
        if isinstance(knowledge, Action):
            said = [knowledge.subject, knowledge.object, *(p.value for p in knowledge.params)]
            assert all(str(v)[-1:].isalnum() for v in said if v), knowledge


def test_a_trailing_flag_leaves_the_words_before_it(extractor: SpacyExtractor) -> None:
    text = "We land in Tokyo on the 3rd 🇯🇵"
    refs = _extract(extractor, text)
    assert not [r for r in refs if isinstance(r.knowledge, Topic)]  # not "3rd 🇯"
    (land,) = [r for r in refs if isinstance(r.knowledge, Action) and r.extractor == "spacy"]
    assert text[land.span.start : land.span.end] == "We land in Tokyo on the 3rd"
    assert isinstance(land.knowledge, Action)
    assert [(p.name, p.value) for p in land.knowledge.params] == [("in", "Tokyo"), ("on", "3rd")]
    text = "We visited the big family farm 👨\u200d👩\u200d👧 yesterday"
    refs = _extract(extractor, text)
    topics = [r.knowledge.text for r in refs if isinstance(r.knowledge, Topic)]
    assert topics == ["big family farm"]
    (visit,) = [r for r in refs if isinstance(r.knowledge, Action) and r.extractor == "spacy"]
    assert isinstance(visit.knowledge, Action) and visit.knowledge.object == "big family farm"
    assert text[visit.span.start : visit.span.end] == "We visited the big family farm"


@pytest.mark.parametrize(
    ("text", "clusters"),
    [
        ("🇯🇵🇺🇸x", ["🇯🇵", "🇺🇸", "x"]),
        ("👨\u200d👩\u200d👧 ok", ["👨\u200d👩\u200d👧", " ", "o", "k"]),
        ("👍🏽❤\ufe0f1\ufe0f\u20e3", ["👍🏽", "❤\ufe0f", "1\ufe0f\u20e3"]),
        ("cafe\u0301\r\n한국", ["c", "a", "f", "e\u0301", "\r\n", "한", "국"]),
    ],
)
def test_grapheme_boundaries(text: str, clusters: list[str]) -> None:
    cuts = [0]
    for cluster in clusters:
        cuts.append(cuts[-1] + len(cluster))
    assert [i for i in range(len(text) + 1) if is_boundary(text, i)] == cuts
    assert snap(text, 1, 1) == (cuts[1], cuts[1]) and snap(text, 0, 1) == (0, cuts[1])


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
        # Words that end like an inflection but are base forms (the tag says so).
        ("guess", "VB", "guess"),
        ("guess", "VBP", "guess"),
        ("guesses", "VBZ", "guess"),
        ("guessed", "VBD", "guess"),
        ("bring", "VB", "bring"),
        ("bring", "VBP", "bring"),
        ("brings", "VBZ", "bring"),
        ("brought", "VBD", "bring"),
        ("bringing", "VBG", "bring"),
        ("need", "VB", "need"),
        ("need", "VBP", "need"),
        ("needed", "VBD", "need"),
        ("needs", "VBZ", "need"),
        ("process", "NN", "process"),
        ("process", "VB", "process"),
        ("processes", "NNS", "process"),
        ("processing", "VBG", "process"),
        ("processed", "VBN", "process"),
        ("bless", "VB", "bless"),
        ("blessed", "VBN", "bless"),
        ("miss", "VBP", "miss"),
        ("missed", "VBD", "miss"),
        ("misses", "VBZ", "miss"),
        ("kiss", "VB", "kiss"),
        ("kissed", "VBD", "kiss"),
        ("dress", "NN", "dress"),
        ("dresses", "NNS", "dress"),
        ("dressed", "VBN", "dress"),
        ("business", "NN", "business"),
        ("series", "NN", "series"),
        ("news", "NN", "news"),
        # "VB" for a verb of unknown form (the query engine's use) still lemmatizes it.
        ("adopted", "VB", "adopt"),
        ("went", "VB", "go"),
        ("got", "VBP", "get"),
        # Contractions, typographic apostrophes included; "AI" is not "ain't".
        ("’s", "VBZ", "be"),
        ("’re", "VBP", "be"),
        ("'d", "MD", "would"),
        ("'d", "VBD", "have"),
        ("ai", "VBP", "be"),
        ("AI", "NN", "ai"),
    ],
)
def test_lemma(word: str, tag: str, expected: str) -> None:
    assert lemma(word, tag) == expected


@pytest.mark.parametrize(
    "sentence",
    [
        "I guess we need to bring the process forward.",
        "She guesses, he guessed, they brought it and needed it; we are processing it.",
        "Bless you, I miss the kiss and the dress. She misses the news about the business.",
    ],
)
def test_lemma_agrees_with_spacys_own_lemmatizer(sentence: str) -> None:
    """On the verbs and nouns of these sentences, lemma() from the word and its tag gives
    what the full pipeline's attribute ruler + lemmatizer give."""
    nlp = _full_pipeline()
    checked = 0
    for token in nlp(sentence):
        if token.pos_ in ("VERB", "NOUN"):
            assert lemma(token.text, token.tag_) == token.lemma_.lower(), token.text
            checked += 1
    assert checked >= 4


@lru_cache(maxsize=1)
def _full_pipeline() -> Language:
    import spacy

    return spacy.load(DEFAULT_MODEL, exclude=["ner"])


def test_refs_sent_back_by_a_worker_are_the_models_it_built(extractor: SpacyExtractor) -> None:
    """Workers send refs as tuples and the writer rebuilds them without validation
    (``models.unchecked``): the rebuilt refs must be the validated ones in every way the
    rest of structrag looks at them."""
    from structrag.extract.spacy_extractor import pack_refs, unpack_refs
    from structrag.models import Facet, SemanticRef, Span, Tag

    message = _message(
        "I didn't adopt the 3 puppies from the animal shelter in Boston on Friday. "
        "Dog training classes and adoption agencies are hard work."
    )
    refs = _extract(extractor, message.text)
    tagged = SemanticRef(
        conversation=message.conversation,
        message_id=message.id,
        span=Span(start=0, end=1),
        knowledge=Tag(text="pets"),
        extractor="spacy",
        extractor_version="1",
    )
    refs = [*refs, tagged]
    kinds = {r.kind for r in refs}
    assert kinds == {"entity", "action", "topic", "tag"}
    assert any(r.knowledge.facets for r in refs if isinstance(r.knowledge, Entity))
    assert any(r.knowledge.params for r in refs if isinstance(r.knowledge, Action))
    rebuilt = unpack_refs(message, pack_refs(refs))
    assert rebuilt == refs
    for new, old in zip(rebuilt, refs, strict=True):
        assert hash(new) == hash(old)
        assert new.model_dump_json() == old.model_dump_json()
        assert new.model_fields_set == set(type(old).model_fields)
        assert repr(new) == repr(old)
        assert SemanticRef.model_validate(new.model_dump()) == new
        assert pickle.loads(pickle.dumps(new)) == old
        assert copy.deepcopy(new) == old
        moved = new.model_copy(update={"ref_id": 7})
        assert moved.ref_id == 7 and new.ref_id is None and moved.knowledge == old.knowledge
        with pytest.raises(ValueError, match="frozen"):
            new.extractor = "x"  # type: ignore[misc]
    facets = [f for r in rebuilt if isinstance(r.knowledge, Entity) for f in r.knowledge.facets]
    assert all(type(f) is Facet for f in facets)


def test_workers_start_early_only_for_an_input_they_will_extract() -> None:
    """An ingest starts the workers when it knows the input is large enough for them, so
    they fork and set up while it reads the input; a small input starts nothing."""
    import structrag.extract.spacy_extractor as module

    small = SpacyExtractor(workers=2)
    small.start(module.PARALLEL_MIN_MESSAGES - 1)
    assert small._pool is None
    one = SpacyExtractor(workers=1)
    one.start(10 * module.PARALLEL_MIN_MESSAGES)
    assert one._pool is None
    large = SpacyExtractor(workers=2)
    try:
        large.start(module.PARALLEL_MIN_MESSAGES)
        assert large._pool is not None
        pool = large._pool
        assert pool.submit(os.getpid).result() != os.getpid()  # a worker answers
        assert len(pool._processes) == 2
        message = _message("Melanie painted a lake at sunrise.")
        assert list(large.extract([message])) == list(small.extract([message]))
    finally:
        large.close()
    assert large._pool is None


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
    frozen = gc.get_freeze_count()
    try:
        got = list(parallel.extract(messages))
        # What the process held when it forked the workers (the pipeline) is hidden
        # from the collector while they run (structrag.gctune), and given back after.
        if sys.platform.startswith("linux") and frozen == 0:
            assert gc.get_freeze_count() > 10_000
        # Ctrl-C is the ingest's to handle: a worker that died of it could hang the pool.
        pool = parallel._workers()
        assert pool.submit(signal.getsignal, signal.SIGINT).result() == signal.SIG_IGN
    finally:
        module.PARALLEL_MIN_MESSAGES = old
        parallel.close()
    assert gc.get_freeze_count() == frozen
    expected = list(extractor.extract(messages))
    assert got == expected
