"""A folder of many small files: its small inputs are written in groups, several to a
store transaction (see ``structrag.ingest._Group``), and the index is what ingesting them
one at a time (each staged) gives; each file is whole or absent after a crash or Ctrl-C,
the ingest names the files written, a re-run finishes it, and ingesting the folder again
writes nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest

import structrag.ingest as ingest_module
from structrag import Index, faults
from structrag.ingest import IngestInterrupted

ROOT = Path(__file__).resolve().parent.parent
WORDS = ["dog", "river", "book", "garden", "bakery", "Lisbon", "market", "violin", "Maria"]


def _file(path: Path, messages: int, *, conversation: str | None = None, start: int = 0) -> Path:
    rows = []
    for i in range(start, start + messages):
        speaker = ("Ann", "Bo", "Cy")[i % 3]
        words = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(6))
        row: dict[str, Any] = {
            "id": str(i + 1),
            "speaker": speaker,
            "text": f"On day {i} {speaker} met Maria Lopez at the {words}.",
        }
        if conversation is not None:
            row["conversation"] = conversation
            row["id"] = f"{path.stem}-{i + 1}"
        rows.append(row)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _folder(root: Path) -> list[Path]:
    """Small files of their own conversations, small files of one shared conversation (a
    channel's days), and a larger file (staged, its own write) among them."""
    folder = root / "many"
    folder.mkdir()
    files = [_file(folder / f"a{n:02d}.jsonl", 2 + n % 3) for n in range(6)]
    files += [_file(folder / f"b{n:02d}.jsonl", 3, conversation="general") for n in range(4)]
    files.append(_file(folder / "c-big.jsonl", ingest_module.SMALL_INPUT_MESSAGES + 30))
    files += [_file(folder / f"d{n:02d}.jsonl", 2) for n in range(4)]
    return sorted(files)


#: Columns that hold numbers an ingest gives out (keys) or its times, not what it wrote.
_KEYS = {"mkey", "ref_id", "source_id"}


def _content(directory: Path) -> dict[str, Counter[tuple[Any, ...]]]:
    """Every table's rows, with keys replaced by what they stand for (a message by its
    conversation and id, a ref by its message and place in it, a source by its path) and
    ingest times, the commits and the digests' bytes left out: what does not depend on how
    the writes were grouped."""
    con = duckdb.connect(str(directory / "structrag.duckdb"), read_only=True)
    try:
        messages = {
            int(k): (str(c), str(i))
            for k, c, i in con.execute(
                "SELECT mkey, conversation, message_id FROM messages"
            ).fetchall()
        }
        refs: dict[int, tuple[Any, ...]] = {}
        rows = con.execute("SELECT ref_id, mkey FROM semantic_refs ORDER BY ref_id").fetchall()
        first: dict[int, int] = {}
        for ref_id, mkey in rows:
            first.setdefault(int(mkey), int(ref_id))
            refs[int(ref_id)] = (*messages[int(mkey)], int(ref_id) - first[int(mkey)])
        sources = {
            int(s): str(p) for s, p in con.execute("SELECT source_id, path FROM sources").fetchall()
        }
        columns: dict[str, list[tuple[str, str]]] = {}
        for table, column, data_type in con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = 'main' AND table_name IN (SELECT table_name FROM "
            "information_schema.tables WHERE table_type = 'BASE TABLE') "
            "ORDER BY table_name, ordinal_position"
        ).fetchall():
            columns.setdefault(str(table), []).append((str(column), str(data_type)))
        out: dict[str, Counter[tuple[Any, ...]]] = {}
        for table, cols in columns.items():
            if table in ("commits", "meta"):
                continue  # one commit per group: fewer generations
            names = [c for c, _ in cols]
            kept = [
                n
                for n, t in cols
                if not (t.startswith("TIMESTAMP") and n != "ts")
                and not (table == "digests" and n == "data")
            ]
            found: Counter[tuple[Any, ...]] = Counter()
            for row in con.execute(f"SELECT {', '.join(names)} FROM {table}").fetchall():
                values = dict(zip(names, row, strict=True))
                item = []
                for n in kept:
                    v = values[n]
                    if n == "mkey" and v is not None:
                        v = messages[int(v)]
                    elif n == "ref_id" and v is not None:
                        v = refs[int(v)]
                    elif n == "source_id" and v is not None:
                        v = sources[int(v)]
                    item.append(repr(v))
                found[tuple(item)] += 1
            out[table] = found
        return out
    finally:
        con.close()


def _commits(directory: Path) -> int:
    con = duckdb.connect(str(directory / "structrag.duckdb"), read_only=True)
    try:
        row = con.execute("SELECT count(*) FROM commits").fetchone()
        return int(row[0]) if row else 0
    finally:
        con.close()


def _sources(directory: Path) -> dict[str, int]:
    """Each ingested file's name -> its messages in the index."""
    con = duckdb.connect(str(directory / "structrag.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT s.path, count(m.mkey) FROM sources s LEFT JOIN messages m "
            "USING (source_id) GROUP BY s.path"
        ).fetchall()
        return {Path(p).name: int(n) for p, n in rows}
    finally:
        con.close()


@pytest.fixture(scope="module")
def one_by_one(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The folder, and an index of its files ingested one at a time, each staged."""
    root = tmp_path_factory.mktemp("many")
    files = _folder(root)
    directory = root / "one-by-one"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest_module, "SMALL_INPUT_MESSAGES", 0)  # every file staged
        with Index(directory) as index:
            for path in files:
                index.ingest([path])
            stats = index.stats()
            hits = index.query("bakery", limit=None)
    return {
        "root": root,
        "files": files,
        "directory": directory,
        "content": _content(directory),
        "stats": stats,
        "hits": hits,
        "docs": _doc_count(directory),
    }


def _doc_count(directory: Path) -> int:
    with Index(directory) as index:
        return int(index.text_index.doc_count())


def _hits(result: Any) -> set[tuple[Any, ...]]:
    return {(h.conversation, h.id, round(h.score, 6)) for h in result.messages}


def _stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v for k, v in stats.items() if k not in ("generation", "size_bytes", "path", "index")
    }


def test_a_folder_is_what_its_files_one_at_a_time_give(
    one_by_one: dict[str, Any], tmp_path: Path
) -> None:
    directory = tmp_path / "folder"
    with Index(directory) as index:
        reports = index.ingest([one_by_one["root"] / "many"])
        assert sorted(Path(r.path).name for r in reports) == [p.name for p in one_by_one["files"]]
        assert all(r.skipped is None and r.messages_added for r in reports)
        assert _stats(index.stats()) == _stats(one_by_one["stats"])
        assert _hits(index.query("bakery", limit=None)) == _hits(one_by_one["hits"])
        assert index.text_index.generation() == index.store.generation()
    assert _content(directory) == one_by_one["content"]
    assert _doc_count(directory) == one_by_one["docs"]
    # the small files went in groups: fewer commits than files
    assert _commits(directory) < len(one_by_one["files"])
    assert not (directory / ".staging").exists()
    assert not (directory / "structrag.duckdb.wal").exists()  # checkpointed at the end


def test_ingesting_the_folder_again_writes_nothing(
    one_by_one: dict[str, Any], tmp_path: Path
) -> None:
    directory = tmp_path / "again"
    with Index(directory) as index:
        index.ingest([one_by_one["root"] / "many"])
        generation = index.store.generation()
        reports = index.ingest([one_by_one["root"] / "many"])
        assert all(r.skipped for r in reports)
        assert index.store.generation() == generation
    assert _content(directory) == one_by_one["content"]


def test_a_changed_small_file_is_written_again_alone(
    one_by_one: dict[str, Any], tmp_path: Path
) -> None:
    folder = tmp_path / "many"
    folder.mkdir()
    for path in one_by_one["files"]:
        (folder / path.name).write_bytes(path.read_bytes())
    directory, other = tmp_path / "changed", tmp_path / "other"
    with Index(directory) as index:
        index.ingest([folder])
    with pytest.MonkeyPatch.context() as patch, Index(other) as index:
        patch.setattr(ingest_module, "SMALL_INPUT_MESSAGES", 0)  # one at a time, staged
        for path in sorted(folder.iterdir()):
            index.ingest([path])
    _file(folder / "a01.jsonl", 5)  # two messages more
    _file(folder / "b02.jsonl", 3, conversation="general", start=1)  # a new one, one gone
    with Index(directory) as index:
        reports = {Path(r.path).name: r for r in index.ingest([folder])}
    assert {n for n, r in reports.items() if r.skipped is None} == {"a01.jsonl", "b02.jsonl"}
    assert reports["a01.jsonl"].messages_added == 2
    assert reports["b02.jsonl"].messages_added == 1
    with pytest.MonkeyPatch.context() as patch, Index(other) as index:
        patch.setattr(ingest_module, "SMALL_INPUT_MESSAGES", 0)
        index.ingest([folder / "a01.jsonl"])
        index.ingest([folder / "b02.jsonl"])
    mine, theirs = _content(directory), _content(other)
    # the sources table logs the ingests themselves; the rest is the same
    assert {k: v for k, v in mine.items() if k != "sources"} == {
        k: v for k, v in theirs.items() if k != "sources"
    }


def test_ctrl_c_in_a_group_names_the_files_written(
    one_by_one: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C at the third commit: the files of the commits before are whole and named,
    none of the rest is in the index, and a second ingest finishes it."""
    commits = 0
    point = faults.point

    def fault(name: str) -> None:
        nonlocal commits
        if name == "store-commit":
            commits += 1
            if commits == 3:
                raise KeyboardInterrupt
        point(name)

    monkeypatch.setattr(faults, "point", fault)
    monkeypatch.setattr(ingest_module, "GROUP_MESSAGES", 6)  # several groups
    directory = tmp_path / "interrupted"
    names = [p.name for p in one_by_one["files"]]
    with Index(directory) as index:
        with pytest.raises(IngestInterrupted) as raised:
            index.ingest([one_by_one["root"] / "many"])
        written = [Path(p).name for p in raised.value.written]
        assert written == names[: len(written)]  # the files before, in order
        assert 0 < len(written) < len(names)
        assert index.text_index.generation() == index.store.generation()
    present = _sources(directory)
    assert set(present) == set(written)
    whole = _sources(one_by_one["directory"])
    assert all(present[n] == whole[n] for n in written)
    monkeypatch.setattr(faults, "point", point)
    with Index(directory) as index:
        reports = index.ingest([one_by_one["root"] / "many"])
        assert {Path(r.path).name for r in reports if r.skipped} == set(written)
    assert _content(directory) == one_by_one["content"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="SIGKILL, /proc")
def test_a_crash_in_a_group_leaves_the_files_before_whole(
    one_by_one: dict[str, Any], tmp_path: Path
) -> None:
    """``kill -9`` at the second commit of a folder's ingest (the first went through): the
    files committed are whole, the rest absent, and a re-run gives the full index."""
    directory = tmp_path / "crashed"
    marker = tmp_path / "at-commit"
    env = dict(os.environ, STRUCTRAG_FAULT=f"store-commit:wait:{marker}")
    folder = one_by_one["root"] / "many"
    ingest = subprocess.Popen(
        [sys.executable, "-m", "structrag", "ingest", str(folder), "--db", str(directory), "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=ROOT,
    )
    try:
        for commit in (1, 2):
            deadline = time.monotonic() + 120
            while not marker.exists():
                assert ingest.poll() is None, f"the ingest ended before commit {commit}"
                assert time.monotonic() < deadline, "the ingest never got to its commit"
                time.sleep(0.02)
            if commit == 1:
                marker.unlink()  # let the first commit through
                time.sleep(0.05)
        os.kill(ingest.pid, signal.SIGKILL)
    finally:
        ingest.wait(timeout=60)
    names = [p.name for p in one_by_one["files"]]
    present = _sources(directory)
    assert present, "the first commit went through"
    assert sorted(present) == names[: len(present)]  # the files before, nothing after
    whole = _sources(one_by_one["directory"])
    assert all(present[n] == whole[n] for n in present)
    with Index(directory) as index:
        assert index.text_index.generation() == index.store.generation()
        index.ingest([folder])
    assert _content(directory) == one_by_one["content"]
    assert not (directory / ".staging").exists()
