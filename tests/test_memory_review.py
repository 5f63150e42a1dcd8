"""Agent memory after review: profile entries found by their memories' keys (ids repeat
across rooms), the supersession read in one query, entries of indexes written before
entries cited facts, a goal stated twice, and scoped ids as the index-wide views show
them. Real indexes (DuckDB, Whoosh) and spaCy throughout."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest

from structrag import Index
from structrag.memory.api import Memory
from structrag.shapes import query_json
from structrag.store.duckdb.memory import DuckDBMemory


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        yield ix


def _section(window: Any, name: str) -> list[str]:
    (found,) = [s for s in window.sections if s.name == name]
    return list(found.lines)


# -- 1. an entry's memories by key, not by id ------------------------------------------------


def _two_f1(index: Index, *, sam_first: bool = False) -> Memory:
    mem = index.memory("bot")
    said = [
        ("priya lives in Berlin", "priya", "dm-priya"),
        ("sam works at Acme", "sam", "work"),
    ]
    for text, user, room in reversed(said) if sam_first else said:
        mem.add(text, user=user, table="facts", id="f1", room=room)
    return mem


def test_get_profile_n_returns_the_entrys_own_memory_where_its_id_repeats(index: Index) -> None:
    mem = _two_f1(index)
    (priya,) = mem.profile("priya")
    (sam,) = mem.profile("sam")
    got = mem.get(f"profile-{priya.entry_id}")
    assert (got.room, got.text) == ("dm-priya", "priya lives in Berlin")
    got = mem.get(f"profile-{sam.entry_id}")
    assert (got.room, got.text) == ("work", "sam works at Acme")


def test_remove_profile_n_leaves_another_users_fact_with_the_same_id(index: Index) -> None:
    mem = _two_f1(index)
    (priya,) = mem.profile("priya")
    mem.remove(f"profile-{priya.entry_id}")
    assert mem.profile("priya") == []
    assert [e.text for e in mem.profile("sam")] == ["sam works at Acme"]
    assert [(f.room, f.text) for f in mem.facts()] == [("work", "sam works at Acme")]


def test_an_entry_shows_its_own_rooms_where_an_id_repeats(index: Index) -> None:
    mem = _two_f1(index, sam_first=True)
    mem.add("Hi again.", user="priya", room="dm-priya")  # the room's user: what she said here
    window = mem.context("where does she live?", room="dm-priya", budget=600)
    profile = _section(window, "profile")
    assert any(line.startswith("[profile-") and "Berlin" in line for line in profile)
    assert not any("Acme" in line for line in profile)


def test_a_message_id_in_another_room_is_not_superseded_with_it(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I live in Porto.", user="priya", room="dm", id="m1")
    mem.add("I moved to Lisbon.", user="priya", room="dm", id="m2")
    hello = mem.add("Hello, good to see you.", user="sam", room="work", id="m1")
    assert mem.get("m1", room="dm").status == "superseded"
    assert mem.get("m1", room="work").status is None
    assert [r.status for r in mem.recent("work")] == [None]
    assert hello.id == "m1"


# -- 2. the supersession in one query ----------------------------------------------------------


def test_the_supersession_reads_no_memories(index: Index, monkeypatch: Any) -> None:
    mem = index.memory("bot")
    mem.add("I live in Porto.", user="priya", room="dm")
    lisbon = mem.add("I moved to Lisbon.", user="priya", room="dm")
    mem.add("I live in Rome. I want to learn to sail.", user="sam", room="dm-sam")

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the supersession loads memories")

    for name in ("memories", "memories_by_keys", "sources", "profile_entries"):
        monkeypatch.setattr(DuckDBMemory, name, refused)
    replaced = mem._supersession()
    porto = next(k for k, v in replaced.replaced_by.items() if str(lisbon.mkey) in v)
    assert int(porto) != lisbon.mkey and len(replaced.statements) == 1


# -- 3. entries of an index written before entries cited facts ---------------------------------


def _as_written_before(path: Path) -> None:
    """Make every profile entry cite the messages its memories were made from, as an index
    written before entries cited facts has them."""
    with duckdb.connect(str(path / "structrag.duckdb")) as con:
        con.execute(
            "UPDATE profile_entries SET source_mkeys = (SELECT list(DISTINCT s.source_mkey) "
            "FROM memory_sources s WHERE list_contains(profile_entries.source_mkeys, s.mkey) "
            "AND s.source_kind = 'message')"
        )
        cited = con.execute(
            "SELECT count(*) FROM (SELECT unnest(source_mkeys) AS k FROM profile_entries) c "
            "JOIN messages m ON m.mkey = c.k WHERE m.memory_table = 'messages'"
        ).fetchall()
    assert cited[0][0] == 3


def _old_index(tmp_path: Path) -> Path:
    path = tmp_path / "old"
    with Index(path) as ix:
        mem = ix.memory("bot")
        mem.add("I live in Porto. I am allergic to peanuts.", user="priya", room="dm", id="m1")
        mem.add("I want to learn Portuguese.", user="priya", room="dm", id="m2")
    _as_written_before(path)
    return path


def test_an_old_goal_finished_leaves_the_profile(tmp_path: Path) -> None:
    with Index(_old_index(tmp_path)) as ix:
        mem = ix.memory("bot")
        (goal,) = mem.recent(table="goals")
        assert mem.update(goal.id, status="done").status == "done"
        assert [e.text for e in mem.profile("priya")] == [
            "priya lives in Porto",
            "priya is allergic to peanuts",
        ]
        (finished,) = [e for e in mem.profile("priya", history=True) if e.category == "goal"]
        assert finished.status == "done" and finished.sources == ("m2",)
        window = mem.context("what should I learn?", room="dm", user="priya", budget=600)
        assert not any("Portuguese" in line for line in _section(window, "profile"))


def test_removing_an_old_entrys_fact_forgets_the_entry(tmp_path: Path) -> None:
    with Index(_old_index(tmp_path)) as ix:
        mem = ix.memory("bot")
        (peanuts,) = [f for f in mem.facts("priya") if "peanuts" in f.text]
        mem.remove(peanuts.id)
        assert [e.text for e in mem.profile("priya")] == [
            "priya lives in Porto",
            "priya wants to learn Portuguese",
        ]
        porto = mem.profile("priya")[0]
        assert mem.get(f"profile-{porto.entry_id}").table == "facts"
        mem.remove(f"profile-{porto.entry_id}")  # its fact goes, the message stays
        assert [e.text for e in mem.profile("priya")] == ["priya wants to learn Portuguese"]
        assert mem.get("m1").text.startswith("I live in Porto")
        assert mem.facts("priya") == []


def test_an_old_entry_whose_fact_is_gone_is_removed_by_its_id(tmp_path: Path) -> None:
    path = _old_index(tmp_path)
    with Index(path) as ix:
        mem = ix.memory("bot")
        mem.parts.rooms.entries_cite_facts = True  # as the code before wrote: no upgrade
        (peanuts,) = [f for f in mem.facts("priya") if "peanuts" in f.text]
        mem.remove(peanuts.id)  # the entry still cites m1, as it did then
        assert len(mem.profile("priya")) == 3
    with Index(path) as ix:
        mem = ix.memory("bot")
        mem.add("Hi.", user="priya", room="dm")  # the first write upgrades what it can
        (entry,) = [e for e in mem.profile("priya") if "peanuts" in e.text]
        assert entry.sources == ("m1",)
        mem.remove(f"profile-{entry.entry_id}")  # the entry goes, the message stays
        assert [e.text for e in mem.profile("priya")] == [
            "priya lives in Porto",
            "priya wants to learn Portuguese",
        ]
        assert mem.get("m1").table == "messages"
        assert [f.text for f in mem.facts("priya")] == ["priya lives in Porto"]


def test_the_upgrade_runs_once_and_changes_nothing_new(index: Index) -> None:
    mem = index.memory("bot")
    mem.add("I live in Porto.", user="priya", room="dm")
    assert mem.parts.rooms.entries_cite_facts
    assert mem.parts.memory.cite_derived(dry_run=True) == 0


# -- 4. a goal stated twice is one goal --------------------------------------------------------


def test_a_goal_stated_twice_is_finished_by_one_update(index: Index) -> None:
    mem = index.memory("bot")
    first = mem.add("I want to learn Portuguese.", user="g", room="dm")
    second = mem.add("I want to learn Portuguese.", user="g", room="dm")
    (goal,) = mem.recent(table="goals")
    (entry,) = mem.profile("g")
    assert entry.sources == (first.id, second.id) and entry.status == "open"
    assert mem.get(f"profile-{entry.entry_id}").id == goal.id
    mem.update(goal.id, status="done")
    assert mem.profile("g") == []
    window = mem.context("what should I do?", room="dm", user="g", budget=600)
    assert not any("Portuguese" in line for line in _section(window, "profile"))
    assert mem.get(f"profile-{entry.entry_id}").status == "done"
    # Said again once done, it is wanted again: a new goal.
    mem.add("I want to learn Portuguese.", user="g", room="dm")
    assert [g.status for g in mem.recent(table="goals")] == ["open", "done"]
    assert [e.status for e in mem.profile("g")] == ["open"]


def test_a_goal_stated_twice_stays_while_one_of_its_messages_does(index: Index) -> None:
    mem = index.memory("bot")
    first = mem.add("I want to learn Portuguese.", user="g", room="dm")
    mem.add("I want to learn Portuguese.", user="g", room="other")
    assert len(mem.recent(table="goals")) == 1
    mem.remove(first.id)
    (goal,) = mem.recent(table="goals")
    assert goal.status == "open"
    (entry,) = mem.profile("g")
    assert entry.status == "open" and len(entry.sources) == 1
    # Said in the other room too: it is part of that room's window.
    window = mem.context("what now?", room="other", budget=600)
    assert any("Portuguese" in line for line in _section(window, "profile"))


# -- 5. scoped ids in the views of the whole index ---------------------------------------------


def _shared_room(index: Index) -> None:
    index.memory("A").add("A note about lunch at noon", room="team", id="n1", user="alice")
    index.memory("B").add("B note about lunch", room="team", id="n1", user="bob")


def test_query_shows_a_scoped_id_readably(index: Index) -> None:
    _shared_room(index)
    data = query_json(index, index.query("lunch"))
    shown = {(m["id"], m.get("id_agent")) for m in data["messages"]}
    assert shown == {("n1", None), ("n1@B", "B")}
    assert all("\x1f" not in str(m) for m in data["messages"])
    asked = index.ask("What about lunch?")
    assert {m.id for m in asked.context.messages} == {"n1", "n1@B"}  # prompted, cited so
    answer = asked.as_dict()
    assert set(answer["message_ids"]) == {"n1", "n1@B"}
    assert {(m["id"], m.get("id_agent")) for m in answer["messages"]} == shown


def test_show_takes_a_scoped_id_as_shown(index: Index) -> None:
    _shared_room(index)
    found = index.show("team/n1@B")
    assert (found["id"], found["id_agent"], found["text"]) == ("n1@B", "B", "B note about lunch")
    assert index.show("n1@B", "team")["speaker"] == "bob"
    assert index.show("n1", "team")["text"] == "A note about lunch at noon"
    # An id that holds "@" is found as written.
    index.memory("A").add("mail", room="team", id="x@B", user="alice")
    assert index.show("team/x@B")["text"] == "mail"


def test_an_old_entry_is_pointed_at_its_own_subjects_fact(tmp_path: Path) -> None:
    path = tmp_path / "two"
    with Index(path) as ix:
        ix.memory("bot").add(
            "I live in Berlin. My sister Anna lives in Berlin.", user="priya", room="dm"
        )
    with duckdb.connect(str(path / "structrag.duckdb")) as con:
        con.execute(
            "UPDATE profile_entries SET source_mkeys = (SELECT list(DISTINCT s.source_mkey) "
            "FROM memory_sources s WHERE list_contains(profile_entries.source_mkeys, s.mkey) "
            "AND s.source_kind = 'message')"
        )
    with Index(path) as ix:
        mem = ix.memory("bot")
        mem.add("Thanks!", user="priya", room="dm")  # the first write re-points entries
        lives = next(e for e in mem.profile("priya") if e.predicate == "lives_in")
        behind = mem.get(f"profile-{lives.entry_id}")
        assert behind.text.lower().startswith("priya lives in berlin"), behind.text
        mem.remove(f"profile-{lives.entry_id}")
        assert any("Anna" in f.text for f in mem.facts()), [f.text for f in mem.facts()]


def test_removing_a_middle_statement_keeps_the_chain(tmp_path: Path) -> None:
    with Index(tmp_path / "chain") as ix:
        mem = ix.memory("bot")
        for text in ("I live in Porto.", "I moved to Berlin.", "I moved to Madrid."):
            mem.add(text, user="priya", room="dm")
        history = mem.profile("priya", history=True)
        berlin = next(e for e in history if e.object == "Berlin")
        mem.remove(f"profile-{berlin.entry_id}")
        assert [e.object for e in mem.profile("priya")] == ["Madrid"]
