"""What every command shares: options, output, progress, and opening an index."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from structrag.errors import StructragError, shown_path

if TYPE_CHECKING:
    from structrag.index import Index

F = TypeVar("F", bound=Callable[..., Any])


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
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def note(text: str) -> None:
    click.echo(text, err=True)


@contextmanager
def open_for(db: str, *, write: bool = False) -> Iterator[Index]:
    """The index at ``db`` (read-only unless ``write``), its notes printed, closed after."""
    from structrag.index import Index

    if not write and not Path(db).is_dir():
        shown = shown_path(db)
        raise StructragError(
            f"no index at {shown}", hint=f"create one with `structrag ingest FILE --db {shown}`"
        )
    index = Index(db, read_only=not write, create=write)
    try:
        for text in index.notes:
            note(f"note: {text}")
        yield index
    finally:
        index.close()


def progress_bar(quiet: bool) -> ClickProgress:
    """A progress bar on stderr, unless ``quiet`` or stderr is not a terminal."""
    return ClickProgress(enabled=not quiet and sys.stderr.isatty())


def indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


#: Text output shows at most this much of a message (``--json`` shows all of it).
SHOWN_CHARS = 2_000


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
