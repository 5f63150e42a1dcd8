"""A live write interrupted between or during its commits, in a process that goes on
writing through the same Index (the Python API, ``structrag serve``): real DuckDB and
Whoosh indexes in ``tmp_path``, with the fault planted in the commit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from structrag import Index
from structrag.store.duckdb.writer import DuckDBTransaction
from structrag.store.whoosh_index import WhooshWriter

WORD = "zebrafinch"


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "ix"


@pytest.fixture
def index(directory: Path) -> Iterator[Index]:
    with Index(directory) as ix:
        ix.memory("bot").add("warm up", user="priya", room="r")
        yield ix


def _stored(index: Index) -> int:
    return int(index.sql(f"SELECT count(*) FROM messages WHERE text ILIKE '%{WORD}%'")[0][0])


def _found(index: Index) -> int:
    return len(index.memory("bot").search(WORD, room="r", mode="text"))


def _reopened(directory: Path) -> tuple[list[str], int]:
    """The notes of a fresh opening (a repair shows there) and the text hits it gives."""
    with Index(directory, read_only=True) as ix:
        return list(ix.notes), _found(ix)


def test_a_failed_text_commit_is_repaired_by_the_next_write(
    index: Index, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = WhooshWriter.commit

    def fails_once(self: WhooshWriter, generation: int) -> None:
        monkeypatch.setattr(WhooshWriter, "commit", real)
        self.cancel()
        raise KeyboardInterrupt  # Ctrl-C right after the store committed

    monkeypatch.setattr(WhooshWriter, "commit", fails_once)
    mem = index.memory("bot")
    with pytest.raises(KeyboardInterrupt):
        mem.add(f"The {WORD} recital is on Friday.", user="priya", room="r")
    assert _stored(index) == 1
    assert index.text_index.generation() != index.store.generation()

    mem.add("Another memory, written after the interrupt.", user="priya", room="r")
    # the text index holds every generation it is marked with: the missed memory too
    assert index.text_index.generation() == index.store.generation()
    assert _found(index) == 1
    mem.add("And one more.", user="priya", room="r")
    assert _found(index) == 1
    index.close()
    notes, hits = _reopened(directory)
    assert notes == [] and hits == 1


def test_a_failed_text_commit_leaves_the_marker_behind_for_the_next_open(
    index: Index, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fails(self: WhooshWriter, generation: int) -> None:
        self.cancel()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(WhooshWriter, "commit", fails)
    # the memory is in the store: the add succeeds (failed, a retry would store it twice)
    added = index.memory("bot").add(f"The {WORD} recital is on Friday.", user="priya", room="r")
    assert added.id and index.memory("bot").get(added.id).text.startswith(f"The {WORD}")
    assert index.text_index.generation() == index.store.generation() - 1
    index.close()
    monkeypatch.undo()
    notes, hits = _reopened(directory)
    assert any("rebuilt" in n for n in notes) and hits == 1


class _InterruptedCommit:
    """A connection whose COMMIT reports Ctrl-C as DuckDB does: after committing
    (``landed``), or before."""

    def __init__(self, con: Any, landed: bool) -> None:
        self._con = con
        self._landed = landed

    def execute(self, sql: str, *args: Any, **kwargs: Any) -> Any:
        if sql == "COMMIT":
            if self._landed:
                self._con.execute(sql, *args, **kwargs)
            raise RuntimeError("Query interrupted")
        return self._con.execute(sql, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)


def _interrupt_next_commit(monkeypatch: pytest.MonkeyPatch, *, landed: bool) -> None:
    real = DuckDBTransaction.__init__

    def init(self: DuckDBTransaction, *args: Any, **kwargs: Any) -> None:
        real(self, *args, **kwargs)
        monkeypatch.setattr(DuckDBTransaction, "__init__", real)  # once
        self.con = _InterruptedCommit(self.con, landed)  # type: ignore[assignment]

    monkeypatch.setattr(DuckDBTransaction, "__init__", init)


@pytest.mark.parametrize("landed", [True, False])
def test_an_interrupted_store_commit_leaves_the_index_writable(
    index: Index, directory: Path, monkeypatch: pytest.MonkeyPatch, landed: bool
) -> None:
    mem = index.memory("bot")
    _interrupt_next_commit(monkeypatch, landed=landed)
    with pytest.raises(KeyboardInterrupt):  # what a library caller gets for Ctrl-C
        mem.add(f"The {WORD} recital is on Friday.", user="priya", room="r")
    assert _stored(index) == int(landed)
    # the generation this Index knows is the one stored
    (last,) = index.sql("SELECT max(generation) FROM commits")[0]
    assert index.store.generation() == int(last)

    for i in range(3):
        mem.add(f"a later memory {i}", user="priya", room="r")
    assert (
        int(index.sql("SELECT count(*) FROM messages WHERE text LIKE 'a later memory%'")[0][0]) == 3
    )
    assert index.text_index.generation() == index.store.generation()
    assert _found(index) == int(landed)
    index.close()
    notes, hits = _reopened(directory)
    assert notes == [] and hits == int(landed)
