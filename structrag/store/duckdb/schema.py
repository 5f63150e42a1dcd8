"""The DuckDB schema: the packaged ``schema.sql`` (tables, views, comments) and upgrades.

An index records its schema version in ``meta``. Opening an index for writing creates
the schema, or upgrades an older one to the current one in one transaction
(:data:`MIGRATIONS`: one step from each older version straight to the current schema,
which is ``schema.sql``, between the prompt version columns of schema 8 and the views,
which every upgrade does); an index from a newer structrag is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources

import duckdb

from structrag.analysis import TEXT_ANALYSIS, TEXT_ANALYSIS_KEY

SCHEMA_VERSION = 8


@lru_cache(maxsize=1)
def schema_sql() -> str:
    """The schema script shipped in the package (``structrag/store/duckdb/schema.sql``)."""
    return resources.files(__package__).joinpath("schema.sql").read_text(encoding="utf-8")


def stored_version(con: duckdb.DuckDBPyConnection) -> int | None:
    """The schema version an index records (None for a new, empty database)."""
    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except duckdb.CatalogException:
        return None
    return int(rows[0][0]) if rows else None


def create(con: duckdb.DuckDBPyConnection) -> None:
    """Create the schema in a new database (inside the caller's transaction)."""
    con.execute(schema_sql())
    con.execute(
        "INSERT INTO meta VALUES ('schema_version', ?), ('generation', '0'), (?, ?)",
        [str(SCHEMA_VERSION), TEXT_ANALYSIS_KEY, TEXT_ANALYSIS],
    )


def upgrade(con: duckdb.DuckDBPyConnection, found: int) -> None:
    """Bring an index from schema ``found`` to the current one, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        _prompt_columns(con)
        MIGRATIONS[found](con)
        _prompt_versions(con)
        _views(con)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


#: The messages columns an upgrade copies, and what the memory columns (schema 4) start as.
_MESSAGE_COPY = (
    "mkey, conversation, message_id, ordinal, speaker, recipients, ts, text, tags, metadata, "
    "content_hash, source_id, memory_table, agent, world, created_at, importance, is_unique, "
    "status"
)
_MEMORY_DEFAULTS = (
    "'messages', NULL, NULL, coalesce((SELECT s.started_at FROM sources s "
    "WHERE s.source_id = m.source_id), ?), 'normal', false, NULL"
)


def _from_v2(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 2 -> current. From 2 to 3: message ids and conversation ids get plain names
    (``message_id``, ``conversation``); ref bookkeeping leaves ``messages``; facets split
    into entity facets and action parameters; the tag table becomes ``tag_refs``; stem keys
    are named as such and entities gain ``name_lower``; aliases keep their source, not a
    weight; keys, NOT NULL, comments and the v_* views arrive. Then schema 4's memory
    columns and tables (see :func:`_from_v3`)."""
    old = [
        "meta",
        "conversations",
        "sources",
        "messages",
        "semantic_refs",
        "entities",
        "facets",
        "actions",
        "topics",
        "tags",
        "properties",
        "aliases",
        "embeddings",
        "extractions",
        "extraction_failures",
        "llm_cache",
    ]
    for table in old:
        con.execute(f"ALTER TABLE {table} RENAME TO {table}_v2")
    con.execute(schema_sql())
    now = datetime.now(UTC).replace(tzinfo=None)
    con.execute("INSERT INTO meta SELECT key, coalesce(value, '') FROM meta_v2")
    con.execute(
        "INSERT INTO conversations SELECT id, name, coalesce(metadata, '{}'), "
        "coalesce(created_at, ?) FROM conversations_v2",
        [now],
    )
    con.execute(
        "INSERT INTO sources SELECT source_id, coalesce(path, ''), coalesce(sha256, ''), "
        "coalesce(format, ''), coalesce(fingerprint, ''), coalesce(extractor, ''), "
        "coalesce(settings, '{}'), coalesce(started_at, ?), coalesce(finished_at, ?), "
        "coalesce(messages_added, 0), coalesce(messages_updated, 0), "
        "coalesce(messages_unchanged, 0), coalesce(refs_added, 0), coalesce(warnings, '[]') "
        "FROM sources_v2",
        [now, now],
    )
    con.execute(
        f"INSERT INTO messages ({_MESSAGE_COPY}) SELECT mkey, conversation, id, ordinal, "
        "speaker, coalesce(recipients, []), ts, text, coalesce(tags, []), "
        f"coalesce(metadata, '{{}}'), content_hash, source_id, {_MEMORY_DEFAULTS} "
        "FROM messages_v2 m ORDER BY mkey",
        [now],
    )
    con.execute(
        "INSERT INTO semantic_refs SELECT ref_id, mkey, conversation, message_id, kind, "
        "span_start, span_end, extractor, extractor_version FROM semantic_refs_v2 "
        "ORDER BY ref_id"
    )
    con.execute(
        "INSERT INTO entities SELECT ref_id, name, lower(name), name_key, coalesce(types, []) "
        "FROM entities_v2 ORDER BY ref_id"
    )
    for table, kind in (("entity_facets", "entity"), ("action_params", "action")):
        con.execute(
            f"INSERT INTO {table} SELECT f.ref_id, "
            "row_number() OVER (PARTITION BY f.ref_id ORDER BY f.rowid) - 1, f.name, "
            "coalesce(f.value, ''), f.number, coalesce(f.is_bool, false), f.units "
            "FROM facets_v2 f JOIN semantic_refs_v2 r USING (ref_id) WHERE r.kind = ? "
            "ORDER BY f.ref_id",
            [kind],
        )
    con.execute(
        "INSERT INTO actions SELECT ref_id, coalesce(verbs, []), coalesce(verb, ''), tense, "
        "subject, object, indirect_object, coalesce(negated, false) FROM actions_v2 "
        "ORDER BY ref_id"
    )
    con.execute("INSERT INTO topics SELECT ref_id, text, text_key FROM topics_v2 ORDER BY ref_id")
    con.execute("INSERT INTO tag_refs SELECT ref_id, text, text_key FROM tags_v2 ORDER BY ref_id")
    con.execute("INSERT INTO properties SELECT name, value, ref_id FROM properties_v2")
    con.execute(
        "INSERT INTO aliases SELECT conversation, term, related, min(source) FROM aliases_v2 "
        "GROUP BY conversation, term, related"
    )
    con.execute(
        "INSERT INTO embeddings SELECT mkey, model, any_value(vector) FROM embeddings_v2 "
        "GROUP BY mkey, model"
    )
    con.execute(
        "INSERT INTO extractions (mkey, conversation, message_id, extractor, model, attempts, "
        "extracted_at) SELECT mkey, conversation, message_id, extractor, model, "
        "coalesce(attempts, 1), coalesce(extracted_at, ?) FROM extractions_v2",
        [now],
    )
    con.execute(
        "INSERT INTO extraction_failures (mkey, conversation, message_id, extractor, model, "
        "error, attempts, failed_at) SELECT mkey, conversation, message_id, extractor, "
        "model, coalesce(error, ''), coalesce(attempts, 1), coalesce(failed_at, ?) "
        "FROM extraction_failures_v2",
        [now],
    )
    con.execute(
        "INSERT INTO llm_cache SELECT model, prompt_version, message_hash, response, "
        "coalesce(input_tokens, 0), coalesce(output_tokens, 0), coalesce(created_at, ?) "
        "FROM llm_cache_v2",
        [now],
    )
    for table in reversed(old):
        con.execute(f"DROP TABLE {table}_v2")


def _from_v3(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 3 -> current: agent memory (schema 4). Messages gain their memory table,
    agent, world, time stored, importance, unique flag and goal status (an ingested
    message is in the ``messages`` table, of no agent); the tables of memory reads, fact
    sources, user profiles, observations, room summaries, knowledge documents and
    fragments, and the commit log arrive, with the v_memories and v_fragments views. Then
    schema 5's digests table (see :func:`_from_v4`) and schema 6 (:func:`_unkeyed`)."""
    _drop_views(con)
    con.execute("ALTER TABLE messages RENAME TO messages_v3")
    con.execute(schema_sql())
    now = datetime.now(UTC).replace(tzinfo=None)
    columns = (
        "mkey, conversation, message_id, ordinal, speaker, recipients, ts, text, tags, "
        "metadata, content_hash, source_id"
    )
    con.execute(
        f"INSERT INTO messages ({_MESSAGE_COPY}) SELECT {columns}, {_MEMORY_DEFAULTS} "
        "FROM messages_v3 m ORDER BY mkey",
        [now],
    )
    con.execute("DROP TABLE messages_v3")
    _unkeyed(con)


def _from_v4(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 4 -> 5: the ``digests`` table (empty: a conversation's first question reads
    its tables until an ingest writes its digest). Every statement of the schema script
    keeps what exists. Then schema 6 (see :func:`_unkeyed`)."""
    con.execute(schema_sql())
    _unkeyed(con)


#: The tables without a primary key since schema 6, and the order their rows are copied
#: in (the order the writer appends them).
UNKEYED = {
    "semantic_refs": "ref_id",
    "entities": "ref_id",
    "entity_facets": "ref_id, position",
    "actions": "ref_id",
    "action_params": "ref_id, position",
    "topics": "ref_id",
    "tag_refs": "ref_id",
    "embeddings": "mkey, model",
}


def _unkeyed(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 5 -> 6: the knowledge tables and the embeddings lose their primary keys.

    Their ids are given out by the one writer, so a key checked nothing, and DuckDB kept
    an index for each: 47 of the 157 MB a 100,000-message index used, and time and memory
    in the writer, which checked every appended row against them. DuckDB cannot drop a
    constraint: each table is copied into the schema's new one, in the order the writer
    appends rows, and the old one dropped."""
    keyed = keyed_tables(con)
    tables = [t for t in UNKEYED if t in keyed]
    if not tables:
        return
    _drop_views(con)
    for table in tables:
        con.execute(f"ALTER TABLE {table} RENAME TO {table}_v5")
    con.execute(schema_sql())
    for table in tables:
        con.execute(f"INSERT INTO {table} SELECT * FROM {table}_v5 ORDER BY {UNKEYED[table]}")
        con.execute(f"DROP TABLE {table}_v5")


def keyed_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """The tables that have a primary key."""
    return {
        str(table)
        for (table,) in con.execute(
            "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'PRIMARY KEY'"
        ).fetchall()
    }


def _views(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 6 -> 7, and the last step of every upgrade: the views made again as the
    schema script defines them (schema 7: the knowledge views gain ``memory_table``, and
    ``v_facets`` the span columns)."""
    _drop_views(con)
    con.execute(schema_sql())


#: The tables that record the prompt version of an LLM extraction's outcome (schema 8).
PROMPT_TABLES = ("extractions", "extraction_failures")


def _prompt_columns(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 7 -> 8, the first step of every upgrade: ``extractions`` and
    ``extraction_failures`` gain ``prompt_version``. A message the model found nothing in
    has no semantic ref to say which prompt it was asked with, so after a prompt change
    it was never extracted again. First, because every later step runs the schema script,
    whose comments name the column; a table of schema 2 gains it too, and is dropped."""
    for table in PROMPT_TABLES:
        con.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS prompt_version VARCHAR")


def _prompt_versions(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 7 -> 8, after the other steps: the prompt version of the outcomes recorded
    before the column existed, as well as the index can tell.

    An outcome's prompt is that of the message's LLM knowledge, when it has some (the
    ``extractor_version`` of its ``llm`` refs is the prompt version: it was always
    recorded); else the one in the extractor settings of the ingest that wrote the
    message's content (``sources.settings`` of its ``source_id``: ``prompt_version``, or
    ``llm.prompt_version`` for the hybrid); else it stays NULL, which the ingest takes for
    the current version. The knowledge comes first because a message extracted again
    with the same content keeps its ``source_id``: after a prompt change, the messages
    re-extracted with knowledge would otherwise be taken for the old prompt's.

    Not every unknown one "stale": every message the model found nothing in would be
    sent again once, a cost the index gives no reason for; not every one current either,
    as that would re-extract none of the empty messages an older prompt answered (what
    schema 7 did). A message extracted again under a newer prompt after the ingest that
    wrote it (``--retry-failed``, a change of model) in which nothing was found is taken
    for the older prompt's, and sent once more."""
    for table in PROMPT_TABLES:
        con.execute(
            f"UPDATE {table} AS e SET prompt_version = coalesce("
            "(SELECT max(r.extractor_version) FROM semantic_refs r "
            "WHERE r.mkey = e.mkey AND r.extractor = 'llm'), "
            "(SELECT coalesce(json_extract_string(s.settings, '$.prompt_version'), "
            "json_extract_string(s.settings, '$.llm.prompt_version')) FROM messages m "
            "JOIN sources s ON s.source_id = m.source_id WHERE m.mkey = e.mkey)) "
            "WHERE e.prompt_version IS NULL"
        )


def _from_v7(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 7 -> 8: nothing more than what every upgrade does (:func:`_prompt_columns`,
    :func:`_prompt_versions`, the views)."""


def _drop_views(con: duckdb.DuckDBPyConnection) -> None:
    """Drop the views (the schema script makes them again) before their tables change."""
    for (view,) in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal"
    ).fetchall():
        con.execute(f"DROP VIEW {view}")


#: ``MIGRATIONS[n]`` upgrades schema ``n`` to the current one.
MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {
    2: _from_v2,
    3: _from_v3,
    4: _from_v4,
    5: _unkeyed,
    6: _drop_views,  # and then the views, as after every step (:func:`_views`)
    7: _from_v7,
}
OLDEST_UPGRADABLE = min(MIGRATIONS)
