"""What every command shares: options, output, progress, and opening an index."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from structrag.errors import IndexStateError, StructragError, shown_path
from structrag.query.context import MAX_BUDGET

if TYPE_CHECKING:
    from structrag.cli.remote import Remote, Via
    from structrag.index import Index

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


class ClickProgress:
    """A :class:`~structrag.ingest.ProgressSink` drawing a click progress bar on stderr."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self._bar: Any = None

    def start(self, total: int, label: str) -> None:
        if not self.enabled:
            return
        self._bar = click.progressbar(
            length=total,
            label=label.ljust(12),
            file=sys.stderr,
            show_pos=True,
            show_eta=True,
            item_show_func=None,
        )
        self._bar.__enter__()

    @property
    def idle(self) -> bool:
        """Not started, or finished."""
        return self._bar is None

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def finish(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None


def db_option(func: F) -> F:
    return click.option(
        "--db",
        "db",
        required=True,
        envvar="STRUCTRAG_DB",
        type=click.Path(file_okay=False),
        help="Index directory (created by ingest). Env: STRUCTRAG_DB.",
    )(func)


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(func)


def emit_json(value: Any) -> None:
    """``value`` as strict JSON (RFC 8259): no NaN or Infinity (they are null), times in
    ISO 8601, bytes in hex, durations in seconds."""
    click.echo(json.dumps(_strict(value), ensure_ascii=False, indent=2, default=_plain))


def _strict(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_strict(v) for v in value]
    return value


def _plain(value: Any) -> Any:
    """What :func:`json.dumps` cannot write itself, as JSON's values."""
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if isinstance(value, Decimal):
        return _strict(float(value))
    if isinstance(value, set | frozenset):
        return _strict(sorted(value, key=str))
    return str(value)


def note(text: str) -> None:
    click.echo(text, err=True)


def on_index(
    db: str,
    via: Via,
    *,
    remote: Callable[[Remote], T],
    local: Callable[[Index], T],
    write: bool = False,
) -> T:
    """What a command reads or writes: through the server that owns ``db`` when one
    does (see :mod:`structrag.cli.remote`), else from the index files."""
    server = via.server(db)
    if server is not None:
        return remote(server)
    with open_for(db, write=write, served_ok=via.no_server) as index:
        return local(index)


@contextmanager
def open_for(
    db: str, *, write: bool = False, create: bool = False, served_ok: bool = False
) -> Iterator[Index]:
    """The index at ``db`` (read-only unless ``write``), its notes printed, closed after.
    Only a command that adds (``create``) makes a new one: a mistyped ``--db`` given to
    any other is an error, not an empty index.

    An index a live server owns cannot be opened: the server holds its files from start
    to stop, so waiting for them would only time out. That is an error at once, naming
    the server. ``served_ok`` (``--no-server``, on a command that could have gone through
    the server) only changes what the error says."""
    from structrag.index import Index

    if not create and not Path(db).is_dir():
        shown = shown_path(db)
        raise StructragError(
            f"no index at {shown}", hint=f"create one with `structrag ingest FILE --db {shown}`"
        )
    refuse_if_served(db, no_server=served_ok)
    index = Index(db, read_only=not write, create=write and create)
    try:
        for text in index.notes:
            note(f"note: {text}")
        yield index
    finally:
        index.close()


def refuse_if_served(db: str, *, no_server: bool) -> None:
    """An error at once when a live ``structrag serve`` owns the index at ``db``: it holds
    the files from its start to its stop, so a command that opens them would only wait
    for the lock and time out. ``no_server``: the command was given ``--no-server`` (and
    could have gone through the server); the error then says to leave it out."""
    if not Path(db).is_dir():
        return
    from structrag.server.discovery import find_server

    served = find_server(db)
    if served is None:
        return
    if no_server:
        raise IndexStateError(
            f"the structrag server at {served.url} (process {served.pid}) holds the index at "
            f"{shown_path(db)}: --no-server cannot open its files while it runs",
            hint="leave out --no-server (and STRUCTRAG_NO_SERVER) to go through the server, "
            f"or stop it first (kill -TERM {served.pid})",
        )
    raise IndexStateError(
        f"a server owns {shown_path(db)} ({served.url}, process {served.pid}), and this "
        "command cannot go through it",
        hint=f"stop the server first (kill -TERM {served.pid}); it closes the index cleanly",
    )


def progress_bar(quiet: bool) -> ClickProgress:
    """A progress bar on stderr, unless ``quiet`` or stderr is not a terminal."""
    return ClickProgress(enabled=not quiet and sys.stderr.isatty())


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


#: Text output shows at most this much of a message (``--json`` shows all of it).
SHOWN_CHARS = 2_000


#: A ``--budget`` of tokens: the limit the Python API and the server hold to as well.
BUDGET = click.IntRange(1, MAX_BUDGET)


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages`` (``plural`` for a noun that takes another ending)."""
    return f"{count:,} {noun if count == 1 else plural or noun + 's'}"


def clip(text: str, limit: int = SHOWN_CHARS) -> str:
    """A message's text for a terminal: whole when short, else its start and how much
    was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [... {len(text) - limit:,} more characters; --json shows all]"


def quiet_option(func: F) -> F:
    return click.option("--quiet", "-q", is_flag=True, help="No progress bar.")(func)


def is_dir(path: str) -> bool:
    return Path(path).is_dir()


#: Search modes of memory and knowledge search (structrag.query.modes.SEARCH_MODES, kept
#: here so the command line starts without loading the query engine).
SEARCH_MODES = ("structured", "text", "vector", "hybrid")


def mode_option(func: F) -> F:
    return click.option(
        "--mode",
        type=click.Choice(SEARCH_MODES),
        default="structured",
        show_default=True,
        help="structured: the query compiler; text: BM25; vector: embeddings; hybrid: RRF of "
        "text and vector (k=60).",
    )(func)
