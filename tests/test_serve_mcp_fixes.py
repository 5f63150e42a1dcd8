"""A token granted one agent reads that agent's clipped memories whole over MCP: a real
``structrag serve`` with a token file, driven by the official SDK's streamable HTTP
client with each token, as an agent framework would."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tests.serve_helpers import copy_index, served

ADMIN = "admin-token-0123456789abcdef"
TOKEN_A = "agent-a-token-0123456789abcdef"
TOKEN_B = "agent-b-token-0123456789abcdef"
PASTED = "Our dog handbook, chapter and verse. " * 1000  # 37,000 characters


async def _calls(url: str, token: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    """Each tool call's result, in order, over one session with ``token``."""
    async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http:
        transport = streamable_http_client(f"{url}/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=120) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]


def test_an_agent_token_reads_its_own_clipped_memory_whole(
    example_index: Path, tmp_path: Path
) -> None:
    directory = copy_index(example_index, tmp_path / "index")
    tokens = tmp_path / "tokens.json"
    tokens.write_text(
        json.dumps({"tokens": {ADMIN: "*", TOKEN_A: ["agent-a"], TOKEN_B: ["agent-b"]}})
    )
    with served(directory, "--token-file", str(tokens)) as server:

        def calls(token: str, *made: tuple[str, dict[str, Any]]) -> list[Any]:
            return anyio.run(_calls, server.url, token, list(made))

        (short, added, hits) = calls(
            TOKEN_A,
            ("add_memory", {"agent": "agent-a", "text": "I live in Porto.", "user": "ines"}),
            ("add_memory", {"agent": "agent-a", "text": PASTED, "room": "docs"}),
            ("search_memories", {"agent": "agent-a", "query": "dog handbook", "room": "docs"}),
        )
        record = short.structured_content or {}
        assert not short.is_error and record["text"] == "I live in Porto."
        assert "clipped" not in record and "whole" not in record  # nothing to give whole
        assert not added.is_error, added.content
        clipped = added.structured_content or {}
        assert clipped["clipped"] == len(PASTED) and len(clipped["text"]) < 4100
        # The clipped result names the call that gives the text whole, for this token.
        whole = clipped["whole"]
        assert whole == {
            "tool": "show_message",
            "arguments": {"message_id": clipped["id"], "agent": "agent-a", "conversation": "docs"},
        }
        (hit,) = [h for h in (hits.structured_content or {})["hits"] if h["id"] == clipped["id"]]
        assert hit["clipped"] == len(PASTED) and hit["whole"] == whole

        shown, bare, index_wide = calls(
            TOKEN_A,
            (whole["tool"], whole["arguments"]),
            ("show_message", {"message_id": clipped["id"], "agent": "agent-a"}),  # no room
            ("show_message", {"message_id": clipped["id"], "conversation": "docs"}),
        )
        assert not shown.is_error, shown.content
        memory = shown.structured_content or {}
        assert memory["text"] == PASTED and memory["id"] == clipped["id"]
        assert memory["agent"] == "agent-a" and "clipped" not in memory
        assert not bare.is_error and (bare.structured_content or {})["text"] == PASTED
        # Without the agent, show_message is still the whole index's: not this token's.
        assert index_wide.is_error and "access_denied" in str(index_wide.content)

        # Another agent's token reads nothing of it, by either agent's name.
        as_a, as_b = calls(
            TOKEN_B,
            ("show_message", whole["arguments"]),
            ("show_message", {**whole["arguments"], "agent": "agent-b"}),
        )
        assert as_a.is_error and "access_denied" in str(as_a.content)
        assert as_b.is_error and "not_found" in str(as_b.content)
        assert "dog handbook" not in str(as_a.content) + str(as_b.content)

        # A whole-index token: the message and its knowledge, as before; with the agent,
        # the memory whole.
        message, admin_memory = calls(
            ADMIN,
            ("show_message", {"message_id": clipped["id"], "conversation": "docs"}),
            ("show_message", whole["arguments"]),
        )
        assert not message.is_error, message.content
        assert (message.structured_content or {})["id"] == clipped["id"]
        assert (admin_memory.structured_content or {})["text"] == PASTED
