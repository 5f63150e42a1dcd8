"""The JSON shapes of what an index answers: what the CLI prints with ``--json`` and what
``structrag serve`` returns, built in one place so that both say the same thing.

Each function takes an open :class:`~structrag.index.Index` (or a memory, or a result of
one) and returns plain JSON values. The CLI's text output is drawn from the same values,
so a command reads the same whether it ran here or on a server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from structrag.errors import NotFoundError
from structrag.memory.store import id_agent, shown_id

if TYPE_CHECKING:
    from structrag.index import Index
    from structrag.memory.api import Memory
    from structrag.memory.records import MemoryRecord, Observation, RoomSummary
    from structrag.query.engine import Answer, QueryResult

#: How many mentions, actions and related entities an entity's page lists.
ENTITY_ROWS = 200


def answer_json(answer: Answer, *, explain: bool = False) -> dict[str, Any]:
    """An answer context (``ask``): :meth:`Answer.as_dict`, each packed message with the
    line it was rendered as (``text``)."""
    data = answer.as_dict(explain=explain)
    for item, message in zip(data["messages"], answer.context.messages, strict=True):
        item["text"] = message.text
    return data


def query_json(index: Index, result: QueryResult, *, explain: bool = False) -> dict[str, Any]:
    """Ranked messages and refs (``query``): :meth:`QueryResult.as_dict`, each message with
    its rendered line (``text``), each semantic ref with its kind and text."""
    from structrag.query.context import render_message

    data = result.as_dict(explain=explain)
    stored = index.store.messages_by_keys([m.mkey for m in result.messages])
    for item, message in zip(data["messages"], result.messages, strict=True):
        found = stored.get(message.mkey)
        item["speaker"] = found.message.speaker if found else None
        when = found.message.timestamp if found else None
        item["timestamp"] = when.isoformat() if when else None
        item["text"] = render_message(found) if found else ""
    ref_ids = [r for r, _ in result.refs]
    texts = {r: (kind, text) for r, (kind, text, _) in index.store.knowledge_texts(ref_ids).items()}
    texts.update(_action_texts(index, [r for r in ref_ids if r not in texts]))
    where = _ref_messages(index, ref_ids)
    for item in data["semantic_refs"]:
        item["kind"], item["text"] = texts.get(item["ref_id"], (None, None))
        item["conversation"], item["message_id"] = where.get(item["ref_id"], (None, None))
    return data


def _ref_messages(index: Index, ref_ids: list[int]) -> dict[int, tuple[str, str]]:
    """The conversation and message each semantic ref comes from."""
    if not ref_ids:
        return {}
    rows = index.sql(
        "SELECT ref_id, conversation, message_id FROM semantic_refs "
        "WHERE ref_id IN (SELECT unnest(?::BIGINT[]))",
        [ref_ids],
    )
    return {int(r): (str(c), shown_id(str(m))) for r, c, m in rows}


def _action_texts(index: Index, ref_ids: list[int]) -> dict[int, tuple[str, str]]:
    """Actions as one line each (:func:`action_text`)."""
    if not ref_ids:
        return {}
    rows = index.sql(
        "SELECT ref_id, subject, verb, object, indirect_object, negated FROM actions "
        "WHERE ref_id IN (SELECT unnest(?::BIGINT[]))",
        [ref_ids],
    )
    return {
        int(ref_id): ("action", action_text(subject, verb, obj, indirect, negated))
        for ref_id, subject, verb, obj, indirect, negated in rows
    }


def action_text(
    subject: str | None, verb: str, obj: str | None, indirect: str | None, negated: bool
) -> str:
    """An action as a line: ``Marco adopt puppy``, ``Kevin tell AI models (to Satya)``,
    ``Sam NOT like olives``; ``?`` for a missing subject."""
    parts = [subject or "?", ("NOT " if negated else "") + verb]
    if obj:
        parts.append(obj)
    if indirect:
        parts.append(f"(to {indirect})")
    return " ".join(parts)


def message_page(
    index: Index,
    conversation: str,
    *,
    offset: int = 0,
    limit: int = 50,
    around: str | None = None,
) -> dict[str, Any]:
    """A page of a conversation's messages in order, each as :meth:`Index.show` gives it
    (its knowledge with spans); ``around`` a message id: the page that holds it."""
    total = index.sql("SELECT count(*) FROM v_messages WHERE conversation = ?", [conversation])
    if not total[0][0] and conversation not in {c.id for c in index.conversations()}:
        raise NotFoundError(
            f"no conversation {conversation!r} in the index",
            hint="list them with `structrag conversations`",
        )
    if around is not None:
        found = index.sql(
            "SELECT count(*) FROM v_messages WHERE conversation = ? AND ordinal < "
            "(SELECT min(ordinal) FROM v_messages WHERE conversation = ? AND message_id = ?)",
            [conversation, conversation, around],
        )
        offset = int(found[0][0]) // limit * limit
    rows = index.sql(  # the messages table: v_messages has no mkey
        "SELECT mkey FROM messages WHERE conversation = ? AND memory_table = 'messages' "
        "ORDER BY ordinal, mkey LIMIT ? OFFSET ?",
        [conversation, limit, offset],
    )
    keys = [int(r[0]) for r in rows]
    stored = index.store.messages_by_keys(keys)
    messages = index.shown([stored[k] for k in keys if k in stored])
    for item in messages:  # an agent's memory stored under its scoped id: id@agent
        if id_agent(item["id"]) is not None:
            item.update(id=shown_id(item["id"]), id_agent=id_agent(item["id"]))
    return {
        "conversation": conversation,
        "total": int(total[0][0]),
        "offset": offset,
        "messages": messages,
    }


def entity_json(index: Index, name: str, *, conversation: str | None = None) -> dict[str, Any]:
    """An entity's page: its mentions over time, the entities mentioned with it, and the
    actions it takes part in (as subject, object or indirect object), from the ``v_*``
    views. Names match case-insensitively."""
    key = name.strip().lower()
    where = "name_lower = ? AND (? IS NULL OR conversation = ?)"
    params = [key, conversation, conversation]
    mentions = index.sql(
        f"SELECT conversation, message_id, ts, speaker, name, types, span_text, ref_id "
        f"FROM v_entities WHERE {where} ORDER BY ts NULLS LAST, conversation, message_id "
        f"LIMIT {ENTITY_ROWS}",
        params,
    )
    if not mentions:
        raise NotFoundError(
            f"no entity named {name!r}" + (f" in {conversation!r}" if conversation else ""),
            hint="list entities with `structrag entities`",
        )
    counts = index.sql(
        f"SELECT count(*), count(DISTINCT conversation || '/' || message_id) FROM v_entities "
        f"WHERE {where}",
        params,
    )
    by_month = index.sql(
        f"SELECT strftime(ts, '%Y-%m') AS month, count(*) FROM v_entities "
        f"WHERE {where} AND ts IS NOT NULL GROUP BY month ORDER BY month",
        params,
    )
    related = index.sql(
        f"WITH mine AS (SELECT DISTINCT conversation, message_id FROM v_entities "
        f"WHERE {where}) "
        "SELECT min(e.name), count(DISTINCT e.conversation || '/' || e.message_id) AS n "
        "FROM v_entities e JOIN mine USING (conversation, message_id) "
        "WHERE e.name_lower <> ? GROUP BY e.name_lower ORDER BY n DESC, min(e.name) "
        f"LIMIT {ENTITY_ROWS}",
        [*params, key],
    )
    actions = index.sql(
        "SELECT conversation, message_id, ts, subject, verb, object, indirect_object, tense, "
        "negated, span_text FROM v_actions "
        "WHERE (lower(subject) = ? OR lower(object) = ? OR lower(indirect_object) = ?) "
        "AND (? IS NULL OR conversation = ?) "
        f"ORDER BY ts NULLS LAST, conversation, message_id LIMIT {ENTITY_ROWS}",
        [key, key, key, conversation, conversation],
    )
    types = sorted({t for row in mentions for t in (row[5] or [])})
    return {
        "name": mentions[0][4],
        "types": types,
        "mentions": int(counts[0][0]),
        "messages": int(counts[0][1]),
        "by_month": [{"month": m, "mentions": int(n)} for m, n in by_month],
        "occurrences": [
            {
                "conversation": c,
                "message_id": shown_id(m),
                "ts": ts.isoformat() if ts else None,
                "speaker": speaker,
                "span_text": span,
                "ref_id": int(ref),
            }
            for c, m, ts, speaker, _, _, span, ref in mentions
        ],
        "related": [{"name": n, "messages": int(k)} for n, k in related],
        "actions": [
            {
                "conversation": c,
                "message_id": shown_id(m),
                "ts": ts.isoformat() if ts else None,
                "subject": s,
                "verb": v,
                "object": o,
                "indirect_object": io,
                "tense": tense,
                "negated": bool(neg),
                "span_text": span,
            }
            for c, m, ts, s, v, o, io, tense, neg, span in actions
        ],
    }


def agents_json(index: Index) -> list[dict[str, Any]]:
    """The agents that have memories, with how many of each memory table."""
    rows = index.sql(
        "SELECT agent, memory_table, count(*) FROM v_memories WHERE agent IS NOT NULL "
        "GROUP BY agent, memory_table ORDER BY agent, memory_table"
    )
    agents: dict[str, dict[str, int]] = {}
    for agent, table, count in rows:
        agents.setdefault(str(agent), {})[str(table)] = int(count)
    return [
        {"agent": agent, "memories": sum(tables.values()), "tables": tables}
        for agent, tables in agents.items()
    ]


def records_json(records: Sequence[MemoryRecord]) -> list[dict[str, Any]]:
    return [r.as_dict() for r in records]


def count_json(agent: str, room: str | None, table: str | None, count: int) -> dict[str, Any]:
    return {"agent": agent, "room": room, "table": table, "count": count}


def facts_json(
    mem: Memory, user: str | None, room: str | None, *, history: bool = False
) -> list[dict[str, Any]]:
    """Facts and relationships, each with where it comes from."""
    return [
        {**r.as_dict(), "sources": [s.__dict__ for s in mem.sources(r.id)]}
        for r in mem.facts(user, room, history=history)
    ]


def compact_json(
    summary: RoomSummary | None, observations: Sequence[Observation]
) -> dict[str, Any]:
    return {
        "summary": summary.as_dict() if summary else None,
        "observations": [o.as_dict() for o in observations],
    }
