"""``structrag memory``: an agent's memory from the command line (the memory API's mirror)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

import click

from structrag.cli.common import (
    BUDGET,
    clip,
    counted,
    db_option,
    emit_json,
    is_dir,
    json_option,
    mode_option,
    open_for,
)
from structrag.cli.remote import Remote, Via, agent_path, quoted, via_options
from structrag.errors import StructragError, shown_path

if TYPE_CHECKING:
    from structrag.memory.api import Memory

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
TABLES = ["messages", "facts", "relationships", "goals", "knowledge"]


def agent_option(func: F) -> F:
    return click.option(
        "--agent",
        required=True,
        envvar="STRUCTRAG_AGENT",
        help="Whose memory (an agent name). Env: STRUCTRAG_AGENT.",
    )(func)


@contextmanager
def memory_of(
    db: str, agent: str, *, write: bool, create: bool = False, via: Via | None = None
) -> Iterator[Memory]:
    """The agent's memory in the index at ``db`` (created by a first ``add``: ``create``)."""
    if not create and not is_dir(db):
        shown = shown_path(db)
        raise StructragError(
            f"no index at {shown}",
            hint=f'add a memory first: structrag memory add "..." --agent {agent} --db {shown}',
        )
    served_ok = via is not None and via.no_server
    with open_for(db, write=write, create=create, served_ok=served_ok) as index:
        yield index.memory(agent)


def writable(db: str) -> bool:
    """Whether this process may write the index at ``db``: memory reads count what they
    read (for ranking by use) where they can, and read without counting an index they may
    not write (a read-only folder or file system)."""
    from pathlib import Path

    from structrag.store.duckdb import may_write

    return may_write(Path(db))


def on_memory(
    db: str,
    agent: str,
    via: Via,
    *,
    remote: Callable[[Remote, str], T],
    local: Callable[[Memory], T],
    write: bool | None,
    create: bool = False,
) -> T:
    """What a memory command does: through the server that owns ``db`` (``remote`` gets
    the agent's path, ``/v1/agents/AGENT``), or on the index files (made if ``create``;
    opened to write when ``write``, or, when None, if this process may: see
    :func:`writable`)."""
    server = via.server(db) if is_dir(db) else None
    if server is not None:
        return remote(server, agent_path(agent))
    if write is None:
        write = writable(db)
    # Ctrl-C says what the write had committed (main() prints it): the memory API's
    # WriteInterrupted when it came during the write, what the write that returned
    # committed when it came after (while the index closes), else that nothing was.
    mem: Memory | None = None
    done: list[T] = []
    try:
        with memory_of(db, agent, write=write, create=create, via=via) as mem:
            done.append(local(mem))
    except BaseException as exc:
        from structrag.errors import Committed, WriteInterrupted
        from structrag.store.interrupted import duckdb_interrupted

        if isinstance(exc, WriteInterrupted) or not (
            isinstance(exc, KeyboardInterrupt) or duckdb_interrupted(exc)
        ):
            raise
        # What the command's writes that returned committed (compact, then reading its
        # observations: Ctrl-C during the read comes after the summary was written).
        landed = mem.last_committed if mem is not None else None
        if landed is not None:
            raise WriteInterrupted(landed) from exc
        stopped = exc if isinstance(exc, KeyboardInterrupt) else KeyboardInterrupt()
        stopped.committed = Committed([], {})  # type: ignore[attr-defined]
        if stopped is exc:
            raise
        raise stopped from exc
    return done[0]


def _records(rows: list[dict[str, Any]], as_json: bool) -> None:
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        _print_record(row)


def _print_record(record: dict[str, Any], score: float | None = None) -> None:
    when = datetime.fromisoformat(record["ts"] or record["created_at"])
    shown = when.isoformat(sep=" ", timespec="minutes")
    who = f"{record['user']}: " if record["user"] else ""
    head = f"{score:8.3f}  " if score is not None else ""
    where = f"{record['table']}/{record['room']}"
    # a goal's status ("(open) ", "(done) "), and a superseded statement's as `memory
    # facts` and `context` mark it (--json has "status": "superseded")
    status = record.get("status")
    mark = f"({status}) " if status else ""
    click.echo(f"{head}{record['id']}  {where}  [{shown}] {mark}{who}{clip(record['text'], 500)}")


@click.group()
def memory() -> None:
    """An agent's memory: messages, facts, relationships, goals and knowledge, written as
    they happen and read back within a budget.

    Every memory gets the same extraction as an ingested message (entities, actions,
    topics with spans). A message from a user also updates what the agent knows of them:
    facts, relationships and profile entries, each citing its source message. An agent
    reads its own memories (and shared knowledge) only.
    """


@memory.command("add")
@click.argument("text")
@db_option
@agent_option
@click.option("--user", help="Who says it (a user of the agent's).")
@click.option("--room", help="The conversation it belongs to (default: 'default').")
@click.option("--world", help="A group of rooms.")
@click.option(
    "--table",
    type=click.Choice(TABLES),
    default="messages",
    show_default=True,
    help="The memory table to write to.",
)
@click.option(
    "--importance",
    type=click.Choice(["low", "normal", "high"]),
    default="normal",
    show_default=True,
    help="How important the memory is (prune keeps the important ones).",
)
@click.option("--unique", is_flag=True, help="Do not store an exact duplicate twice.")
@click.option("--id", "memory_id", help="The memory's id (default: made up).")
@click.option("--source", help="For a fact: the id of the memory it comes from.")
@json_option
@via_options
def add(
    text: str,
    db: str,
    agent: str,
    user: str | None,
    room: str | None,
    world: str | None,
    table: str,
    importance: str,
    unique: bool,
    memory_id: str | None,
    source: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """Store a memory; it is extracted and searchable on return."""
    fields: dict[str, Any] = {
        "user": user,
        "room": room,
        "world": world,
        "table": table,
        "importance": importance,
        "unique": unique,
        "id": memory_id,
        "source": source,
    }
    record = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.post(f"{path}/memories", {"text": text, **fields}),
        local=lambda mem: mem.add(text, **fields).as_added(),
        write=True,
        create=True,
    )
    if as_json:
        emit_json(record)
    else:
        click.echo(f"{record['id']}  {record['table']}/{record['room']}")
        if record.get("duplicate"):
            click.echo(
                f"stored already (--unique): {record['id']} says exactly this; nothing was added",
                err=True,
            )


@memory.command("get")
@click.argument("memory_id")
@db_option
@agent_option
@click.option("--room", help="The room, where two rooms have the id.")
@json_option
@via_options
def get(memory_id: str, db: str, agent: str, room: str | None, as_json: bool, via: Via) -> None:
    """Show one memory by its id (its text, room, user, table, reads)."""
    record = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.get(f"{path}/memories/{quoted(memory_id)}", room=room),
        local=lambda mem: mem.get(memory_id, room).as_dict(),
        write=None,  # counted where it can write (see writable)
    )
    if as_json:
        emit_json(record)
    else:
        _print_record(record)
        click.echo(f"  read {record['access_count']} time(s); importance {record['importance']}")


@memory.command("update")
@click.argument("memory_id")
@db_option
@agent_option
@click.option("--room", help="The room, where two rooms have the id.")
@click.option(
    "--status",
    type=click.Choice(["open", "in_progress", "done", "abandoned"]),
    help="A goal's status.",
)
@click.option(
    "--importance", type=click.Choice(["low", "normal", "high"]), help="A new importance."
)
@click.option("--metadata", help='Replaces the metadata whole: a JSON object, e.g. \'{"k": "v"}\'.')
@json_option
@via_options
def update(
    memory_id: str,
    db: str,
    agent: str,
    room: str | None,
    status: str | None,
    importance: str | None,
    metadata: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """Change a memory's status (mark a goal done), importance or metadata. The text
    stays: to change it, remove the memory and add the new text."""
    import json

    fields: dict[str, Any] = {"status": status, "importance": importance}
    if metadata is not None:
        try:
            fields["metadata"] = json.loads(metadata)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--metadata") from None
        if not isinstance(fields["metadata"], dict):
            raise click.BadParameter("give a JSON object", param_hint="--metadata")
    given = {k: v for k, v in fields.items() if v is not None}
    if not given:
        raise click.UsageError("give --status, --importance or --metadata")
    record = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.patch(f"{path}/memories/{quoted(memory_id)}", given, room=room),
        local=lambda mem: mem.update(memory_id, room=room, **given).as_dict(),
        write=True,
    )
    if as_json:
        emit_json(record)
    else:
        _print_record(record)
        status_note = f", status {record['status']}" if record["status"] else ""
        click.echo(f"  importance {record['importance']}{status_note}")


def _time(value: str | None) -> datetime | None:
    if value is None:
        return None
    from structrag.timeparse import parse_datetime

    parsed = parse_datetime(value)
    if parsed is None:
        raise click.BadParameter(f"cannot read {value!r} as a time (use ISO 8601: 2024-05-01)")
    return parsed


@memory.command("recent")
@db_option
@agent_option
@click.option("--room", help="Only this room.")
@click.option(
    "--table",
    type=click.Choice(TABLES),
    default="messages",
    show_default=True,
    help="The memory table to list.",
)
@click.option(
    "--count",
    type=click.IntRange(1),
    default=20,
    show_default=True,
    help="List at most this many, newest first.",
)
@click.option("--start", help="From this time on (ISO 8601).")
@click.option("--end", help="Before this time (ISO 8601).")
@json_option
@via_options
def recent(
    db: str,
    agent: str,
    room: str | None,
    table: str,
    count: int,
    start: str | None,
    end: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """The newest memories, newest first."""
    since, until = _time(start), _time(end)
    rows = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.get(
            f"{path}/memories",
            room=room,
            table=table,
            count=count,
            start=since.isoformat() if since else None,
            end=until.isoformat() if until else None,
        ),
        local=lambda mem: [
            m.as_dict() for m in mem.recent(room, count, table=table, start=since, end=until)
        ],
        write=None,  # counted where it can write (see writable)
    )
    _records(rows, as_json)


@memory.command("search")
@click.argument("query")
@db_option
@agent_option
@click.option("--room", help="Only this room.")
@click.option(
    "--table",
    type=click.Choice(TABLES),
    default="messages",
    show_default=True,
    help="The memory table to search.",
)
@click.option(
    "--count",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    help="Return at most this many hits, best first.",
)
@mode_option
@click.option("--threshold", type=float, help="Keep hits scoring at least this.")
@click.option("--start", help="From this time on (ISO 8601).")
@click.option("--end", help="Before this time (ISO 8601).")
@json_option
@via_options
def search(
    query: str,
    db: str,
    agent: str,
    room: str | None,
    table: str,
    count: int,
    mode: str,
    threshold: float | None,
    start: str | None,
    end: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """The memories that best answer QUERY."""
    since, until = _time(start), _time(end)
    options: dict[str, Any] = {
        "room": room,
        "table": table,
        "count": count,
        "mode": mode,
        "threshold": threshold,
    }
    hits = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.post(
            f"{path}/memories/search",
            {
                "query": query,
                **options,
                "start": since.isoformat() if since else None,
                "end": until.isoformat() if until else None,
            },
        ),
        local=lambda mem: [
            h.as_dict() for h in mem.search(query, **options, start=since, end=until)
        ],
        write=None,  # counted where it can write (see writable)
    )
    if as_json:
        emit_json(hits)
        return
    for hit in hits:
        _print_record(hit, hit["score"])


@memory.command("count")
@db_option
@agent_option
@click.option("--room", help="Only this room.")
@click.option("--table", type=click.Choice(TABLES), help="Only this memory table.")
@json_option
@via_options
def count(
    db: str, agent: str, room: str | None, table: str | None, as_json: bool, via: Via
) -> None:
    """How many memories (of a room, of a table)."""
    from structrag.shapes import count_json

    data = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.get(f"{path}/memories/count", room=room, table=table),
        local=lambda mem: count_json(agent, room, table, mem.count(room, table)),
        write=False,
    )
    if as_json:
        emit_json(data)
    else:
        click.echo(str(data["count"]))


@memory.command("remove")
@click.argument("memory_id", required=False)
@db_option
@agent_option
@click.option("--all", "everything", is_flag=True, help="Every memory (of --room, of --table).")
@click.option("--room", help="With --all: only this room; with an id: the room that has it.")
@click.option("--table", type=click.Choice(TABLES), help="With --all: only this table.")
@json_option
@via_options
def remove(
    memory_id: str | None,
    db: str,
    agent: str,
    everything: bool,
    room: str | None,
    table: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """Delete a memory (or, with --all, many) and everything derived from it."""
    if (memory_id is None) == (not everything):
        raise click.UsageError("give a MEMORY_ID or --all (not both)")

    def local(mem: Memory) -> int:
        if memory_id is not None:
            mem.remove(memory_id, room)
            return 1
        return mem.remove_all(room, table)

    def remote(server: Remote, path: str) -> int:
        if memory_id is not None:
            answer = server.delete(f"{path}/memories/{quoted(memory_id)}", room=room)
        else:
            answer = server.delete(f"{path}/memories", all=True, room=room, table=table)
        return int(answer["removed"])

    removed = on_memory(db, agent, via, remote=remote, local=local, write=True)
    if as_json:
        emit_json({"removed": removed})
    else:
        click.echo(f"removed {removed} memor{'y' if removed == 1 else 'ies'}")


@memory.command("prune")
@db_option
@agent_option
@click.option("--older-than", default="90d", show_default=True, help="Age: 90d, 12h, 2w.")
@click.option(
    "--keep-if-accessed-more-than",
    type=click.IntRange(0),
    default=3,
    show_default=True,
    help="Keep memories read more often than this.",
)
@click.option(
    "--keep-importance",
    type=click.Choice(["low", "normal", "high"]),
    default="high",
    show_default=True,
    help="Keep memories at least this important.",
)
@click.option("--room", help="Only this room.")
@click.option(
    "--table",
    type=click.Choice(TABLES),
    default="messages",
    show_default=True,
    help="The memory table to prune.",
)
@click.option("--apply", is_flag=True, help="Delete (without it, only say what would go).")
@json_option
@via_options
def prune(
    db: str,
    agent: str,
    older_than: str,
    keep_if_accessed_more_than: int,
    keep_importance: str,
    room: str | None,
    table: str,
    apply: bool,
    as_json: bool,
    via: Via,
) -> None:
    """Delete old memories that are neither important nor often read (a dry run unless
    --apply)."""
    options: dict[str, Any] = {
        "keep_if_accessed_more_than": keep_if_accessed_more_than,
        "keep_importance": keep_importance,
        "room": room,
        "table": table,
    }
    report = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.post(
            f"{path}/memories/prune", {"older_than": older_than, **options, "apply": apply}
        ),
        local=lambda mem: mem.prune(older_than, **options, dry_run=not apply).as_dict(),
        write=True,
    )
    if as_json:
        emit_json(report)
        return
    verb = "would remove" if report["dry_run"] else "removed"
    click.echo(
        f"{verb} {counted(len(report['removed']), 'memory', 'memories')}; "
        f"kept {report['kept_important']} important and {report['kept_accessed']} often read"
    )


@memory.command("facts")
@db_option
@agent_option
@click.option("--user", help="Only facts about/from this user.")
@click.option("--room", help="Only this room.")
@click.option(
    "--history", is_flag=True, help="Also facts a later statement superseded (marked so)."
)
@json_option
@via_options
def facts(
    db: str,
    agent: str,
    user: str | None,
    room: str | None,
    history: bool,
    as_json: bool,
    via: Via,
) -> None:
    """Facts and relationships the agent holds, each with where it comes from: those that
    still hold ("I moved to Lisbon" supersedes "I live in Porto")."""
    from structrag.shapes import facts_json

    rows = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.get(f"{path}/facts", user=user, room=room, history=history),
        local=lambda mem: facts_json(mem, user, room, history=history),
        write=False,
    )
    if as_json:
        emit_json(rows)
        return
    for row in rows:
        cited = ", ".join(
            f"{s['kind']} {s.get('source_id') or s['source_ref'] or ''}".strip()
            for s in row["sources"]
        )
        mark = "(superseded) " if row["status"] == "superseded" else ""
        click.echo(f"{row['id']}  {mark}{row['text']}" + (f"   <- {cited}" if cited else ""))


@memory.command("profile")
@db_option
@agent_option
@click.option("--user", required=True, help="The user.")
@click.option("--history", is_flag=True, help="Also entries that were superseded.")
@json_option
@via_options
def profile(db: str, agent: str, user: str, history: bool, as_json: bool, via: Via) -> None:
    """What the agent knows about a user, each entry citing its messages."""
    entries = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.get(f"{path}/profile", user=user, history=history),
        local=lambda mem: [e.as_dict() for e in mem.profile(user, history=history)],
        write=False,
    )
    if as_json:
        emit_json(entries)
        return
    for entry in entries:
        old = f"  (superseded by {entry['superseded_by']})" if entry["superseded_by"] else ""
        click.echo(
            f"{entry['entry_id']:>4}  {entry['category']:<12} {entry['text']}   <- "
            f"{', '.join(entry['sources'])}{old}"
        )


@memory.command("compact")
@db_option
@agent_option
@click.option("--room", required=True, help="The room to compact.")
@click.option(
    "--keep-recent",
    type=click.IntRange(0),
    help="Leave this many of the newest messages out (default: the memory setting, 50).",
)
@json_option
@via_options
def compact(
    db: str, agent: str, room: str, keep_recent: int | None, as_json: bool, via: Via
) -> None:
    """Summarise a room's older messages (they stay searchable) and record observations."""
    from structrag.shapes import compact_json

    data = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.post(
            f"{path}/compact", {"room": room, "keep_recent": keep_recent}
        ),
        local=lambda mem: compact_json(
            mem.compact(room, keep_recent=keep_recent), mem.observations(room)
        ),
        write=True,
    )
    if as_json:
        emit_json(data)
        return
    summary = data["summary"]
    if summary is None:
        click.echo("nothing to compact")
        return
    click.echo(f"summary {summary['summary_id']} ({summary['covers']} messages): {summary['text']}")
    for o in data["observations"]:
        click.echo(f"  {o['kind']}: {o['insight']}")


@memory.command("context")
@click.argument("message")
@db_option
@agent_option
@click.option("--room", help="The room the message is in.")
@click.option("--user", help="Who the agent is talking to (default: the room's last user).")
@click.option(
    "--budget",
    type=BUDGET,
    default=4000,
    show_default=True,
    help="Tokens the context window may take (tiktoken, cl100k_base).",
)
@click.option(
    "--shares",
    help="How the budget is shared, e.g. history=0.5,retrieval=0.3,profile=0.2.",
)
@json_option
@via_options
def context(
    message: str,
    db: str,
    agent: str,
    room: str | None,
    user: str | None,
    budget: int,
    shares: str | None,
    as_json: bool,
    via: Via,
) -> None:
    """What the agent should put in its prompt before answering MESSAGE."""
    parsed = None
    if shares:
        try:
            parsed = {k.strip(): float(v) for k, v in (p.split("=") for p in shares.split(","))}
        except ValueError:
            raise click.BadParameter(
                "write shares as history=0.5,retrieval=0.3,profile=0.2"
            ) from None
    options: dict[str, Any] = {"room": room, "budget": budget, "user": user, "shares": parsed}
    window = on_memory(
        db,
        agent,
        via,
        remote=lambda r, path: r.post(f"{path}/context", {"message": message, **options}),
        local=lambda mem: mem.context(message, **options).as_dict(),
        write=None,  # counted where it can write (see writable)
    )
    if as_json:
        emit_json(window)
        return
    click.echo(window["text"])
    click.echo("")
    used = ", ".join(f"{s['name']} {s['tokens']}" for s in window["sections"])
    click.echo(
        f"{window['tokens']}/{window['budget']} tokens ({used}), {window['seconds'] * 1000:.0f} ms"
    )
