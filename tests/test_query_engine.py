"""Query expressions run against a real index of the bundled example chat."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from structrag import Index, NotFoundError, QueryError
from structrag.query.timeexpr import TimeRange, relative_range, resolve
from structrag.translate.offline import SpacyTranslator


@pytest.fixture(scope="module")
def ix(example_index: Path) -> Iterator[Index]:
    with Index(example_index, read_only=True) as index:
        yield index


def ids(index: Index, expression: str, **kw: object) -> list[str]:
    return [m.id for m in index.query(expression, limit=None, **kw).messages]  # type: ignore[arg-type]


def speakers(index: Index, message_ids: list[str]) -> set[str]:
    return {index.show(i)["speaker"] for i in message_ids}


def test_entity_pattern_finds_every_mention(ix: Index) -> None:
    found = ids(ix, "entity:Biscuit")
    assert {"m11", "m27", "m35"} <= set(found)
    for message_id in found:
        assert "biscuit" in ix.show(message_id)["text"].lower()


def test_action_pattern_with_subject_verb(ix: Index) -> None:
    assert ids(ix, "action(Marco, adopt, *)") == ["m11"]
    assert ids(ix, "action(Marco, adopt, beagle)") == []


def test_verb_aliases_and_indirect_objects(ix: Index) -> None:
    # "tell" finds the metadata "say" actions: Sam's messages to Priya.
    told = ids(ix, "action(Sam, tell, *, Priya)")
    assert told
    assert speakers(ix, told) == {"Sam"}


def test_nested_entity_pattern_in_an_action(ix: Index) -> None:
    found = ids(ix, "action(*, adopt, entity(type=puppy))")
    assert found == ["m11"]


def test_facet_patterns_find_the_facets_the_store_holds(ix: Index) -> None:
    """Any facet, not only a job: its name is not an index term, the property index is."""
    for expression, facet, value in (
        ("entity(facet.owner=Marco)", "owner", "Marco"),
        ("entity(facet.owner=*)", "owner", None),  # "owner" is a word of the chat too
        ("entity(facet.quality=*)", "quality", None),
        ("entity(name=cat, facet.owner=*)", "owner", None),
    ):
        sql = "SELECT DISTINCT message_id FROM v_facets WHERE facet = ?"
        params = [facet]
        if value is not None:
            sql += " AND value = ?"
            params.append(value)
        if "name=cat" in expression:
            sql += " AND lower(entity) = 'cat'"
        held = {row[0] for row in ix.sql(sql, params)}
        assert held, expression
        assert set(ids(ix, expression)) == held, expression


def test_a_category_of_two_words_is_not_its_head_words(tmp_path: Path) -> None:
    """kind:"martial arts" asks for karate or judo, never for the kinds of "art"."""
    chat = tmp_path / "c.jsonl"
    chat.write_text(
        '{"speaker": "Bo", "text": "I painted a watercolor of the harbour."}\n'
        '{"speaker": "Ana", "text": "Sculpture is my favourite kind of art."}\n'
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        plan = index.query('kind:"martial arts"').plan
        assert "watercolor" not in plan and "paint" not in plan and "sculptur" not in plan
        assert "watercolor" in index.query("kind:arts").plan  # the head word alone still is


def test_a_boosted_scope_alone_in_its_group_names_itself(ix: Index) -> None:
    from structrag import QueryError

    for expression in ("knee AND speaker:Marco^2", "NOT speaker:Marco^2", "speaker:Marco^2"):
        with pytest.raises(QueryError, match=r"speaker:Marco\^2 only prefers") as info:
            ix.query(expression)
        assert "AND, OR and NOT make groups" in str(info.value)
    assert ids(ix, "knee speaker:Marco^2")  # beside words it prefers


def test_metadata_conditions_say_when_no_message_has_the_key(tmp_path: Path) -> None:
    chat = tmp_path / "c.jsonl"
    chat.write_text(
        '{"speaker": "Ana", "text": "first", "metadata": {"channel": "dm"}}\n'
        '{"speaker": "Bo", "text": "second", "metadata": {"channel": "team"}}\n'
        '{"speaker": "Ana", "text": "third"}\n'
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        found = index.query("meta.chanel = dm")
        assert not found.messages
        assert "no message in scope has the metadata key 'chanel' (keys: channel)" in found.notes
        # a message without the key is not equal to the value either: != is NOT =
        assert ids(index, "meta.channel != dm") == ids(index, "NOT meta.channel = dm")
        assert set(ids(index, "meta.channel != dm")) == {"2", "3"}


def test_topic_pattern(ix: Index) -> None:
    found = ids(ix, 'topic:"cooking class"')
    assert "m18" in found
    assert all("cooking class" in ix.show(i)["text"].lower() for i in found)


def test_terms_rank_messages_that_mention_them_first(ix: Index) -> None:
    result = ix.query("sourdough")
    assert result.messages[0].id == "m7"
    scores = [m.score for m in result.messages]
    assert scores == sorted(scores, reverse=True)


def test_speaker_and_recipient_scopes(ix: Index) -> None:
    assert speakers(ix, ids(ix, "speaker:Sam")) == {"Sam"}
    to_sam = ids(ix, "to:Sam")
    assert to_sam and speakers(ix, to_sam) == {"Priya"}


def test_scopes_in_a_group_restrict_it(ix: Index) -> None:
    found = ids(ix, "Biscuit date:2024-07")
    assert found
    for message_id in found:
        assert ix.show(message_id)["timestamp"].startswith("2024-07")
    assert set(ids(ix, "speaker:Sam OR speaker:Marco")) == set(ids(ix, "speaker:Sam")) | set(
        ids(ix, "speaker:Marco")
    )


def test_relative_time_resolves_against_the_conversation(ix: Index) -> None:
    result = ix.query('when:"last month"', limit=None)
    assert result.messages
    for message in result.messages:
        assert ix.show(message.id)["timestamp"].startswith("2024-06")
    assert any("anchor 2024-07-20" in note for note in result.notes)


def test_relative_time_counts_from_each_conversations_own_last_message(tmp_path: Path) -> None:
    rows = [
        {
            "conversation": "old",
            "speaker": "Ann",
            "timestamp": "2023-05-02",
            "text": "Ann baked bread.",
        },
        {
            "conversation": "old",
            "speaker": "Ann",
            "timestamp": "2023-05-20",
            "text": "Ann ran a race.",
        },
        {
            "conversation": "new",
            "speaker": "Bo",
            "timestamp": "2024-01-03",
            "text": "Bo sold his car.",
        },
        {
            "conversation": "new",
            "speaker": "Bo",
            "timestamp": "2024-01-25",
            "text": "Bo went skiing.",
        },
    ]
    chat = tmp_path / "chats.jsonl"
    chat.write_text("\n".join(json.dumps(r) for r in rows))
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])

        def texts(expression: str) -> set[str]:
            found = index.query(expression, limit=None).messages
            return {index.show(m.id, m.conversation)["text"] for m in found}

        # The month of each conversation's last message, not the newest one's alone.
        assert len(texts('when:"this month"')) == 4
        assert texts('speaker:Ann when:"this month"') == {"Ann baked bread.", "Ann ran a race."}
        assert texts('conversation:new when:"this month"') == {
            "Bo sold his car.",
            "Bo went skiing.",
        }


def test_and_not_and_phrases_hold_the_messages_that_say_the_words(tmp_path: Path) -> None:
    said = [
        ("Ann", "I joined a support group for runners."),
        ("Bo", "That sounds great."),
        ("Ann", "After my injury, our group support meetings helped a lot."),
        ("Bo", "My pottery class was fun today."),
        ("Ann", "Nice bowl! Show me next time."),
    ]
    chat = tmp_path / "club.jsonl"
    chat.write_text(
        "\n".join(
            json.dumps({"id": f"m{i}", "speaker": w, "text": t}) for i, (w, t) in enumerate(said)
        )
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        # The text window ranks a reply with the words before it; AND and NOT do not.
        assert "m4" in ids(index, "pottery")
        assert sorted(ids(index, "NOT pottery")) == ["m0", "m1", "m2", "m4"]
        assert ids(index, "pottery AND speaker:Ann") == []
        assert ids(index, "pottery AND speaker:Bo") == ["m3"]
        # A phrase puts the messages with its words together first.
        quoted = ids(index, '"support group"')
        assert quoted[0] == "m0" and "m2" in quoted
        assert ids(index, '"group support"')[0] == "m2"
        # Under NOT and AND a phrase holds the messages with its words together only.
        assert sorted(ids(index, 'NOT "support group"')) == ["m1", "m2", "m3", "m4"]
        assert ids(index, '"support group" AND speaker:Ann') == ["m0"]


def test_a_query_that_finds_nothing_says_what_the_scope_lacks(ix: Index) -> None:
    def notes(expression: str) -> list[str]:
        result = ix.query(expression)
        assert not result.messages
        return result.notes

    (typo,) = notes("biscuti")
    assert "no message in scope has 'biscuti'" in typo and "biscuti~" in typo
    assert any("no one called 'Zed'" in n and "Marco" in n for n in notes("speaker:Zed Biscuit"))
    assert any("no conversation 'nowhere'" in n for n in notes("conversation:nowhere Biscuit"))
    assert any("only stopwords" in n for n in notes("the OR and"))
    assert not ix.query("Biscuit").notes  # found: nothing to say
    # scopes a message cannot be in at once, and what the index lacks
    (both,) = notes("speaker:Marco speaker:Priya")
    assert "a message has one speaker" in both and "speaker:Marco OR speaker:Priya" in both
    (apart,) = notes("date:2024-05-01 date:2024-06-01")
    assert "do not overlap" in apart
    (documents,) = notes("source:knowledge")
    assert "holds no documents" in documents and "knowledge add" in documents
    assert not ix.query("speaker:Marco OR speaker:Priya").notes
    # what NOT leaves out is no scope a message must be in; one name in two cases is one
    assert not any("one speaker" in n for n in notes("speaker:Marco NOT speaker:Priya xyzzyq"))
    assert not any("one speaker" in n for n in notes("speaker:Marco speaker:marco xyzzyq"))
    # a scope with only stopwords beside it finds the scope's messages, and says why
    scoped = ix.query("speaker:Marco the", limit=None)
    assert speakers(ix, [m.id for m in scoped.messages]) == {"Marco"}
    assert len(scoped.messages) == len(ix.query("speaker:Marco", limit=None).messages)
    assert any("'the' is only stopwords" in n and "runs without it" in n for n in scoped.notes)


def test_a_word_finds_its_irregular_forms(tmp_path: Path) -> None:
    chat = tmp_path / "shop.jsonl"
    said = [
        "Ben bought new boots yesterday.",
        "The children went to the park.",
        "Nice!",
        "I am a bit tired today.",
    ]
    chat.write_text("\n".join(json.dumps({"id": f"m{i}", "text": t}) for i, t in enumerate(said)))
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        assert ids(index, "buy")[0] == "m0"
        assert ids(index, "child go")[0] == "m1"
        assert ids(index, "went")[0] == "m1"
        assert "m3" not in ids(index, "bite")  # "bit" is a word of its own
        # "live" is not "living" for a living: no job in its words.
        assert "job" not in index.query("live").plan
        # the messages have no dates: a date scope says so
        assert index.query("date:2024").notes == ["date:2024: no message in scope has a date"]


def test_boolean_operators(ix: Index) -> None:
    biscuit = set(ids(ix, "Biscuit"))
    not_marco = set(ids(ix, "Biscuit AND NOT speaker:Marco"))
    assert not_marco and not_marco < biscuit
    assert "Marco" not in speakers(ix, sorted(not_marco))
    both = set(ids(ix, "engine AND Biscuit"))
    assert both and both <= set(ids(ix, "engine")) & biscuit
    assert "m35" in both  # "Biscuit loved it until the engine stopped"


def test_during_keeps_the_turns_around_a_topic(ix: Index) -> None:
    found = ids(ix, "during:sailboat")
    assert {"m8", "m9", "m10"} <= set(found)
    assert "m30" not in found
    # three turns from the messages that say it (m11, m26, and m13's topic), not from
    # their text windows
    beagle = set(ids(ix, "during:beagle"))
    assert {"m11", "m14", "m16", "m23", "m26"} <= beagle
    assert not {"m18", "m21"} & beagle


def test_conversation_scope_and_unknown_conversation(ix: Index) -> None:
    assert ids(ix, "Biscuit", conversation="friends")
    with pytest.raises(NotFoundError):
        ix.query("Biscuit", conversation="nope")


def test_entity_without_constraints_is_refused(ix: Index) -> None:
    with pytest.raises(QueryError):
        ix.query("entity(*)")


def test_knowledge_hits_are_ranked_refs(ix: Index) -> None:
    result = ix.query("entity:Helena")
    assert result.refs
    ref_ids = [r for r, _ in result.refs]
    texts = ix.store.knowledge_texts(ref_ids)
    assert set(texts) == set(ref_ids)
    assert {texts[r][1] for r in ref_ids} == {"Helena"}


def test_explain_shows_the_plan(ix: Index) -> None:
    result = ix.query('action(Marco, sail, *) AND NOT when:"last month"')
    assert "PatternMatch" in result.plan and "NoneOf" in result.plan
    assert "ActionPattern" in result.tree


@pytest.fixture
def meta_index(tmp_path: Path) -> Iterator[Index]:
    path = tmp_path / "tickets.jsonl"
    rows = [
        {
            "id": "t1",
            "speaker": "Ann",
            "text": "Printer jam on floor two.",
            "metadata": {"priority": 3, "channel": "support", "title": "Printer AI helper"},
        },
        {
            "id": "t2",
            "speaker": "Bo",
            "text": "VPN drops every hour.",
            "metadata": {"priority": 1, "channel": "support", "title": "Network"},
        },
        {
            "id": "t3",
            "speaker": "Cy",
            "text": "Lunch order for Friday.",
            "metadata": {"priority": 5, "channel": "random", "title": "Food"},
        },
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    with Index(tmp_path / "idx") as index:
        index.ingest([path])
        yield index


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("meta.priority >= 3", {"t1", "t3"}),
        ("meta.priority < 3", {"t2"}),
        ("meta.priority = 5", {"t3"}),
        ("meta.channel = support", {"t1", "t2"}),
        ("meta.channel != support", {"t3"}),
        ('meta.title contains "ai"', {"t1"}),
        ("meta.missing = 1", set()),
    ],
)
def test_relational_filters_on_metadata(
    meta_index: Index, expression: str, expected: set[str]
) -> None:
    assert set(ids(meta_index, expression)) == expected


@pytest.mark.parametrize(
    ("phrase", "start", "end"),
    [
        ("last May", datetime(2024, 5, 1), datetime(2024, 6, 1)),
        ("in July", datetime(2024, 7, 1), datetime(2024, 8, 1)),
        ("last week", datetime(2024, 7, 8), datetime(2024, 7, 15)),
        ("yesterday", datetime(2024, 7, 19), datetime(2024, 7, 20)),
        ("3 days ago", datetime(2024, 7, 17), datetime(2024, 7, 18)),
        ("last year", datetime(2023, 1, 1), datetime(2024, 1, 1)),
        ("2 months ago", datetime(2024, 5, 1), datetime(2024, 6, 1)),
        ("last July", datetime(2024, 7, 1), datetime(2024, 8, 1)),  # on or before the anchor
        ("after May 2024", datetime(2024, 6, 1), None),
        ("since June", datetime(2024, 6, 1), None),
        ("before last May", None, datetime(2024, 5, 1)),
        ("until June 2024", None, datetime(2024, 7, 1)),
        ("between June 1 and June 9", datetime(2024, 6, 1), datetime(2024, 6, 10)),
        ("from January to March 2023", datetime(2023, 1, 1), datetime(2023, 4, 1)),
        ("from December to January 2024", datetime(2023, 12, 1), datetime(2024, 2, 1)),
        # no year, and the end's day of the year after the anchor's: the range still ends
        # after it starts (each end alone would be the latest such day before the anchor)
        ("between June 1 and August 15", datetime(2024, 6, 1), datetime(2024, 8, 16)),
        ("from July to September", datetime(2024, 7, 1), datetime(2024, 10, 1)),
        # the latest such range that started on or before the anchor, as "in the winter"
        ("from May to February", datetime(2024, 5, 1), datetime(2025, 3, 1)),
        ("on July 4", datetime(2024, 7, 4), datetime(2024, 7, 5)),
        ("25 July", datetime(2023, 7, 25), datetime(2023, 7, 26)),  # after the anchor
        ("in the last two weeks", datetime(2024, 7, 7), datetime(2024, 7, 21)),
        # numeric dates and seasons, absolute and relative
        ("20/05/2023", datetime(2023, 5, 20), datetime(2023, 5, 21)),
        ("on 5/20/2023", datetime(2023, 5, 20), datetime(2023, 5, 21)),
        ("20.05.2023", datetime(2023, 5, 20), datetime(2023, 5, 21)),
        ("between 01/06/2024 and 30/06/2024", datetime(2024, 6, 1), datetime(2024, 7, 1)),
        ("spring 2023", datetime(2023, 3, 1), datetime(2023, 6, 1)),
        ("in the winter of 2023", datetime(2023, 12, 1), datetime(2024, 3, 1)),
        # relative to 20 July 2024, in the summer: "last summer" is the one before
        ("last summer", datetime(2023, 6, 1), datetime(2023, 9, 1)),
        ("this summer", datetime(2024, 6, 1), datetime(2024, 9, 1)),
        ("in the spring", datetime(2024, 3, 1), datetime(2024, 6, 1)),
        ("last winter", datetime(2023, 12, 1), datetime(2024, 3, 1)),
    ],
)
def test_relative_phrases(phrase: str, start: datetime | None, end: datetime | None) -> None:
    found = resolve(phrase, datetime(2024, 7, 20, 12, 0))
    assert found is not None
    assert (found.start, found.end) == (start, end)


def test_absolute_dates_need_no_anchor() -> None:
    found = resolve("8 May 2023", None)
    assert found is not None and found.start == datetime(2023, 5, 8)
    assert resolve("last May", None) is None
    after = resolve("after March 2024", None)
    assert after is not None and (after.start, after.end) == (datetime(2024, 4, 1), None)
    assert resolve("between June 9 and June 1 2024", None) is None  # ends before it starts
    assert resolve("between June 9 and June 1", datetime(2024, 7, 20)) is None


def test_a_numeric_date_of_no_clear_order_is_not_read() -> None:
    """05/06/2023 is 5 June or 6 May by the writer's habit, which a question hides."""
    assert resolve("05/06/2023", datetime(2024, 7, 20)) is None
    assert resolve("between 01/06/2024 and 02/06/2024", datetime(2024, 7, 20)) is None


def test_questions_find_numeric_dates_and_seasons() -> None:
    translator = SpacyTranslator()
    for question, phrase in [
        ("What did Kevin say on 20/05/2023?", "on 20/05/2023"),
        ("What did Marco do in spring 2024?", "in spring 2024"),
        ("Where did Priya go last summer?", "last summer"),
    ]:
        assert translator.translate(question, ["Kevin", "Marco", "Priya"]).time_phrases == [phrase]
    # "the fall" of a person is no season without a year, nor a season before a noun
    for thing in ("Did Sam get hurt in the fall?", "Did Sam sleep in the winter coat?"):
        assert translator.translate(thing, ["Sam"]).time_phrases == [], thing
    assert translator.translate("What did Sam do since last summer?", ["Sam"]).time_phrases == [
        "since last summer"
    ]


def test_a_range_over_the_year_end_holds_the_anchor() -> None:
    """ "between Dec 20 and Jan 5" on 25 December is this one, which the anchor is in: the
    latest such range that started on or before it."""
    found = resolve("between December 20 and January 5", datetime(2024, 12, 25))
    assert found == TimeRange(datetime(2024, 12, 20), datetime(2025, 1, 6))


def test_a_range_past_the_last_message_keeps_its_messages(ix: Index) -> None:
    # the chat ends on 20 July 2024: "August 15" alone would be 15 August 2023
    july = set(ids(ix, 'when:"between July 1 and August 15"'))
    assert july and july == set(ids(ix, "when:2024-07-01..2024-08-15"))


def test_derived_forms_come_from_the_index(ix: Index) -> None:
    view = ix.engine.view(None)
    assert "teacher" in view._derived_forms("teach")
    assert view._derived_forms("camp") == []  # "campaign" is not a derived form
    related = dict(view.related_terms("teach"))
    assert related.get("teacher", 0) > 0


def test_conversation_summaries(ix: Index) -> None:
    (summary,) = ix.conversation_summaries()
    assert summary["id"] == "friends"
    assert summary["messages"] == 46
    assert summary["speakers"] == ["Marco", "Priya", "Sam"]
    assert summary["first"].startswith("2024-05-03") and summary["last"].startswith("2024-07-20")


def test_knowledge_hits_belong_to_the_messages_kept(ix: Index) -> None:
    result = ix.query("entity:Biscuit AND speaker:Marco", limit=None)
    kept = {m.mkey for m in result.messages}
    assert kept and result.refs
    owners = ix.store.refs_by_ids([r for r, _ in result.refs])
    assert {mkey for mkey, _ in owners.values()} <= kept


def test_an_empty_index_answers_with_nothing(tmp_path: Path) -> None:
    with Index(tmp_path / "empty") as index:
        assert index.query("entity:Biscuit OR dog").messages == []
        answer = index.ask("Where does Marco work?", budget=100)
        assert answer.message_ids == [] and answer.context.tokens == 0


def test_dates_at_the_end_of_the_calendar_do_not_overflow(ix: Index) -> None:
    end = datetime(9999, 12, 31, 12)
    last_day = datetime(9999, 12, 31)
    for phrase in ("today", "this week", "this month", "this year", "recently"):
        found = relative_range(phrase, end)
        assert found is not None and found.start is not None, phrase
        assert found.start <= last_day and found.end == datetime.max, phrase
    assert relative_range("yesterday", end) == TimeRange(datetime(9999, 12, 30), last_day)
    assert ids(ix, "when:9999") == []
    assert ids(ix, "when:9999-12-31..9999-12-31") == []


def test_hits_after_a_message_without_knowledge_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "two.json"
    conversations = [
        {"id": "zeta", "messages": [{"speaker": "Ann", "text": "Biscuit is a dog."}, {"text": ""}]},
        {"id": "alpha", "messages": [{"speaker": "Bo", "text": "Biscuit likes the park."}]},
    ]
    path.write_text(json.dumps({"conversations": conversations}), encoding="utf-8")
    with Index(tmp_path / "index") as index:
        index.ingest([path])
        result = index.query("entity:Biscuit", limit=None)
        owners = index.store.refs_by_ids([r for r, _ in result.refs])
        kept = {mkey for mkey, _ in owners.values()}
        assert kept == {m.mkey for m in result.messages} and len(kept) == 2


@pytest.mark.parametrize("direct", [5_000, 0])
def test_the_store_checks_property_conditions_as_the_conversation_table_does(
    example_index: Path, monkeypatch: pytest.MonkeyPatch, direct: int
) -> None:
    """A scope wider than a conversation has its pattern conditions checked by the store
    (few candidates: their property rows read in one SELECT and checked; many: each
    condition's refs over the index, in SQL, kept per generation); a conversation's
    against its property table. All agree."""
    from structrag.query import derived
    from structrag.query.derived import _by_name
    from structrag.store.protocols import PropertyCondition

    monkeypatch.setattr(derived, "MEETING_DIRECT_REFS", direct)
    with Index(example_index, read_only=True) as ix:
        (conversation,) = {c for (c,) in ix.sql("SELECT DISTINCT conversation FROM messages")}
        table = _by_name(ix.store.conversation_properties(conversation))
        refs = sorted(table)
        rows = ix.sql("SELECT DISTINCT name, value FROM properties ORDER BY name, value")
        checked = 0
        for i, (name, value) in enumerate(rows[::7]):
            word = value.split()[0]
            conditions = [
                PropertyCondition(name, (value, "no-such-value")),
                PropertyCondition(name, (word,), whole_words=True),
            ][i % 2 :][:1]
            if i % 3 == 0:  # two conditions at once: refs meeting both
                other_name, other_value = rows[(i * 5) % len(rows)]
                conditions.append(PropertyCondition(other_name, (other_value,)))
            expected = [
                r
                for r in refs
                if all(any(c.accepts(v) for v in table[r].get(c.name, ())) for c in conditions)
            ]
            assert ix.store.refs_meeting(refs, conditions) == expected, conditions
            assert ix.engine.derived.refs_meeting(refs, conditions) == expected, conditions
            assert set(expected) <= set(ix.store.refs_meeting(None, conditions))
            checked += bool(expected)
        assert checked > 10


def test_a_word_written_without_its_accents_finds_it(tmp_path: Path) -> None:
    """An accent left out is no typo: "zurich" finds Zürich as it is, and a question
    "Who moved to Zurich?" too; fuzzy terms find them as well."""
    chat = tmp_path / "trip.jsonl"
    said = ["We met Zoë Ångström in Zürich.", "The café was closed.", "André read my résumé."]
    chat.write_text("\n".join(json.dumps({"id": f"m{i}", "text": t}) for i, t in enumerate(said)))
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        assert ids(index, "zurich")[0] == "m0"  # (and its neighbour, by its text window)
        # a final é, which the stemmer takes for an e and drops
        assert ids(index, "resume")[0] == ids(index, "andre")[0] == "m2"
        assert ids(index, "angstrom")[0] == "m0"  # two accents
        assert ids(index, "cafe")[0] == "m1"
        assert "m0" in index.ask("What did they say about Zurich?", budget=100).message_ids
        assert ids(index, "zurich~")[0] == "m0"
        assert ids(index, "angstrom~")[0] == "m0"  # two accents
        assert ids(index, "cafe~")[0] == "m1"


def test_an_entity_named_in_symbols_is_found_by_its_name(tmp_path: Path) -> None:
    chat = tmp_path / "tech.jsonl"
    said = ["I am rewriting the parser in C++ and maybe in Go later.", "Sounds fun!"]
    chat.write_text(
        "\n".join(
            json.dumps({"id": f"t{i}", "speaker": "Ana", "text": t}) for i, t in enumerate(said)
        )
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        assert "c++" in {e["name"].lower() for e in index.entities()}
        assert ids(index, 'entity:"C++"') == ["t0"]
