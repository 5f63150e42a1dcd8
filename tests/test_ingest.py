"""Ingest end to end on a real DuckDB file and a real Whoosh index."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from structrag import Index, InputError, NotFoundError, QueryError
from structrag.store.whoosh_index import StagedWhooshWriter
from tests.conftest import locomo_sample


def _counts(index: Index) -> dict[str, object]:
    stats = index.stats()
    return {k: stats[k] for k in ("conversations", "messages", "semantic_refs")}


def _repeated_keys(index: Index) -> dict[str, int]:
    """Rows whose ids repeat, per table that has no primary key (the writer keeps them
    unique)."""
    from structrag.store.duckdb.schema import UNKEYED

    counts = {
        table: index.sql(f"SELECT count(*) - count(DISTINCT ({key})) FROM {table}")[0][0]
        for table, key in UNKEYED.items()
    }
    return {table: n for table, n in counts.items() if n}


def test_ingest_counts_every_turn_and_finds_knowledge(index: Index, locomo_file: Path) -> None:
    (report,) = index.ingest([locomo_file])
    assert report.messages_added == 8
    stats = index.stats()
    assert stats["conversations"] == 1
    assert stats["messages"] == 8
    refs = stats["semantic_refs"]
    assert refs["entity"] > 8 and refs["action"] > 8 and refs["topic"] > 0
    assert stats["extractors"]["spacy"]["extracted"] == 8


def test_every_span_lies_inside_its_message(index: Index, locomo_file: Path) -> None:
    index.ingest([locomo_file])
    texts = {(m.message.conversation, m.message.id): m.message.text for m in index.messages()}
    refs = list(index.refs())
    assert len(refs) == sum(index.stats()["semantic_refs"].values())
    for ref in refs:
        text = texts[(ref.conversation, ref.message_id)]
        assert 0 <= ref.span.start <= ref.span.end <= len(text)


def test_second_ingest_of_the_same_file_changes_nothing(index: Index, locomo_file: Path) -> None:
    index.ingest([locomo_file])
    before = _counts(index)
    (report,) = index.ingest([locomo_file])
    assert report.skipped is not None
    assert _counts(index) == before
    aliases = index.store.sql("SELECT count(*) FROM aliases")
    (forced,) = index.ingest([locomo_file], force=True)  # extracts every message again
    assert (forced.messages_added, forced.messages_updated) == (0, 0)
    assert forced.messages_unchanged == forced.messages_reextracted == 8
    assert _counts(index) == before
    assert index.store.sql("SELECT count(*) FROM aliases") == aliases


def test_moved_lines_are_not_edits_and_metadata_merges(index: Index, tmp_path: Path) -> None:
    path = tmp_path / "talk.txt"
    body = "ANN: I moved to Lisbon in March.\nBEN: Do you like the tiles there?\n"
    path.write_text("A header line\n\n" + body, encoding="utf-8")
    index.ingest([path])
    path.write_text(body, encoding="utf-8")  # the header is gone, the turns moved up
    (again,) = index.ingest([path])
    assert again.messages_unchanged == 2 and again.messages_updated == 0
    (conversation,) = index.conversations()
    assert conversation.metadata["header"] == "A header line"  # kept from the first file


def test_truncated_copy_fails_and_leaves_the_index_unchanged(
    index: Index, locomo_file: Path, tmp_path: Path
) -> None:
    index.ingest([locomo_file])
    before = _counts(index)
    db_bytes = (index.directory / "structrag.duckdb").stat().st_size
    other = tmp_path / "other.json"
    text = json.dumps([locomo_sample("conv-two")])
    other.write_text(text[: int(len(text) * 0.7)])
    with pytest.raises(InputError) as info:
        index.ingest([locomo_file, other])
    assert info.value.path == str(other)
    assert _counts(index) == before
    assert (index.directory / "structrag.duckdb").stat().st_size == db_bytes


def test_appended_messages_are_the_only_ones_extracted(index: Index, tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    rows = [
        {"id": str(i), "speaker": "Ann", "text": f"Ann planted {i} tulips in the garden."}
        for i in range(1, 6)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    index.ingest([path])
    rows.append({"id": "6", "speaker": "Bo", "text": "Bo painted the fence blue."})
    rows[1]["text"] = "Ann planted roses instead."
    path.write_text("\n".join(json.dumps(r) for r in rows))
    (report,) = index.ingest([path])
    assert (report.messages_added, report.messages_updated, report.messages_unchanged) == (1, 1, 4)
    shown = index.show("2", "chat")
    assert shown["text"] == "Ann planted roses instead."
    assert any(k.get("name") == "roses" for k in shown["knowledge"])
    assert not any(k.get("name") == "2 tulips" for k in shown["knowledge"])
    ordinals = [m.message.ordinal for m in index.messages("chat")]
    assert ordinals == list(range(6))
    assert index.sql("SELECT count(*) FROM embeddings") == [(6,)]
    assert _repeated_keys(index) == {}


def test_messages_appended_from_another_file_continue_the_ordinals(
    index: Index, tmp_path: Path
) -> None:
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"id": "a1", "text": "one"}\n{"id": "a2", "text": "two"}\n')
    second.write_text('{"id": "b1", "text": "three"}\n')
    index.ingest([first], conversation="log")
    index.ingest([second], conversation="log")
    assert [(m.message.id, m.message.ordinal) for m in index.messages("log")] == [
        ("a1", 0),
        ("a2", 1),
        ("b1", 2),
    ]


def test_two_files_of_one_name_never_replace_each_others_messages(
    index: Index, tmp_path: Path
) -> None:
    a, b = tmp_path / "a" / "meeting.txt", tmp_path / "b" / "meeting.txt"
    a.parent.mkdir()
    b.parent.mkdir()
    a.write_text("ANA: We met in Lisbon on Monday.\nBEN: Great trip.\n")
    b.write_text("CARL: Budget review is due.\nDORA: I will send numbers.\n")
    with pytest.raises(InputError, match="already that of") as clash:
        index.ingest([tmp_path])  # both in one ingest: nothing is written
    assert "b" in str(clash.value) and "--conversation" in str(clash.value.hint)
    assert index.stats()["messages"] == 0
    index.ingest([a])
    with pytest.raises(InputError, match="its messages would replace that file's"):
        index.ingest([b])  # later: a is still there
    assert [m.message.speaker for m in index.messages("meeting")] == ["Ana", "Ben"]
    index.ingest([b], conversation="budget")  # its own conversation
    assert {c.id for c in index.conversations()} == {"meeting", "budget"}
    # Once a is gone, b (none of a's messages) is still another meeting, not a moved a.
    a.unlink()
    with pytest.raises(InputError, match="holds none of its messages"):
        index.ingest([b])
    # A file that moved, holding its messages still, is the same conversation: it updates it.
    moved = tmp_path / "c" / "meeting.txt"
    moved.parent.mkdir()
    moved.write_text("ANA: We met in Lisbon on Monday.\nBEN: Great trip, and the food.\n")
    index.ingest([moved])
    assert [m.message.text for m in index.messages("meeting")] == [
        "We met in Lisbon on Monday.",
        "Great trip, and the food.",
    ]


def test_two_files_of_one_conversation_never_replace_each_others_messages(
    index: Index, tmp_path: Path
) -> None:
    """Two exports without ids given one conversation (their own field, or
    ``--conversation``): the second's messages 1, 2 ... would replace the first's."""
    monday, tuesday = tmp_path / "monday.jsonl", tmp_path / "tuesday.jsonl"
    monday.write_text(
        '{"conversation": "team", "speaker": "Ana", "text": "monday standup notes"}\n'
        '{"conversation": "team", "speaker": "Bo", "text": "monday reply"}\n'
    )
    tuesday.write_text('{"conversation": "team", "speaker": "Cy", "text": "tuesday notes"}\n')
    with pytest.raises(InputError, match=r"has the id of a message") as clash:
        index.ingest([monday, tuesday])  # in one ingest: nothing is written
    assert "tuesday.jsonl" in str(clash.value) and "monday.jsonl" in str(clash.value)
    assert "--conversation" in str(clash.value.hint)
    assert index.stats()["messages"] == 0
    index.ingest([monday])
    with pytest.raises(InputError, match="would replace that file's"):
        index.ingest([tuesday])
    with pytest.raises(InputError, match="would replace that file's"):
        index.ingest([tuesday], conversation="team")
    texts = [m.message.text for m in index.messages("team")]
    assert texts == ["monday standup notes", "monday reply"]
    index.ingest([tuesday], conversation="tuesday")  # a conversation of its own
    assert [m.message.text for m in index.messages("tuesday")] == ["tuesday notes"]
    # the first file moved away: the second replaces it, as a new version would
    monday.unlink()
    index.ingest([tuesday], force=True)
    assert [m.message.speaker for m in index.messages("team")][:1] == ["Cy"]


def test_messages_no_longer_in_a_file_are_removed_and_nothing_else(
    index: Index, tmp_path: Path
) -> None:
    """A file numbered by place (no ids of its own): what left it is removed, the ids
    after it shift. In a conversation another file on disk writes to as well, nothing
    is removed: a message may be in both files."""
    chat, other = tmp_path / "chat.jsonl", tmp_path / "other.jsonl"
    words = ["walrus", "pelican", "heron"]
    line = '{{"conversation": "log", "speaker": "Ana", "text": "note about {}"}}\n'
    chat.write_text("".join(line.format(w) for w in words))
    index.ingest([chat])
    assert [m.id for m in index.query("walrus AND note").messages] == ["1"]
    chat.write_text("".join(line.format(w) for w in words[1:]))  # the walrus note left
    (planned,) = index.estimate([chat])["sources"]
    assert planned["messages_removed"] == 1  # a dry run says so too
    (report,) = index.ingest([chat])
    assert report.messages_removed == 1 and report.messages_updated == 2
    found = [(m.message.id, m.message.text) for m in index.messages("log")]
    assert found == [("1", "note about pelican"), ("2", "note about heron")]
    assert index.query("walrus AND note").messages == []  # gone from the text index too
    # another file of the conversation on disk: the shorter chat removes nothing
    other.write_text(
        json.dumps({"id": "o1", "conversation": "log", "speaker": "Bo", "text": "walrus too"})
        + "\n"
    )
    index.ingest([other])
    chat.write_text(line.format("pelican"))
    (report,) = index.ingest([chat])
    assert report.messages_removed == 0
    assert [m.message.id for m in index.messages("log")] == ["1", "2", "o1"]


def test_a_newer_whatsapp_export_that_starts_later_loses_nothing(
    index: Index, tmp_path: Path
) -> None:
    """WhatsApp exports a chat's latest messages only: a newer export of a long chat
    starts later. Its messages line up with the earlier export's by content (they were
    read by place: every one 'updated', the first gone without a word), and the messages
    before it are kept, with a warning."""
    chat = tmp_path / "trip.txt"
    lines = [
        "13/03/2023, 10:00 - Ana: first message about the tent",
        "14/03/2023, 10:00 - Bob: second about the stove",
        "15/03/2023, 10:00 - Ana: third about Lisbon",
        "16/03/2023, 10:00 - Bob: fourth about Porto",
        "17/03/2023, 10:00 - Ana: fifth about Faro",
    ]
    chat.write_text("\n".join(lines[:3]) + "\n", encoding="utf-8")
    index.ingest([chat])
    chat.write_text("\n".join(lines[1:4]) + "\n", encoding="utf-8")
    (report,) = index.ingest([chat])
    assert (report.messages_added, report.messages_updated, report.messages_unchanged) == (1, 0, 2)
    assert report.messages_removed == 0
    assert any("starts at message 2 of the one ingested before" in w for w in report.warnings)

    (conversation,) = report.conversations

    def stored() -> list[tuple[str, int, str]]:
        found = index.messages(conversation)
        return [(m.message.id, m.message.ordinal, m.message.text) for m in found]

    assert stored() == [
        ("1", 0, "first message about the tent"),
        ("2", 1, "second about the stove"),
        ("3", 2, "third about Lisbon"),
        ("4", 3, "fourth about Porto"),
    ]
    assert [m.id for m in index.query("tent").messages] == ["1"]
    # later still, with a message of the overlap edited: lined up all the same
    chat.write_text(lines[2] + "\n" + lines[3] + " (edited)\n" + lines[4] + "\n", encoding="utf-8")
    (report,) = index.ingest([chat])
    assert (report.messages_added, report.messages_updated, report.messages_removed) == (1, 1, 0)
    assert [text for _, _, text in stored()] == [
        "first message about the tent",
        "second about the stove",
        "third about Lisbon",
        "fourth about Porto (edited)",
        "fifth about Faro",
    ]
    assert [mid for mid, _, _ in stored()] == ["1", "2", "3", "4", "5"]
    # later still, starting with a message edited since (the first is no anchor then)
    more = [f"{d}/03/2023, 10:00 - Bob: message {d}" for d in range(18, 21)]
    chat.write_text(lines[3] + " (typo fixed)\n" + lines[4] + "\n" + "\n".join(more) + "\n")
    (report,) = index.ingest([chat])
    assert (report.messages_added, report.messages_updated, report.messages_removed) == (3, 1, 0)
    assert [text for _, _, text in stored()][:5] == [
        "first message about the tent",
        "second about the stove",
        "third about Lisbon",
        "fourth about Porto (typo fixed)",
        "fifth about Faro",
    ]


def test_a_file_of_its_own_ids_may_be_part_of_a_history_and_loses_nothing(
    index: Index, tmp_path: Path
) -> None:
    """A Slack or Discord export of a date range, or JSON of message ids: what an earlier
    version had and this one has not is kept, and the report says so."""
    export = tmp_path / "export.jsonl"
    rows = [{"id": f"x{i}", "speaker": "Ana", "text": f"day {i} notes"} for i in range(4)]
    export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    index.ingest([export])
    export.write_text("".join(json.dumps(r) + "\n" for r in rows[2:]))  # the later days
    (report,) = index.ingest([export])
    assert report.messages_removed == 0
    assert any("2 message(s) an earlier version" in w for w in report.warnings)
    assert [m.message.id for m in index.messages("export")] == ["x0", "x1", "x2", "x3"]
    # a later export of the same conversation (its own ids) that edits a message of the
    # first (a reply count, a reaction): an edit, not a clash
    later = tmp_path / "later.jsonl"
    newer = [
        {**rows[3], "text": "day 3 notes, edited"},
        {"id": "x4", "speaker": "Bo", "text": "day 4"},
    ]
    later.write_text("".join(json.dumps({**r, "conversation": "export"}) + "\n" for r in newer))
    (report,) = index.ingest([later])
    assert report.messages_updated == 1 and report.messages_added == 1


def test_a_file_of_a_shared_conversation_cannot_take_anothers_ids_later(
    index: Index, tmp_path: Path
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    line = '{{"id": "{i}", "conversation": "C", "speaker": "Ana", "text": "{w} note {i}"}}\n'
    a.write_text("".join(line.format(i=i, w="a") for i in range(1, 6)))
    b.write_text("".join(line.format(i=i, w="b") for i in range(6, 11)))
    index.ingest([a, b])
    # b again, now without ids: numbered 1, 2, 3, the ids of a's messages
    b.write_text(
        "".join(
            f'{{"conversation": "C", "speaker": "Bo", "text": "b new {i}"}}\n' for i in range(3)
        )
    )
    with pytest.raises(InputError, match="would replace that file's") as clash:
        index.ingest([b])
    assert "a.jsonl" in str(clash.value)
    assert [m.message.text for m in index.messages("C")][:3] == ["a note 1", "a note 2", "a note 3"]


def test_a_file_that_moved_has_its_removed_messages_removed(index: Index, tmp_path: Path) -> None:
    chat = tmp_path / "chat.jsonl"
    chat.write_text(
        "".join(f'{{"speaker": "Ana", "text": "message number {i}"}}\n' for i in range(9))
    )
    index.ingest([chat])
    moved = tmp_path / "sub" / "chat.jsonl"
    moved.parent.mkdir()
    lines = chat.read_text().splitlines(keepends=True)
    moved.write_text("".join(lines[:3] + lines[5:]))  # two lines deleted, then moved
    chat.unlink()
    (report,) = index.ingest([moved])
    assert report.messages_removed == 2
    texts = [m.message.text for m in index.messages("chat")]
    assert len(texts) == 7 and len(set(texts)) == 7


def test_all_formats_ingest(
    index: Index, transcript_file: Path, vtt_file: Path, jsonl_file: Path, locomo_file: Path
) -> None:
    reports = index.ingest([transcript_file, vtt_file, jsonl_file, locomo_file])
    assert [r.format for r in reports] == ["transcript", "webvtt", "jsonl", "locomo"]
    assert index.stats()["messages"] == 4 + 2 + 3 + 8
    assert index.stats()["conversations"] == 4


def test_text_index_behind_the_store_is_rebuilt_on_open(
    tmp_path: Path, locomo_file: Path, jsonl_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "idx"
    with Index(directory) as ix:
        ix.ingest([locomo_file])

    def crash(self: StagedWhooshWriter, generation: int) -> None:
        raise KeyboardInterrupt  # as if the process died between the two commits

    monkeypatch.setattr(StagedWhooshWriter, "commit", crash)
    with Index(directory) as ix, pytest.raises(KeyboardInterrupt):
        ix.ingest([jsonl_file])
    monkeypatch.undo()
    with Index(directory) as ix:
        assert any("rebuilt" in note for note in ix.notes)
        assert ix.text_index.generation() == ix.store.generation()
        assert ix.text_index.doc_count() == 8 + 3
    with Index(directory, read_only=True) as ix:
        assert ix.notes == []


def test_show_and_top_lists(index: Index, locomo_file: Path) -> None:
    index.ingest([locomo_file])
    shown = index.show("D1:4")
    assert shown["speaker"] == "Bob"
    # As query and ask print it in an index of many conversations: conversation/id.
    assert index.show(f"{shown['conversation']}/D1:4") == shown
    with pytest.raises(NotFoundError):
        index.show("no-such-conversation/D1:4")
    for item in shown["knowledge"]:
        start, end = item["span"]
        assert shown["text"][start:end] == item["span_text"]
    assert any(k.get("name") == "Pepper" for k in shown["knowledge"])
    names = [e["name"] for e in index.entities(5)]
    assert names[:2] == ["Alice", "Bob"] or set(names[:2]) == {"Alice", "Bob"}
    assert index.topics(3)


def test_reindex_rebuilds_the_same_postings(index: Index, locomo_file: Path) -> None:
    index.ingest([locomo_file])
    text = index.text_index
    everything = np.array([s.mkey for s in index.messages()], dtype=np.int64)
    before = text.text_postings("shelter", text.docs_of(everything)).mkeys.tolist()
    assert before
    refs = index.sql("SELECT count(*) FROM semantic_refs")
    assert index.reindex() == 8
    assert text.text_postings("shelter", text.docs_of(everything)).mkeys.tolist() == before
    assert index.sql("SELECT count(*) FROM semantic_refs") == refs
    assert _repeated_keys(index) == {}


def test_a_typeagent_index_ingests_its_refs_from_the_stream(index: Index, tmp_path: Path) -> None:
    """A TypeAgent index is ingested as a stream whose refs come from disk, message by
    message: the index holds exactly the knowledge loading the file whole gives (spans,
    kinds, extractor and version), and ingesting it again changes nothing."""
    from structrag.importers import load_source
    from structrag.models import SemanticRef
    from tests.test_importers import _typeagent_document

    path = tmp_path / "ep_index_data.json"
    path.write_text(json.dumps(_typeagent_document(refs_first=True)), encoding="utf-8")
    (report,) = index.ingest([path])
    assert (report.messages_added, report.refs_added, report.format) == (12, 24, "typeagent")

    def key(ref: SemanticRef) -> tuple[object, ...]:
        return (ref.message_id, ref.span, ref.knowledge, ref.extractor, ref.extractor_version)

    expected = sorted((key(r) for r in load_source(path).knowledge), key=repr)
    assert sorted((key(r) for r in index.refs()), key=repr) == expected
    assert index.stats()["semantic_refs"] == {"entity": 12, "action": 0, "topic": 12, "tag": 0}
    (again,) = index.ingest([path])
    assert again.skipped is not None


def test_workers_are_started_early_only_for_conversations_new_to_the_index(
    tmp_path: Path,
) -> None:
    """An ingest lets the extractor start its workers while it reads the input, but only
    when the input's conversations are new to the index and need extracting: an input
    that grew by a few messages, or one that carries its own knowledge, starts nothing."""
    from structrag.extract.spacy_extractor import SpacyExtractor
    from tests.test_importers import _typeagent_document

    class Recording(SpacyExtractor):
        def __init__(self) -> None:
            super().__init__(workers=1)
            self.started: list[int] = []

        def start(self, messages: int) -> None:
            self.started.append(messages)
            super().start(messages)

    def lines(count: int) -> str:
        return "".join(
            json.dumps({"id": str(i), "speaker": "Ann" if i % 2 else "Bo", "text": f"Day {i}."})
            + "\n"
            for i in range(count)
        )

    chat = tmp_path / "chat.jsonl"
    chat.write_text(lines(500), encoding="utf-8")
    agent = tmp_path / "ep_index_data.json"
    agent.write_text(json.dumps(_typeagent_document(refs_first=True)), encoding="utf-8")
    extractor = Recording()
    with Index(tmp_path / "idx") as index:
        index.ingest([chat], extractor=extractor)
        assert extractor.started == [500]
        chat.write_text(lines(505), encoding="utf-8")  # grown by five
        (report,) = index.ingest([chat], extractor=extractor)
        assert report.messages_added == 5 and extractor.started == [500]
        index.ingest([agent], extractor=extractor)
        assert extractor.started == [500]
        assert extractor._pool is None  # one worker: nothing to start


def test_one_path_may_be_given_without_a_list(
    tmp_path: Path, locomo_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``ingest("chat.json")`` is that file, not one input per character of its name
    (which made "/" of an absolute path a folder to walk); a ``Path`` too, and
    ``estimate`` alike. (A relative name here, so that a regression fails at once.)"""
    (tmp_path / "chat.json").write_bytes(locomo_file.read_bytes())
    monkeypatch.chdir(tmp_path)
    with Index(tmp_path / "ix") as index:
        (planned,) = index.estimate("chat.json")["sources"]
        assert planned["path"] == "chat.json"
        (report,) = index.ingest("chat.json")
        assert report.path == "chat.json" and report.messages_added > 0
        (again,) = index.ingest(Path("chat.json"))
        assert again.skipped


@pytest.mark.parametrize(
    ("statement", "kind"),
    [
        ("DELETE FROM topics", "DELETE statements"),
        ("DROP VIEW v_messages", "DROP statements"),
        ("SELECT 1; UPDATE messages SET text = 'x'", "UPDATE statements"),
        ("COPY messages FROM 'elsewhere.csv'", "COPY statements"),
        ("CREATE TABLE mine AS SELECT * FROM messages", "CREATE statements"),
        ("EXPLAIN ANALYZE DELETE FROM topics", "EXPLAIN ANALYZE"),
        ("PRAGMA import_database('elsewhere')", "PRAGMAs that do more than describe"),
        ("  ", "an empty statement"),
    ],
)
def test_index_sql_reads_and_refuses_changes(
    tmp_path: Path, locomo_file: Path, statement: str, kind: str
) -> None:
    """A change made with SQL beside the writer would leave the text index and the
    derived tables saying something else: ``Index.sql`` refuses it, and changes nothing."""
    from structrag import ConfigError

    with Index(tmp_path / "ix") as index:
        index.ingest([locomo_file])
        before = _counts(index)
        with pytest.raises(ConfigError, match=f"not {kind}"):
            index.sql(statement)
        assert _counts(index) == before
        assert index.sql("SELECT count(*) FROM v_messages WHERE text = ?", ["x"]) == [(0,)]
        assert index.sql("DESCRIBE messages") and index.sql("PRAGMA table_info('messages')")
        assert index.sql("EXPLAIN SELECT * FROM v_messages")
        with pytest.raises(QueryError, match="the SQL failed: Parser Error"):
            index.sql("SELEC 1")


def test_a_copy_of_a_file_under_another_name_is_a_conversation_of_its_own(
    index: Index, tmp_path: Path
) -> None:
    first, copy = tmp_path / "x.jsonl", tmp_path / "y.jsonl"
    first.write_text('{"speaker": "Ana", "text": "the boat leaves at noon"}\n')
    copy.write_bytes(first.read_bytes())
    index.ingest([first])
    (report,) = index.ingest([copy])
    assert report.skipped is None and report.messages_added == 1
    assert {c.id for c in index.conversations()} == {"x", "y"}
    (again,) = index.ingest([copy])  # now it is in: the same bytes are skipped
    assert again.skipped is not None
