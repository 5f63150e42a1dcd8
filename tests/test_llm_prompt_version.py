"""A new extraction prompt extracts again every message an older one answered, the ones
it found nothing in too: ``extractions`` and ``extraction_failures`` record the prompt
version (schema 8), and an index of schema 7 is upgraded with the versions it can tell.

A real HTTP server on 127.0.0.1 speaks the OpenAI protocol; the index is a real DuckDB
file in ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from structrag import Index
from structrag.store.duckdb.schema import SCHEMA_VERSION
from tests.llm_helpers import CHAT, EMPTY, config, write_chat
from tests.openai_server import FakeOpenAIServer, Reply, serve

#: The message of :data:`CHAT` (m6) the model first finds nothing in.
EMPTY_TEXT = "Bring photos"
#: What a later prompt finds in it.
FOUND = {"entities": [{"name": "Biscuit", "types": ["dog"]}], "actions": [], "topics": []}


def _prompt(monkeypatch: pytest.MonkeyPatch, version: str) -> None:
    """The extraction prompt becomes ``version``, where it is defined and where it was
    imported by name."""
    import structrag.extract.llm_extractor as llm_extractor
    import structrag.extract.llm_prompt as llm_prompt

    monkeypatch.setattr(llm_prompt, "PROMPT_VERSION", version)
    monkeypatch.setattr(llm_extractor, "PROMPT_VERSION", version)


def _llm_knowledge(index: Index, message_id: str) -> list[dict[str, object]]:
    return [
        k for k in index.show(message_id)["knowledge"] if str(k["extractor"]).startswith("llm/")
    ]


def _outcomes(index: Index, table: str = "extractions") -> dict[str, str | None]:
    rows = index.store.sql(f"SELECT message_id, prompt_version FROM {table} ORDER BY 1")
    return {str(m): None if v is None else str(v) for m, v in rows}


def _empty_then_found(server: FakeOpenAIServer) -> None:
    server.on(EMPTY_TEXT, Reply(knowledge=EMPTY), Reply(knowledge=FOUND))


def test_a_new_prompt_asks_again_about_a_message_the_old_one_found_nothing_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    with serve() as srv, Index(tmp_path / "ix") as index:
        _empty_then_found(srv)
        index.ingest([chat], extractor="llm", llm=config(srv))
        assert len(srv.calls_for(EMPTY_TEXT)) == 1 and not _llm_knowledge(index, "m6")
        # the same prompt: nothing is asked again
        (same,) = index.ingest([chat], extractor="llm", llm=config(srv))
        assert same.skipped and srv.calls == len(CHAT)

        _prompt(monkeypatch, "2")
        (again,) = index.ingest([chat], extractor="llm", llm=config(srv))
        assert again.messages_reextracted == len(CHAT)
        assert len(srv.calls_for(EMPTY_TEXT)) == 2 and srv.calls == 2 * len(CHAT)
        found = _llm_knowledge(index, "m6")
        assert [(k["extractor"], k.get("name")) for k in found] == [("llm/2", "Biscuit")]
        # and the new version is done: a dry run and a re-ingest see nothing to extract
        estimate = index.estimate([chat], extractor="llm", llm=config(srv))
        assert estimate["messages_to_extract"] == 0
        (done,) = index.ingest([chat], extractor="llm", llm=config(srv))
        assert done.skipped and srv.calls == 2 * len(CHAT)
        outcomes = _outcomes(index)
        assert len(outcomes) == len(CHAT) and set(outcomes.values()) == {"2"}


def test_a_failure_records_its_prompt_and_is_left_to_retry_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure is not the old prompt's knowledge: a re-ingest with a new prompt leaves it
    to ``--retry-failed`` (which asks with the new one), as with an unchanged prompt."""
    chat = write_chat(tmp_path / "chat.jsonl")
    with serve() as srv, Index(tmp_path / "ix") as index:
        srv.on("Shibuya", Reply(status=500))
        index.ingest([chat], extractor="llm", llm=config(srv))
        assert _outcomes(index, "extraction_failures") == {"m2": "1"}
        _prompt(monkeypatch, "2")
        (again,) = index.ingest([chat], extractor="llm", llm=config(srv))
        assert again.messages_reextracted == len(CHAT) - 1
        assert _outcomes(index, "extraction_failures") == {"m2": "1"}
        srv.rules.clear()
        (retry,) = index.ingest([], extractor="llm", llm=config(srv), retry_failed=True)
        assert retry.messages_failed == 0 and _outcomes(index, "extraction_failures") == {}
        assert set(_outcomes(index).values()) == {"2"} and len(_outcomes(index)) == len(CHAT)


def _as_schema_7(db: Path) -> list[tuple[object, ...]]:
    """The index at ``db`` as schema 7 laid it out (no prompt versions); its extraction
    rows."""
    con = duckdb.connect(str(db / "structrag.duckdb"))
    try:
        for table in ("extractions", "extraction_failures"):
            con.execute(f"ALTER TABLE {table} DROP COLUMN prompt_version")
        con.execute("UPDATE meta SET value = '7' WHERE key = 'schema_version'")
        return con.execute("SELECT * FROM extractions ORDER BY mkey").fetchall()
    finally:
        con.close()


def test_an_index_of_schema_7_is_upgraded_with_the_prompt_versions_it_can_tell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    db = tmp_path / "ix"
    with serve() as srv:
        _empty_then_found(srv)
        with Index(db) as index:
            index.ingest([chat], extractor="llm", llm=config(srv))
        rows = _as_schema_7(db)
        assert len(rows) == len(CHAT)
        # m1's knowledge as a re-extraction under prompt 2 left it (the message keeps the
        # ingest that wrote it, whose settings say prompt 1)
        con = duckdb.connect(str(db / "structrag.duckdb"))
        con.execute(
            "UPDATE semantic_refs SET extractor_version = '2' "
            "WHERE message_id = 'm1' AND extractor = 'llm'"
        )
        con.close()
        with Index(db) as upgraded:
            assert upgraded.store.get_setting("schema_version") == str(SCHEMA_VERSION) == "8"
            kept = upgraded.store.sql(
                "SELECT mkey, conversation, message_id, extractor, model, attempts, "
                "extracted_at FROM extractions ORDER BY mkey"
            )
            assert [tuple(r) for r in kept] == rows
            # m1 from its LLM knowledge, the rest (m6, which has none, too) from the ingest
            assert _outcomes(upgraded) == {"m1": "2", **{f"m{i}": "1" for i in range(2, 7)}}
            comments = upgraded.store.sql(
                "SELECT table_name FROM duckdb_columns() WHERE column_name = "
                "'prompt_version' AND table_name LIKE 'extraction%' AND comment <> ''"
            )
            assert sorted(str(t) for (t,) in comments) == ["extraction_failures", "extractions"]

            _prompt(monkeypatch, "2")
            (again,) = upgraded.ingest([chat], extractor="llm", llm=config(srv))
            assert again.messages_reextracted == len(CHAT) - 1  # all but m1
            assert len(srv.calls_for(EMPTY_TEXT)) == 2
            assert [k.get("name") for k in _llm_knowledge(upgraded, "m6")] == ["Biscuit"]
            assert set(_outcomes(upgraded).values()) == {"2"}


def test_an_outcome_of_unknown_prompt_counts_as_the_current_one(tmp_path: Path) -> None:
    """Neither knowledge nor the ingest log says which prompt answered (the ingest's
    settings lost): the outcome stays unknown, and is not sent again."""
    chat = write_chat(tmp_path / "chat.jsonl")
    db = tmp_path / "ix"
    with serve() as srv:
        _empty_then_found(srv)
        with Index(db) as index:
            index.ingest([chat], extractor="llm", llm=config(srv))
        _as_schema_7(db)
        con = duckdb.connect(str(db / "structrag.duckdb"))
        con.execute("UPDATE sources SET settings = '{}'")
        con.close()
        with Index(db) as upgraded:
            outcomes = _outcomes(upgraded)
            assert outcomes["m6"] is None and outcomes["m1"] == "1"
            (again,) = upgraded.ingest([chat], extractor="llm", llm=config(srv))
            assert again.messages_reextracted == 0 and srv.calls == len(CHAT)
