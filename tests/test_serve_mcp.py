"""``structrag mcp --db DIR``: the MCP server on stdio, started as a subprocess and driven
by the official SDK's client, as an agent framework would."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

from structrag import Index
from tests.serve_helpers import copy_index, run_cli

TOOLS = {
    "ask",
    "query",
    "search_memories",
    "add_memory",
    "get_context",
    "show_message",
    "list_entities",
    "get_facts",
    "update_memory",
    "forget_memory",
}


def test_an_agent_adds_a_memory_and_gets_it_back_through_ask(
    example_index: Path, tmp_path: Path
) -> None:
    directory = copy_index(example_index, tmp_path / "index")
    with Index(directory) as index:
        index.knowledge.add("The studio's wifi password is teapot-42.", shared=True)
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "structrag", "mcp", "--db", str(directory)]
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            tools = await client.list_tools()
            assert {t.name for t in tools.tools} == TOOLS
            added = await client.call_tool(
                "add_memory",
                {
                    "agent": "travel-bot",
                    "text": "My passport expires in March 2027.",
                    "user": "ines",
                    "room": "dm-ines",
                },
            )
            assert not added.is_error, added.content
            memory = added.structured_content
            assert memory is not None and memory["agent"] == "travel-bot"
            answer = await client.call_tool(
                "ask", {"question": "When does the passport expire?", "budget": 300}
            )
            assert not answer.is_error, answer.content
            data = answer.structured_content
            assert data is not None and memory["id"] in data["message_ids"]
            assert "March 2027" in data["context"] and data["tokens"] <= 300
            context = await client.call_tool(
                "get_context",
                {"agent": "travel-bot", "message": "Can I fly in 2027?", "room": "dm-ines"},
            )
            assert memory["id"] in (context.structured_content or {})["text"]
            wifi = {"question": "What is the wifi password?", "budget": 300}
            plain = await client.call_tool("ask", wifi)
            assert "teapot-42" not in (plain.structured_content or {})["context"]
            both = await client.call_tool(
                "ask", {**wifi, "sources": ["conversations", "knowledge"]}
            )
            assert not both.is_error and "teapot-42" in (both.structured_content or {})["context"]
            none = await client.call_tool("ask", {**wifi, "sources": []})
            assert none.is_error and "no sources to ask" in str(none.content)
            shared = await client.call_tool(
                "get_context",
                {
                    "agent": "travel-bot",
                    "message": "Can I fly in 2027?",
                    "room": "dm-ines",
                    "shares": {"history": 0.2, "retrieval": 0.6, "profile": 0.2},
                },
            )
            sections = (shared.structured_content or {})["sections"]
            assert not shared.is_error and [x["budget"] for x in sections] == [800, 2400, 800]
            bad_shares = await client.call_tool(
                "get_context", {"agent": "travel-bot", "message": "hi", "shares": {"foo": 1}}
            )
            assert bad_shares.is_error and "memory_input_error" in str(bad_shares.content)
            misspelt = await client.call_tool("ask", {**wifi, "budgt": 50})
            assert misspelt.is_error and "ask takes no argument 'budgt'" in str(misspelt.content)
            assert "budget" in str(misspelt.content)  # the hint lists what it takes
            lives = await client.call_tool(
                "add_memory",
                {
                    "agent": "travel-bot",
                    "text": "I live in Porto.",
                    "user": "ines",
                    "room": "dm-ines",
                },
            )
            moved = await client.call_tool(
                "add_memory",
                {
                    "agent": "travel-bot",
                    "text": "I moved to Lisbon.",
                    "user": "ines",
                    "room": "dm-ines",
                },
            )
            known = await client.call_tool("get_facts", {"agent": "travel-bot", "user": "ines"})
            held = known.structured_content or {}
            assert not known.is_error and "Lisbon" in str(held["profile"])
            assert "Porto" not in str(held["facts"]) and "Lisbon" in str(held["facts"])
            forgot = await client.call_tool(
                "forget_memory",
                {"agent": "travel-bot", "memory_id": (moved.structured_content or {})["id"]},
            )
            assert not forgot.is_error
            again = await client.call_tool("get_facts", {"agent": "travel-bot", "user": "ines"})
            assert "Porto" in str((again.structured_content or {})["facts"])
            assert lives.structured_content is not None
            goal = await client.call_tool(
                "add_memory", {"agent": "travel-bot", "text": "Visit Kyoto", "table": "goals"}
            )
            goal_id = (goal.structured_content or {})["id"]
            done = await client.call_tool(
                "update_memory", {"agent": "travel-bot", "memory_id": goal_id, "status": "done"}
            )
            assert not done.is_error and (done.structured_content or {})["status"] == "done"
            pasted = "Our dog handbook. " * 2000  # 36,000 characters
            big = await client.call_tool(
                "add_memory", {"agent": "travel-bot", "text": pasted, "room": "docs"}
            )
            shown = big.structured_content or {}
            assert shown["clipped"] == len(pasted)
            assert len(shown["text"]) < 4100 and "more characters)" in shown["text"]
            hits = await client.call_tool(
                "search_memories",
                {"agent": "travel-bot", "query": "dog handbook", "room": "docs", "count": 1},
            )
            (hit,) = (hits.structured_content or {})["hits"]
            assert hit["id"] == shown["id"] and len(hit["text"]) < 4100 and hit["clipped"]
            negative = await client.call_tool("list_entities", {"top": -1})
            assert negative.is_error and "top must be at least 1" in str(negative.content)
            missing = await client.call_tool("show_message", {"message_id": "no-such-message"})
            assert missing.is_error and "not_found_error" in str(missing.content)
            resources = await client.list_resources()
            assert "structrag://conversations" in {str(r.uri) for r in resources.resources}
            read = await client.read_resource("structrag://conversations")
            listed = json.loads(read.contents[0].text)  # type: ignore[union-attr]
            assert {"friends", "dm-ines"} <= {c["id"] for c in listed}
            message = await client.read_resource("structrag://conversations/friends/messages/m11")
            shown = json.loads(message.contents[0].text)  # type: ignore[union-attr]
            assert shown["id"] == "m11" and shown["knowledge"]

    anyio.run(session)


def test_an_idle_stdio_server_lets_other_commands_have_the_index(
    example_index: Path, tmp_path: Path
) -> None:
    """Between calls, `structrag mcp` gives the index up to a process that waits for it,
    as the README says every process does: `stats` and `memory add` work while it idles
    (they waited STRUCTRAG_LOCK_TIMEOUT and failed while it held the file), and its next
    call sees what they wrote."""
    directory = copy_index(example_index, tmp_path / "index")
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "structrag", "mcp", "--db", str(directory)]
    )
    patient = {"STRUCTRAG_LOCK_TIMEOUT": "5"}

    async def session() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            added = await client.call_tool("add_memory", {"agent": "idle-bot", "text": "Hi."})
            assert not added.is_error, added.content
            stats = await anyio.to_thread.run_sync(
                lambda: run_cli("stats", "--db", str(directory), "--json", env=patient)
            )
            assert stats.returncode == 0, stats.stderr
            assert json.loads(stats.stdout)["messages"] >= 47
            add = ("memory", "add", "I keep my kayak in Cascais.", "--agent", "idle-bot")
            written = await anyio.to_thread.run_sync(
                lambda: run_cli(*add, "--db", str(directory), "--json", env=patient)
            )
            assert written.returncode == 0, written.stderr
            found = await client.call_tool(
                "search_memories", {"agent": "idle-bot", "query": "kayak", "mode": "text"}
            )
            hits = (found.structured_content or {})["hits"]
            assert json.loads(written.stdout)["id"] in {h["id"] for h in hits}

    anyio.run(session)
