"""``structrag knowledge``: documents as knowledge, shared or one agent's (the knowledge
API's mirror, :mod:`structrag.knowledge.base`)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from structrag.cli.common import (
    clip,
    counted,
    db_option,
    emit_json,
    json_option,
    mode_option,
    note,
    open_for,
    progress_bar,
    quiet_option,
)
from structrag.errors import StructragError
from structrag.knowledge.records import page_label

if TYPE_CHECKING:
    from structrag.knowledge.records import AddReport


@click.group()
def knowledge() -> None:
    """Documents as knowledge: PDF, Markdown, text, Word, HTML and JSON files cut into
    fragments of 512 tokens (20 overlapping), shared with every agent or one agent's.

    Every fragment gets the same extraction as a message (entities, actions, topics with
    spans) and is searched with the same ranking; `ask --sources conversations,knowledge`
    packs fragments and messages in one budget. An agent reads shared knowledge and its
    own, never another agent's.
    """


@knowledge.command("add")
@click.argument("paths", nargs=-1, required=True)
@db_option
@click.option("--agent", help="The agent whose knowledge it is.")
@click.option("--shared", is_flag=True, help="Knowledge every agent reads.")
@click.option(
    "--dry-run", is_flag=True, help="Report documents, fragments and tokens; write nothing."
)
@click.option(
    "--encoding",
    default="utf-8",
    show_default=True,
    help="The encoding of the text files (Markdown, text, JSON, HTML) that are not valid "
    "UTF-8: each file is read as UTF-8 (with or without a byte order mark) first, an HTML "
    "page next in the charset it declares, and else in this one. So one Latin-1 file in "
    "a folder of UTF-8 ones takes --encoding latin-1 and the others stay UTF-8.",
)
@quiet_option
@json_option
def add(
    paths: tuple[str, ...],
    db: str,
    agent: str | None,
    shared: bool,
    dry_run: bool,
    encoding: str,
    quiet: bool,
    as_json: bool,
) -> None:
    """Add documents: files, folders (walked recursively) or text.

    Whose: --agent NAME or --shared. A knowledge folder (one with shared/ inside, or named
    knowledge) says it itself when neither is given: knowledge/shared/ is shared and
    knowledge/<agent>/ is that agent's. Without either, and for other folders, knowledge
    is shared. An unchanged document is not added again; a changed one replaces its
    fragments. Files that cannot be read (of an unknown type, empty, encrypted or
    damaged) are reported with the reason, and the rest goes on; when nothing could be
    added, the command fails (exit status 1). A PDF page that cannot be read is named in
    a warning, and the rest of the document is added.
    """
    if agent is not None and shared:
        raise click.UsageError("pass --agent or --shared, not both")
    new_index = not dry_run and not Path(db).exists()
    report: AddReport | None = None
    try:
        report = _add(paths, db, agent, shared, dry_run, encoding, quiet, as_json)
    finally:
        # An index this command made and put nothing in (every file skipped, or an
        # error before any was written) is not left behind as an empty folder.
        if new_index and (not report.documents if report is not None else _holds_nothing(db)):
            shutil.rmtree(db, ignore_errors=True)
    if report.skipped and not report.documents:
        raise StructragError(
            f"nothing to add: {counted(len(report.skipped), 'path')} skipped",
            hint="each skipped path says why, and what to do",
        )


def _add(
    paths: tuple[str, ...],
    db: str,
    agent: str | None,
    shared: bool,
    dry_run: bool,
    encoding: str,
    quiet: bool,
    as_json: bool,
) -> AddReport:
    with contextlib.ExitStack() as stack:
        if dry_run and not Path(db).is_dir():  # nothing stored yet: plan against nothing
            db = stack.enter_context(tempfile.TemporaryDirectory(prefix="structrag-dry-"))
        index = stack.enter_context(
            open_for(db, write=not dry_run or Path(db).is_dir(), create=True)
        )
        report = index.knowledge.add(
            list(paths),
            agent=agent,
            shared=shared,
            progress=progress_bar(quiet or as_json),
            dry_run=dry_run,
            encoding=encoding,
        )
    if as_json:
        emit_json(report.as_dict())
    else:
        _print_report(report)
    return report


def _holds_nothing(db: str) -> bool:
    """Whether the index at ``db`` (made by this add, which failed) holds no document:
    one stopped half way keeps what it finished."""
    from structrag.index import Index

    if not Path(db).is_dir():
        return False
    try:
        with Index(db, read_only=True) as index:
            return not index.knowledge.documents(every=True)
    except Exception:  # cannot tell: keep it
        return False


def _print_report(report: AddReport) -> None:
    """What was skipped and why (stderr), a line per document and the totals (stdout)."""
    for skipped in report.skipped:
        note(f"skipped {skipped['path']}: {skipped['reason']}")
    for warning in report.warnings:
        note(f"warning: {warning}")
    for gone in report.gone:
        note(
            f"warning: {gone['path']} ({gone['document_id']}): its file {gone['file']} is gone; "
            f"the document is kept: `structrag knowledge remove {gone['document_id']}` "
            "deletes it"
        )
    planned = {"added": "new", "updated": "changed", "moved": "to move"}  # nothing added yet
    for doc in report.documents:
        owner = "shared" if doc["shared"] else f"agent {doc['agent']}"
        status = planned.get(doc["status"], doc["status"]) if report.dry_run else doc["status"]
        click.echo(
            f"{doc['document_id']}  {status:9}  {doc['fragments']:4} fragments "
            f"{doc['tokens']:7} tokens  {owner}  {doc['path']}"
        )
    verb = "would add" if report.dry_run else "added"
    click.echo(
        f"{verb} {report.documents_added} new and {report.documents_updated} changed "
        f"documents ({report.documents_unchanged} unchanged); {report.tokens} tokens"
        + (
            ""
            if report.dry_run
            else f"; fragments {report.fragments_added} new, {report.fragments_updated} "
            f"changed, {report.fragments_unchanged} unchanged, {report.fragments_removed} "
            f"removed; {report.refs_added} semantic refs in {report.seconds:.1f}s"
        )
    )


@knowledge.command("search")
@click.argument("query")
@db_option
@click.option("--agent", help="Search shared knowledge and this agent's own.")
@click.option(
    "--count",
    type=click.IntRange(1, 1000),
    default=5,
    show_default=True,
    help="Return at most this many fragments, best first.",
)
@click.option(
    "--threshold",
    type=float,
    help="Keep hits scoring at least this (for --mode vector a cosine similarity).",
)
@mode_option
@json_option
def search(
    query: str,
    db: str,
    agent: str | None,
    count: int,
    threshold: float | None,
    mode: str,
    as_json: bool,
) -> None:
    """Fragments that answer QUERY: shared knowledge, and --agent's own."""
    with open_for(db) as index:
        hits = index.knowledge.search(
            query, agent=agent, count=count, threshold=threshold, mode=mode
        )
    if as_json:
        emit_json([h.as_dict() for h in hits])
        return
    if not hits:
        click.echo("no fragment matches")
    for hit in hits:
        click.echo(f"{hit.score:8.3f}  {hit.fragment.fragment_id}  [{hit.label}]")
        click.echo(f"          {clip(' '.join(hit.fragment.text.split()), 400)}")


@knowledge.command("list")
@db_option
@click.option("--agent", help="Shared documents and this agent's own.")
@click.option("--all", "every", is_flag=True, help="Every agent's documents too.")
@json_option
def list_documents(db: str, agent: str | None, every: bool, as_json: bool) -> None:
    """The documents: shared ones, and --agent's own (or --all)."""
    with open_for(db) as index:
        documents = index.knowledge.documents(agent=agent, every=every)
    if as_json:
        emit_json([d.as_dict() for d in documents])
        return
    if not documents:
        click.echo("no documents")
    for d in documents:
        owner = "shared" if d.shared else f"agent {d.agent}"
        click.echo(
            f"{d.document_id}  {d.format:8} {d.fragments:4} fragments {d.tokens:7} tokens  "
            f"{owner}  {d.path}"
        )


@knowledge.command("show")
@click.argument("document_id")
@db_option
@json_option
def show(document_id: str, db: str, as_json: bool) -> None:
    """A document and its fragments, in order."""
    with open_for(db) as index:
        document, fragments = index.knowledge.show(document_id)
    if as_json:
        emit_json({**document.as_dict(), "fragment_list": [f.as_dict() for f in fragments]})
        return
    info: dict[str, Any] = document.as_dict()
    for key in ("document_id", "path", "title", "format", "agent", "shared", "pages", "tokens"):
        if info[key] is not None:  # a shared document has no agent, a text file no pages
            click.echo(f"{key}: {info[key]}")
    for f in fragments:
        where = " > ".join(f.section) or "(top)"
        pages = page_label(f.page, f.page_end)
        page = f" {pages}" if pages else ""
        click.echo(f"\n{f.fragment_id}  chars {f.start}-{f.end}{page}  {where}  {f.tokens} tokens")
        click.echo(clip(f.text, 600))


@knowledge.command("remove")
@click.argument("document_id")
@db_option
@json_option
def remove(document_id: str, db: str, as_json: bool) -> None:
    """Delete a document, its fragments and everything extracted from them."""
    with open_for(db, write=True) as index:
        fragments = index.knowledge.remove(document_id)
    if as_json:
        emit_json({"document_id": document_id, "fragments_removed": fragments})
    else:
        click.echo(f"removed {document_id} ({fragments} fragments)")


@knowledge.command("clear")
@db_option
@click.option("--shared", is_flag=True, help="Delete the shared documents.")
@click.option("--agent", help="Delete this agent's documents.")
@json_option
def clear(db: str, shared: bool, agent: str | None, as_json: bool) -> None:
    """Delete the shared documents (--shared), an agent's (--agent), or both."""
    if not shared and agent is None:
        raise click.UsageError("say what to clear: --shared, --agent NAME, or both")
    with open_for(db, write=True) as index:
        removed = index.knowledge.clear(shared=shared, agent=agent)
    if as_json:
        emit_json({"documents_removed": removed})
    else:
        click.echo(f"removed {removed} documents")
