"""A full disk after the store committed a write: the write is kept and reported as
written (a retry would write it twice), and the text index catches up when the index
next opens. ``STRUCTRAG_FAULT=text-commit:disk-full`` raises the error a full disk gives
where the text index commits; a real full disk (a small tmpfs) fails DuckDB's checkpoint
after a file's commit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from tests.serve_helpers import conversation_file, run_cli

WARNING = "the write is in the store, but the text index could not take it (No space left"


def _count(db: Path, text: str) -> int:
    with Index(db, read_only=True) as index:
        return int(index.sql("SELECT count(*) FROM messages WHERE text = ?", [text])[0][0])


def test_memory_add_on_a_full_disk_after_its_commit_succeeds_once(tmp_path: Path) -> None:
    db = tmp_path / "db"
    first = ["memory", "add", "I live in Porto.", "--db", str(db), "--agent", "bot"]
    assert run_cli(*first, "--user", "priya", "--room", "dm").returncode == 0
    add = ["memory", "add", "I adopted a cat named Miso.", "--db", str(db), "--agent", "bot"]
    done = run_cli(
        *add, "--user", "priya", "--room", "dm", "--json",
        env={"STRUCTRAG_FAULT": "text-commit:disk-full"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr  # it failed, and its retry stored it twice
    assert WARNING in done.stderr, done.stderr
    added = json.loads(done.stdout)["id"]
    assert _count(db, "I adopted a cat named Miso.") == 1
    with Index(db) as index:  # the text index caught up on opening: it is searchable
        hits = index.memory("bot").search("Miso", room="dm", mode="text")
        assert added in [hit.memory.id for hit in hits]


@pytest.mark.parametrize("size", [40, 3], ids=["staged", "grouped"])
def test_ingest_on_a_full_disk_after_the_commit_reports_the_files_written(
    tmp_path: Path, size: int
) -> None:
    """Files of more than 25 messages are written one by one, smaller ones in a group:
    either way each file is reported written, with the warning."""
    chats = [conversation_file(tmp_path / f"c{n}.jsonl", f"full-{n}", size + n) for n in (1, 2)]
    db = tmp_path / "db"
    done = run_cli(
        "ingest", *map(str, chats), "--db", str(db), "--json",
        env={"STRUCTRAG_FAULT": "text-commit:disk-full"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    reports = json.loads(done.stdout)
    assert [r["messages_added"] for r in reports] == [size + 1, size + 2]
    assert all(any(WARNING in w for w in r["warnings"]) for r in reports), reports
    again = run_cli("ingest", *map(str, chats), "--db", str(db), "--json")
    assert [r["skipped"] is not None for r in json.loads(again.stdout)] == [True, True]
    stats = json.loads(run_cli("stats", "--db", str(db), "--json").stdout)
    assert stats["messages"] == 2 * size + 3


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 12 MB tmpfs (root, where mounting is allowed; skipped elsewhere)."""
    mount = tmp_path / f"small-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", str(mount)],
        capture_output=True,
        check=False,
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_checkpoint_a_full_disk_fails_leaves_the_file_written(
    small_disk: Path, tmp_path: Path
) -> None:
    """The file's commit is in DuckDB's log; its checkpoint fails and closes the store. The
    ingest said that file was 'not written (the ingest stopped on it)', and printed no
    reports with --json; it is in the index once there is space."""
    chats = [
        conversation_file(tmp_path / f"chat{n}.jsonl", f"disk-{n}", size)
        for n, size in enumerate((300, 600, 600, 600, 600, 600))
    ]
    db = small_disk / "db"
    done = run_cli("ingest", *map(str, chats), "--db", str(db), "--json", "-q")
    assert done.returncode == 1, done.stderr
    assert "No space left on device" in done.stderr and "Traceback" not in done.stderr
    reports = json.loads(done.stdout)  # the files written, as a finished ingest prints them
    written = [r["path"] for r in reports]
    assert written and written == [str(c) for c in chats[: len(written)]], done.stderr
    for path in written:
        assert f"{path}: written before the error" in done.stderr
    assert not any(f"{p}: not written" in done.stderr for p in written), done.stderr
    copy = tmp_path / "copy"
    shutil.copytree(db, copy)  # where there is space: the log is replayed
    counts = run_cli("sql", "SELECT count(*) AS n FROM messages", "--db", str(copy), "--json")
    assert counts.returncode == 0, counts.stderr
    assert json.loads(counts.stdout)[0]["n"] == sum(r["messages_added"] for r in reports)
