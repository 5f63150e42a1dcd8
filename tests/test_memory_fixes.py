"""Agent memory, as an agent builder found it: a context window for any message, the
newest statement by the message's time, forgetting that forgets, finished goals, the
replacement brought into a ranking, the agent's own facts, ids per agent, shared rooms,
pruning that keeps what was learned, ``get`` marking superseded memories, and ids a URL
cannot hold. Real indexes (DuckDB, Whoosh) and spaCy throughout."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest

from structrag import Index, MemoryInputError, NotFoundError
from structrag.memory.api import Memory
from structrag.memory.supersession import Supersession
from structrag.query.modes import Hits


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


def _section(window: object, name: str) -> list[str]:
    (found,) = [s for s in window.sections if s.name == name]  # type: ignore[attr-defined]
    return list(found.lines)


# -- 1. a context window for any message ---------------------------------------------------


@pytest.mark.parametrize("message", ["👍", "?", "...", "  !!  "])
def test_a_message_with_no_words_still_gets_its_window(index: Index, message: str) -> None:
    mem = index.memory("bot")
    said = mem.add("I live in Porto.", user="priya", room="dm")
    window = mem.context(message, room="dm", user="priya", budget=500)
    assert said.id in window.ids  # history
    assert any("Porto" in line for line in _section(window, "profile"))
    assert not _section(window, "retrieval") and not window.notes


def test_a_long_message_is_searched_by_its_start_and_says_so(index: Index) -> None:
    mem = index.memory("bot")
    early = mem.add("I've been researching adoption agencies for weeks.", user="kim", room="r")
    for i in range(30):
        mem.add(f"Day {i}: the weather was fine and we walked the dog.", user="kim", room="r")
    message = "What have I been researching about adoption agencies? " + "blah " * 600
    assert len(message) > 2_000
    window = mem.context(message, room="r", user="kim", budget=300)
    assert early.id in window.ids
    assert window.notes and "2,000" in window.notes[0]
    assert window.as_dict()["notes"] == window.notes


def test_a_window_of_a_room_without_messages_says_so(index: Index) -> None:
    """A mistyped room, or none given (the room 'default'), is an empty room: the window
    says so rather than come back empty without a word."""
    mem = index.memory("bot")
    mem.add("I walked the dog.", user="kim", room="dm-kim")
    assert mem.context("hi", room="dm-kim", budget=200).notes == []
    (note,) = mem.context("hi", room="dm-kin", budget=200).notes
    assert "room 'dm-kin' holds no messages of agent 'bot' yet" in note
    (note,) = mem.context("hi", budget=200).notes
    assert "room 'default' (no room was given) holds no messages" in note


def test_a_search_query_too_long_is_refused_as_a_search(index: Index) -> None:
    """Memory and knowledge search say what they were given (a search query), not what
    `ask` says of a question ("write a query expression for `structrag query`")."""
    mem = index.memory("bot")
    mem.add("I walked the dog.", user="kim", room="r")
    index.knowledge.add("Employees get 25 vacation days a year.", shared=True)
    long = "dog " * 600
    for search in (lambda: mem.search(long), lambda: index.knowledge.search(long)):
        with pytest.raises(MemoryInputError) as info:
            search()
        said = str(info.value)
        assert "the search query has 2,400 characters; the limit is 2,000" in said
        assert "structrag query" not in said
    assert [h.memory.text for h in mem.search("dog " * 500)] == ["I walked the dog."]


# -- 2. the statement said later holds -----------------------------------------------------


def test_older_history_written_later_does_not_supersede_newer(index: Index) -> None:
    mem = index.memory("bot")
    berlin = mem.add("I moved to Berlin.", user="priya", room="dm", timestamp=datetime(2024, 6, 1))
    paris = mem.add("I live in Paris.", user="priya", room="dm", timestamp=datetime(2020, 1, 1))
    assert [e.object for e in mem.profile("priya")] == ["Berlin"]
    assert [f.metadata["object"] for f in mem.facts("priya")] == ["Berlin"]
    old = [e for e in mem.profile("priya", history=True) if e.superseded_by is not None]
    assert [e.object for e in old] == ["Paris"] and paris.id in old[0].sources
    assert mem.get(paris.id).status == "superseded" and mem.get(berlin.id).status is None
    # A statement said later than both, written last, supersedes as before.
    mem.add("I live in Rome now.", user="priya", room="dm", timestamp=datetime(2025, 1, 1))
    assert [e.object for e in mem.profile("priya")] == ["Rome"]


# -- 3. forgetting a fact forgets it; every cited id is one remove takes -------------------


def test_removing_a_fact_forgets_it_from_the_profile_and_the_context(index: Index) -> None:
    mem = index.memory("bot")
    message = mem.add("I am allergic to peanuts and I live in Porto.", user="priya", room="dm")
    (peanuts,) = [f for f in mem.facts(user="priya") if "peanut" in f.text]
    mem.remove(peanuts.id)
    assert [e.object for e in mem.profile("priya")] == ["Porto"]  # the other statement stays
    window = mem.context("what can I eat?", room="dm", user="priya", budget=800)
    assert "peanut" not in "\n".join(_section(window, "profile"))
    assert mem.get(message.id).text.startswith("I am allergic")  # the message stays
    # The profile entry is cited by the message, as before.
    (porto,) = mem.profile("priya")
    assert porto.sources == (message.id,)


def test_every_id_a_context_line_cites_is_one_remove_takes(index: Index) -> None:
    mem = index.memory("bot")
    for i in range(6):
        mem.add(f"Let's go with option {i}. We decided to book the hotel.", user="kim", room="r")
    mem.add("I am allergic to peanuts.", user="kim", room="r")
    mem.compact("r", keep_recent=1)
    window = mem.context("any peanut-free hotel food?", room="r", user="kim", budget=2000)
    cited = window.ids
    assert any(i.startswith("profile-") for i in cited)
    assert any(i.startswith("summary-") for i in cited)
    assert any(i.startswith("observation-") for i in cited)
    profile = next(i for i in cited if i.startswith("profile-"))
    assert "peanut" in mem.get(profile).text  # the fact behind the entry
    with pytest.raises(MemoryInputError, match="room summary"):
        mem.get(next(i for i in cited if i.startswith("summary-")))
    messages = {r.id for r in mem.recent("r", count=50)}
    for line_id in [i for i in cited if i not in messages]:
        try:
            mem.remove(line_id)
        except NotFoundError:  # gone with the summary its compaction made
            assert line_id.startswith("observation-")
    assert not mem.profile("kim") and not mem.summaries("r") and not mem.observations("r")
    assert {r.id for r in mem.recent("r", count=50)} == messages  # the messages stay
    with pytest.raises(MemoryInputError, match="cannot be"):
        mem.add("x", id="profile-1")


# -- 4. a finished goal is no current want; added goals show -------------------------------


def test_a_finished_goal_leaves_the_profile_and_added_goals_show(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I want to book a flat in Lisbon.", user="priya", room="dm")
    (goal,) = mem.recent(table="goals")
    assert [e.status for e in mem.profile("priya")] == ["open"]
    mem.update(goal.id, status="done")
    assert not mem.profile("priya")
    assert [e.status for e in mem.profile("priya", history=True)] == ["done"]
    passport = mem.add("Renew the passport", user="priya", room="dm", table="goals")
    window = mem.context("anything else to do?", room="dm", user="priya", budget=800)
    about = "\n".join(_section(window, "profile"))
    assert "book a flat" not in about
    assert passport.id in window.ids and "Renew the passport" in about
    mem.update(passport.id, status="abandoned")
    window = mem.context("anything else to do?", room="dm", user="priya", budget=800)
    assert passport.id not in window.ids


# -- 5. a replacement outside the ranking is brought in ------------------------------------


def test_a_replacement_the_ranking_lacks_is_brought_in_before_what_it_replaced() -> None:
    replaced = Supersession(frozenset(), {"porto": frozenset({"lisbon"})})
    ranked = Hits(np.array([7, 3, 9]), np.array([0.9, 0.5, 0.1]))
    ids = {3: "porto", 12: "lisbon"}
    moved = Memory._replacements_raised(ranked, replaced, ids)
    assert moved.mkeys.tolist() == [7, 12, 3, 9]
    assert moved.scores.tolist() == [0.9, 0.5, 0.5, 0.1]
    # A chain comes in whole, newest first.
    chain = Supersession(
        frozenset(), {"porto": frozenset({"lisbon"}), "lisbon": frozenset({"berlin"})}
    )
    moved = Memory._replacements_raised(ranked, chain, {**ids, 15: "berlin"})
    assert moved.mkeys.tolist() == [7, 15, 12, 3, 9]


def test_search_brings_in_the_replacement_within_its_scope(index: Index) -> None:
    mem = index.memory("bot")
    porto = mem.add("I live in Porto and work at Acme.", user="priya", room="dm")
    lisbon = mem.add("I moved to Lisbon last month.", user="priya", room="other")
    replaced = mem._supersession()
    ids = mem.parts.replaced[mem.agent][2]
    lone = Hits(np.array([porto.mkey]), np.array([1.0]))
    assert Memory._replacements_raised(lone, replaced, ids).mkeys.tolist() == [
        lisbon.mkey,
        porto.mkey,
    ]
    # A search kept to a room brings in nothing from another room.
    hits = mem.search("Porto", room="dm", count=5)
    assert [h.memory.id for h in hits] == [porto.id]


# -- 6. the agent's own facts supersede ------------------------------------------------------


def test_a_fact_the_agent_adds_is_read_and_supersedes(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I live in Paris.", user="priya", room="dm")
    added = mem.add("priya lives in Berlin", user="priya", table="facts")
    assert [f.id for f in mem.facts("priya")] == [added.id]
    assert [e.object for e in mem.profile("priya")] == ["Berlin"]
    # said of priya as she is named, as the entries of her messages are ("priya lived
    # in Paris"), not as the name the parse was given ("Priya lives in Berlin")
    assert [e.text for e in mem.profile("priya")] == ["priya lives in Berlin"]
    assert mem.profile("priya")[0].sources == (added.id,)
    # Removing it brings Paris back.
    mem.remove(added.id)
    assert [e.object for e in mem.profile("priya")] == ["Paris"]


# -- 7. ids are per agent ------------------------------------------------------------------


def test_ids_are_each_agents_own(index: Index) -> None:
    a, b = index.memory("A"), index.memory("B")
    a.add("A's note", room="team", id="note-1")
    made = b.add("B's note", room="team", id="note-1")
    assert made.id == "note-1"
    assert a.get("note-1").text == "A's note" and b.get("note-1").text == "B's note"
    assert [r.id for r in b.recent("team")] == ["note-1"]
    assert [h.memory.id for h in b.search("note", room="team")] == ["note-1"]
    b.update("note-1", importance="high")
    assert b.get("note-1").importance == "high" and a.get("note-1").importance == "normal"
    # An agent's own id clashes, and says so; another agent's is never named.
    with pytest.raises(MemoryInputError, match="agent 'B'"):
        b.add("again", room="team", id="note-1")
    b.remove("note-1")
    assert a.get("note-1").text == "A's note"
    with pytest.raises(NotFoundError):
        b.get("note-1")
    with pytest.raises(MemoryInputError, match="control characters"):
        b.add("x", id="note\x1fA")


# -- 8. a shared room with no user named ----------------------------------------------------


def test_a_shared_room_with_no_user_named_shows_no_private_facts(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I am allergic to peanuts.", user="sam", room="dm-sam")
    mem.add("Hello team", user="ana", room="team")
    mem.add("Hi all", user="sam", room="team")
    window = mem.context("what's for lunch?", room="team", budget=800)
    assert "peanut" not in window.text
    # A room of one user, no user named: what they said in this room only.
    mem.add("I live in Porto.", user="sam", room="solo")
    window = mem.context("hello", room="solo", budget=800)
    about = "\n".join(_section(window, "profile"))
    assert "Porto" in about and "peanut" not in about
    # Named, the user's profile is theirs to read.
    window = mem.context("what's for lunch?", room="team", user="sam", budget=800)
    assert "peanut" in window.text


# -- 9. pruning old chat keeps what was learned --------------------------------------------


def test_pruning_old_messages_keeps_the_facts_learned_from_them(index: Index) -> None:
    mem = index.memory("bot")
    said = mem.add("I live in Paris.", user="u", room="dm", timestamp=datetime(2020, 1, 1))
    report = mem.prune(older_than="90d", dry_run=False)
    assert report.removed == [said.id]
    with pytest.raises(NotFoundError):
        mem.get(said.id)
    (fact,) = mem.facts("u")
    assert fact.text == "u lives in Paris"
    assert fact.metadata["source_removed"]["ids"] == [said.id]
    assert [e.sources for e in mem.profile("u")] == [(fact.id,)]
    assert "Paris" in mem.context("where do I live?", room="dm", user="u").text
    # remove() still takes what rests on the message with it.
    again = mem.add("I live in Rome.", user="v", room="dm")
    mem.remove(again.id)
    assert not mem.facts("v") and not mem.profile("v")


# -- 11. get marks superseded memories -------------------------------------------------------


def test_get_marks_a_superseded_memory(index: Index) -> None:
    mem = index.memory("bot")
    porto = mem.add("I live in Porto.", user="priya", room="dm")
    mem.add("I moved to Lisbon.", user="priya", room="dm")
    assert mem.get(porto.id).status == "superseded"
    (old,) = [f for f in mem.facts("priya", history=True) if f.status == "superseded"]
    assert mem.get(old.id).status == "superseded"


# -- 13. ids a URL path cannot hold ----------------------------------------------------------


@pytest.mark.parametrize("bad", [".", ".."])
def test_dot_ids_are_refused(index: Index, bad: str) -> None:
    mem = index.memory("bot")
    with pytest.raises(MemoryInputError, match="URL path"):
        mem.add("x", id=bad)
    assert mem.count() == 0
