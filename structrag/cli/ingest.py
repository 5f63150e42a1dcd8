"""``structrag ingest`` (and its ``--dry-run``) and ``structrag reindex``."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

import click

from structrag.cli.common import (
    db_option,
    emit_json,
    json_option,
    note,
    open_for,
    progress_bar,
    quiet_option,
)
from structrag.cli.llm import llm_config, llm_options
from structrag.importers import ALIASES, FORMATS

F = TypeVar("F", bound=Callable[..., Any])


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
    "force",
    "agent",
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
            "minilm needs the bench extra).",
        ),
        click.option(
            "--workers",
            type=click.IntRange(1, 64),
            default=min(2, os.cpu_count() or 1),
            show_default=True,
            help="Extraction processes.",
        ),
        click.option(
            "--force",
            is_flag=True,
            help="Re-read files even if ingested before and extract every message again "
            "(LLM results still come from the cache: no call is paid twice).",
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
    help="Re-extract the messages whose LLM extraction failed before (FILES optional).",
)
@quiet_option
@json_option
def ingest(
    paths: tuple[str, ...],
    db: str,
    options: Any,
    llm_settings: dict[str, Any],
    dry_run: bool,
    retry_failed: bool,
    quiet: bool,
    as_json: bool,
) -> None:
    """Index conversation files into the index at --db.

    PATHS are files or folders; a folder stands for every file of a known kind inside it
    (recursively), and a Slack export folder is one input. Formats: json, jsonl
    (messages), transcript ('SPEAKER: text', Otter, Zoom), webvtt, locomo, typeagent (a
    KnowPro index: its LLM-extracted knowledge is imported), slack, discord
    (DiscordChatExporter JSON), whatsapp, chatgpt (conversations.json) and email (mbox,
    .eml). Every input is checked completely before anything is written; re-ingesting an
    unchanged file does nothing, and only new or edited messages are extracted.

    With --extractor llm or hybrid, the LLM endpoint comes from --llm-* flags or
    STRUCTRAG_LLM_* variables; answers are cached in the index, failed messages are
    recorded (see --retry-failed), and the calls and tokens spent are reported.
    """
    from dataclasses import replace

    from structrag.index import estimate_ingest, ingest_into

    if not paths and not retry_failed:
        raise click.UsageError(
            "Missing argument 'PATHS...': give files to ingest, or --retry-failed"
        )
    if retry_failed and options.extractor == "spacy":
        raise click.UsageError("--retry-failed redoes failed LLM extractions: pass --extractor llm")
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
    reports, notes = ingest_into(
        db, list(paths), options, progress=progress_bar(quiet), retry_failed=retry_failed
    )
    for text in notes:
        note(f"note: {text}")
    if as_json:
        emit_json([r.as_dict() for r in reports])
        return
    for report in reports:
        for warning in report.warnings:
            note(f"warning: {warning}")
        if report.skipped:
            click.echo(f"{report.path}: skipped, {report.skipped}")
            continue
        rate = (
            f", {report.messages_added / report.seconds:.0f} messages/s"
            if report.seconds >= 0.5 and report.messages_added >= report.seconds
            else ""
        )
        again = (
            f" ({report.messages_reextracted} re-extracted)" if report.messages_reextracted else ""
        )
        click.echo(
            f"{report.path} ({report.format}): {report.messages_added} new, "
            f"{report.messages_updated} updated, {report.messages_unchanged} unchanged{again} "
            f"messages; {report.refs_added} semantic refs in {report.seconds:.1f}s{rate}"
        )
        if report.llm is not None:
            click.echo(f"  llm: {_usage_line(report.llm)}")
    failed = sum(r.messages_failed for r in reports)
    if failed:
        note(
            f"warning: extraction failed for {failed} messages (kept with their metadata); "
            f"redo them with `structrag ingest --retry-failed --extractor {options.extractor} "
            f"--db {db}`"
        )


def _usage_line(u: dict[str, Any]) -> str:
    return (
        f"{u.get('calls', 0)} calls, {u.get('cache_hits', 0)} cached, "
        f"{u.get('input_tokens', 0):,} input + {u.get('output_tokens', 0):,} output tokens, "
        f"{u.get('failures', 0)} failed, {u.get('retries', 0)} retries, "
        f"{u.get('invented_dropped', 0)} invented items dropped, {u.get('seconds', 0):.1f}s"
    )


def _print_estimate(estimate: dict[str, Any]) -> None:
    for source in estimate["sources"]:
        if source["skipped"]:
            click.echo(f"{source['path']}: would skip, {source['skipped']}")
        else:
            click.echo(
                f"{source['path']} ({source['format']}): {source['messages_added']} new, "
                f"{source['messages_updated']} updated, {source['messages_unchanged']} "
                "unchanged messages"
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
