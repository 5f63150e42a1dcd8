"""Tokens and scopes: a token for agent B never reads agent A's memories or private
knowledge, through any HTTP route or MCP tool or resource."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from structrag.errors import ConfigError
from structrag.server.app import create_app
from structrag.server.auth import Tokens
from structrag.server.run import check_address
from structrag.server.service import Service
from tests.serve_helpers import copy_index

ADMIN = "admin-token-0123456789abcdef"
TOKEN_A = "agent-a-token-0123456789abcdef"
TOKEN_B = "agent-b-token-0123456789abcdef"
SECRET = "Zanzibar-7741"  # only in agent A's memories and knowledge
ROOM_A = "room-of-a"


@pytest.fixture(scope="module")
def world(
    example_index: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[TestClient, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("auth")
    tokens = root / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": {ADMIN: "*", TOKEN_A: ["agent-a"], TOKEN_B: ["agent-b"]}})
    )
    service = Service(copy_index(example_index, root / "index"), readers=1, warm=False)
    app = create_app(service, tokens=Tokens.of(token_file=tokens))
    # The MCP endpoint checks the Host header (DNS rebinding): a loopback name.
    with TestClient(app, base_url="http://127.0.0.1:8765") as client:
        a = {"Authorization": f"Bearer {TOKEN_A}"}
        made = [
            client.post(
                "/v1/agents/agent-a/memories",
                json={"text": f"My locker code is {SECRET}.", "user": "ana", "room": ROOM_A},
                headers=a,
            ).json(),
            client.post(
                "/v1/agents/agent-a/memories",
                json={"text": f"Private playbook: escalate {SECRET} cases.", "table": "knowledge"},
                headers=a,
            ).json(),
        ]
        client.post(
            "/v1/agents/agent-b/memories",
            json={"text": "I like green tea.", "user": "bo", "room": "room-of-b"},
            headers={"Authorization": f"Bearer {TOKEN_B}"},
        )
        yield client, {"ids": [m["id"] for m in made], "app": app}
    service.close()


def leaked(text: str) -> bool:
    """Whether an answer shows agent A's memories or knowledge. (Probes never carry the
    secret themselves, so it cannot be an echo of the request; ids and room names can
    be, and are checked by status instead.)"""
    return SECRET in text


def test_a_server_off_loopback_needs_a_token() -> None:
    with pytest.raises(ConfigError, match="without a token"):
        check_address("0.0.0.0", Tokens())
    check_address("0.0.0.0", Tokens.of(ADMIN))
    check_address("127.0.0.1", Tokens())
    with pytest.raises(ConfigError, match="shorter than 16"):
        Tokens.of("short")


def test_requests_need_a_valid_token(world: tuple[TestClient, dict[str, Any]]) -> None:
    client, _ = world
    refused = client.get("/v1/stats")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="structrag"'
    answer = client.get("/v1/stats", headers={"Authorization": "Bearer not-a-token-at-all"})
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "not_authenticated"
    assert client.post("/mcp", json={}).status_code == 401
    assert client.get("/health").status_code == 200  # says nothing about the index
    assert client.get("/").status_code == 200  # the explorer asks for a token itself
    assert client.get("/v1/stats", headers={"Authorization": f"Bearer {ADMIN}"}).status_code == 200


def test_a_scoped_token_reaches_its_agent_only(world: tuple[TestClient, dict[str, Any]]) -> None:
    client, _ = world
    b = {"Authorization": f"Bearer {TOKEN_B}"}
    mine = client.get("/v1/agents/agent-b/memories", headers=b)
    assert mine.status_code == 200 and [m["text"] for m in mine.json()] == ["I like green tea."]
    other = client.get("/v1/agents/agent-a/memories", headers=b)
    assert other.status_code == 403 and other.json()["error"]["code"] == "access_denied"
    assert client.get("/v1/stats", headers=b).status_code == 403


def _bodies(ids: list[str]) -> dict[str, dict[str, Any]]:
    """A body for every route that takes one, aimed at agent A's data."""
    return {
        "/v1/query": {"expression": "locker code OR playbook"},
        "/v1/ask": {"question": "What is Ana's locker code?"},
        "/v1/ask/batch": {"questions": [{"question": "What is in the private playbook?"}]},
        "/v1/ingest": {"paths": ["/etc/hostname"]},
        "/v1/ingest/estimate": {"paths": ["/etc/hostname"]},
        "/v1/agents/{agent}/memories": {"text": "probe", "source": ids[0]},
        "/v1/agents/{agent}/memories/search": {"query": "locker code playbook"},
        "/v1/agents/{agent}/memories/prune": {"older_than": "0d", "room": ROOM_A},
        "/v1/agents/{agent}/context": {"message": "What is my locker code?", "room": ROOM_A},
        "/v1/agents/{agent}/compact": {"room": ROOM_A, "keep_recent": 0},
        "/v1/agents/{agent}/memories/{memory_id:path}": {"importance": "high"},
    }


def _paths(route: APIRoute, ids: list[str]) -> list[str]:
    """The route's path with its parameters aimed at agent A's data (for agent routes:
    as agent A itself, and as agent B naming A's memories, room and knowledge)."""
    values = {
        "{conversation}": ROOM_A,
        "{message_id}": ids[0],
        "{memory_id}": ids[0],
        "{name}": "Ana",
        "{job_id}": "job-000000000000",
    }
    path = route.path
    for key, value in values.items():
        path = path.replace(key, value)
    query = f"?room={ROOM_A}&user=ana&conversation={ROOM_A}&all=true"
    if "{agent}" not in path:
        return [path + query]
    return [
        path.replace("{agent}", "agent-a") + query,
        path.replace("{agent}", "agent-b") + query,
        path.replace("{agent}", "agent-b") + "?table=knowledge&count=100",
        path.replace("{agent}", "agent-b").replace(ids[0], ids[1]) + "?table=knowledge",
    ]


def test_agent_b_never_reads_agent_a_through_any_route(
    world: tuple[TestClient, dict[str, Any]],
) -> None:
    client, data = world
    ids = data["ids"]
    bodies = _bodies(ids)
    b = {"Authorization": f"Bearer {TOKEN_B}"}
    routes = [r for r in data["app"].routes if isinstance(r, APIRoute) and r.path.startswith("/v1")]
    with_body = {r.path for r in routes if r.body_field is not None} - {"/v1/ingest/upload"}
    assert with_body == set(bodies), "give every route with a body a probe in _bodies()"
    tried = 0
    for route in routes:
        for method in sorted(route.methods or ()):
            for path in _paths(route, ids):
                if route.path == "/v1/ingest/upload":
                    answer = client.post(path, files={"files": ("x.jsonl", b"{}")}, headers=b)
                else:
                    answer = client.request(method, path, json=bodies.get(route.path), headers=b)
                tried += 1
                assert answer.status_code in (201, 200, 400, 403, 404, 422), (path, answer.text)
                assert not leaked(answer.text), (method, path, answer.text)
                if "/agents/agent-b/" not in path:
                    assert answer.status_code == 403, (method, path, answer.status_code)
    assert tried > 50
    # Nothing B did removed or changed A's memories.
    a = {"Authorization": f"Bearer {TOKEN_A}"}
    kept = client.get("/v1/agents/agent-a/memories?table=knowledge", headers=a).json()
    assert [m["id"] for m in kept] == [ids[1]]
    mine = client.get(f"/v1/agents/agent-a/memories/{ids[0]}", headers=a)
    assert mine.status_code == 200 and mine.json()["importance"] == "normal"


def _rpc(client: TestClient, token: str, method: str, params: dict[str, Any]) -> str:
    answer = client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
        },
    )
    assert answer.status_code == 200, answer.text
    return answer.text


def test_agent_b_never_reads_agent_a_through_mcp(
    world: tuple[TestClient, dict[str, Any]],
) -> None:
    client, data = world
    ids = data["ids"]
    listed = json.loads(_rpc(client, TOKEN_B, "tools/list", {}))
    tools = {t["name"] for t in listed["result"]["tools"]}
    assert tools == {
        "ask",
        "query",
        "show_message",
        "list_entities",
        "search_memories",
        "add_memory",
        "get_context",
        "get_facts",
        "update_memory",
        "forget_memory",
    }
    probes: list[tuple[str, dict[str, Any]]] = [
        ("ask", {"question": "What is Ana's locker code?"}),
        ("query", {"expression": "locker OR playbook"}),
        ("show_message", {"message_id": ids[0], "conversation": ROOM_A}),
        ("list_entities", {"top": 100}),
    ]
    for agent in ("agent-a", "agent-b"):
        for table in ("messages", "knowledge"):
            probes.append(
                (
                    "search_memories",
                    {"agent": agent, "query": "locker code", "table": table, "room": ROOM_A},
                )
            )
            probes.append(
                ("search_memories", {"agent": agent, "query": "playbook", "table": table})
            )
        probes.append(
            ("get_context", {"agent": agent, "message": "my locker code?", "room": ROOM_A})
        )
        probes.append(("add_memory", {"agent": agent, "text": "probe", "room": ROOM_A}))
        probes.append(("get_facts", {"agent": agent, "user": "ana", "history": True}))
    probes.append(("forget_memory", {"agent": "agent-a", "memory_id": ids[0]}))
    for agent in ("agent-a", "agent-b"):  # B changing A's memory, or B's with A's id
        probes.append(
            ("update_memory", {"agent": agent, "memory_id": ids[0], "importance": "high"})
        )
    assert {name for name, _ in probes} == tools
    for name, arguments in probes:
        text = _rpc(client, TOKEN_B, "tools/call", {"name": name, "arguments": arguments})
        assert not leaked(text), (name, arguments, text)
        if arguments.get("agent") != "agent-b":
            assert json.loads(text)["result"]["isError"], (name, arguments)
    for method, params in (
        ("resources/list", {}),
        ("resources/templates/list", {}),
        ("resources/read", {"uri": "structrag://conversations"}),
        ("resources/read", {"uri": f"structrag://conversations/{ROOM_A}"}),
        ("resources/read", {"uri": f"structrag://conversations/{ROOM_A}/messages/{ids[0]}"}),
    ):
        text = _rpc(client, TOKEN_B, method, params)
        assert "error" in json.loads(text) and not leaked(text), (method, text)
    # The same calls with agent A's token do reach A's memories (the probes can find them).
    text = _rpc(
        client,
        TOKEN_A,
        "tools/call",
        {"name": "search_memories", "arguments": {"agent": "agent-a", "query": "locker code"}},
    )
    assert SECRET in text


def test_a_token_scoped_to_an_agent_whose_name_holds_a_slash(
    example_index: Path, tmp_path: Path
) -> None:
    """The agent is the whole percent-encoded segment: a token for "team/bot" reaches
    /v1/agents/team%2Fbot/..., one for "team" does not."""
    team_bot, team = "team-bot-token-0123456789abcdef", "team-token-0123456789abcdef"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {team_bot: ["team/bot"], team: ["team"]}}))
    service = Service(copy_index(example_index, tmp_path / "index"), readers=1, warm=False)
    try:
        service.add_memory("team/bot", f"My locker code is {SECRET}.")
        app = create_app(service, tokens=Tokens.of(token_file=tokens), mcp=False)
        with TestClient(app, base_url="http://127.0.0.1:8765") as client:
            path = "/v1/agents/team%2Fbot/memories"
            as_team_bot = {"Authorization": f"Bearer {team_bot}"}
            as_team = {"Authorization": f"Bearer {team}"}
            mine = client.get(path, headers=as_team_bot)
            assert mine.status_code == 200, mine.json()
            assert leaked(mine.text)
            other = client.get(path, headers=as_team)
            assert other.status_code == 403 and not leaked(other.text)
            own = client.get("/v1/agents/team/memories", headers=as_team)
            assert own.status_code == 200 and not leaked(own.text)
    finally:
        service.close()
