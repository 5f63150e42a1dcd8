"""``structrag query`` and ``structrag ask``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from structrag.cli.common import (
    BUDGET,
    clip,
    counted,
    db_option,
    emit_json,
    indent,
    json_option,
    note,
    on_index,
)
from structrag.cli.llm import llm_options, optional_llm_config
from structrag.cli.remote import Remote, ServerError, Via, via_options
from structrag.errors import (
    IndexStateError,
    InputError,
    NotFoundError,
    QueryError,
    StructragError,
)
from structrag.query.context import MAX_BUDGET, budget_problem
from structrag.query.limits import check_question

if TYPE_CHECKING:
    from structrag.index import Index

#: Questions per request when ``ask --batch`` goes through a server.
BATCH_CHUNK = 200


@click.command()
@click.argument("expression")
@db_option
@click.option("--conversation", help="Only this conversation.")
@click.option(
    "--limit",
    type=click.IntRange(1),
    default=20,
    show_default=True,
    help="List at most this many messages, best first.",
)
@click.option("--explain", is_flag=True, help="Print the AST and the plan.")
@json_option
@via_options
def query(
    expression: str,
    db: str,
    conversation: str | None,
    limit: int,
    explain: bool,
    as_json: bool,
    via: Via,
) -> None:
    """Run a query expression: ranked messages and semantic refs.

    \b
    Examples:
      structrag query 'entity:Caroline adoption' --db idx
      structrag query 'action(Kevin, tell, *, Satya) when:"last May"' --db idx
      structrag query 'topic:"mental health" AND NOT speaker:Bob' --db idx
      structrag query 'meta.session >= 3 during:camping' --db idx --explain
    """
    from structrag import shapes

    data = on_index(
        db,
        via,
        remote=lambda r: r.post(
            "/v1/query",
            {
                "expression": expression,
                "conversation": conversation,
                "limit": limit,
                "explain": explain,
            },
        ),
        local=lambda index: shapes.query_json(
            index,
            index.query(expression, conversation=conversation, limit=limit),
            explain=explain,
        ),
    )
    if as_json:
        emit_json(data)
        return
    if explain:
        click.echo("query:\n  " + data["query"])
        click.echo("ast:\n" + indent(data["ast"]))
        click.echo("plan:\n" + indent(data["plan"]))
    for text in data["notes"]:
        note(f"note: {text}")
    for message in data["messages"]:
        click.echo(
            f"{message['score']:8.3f}  {message['conversation']}/{message['id']}  "
            f"{clip(message['text'])}"
        )
    shown = list(
        dict.fromkeys(f"{r['text']} ({r['kind']})" for r in data["semantic_refs"] if r["text"])
    )
    if shown:
        click.echo("knowledge: " + "; ".join(shown[:12]))
    listed, matched = len(data["messages"]), data.get("matched", 0)
    of = f" of {matched:,}" if matched > listed else ""
    click.echo(f"{counted(listed, 'message')}{of} in {data['seconds'] * 1000:.1f} ms")


@click.command()
@click.argument("question", required=False)
@db_option
@click.option("--conversation", help="Answer from this conversation only.")
@click.option(
    "--budget",
    type=BUDGET,
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
    type=click.Path(dir_okay=False, exists=True, allow_dash=True),
    help='JSONL file of {"question": ..., "conversation": ...} (- reads stdin); one JSON '
    "answer per line on stdout, in order. A bad line stops the batch: the answers to the "
    "lines before it are printed, then the error names the line.",
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
@via_options
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
    via: Via,
) -> None:
    """Answer context for a question, within a token budget.

    The question is translated into a query expression (shown), run, and the best
    knowledge and messages are packed into at most --budget tokens; leftover budget is
    filled with the messages nearest by embedding. Through a server, the LLM is the
    server's (its STRUCTRAG_LLM_* settings).

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
    options: dict[str, Any] = {
        "conversation": conversation,
        "budget": budget,
        "encoding": encoding,
        "translator": translator,
        "answer": write,
        "sources": [s.strip() for s in sources.split(",") if s.strip()],
    }
    server = via.server(db)
    if server is not None and any(v is not None for v in llm_settings.values()):
        raise click.UsageError(
            "a server owns this index, and asks through it use the server's LLM settings: "
            "drop the --llm-* flags (or stop the server)"
        )
    if batch is not None:
        # Line by line: a bad line (bad JSON, an unknown conversation, a question that
        # fails) stops the batch after the answers to the lines before it are printed,
        # and the error names its line.
        source = STDIN if batch == "-" else Path(batch)
        lines = _batch_questions(source)
        if server is not None:
            _ask_batch_remote(server, source, lines, options, explain)
        else:
            with open_local(db, via) as index:
                _ask_batch_local(index, source, lines, options, llm_settings, explain)
        return
    assert question is not None
    if server is not None:
        check_question(question)  # the server's own check reads as its request schema's
        data = server.post("/v1/ask", {"question": question, **options, "explain": explain})
        several = not (as_json or conversation) and len(server.get("/v1/conversations")) > 1
    else:
        from structrag import shapes

        with open_local(db, via) as index:
            answer = index.ask(question, **options, llm=_llm(options, llm_settings))
            data = shapes.answer_json(answer, explain=explain)
            several = conversation is None and len(index.conversations()) > 1
    if as_json:
        emit_json(data)
        return
    _print_answer(data, explain=explain, several=several)


def open_local(db: str, via: Via) -> Any:
    from structrag.cli.common import open_for

    return open_for(db, served_ok=via.no_server)


def _llm(options: dict[str, Any], settings: dict[str, Any]) -> Any:
    wanted = options["translator"] == "llm" or options["answer"]
    return optional_llm_config(settings) if wanted else None


def _ask_batch_local(
    index: Index,
    path: Path,
    lines: Iterator[tuple[int, dict[str, Any]]],
    options: dict[str, Any],
    llm_settings: dict[str, Any],
    explain: bool,
) -> None:
    from structrag import shapes

    checked: set[str] = set()  # the conversations the lines so far named, found
    llm = _llm(options, llm_settings)
    for lineno, item in lines:
        conversation = item.get("conversation")
        if conversation and conversation not in checked:
            try:
                index.check_conversation(conversation)
            except NotFoundError as exc:
                raise InputError(path, exc.message, line=lineno, hint=exc.hint) from None
            checked.add(conversation)
        try:
            answer = index.ask(
                item["question"],
                **{
                    **options,
                    "conversation": item.get("conversation") or options["conversation"],
                    "budget": item["budget"]
                    if item.get("budget") is not None
                    else options["budget"],
                },
                llm=llm,
            )
        except IndexStateError:
            raise  # the index's, not the line's
        except StructragError as exc:  # the line's question: named as through a server
            raise InputError(path, exc.message, line=lineno, hint=exc.hint) from None
        data = shapes.answer_json(answer, explain=explain)
        if "id" in item:
            data["id"] = item["id"]
        data["line"] = lineno
        click.echo(json.dumps(data, ensure_ascii=False))


def _ask_batch_remote(
    server: Remote,
    path: Path,
    lines: Iterator[tuple[int, dict[str, Any]]],
    options: dict[str, Any],
    explain: bool,
) -> None:
    """The batch in chunks (the server takes up to 1,000 questions a request), answers
    printed as each chunk comes back. A question that fails stops the batch as it does
    without a server: the answers to the lines before it are printed, then the error
    names its file and line."""
    if options["translator"] != "offline" or options["answer"]:
        raise click.UsageError("ask --batch through a server translates offline, without --answer")
    chunk: list[tuple[int, dict[str, Any]]] = []

    def answers_to(questions: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
        body = {
            "questions": [
                {
                    "question": item["question"],
                    "conversation": item.get("conversation"),
                    "budget": item.get("budget"),
                    "id": item.get("id"),
                }
                for _, item in questions
            ],
            "conversation": options["conversation"],
            "budget": options["budget"],
            "encoding": options["encoding"],
            "sources": options["sources"],
            "explain": explain,
        }
        answers: list[dict[str, Any]] = server.post("/v1/ask/batch", body)["answers"]
        return answers

    def printed(questions: list[tuple[int, dict[str, Any]]], answers: list[Any]) -> None:
        for (lineno, item), data in zip(questions, answers, strict=True):
            if "id" not in item:
                data.pop("id", None)
            data["line"] = lineno
            click.echo(json.dumps(data, ensure_ascii=False))

    def send() -> None:
        try:
            printed(chunk, answers_to(chunk))
        except ServerError as exc:
            if isinstance(exc.position, int) and 0 <= exc.position < len(chunk):
                before = chunk[: exc.position]
                if before:  # the server answers all or nothing: ask those again
                    printed(before, answers_to(before))
                line = chunk[exc.position][0]
                raise InputError(path, exc.message, line=line, hint=exc.hint) from None
            raise
        chunk.clear()

    while True:
        try:
            numbered = next(lines, None)
        except InputError:  # a bad line: the lines before it are answered first
            if chunk:
                send()
            raise
        if numbered is None:
            break
        try:
            check_question(numbered[1]["question"])
        except QueryError as exc:  # as the line's question fails without a server
            if chunk:
                send()
            raise InputError(path, exc.message, line=numbered[0], hint=exc.hint) from None
        chunk.append(numbered)
        # stdin: a line is answered before the next is read (a program may wait for it)
        if len(chunk) == (1 if path == STDIN else BATCH_CHUNK):
            send()
    if chunk:
        send()


def _print_answer(data: dict[str, Any], *, explain: bool, several: bool) -> None:
    """An answer as a reader sees it: the query, the knowledge lines, then each message
    after its id (and its conversation, when the index holds several)."""
    click.echo(f"query: {data['query']}   ({data['question_type']} question)")
    if explain:
        click.echo("ast:\n" + indent(data["ast"]))
        click.echo("plan:\n" + indent(data["plan"]))
    for text in data["notes"]:
        note(f"note: {text}")
    click.echo("")
    for line in data["knowledge"]:
        click.echo(line)
    messages = data["messages"]
    labels = [f"{m['conversation']}/{m['id']}" if several else m["id"] for m in messages]
    width = max((len(label) for label in labels), default=0)
    for label, message in zip(labels, messages, strict=True):
        first, *rest = clip(message["text"]).split("\n")
        click.echo(f"{label:>{width}}  {first}")
        for line in rest:
            click.echo(f"{'':>{width}}  {line}")
    click.echo("")
    vector = sum(1 for m in messages if m["source"] == "vector")
    click.echo(
        f"{data['tokens']}/{data['budget']} tokens, {counted(len(messages), 'message')} "
        f"({vector} from vector fill), {data['seconds'] * 1000:.0f} ms"
    )
    written = data.get("answer")
    if written is not None:
        click.echo("")
        if "error" in written:
            note(f"note: {written['error']}")
        else:
            cited = ", ".join(written["citations"]) or "none"
            click.echo(f"answer ({written['model']}): {written['text']}")
            click.echo(f"cited: {cited}")


#: What a line of an ``ask --batch`` file may hold.
_BATCH_KEYS = frozenset({"question", "conversation", "budget", "id"})


#: How errors name ``ask --batch -``'s input.
STDIN = Path("<stdin>")


def _stdin_json_lines(what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of JSON Lines on stdin, read as they come (a line is answered before
    the next is read); errors as :func:`~structrag.importers.base.read_json_lines` has
    them."""
    import sys

    from structrag.importers.base import check_surrogates, json_error

    for lineno, raw in enumerate(sys.stdin.buffer, start=1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8").rstrip("\r\n")
        except UnicodeDecodeError as exc:
            raise InputError(
                STDIN,
                f"byte 0x{raw[exc.start]:02x} is not valid utf-8",
                line=lineno,
                column=exc.start + 1,
            ) from None
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(STDIN, json_error(exc.msg), line=lineno, column=exc.colno) from None
        except RecursionError:
            raise InputError(STDIN, "the JSON nests too deep", line=lineno) from None
        if not isinstance(item, dict):
            raise InputError(STDIN, f"each line must be {what}", line=lineno)
        check_surrogates(STDIN, line, item, line=lineno)
        yield lineno, item


def _batch_questions(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The questions of an ``ask --batch`` file (``STDIN``: stdin), checked line by line
    as they are read."""
    from structrag.importers.base import read_json_lines

    example = 'e.g. {"question": "Where did Ann go?", "conversation": "c1", "budget": 500}'
    what = 'an object with a "question"'
    rows = _stdin_json_lines(what) if path == STDIN else read_json_lines(path, what)
    for lineno, item in rows:
        unknown = sorted(set(item) - _BATCH_KEYS)
        if unknown:
            raise InputError(
                path,
                f"unknown key {unknown[0]!r}: a line takes {', '.join(sorted(_BATCH_KEYS))}",
                line=lineno,
                hint="options such as --sources and --encoding apply to every question"
                if unknown[0] in ("sources", "encoding", "translator")
                else example,
            )
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
            not isinstance(budget, int) or budget_problem(budget)  # a bool is refused too
        ):
            raise InputError(
                path,
                f'"budget" must be a whole number of tokens from 1 to {MAX_BUDGET:,}',
                line=lineno,
                hint=example,
            )
        yield lineno, item
