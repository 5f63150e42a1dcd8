"""A memory room that holds only goals or facts (no messages-table memories) is an agent's
memory room in `structrag conversations` and /v1/conversations, as `stats` counts it; and
`memory recent --table goals` shows each goal's status."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from structrag import Index
from structrag.cli import cli
from structrag.server.app import create_app
from structrag.server.service import Service

AGENT = "support-bot"


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rooms of one table each: `default` with goals only (README's snippet), `notes` with
    a fact only, `dm-priya` with a message; and a shared document."""
    directory = tmp_path_factory.mktemp("rooms") / "index"
    with Index(directory) as index:
        mem = index.memory(agent=AGENT)
        mem.add("Book the Lisbon flat by Friday", user="priya", table="goals")
        done = mem.add("Renew the passport", user="priya", table="goals")
        mem.update(done.id, status="done")
        mem.add("Priya prefers short answers.", user="priya", room="notes", table="facts")
        mem.add("Hello there, I need help with my booking.", user="priya", room="dm-priya")
        index.knowledge.add("The studio's wifi password is teapot-42.", shared=True)
    return directory


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, [*args, "--no-server"])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_rooms_of_goals_or_facts_alone_are_memory_rooms(index_dir: Path) -> None:
    with Index(index_dir, read_only=True) as index:
        rows = {row["id"]: row for row in index.conversation_summaries()}
        kinds = index.stats()["conversation_kinds"]
    for room in ("default", "notes", "dm-priya"):
        assert rows[room]["kind"] == "memory_room", rows[room]
        assert rows[room]["agents"] == [AGENT]
    # the count is of the room's messages, not its goals or facts
    assert rows["default"]["messages"] == 0 and rows["default"]["speakers"] == []
    assert rows["notes"]["messages"] == 0
    assert rows["dm-priya"]["messages"] == 1 and rows["dm-priya"]["speakers"] == ["priya"]
    (document,) = [row for row in rows.values() if row["kind"] == "document"]
    assert "agents" not in document
    # `conversations` agrees with `stats`
    listed = [row["kind"] for row in rows.values()]
    assert listed.count("memory_room") == kinds["memory_rooms"] == 3
    assert listed.count("document") == kinds["documents"] == 1
    assert listed.count("conversation") == kinds["histories"] == 0


def test_cli_and_http_list_them_alike(index_dir: Path) -> None:
    text = invoke("conversations", "--db", str(index_dir))
    lines = {line.split()[0]: line for line in text.splitlines() if line.strip()}
    for room in ("default", "notes", "dm-priya"):
        assert lines[room].endswith(f"(memory room of {AGENT})"), lines[room]
    listed: list[dict[str, Any]] = json.loads(
        invoke("conversations", "--db", str(index_dir), "--json")
    )
    assert {row["id"]: row["kind"] for row in listed}["default"] == "memory_room"
    service = Service(index_dir, readers=1, warm=False)
    try:
        with TestClient(create_app(service), base_url="http://127.0.0.1:8765") as client:
            response = client.get("/v1/conversations")
    finally:
        service.close()
    assert response.status_code == 200
    assert response.json() == listed


def test_recent_goals_show_their_status(index_dir: Path) -> None:
    text = invoke("memory", "recent", "--db", str(index_dir), "--agent", AGENT, "--table", "goals")
    shown = {line.split("] ", 1)[1] for line in text.splitlines() if "] " in line}
    assert shown == {
        "(open) priya: Book the Lisbon flat by Friday",
        "(done) priya: Renew the passport",
    }
    rows = json.loads(
        invoke(
            "memory",
            "recent",
            "--db",
            str(index_dir),
            "--agent",
            AGENT,
            "--table",
            "goals",
            "--json",
        )
    )
    assert {row["status"] for row in rows} == {"open", "done"}
