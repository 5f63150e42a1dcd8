"""``structrag serve`` (HTTP: the API, the web explorer, MCP) and ``structrag mcp`` (stdio).

Both need the serve extra (FastAPI, uvicorn, the MCP SDK); they import it only when they
run, so the rest of the CLI starts without it.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from structrag.cli.common import db_option
from structrag.errors import StructragError

INSTALL = "pip install 'structrag[serve]'"
F = TypeVar("F", bound=Callable[..., Any])


def needs_extra(command: str = "structrag serve") -> None:
    """Say how to install the serve extra when a part of it is missing (``command``: the
    command that needs it, as the error names it)."""
    import importlib.util

    missing = [
        name
        for name in ("fastapi", "uvicorn", "mcp", "multipart")
        if importlib.util.find_spec(name) is None
    ]
    if missing:
        raise StructragError(
            f"{command} needs {', '.join(missing)}, which are not installed",
            hint=f"install the serve extra: {INSTALL}",
        )


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    """A size in bytes: ``1M``, ``512K``, ``2G`` or a number of bytes; more than 0."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = value.strip().lower().removesuffix("b")
    try:
        scale = units[text[-1]] if text and text[-1] in units else 1
        size = int(float(text[:-1]) * scale) if scale > 1 else int(text)
    except (ValueError, OverflowError):
        raise click.BadParameter(f"expected a size such as 1M or 512K, got {value!r}") from None
    if size <= 0:
        raise click.BadParameter(
            f"expected a size of more than 0 bytes, such as 1M or 512K, got {value!r}"
        )
    return size


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
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0: any free port).",
)
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
@click.option(
    "--grace",
    type=click.FloatRange(1, 3600),
    default=60,
    show_default=True,
    help="Seconds to wait for requests in flight when stopping (SIGTERM, Ctrl-C); a "
    "second Ctrl-C stops at once.",
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
    grace: float,
    no_mcp: bool,
    create: bool,
) -> None:
    """Serve an index: the HTTP API under /v1, the web explorer at /, MCP at /mcp.

    The server opens the index once and keeps it warm (an ask takes milliseconds), is
    its only writer, and serves many readers while it writes: they see the last
    committed state. Ingest runs as background jobs. While it runs, `structrag ask`,
    `query`, `stats`, `show`, `ingest` and `memory ... --db DIR` go through it (it
    writes its address to DIR/server.json). SIGTERM or Ctrl-C stops it gracefully: the
    requests in flight are answered (up to --grace seconds), new ones get 503; it exits
    0 after SIGTERM, 130 after Ctrl-C. Started while `structrag ingest` writes the index,
    it waits for that ingest to finish.

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

    stopped_by = run_server(
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
            grace=grace,
        ),
    )
    if stopped_by == signal.SIGINT:
        raise KeyboardInterrupt  # exit 130, as every command does on Ctrl-C


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
    needs_extra("structrag mcp")
    from structrag.server.run import serve_mcp_stdio

    serve_mcp_stdio(db, create=create)
