"""Grounding an LLM's answer in its message: spans, pronouns, inflections, invented items."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from structrag.extract.grounding import ground
from structrag.extract.llm_schema import MessageKnowledge
from structrag.models import Action, Entity, Message, Topic


def _message(text: str, speaker: str = "Kim", recipients: tuple[str, ...] = ("Lee",)) -> Message:
    return Message(
        conversation="c", id="1", ordinal=0, speaker=speaker, recipients=recipients, text=text
    )


def _answer(**fields: object) -> MessageKnowledge:
    return MessageKnowledge.model_validate(fields)


def test_names_are_located_as_written_or_by_stem() -> None:
    message = _message("We visited two adoption agencies in Boston; you would love it.")
    answer = _answer(
        entities=[
            {"name": "boston", "types": ["City", "place", "city"]},
            {"name": "adoption agency"},
            {"name": "Lee"},
            {"name": "we"},
        ],
        actions=[{"subject": "I", "verbs": ["visit"], "object": "adoption agencies"}],
        topics=["adoption", "agencies in Boston"],
    )
    grounded = ground(message, answer, extractor="llm", version="1")
    assert grounded.invented == []
    spans = {
        (
            r.knowledge.kind,
            getattr(r.knowledge, "name", None) or getattr(r.knowledge, "text", ""),
        ): message.text[r.span.start : r.span.end]
        for r in grounded.refs
        if not isinstance(r.knowledge, Action)
    }
    assert spans[("entity", "boston")] == "Boston"
    assert spans[("entity", "adoption agency")] == "adoption agencies"
    assert spans[("entity", "Lee")] == "you"  # the recipient, implied by "you"
    assert spans[("topic", "agencies in Boston")] == "agencies in Boston"
    assert ("entity", "we") not in spans  # pronouns are the metadata's speaker
    boston = next(
        r.knowledge for r in grounded.refs if getattr(r.knowledge, "name", "") == "boston"
    )
    assert isinstance(boston, Entity) and boston.types == ("city", "place")
    (action,) = [r for r in grounded.refs if isinstance(r.knowledge, Action)]
    assert isinstance(action.knowledge, Action)
    assert action.knowledge.subject == "Kim"
    assert message.text[action.span.start : action.span.end] == "visited"


def test_invented_names_are_dropped_and_listed() -> None:
    message = _message("I went to the lake with Pepper.")
    answer = _answer(
        entities=[{"name": "Pepper"}, {"name": "Lake Geneva"}, {"name": "Switzerland"}],
        actions=[
            {"subject": "me", "verbs": ["go"], "params": [{"name": "place", "value": "lake"}]},
            {"subject": "Pepper", "verbs": ["swim"], "object": "ocean"},
            {"verbs": []},
        ],
        topics=["Pepper at the lake", "stock market"],
    )
    grounded = ground(message, answer, extractor="llm", version="1")
    assert len(grounded.invented) == 5
    assert any("Switzerland" in item for item in grounded.invented)
    assert any("ocean" in item for item in grounded.invented)
    kept = [r.knowledge for r in grounded.refs]
    assert Entity(name="Pepper") in kept
    go = next(k for k in kept if isinstance(k, Action))
    assert go.subject == "Kim" and go.verbs == ("go",)
    went = next(r for r in grounded.refs if isinstance(r.knowledge, Action))
    assert message.text[went.span.start : went.span.end] == "went"  # irregular form
    pepper = next(r for r in grounded.refs if r.knowledge == Topic(text="Pepper at the lake"))
    assert (pepper.span.start, pepper.span.end) == (0, len(message.text))  # implied
    # "Lake Geneva": "Geneva" is not in the message
    assert not any(isinstance(k, Entity) and k.name == "Lake Geneva" for k in kept)


def test_the_speaker_is_implied_without_a_pronoun() -> None:
    message = _message("Sounds great, see you at noon!", speaker="Priya Shah")
    answer = _answer(actions=[{"subject": "Priya", "verbs": ["meet"], "object": "Lee"}])
    grounded = ground(message, answer, extractor="llm", version="1")
    assert grounded.invented == []
    (ref,) = grounded.refs
    assert ref.span.start == 0 and ref.span.end == len(message.text)


def test_a_capitalised_name_is_not_a_pronoun_and_the_same_case_is_preferred() -> None:
    message = _message("You may join us when we visit the US in May.")
    answer = _answer(
        entities=[{"name": "US", "types": ["country"]}, {"name": "May", "types": ["month"]}],
        actions=[{"subject": "we", "verbs": ["visit"], "object": "US"}],
    )
    grounded = ground(message, answer, extractor="llm", version="1")
    assert grounded.invented == []
    spans = {
        getattr(r.knowledge, "name", None): (r.span.start, r.span.end)
        for r in grounded.refs
        if isinstance(r.knowledge, Entity)
    }
    us, may = message.text.index("US"), message.text.index("May")
    assert spans == {"US": (us, us + 2), "May": (may, may + 3)}  # not "us", not "may"
    (action,) = [r.knowledge for r in grounded.refs if isinstance(r.knowledge, Action)]
    assert (action.subject, action.verbs, action.object) == ("Kim", ("visit",), "US")
    # written as pronouns, "We" and "us" are still the speaker
    sent = _message("Are you coming with us? We leave at noon.")
    assert ground(sent, _answer(entities=[{"name": "We"}]), **_LLM).refs == []
    (kim,) = ground(sent, _answer(entities=[{"name": "Kim"}]), **_LLM).refs  # the speaker
    assert sent.text[kim.span.start : kim.span.end] == "us"
    capitals = _message("THE US OPEN WAS GREAT")  # no pronoun here: the whole message
    (kim,) = ground(capitals, _answer(entities=[{"name": "Kim"}]), **_LLM).refs
    assert (kim.span.start, kim.span.end) == (0, len(capitals.text))
    assert ground(sent, _answer(entities=[{"name": "us"}]), **_LLM).refs == []


def test_a_topic_needs_most_of_its_words_in_the_message() -> None:
    message = _message("Meet me at the café, my knee hurts after long runs.")
    answer = _answer(
        topics=["knee surgery", "quantum café physics", "knee", "hurting knee", "long run café"]
    )
    grounded = ground(message, answer, extractor="llm", version="1")
    assert sorted(grounded.invented) == ["topic 'knee surgery'", "topic 'quantum café physics'"]
    spans = {
        r.knowledge.text: message.text[r.span.start : r.span.end]
        for r in grounded.refs
        if isinstance(r.knowledge, Topic)
    }
    assert spans == {"knee": "knee", "hurting knee": message.text, "long run café": message.text}


_LLM = {"extractor": "llm", "version": "1"}

_words = st.sampled_from(
    ["Kim", "Lee", "dog", "dogs", "walked", "walk", "the", "I", "you", "Boston", "café", "x"]
)


@settings(max_examples=150, deadline=None)
@given(
    text=st.lists(_words, min_size=0, max_size=12).map(" ".join),
    names=st.lists(st.lists(_words, min_size=1, max_size=3).map(" ".join), max_size=4),
)
def test_every_kept_item_has_a_span_in_its_message(text: str, names: list[str]) -> None:
    message = _message(text)
    answer = _answer(
        entities=[{"name": n} for n in names],
        actions=[{"subject": n, "verbs": ["walk"]} for n in names],
        topics=names,
    )
    grounded = ground(message, answer, extractor="llm", version="1")
    assert len(grounded.refs) + len(grounded.invented) <= 3 * len(names)
    for ref in grounded.refs:
        assert 0 <= ref.span.start <= ref.span.end <= len(text)
        name = getattr(ref.knowledge, "name", None)
        covered = text[ref.span.start : ref.span.end].lower()
        if name is not None and (ref.span.start, ref.span.end) != (0, len(text)):
            assert covered == name.lower() or covered in {"i", "you"} or covered.split()
