"""Removing an ingested conversation: from Python, the CLI and the HTTP API; everything of
it goes (messages, knowledge, text index, digest, aliases) and ingesting it brings it back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from structrag import Index, NotFoundError
from structrag.cli import cli
from structrag.errors import ConfigError
from structrag.server.app import create_app
from structrag.server.service import Service

TRIP = ["I adopted a puppy named Rex.", "Rex is cute! Mel loves him.", "We hiked in Sintra."]
OTHER = ["Rex the dog ran in Sintra too."]


def _chat(path: Path, lines: list[str], speakers: tuple[str, str] = ("Ana", "Melanie")) -> Path:
    path.write_text(
        "\n".join(
            json.dumps({"id": f"m{i}", "speaker": speakers[i % 2], "text": text})
            for i, text in enumerate(lines)
        )
    )
    return path


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Index]:
    with Index(tmp_path / "ix") as ix:
        ix.ingest([_chat(tmp_path / "trip.jsonl", TRIP), _chat(tmp_path / "other.jsonl", OTHER)])
        yield ix


def _rows(index: Index, conversation: str) -> dict[str, int]:
    counts = {
        table: int(index.sql(f"SELECT count(*) FROM {table} WHERE conversation = ?", [c])[0][0])
        for table, c in (
            ("messages", conversation),
            ("semantic_refs", conversation),
            ("aliases", conversation),
            ("digests", conversation),
            ("conversations", conversation),
        )
    }
    counts["embeddings"] = int(
        index.sql(
            "SELECT count(*) FROM embeddings WHERE mkey IN "
            "(SELECT mkey FROM messages WHERE conversation = ?)",
            [conversation],
        )[0][0]
    )
    return counts


def test_a_removed_conversation_leaves_nothing_and_comes_back_with_its_file(
    index: Index, tmp_path: Path
) -> None:
    before = _rows(index, "trip")
    assert before["messages"] == 3 and before["semantic_refs"] and before["aliases"]
    assert index.remove_conversation("trip") == 3
    assert set(_rows(index, "trip").values()) == {0}
    assert [m.id for m in index.query("Rex", limit=None).messages] == ["m0"]  # other's only
    assert {m.conversation for m in index.query("Rex", limit=None).messages} == {"other"}
    assert index.ask("Where did they hike?").message_ids == ["m0"]
    assert [c.id for c in index.conversations()] == ["other"]
    (report,) = index.ingest([tmp_path / "trip.jsonl"])  # the same file brings it back
    assert not report.skipped and _rows(index, "trip")["messages"] == 3


def test_what_cannot_be_removed_says_what_to_do(index: Index) -> None:
    with pytest.raises(NotFoundError, match="no conversation 'nowhere'"):
        index.remove_conversation("nowhere")
    index.memory("bot").add("I live in Porto.", user="ana", room="dm")
    with pytest.raises(ConfigError, match="memory room of bot") as room:
        index.remove_conversation("dm")
    assert "memory remove" in (room.value.hint or "")
    index.knowledge.add("The lamp blinks when the kettle is empty of water.")
    (room_of_document,) = [c.id for c in index.conversations() if c.id.startswith("doc:")]
    with pytest.raises(ConfigError, match="document") as document:
        index.remove_conversation(room_of_document)
    assert "knowledge remove" in (document.value.hint or "")


def test_the_cli_and_the_api_remove_a_conversation(tmp_path: Path) -> None:
    db = tmp_path / "ix"
    with Index(db) as ix:
        ix.ingest([_chat(tmp_path / "trip.jsonl", TRIP), _chat(tmp_path / "other.jsonl", OTHER)])
    runner = CliRunner()
    missing = runner.invoke(cli, ["remove", "trip", "nowhere", "--db", str(db), "--no-server"])
    assert missing.exit_code == 1 and "no conversation 'nowhere'" in str(missing.exception)
    done = runner.invoke(cli, ["remove", "trip", "--db", str(db), "--json", "--no-server"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == [{"conversation": "trip", "removed": 3}]
    service = Service(db, readers=1, warm=False)
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            answer = client.delete("/v1/conversations/other")
            assert answer.status_code == 200 and answer.json() == {"removed": 1}
            gone = client.delete("/v1/conversations/other")
            assert gone.status_code == 404 and gone.json()["error"]["code"] == "not_found_error"
            assert client.get("/v1/stats").json()["messages"] == 0
    finally:
        service.close()


def test_a_file_ingested_again_under_another_name_says_it_will_be_in_both(
    tmp_path: Path,
) -> None:
    chat = _chat(tmp_path / "de.jsonl", TRIP)
    with Index(tmp_path / "ix") as ix:
        (first,) = ix.ingest([chat], conversation="family")
        assert not first.warnings
        (again,) = ix.ingest([chat])
        (warning,) = again.warnings
        assert "ingested before as 'family'" in warning and "--conversation family" in warning
        assert "structrag remove" in warning
        assert ix.remove_conversation("de") == 3
        (same,) = ix.ingest([chat], conversation="family", force=True)
        assert not same.warnings


def test_conversations_say_which_are_agents_rooms(index: Index, tmp_path: Path) -> None:
    index.memory("bot").add("I live in Porto.", user="ana", room="dm")
    rows = {r["id"]: r for r in index.conversation_summaries()}
    assert rows["dm"]["kind"] == "memory_room" and rows["dm"]["agents"] == ["bot"]
    assert rows["trip"]["kind"] == "conversation" and "agents" not in rows["trip"]


def test_a_file_that_lost_a_conversation_is_no_rename(tmp_path: Path) -> None:
    chats = tmp_path / "chats.jsonl"
    line = '{{"conversation": "{c}", "id": "{i}", "speaker": "Ana", "text": "{t}"}}'
    chats.write_text(
        line.format(c="a", i="1", t="Hello there.") + "\n" + line.format(c="b", i="1", t="Hi.")
    )
    with Index(tmp_path / "ix") as ix:
        ix.ingest([chats])
        chats.write_text(line.format(c="a", i="1", t="Hello there, again."))
        (again,) = ix.ingest([chats])
        assert not any("ingested before" in w for w in again.warnings)


def test_remove_through_a_server_checks_every_name_before_removing_any(tmp_path: Path) -> None:
    from tests.serve_helpers import start_server

    db = tmp_path / "ix"
    with Index(db) as ix:
        ix.ingest([_chat(tmp_path / "trip.jsonl", TRIP), _chat(tmp_path / "other.jsonl", OTHER)])
    served = start_server(db)
    try:
        runner = CliRunner()
        missing = runner.invoke(cli, ["remove", "trip", "nowhere", "--db", str(db)])
        assert missing.exit_code == 1 and "nothing was removed" in str(missing.exception)
        listed = runner.invoke(cli, ["conversations", "--db", str(db), "--json"])
        assert {row["id"] for row in json.loads(listed.stdout)} == {"trip", "other"}
        done = runner.invoke(cli, ["remove", "trip", "--db", str(db), "--json"])
        assert json.loads(done.stdout) == [{"conversation": "trip", "removed": 3}]
    finally:
        assert served.stop() == 0
