"""The MCP tools and resources (official ``mcp`` SDK), over stdio or at ``/mcp``.

The same functions serve ``structrag mcp --db DIR`` (stdio, a local process: everything
is reachable) and the HTTP server's ``/mcp`` (streamable HTTP): there, each call carries
the request's ``Authorization`` header and reaches what its token grants, exactly as the
HTTP API does. Tools on memories take the agent; tools on the whole index need a token
granted the whole index.

Tools: ``ask``, ``query``, ``show_message``, ``list_entities`` (the index);
``search_memories``, ``add_memory``, ``get_context``, ``get_facts``, ``update_memory``,
``forget_memory`` (an agent's memory), and ``show_message`` with ``agent`` (one of the
agent's memories whole: what the others clip). Resources:
``structrag://conversations`` (the list), ``structrag://conversations/{conversation}``
(its first messages) and ``structrag://conversations/{conversation}/messages/{message_id}``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import anyio.to_thread
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError, ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_REQUEST, CallToolResult, TextContent

from structrag import __version__
from structrag.errors import StructragError
from structrag.server.auth import OPEN, Grant, Tokens
from structrag.server.service import Service, error_dict

T = TypeVar("T")
Table = Literal["messages", "facts", "relationships", "goals", "knowledge"]
Mode = Literal["structured", "text", "vector", "hybrid"]
Source = Literal["conversations", "knowledge"]
#: How many messages the conversation resource lists.
RESOURCE_MESSAGES = 200
#: A memory's text in a tool's result is cut after this many characters (a pasted
#: document must not flood the model's context; `show_message` with the memory's agent
#: gives it whole, to that agent's token too).
TOOL_TEXT_CHARS = 4000

INSTRUCTIONS = """\
structrag: structured memory over conversations. `ask` answers a question from the
indexed history within a token budget (the context cites message ids; `show_message`
shows one with its entities, actions and topics). Agent memory: `add_memory` stores what
happens (extracted and searchable at once), `search_memories` finds it, and
`get_context` returns what to put in the prompt before replying (history, retrieved
memories, what is known about the user), within a budget; `get_facts` lists what is known
about a user, `update_memory` marks a goal done (or changes a memory's importance) and
`forget_memory` removes a memory and what rests on it. A memory's text clipped in a result
(`clipped`) is given whole by `show_message` with the memory's `agent` (its `whole`
field holds the call)."""


def build_mcp(service: Service, tokens: Tokens | None = None) -> MCPServer:
    """The MCP server on ``service``; ``tokens`` None means every call reaches everything
    (stdio), else each call's grant comes from its ``Authorization`` header."""
    server: MCPServer = MCPServer(
        "structrag", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    def grant(ctx: Context) -> Grant:
        if tokens is None:
            return OPEN
        headers = ctx.headers or {}
        return tokens.resolve(headers.get("authorization"))

    async def run(ctx: Context, check: Callable[[Grant], None], work: Callable[[], T]) -> T:
        try:
            check(grant(ctx))
            return await anyio.to_thread.run_sync(work)
        except StructragError as exc:
            raise ToolError(_described(exc)) from None

    def index_wide(g: Grant) -> None:
        g.require_index()

    def agent_scope(agent: str) -> Callable[[Grant], None]:
        return lambda g: g.require_agent(agent)

    @server.tool()
    async def ask(
        question: str,
        ctx: Context,
        conversation: str | None = None,
        budget: int = 1000,
        explain: bool = False,
        sources: list[Source] | None = None,
    ) -> dict[str, Any]:
        """Answer context for a question from the indexed history (and memories), within
        `budget` tokens: the translated query, the packed context (`context`, `tokens`)
        and the messages in it, each with its id and conversation. `sources`:
        `conversations` (the default), `knowledge` (document fragments), or both in one
        budget."""
        return await run(
            ctx,
            index_wide,
            lambda: service.ask(
                question,
                conversation=conversation,
                budget=budget,
                explain=explain,
                sources=["conversations"] if sources is None else sources,
            ),
        )

    @server.tool()
    async def query(
        expression: str,
        ctx: Context,
        conversation: str | None = None,
        limit: int = 20,
        explain: bool = False,
    ) -> dict[str, Any]:
        """Run a structrag query expression, e.g. `action(Marco, adopt, *) OR
        entity:Biscuit`, `topic:"mental health" speaker:Ann`, `date:2024-05`: ranked
        messages and the semantic refs that matched."""
        return await run(
            ctx,
            index_wide,
            lambda: service.query(
                expression, conversation=conversation, limit=limit, explain=explain
            ),
        )

    @server.tool()
    async def show_message(
        message_id: str,
        ctx: Context,
        conversation: str | None = None,
        agent: str | None = None,
    ) -> dict[str, Any]:
        """A message and the knowledge extracted from it (entities, actions, topics), each
        with its character span. With `agent`: one of that agent's memories by id, whole
        (a memory's text that `search_memories` or `add_memory` clipped), which the
        agent's own token may read; `conversation` is then its room, where two rooms have
        the id."""
        if agent is not None:
            return await run(
                ctx,
                agent_scope(agent),
                lambda: service.get_memory(agent, message_id, conversation),
            )
        return await run(ctx, index_wide, lambda: service.show(message_id, conversation))

    @server.tool()
    async def list_entities(
        ctx: Context, top: int = 20, conversation: str | None = None
    ) -> dict[str, Any]:
        """The most mentioned entities (names, types, how many mentions and messages)."""
        rows = await run(ctx, index_wide, lambda: service.entities(top, conversation))
        return {"entities": rows}

    @server.tool()
    async def search_memories(
        agent: str,
        query: str,
        ctx: Context,
        room: str | None = None,
        table: Table = "messages",
        count: int = 10,
        mode: Mode = "structured",
        user: str | None = None,
    ) -> dict[str, Any]:
        """The agent's memories that best answer `query`, best first (structured: the
        query compiler; text: BM25; vector: embeddings; hybrid: both fused); `user` keeps
        a user's own memories."""
        hits = await run(
            ctx,
            agent_scope(agent),
            lambda: service.search_memories(
                agent, query, room=room, table=table, count=count, mode=mode, user=user
            ),
        )
        return {"hits": [_clipped(hit) for hit in hits]}

    @server.tool()
    async def add_memory(
        agent: str,
        text: str,
        ctx: Context,
        user: str | None = None,
        room: str | None = None,
        table: Table = "messages",
        importance: Literal["low", "normal", "high"] = "normal",
        unique: bool = False,
    ) -> dict[str, Any]:
        """Store a memory for the agent (who said it: `user`; where: `room`). It is
        extracted and searchable when this returns; a user's statements about themselves
        also become facts and profile entries."""
        added = await run(
            ctx,
            agent_scope(agent),
            lambda: service.add_memory(
                agent,
                text,
                user=user,
                room=room,
                table=table,
                importance=importance,
                unique=unique,
            ),
        )
        return _clipped(added)

    @server.tool()
    async def get_context(
        agent: str,
        message: str,
        ctx: Context,
        room: str | None = None,
        user: str | None = None,
        budget: int = 4000,
        shares: dict[str, float] | None = None,
    ) -> dict[str, Any]:
        """What the agent should put in its prompt before answering `message` in `room`:
        the conversation so far, relevant memories and knowledge, and what it knows about
        the user, within `budget` tokens; every line cites its memory id. `shares`: how
        the budget is split, e.g. {"history": 0.5, "retrieval": 0.3, "profile": 0.2}."""
        return await run(
            ctx,
            agent_scope(agent),
            lambda: service.context(
                agent, message, room=room, budget=budget, user=user, shares=shares
            ),
        )

    @server.tool()
    async def get_facts(
        agent: str, ctx: Context, user: str | None = None, history: bool = False
    ) -> dict[str, Any]:
        """What the agent holds about a user: their profile entries, and the facts and
        relationships stated (those a later statement superseded too, with `history`),
        each with the memory it comes from."""

        def work() -> dict[str, Any]:
            facts = service.facts(agent, user, None, history=history)
            profile = service.profile(agent, user, history=history) if user else []
            return {"profile": profile, "facts": facts}

        return await run(ctx, agent_scope(agent), work)

    @server.tool()
    async def update_memory(
        agent: str,
        memory_id: str,
        ctx: Context,
        status: Literal["open", "in_progress", "done", "abandoned"] | None = None,
        importance: Literal["low", "normal", "high"] | None = None,
        room: str | None = None,
    ) -> dict[str, Any]:
        """Change one of the agent's memories: a goal's `status` (mark it done), or its
        `importance`. `room` where two rooms have the id."""
        return await run(
            ctx,
            agent_scope(agent),
            lambda: service.update_memory(
                agent, memory_id, room, status=status, importance=importance
            ),
        )

    @server.tool()
    async def forget_memory(
        agent: str, memory_id: str, ctx: Context, room: str | None = None
    ) -> dict[str, Any]:
        """Remove one of the agent's memories ("forget that") and what derives from it
        alone: its facts, profile entries, observations and summaries. `room` where two
        rooms have the id."""
        return await run(
            ctx, agent_scope(agent), lambda: service.remove_memory(agent, memory_id, room)
        )

    parameters: dict[str, set[str]] = {}

    async def unknown_arguments(params: Mapping[str, Any] | None) -> str | None:
        """Why a tool call's arguments are refused: the SDK drops names the tool does not
        take, so a misspelt ``budgt`` would silently run with the default budget."""
        if not parameters:
            for tool in await server.list_tools():
                parameters[tool.name] = set(tool.input_schema.get("properties", {}))
        name = (params or {}).get("name")
        given = (params or {}).get("arguments") or {}
        if not isinstance(name, str) or name not in parameters or not isinstance(given, dict):
            return None  # the SDK answers these itself
        unknown = sorted(set(given) - parameters[name])
        if not unknown:
            return None
        return (
            f"input_error: {name} takes no argument {', '.join(map(repr, unknown))} "
            f"(hint: its arguments are {', '.join(sorted(parameters[name]))})"
        )

    async def guard(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        """Resources show the whole index: only a token granted it may list or read them.
        A tool call naming an argument the tool does not take is refused."""
        if ctx.method == "tools/call":
            refused = await unknown_arguments(ctx.params)
            if refused:
                return CallToolResult(
                    content=[TextContent(type="text", text=refused)], is_error=True
                )
        if tokens is not None and ctx.method.startswith("resources/"):
            headers = getattr(ctx.request, "headers", None) or {}
            try:
                tokens.resolve(headers.get("authorization")).require_index()
            except StructragError as exc:
                raise MCPError(INVALID_REQUEST, _described(exc)) from None
        return await call_next(ctx)

    server.middleware.append(guard)

    async def resource(work: Callable[[], T]) -> T:
        try:
            return await anyio.to_thread.run_sync(work)
        except StructragError as exc:
            raise ResourceError(_described(exc)) from None

    @server.resource(
        "structrag://conversations", mime_type="application/json", name="conversations"
    )
    async def conversations() -> list[dict[str, Any]]:
        """The conversations in the index: ids, message counts, dates, speakers."""
        return await resource(service.conversations)

    @server.resource(
        "structrag://conversations/{conversation}",
        mime_type="application/json",
        name="conversation",
    )
    async def conversation(conversation: str) -> dict[str, Any]:
        """A conversation's first messages, each with its knowledge."""
        return await resource(lambda: service.messages(conversation, limit=RESOURCE_MESSAGES))

    @server.resource(
        "structrag://conversations/{conversation}/messages/{message_id}",
        mime_type="application/json",
        name="message",
    )
    async def message(conversation: str, message_id: str) -> dict[str, Any]:
        """One message and its knowledge with spans."""
        return await resource(lambda: service.show(message_id, conversation))

    return server


def _clipped(record: dict[str, Any]) -> dict[str, Any]:
    """A memory for a tool's result: its text cut after :data:`TOOL_TEXT_CHARS`, saying
    how much was left out (``clipped``: the text's whole length) and the call that gives
    it whole (``whole``: `show_message` with the memory's agent, which the agent's own
    token may make)."""
    text = record.get("text")
    if not isinstance(text, str) or len(text) <= TOOL_TEXT_CHARS:
        return record
    more = len(text) - TOOL_TEXT_CHARS
    arguments = {"message_id": record.get("id"), "agent": record.get("agent")}
    if record.get("room"):
        arguments["conversation"] = record["room"]
    return {
        **record,
        "text": f"{text[:TOOL_TEXT_CHARS]} … ({more:,} more characters)",
        "clipped": len(text),
        "whole": {"tool": "show_message", "arguments": arguments},
    }


def _described(exc: StructragError) -> str:
    """An error as a tool or resource reports it: its code, message and hint."""
    error = error_dict(exc)
    hint = f" (hint: {error['hint']})" if error.get("hint") else ""
    return f"{error['code']}: {error['message']}{hint}"
