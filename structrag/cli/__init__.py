"""The ``structrag`` command line: argument parsing, progress and output formatting only.

Every command calls the Python API (:class:`structrag.Index`) and turns its
:class:`~structrag.errors.StructragError` into a short message and exit status 1; bad
usage exits with 2, Ctrl-C with 130. ``--json`` prints machine-readable output on stdout;
progress bars and notes go to stderr. One module per command group: ingesting
(:mod:`~structrag.cli.ingest`), looking at an index (:mod:`~structrag.cli.inspection`),
querying and asking (:mod:`~structrag.cli.ask`), agent memory (:mod:`~structrag.cli.memory`),
document knowledge (:mod:`~structrag.cli.knowledge`), serving (:mod:`~structrag.cli.serve`),
benchmarks (:mod:`~structrag.cli.bench`); :mod:`~structrag.cli.common`,
:mod:`~structrag.cli.llm` and :mod:`~structrag.cli.remote` (commands going through a
running server) hold what they share.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping

import click

from structrag import __version__
from structrag.errors import Committed, StructragError
from structrag.store.interrupted import duckdb_interrupted as _duckdb_interrupted
from structrag.store.interrupted import from_duckdb as _from_duckdb

#: The commands, in the order of ``structrag --help``: name -> (module, attribute, the
#: first paragraph of the command's help). A command's module is imported when the
#: command runs (or is looked up), so ``structrag --help`` and ``structrag ask`` do not
#: import the ingest, serve, memory or bench modules (over half a second together);
#: tests/test_cli.py checks the help texts against the commands.
COMMANDS: dict[str, tuple[str, str, str]] = {
    "ingest": (
        "structrag.cli.ingest",
        "ingest",
        "Index conversation files into the index at --db.",
    ),
    "stats": (
        "structrag.cli.inspection",
        "stats",
        "Counts of conversations, messages and knowledge in the index.",
    ),
    "conversations": (
        "structrag.cli.inspection",
        "conversations",
        "The conversations in the index: ids, message counts, dates and speakers.",
    ),
    "show": (
        "structrag.cli.inspection",
        "show",
        "A message and the knowledge extracted from it, with character spans.",
    ),
    "entities": (
        "structrag.cli.inspection",
        "entities",
        "The most mentioned entities, merged by normalised name.",
    ),
    "topics": (
        "structrag.cli.inspection",
        "topics",
        "The most mentioned topics, merged by normalised name.",
    ),
    "sql": (
        "structrag.cli.inspection",
        "sql",
        "Run SQL that reads the index (the v_* views): rows as a table or JSON.",
    ),
    "query": (
        "structrag.cli.ask",
        "query",
        "Run a query expression: ranked messages and semantic refs.",
    ),
    "ask": (
        "structrag.cli.ask",
        "ask",
        "Answer context for a question, within a token budget.",
    ),
    "reindex": (
        "structrag.cli.ingest",
        "reindex",
        "Rebuild the Whoosh text index from the DuckDB store.",
    ),
    "remove": (
        "structrag.cli.ingest",
        "remove",
        "Delete ingested conversations: their messages and everything extracted from them.",
    ),
    "memory": (
        "structrag.cli.memory",
        "memory",
        "An agent's memory: messages, facts, relationships, goals and knowledge, written as "
        "they happen and read back within a budget.",
    ),
    "knowledge": (
        "structrag.cli.knowledge",
        "knowledge",
        "Documents as knowledge: PDF, Markdown, text, Word, HTML and JSON files cut into "
        "fragments of 512 tokens (20 overlapping), shared with every agent or one agent's.",
    ),
    "serve": (
        "structrag.cli.serve",
        "serve",
        "Serve an index: the HTTP API under /v1, the web explorer at /, MCP at /mcp.",
    ),
    "mcp": (
        "structrag.cli.serve",
        "mcp_command",
        "An MCP server on stdio for an agent: tools ask, query, search_memories, add_memory, "
        "get_context, get_facts, update_memory, forget_memory, show_message and list_entities; "
        "resources "
        "for conversations and messages.",
    ),
    "bench": (
        "structrag.cli.bench",
        "bench",
        "Benchmarks on LoCoMo-format data: recall against baselines, held-out recall "
        "(leave one conversation out), speed, size, scaling.",
    ),
}


class _LazyCommands(MutableMapping[str, click.Command]):
    """The group's commands, each imported from its module when first looked up."""

    def __init__(self) -> None:
        self._loaded: dict[str, click.Command] = {}
        self._names: list[str] = list(COMMANDS)

    def __getitem__(self, name: str) -> click.Command:
        command = self._loaded.get(name)
        if command is None:
            if name not in COMMANDS:
                raise KeyError(name)
            module, attribute, _ = COMMANDS[name]
            command = getattr(importlib.import_module(module), attribute)
            assert isinstance(command, click.Command)
            self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command
        if name not in self._names:
            self._names.append(name)

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._names.remove(name)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names


def _short_help(name: str, limit: int) -> str:
    """The command's line in the group's help, as click shortens its help text."""
    return click.Command(name, help=COMMANDS[name][2]).get_short_help_str(limit)


#: Words given as a command that are options of ``structrag``.
_OPTIONS_NOT_COMMANDS = {"version": "--version", "help": "--help"}


class _LazyGroup(click.Group):
    """A group whose commands are imported when they run; its help lists them from
    :data:`COMMANDS` without importing them."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.commands = _LazyCommands()

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """As click's, but ``structrag version`` (or ``help``) points at the option,
        where click would suggest a command of a similar name ('conversations')."""
        option = _OPTIONS_NOT_COMMANDS.get(args[0]) if args else None
        if option is not None and args[0] not in self.commands:
            raise click.UsageError(
                f"No such command {args[0]!r}. Did you mean 'structrag {option}'?", ctx
            )
        return super().resolve_command(ctx, args)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = [n for n in self.list_commands(ctx) if n in COMMANDS]
        others = [n for n in self.list_commands(ctx) if n not in COMMANDS]
        if others:  # a command added at run time: click's own listing
            super().format_commands(ctx, formatter)
            return
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, _short_help(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(
    cls=_LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(__version__, prog_name="structrag")
def cli() -> None:
    """Structured RAG for conversation histories.

    Ingest chats, meeting and podcast transcripts into an index (DuckDB + Whoosh), see
    the entities, actions and topics extracted from every message, and ask questions
    that are answered from the history within a token budget.
    """


#: Commands that only read an index and close it before they return.
READ_ONLY_COMMANDS = frozenset(
    {"stats", "conversations", "show", "entities", "topics", "sql", "query", "ask"}
)
#: Commands that, once they have succeeded, closed what they opened and flushed their
#: output, end the process with ``os._exit`` (see :func:`_exit_now`): the read-only ones,
#: and the writes that stop their own workers (an ingest on Ray asks for the full
#: teardown, :func:`need_full_teardown`).
EXIT_NOW_COMMANDS = READ_ONLY_COMMANDS | {"ingest", "reindex"}
#: Commands that write the index: SIGTERM (``timeout``, systemd, ``kill``) stops them as
#: Ctrl-C does (what committed is kept and named, the rest rolls back, staging removed),
#: and they exit 143. Without it, they died at once, saying nothing.
TERM_AS_INTERRUPT_COMMANDS = frozenset({"ingest", "reindex", "remove", "memory", "knowledge"})


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, as Ctrl-C's ``KeyboardInterrupt`` is."""


def _terminate(signum: int, frame: object) -> None:
    raise Terminated


def _by_sigterm(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    for _ in range(8):  # an IngestInterrupted raised from it, a DuckDB error ...
        if seen is None:
            return False
        if isinstance(seen, Terminated):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: A command sets this in click's context ``meta`` when its process must run the
#: interpreter's full teardown rather than end at once.
FULL_TEARDOWN = "structrag.full_teardown"


def need_full_teardown() -> None:
    """Say that this command's process must tear down fully: exit handlers that others
    registered must run (Ray's ``shutdown`` after an ingest on Ray)."""
    click.get_current_context().meta[FULL_TEARDOWN] = True


def _exit_now() -> None:
    """End the process at once, status 0 (1 when its output cannot be written), after
    flushing what it wrote.

    The interpreter's own teardown frees every object of spaCy, thinc, DuckDB and
    pydantic one by one and collects garbage over them: 0.25-0.35 s of a cold
    ``structrag ask`` and 0.5-0.7 s after an ingest (measured), for a command whose index
    is already closed and whose output is already written. Only
    :data:`EXIT_NOW_COMMANDS` end this way; serving, memory, knowledge and bench
    commands keep the full teardown."""
    import logging

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away after reading what it wanted
            continue
        except OSError as exc:  # a full disk under `--json > file`: say so, and fail
            with contextlib.suppress(OSError):
                os.write(2, f"error: could not write the output: {exc}\n".encode())
            os._exit(1)
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the CLI and turns structrag errors into clean messages.

    Called without ``argv`` it is the process's entry point (``structrag``, ``python -m
    structrag``), and a command of :data:`EXIT_NOW_COMMANDS` that succeeded ends the
    process at once (:func:`_exit_now`); called with ``argv`` (tests, scripts) it
    returns."""
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if not a.startswith("-")), None)
    if argv is None and command in READ_ONLY_COMMANDS and "--batch" not in args:
        # Cyclic garbage collection over spaCy's, thinc's and pydantic's objects, while
        # they are imported and loaded, is ~0.15 s of a cold `structrag ask` (measured);
        # a one-shot read-only command frees its objects by reference counting, and the
        # process ends right after it (_exit_now). A batch of questions keeps it.
        gc.disable()
    if argv is None and command in TERM_AS_INTERRUPT_COMMANDS:
        import signal

        signal.signal(signal.SIGTERM, _terminate)
        # A forked child (an extraction worker) is killed by SIGTERM, as before: the
        # kernel sends it when this process dies, and nothing else would end it.
        os.register_at_fork(after_in_child=lambda: signal.signal(signal.SIGTERM, signal.SIG_DFL))
    interrupted = (
        "interrupted: each file is written whole or not at all, and the files finished "
        "before are kept; run the same command again to finish (written files are skipped)"
        if command == "ingest"
        else "interrupted"
    )
    try:
        # Not cli.main(): it turns a closed pipe (`structrag query ... | head`) into exit 1.
        with cli.make_context("structrag", list(args)) as ctx:
            cli.invoke(ctx)
        if argv is None and command in EXIT_NOW_COMMANDS and not ctx.meta.get(FULL_TEARDOWN):
            _exit_now()
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt) as exc:  # click: Ctrl-C is Abort
        written = getattr(exc, "written", None) or getattr(exc.__context__, "written", None)
        for path in written or ():
            click.echo(f"{path}: written before the interruption", err=True)
        committed = getattr(exc, "committed", None) or getattr(exc.__context__, "committed", None)
        if isinstance(committed, Committed):
            interrupted = _committed_before(committed, args) or interrupted
        if _by_sigterm(exc):
            click.echo(interrupted.replace("interrupted", "terminated (SIGTERM)", 1), err=True)
            sys.exit(143)
        click.echo(interrupted, err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except StructragError as exc:
        stopped = _written_before(exc, "the error")
        click.secho(f"error: {exc}", err=True, fg="red")
        if stopped:
            click.echo(stopped, err=True)
        sys.exit(1)
    except BrokenPipeError:
        # The reader went away (`| head`): what it wanted was written. Point stdout at
        # /dev/null so the interpreter's final flush does not complain, and succeed.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
    except Exception as exc:
        if _duckdb_interrupted(exc):
            _written_before(exc, "the interruption")
            click.echo(interrupted, err=True)
            sys.exit(130)
        full = _disk_full(exc)
        if full is None:
            raise
        _written_before(exc, "the error")
        click.secho(f"error: {full}", err=True, fg="red")
        click.echo(
            "  hint: free space and run the command again: each write is committed whole or "
            "not at all, a text index left behind its store is rebuilt when the index opens, "
            "and what was written is skipped",
            err=True,
        )
        sys.exit(1)


#: The ``memory`` commands that write (a ``prune`` without ``--apply`` writes nothing).
_MEMORY_WRITES = frozenset({"add", "update", "remove", "prune", "compact"})


def _committed_before(committed: Committed, args: list[str]) -> str | None:
    """Say what a memory write Ctrl-C stopped had committed (see
    :class:`~structrag.errors.WriteInterrupted`): a line each on stderr, and with
    ``--json`` the command's result, marked ``"interrupted": true``, on stdout. The last
    line to show; None for an interrupted command that is no memory write."""
    if committed.done:
        options = args[: args.index("--")] if "--" in args else args
        if "--json" in options:
            from structrag.cli.common import emit_json

            emit_json(committed.as_dict())
        for line in committed.done:
            click.echo(f"{line} before the interruption", err=True)
        for line in committed.unfinished:
            click.echo(f"  note: {line}", err=True)
        return "interrupted: the change above is committed (no need to run the command again)"
    words = [a for a in args if not a.startswith("-")]
    if words[:1] == ["memory"] and len(words) > 1 and words[1] in _MEMORY_WRITES:
        return "interrupted: nothing was written (a memory write commits whole or not at all)"
    return None


def _written_before(exc: BaseException, what: str) -> str | None:
    """Say which files an ingest of several wrote (each whole) before ``exc`` stopped it,
    and the file it stopped on (see :func:`structrag.ingest.stopped`); the note to show
    after the error, or None when it wrote none."""
    written = getattr(exc, "written", None) or getattr(exc.__context__, "written", None)
    if not written:
        return None
    for path in written:
        click.echo(f"{path}: written before {what}", err=True)
    stopped_on = getattr(exc, "stopped_on", None) or getattr(exc.__context__, "stopped_on", None)
    if stopped_on:
        click.echo(f"{stopped_on}: not written (the ingest stopped on it)", err=True)
    return (
        "  note: the files written before the error are kept; once it is fixed, run the same "
        "command again to finish (written files are skipped)"
    )


def _disk_full(exc: BaseException) -> str | None:
    """What a full disk made fail, as one line (the file, when the error names it): an
    ``OSError`` ENOSPC from the text index or a file, or DuckDB's error writing its log;
    None for any other error."""
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        where = f": {exc.filename}" if exc.filename else ""
        return f"no space left on device{where}"
    if _from_duckdb(exc) and "No space left on device" in str(exc):
        return "no space left on device: the index's store could not write its log"
    return None
