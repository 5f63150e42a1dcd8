"""The DuckDB schema is a public contract: keys, comments, views, and an upgrade path."""

from __future__ import annotations

import shutil
import tarfile
from pathlib import Path

import duckdb
import pytest

from structrag import Index, IndexStateError
from structrag.store.duckdb.schema import SCHEMA_VERSION, UNKEYED, keyed_tables

FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
VIEWS = {
    "v_messages": ["conversation", "message_id", "ts", "speaker", "recipients", "text"],
    "v_entities": [
        "conversation",
        "message_id",
        "ts",
        "speaker",
        "name",
        "name_lower",
        "types",
        "span_start",
        "span_end",
        "span_text",
        "extractor",
    ],
    "v_actions": [
        "conversation",
        "message_id",
        "ts",
        "speaker",
        "subject",
        "verb",
        "object",
        "indirect_object",
        "tense",
        "span_start",
        "span_end",
        "span_text",
        "extractor",
    ],
    "v_topics": ["conversation", "message_id", "ts", "speaker", "topic", "span_text"],
}
INTERNAL = {"first_ref", "ref_count", "ref_kinds", "content_hash", "stem_key", "mkey"}


@pytest.fixture(scope="module")
def con(example_index: Path) -> duckdb.DuckDBPyConnection:
    """The example index opened with plain DuckDB, as an analyst would."""
    return duckdb.connect(str(example_index / "structrag.duckdb"), read_only=True)


def test_every_table_view_and_column_is_commented(con: duckdb.DuckDBPyConnection) -> None:
    tables = con.execute("SELECT table_name, comment FROM duckdb_tables()").fetchall()
    views = con.execute(
        "SELECT view_name, comment FROM duckdb_views() WHERE NOT internal"
    ).fetchall()
    assert {name for name, _ in views} >= set(VIEWS)
    for name, comment in tables + views:
        assert comment, f"{name} has no comment"
    columns = con.execute(
        "SELECT table_name, column_name, comment FROM duckdb_columns() WHERE NOT internal"
    ).fetchall()
    assert len(columns) > 100
    missing = [f"{t}.{c}" for t, c, comment in columns if not comment]
    assert not missing, f"columns without a comment: {missing}"


def test_keys_and_not_null_constraints(con: duckdb.DuckDBPyConnection) -> None:
    keys = keyed_tables(con)
    assert keys >= {"messages", "conversations", "sources", "aliases"}
    assert not keys & set(UNKEYED)  # ids the writer gives out: no index behind them
    foreign = con.execute(
        "SELECT table_name FROM duckdb_constraints() WHERE constraint_type = 'FOREIGN KEY'"
    ).fetchall()
    assert ("messages",) in foreign
    nullable = con.execute(
        "SELECT is_nullable FROM information_schema.columns "
        "WHERE table_name = 'messages' AND column_name = 'text'"
    ).fetchall()
    assert nullable == [("NO",)]


@pytest.mark.parametrize(("view", "columns"), sorted(VIEWS.items()))
def test_views_have_plain_columns_and_no_internals(
    con: duckdb.DuckDBPyConnection, view: str, columns: list[str]
) -> None:
    found = [d[0] for d in con.execute(f"SELECT * FROM {view} LIMIT 0").description]
    assert found[: len(columns)] == columns or set(columns) <= set(found)
    assert not INTERNAL & set(found)
    assert con.execute(f"SELECT count(*) FROM {view}").fetchone()[0] > 0  # type: ignore[index]


def test_views_answer_plain_questions(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute(
        "SELECT message_id, span_text FROM v_entities WHERE name_lower = 'biscuit'"
    ).fetchall()
    assert {"m11", "m27", "m35"} <= {m for m, _ in rows}
    assert all(span.lower() == "biscuit" for _, span in rows)
    (adopted,) = con.execute(
        "SELECT message_id FROM v_actions WHERE subject = 'Marco' AND verb = 'adopt'"
    ).fetchall()
    assert adopted == ("m11",)
    counts = dict(
        con.execute("SELECT speaker, count(*) FROM v_messages GROUP BY speaker").fetchall()
    )
    assert counts and sum(counts.values()) == 46


def _old_index(tmp_path: Path, version: int = 2) -> Path:
    """The bundled example as an earlier structrag wrote it (schema 2 at b090cab, schema 3
    at dbba8e8); see tests/fixtures/README.md."""
    target = tmp_path / f"old-index-{version}"
    target.mkdir()
    with tarfile.open(FIXTURES / f"index_v{version}.tar.gz") as archive:
        archive.extractall(target, filter="data")
    return target


def test_an_index_written_by_the_previous_version_is_upgraded(tmp_path: Path) -> None:
    old = _old_index(tmp_path)
    before = duckdb.connect(str(old / "structrag.duckdb"), read_only=True)
    assert before.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall() == [
        ("2",)
    ]
    refs = before.execute(
        "SELECT ref_id, mkey, kind, span_start, span_end, extractor FROM semantic_refs "
        "ORDER BY ref_id"
    ).fetchall()
    messages = before.execute(
        "SELECT mkey, conversation, id, ts, speaker, text FROM messages ORDER BY mkey"
    ).fetchall()
    entities = before.execute("SELECT ref_id, name, types FROM entities ORDER BY 1").fetchall()
    actions = before.execute(
        "SELECT ref_id, verb, subject, object FROM actions ORDER BY 1"
    ).fetchall()
    facets = before.execute(
        "SELECT f.ref_id, r.kind, f.name, f.value FROM facets f JOIN semantic_refs r "
        "USING (ref_id) ORDER BY f.ref_id, f.rowid"
    ).fetchall()
    before.close()
    with Index(old) as upgraded:
        assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION)
        sql = upgraded.sql
        assert (
            sql(
                "SELECT ref_id, mkey, kind, span_start, span_end, extractor FROM semantic_refs "
                "ORDER BY ref_id"
            )
            == refs
        )
        assert (
            sql(
                "SELECT mkey, conversation, message_id, ts, speaker, text FROM messages "
                "ORDER BY mkey"
            )
            == messages
        )
        assert sql("SELECT ref_id, name, types FROM entities ORDER BY 1") == entities
        assert sql("SELECT ref_id, verb, subject, object FROM actions ORDER BY 1") == actions
        moved = sql(
            "SELECT ref_id, 'entity', name, value FROM entity_facets UNION ALL "
            "SELECT ref_id, 'action', name, value FROM action_params ORDER BY 1"
        )
        assert sorted(moved) == sorted(facets) and len(moved) > 0
        assert sql("SELECT count(*) FROM v_entities") == [(len(entities),)]
        # The text index gained a column since schema 2: it is rebuilt once, from the store.
        assert [n for n in upgraded.notes if "older layout" in n]
        assert upgraded.ask("When did Marco adopt Biscuit?", budget=200).message_ids[0] == "m11"
        # and it takes a new ingest after the upgrade (the extractor changed since)
        (report,) = upgraded.ingest([EXAMPLES / "friends_chat.jsonl"])
        assert report.messages_added == 0 and report.messages_unchanged == 46


def test_an_index_with_schema_3_gains_memory_tables(tmp_path: Path) -> None:
    old = _old_index(tmp_path, 3)
    before = duckdb.connect(str(old / "structrag.duckdb"), read_only=True)
    messages = before.execute(
        "SELECT mkey, conversation, message_id, ts, speaker, text, source_id FROM messages "
        "ORDER BY mkey"
    ).fetchall()
    refs = before.execute("SELECT count(*) FROM semantic_refs").fetchall()
    started = before.execute("SELECT started_at FROM sources").fetchall()
    before.close()
    with Index(old) as upgraded:
        assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION)
        assert (
            upgraded.sql(
                "SELECT mkey, conversation, message_id, ts, speaker, text, source_id "
                "FROM messages ORDER BY mkey"
            )
            == messages
        )
        assert upgraded.sql("SELECT count(*) FROM semantic_refs") == refs
        memory = upgraded.sql(
            "SELECT DISTINCT memory_table, agent, importance, created_at FROM messages"
        )
        assert memory == [("messages", None, "normal", started[0][0])]
        assert upgraded.sql("SELECT count(*) FROM v_memories") == [(len(messages),)]
        assert not upgraded.notes  # the text index still matches: nothing to rebuild
        assert upgraded.ask("When did Marco adopt Biscuit?", budget=200).message_ids[0] == "m11"


def test_a_read_only_open_upgrades_through_a_brief_write(tmp_path: Path) -> None:
    old = _old_index(tmp_path)
    with Index(old, read_only=True) as index:
        assert any("upgraded" in note for note in index.notes)
        assert index.store.get_setting("schema_version") == str(SCHEMA_VERSION)
        assert index.stats()["messages"] == 46


def test_an_index_from_a_newer_version_is_refused(tmp_path: Path, example_index: Path) -> None:
    copy = tmp_path / "newer"
    shutil.copytree(example_index, copy)
    con = duckdb.connect(str(copy / "structrag.duckdb"))
    con.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    con.close()
    with pytest.raises(IndexStateError, match="schema version 99"):
        Index(copy)


def test_an_index_with_schema_4_gains_an_empty_digests_table(
    tmp_path: Path, example_index: Path
) -> None:
    """Schema 4 had no digests: the upgrade adds the table, empty, and questions read the
    tables until the next ingest writes a conversation's digest."""
    old = tmp_path / "v4"
    shutil.copytree(example_index, old)
    con = duckdb.connect(str(old / "structrag.duckdb"))
    rows = con.execute("SELECT count(*) FROM messages").fetchall()
    con.execute("DROP TABLE digests")
    con.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    con.close()
    with Index(old) as upgraded:
        assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION)
        assert upgraded.sql("SELECT count(*) FROM digests") == [(0,)]
        assert upgraded.sql("SELECT count(*) FROM messages") == rows
        assert upgraded.engine.view("friends").digest is None
        assert upgraded.ask("When did Marco adopt Biscuit?", budget=200).message_ids[0] == "m11"
        upgraded.ingest([EXAMPLES / "friends_chat.jsonl"], force=True)
        assert upgraded.engine.view("friends").digest is not None


def test_an_index_with_schema_5_loses_the_keys_of_its_knowledge_tables(
    tmp_path: Path, example_index: Path
) -> None:
    """Schema 5 kept a primary key (and DuckDB's index behind it) on every knowledge table
    and on the embeddings: the upgrade copies their rows into tables without one."""
    old = tmp_path / "v5"
    shutil.copytree(example_index, old)
    con = duckdb.connect(str(old / "structrag.duckdb"))
    for table, key in UNKEYED.items():  # the keys schema 5 had: each table's order
        con.execute(f"ALTER TABLE {table} ADD PRIMARY KEY ({key})")
    assert keyed_tables(con) >= set(UNKEYED)
    rows = {t: con.execute(f"SELECT * FROM {t} ORDER BY {UNKEYED[t]}").fetchall() for t in UNKEYED}
    entities = con.execute("SELECT * FROM v_entities ORDER BY ALL").fetchall()
    con.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    con.close()
    with Index(old) as upgraded:
        assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION)
        for table in UNKEYED:
            assert upgraded.sql(f"SELECT * FROM {table} ORDER BY {UNKEYED[table]}") == rows[table]
        assert upgraded.sql("SELECT * FROM v_entities ORDER BY ALL") == entities
        assert upgraded.ask("When did Marco adopt Biscuit?", budget=200).message_ids[0] == "m11"
        (report,) = upgraded.ingest([EXAMPLES / "friends_chat.jsonl"], force=True)
        assert report.messages_added + report.messages_updated + report.messages_unchanged == 46
    con = duckdb.connect(str(old / "structrag.duckdb"), read_only=True)
    assert not keyed_tables(con) & set(UNKEYED)
    comments = con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'entities' AND comment <> ''"
    ).fetchall()
    assert comments == [(1,)]


def test_knowledge_views_say_what_the_knowledge_was_extracted_from(tmp_path: Path) -> None:
    """The knowledge views hold the knowledge of agents' memories and of documents too;
    ``memory_table`` tells them apart, and ``memory_table = 'messages'`` keeps the rows
    of ``v_messages``' messages (the notebooks' counts)."""
    with Index(tmp_path / "ix") as index:
        index.ingest([EXAMPLES / "friends_chat.jsonl"])
        mem = index.memory(agent="bot")
        mem.add("I moved to Lisbon last month. My sister Ana has a dog named Rex.", user="priya")
        index.knowledge.add("Sofia adopted a cat named Miso in Porto.", shared=True)
        for view in ("v_entities", "v_actions", "v_topics", "v_facets"):
            tables = {t for (t,) in index.sql(f"SELECT DISTINCT memory_table FROM {view}")}
            assert "messages" in tables, view
            outside = index.sql(
                f"SELECT count(*) FROM {view} x WHERE memory_table = 'messages' AND NOT EXISTS "
                "(SELECT 1 FROM v_messages m WHERE m.conversation = x.conversation "
                "AND m.message_id = x.message_id)"
            )
            assert outside == [(0,)], view
        names = dict(index.sql("SELECT name_lower, memory_table FROM v_entities"))
        assert names["miso"] == "knowledge"
        assert names["biscuit"] == "messages"
        assert {t for (t,) in index.sql("SELECT memory_table FROM v_entities")} >= {
            "messages",
            "knowledge",
            "relationships",
        }


def test_facets_carry_the_entity_span(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute(
        "SELECT f.span_start, f.span_end, f.span_text, e.span_text FROM v_facets f "
        "JOIN v_entities e USING (ref_id)"
    ).fetchall()
    assert rows
    assert all(s < e and text == entity for s, e, text, entity in rows)


def test_an_index_with_schema_6_gains_the_new_view_columns(
    tmp_path: Path, example_index: Path
) -> None:
    old = tmp_path / "v6"
    shutil.copytree(example_index, old)
    con = duckdb.connect(str(old / "structrag.duckdb"))
    con.execute(  # v_facets as schema 6 had it
        "CREATE OR REPLACE VIEW v_facets AS SELECT r.conversation, r.message_id, m.ts, "
        "m.speaker, e.name AS entity, f.name AS facet, f.value, f.number, f.units, "
        "r.extractor, r.ref_id FROM entity_facets f JOIN entities e USING (ref_id) "
        "JOIN semantic_refs r USING (ref_id) JOIN messages m ON m.mkey = r.mkey"
    )
    facets = con.execute("SELECT entity, facet, value FROM v_facets ORDER BY ALL").fetchall()
    con.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    con.close()
    with Index(old, read_only=True) as upgraded:
        assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION) == "8"
        assert upgraded.sql("SELECT entity, facet, value FROM v_facets ORDER BY ALL") == facets
        columns, _ = upgraded.sql_table("SELECT * FROM v_facets LIMIT 0")
        assert {"span_text", "memory_table"} <= set(columns)
    con = duckdb.connect(str(old / "structrag.duckdb"), read_only=True)
    comments = con.execute(
        "SELECT comment FROM duckdb_columns() WHERE table_name = 'v_facets' "
        "AND column_name = 'memory_table'"
    ).fetchall()
    assert comments and comments[0][0]
