"""Readers of an index that this process writes (``Index.reader``, the server's readers):
they see committed state only, and one state for the whole of a snapshot."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.store.duckdb.store import ReaderStore


@pytest.fixture
def writer(example_index: Path, tmp_path: Path) -> Iterator[Index]:
    directory = tmp_path / "index"
    shutil.copytree(example_index, directory)
    with Index(directory) as index:
        yield index


def test_a_reader_sees_committed_writes_only(writer: Index) -> None:
    reader = writer.reader()
    try:
        assert isinstance(reader.store, ReaderStore)
        assert reader.read_only
        con = writer.store.hold()
        try:
            con.execute("BEGIN TRANSACTION")
            writer.store.set_setting("probe", "written")
            assert reader.store.get_setting("probe") is None  # not committed yet
            con.execute("COMMIT")
        finally:
            writer.store.let_go()
        assert reader.store.get_setting("probe") == "written"
    finally:
        reader.close()


def test_a_snapshot_holds_one_state_while_the_writer_commits(writer: Index) -> None:
    reader = writer.reader()
    try:
        assert isinstance(reader.store, ReaderStore)
        before = reader.stats()["messages"]
        with reader.store.snapshot() as generation:
            writer.memory("bot").add("I moved to Lisbon last month.", user="ann", room="dm")
            assert reader.store.generation() == generation
            assert reader.stats()["messages"] == before
        assert reader.store.generation() > generation
        assert reader.stats()["messages"] > before
        reader.text_index.refresh()
        assert reader.text_index.generation() == reader.store.generation()
        hits = reader.memory("bot").search("Who moved to Lisbon?", count=3)
        assert [h.memory.text for h in hits][:1] == ["I moved to Lisbon last month."]
    finally:
        reader.close()


def test_a_reader_store_does_not_write(writer: Index) -> None:
    reader = writer.reader()
    try:
        with pytest.raises(Exception, match="read-only"):
            reader.store.begin(None, [])
    finally:
        reader.close()
