"""The ``structrag`` command line: argument parsing, progress and output formatting only.

Every command calls the Python API (:class:`structrag.Index`) and turns its
:class:`~structrag.errors.StructragError` into a short message and exit status 1; bad
usage exits with 2. ``--json`` prints machine-readable output on stdout; progress bars and
notes go to stderr.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import click

from structrag import __version__
from structrag.errors import InputError, NotFoundError, StructragError, shown_path
from structrag.importers import ALIASES, FORMATS

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


def llm_options(func: F) -> F:
    """The LLM endpoint flags, gathered into one ``llm_settings`` argument; unset flags
    fall back to the STRUCTRAG_LLM_* environment variables (see structrag.llm.config)."""
    specs = [
        (
            "--llm-base-url",
            "base_url",
            str,
            "OpenAI-compatible base URL, e.g. "
            "http://127.0.0.1:8080/v1. Env: STRUCTRAG_LLM_BASE_URL.",
        ),
        ("--llm-model", "model", str, "Model name. Env: STRUCTRAG_LLM_MODEL."),
        (
            "--llm-api-key",
            "api_key",
            str,
            "API key (local servers need none). Env: STRUCTRAG_LLM_API_KEY.",
        ),
        (
            "--llm-concurrency",
            "concurrency",
            click.IntRange(1, 256),
            "Requests in flight [default: 4]. Env: STRUCTRAG_LLM_CONCURRENCY.",
        ),
        (
            "--llm-timeout",
            "timeout",
            click.FloatRange(0, 3600, min_open=True),
            "Seconds per request [default: 60]. Env: STRUCTRAG_LLM_TIMEOUT.",
        ),
        (
            "--llm-mode",
            "mode",
            click.Choice(["tools", "json", "md_json"]),
            "Structured output: tool calling, JSON mode, or JSON in markdown "
            "[default: tools]. Env: STRUCTRAG_LLM_MODE.",
        ),
        (
            "--llm-max-retries",
            "max_retries",
            click.IntRange(0, 20),
            "Retries per message on 429/5xx/timeouts, and re-asks on invalid output "
            "[default: 3]. Env: STRUCTRAG_LLM_MAX_RETRIES.",
        ),
        (
            "--llm-max-tokens",
            "max_tokens",
            click.IntRange(16),
            "Longest answer, in tokens; requests ask for less on short messages "
            "[default: 4096]. Env: STRUCTRAG_LLM_MAX_TOKENS.",
        ),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["llm_settings"] = {key: kwargs.pop(f"llm_{key}") for _, key, _, _ in specs}
        return func(*args, **kwargs)

    for flag, key, kind, text in reversed(specs):
        wrapper = click.option(flag, f"llm_{key}", type=kind, help=text)(wrapper)
    return wrapper  # type: ignore[return-value]


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(func)


def emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2, default=str))


def note(text: str) -> None:
    click.echo(text, err=True)


@contextmanager
def open_for(db: str, *, write: bool = False) -> Iterator[Any]:
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


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="structrag")
def cli() -> None:
    """Structured RAG for conversation histories.

    Ingest chats, meeting and podcast transcripts into an index (DuckDB + Whoosh), see
    the entities, actions and topics extracted from every message, and ask questions
    that are answered from the history within a token budget.
    """


@cli.command()
@click.argument("paths", nargs=-1, type=click.Path())
@db_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice([*FORMATS, *ALIASES], case_sensitive=False),
    help="Input format; detected from the extension and content when omitted (for a "
    "folder, for each file in it).",
)
@click.option("--conversation", help="Conversation id for the input (default: from the file).")
@click.option("--encoding", default="utf-8", show_default=True, help="Text encoding of inputs.")
@click.option(
    "--extractor",
    default="spacy",
    show_default=True,
    type=click.Choice(["spacy", "llm", "hybrid"]),
    help="Knowledge extractor: spaCy (offline), an LLM, or both (LLM merged into spaCy).",
)
@click.option("--ner", is_flag=True, help="Also run spaCy's NER for entity types (slower).")
@click.option(
    "--embeddings",
    type=click.Choice(["static", "minilm", "none"]),
    help="Message embeddings, fixed at an index's first ingest (default static; minilm needs "
    "the bench extra).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes.",
)
@click.option(
    "--force",
    is_flag=True,
    help="Re-read files even if ingested before and extract every message again "
    "(LLM results still come from the cache: no call is paid twice).",
)
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
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
@json_option
def ingest(
    paths: tuple[str, ...],
    db: str,
    fmt: str | None,
    conversation: str | None,
    encoding: str,
    extractor: str,
    ner: bool,
    embeddings: str | None,
    workers: int,
    force: bool,
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
    if not paths and not retry_failed:
        raise click.UsageError(
            "Missing argument 'PATHS...': give files to ingest, or --retry-failed"
        )
    if retry_failed and extractor == "spacy":
        raise click.UsageError("--retry-failed redoes failed LLM extractions: pass --extractor llm")
    config = None
    if extractor in ("llm", "hybrid"):
        from structrag.llm.config import LLMConfig

        config = LLMConfig.resolve(**llm_settings, require_endpoint=not dry_run)
    if dry_run:
        from structrag.index import estimate_ingest

        if not paths:
            raise click.UsageError("--dry-run needs the FILES that would be ingested")
        estimate = estimate_ingest(
            db,
            list(paths),
            format=fmt,
            conversation=conversation,
            encoding=encoding,
            extractor=extractor,
            llm=config,
            force=force,
        )
        if as_json:
            emit_json(estimate)
        else:
            _print_estimate(estimate)
        return
    progress = ClickProgress(enabled=not quiet and sys.stderr.isatty())
    created = not Path(db).exists()
    empty = False
    try:
        with open_for(db, write=True) as index:
            try:
                reports = index.ingest(
                    list(paths),
                    format=fmt,
                    conversation=conversation,
                    encoding=encoding,
                    extractor=extractor,
                    workers=workers,
                    ner=ner,
                    embeddings=embeddings,
                    progress=progress,
                    force=force,
                    llm=config,
                    retry_failed=retry_failed,
                )
            except BaseException:
                empty = index.store.holds_nothing()  # LLM answers paid for are kept
                raise
    except BaseException:
        if created and empty:
            # This command made the directory and left nothing in it: leave no trace.
            shutil.rmtree(db, ignore_errors=True)
        raise
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
            f"redo them with `structrag ingest --retry-failed --extractor {extractor} "
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


@cli.command()
@db_option
@json_option
def stats(db: str, as_json: bool) -> None:
    """Counts of conversations, messages and knowledge in the index."""
    with open_for(db) as index:
        data = index.stats()
    if as_json:
        emit_json(data)
        return
    refs = data["semantic_refs"]
    click.echo(f"index:          {data['index']}")
    click.echo(f"conversations:  {data['conversations']}")
    click.echo(f"messages:       {data['messages']}")
    click.echo(
        "semantic refs:  "
        + ", ".join(f"{n} {kind}" for kind, n in refs.items())
        + f" ({sum(refs.values())} in all)"
    )
    for name, info in data["extractors"].items():
        details = ", ".join(f"{k} {v}" for k, v in info.items())
        click.echo(f"  extractor {name}: {details}")
    click.echo(f"sources:        {data['sources']}")
    click.echo(f"size on disk:   {data['size_bytes'] / 1e6:.1f} MB")


@cli.command()
@db_option
@json_option
def conversations(db: str, as_json: bool) -> None:
    """The conversations in the index: ids, message counts, dates and speakers."""
    with open_for(db) as index:
        rows = index.conversation_summaries()
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        dates = f"{(row['first'] or '')[:10]} .. {(row['last'] or '')[:10]}" if row["first"] else ""
        click.echo(
            f"{row['id']:<24} {row['messages']:>6} messages  {dates:<24} "
            f"{', '.join(row['speakers'][:6])}"
        )


@cli.command()
@click.argument("message_id")
@db_option
@click.option("--conversation", help="Conversation of the message (when ids repeat).")
@json_option
def show(message_id: str, db: str, conversation: str | None, as_json: bool) -> None:
    """A message and the knowledge extracted from it, with character spans."""
    with open_for(db) as index:
        data = index.show(message_id, conversation)
    if as_json:
        emit_json(data)
        return
    when = f" [{data['timestamp']}]" if data["timestamp"] else ""
    to = f" -> {', '.join(data['recipients'])}" if data["recipients"] else ""
    click.echo(f"{data['conversation']} / {data['id']}{when} {data['speaker'] or '?'}{to}")
    click.echo(data["text"])
    click.echo("")
    for item in data["knowledge"]:
        start, end = item["span"]
        click.echo(f"  {item['kind']:<7} {_describe(item)}")
        click.echo(
            f"          span {start}-{end}: {item['span_text'][:80]!r}  ({item['extractor']})"
        )


def _describe(item: dict[str, Any]) -> str:
    kind = item["kind"]
    if kind == "entity":
        facets = ", ".join(
            f"{f['name']}={f['value']}{' ' + f['units'] if f.get('units') else ''}"
            for f in item.get("facets", [])
        )
        types = "/".join(item.get("types", []))
        return f"{item['name']} ({types})" + (f" [{facets}]" if facets else "")
    if kind == "action":
        parts = [item.get("subject") or "?"]
        verb = " ".join(item["verbs"])
        parts.append(("NOT " if item.get("negated") else "") + verb)
        if item.get("object"):
            parts.append(item["object"])
        if item.get("indirect_object"):
            parts.append(f"(to {item['indirect_object']})")
        params = " ".join(f"{p['name']} {p['value']}" for p in item.get("params", []))
        tense = item.get("tense", "present")
        return " ".join(parts) + (f" [{params}]" if params else "") + f" <{tense}>"
    return str(item.get("text", ""))


def _top_command(kind: str) -> Callable[..., None]:
    def command(db: str, top: int, conversation: str | None, as_json: bool) -> None:
        with open_for(db) as index:
            rows = (
                index.entities(top, conversation)
                if kind == "entities"
                else index.topics(top, conversation)
            )
        if as_json:
            emit_json(rows)
            return
        for row in rows:
            if kind == "entities":
                click.echo(f"{row['mentions']:>6}  {row['name']}  ({'/'.join(row['types'][:4])})")
            else:
                click.echo(f"{row['mentions']:>6}  {row['topic']}")

    command.__name__ = kind
    command.__doc__ = f"The most mentioned {kind}, merged by normalised name."
    return command


for _kind in ("entities", "topics"):
    cli.command(name=_kind)(
        db_option(
            click.option("--top", type=click.IntRange(1), default=20, show_default=True)(
                click.option("--conversation", help="Only this conversation.")(
                    json_option(_top_command(_kind))
                )
            )
        )
    )


@cli.command()
@click.argument("expression")
@db_option
@click.option("--conversation", help="Only this conversation.")
@click.option("--limit", type=click.IntRange(1), default=20, show_default=True)
@click.option("--explain", is_flag=True, help="Print the AST and the plan.")
@json_option
def query(
    expression: str,
    db: str,
    conversation: str | None,
    limit: int,
    explain: bool,
    as_json: bool,
) -> None:
    """Run a query expression: ranked messages and semantic refs.

    \b
    Examples:
      structrag query 'entity:Caroline adoption' --db idx
      structrag query 'action(Kevin, tell, *, Satya) when:"last May"' --db idx
      structrag query 'topic:"mental health" AND NOT speaker:Bob' --db idx
      structrag query 'meta.session >= 3 during:camping' --db idx --explain
    """
    with open_for(db) as index:
        result = index.query(expression, conversation=conversation, limit=limit)
        if as_json:
            emit_json(result.as_dict(explain=explain))
            return
        if explain:
            click.echo("query:\n  " + result.query)
            click.echo("ast:\n" + _indent(result.tree))
            click.echo("plan:\n" + _indent(result.plan))
        for text in result.notes:
            note(f"note: {text}")
        from structrag.query.context import render_message

        stored = index.store.messages_by_keys([m.mkey for m in result.messages])
        for message in result.messages:
            found = stored.get(message.mkey)
            text = render_message(found) if found else ""
            click.echo(f"{message.score:8.3f}  {message.conversation}/{message.id}  {text}")
        if result.refs:
            texts = index.store.knowledge_texts([r for r, _ in result.refs])
            shown = list(
                dict.fromkeys(
                    f"{texts[r][1]} ({texts[r][0]})" for r, _ in result.refs if r in texts
                )
            )
            if shown:
                click.echo("knowledge: " + "; ".join(shown[:12]))
        click.echo(f"{len(result.messages)} message(s) in {result.seconds * 1000:.1f} ms")


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


@cli.command()
@click.argument("question", required=False)
@db_option
@click.option("--conversation", help="Answer from this conversation only.")
@click.option(
    "--budget",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Token budget of the answer context.",
)
@click.option(
    "--encoding",
    default="cl100k_base",
    show_default=True,
    help="tiktoken encoding that counts the budget.",
)
@click.option(
    "--batch",
    "batch",
    type=click.Path(dir_okay=False, exists=True),
    help='JSONL file of {"question": ..., "conversation": ...}; one JSON answer '
    "per line on stdout.",
)
@click.option("--explain", is_flag=True, help="Print the AST and the plan.")
@click.option(
    "--translator",
    type=click.Choice(["offline", "llm"]),
    default="offline",
    show_default=True,
    help="How the question becomes a query: spaCy (offline) or the LLM (which falls back "
    "to offline, with a note, when it is not configured or fails).",
)
@click.option(
    "--answer",
    "write",
    is_flag=True,
    help="Have the LLM write an answer from the context, citing message ids.",
)
@llm_options
@json_option
def ask(
    question: str | None,
    db: str,
    conversation: str | None,
    budget: int,
    encoding: str,
    batch: str | None,
    explain: bool,
    translator: str,
    write: bool,
    llm_settings: dict[str, Any],
    as_json: bool,
) -> None:
    """Answer context for a question, within a token budget.

    The question is translated into a query expression (shown), run, and the best
    knowledge and messages are packed into at most --budget tokens; leftover budget is
    filled with the messages nearest by embedding.

    \b
    Examples:
      structrag ask "What did Kevin tell Satya about AI models last May?" --db idx
      structrag ask --batch questions.jsonl --db idx --budget 1000 > answers.jsonl
      structrag ask "Where did Marco sail?" --db idx --answer --llm-base-url \\
          http://127.0.0.1:8080/v1 --llm-model local
    """
    if (question is None) == (batch is None):
        raise click.UsageError("give a QUESTION or --batch FILE (not both)")
    llm = _question_llm_config(llm_settings, translator, write)
    options: dict[str, Any] = {"translator": translator, "llm": llm, "answer": write}
    with open_for(db) as index:
        if batch is not None:
            for lineno, item in _batch_questions(Path(batch)):
                try:
                    answer = index.ask(
                        item["question"],
                        conversation=item.get("conversation") or conversation,
                        budget=item["budget"] if item.get("budget") is not None else budget,
                        encoding=encoding,
                        **options,
                    )
                except NotFoundError as exc:
                    raise InputError(Path(batch), exc.message, line=lineno, hint=exc.hint) from None
                data = answer.as_dict(explain=explain)
                if "id" in item:
                    data["id"] = item["id"]
                data["line"] = lineno
                click.echo(json.dumps(data, ensure_ascii=False))
            return
        assert question is not None
        answer = index.ask(
            question, conversation=conversation, budget=budget, encoding=encoding, **options
        )
        several = conversation is None and len(index.conversations()) > 1
    if as_json:
        emit_json(answer.as_dict(explain=explain))
        return
    click.echo(f"query: {answer.query}   ({answer.kind} question)")
    if explain:
        click.echo("ast:\n" + _indent(answer.tree))
        click.echo("plan:\n" + _indent(answer.plan))
    for text in answer.notes:
        note(f"note: {text}")
    click.echo("")
    _print_context(answer.context, several)
    click.echo("")
    vector = sum(1 for m in answer.context.messages if m.source == "vector")
    click.echo(
        f"{answer.context.tokens}/{answer.budget} tokens, {len(answer.context.messages)} messages "
        f"({vector} from vector fill), {answer.seconds * 1000:.0f} ms"
    )
    if answer.written is not None:
        click.echo("")
        if "error" in answer.written:
            note(f"note: {answer.written['error']}")
        else:
            cited = ", ".join(answer.written["citations"]) or "none"
            click.echo(f"answer ({answer.written['model']}): {answer.written['text']}")
            click.echo(f"cited: {cited}")


def _print_context(context: Any, several: bool) -> None:
    """The packed context as a reader sees it: the knowledge lines, then each message
    after its id (and its conversation, when the index holds several)."""
    for line in context.knowledge:
        click.echo(line)
    labels = [f"{m.conversation}/{m.id}" if several else m.id for m in context.messages]
    width = max((len(label) for label in labels), default=0)
    for label, message in zip(labels, context.messages, strict=True):
        first, *rest = message.text.split("\n")
        click.echo(f"{label:>{width}}  {first}")
        for line in rest:
            click.echo(f"{'':>{width}}  {line}")


def _question_llm_config(settings: dict[str, Any], translator: str, write: bool) -> Any:
    """LLM settings for ask, or None when none are configured (the translator then falls
    back to offline and --answer says why there is no answer)."""
    if translator == "offline" and not write:
        return None
    from structrag.errors import ConfigError
    from structrag.llm.config import LLMConfig

    try:
        return LLMConfig.resolve(**settings)
    except ConfigError:
        return None


def _batch_questions(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The questions of an ``ask --batch`` file, checked line by line."""
    from structrag.importers.base import read_json_lines

    example = 'e.g. {"question": "Where did Ann go?", "conversation": "c1", "budget": 500}'
    for lineno, item in read_json_lines(path, 'an object with a "question"'):
        question = item.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError(
                path, '"question" must be a non-empty string', line=lineno, hint=example
            )
        conversation = item.get("conversation")
        if conversation is not None and not isinstance(conversation, str):
            raise InputError(path, '"conversation" must be a string', line=lineno, hint=example)
        budget = item.get("budget")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < 1
        ):
            raise InputError(
                path,
                '"budget" must be a positive whole number of tokens',
                line=lineno,
                hint=example,
            )
        yield lineno, item


@cli.command()
@db_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def reindex(db: str, quiet: bool) -> None:
    """Rebuild the Whoosh text index from the DuckDB store."""
    with open_for(db, write=True) as index:
        count = index.reindex(ClickProgress(enabled=not quiet and sys.stderr.isatty()))
    click.echo(f"reindexed {count} messages")


# -- benchmarks ---------------------------------------------------------------------------


def _int_list(ctx: click.Context, param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"expected comma-separated numbers, got {value!r}") from None
    if not numbers or min(numbers) < 1:
        raise click.BadParameter("expected positive numbers, e.g. 500,1000")
    return numbers


def data_option(func: F) -> F:
    return click.option(
        "--data",
        "data",
        multiple=True,
        required=True,
        type=click.Path(dir_okay=False, exists=True, path_type=Path),
        help="LoCoMo-format file (repeatable). LoCoMo: github.com/snap-research/locomo, "
        "CC BY-NC 4.0.",
    )(func)


#: The default grid of `bench loo` (structrag.bench.loo.DEFAULT_GRID, kept equal by a test;
#: spelt out here so that the CLI does not import the benchmark modules to show its help).
LOO_GRID = (
    "speaker_boost=0,0.5,1 knowledge_weight=0,0.15,0.3 pattern_weight=0,0.25 "
    "vector_weight=0,0.25 window=default,wide"
)


@cli.group()
def bench() -> None:
    """Benchmarks on LoCoMo-format data: recall against baselines, held-out recall (leave
    one conversation out), speed, size, scaling.

    LoCoMo is not shipped with structrag: get locomo10.json from
    github.com/snap-research/locomo (CC BY-NC 4.0, non-commercial use). The baselines
    need the bench extra: pip install torch==2.13.0 first, then "structrag[bench]".
    """


@bench.command("recall")
@data_option
@click.option(
    "--budgets",
    callback=_int_list,
    default="500,1000,2000,4000",
    show_default=True,
    help="Token budgets, comma-separated.",
)
@click.option(
    "--systems",
    default="structured,bm25,bm25+fill,dense,hybrid",
    show_default=True,
    help="Systems to compare, comma-separated: structured, bm25, bm25+fill (BM25, then the "
    "embedding fill ask uses), dense, hybrid.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (recall.jsonl, recall.md, recall.json, the index, caches).",
)
@click.option(
    "--db",
    type=click.Path(file_okay=False, path_type=Path),
    help="Use (and update) this index instead of OUT/index.",
)
@click.option("--encoding", default="cl100k_base", show_default=True, help="Token encoding.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes for the ingest.",
)
@click.option(
    "--limit", type=click.IntRange(1), help="At most this many questions per conversation."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_recall(
    data: tuple[Path, ...],
    budgets: list[int],
    systems: str,
    out: Path,
    db: Path | None,
    encoding: str,
    workers: int,
    limit: int | None,
    quiet: bool,
) -> None:
    """Evidence recall of every system at every budget on LoCoMo questions.

    Writes one JSONL line per (system, question, budget) to OUT/recall.jsonl, and the
    table (recall per category and overall, share of questions with all their evidence
    in context) to OUT/recall.md and OUT/recall.json; prints the table.

    \b
    Example:
      structrag bench recall --data locomo10.json --out results --budgets 500,1000
    """
    from structrag.bench.machine import command_line
    from structrag.bench.recall import markdown_table, run_recall

    names = [s.strip() for s in systems.split(",") if s.strip()]
    rows = run_recall(
        list(data),
        out,
        systems=names,
        budgets=budgets,
        db=db,
        encoding=encoding,
        workers=workers,
        limit=limit,
        progress=ClickProgress(enabled=not quiet and sys.stderr.isatty()),
        command=command_line(),
    )
    click.echo(markdown_table(rows), nl=False)
    note(f"wrote {out / 'recall.jsonl'}, {out / 'recall.md'}, {out / 'recall.json'}")


@bench.command("loo")
@data_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (loo.json, loo.md, loo.jsonl; the index unless --db).",
)
@click.option(
    "--grid",
    "grid",
    multiple=True,
    metavar="FIELD=V1,V2,...",
    help="A RankingSettings field and the values to try (repeatable; replaces the whole "
    "default grid; window takes self, near, default, wide). Default: " + LOO_GRID + ".",
)
@click.option(
    "--budgets",
    callback=_int_list,
    default="500,1000,2000,4000",
    show_default=True,
    help="Budgets the held-out conversation is scored at, comma-separated.",
)
@click.option(
    "--select-budget",
    type=click.IntRange(1),
    default=1000,
    show_default=True,
    help="Settings are chosen by mean recall at this budget.",
)
@click.option(
    "--db",
    type=click.Path(file_okay=False, path_type=Path),
    help="Use (and update) this index instead of OUT/index (e.g. bench recall's).",
)
@click.option("--encoding", default="cl100k_base", show_default=True, help="Token encoding.")
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes for the ingest.",
)
@click.option(
    "--limit", type=click.IntRange(1), help="At most this many questions per conversation."
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_loo(
    data: tuple[Path, ...],
    out: Path,
    grid: tuple[str, ...],
    budgets: list[int],
    select_budget: int,
    db: Path | None,
    encoding: str,
    workers: int,
    limit: int | None,
    quiet: bool,
) -> None:
    """Held-out recall of the structured system: leave one conversation out.

    The default ranking settings were chosen on LoCoMo's development conversations, so
    `bench recall` on them is in-sample. For each conversation in turn, this chooses the
    settings from a grid by mean recall at --select-budget on the other conversations,
    then scores the held-out one with them at every budget. Writes OUT/loo.json (per
    fold: settings chosen, in-sample and held-out recall per budget and category),
    OUT/loo.md (held-out recall pooled over the folds, beside the in-sample figures) and
    OUT/loo.jsonl (the held-out records); prints the tables.

    \b
    Example:
      structrag bench loo --data locomo10.json --out results --grid speaker_boost=0,0.5,1
    """
    from structrag.bench.loo import (
        DEFAULT_GRID,
        folds_table,
        parse_grid,
        pooled_summary,
        run_leave_one_out,
    )
    from structrag.bench.machine import command_line

    result = run_leave_one_out(
        list(data),
        out,
        grid=parse_grid(grid) if grid else DEFAULT_GRID,
        budgets=budgets,
        select_budget=select_budget,
        db=db,
        encoding=encoding,
        workers=workers,
        limit=limit,
        progress=ClickProgress(enabled=not quiet and sys.stderr.isatty()),
        command=command_line(),
    )
    click.echo(pooled_summary(result.pooled, select_budget))
    click.echo(folds_table(result.folds, select_budget), nl=False)
    note(f"wrote {out / 'loo.json'}, {out / 'loo.md'}, {out / 'loo.jsonl'}")


@bench.command("rescore")
@click.argument("path", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option(
    "--data",
    "data",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="Take evidence and categories from these LoCoMo files, not from the JSONL.",
)
@click.option("--recount", metavar="ENCODING", help="Recount context tokens (e.g. cl100k_base).")
@json_option
def bench_rescore(path: Path, data: tuple[Path, ...], recount: str | None, as_json: bool) -> None:
    """Recompute the recall table from a recall JSONL file alone.

    A question's recall is the share of its evidence ids among message_ids (0 when
    tokens > budget); categories and overall are means over questions.
    """
    from structrag.bench.recall import markdown_table, rescore

    rows, notes = rescore(path, data=list(data), recount=recount)
    for text in notes:
        note(f"note: {text}")
    if as_json:
        emit_json([row.as_dict() for row in rows])
        return
    click.echo(markdown_table(rows), nl=False)


@bench.command("synth")
@data_option
@click.option("--size", type=click.IntRange(1), required=True, help="Messages to write.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Directory for the LoCoMo-format shards.",
)
def bench_synth(data: tuple[Path, ...], size: int, out: Path) -> None:
    """Write a synthetic LoCoMo-format corpus of SIZE messages for scaling runs.

    Conversations are replicated with renamed speakers (also in the text) and session
    dates shifted by whole weeks.
    """
    from structrag.bench.synth import write_corpus

    for shard in write_corpus(list(data), size, out):
        click.echo(str(shard))


@bench.command("perf")
@data_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-results"),
    show_default=True,
    help="Output directory (perf.json; corpora and indexes under OUT/work).",
)
@click.option(
    "--sizes",
    callback=_int_list,
    default="10000,100000,1000000",
    show_default=True,
    help="Synthetic corpus sizes (messages), comma-separated.",
)
@click.option(
    "--max-seconds",
    type=click.FloatRange(0),
    default=3600.0,
    show_default=True,
    help="Sizes whose estimated ingest exceeds this are extrapolated, not run.",
)
@click.option(
    "--repeat",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="Runs of the ingest throughput benchmark (0: skip it).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    help="Extraction processes.",
)
@click.option(
    "--questions",
    type=click.IntRange(1),
    default=300,
    show_default=True,
    help="Questions sampled per synthetic size for latency.",
)
@click.option(
    "--budget", type=click.IntRange(1), default=1000, show_default=True, help="ask budget."
)
@click.option("--keep", is_flag=True, help="Keep the indexes under OUT/work.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def bench_perf(
    data: tuple[Path, ...],
    out: Path,
    sizes: list[int],
    max_seconds: float,
    repeat: int,
    workers: int,
    questions: int,
    budget: int,
    keep: bool,
    quiet: bool,
) -> None:
    """Ingest throughput, ask/query latency, size on disk and peak memory, and how they
    grow on synthetic corpora of --sizes messages.

    Each corpus is ingested into a fresh index in a fresh process. Sizes whose estimated
    ingest time exceeds --max-seconds are extrapolated from the largest one measured and
    marked so. Writes OUT/perf.json; `structrag bench report OUT` draws the report.

    \b
    Example:
      structrag bench perf --data locomo10.json --out results --sizes 10000,100000
    """
    from structrag.bench.machine import command_line
    from structrag.bench.perf import run_perf
    from structrag.bench.report import percentiles

    result = run_perf(
        list(data),
        out,
        sizes=sizes,
        max_seconds=max_seconds,
        repeat=repeat,
        workers=workers,
        questions=questions,
        budget=budget,
        keep=keep,
        progress=ClickProgress(enabled=not quiet and sys.stderr.isatty()),
        command=command_line(),
        log=note,
    )
    for item in [result["locomo"], *result["scaling"]]:
        lat = item["latency"]
        guess = " (extrapolated)" if item.get("extrapolated") else ""
        click.echo(
            f"{item['messages']:>9,} messages{guess}:"
            f" ingest {item['ingest']['messages_per_second']:.0f} msg/s, ask p50/p95/p99 "
            + percentiles(lat["ask"], "/")
            + " ms, query "
            + percentiles(lat["query"], "/")
            + f" ms, {item['size']['bytes_per_message']:.0f} B/msg "
            f"({item['size']['bytes_per_message_without_vectors']:.0f} without vectors)"
        )
    note(f"wrote {out / 'perf.json'}")


@bench.command("report")
@click.argument("results", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write the report here (default: RESULTS).",
)
def bench_report(results: Path, out: Path | None) -> None:
    """Write report.md and PNG plots (recall vs budget, latency and size vs corpus size)
    from a results directory holding recall.json and/or perf.json."""
    from structrag.bench.report import write_report

    for path in write_report(results, out):
        click.echo(str(path))


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
