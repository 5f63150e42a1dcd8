"""Extraction on real text: a podcast transcript (Behind the Tech, episode 53) and
sentences like it, through the real spaCy pipeline.

Each test names an error seen on that transcript: typographic apostrophes parsed as verbs,
book titles cut or merged, stage directions taken for knowledge, a person's job lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from structrag import Index
from structrag.extract.spacy_extractor import JOB_FACET, SpacyExtractor
from structrag.importers import load_source
from structrag.ingest import ref_terms
from structrag.models import Action, Entity, Message, SemanticRef
from structrag.nlp.lemma import is_verb_word
from structrag.nlp.text import plain_quotes, stage_directions

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
                stated = message.text[ref.span.start : ref.span.end]
                jobs = [str(f.value) for f in ref.knowledge.facets if f.name == JOB_FACET]
                # A role stated with "I" ("I was ... a published author") spans the
                # statement, on an entity named after the speaker.
                assert stated == ref.knowledge.name or (jobs and all(j in stated for j in jobs))
                checked += 1
    assert checked > 500


# -- titles and names joined by "and" -------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "whole", "not_names"),
    [
        (
            "He's prolific, but is probably most famous for two of his series, "
            "Shadows of the Apt and Children of Time.",
            ["Shadows of the Apt", "Children of Time"],
            ["Shadows of the Apt and Children of Time"],
        ),
        (
            "His first novel, Empire in Black and Gold, was published in 2008.",
            ["Empire in Black and Gold"],
            ["Black and Gold", "Empire in Black"],
        ),
        (
            "I finally got published with Empire in Black and Gold and the next couple of books.",
            ["Empire in Black and Gold"],
            ["Black and Gold"],
        ),
        (
            "I met Kevin and Christina at the Museum of Modern Art.",
            ["Kevin", "Christina", "Museum of Modern Art"],
            ["Kevin and Christina"],
        ),
        (
            "Kevin Scott and Christina Warren talked to Satya from Microsoft.",
            ["Kevin Scott", "Christina Warren", "Satya", "Microsoft"],
            ["Kevin Scott and Christina Warren", "Satya from Microsoft"],
        ),
        ("I bought Nike and Gatorade for the team.", ["Nike", "Gatorade"], ["Nike and Gatorade"]),
        ("We spent a day at the Museum of Art and History.", ["Museum of Art and History"], []),
        ("My favourite book is A Dance with Dragons.", ["Dance with Dragons"], []),
        ("I met Kevin in Boston last May.", ["Kevin", "Boston"], ["Kevin in Boston"]),
    ],
)
def test_titles_are_whole_and_names_joined_by_and_are_separate(
    extractor: SpacyExtractor, text: str, whole: list[str], not_names: list[str]
) -> None:
    names = _entities(_extract(extractor, text))
    assert set(whole) <= set(names)
    assert not set(not_names) & set(names)


def test_a_title_is_typed_as_a_name_and_by_its_apposition(extractor: SpacyExtractor) -> None:
    names = _entities(
        _extract(extractor, "His first novel, Empire in Black and Gold, followed Children of Time.")
    )
    assert names["Empire in Black and Gold"].types == ("name", "novel")
    assert names["Children of Time"].types == ("name",)


def test_titles_on_the_transcript(episode: list[tuple[Message, list[SemanticRef]]]) -> None:
    names = [
        r.knowledge.name for _, refs in episode for r in refs if isinstance(r.knowledge, Entity)
    ]
    for title in ("Empire in Black and Gold", "Shadows of the Apt", "Children of Time"):
        assert title in names
    assert not [n for n in names if n.startswith(("Shadows of the Apt and", "Black and Gold"))]


# -- stage directions -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "directions"),
    [
        ("Aw, poor George. (Laughter.)", ["(Laughter.)"]),
        ("[MUSIC]\n\nWelcome to the show.", ["[MUSIC]"]),
        (
            "I think (laughs) it is [inaudible] and [crosstalk].",
            ["(laughs)", "[inaudible]", "[crosstalk]"],
        ),
        ("[LAUGHTER] That was Bing Chat.", ["[LAUGHTER]"]),
        ("[upbeat music playing]\nHi, everyone.", ["[upbeat music playing]"]),
        ("*sighs* fine, you win", ["*sighs*"]),
        ("Applause\nThank you all for coming.", ["Applause"]),
        ("Thanks!\nLAUGHTER", ["LAUGHTER"]),
        ("Laughter and joy are really important!", []),
        ("Music!", []),
        ("Nice! [shares sheet music for the piano]", []),
        ("We went to the park (the big one) with music.", []),
    ],
)
def test_stage_directions_are_found(text: str, directions: list[str]) -> None:
    assert [text[start:end] for start, end in stage_directions(text)] == directions


@pytest.mark.parametrize(
    "text",
    [
        "Aw, poor George. (Laughter.)",
        "(Laughter.) Right.",
        "[MUSIC]",
        "[LAUGHTER]\n\nApplause\n\n(laughs) [inaudible] [crosstalk]",
        "I think (laughs) that Kevin read the book [inaudible] in [crosstalk] Boston.",
    ],
)
def test_stage_directions_give_no_knowledge(extractor: SpacyExtractor, text: str) -> None:
    refs = _extract(extractor, text)
    for ref in refs:
        assert ref.span.within(text)
        assert not _from_stage_direction(ref, stage_directions(text)), ref
    words = {"laughter", "music", "laughs", "applause", "inaudible", "crosstalk", "right"}
    assert not words & {n.lower() for n in _entities(refs)}


def test_knowledge_around_a_stage_direction_is_kept(extractor: SpacyExtractor) -> None:
    text = "I think (laughs) that Kevin read the book [inaudible] in Boston."
    names = _entities(_extract(extractor, text))
    assert {"Kevin", "book", "Boston"} <= set(names)
    names = _entities(_extract(extractor, "Laughter and joy are really important to me!"))
    assert "Laughter" in names


def test_no_knowledge_from_the_transcripts_stage_directions(
    episode: list[tuple[Message, list[SemanticRef]]],
) -> None:
    directions = 0
    for message, refs in episode:
        ranges = stage_directions(message.text)
        directions += len(ranges)
        assert "(Laughter.)" not in message.text or ranges  # the text itself is untouched
        for ref in refs:
            if ref.extractor == "spacy":
                assert not _from_stage_direction(ref, ranges), ref
    assert directions >= 15


def _from_stage_direction(ref: SemanticRef, ranges: list[tuple[int, int]]) -> bool:
    """Whether a ref draws on a stage direction: an entity or topic that overlaps one, or
    an action that starts or ends inside one (an action may span a direction between its
    words: "Kevin read the book [inaudible] in Boston")."""
    start, end = ref.span.start, ref.span.end
    for d_start, d_end in ranges:
        if isinstance(ref.knowledge, Action):
            if d_start <= start < d_end or d_start < end <= d_end:
                return True
        elif start < d_end and d_start < end:
            return True
    return False


# -- roles ----------------------------------------------------------------------------------


def _jobs(refs: Sequence[SemanticRef]) -> dict[str, list[str]]:
    return {
        r.knowledge.name: [str(f.value) for f in r.knowledge.facets if f.name == JOB_FACET]
        for r in refs
        if isinstance(r.knowledge, Entity) and any(f.name == JOB_FACET for f in r.knowledge.facets)
    }


@pytest.mark.parametrize(
    ("text", "speaker", "person", "jobs"),
    [
        (
            "Hi, everyone. I’m your host, Kevin Scott, Chief Technology Officer for Microsoft.",
            "Kevin Scott",
            "Kevin Scott",
            ["host", "Chief Technology Officer for Microsoft"],
        ),
        (
            "Hello, and welcome to Behind the Tech. I’m Christina Warren, Senior Developer "
            "Advocate at GitHub.",
            "Christina Warren",
            "Christina Warren",
            ["Senior Developer Advocate at GitHub"],
        ),
        ("Adrian is a sci-fi author.", "Kevin Scott", "Adrian", ["sci-fi author"]),
        (
            "Adrian Tchaikovsky is a sci-fi author who’s written dozens of books.",
            "Christina Warren",
            "Adrian Tchaikovsky",
            ["sci-fi author"],
        ),
        ("I work as a nurse.", "Caroline", "Caroline", ["nurse"]),
        ("You're a brilliant teacher!", "Caroline", "Melanie", ["brilliant teacher"]),
        ("My friend Ana is a nurse at the hospital.", "Caroline", "Ana", ["nurse at the hospital"]),
        (
            "Kevin Roose, the reporter, was trying to get the system to talk.",
            "Kevin Scott",
            "Kevin Roose",
            ["reporter"],
        ),
    ],
)
def test_a_stated_role_is_a_job_facet_of_the_person(
    extractor: SpacyExtractor, text: str, speaker: str, person: str, jobs: list[str]
) -> None:
    refs = _extract(extractor, text, speaker=speaker, to=("Melanie",))
    assert _jobs(refs).get(person) == jobs
    entity = next(r for r in refs if isinstance(r.knowledge, Entity) and r.knowledge.name == person)
    assert isinstance(entity.knowledge, Entity)
    assert "person" in entity.knowledge.types
    assert JOB_FACET in ref_terms(entity)  # a question's "job" finds it
    for job in jobs:  # the span covers where the text states it, or the name stating it
        stated = text[entity.span.start : entity.span.end]
        assert stated == person or job in stated


@pytest.mark.parametrize(
    "text",
    [
        "Melanie is a great mom.",
        "I'm a huge fan of Tina Turner.",
        "Thanks for the offer, Maria!",
        "Nice reminder, Gina!",
        "Aww, bummer!",
        "I'm not a writer.",
        "I'm no writer like you, but something awesome happened.",
        "You'd be a great counselor!",
        "I was a teenager then.",
        "His first novel, Empire in Black and Gold, was published in 2008.",
        "I met Kevin, Satya and Ana at the shelter.",
        "It matters a lot to me.",
    ],
)
def test_no_job_where_none_is_stated(extractor: SpacyExtractor, text: str) -> None:
    assert _jobs(_extract(extractor, text, speaker="Caroline", to=("Melanie",))) == {}


def test_roles_on_the_transcript(episode: list[tuple[Message, list[SemanticRef]]]) -> None:
    jobs: dict[str, set[str]] = {}
    for _, refs in episode:
        for person, values in _jobs(refs).items():
            jobs.setdefault(person, set()).update(values)
    assert {"host", "Chief Technology Officer for Microsoft"} <= jobs["Kevin Scott"]
    assert "Senior Developer Advocate at GitHub" in jobs["Christina Warren"]
    assert "sci-fi author" in jobs["Adrian Tchaikovsky"]


def test_a_job_is_found_in_a_real_index(tmp_path: Path) -> None:
    transcript = tmp_path / "show.txt"
    transcript.write_text(
        "KEVIN SCOTT: Hi, everyone. I’m your host, Kevin Scott, Chief Technology Officer "
        "for Microsoft.\n\n[MUSIC]\n\n"
        "CHRISTINA WARREN: I’m Christina Warren, Senior Developer Advocate at GitHub.\n\n"
        "KEVIN SCOTT: And Kevin Scott loves the books of Adrian Tchaikovsky. (Laughter.)\n",
        encoding="utf-8",
    )
    with Index(tmp_path / "index") as index:
        index.ingest([transcript], format="transcript")
        found = index.query('entity(name="Kevin Scott", facet.job=*)', limit=None).messages
        assert [index.show(m.id)["text"][:13] for m in found] == ["Hi, everyone."]
        found = index.query("entity(facet.job=*)", limit=None).messages
        assert len(found) == 2
        names = {r.knowledge.name for r in index.refs("entity") if isinstance(r.knowledge, Entity)}
        assert "Laughter" not in names
