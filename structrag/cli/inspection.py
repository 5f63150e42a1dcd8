"""Looking at an index: ``stats``, ``conversations``, ``show``, ``entities``, ``topics``,
``sql``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from structrag.cli.common import clip, counted, db_option, emit_json, json_option, on_index
from structrag.cli.remote import Via, quoted, via_options
from structrag.naming import DOCUMENT_ROOM


@click.command()
@db_option
@json_option
@via_options
def stats(db: str, as_json: bool, via: Via) -> None:
    """Counts of conversations, messages and knowledge in the index."""
    data = on_index(db, via, remote=lambda r: r.get("/v1/stats"), local=lambda i: i.stats())
    if as_json:
        emit_json(data)
        return
    refs = data["semantic_refs"]
    click.echo(f"index:          {data['index']}")
    kinds = data.get("conversation_kinds") or {}
    parts = [
        counted(n, noun, plural)
        for key, noun, plural in (
            ("histories", "history", "histories"),
            ("memory_rooms", "memory room", None),
            ("documents", "document", None),
        )
        if (n := kinds.get(key))
    ]
    of_kinds = f" ({', '.join(parts)})" if len(parts) > 1 else ""
    click.echo(f"conversations:  {data['conversations']}{of_kinds}")
    click.echo(f"messages:       {data['messages']}")
    memories = [
        counted(n, noun, plural)
        for key, noun, plural in (
            ("facts", "fact", None),
            ("relationships", "relationship", None),
            ("goals", "goal", None),
            ("knowledge", "knowledge memory", "knowledge memories"),
        )
        if (n := (data.get("memories") or {}).get(key))
    ]
    if memories:
        click.echo(f"memories:       {', '.join(memories)}")
    click.echo(
        "semantic refs:  "
        + ", ".join(f"{n} {kind}" for kind, n in refs.items())
        + f" ({sum(refs.values())} in all)"
    )
    for name, info in data["extractors"].items():
        details = ", ".join(f"{k} {v}" for k, v in info.items())
        click.echo(f"  extractor {name}: {details}")
    click.echo(f"sources:        {data['sources']}")
    if data.get("embeddings"):
        click.echo(f"embeddings:     {data['embeddings']}")
    click.echo(f"size on disk:   {data['size_bytes'] / 1e6:.1f} MB")


@click.command()
@db_option
@json_option
@via_options
def conversations(db: str, as_json: bool, via: Via) -> None:
    """The conversations in the index: ids, message counts, dates and speakers.

    Documents added as knowledge are conversations of their fragments (doc:<id>): the
    listing counts them on a line of their own (`structrag knowledge list --all` shows
    them, agents' own documents too);
    --json lists them too, with "kind": "document", their path, title and fragment
    count."""
    rows = on_index(
        db,
        via,
        remote=lambda r: r.get("/v1/conversations"),
        local=lambda i: i.conversation_summaries(),
    )
    if as_json:
        emit_json(rows)
        return
    documents = [
        row
        for row in rows
        if row.get("kind") == "document"
        or (row.get("kind") is None and str(row["id"]).startswith(DOCUMENT_ROOM))
    ]
    shown_apart = {row["id"] for row in documents}
    for row in rows:
        if row["id"] in shown_apart:
            continue
        dates = f"{(row['first'] or '')[:10]} .. {(row['last'] or '')[:10]}" if row["first"] else ""
        room = f"  (memory room of {', '.join(row['agents'])})" if row.get("agents") else ""
        click.echo(
            f"{row['id']:<24} {counted(row['messages'], 'message'):>15}  {dates:<24} "
            f"{', '.join(row['speakers'][:6])}{room}"
        )
    if documents:
        fragments = sum(int(row.get("fragments") or 0) for row in documents)
        click.echo(
            f"and {counted(len(documents), 'document')} added as knowledge"
            + (f" ({counted(fragments, 'fragment')})" if fragments else "")
            # --all: an agent's own documents are left out of a plain `knowledge list`
            + f": list them with `structrag knowledge list --all --db {db}`"
        )


@click.command()
@click.argument("message_id")
@db_option
@click.option("--conversation", help="Conversation of the message (when ids repeat).")
@json_option
@via_options
def show(message_id: str, db: str, conversation: str | None, as_json: bool, via: Via) -> None:
    """A message and the knowledge extracted from it, with character spans."""
    data = on_index(
        db,
        via,
        remote=lambda r: r.get(f"/v1/messages/{quoted(message_id)}", conversation=conversation),
        local=lambda i: i.show(message_id, conversation),
    )
    if as_json:
        emit_json(data)
        return
    when = f" [{data['timestamp']}]" if data["timestamp"] else ""
    to = f" -> {', '.join(data['recipients'])}" if data["recipients"] else ""
    # A document's fragment has no speaker: its place in the document says where it is from.
    label = (data.get("metadata") or {}).get("label")
    who = data["speaker"] or (f"[{label}]" if label else "?")
    click.echo(f"{data['conversation']} / {data['id']}{when} {who}{to}")
    click.echo(clip(data["text"]))
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
        from structrag.shapes import action_text

        line = action_text(
            item.get("subject"),
            " ".join(item["verbs"]),
            item.get("object"),
            item.get("indirect_object"),
            bool(item.get("negated")),
        )
        params = " ".join(f"{p['name']} {p['value']}" for p in item.get("params", []))
        tense = item.get("tense", "present")
        return line + (f" [{params}]" if params else "") + f" <{tense}>"
    return str(item.get("text", ""))


def _top_command(kind: str) -> Callable[..., None]:
    def command(db: str, top: int, conversation: str | None, as_json: bool, via: Via) -> None:
        rows = on_index(
            db,
            via,
            remote=lambda r: r.get(f"/v1/{kind}", top=top, conversation=conversation),
            local=lambda i: (
                i.entities(top, conversation) if kind == "entities" else i.topics(top, conversation)
            ),
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


def _top(kind: str) -> click.Command:
    return click.command(name=kind)(
        db_option(
            click.option(
                "--top",
                type=click.IntRange(1),
                default=20,
                show_default=True,
                help=f"List this many {kind}, the most mentioned first.",
            )(
                click.option("--conversation", help="Only this conversation.")(
                    json_option(via_options(_top_command(kind)))
                )
            )
        )
    )


entities = _top("entities")
topics = _top("topics")


@click.command()
@click.argument("statement")
@db_option
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="Show at most this many rows.",
)
@json_option
@via_options
def sql(statement: str, db: str, limit: int, as_json: bool, via: Via) -> None:
    """Run SQL that reads the index (the v_* views): rows as a table or JSON.

    Only statements that read run (SELECT, WITH, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN). The
    views are listed in the README's "Storage layout".

    \b
    Example:
      structrag sql "SELECT speaker, verb, count(*) FROM v_actions
                     GROUP BY ALL ORDER BY 3 DESC LIMIT 10" --db my-index
    """
    from structrag.cli.common import open_for

    via.say(f"structrag sql reads the index files of {db}")
    # sql cannot go through a server: one that owns the index is an error at once
    # (--no-server or not), saying to stop it (open_for).
    with open_for(db) as index:
        columns, rows = index.sql_table(statement, limit=limit + 1)
    shown = rows[:limit]
    more = len(rows) > limit
    if as_json:
        names = _distinct(columns)
        emit_json([dict(zip(names, row, strict=True)) for row in shown])
        if more:  # on stderr, so that the JSON stays a list of rows
            click.echo(f"more than {counted(limit, 'row')}: raise --limit to see them", err=True)
        return
    cells = [[_cell(v) for v in row] for row in shown]
    widths = [max([len(c), *(len(r[k]) for r in cells)]) for k, c in enumerate(columns)]
    click.echo("  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip())
    for row in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if more:
        click.echo(f"more than {counted(limit, 'row')}: raise --limit to see them", err=True)
    else:
        click.echo(counted(len(shown), "row"), err=True)


def _distinct(columns: list[str]) -> list[str]:
    """Column names made unique for JSON keys: ``a``, ``a_2``."""
    seen: dict[str, int] = {}
    out = []
    for name in columns:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}_{seen[name]}")
    return out


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):  # JSON, STRUCT and LIST columns: shown as JSON
        value = json.dumps(value, ensure_ascii=False, default=str)
    return clip(str(value).replace("\n", " "), 80)
