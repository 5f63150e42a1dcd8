"""The DuckDB schema: the packaged ``schema.sql`` (tables, views, comments) and upgrades.

An index records its schema version in ``meta``. Opening an index for writing creates
the schema, or upgrades an older one in one transaction (:data:`MIGRATIONS`, applied in
order); an index from a newer structrag is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import lru_cache
from importlib import resources

import duckdb

SCHEMA_VERSION = 3


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
        "INSERT INTO meta VALUES ('schema_version', ?), ('generation', '0')",
        [str(SCHEMA_VERSION)],
    )


def upgrade(con: duckdb.DuckDBPyConnection, found: int) -> None:
    """Bring an index from schema ``found`` to the current one, in one transaction."""
    con.execute("BEGIN TRANSACTION")
    try:
        for version in range(found, SCHEMA_VERSION):
            MIGRATIONS[version](con)
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(SCHEMA_VERSION)])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _v2_to_v3(con: duckdb.DuckDBPyConnection) -> None:
    """Schema 2 -> 3: message ids and conversation ids get plain names (``message_id``,
    ``conversation``); ref bookkeeping leaves ``messages``; facets split into entity
    facets and action parameters; the tag table becomes ``tag_refs``; stem keys are named
    as such and entities gain ``name_lower``; aliases keep their source, not a weight;
    keys, NOT NULL, comments and the v_* views arrive."""
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
        "INSERT INTO messages SELECT mkey, conversation, id, ordinal, speaker, "
        "coalesce(recipients, []), ts, text, coalesce(tags, []), coalesce(metadata, '{}'), "
        "content_hash, source_id FROM messages_v2 ORDER BY mkey"
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
        "INSERT INTO extractions SELECT mkey, conversation, message_id, extractor, model, "
        "coalesce(attempts, 1), coalesce(extracted_at, ?) FROM extractions_v2",
        [now],
    )
    con.execute(
        "INSERT INTO extraction_failures SELECT mkey, conversation, message_id, extractor, "
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


#: ``MIGRATIONS[n]`` upgrades schema ``n`` to ``n + 1``.
MIGRATIONS: dict[int, Callable[[duckdb.DuckDBPyConnection], None]] = {2: _v2_to_v3}
OLDEST_UPGRADABLE = min(MIGRATIONS)
