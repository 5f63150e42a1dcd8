"""``structrag ingest`` (and its ``--dry-run``) and ``structrag reindex``."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from structrag.cli import need_full_teardown
from structrag.cli.common import (
    counted,
    db_option,
    emit_json,
    is_dir,
    json_option,
    note,
    on_index,
    open_for,
    progress_bar,
    quiet_option,
    refuse_if_served,
)
from structrag.cli.llm import llm_config, llm_options
from structrag.cli.remote import Remote, Via, quoted, via_options
from structrag.errors import NotFoundError
from structrag.importers import ALIASES, FORMATS

if TYPE_CHECKING:
    from structrag.index import Index

F = TypeVar("F", bound=Callable[..., Any])

#: What some of :data:`~structrag.importers.FORMATS` read, for ``ingest --help``, whose
#: list of formats is made from FORMATS (tests/test_cli_help.py checks it names them all).
_FORMAT_NOTES: dict[str, str] = {
    "jsonl": "messages",
    "transcript": "'SPEAKER: text', Otter, Zoom",
    "typeagent": "a KnowPro index: its LLM-extracted knowledge is imported",
    "discord": "DiscordChatExporter JSON",
    "chatgpt": "conversations.json",
    "email": "mbox, .eml",
    "messenger": "Facebook's and Instagram's JSON download",
    "telegram": "Telegram Desktop's result.json",
    "imessage": "imessage-exporter's text export",
}


def _formats_help() -> str:
    """FORMATS as ``ingest --help`` lists them: 'json, jsonl (messages), ... and imessage
    (...)'."""
    named = [f"{f} ({_FORMAT_NOTES[f]})" if f in _FORMAT_NOTES else f for f in FORMATS]
    return ", ".join(named[:-1]) + " and " + named[-1]


#: The parameter names ``ingest_options`` adds (``fmt`` is ``--format``).
_OPTION_NAMES = (
    "fmt",
    "conversation",
    "encoding",
    "date_order",
    "extractor",
    "ner",
    "embeddings",
    "workers",
    "engine",
    "address",
    "force",
    "agent",
    "exclude",
)


def ingest_options(func: F) -> F:
    """The options that say how to ingest (:class:`structrag.index.IngestOptions`),
    gathered into one ``options`` argument; ``ingest`` and its dry run share them."""
    specs: list[Callable[[Any], Any]] = [
        click.option(
            "--format",
            "fmt",
            type=click.Choice([*FORMATS, *ALIASES], case_sensitive=False),
            help="Input format; detected from the extension and content when omitted (for "
            "a folder, for each file in it).",
        ),
        click.option(
            "--conversation", help="Conversation id for the input (default: from the file)."
        ),
        click.option(
            "--encoding", default="utf-8", show_default=True, help="Text encoding of inputs."
        ),
        click.option(
            "--date-order",
            type=click.Choice(["dmy", "mdy"]),
            help="Read numeric dates such as 12/03/2023 day-first (dmy) or month-first "
            "(mdy); decided per file from its dates when omitted.",
        ),
        click.option(
            "--extractor",
            default="spacy",
            show_default=True,
            type=click.Choice(["spacy", "llm", "hybrid"]),
            help="Knowledge extractor: spaCy (offline), an LLM, or both (LLM merged into spaCy).",
        ),
        click.option("--ner", is_flag=True, help="Also run spaCy's NER for entity types (slower)."),
        click.option(
            "--embeddings",
            type=click.Choice(["static", "minilm", "none"]),
            help="Message embeddings, fixed at an index's first ingest (default static; "
            "minilm is stronger on short informal chats, several times slower to ingest, "
            "and needs the minilm extra).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1, 4096),
            default=None,
            help=f"Extraction processes (with --engine ray: Ray actors).  [default: "
            f"{min(2, os.cpu_count() or 1)}; with --engine ray, the cluster's free CPUs]",
        ),
        click.option(
            "--engine",
            type=click.Choice(["local", "ray"]),
            default="local",
            show_default=True,
            help="Where extraction runs: worker processes on this machine, or actors on a "
            'Ray cluster (pip install "structrag[ray]"; the index is written here).',
        ),
        click.option(
            "--address",
            help="With --engine ray: the cluster to join (auto, or HOST:PORT of the head "
            "node); default: a local Ray on this machine's cores.",
        ),
        click.option(
            "--force",
            is_flag=True,
            help="Re-read files even if ingested before and extract every message again "
            "(LLM results still come from the cache: no call is paid twice).",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="PATTERN",
            help="Leave out files or folders inside a folder argument that match this "
            "shell pattern, by name or by path within the folder (README.md, '*.md', "
            "drafts, '2023/*.txt'); repeatable.",
        ),
        click.option(
            "--agent",
            help="Load the messages as memories of this agent (each conversation a room, "
            "each speaker a user), for `structrag memory` and Index.memory().",
        ),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from structrag.index import IngestOptions

        values = {name: kwargs.pop(name) for name in _OPTION_NAMES}
        values["format"] = values.pop("fmt")
        values["exclude"] = tuple(values["exclude"])
        kwargs["options"] = IngestOptions(**values)
        return func(*args, **kwargs)

    for spec in reversed(specs):
        wrapper = spec(wrapper)
    return wrapper  # type: ignore[return-value]


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@db_option
@ingest_options
@llm_options
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say what would be extracted and the LLM calls and tokens it would take; send "
    "nothing, write nothing.",
)
@click.option(
    "--retry-failed",
    is_flag=True,
    help="Re-extract the messages whose LLM extraction failed before (FILES optional), with "
    "the extractor that made them unless --extractor is given.",
)
@quiet_option
@json_option
@via_options
def ingest(
    paths: tuple[str, ...],
    db: str,
    options: Any,
    llm_settings: dict[str, Any],
    dry_run: bool,
    retry_failed: bool,
    quiet: bool,
    as_json: bool,
    via: Via,
) -> None:
    """Index conversation files into the index at --db.

    PATHS are files or folders; a folder stands for every file of a known kind inside it
    (recursively), and a Slack export folder is one input. Formats: FORMATS. Every input
    is checked completely before anything is written; re-ingesting an unchanged file
    does nothing, and only new or edited messages are extracted.

    With --extractor llm or hybrid, the LLM endpoint comes from --llm-* flags or
    STRUCTRAG_LLM_* variables; answers are cached in the index, failed messages are
    recorded (see --retry-failed), and the calls and tokens spent are reported.

    When a server owns the index, the files are ingested by it, as a job (it reads them
    from this machine's paths); the progress bar follows the job, and Ctrl-C cancels it.
    """
    if not paths and not retry_failed:
        raise click.UsageError(
            "Missing argument 'PATHS...': give files to ingest, or --retry-failed"
        )
    # Without --extractor, --retry-failed redoes the failures with the extractor that made
    # them (found once a server is ruled out: it holds the index).
    recorded = (
        retry_failed
        and click.get_current_context().get_parameter_source("extractor")
        == click.core.ParameterSource.DEFAULT
    )
    if retry_failed and options.extractor == "spacy" and not recorded:
        raise click.UsageError("--retry-failed redoes failed LLM extractions: pass --extractor llm")
    if options.address is not None and options.engine != "ray":
        raise click.UsageError("--address names a Ray cluster: pass it with --engine ray")
    if options.engine == "ray":
        need_full_teardown()  # ray.shutdown() runs at exit
    _refuse_documents(paths, db, options.format)
    with _document_hint(db):
        from dataclasses import replace

        from structrag.index import estimate_ingest, ingest_into

        server = via.server(db) if is_dir(db) else None
        if server is not None:
            if options.engine != "local":
                raise click.UsageError(
                    "a server owns this index and extracts with its own workers: drop --engine "
                    "(or stop the server to ingest on Ray)"
                )
            if retry_failed or any(v is not None for v in llm_settings.values()):
                raise click.UsageError(
                    "a server owns this index: ingest through it extracts with the server's LLM "
                    "settings and cannot --retry-failed; drop those flags (or stop the server)"
                )
            reports = _ingest_remote(
                server, paths, options, dry_run=dry_run, quiet=quiet, as_json=as_json
            )
            _paths_as_given(reports["sources"] if dry_run else reports, paths)
            if dry_run:
                if as_json:
                    emit_json(reports)
                else:
                    _print_estimate(reports)
                return
            _print_reports(reports, options, db, as_json)
            return
        if via.no_server:
            refuse_if_served(db, no_server=True)  # at its start, not after its work
        if recorded:
            made_by = _failed_with(db)
            if made_by is None:  # a routine retry (a scheduled job) with nothing to do
                note(f"nothing to retry: the index at {db} records no failed extractions")
                if as_json:
                    click.echo("[]")
                return
            options = replace(options, extractor=made_by)
        if options.extractor in ("llm", "hybrid"):
            options = replace(options, llm=llm_config(llm_settings, require_endpoint=not dry_run))
        if dry_run:
            if not paths:
                raise click.UsageError("--dry-run needs the FILES that would be ingested")
            estimate = estimate_ingest(db, list(paths), options)
            if as_json:
                emit_json(estimate)
            else:
                _print_estimate(estimate)
            return
        from structrag.ingest import IngestInterrupted

        try:
            reports, notes = ingest_into(
                db, list(paths), options, progress=progress_bar(quiet), retry_failed=retry_failed
            )
        except (IngestInterrupted, Exception) as exc:
            # What is in the index (each file whole) when Ctrl-C or an error stopped the
            # ingest is reported as a finished ingest's would be; the entry point then
            # says what stopped it, and exits 130 or 1.
            whole = [r.as_dict() for r in getattr(exc, "reports", None) or ()]
            if whole:
                _show(whole, as_json)
            raise
        for text in notes:
            note(f"note: {text}")
        _print_reports([r.as_dict() for r in reports], options, db, as_json)


def _failed_with(db: str) -> str | None:
    """The extractor that made the failed extractions recorded in the index at ``db``, for
    ``--retry-failed`` without ``--extractor``; None when the index records none (an error
    when there is no index there, or when several extractors made them)."""
    from pathlib import Path

    from structrag.index import Index
    from structrag.ingest import failed_extractors
    from structrag.store.duckdb import DB_FILENAME

    made: dict[str, int] = {}
    if (Path(db) / DB_FILENAME).is_file():
        with Index(db, read_only=True) as index:
            for name in failed_extractors(index.store).values():
                made[name] = made.get(name, 0) + 1
            known = sum(made.values())
            unknown = index.store.sql("SELECT count(DISTINCT mkey) FROM extraction_failures")
            rest = int(unknown[0][0]) - known if unknown else 0
            if rest > 0:
                made["llm"] = made.get("llm", 0) + rest
    if not made:
        if (Path(db) / DB_FILENAME).is_file():
            return None
        raise click.UsageError(
            f"--retry-failed redoes the failed LLM extractions of an index, and there is no "
            f"index at {db}: check --db (to ingest with the LLM, pass --extractor llm)"
        )
    if len(made) > 1:
        each = ", ".join(f"{n} with --extractor {name}" for name, n in sorted(made.items()))
        raise click.UsageError(
            f"the failed extractions were made by several extractors ({each}): retry each with "
            "its own --extractor"
        )
    return next(iter(made))


ingest.help = (ingest.help or "").replace("Formats: FORMATS.", f"Formats: {_formats_help()}.")

#: Files that are documents, never conversations, by their extension.
_DOCUMENT_SUFFIXES = {".pdf": "PDF", ".docx": "Word", ".html": "HTML", ".htm": "HTML"}
#: Text files that may be documents (prose) rather than transcripts.
_PROSE_SUFFIXES = (".md", ".markdown", ".txt", ".text")


def _refuse_documents(paths: tuple[str, ...], db: str, fmt: str | None) -> None:
    """A PDF, Word or HTML file given to ``ingest`` is a document: say to add it with
    ``structrag knowledge add`` (what its bytes are counts, whatever its name)."""
    from pathlib import Path

    from structrag.errors import InputError
    from structrag.importers.base import sniff_document

    for given in paths:
        path = Path(given)
        if not path.is_file():
            continue
        sniffed = sniff_document(path)
        kind = {"pdf": "PDF", "docx": "Word"}.get(sniffed or "")
        if kind is None and fmt is None:
            kind = _DOCUMENT_SUFFIXES.get(path.suffix.lower())
        if kind is None:
            continue
        suffix = {"PDF": ".pdf", "Word": ".docx"}.get(kind)
        # `knowledge add` reads a file by its bytes: a Word file named .txt needs no new name
        rename = (
            f" (it reads it as the {kind} file it is, whatever its name)"
            if suffix and path.suffix.lower() != suffix
            else ""
        )
        raise InputError(
            path,
            f"is a {kind} document, not a conversation: `structrag ingest` reads "
            "conversations (chats, transcripts, mail)",
            hint="add documents as knowledge with "
            f"`structrag knowledge add {shlex.quote(given)} --db {shlex.quote(db)}`" + rename,
        )


@contextmanager
def _document_hint(db: str) -> Iterator[None]:
    """A Markdown or text file with no conversation in it is likely a document: its
    error also says to add it with ``structrag knowledge add``."""
    from pathlib import Path

    from structrag.errors import InputError, InputErrors

    try:
        yield
    except InputError as exc:
        errors = exc.errors if isinstance(exc, InputErrors) else [exc]
        prose = [
            e.path
            for e in errors
            if e.detail.startswith("no 'SPEAKER: text' turns found")
            and Path(e.path).suffix.lower() in _PROSE_SUFFIXES
        ]
        if prose:
            names = " ".join(shlex.quote(p) for p in prose[:3]) + (" ..." if len(prose) > 3 else "")
            advice = (
                f"if {'it is a document' if len(prose) == 1 else 'they are documents'} "
                f"(prose, not a conversation), add {'it' if len(prose) == 1 else 'them'} "
                f"with `structrag knowledge add {names} --db {shlex.quote(db)}`"
            )
            exc.hint = f"{exc.hint}; {advice}" if exc.hint else advice
        raise


def _print_reports(reports: list[dict[str, Any]], options: Any, db: str, as_json: bool) -> None:
    """Print the reports (or their JSON); then warn of failed LLM extractions, or, when
    every message sent to the LLM failed, fail the command (status 1) with the same hint:
    they are written with their metadata and failure rows, for ``--retry-failed``."""
    _show(reports, as_json)
    failed = sum(r.get("messages_failed", 0) for r in reports)
    if not failed:
        return
    db_arg = shlex.quote(db)
    retry = f"structrag ingest --retry-failed --extractor {options.extractor} --db {db_arg}"
    answered = sum(int((r.get("llm") or {}).get("messages", 0)) for r in reports)
    if not answered:
        from structrag.errors import LLMError

        raise LLMError(
            f"extraction failed for all {failed} messages sent to the LLM; they were written "
            "with their metadata knowledge and a failure row each",
            hint='see why with `structrag sql "SELECT message_id, error FROM '
            f'extraction_failures" --db {db_arg}`; once fixed, redo them with '
            f"`{retry}`",
        )
    if not as_json:
        note(
            f"warning: extraction failed for {failed} messages (kept with their metadata); "
            f"redo them with `{retry}`"
        )


def _show(reports: list[dict[str, Any]], as_json: bool) -> None:
    """The reports as JSON (``--json``) or a line each."""
    if as_json:
        emit_json(reports)
    else:
        _print_lines(reports)


def _print_lines(reports: list[dict[str, Any]]) -> None:
    for report in reports:
        for warning in report.get("warnings", []):
            note(f"warning: {warning}")
        if report.get("skipped"):
            # A folder's report only says which of its files were left out.
            done = "" if report.get("format") == "folder" else "skipped, "
            click.echo(f"{report['path']}: {done}{report['skipped']}")
            continue
        added, seconds = report["messages_added"], report["seconds"]
        rate = f", {added / seconds:.0f} messages/s" if seconds >= 0.5 and added >= seconds else ""
        again = (
            f" ({report['messages_reextracted']} re-extracted)"
            if report["messages_reextracted"]
            else ""
        )
        removed = report.get("messages_removed", 0)
        gone = f", {removed} removed (no longer in the file)" if removed else ""
        click.echo(
            f"{report['path']} ({report['format']}): {added} new, "
            f"{report['messages_updated']} updated, {report['messages_unchanged']} "
            f"unchanged{again} messages{gone}; {report['semantic_refs_added']} semantic refs in "
            f"{seconds:.1f}s{rate}"
        )
        if report.get("llm") is not None:
            click.echo(f"  llm: {_usage_line(report['llm'])}")


def _ingest_remote(
    server: Remote,
    paths: tuple[str, ...],
    options: Any,
    *,
    dry_run: bool,
    quiet: bool,
    as_json: bool,
) -> Any:
    """Ingest through the server: a job on this machine's absolute paths, followed until
    it ends. Its reports, or, for a dry run, the estimate. Ctrl-C cancels the job (the
    file being written rolls back) and, once it has stopped, prints the reports of the
    files it wrote, as a local ingest does."""
    import time
    from pathlib import Path

    from structrag.cli.remote import ServerError

    body = {
        "paths": [str(Path(p).resolve()) for p in paths],
        "format": options.format,
        "conversation": options.conversation,
        "encoding": options.encoding,
        "date_order": options.date_order,
        "extractor": options.extractor,
        "ner": options.ner,
        "embeddings": options.embeddings,
        "workers": options.workers or min(2, os.cpu_count() or 1),
        "force": options.force,
        "exclude": list(options.exclude),
    }
    if dry_run:
        return server.post("/v1/ingest/estimate", body)
    job = server.post("/v1/ingest", body)
    bar = progress_bar(quiet)
    shown = 0
    try:
        while job["state"] in ("queued", "checking", "running"):
            time.sleep(0.2)
            job = server.get(f"/v1/jobs/{job['id']}")
            progress = job["progress"]
            if job["state"] == "running" and bar.enabled and bar.idle:
                bar.start(progress["messages_total"], "extracting")
            bar.advance(progress["messages"] - shown)
            shown = progress["messages"]
    except KeyboardInterrupt as exc:
        bar.finish()
        _cancel_remote(server, job["id"], paths, as_json, exc)
    finally:
        bar.finish()
    if job["state"] != "done":
        from structrag.ingest import stopped

        error = job.get("error") or {"message": f"the job ended {job['state']}"}
        failure = ServerError(
            f"ingest job {job['id']} {job['state']}: {error['message']}",
            hint=error.get("hint"),
            code=error.get("code", ""),
        )
        written = _print_written(job, paths, as_json)
        if written:  # named after the error, as a local ingest's are
            stopped(failure, written, None)
        raise failure
    return job["reports"]


def _print_written(job: dict[str, Any], paths: tuple[str, ...], as_json: bool) -> list[str]:
    """Print the reports of the files a stopped job wrote whole (and of those it found
    already ingested), named as given; the files it wrote."""
    whole = [r for r in job.get("reports") or [] if r.get("format") != "folder"]
    if not whole:
        return []
    _paths_as_given(whole, paths)
    _show(whole, as_json)
    return [str(r["path"]) for r in whole if not r.get("skipped")]


def _cancel_remote(
    server: Remote, job_id: str, paths: tuple[str, ...], as_json: bool, exc: KeyboardInterrupt
) -> NoReturn:
    """Cancel the job that Ctrl-C stopped following, wait (up to 30 s) for it to stop, and
    print the reports of the files it wrote whole; then raise the interruption, naming
    them (a second Ctrl-C leaves at once)."""
    import time

    from structrag.ingest import IngestInterrupted

    job = server.post(f"/v1/jobs/{job_id}/cancel", {})
    deadline = time.monotonic() + 30
    while job.get("finished_at") is None and time.monotonic() < deadline:
        time.sleep(0.1)
        job = server.get(f"/v1/jobs/{job_id}")
    if not job.get("reports"):
        raise exc
    raise IngestInterrupted(_print_written(job, paths, as_json)) from exc


def _paths_as_given(reports: list[dict[str, Any]], paths: tuple[str, ...]) -> None:
    """Name the inputs in ``reports`` as this command was given them, not by the absolute
    paths the server was sent (``chats/a.jsonl``, not ``/home/ana/chats/a.jsonl``): what a
    local ingest prints. A path under none of them stays as it is."""
    from pathlib import Path

    given = sorted(
        ((str(Path(p).resolve()), Path(p)) for p in paths), key=lambda pair: -len(pair[0])
    )
    for report in reports:
        found = str(report.get("path", ""))
        for resolved, original in given:
            if found == resolved:
                report["path"] = str(original)
                break
            if found.startswith(resolved.rstrip("/") + "/"):
                report["path"] = str(original / found[len(resolved.rstrip("/")) + 1 :])
                break


def _usage_line(u: dict[str, Any]) -> str:
    return (
        f"{u.get('calls', 0)} calls, {u.get('cache_hits', 0)} cached, "
        f"{u.get('input_tokens', 0):,} input + {u.get('output_tokens', 0):,} output tokens, "
        f"{u.get('failures', 0)} failed, {u.get('retries', 0)} retries, "
        f"{u.get('invented_dropped', 0)} invented items dropped, {u.get('seconds', 0):.1f}s"
    )


def _print_estimate(estimate: dict[str, Any]) -> None:
    for source in estimate["sources"]:
        for warning in source.get("warnings", []):  # a dry run is where to check them
            note(f"warning: {warning}")
        if source["skipped"]:
            click.echo(f"{source['path']}: would skip, {source['skipped']}")
        else:
            removed = source.get("messages_removed", 0)
            gone = f", {removed} to remove (no longer in the file)" if removed else ""
            click.echo(
                f"{source['path']} ({source['format']}): {source['messages_added']} new, "
                f"{source['messages_updated']} updated, {source['messages_unchanged']} "
                f"unchanged messages{gone}"
            )
    click.echo(f"messages to extract: {estimate['messages_to_extract']}")
    llm = estimate.get("llm")
    if llm:
        click.echo(
            f"LLM ({llm['model']}): {llm['calls']} calls ({llm['cache_hits']} answers cached), "
            f"~{llm['input_tokens']:,} input tokens, ~{llm['output_tokens_estimate']:,} output "
            f"tokens (rough), counted with {llm['token_encoding']}"
        )
    click.echo("dry run: nothing was sent or written")


@click.command()
@db_option
@quiet_option
def reindex(db: str, quiet: bool) -> None:
    """Rebuild the Whoosh text index from the DuckDB store."""
    with open_for(db, write=True) as index:
        count = index.reindex(progress_bar(quiet))
    click.echo(f"reindexed {count} messages")


@click.command()
@click.argument("conversations", nargs=-1, required=True)
@db_option
@json_option
@via_options
def remove(conversations: tuple[str, ...], db: str, as_json: bool, via: Via) -> None:
    """Delete ingested conversations: their messages and everything extracted from them.

    Ingesting the file again brings a conversation back. A document goes with
    `structrag knowledge remove`, an agent's memories with `structrag memory remove`.

    \b
    Example:
      structrag remove family --db my-index
    """
    wanted = list(dict.fromkeys(conversations))

    def local(index: Index) -> list[int]:
        for conversation in wanted:  # every one checked before any is removed
            index.check_conversation(conversation)
        return [index.remove_conversation(c) for c in wanted]

    def remote(server: Remote) -> list[int]:
        held = {str(row["id"]) for row in server.get("/v1/conversations")}
        missing = [c for c in wanted if c not in held]  # every one checked first, here too
        if missing:
            raise NotFoundError(
                f"no conversation {missing[0]!r} in the index; nothing was removed",
                hint="list them with `structrag conversations`",
            )
        return [int(server.delete(f"/v1/conversations/{quoted(c)}")["removed"]) for c in wanted]

    removed = on_index(db, via, remote=remote, local=local, write=True)
    if as_json:
        emit_json([{"conversation": c, "removed": n} for c, n in zip(wanted, removed, strict=True)])
        return
    for conversation, count in zip(wanted, removed, strict=True):
        click.echo(f"removed {conversation!r}: {counted(count, 'message')}")
