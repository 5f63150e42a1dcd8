"""``structrag serve`` (HTTP: the API, the web explorer, MCP) and ``structrag mcp`` (stdio).

Both need the serve extra (FastAPI, uvicorn, the MCP SDK); they import it only when they
run, so the rest of the CLI starts without it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from structrag.cli.common import db_option
from structrag.errors import StructragError

INSTALL = "pip install 'structrag[serve]'"
F = TypeVar("F", bound=Callable[..., Any])


def needs_extra() -> None:
    """Say how to install the serve extra when a part of it is missing."""
    import importlib.util

    missing = [
        name
        for name in ("fastapi", "uvicorn", "mcp", "multipart")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise StructragError(
            f"structrag serve needs {', '.join(missing)}, which are not installed",
            hint=f"install the serve extra: {INSTALL}",
        )


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = value.strip().lower().removesuffix("b")
    try:
        if text and text[-1] in units:
            return int(float(text[:-1]) * units[text[-1]])
        return int(text)
    except ValueError:
        raise click.BadParameter(f"expected a size such as 1M or 512K, got {value!r}") from None


def create_option(func: F) -> F:
    return click.option(
        "--create",
        is_flag=True,
        help="Start from a new, empty index when --db holds none (without it, a --db "
        "that holds no index is an error, as for every command but ingest).",
    )(func)


@click.command()
@db_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Any but loopback needs a token.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--token",
    envvar="STRUCTRAG_SERVER_TOKEN",
    help="A token that reaches the whole index; requests send 'Authorization: Bearer "
    "TOKEN'. Env: STRUCTRAG_SERVER_TOKEN.",
)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help='JSON mapping tokens to "*" (the whole index) or a list of agents: '
    '{"tokens": {"TOKEN": "*", "OTHER": ["support-bot"]}}.',
)
@click.option(
    "--readers",
    type=click.IntRange(1, 32),
    default=2,
    show_default=True,
    help="Reader threads, each with its own connection and caches.",
)
@click.option(
    "--max-body",
    default="1M",
    show_default=True,
    callback=_size,
    help="Largest request body (413 above it).",
)
@click.option(
    "--max-upload",
    default="512M",
    show_default=True,
    callback=_size,
    help="Largest upload to /v1/ingest/upload.",
)
@click.option(
    "--log",
    "access_log",
    default="-",
    show_default=True,
    help="Request log, one JSON line per request: '-' for stderr, a file, or 'off'.",
)
@click.option("--no-mcp", is_flag=True, help="Do not serve MCP at /mcp.")
@create_option
def serve(
    db: str,
    host: str,
    port: int,
    token: str | None,
    token_file: Path | None,
    readers: int,
    max_body: int,
    max_upload: int,
    access_log: str,
    no_mcp: bool,
    create: bool,
) -> None:
    """Serve an index: the HTTP API under /v1, the web explorer at /, MCP at /mcp.

    The server opens the index once and keeps it warm (an ask takes milliseconds), is
    its only writer, and serves many readers while it writes: they see the last
    committed state. Ingest runs as background jobs. While it runs, `structrag ask`,
    `query`, `stats`, `show`, `ingest` and `memory ... --db DIR` go through it (it
    writes its address to DIR/server.json). SIGTERM or Ctrl-C stops it gracefully.

    \b
    Examples:
      structrag serve --db my-index                    # http://127.0.0.1:8765/
      structrag serve --db my-index --host 0.0.0.0 --token-file tokens.json
      curl -s localhost:8765/v1/ask -H 'content-type: application/json' \\
          -d '{"question": "When did Marco adopt Biscuit?", "budget": 200}'
    """
    needs_extra()
    from structrag.server.run import ServeOptions
    from structrag.server.run import serve as run_server

    run_server(
        db,
        ServeOptions(
            host=host,
            port=port,
            token=token,
            token_file=token_file,
            readers=readers,
            max_body=max_body,
            max_upload=max_upload,
            access_log=None if access_log == "off" else access_log,
            mcp=not no_mcp,
            create=create,
        ),
    )


@click.command("mcp")
@db_option
@create_option
def mcp_command(db: str, create: bool) -> None:
    """An MCP server on stdio for an agent: tools ask, query, search_memories, add_memory,
    get_context, get_facts, update_memory, forget_memory, show_message and list_entities;
    resources for conversations and messages.

    \b
    An MCP client starts it, e.g. in its configuration:
      {"mcpServers": {"structrag": {"command": "structrag",
                                    "args": ["mcp", "--db", "/path/to/my-index"]}}}
    When `structrag serve` owns the index, point the agent at its /mcp instead.
    Between calls it lets other commands (`structrag stats`, `memory add`) have the
    index.
    """
    needs_extra()
    from structrag.server.run import serve_mcp_stdio

    serve_mcp_stdio(db, create=create)
