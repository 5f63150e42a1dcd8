"""``structrag query`` and ``structrag ask``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from structrag.cli.common import (
    clip,
    db_option,
    emit_json,
    indent,
    json_option,
    note,
    open_for,
)
from structrag.cli.llm import llm_options, optional_llm_config
from structrag.errors import InputError, NotFoundError


@click.command()
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
            click.echo("ast:\n" + indent(result.tree))
            click.echo("plan:\n" + indent(result.plan))
        for text in result.notes:
            note(f"note: {text}")
        from structrag.query.context import render_message

        stored = index.store.messages_by_keys([m.mkey for m in result.messages])
        for message in result.messages:
            found = stored.get(message.mkey)
            text = clip(render_message(found)) if found else ""
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


@click.command()
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
@click.option(
    "--sources",
    default="conversations",
    show_default=True,
    help="What to answer from, comma-separated: conversations, knowledge (document "
    "fragments, each labelled with its document and section), packed in one budget.",
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
    sources: str,
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
      structrag ask "How do I install it?" --db idx --sources conversations,knowledge
      structrag ask "Where did Marco sail?" --db idx --answer --llm-base-url \\
          http://127.0.0.1:8080/v1 --llm-model local
    """
    if (question is None) == (batch is None):
        raise click.UsageError("give a QUESTION or --batch FILE (not both)")
    llm = optional_llm_config(llm_settings) if translator == "llm" or write else None
    chosen = tuple(s.strip() for s in sources.split(",") if s.strip())
    options: dict[str, Any] = {
        "translator": translator,
        "llm": llm,
        "answer": write,
        "sources": chosen,
    }
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
        click.echo("ast:\n" + indent(answer.tree))
        click.echo("plan:\n" + indent(answer.plan))
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
        first, *rest = clip(message.text).split("\n")
        click.echo(f"{label:>{width}}  {first}")
        for line in rest:
            click.echo(f"{'':>{width}}  {line}")


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
