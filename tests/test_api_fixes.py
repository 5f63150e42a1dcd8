"""The Python API as a new user meets it: entity and topic labels, ``Index.messages``
beside documents and agents' facts, and an index that holds nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from structrag import Index
from structrag.errors import ConfigError, IndexStateError


def _chat(path: Path, lines: list[str]) -> Path:
    rows = [
        {"id": f"m{i}", "speaker": "Priya" if i % 2 else "Marco", "text": text}
        for i, text in enumerate(lines, 1)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def test_entities_and_topics_are_named_by_their_most_frequent_spelling(
    index: Index, tmp_path: Path
) -> None:
    chat = _chat(
        tmp_path / "pets.jsonl",
        [
            "I walked the dogs this morning.",
            "How are the dogs doing?",
            "We now have 2 dogs and a cat.",
            "My dog hates cats.",
            "The dogs are loyal.",
        ],
    )
    index.ingest([chat])
    rows = index.sql(
        "SELECT name, count(*) FROM v_entities WHERE lower(name) LIKE '%dog%' GROUP BY ALL"
    )
    spellings = dict(rows)
    assert "2 dogs" in spellings or "dog" in spellings  # more than one spelling, merged
    usual = max(spellings, key=lambda name: (spellings[name], name))
    named = {e["name"] for e in index.entities(20)}
    assert usual in named and not (named & (set(spellings) - {usual}))
    assert usual == "dogs"  # not "2 dogs", the alphabetically first spelling


def test_messages_are_the_conversations_unless_a_table_is_asked_for(
    index: Index, tmp_path: Path
) -> None:
    chat = _chat(tmp_path / "friends.jsonl", ["I adopted a beagle named Biscuit.", "Lovely!"])
    index.ingest([chat])
    notes = tmp_path / "notes.md"
    notes.write_text("# Wifi\n\nThe wifi password is teapot-42.\n", encoding="utf-8")
    index.knowledge.add([notes], shared=True)
    memory = index.memory("helper")
    memory.add("Priya lives in Porto.", room="dm-priya", user="priya", table="facts")
    texts = [s.message.text for s in index.messages()]
    assert texts[:2] == ["I adopted a beagle named Biscuit.", "Lovely!"]
    assert not any("teapot" in t or "Porto" in t for t in texts)
    assert len(texts) == index.sql("SELECT count(*) FROM v_messages")[0][0]
    assert any("teapot" in s.message.text for s in index.messages(table="knowledge"))
    assert [s.message.text for s in index.messages(table="facts")] == ["Priya lives in Porto."]
    everything = list(index.messages(table=None))
    assert len(everything) == index.sql("SELECT count(*) FROM messages")[0][0] > len(texts)
    with pytest.raises(ConfigError, match="no memory table"):
        list(index.messages(table="fact"))


def test_an_index_that_holds_nothing_says_so(tmp_path: Path) -> None:
    with Index(tmp_path / "my-indx") as index:  # a mistyped path makes a new index
        answer = index.ask("When did Marco adopt Biscuit?")
        assert any("holds no messages" in note for note in answer.notes)
        assert any("holds no messages" in note for note in index.query("biscuit").notes)
    with pytest.raises(IndexStateError, match="no index"):
        Index(tmp_path / "other", create=False)


def test_an_index_with_messages_has_no_such_note(index: Index, tmp_path: Path) -> None:
    index.ingest([_chat(tmp_path / "c.jsonl", ["I adopted a beagle named Biscuit."])])
    assert not any("holds no messages" in n for n in index.query("pottery").notes)


def test_ask_points_at_documents_that_answer_when_no_message_does(
    index: Index, tmp_path: Path
) -> None:
    index.ingest([_chat(tmp_path / "chat.jsonl", ["I adopted a beagle named Biscuit."])])
    policy = tmp_path / "travel.md"
    policy.write_text(
        "# Travel policy\n\nThe hotel cap in Berlin is 180 euros a night.\n", encoding="utf-8"
    )
    index.knowledge.add([policy], shared=True)
    answer = index.ask("What is the hotel cap in Berlin?")
    assert not answer.ranked
    assert any("documents match the question" in note for note in answer.notes)
    both = index.ask("What is the hotel cap in Berlin?", sources=("conversations", "knowledge"))
    assert "180 euros" in both.context.text
    assert not any("documents match" in n for n in index.ask("Who adopted Biscuit?").notes)
