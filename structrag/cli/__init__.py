"""The ``structrag`` command line: argument parsing, progress and output formatting only.

Every command calls the Python API (:class:`structrag.Index`) and turns its
:class:`~structrag.errors.StructragError` into a short message and exit status 1; bad
usage exits with 2, Ctrl-C with 130. ``--json`` prints machine-readable output on stdout;
progress bars and notes go to stderr. One module per command group: ingesting
(:mod:`~structrag.cli.ingest`), looking at an index (:mod:`~structrag.cli.inspection`),
querying and asking (:mod:`~structrag.cli.ask`), agent memory (:mod:`~structrag.cli.memory`),
document knowledge (:mod:`~structrag.cli.knowledge`), benchmarks (:mod:`~structrag.cli.bench`);
:mod:`~structrag.cli.common` and :mod:`~structrag.cli.llm` hold what they share.
"""

from __future__ import annotations

import os
import sys

import click

from structrag import __version__
from structrag.cli.ask import ask, query
from structrag.cli.bench import bench
from structrag.cli.ingest import ingest, reindex
from structrag.cli.inspection import conversations, entities, show, stats, topics
from structrag.cli.knowledge import knowledge
from structrag.cli.memory import memory
from structrag.errors import StructragError


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="structrag")
def cli() -> None:
    """Structured RAG for conversation histories.

    Ingest chats, meeting and podcast transcripts into an index (DuckDB + Whoosh), see
    the entities, actions and topics extracted from every message, and ask questions
    that are answered from the history within a token budget.
    """


for command in (
    ingest,
    stats,
    conversations,
    show,
    entities,
    topics,
    query,
    ask,
    reindex,
    memory,
    knowledge,
    bench,
):
    cli.add_command(command)


def main(argv: list[str] | None = None) -> None:
    """Entry point: runs the CLI and turns structrag errors into clean messages."""
    args = sys.argv[1:] if argv is None else argv
    command = next((a for a in args if not a.startswith("-")), None)
    interrupted = (
        "interrupted: the file being ingested was not written (files finished before it are kept)"
        if command == "ingest"
        else "interrupted"
    )
    try:
        # Not cli.main(): it turns a closed pipe (`structrag query ... | head`) into exit 1.
        with cli.make_context("structrag", list(args)) as ctx:
            cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help, --version
        sys.exit(exc.exit_code)
    except (click.exceptions.Abort, KeyboardInterrupt):  # click turns Ctrl-C into Abort
        click.echo(interrupted, err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except StructragError as exc:
        click.secho(f"error: {exc}", err=True, fg="red")
        sys.exit(1)
    except BrokenPipeError:
        # The reader went away (`| head`): what it wanted was written. Point stdout at
        # /dev/null so the interpreter's final flush does not complain, and succeed.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
