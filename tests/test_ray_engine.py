"""``ingest --engine ray`` on a real local Ray cluster started by the test
(``ray.init(num_cpus=2)``): the index it builds is identical to a local ingest of the same
files; an ingest that dies leaves its extracted shards, which the next ingest reads instead
of extracting again; the CLI joins a running cluster by its address; without Ray installed
the engine says how to install it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from structrag import Index
from structrag.errors import ConfigError
from structrag.extract import ray_engine
from structrag.extract.ray_engine import RayExtractor
from structrag.extract.spacy_extractor import SpacyExtractor
from structrag.index import IngestOptions, ingest_into
from structrag.store.workspace import RAY_SHARDS_DIRNAME as SHARDS
from tests import ray_helpers
from tests.entry_helpers import run_marked
from tests.sinks import Interrupt

cluster = ray_helpers.cluster  # the module's local Ray (a module-scoped fixture)

EXAMPLE = Path(__file__).parent.parent / "examples" / "friends_chat.jsonl"

#: Each ref by its message and its place among the message's refs (ref ids themselves
#: depend on what was reserved before: an ingest that died used up its block of ids).
_REFS = (
    "WITH n AS (SELECT ref_id, conversation, message_id, "
    "ref_id - min(ref_id) OVER (PARTITION BY mkey) AS k FROM semantic_refs) "
)

#: Every table an ingest writes knowledge to, compared row for row.
TABLES = {
    "messages": "SELECT * EXCLUDE (mkey, created_at, source_id) FROM messages",
    "aliases": "SELECT * FROM aliases",
    **{
        table: f"{_REFS} SELECT n.* EXCLUDE (ref_id), t.* EXCLUDE (ref_id) "
        f"FROM {table} t JOIN n USING (ref_id)"
        for table in (
            "semantic_refs",
            "entities",
            "entity_facets",
            "actions",
            "action_params",
            "topics",
            "properties",
        )
    },
}


@pytest.fixture(scope="module")
def chats(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two inputs of ~300 messages between them, so the engine sends several batches."""
    root = tmp_path_factory.mktemp("chats")
    rows = [json.loads(line) for line in (EXAMPLE).read_text().splitlines()]
    paths = []
    for n in range(2):
        path = root / f"chat{n}.jsonl"
        out = []
        for copy in range(5):
            for row in rows:
                out.append(dict(row, id=f"{row['id']}-{copy}", conversation=f"friends-{n}"))
        path.write_text("\n".join(json.dumps(r) for r in out) + "\n", encoding="utf-8")
        paths.append(path)
    return paths


def _contents(directory: Path) -> dict[str, Any]:
    with Index(directory, read_only=True) as index:
        found: dict[str, Any] = {
            name: sorted(map(repr, index.sql(q))) for name, q in TABLES.items()
        }
        found["stats"] = {
            k: v for k, v in index.stats().items() if k not in ("index", "size_bytes")
        }
        found["text_docs"] = index.text_index.doc_count()
        found["answer"] = index.ask("When did Marco adopt Biscuit?", budget=200).context
    return found


@pytest.fixture(scope="module")
def local(chats: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    directory = tmp_path_factory.mktemp("local") / "index"
    with Index(directory) as index:
        index.ingest(chats, workers=1)
    return _contents(directory)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ray_engine, "BATCH_MESSAGES", 40)


@pytest.mark.usefixtures("small_batches")
def test_a_ray_ingest_builds_the_same_index_as_a_local_one(
    cluster: str, chats: list[Path], local: dict[str, Any], tmp_path: Path
) -> None:
    with Index(tmp_path / "index") as index:
        reports = index.ingest(chats, engine="ray", workers=2)
    assert [r.messages_added for r in reports] == [len(c.read_text().splitlines()) for c in chats]
    assert _contents(tmp_path / "index") == local
    assert not (tmp_path / "index" / SHARDS).exists()  # done: nothing kept to resume


def test_an_ingest_that_dies_resumes_from_its_shards(
    cluster: str, chats: list[Path], local: dict[str, Any], tmp_path: Path
) -> None:
    directory, shards = tmp_path / "index", tmp_path / "index" / SHARDS
    first = RayExtractor(SpacyExtractor(workers=1), workers=2, shards=shards, batch_messages=40)
    with Index(directory) as index, pytest.raises(KeyboardInterrupt):
        index.ingest(chats, extractor=first, progress=Interrupt(400))
    first.close()
    first_file, second_file = (len(c.read_text().splitlines()) for c in chats)
    with Index(directory, read_only=True) as index:
        # Atomic per file: the first is in, nothing of the second (it died half-way).
        assert index.stats()["messages"] == first_file
    kept = len(list(shards.glob("*.parquet")))
    first_batches, second_batches = -(-first_file // 40), -(-second_file // 40)
    assert first_batches < kept < first_batches + second_batches
    second = RayExtractor(SpacyExtractor(workers=1), workers=2, shards=shards, batch_messages=40)
    try:
        with Index(directory) as index:
            index.ingest(chats, extractor=second)
    finally:
        second.close()
    # The second file's batches extracted before the crash are read back, not redone.
    assert second.batches_reused == kept - first_batches
    assert second.batches_extracted == second_batches - second.batches_reused
    assert _contents(directory) == local


@pytest.mark.usefixtures("small_batches")
def test_an_interrupted_first_ingest_keeps_its_new_index_for_its_shards(
    cluster: str, chats: list[Path], local: dict[str, Any], tmp_path: Path
) -> None:
    """A first ingest that fails removes the index directory it created, unless it holds
    work to resume: the shards its actors extracted stay, and the next ingest ends it."""
    directory = tmp_path / "index"
    options = IngestOptions(engine="ray", workers=2)
    with pytest.raises(KeyboardInterrupt):
        ingest_into(directory, chats[:1], options, progress=Interrupt(100))
    assert list((directory / SHARDS).glob("*.parquet"))
    with Index(directory, read_only=True) as index:
        assert index.stats()["messages"] == 0
    ingest_into(directory, chats, options)
    assert _contents(directory) == local
    assert not (directory / SHARDS).exists()


def test_the_cli_joins_a_running_cluster(cluster: str, chats: list[Path], tmp_path: Path) -> None:
    result = run_marked(
        *("ingest", *map(str, chats)),
        *("--db", str(tmp_path / "index"), "--engine", "ray", "--address", cluster),
        *("--workers", "2", "--json", "-q"),
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    assert result.returncode == 0, result.stderr
    assert "torn down" in result.stderr  # Ray's exit handlers ran (need_full_teardown)
    reports = json.loads(result.stdout)
    assert [r["messages_added"] for r in reports] == [
        len(c.read_text().splitlines()) for c in chats
    ]
    with Index(tmp_path / "index", read_only=True) as index:
        assert index.stats()["messages"] == sum(r["messages_added"] for r in reports)


def test_the_engine_says_how_to_install_ray(
    monkeypatch: pytest.MonkeyPatch, chats: list[Path], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # as if it were not installed
    with Index(tmp_path / "index") as index, pytest.raises(ConfigError) as caught:
        index.ingest(chats, engine="ray")
    assert "structrag[ray]" in str(caught.value.hint)
    with Index(tmp_path / "index", read_only=True) as index:
        assert index.stats()["messages"] == 0


def test_the_ray_engine_runs_spacy_only(tmp_path: Path, chats: list[Path]) -> None:
    with Index(tmp_path / "index") as index, pytest.raises(ConfigError, match="spaCy"):
        index.ingest(chats, engine="ray", extractor="llm")
