"""Opening an index whose text index is behind its store, or has a rebuild's copy beside
it: a reader that opens while a live writer is between its two commits (store, then text
index) waits for the writer instead of repairing; a real leftover is repaired with a note
that does not guess which write was interrupted; and a killed rebuild's copy is removed by
a read-only open too, but never a live rebuild's."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from structrag import Index
from structrag.errors import IndexStateError

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock")


def _chat(path: Path, messages: int, start: int = 0) -> Path:
    rows = [
        {
            "id": str(start + i),
            "speaker": ("Ann", "Bo")[i % 2],
            "text": f"On day {start + i} we talked about the bakery, the river and violin {i}.",
        }
        for i in range(messages)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _structrag(*args: str, fault: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, STRUCTRAG_LOCK_TIMEOUT="120")
    env.pop("STRUCTRAG_FAULT", None)
    if fault is not None:
        env["STRUCTRAG_FAULT"] = fault
    return subprocess.Popen(
        [sys.executable, "-m", "structrag", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


def _wait_for(marker: Path, proc: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, f"the process never got to {what}"
        time.sleep(0.02)


def _finish(proc: subprocess.Popen[str], marker: Path) -> tuple[int, str]:
    """Let a paused process go (each time it stops at its point again) and wait for it."""
    deadline = time.monotonic() + 300
    while proc.poll() is None and time.monotonic() < deadline:
        marker.unlink(missing_ok=True)
        time.sleep(0.02)
    if proc.poll() is None:
        proc.kill()
    _, err = proc.communicate(timeout=60)
    return proc.returncode, err


def _generations(directory: Path) -> tuple[int, int | None]:
    """The store's and the text index's generations, as the files say (no repair)."""
    from structrag.store.duckdb import DuckDBStore
    from structrag.store.whoosh_index import WhooshTextIndex

    store = DuckDBStore(directory, read_only=True)
    text = WhooshTextIndex(directory, read_only=True)
    try:
        return store.generation(), text.generation()
    finally:
        text.close()
        store.close()


def _copies(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".whoosh-"))


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    directory = tmp_path / "idx"
    with Index(directory) as index:
        index.ingest([_chat(tmp_path / "first.jsonl", 20)], conversation="first")
    return directory


def test_a_reader_waits_for_an_ingest_between_its_two_commits(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``structrag ingest`` holds the writer lock for all its files: a reader that opened
    between one file's store commit and its text index commit used to wait for the lock
    (to repair) and fail; now it waits for the text index's commit and reads."""
    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", "5")
    marker = tmp_path / "between"
    second = _chat(tmp_path / "second.jsonl", 30, start=100)
    third = _chat(tmp_path / "third.jsonl", 60, start=200)
    ingest = _structrag(
        "ingest", str(second), str(third), "--db", str(seeded), "-q",
        fault=f"text-commit:wait:{marker}",
    )  # fmt: skip
    try:
        _wait_for(marker, ingest, "the text index commit")
        store_generation, text_generation = _generations(seeded)
        assert text_generation is not None and text_generation < store_generation
        opened: dict[str, Any] = {}

        def read() -> None:
            try:
                with Index(seeded, read_only=True) as index:
                    opened["notes"] = list(index.notes)
                    opened["docs"] = index.text_index.doc_count()
                    opened["text"] = index.text_index.generation()
                    found = index.ask("violin", budget=4000).context.messages
                    opened["conversations"] = {m.conversation for m in found}
            except BaseException as exc:
                opened["error"] = exc

        reader = threading.Thread(target=read)
        reader.start()
        time.sleep(0.3)
        assert reader.is_alive(), opened  # it waits for the writer's text commit
        marker.unlink()  # the first file's text index commit goes on; the second pauses
        reader.join(timeout=60)
        assert not reader.is_alive()
        assert "error" not in opened, opened["error"]
        assert opened["notes"] == []  # nothing was repaired
        assert opened["text"] == store_generation
        assert opened["docs"] == 50  # the first 20 and the second file's 30
        assert {"first", "second"} <= opened["conversations"]
        assert ingest.poll() is None  # and the writer went on meanwhile
    finally:
        code, err = _finish(ingest, marker)
    assert code == 0, err
    with Index(seeded, read_only=True) as index:
        assert index.notes == []
        assert index.stats()["messages"] == 110
        assert index.text_index.generation() == index.store.generation()


def test_a_reader_says_what_to_do_when_the_writer_stays_between_its_commits(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", "0.5")
    marker = tmp_path / "between"
    ingest = _structrag(
        "ingest", str(_chat(tmp_path / "second.jsonl", 30, start=100)), "--db", str(seeded),
        "-q", fault=f"text-commit:wait:{marker}",
    )  # fmt: skip
    try:
        _wait_for(marker, ingest, "the text index commit")
        started = time.monotonic()
        with pytest.raises(IndexStateError) as caught:
            Index(seeded, read_only=True)
        assert time.monotonic() - started < 5
        message = str(caught.value)
        assert "is behind the store (generation 1 vs 2)" in message
        assert f"while another process writes the index (process {ingest.pid}: ingest)" in message
        assert "waited 0.5 s" in message
        assert "wait for that write to finish" in (caught.value.hint or "")
    finally:
        code, err = _finish(ingest, marker)
    assert code == 0, err
    with Index(seeded, read_only=True) as index:
        assert index.notes == []
        assert index.stats()["messages"] == 50


@pytest.mark.parametrize("read_only", [True, False])
def test_a_write_killed_between_its_commits_is_repaired_with_a_truthful_note(
    seeded: Path, read_only: bool
) -> None:
    """Not only an ingest leaves the text index behind: here a memory write."""
    killed = _structrag(
        "memory", "add", "I moved to Lisbon last spring.", "--agent", "bot", "--db",
        str(seeded), fault="text-commit",
    )  # fmt: skip
    killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL
    assert _generations(seeded) == (2, 1)
    with Index(seeded, read_only=read_only) as index:
        assert len(index.notes) == 1, index.notes
        assert re.fullmatch(
            r"the text index was behind the store \(generation 1 vs 2: a write to the index "
            r"was interrupted\); rebuilt it from the store \(\d+ messages\)",
            index.notes[0],
        ), index.notes
        assert index.text_index.generation() == index.store.generation() == 2
        assert index.read_only is read_only


def test_a_read_only_open_removes_a_killed_rebuilds_copy(seeded: Path) -> None:
    killed = _structrag("reindex", "--db", str(seeded), "-q", fault="rebuild-swap")
    killed.communicate(timeout=300)
    assert killed.returncode == -signal.SIGKILL
    assert [c for c in _copies(seeded) if c.startswith(".whoosh-new-")]
    with Index(seeded, read_only=True) as index:
        assert index.notes == []
        assert index.stats()["messages"] == 20
    assert _copies(seeded) == []
    assert not any(p.name.startswith(".whoosh-") for p in seeded.iterdir())


def test_no_open_removes_a_live_rebuilds_copy(seeded: Path, tmp_path: Path) -> None:
    """A reindex at work holds the writer lock: neither a reader nor a writer that opens
    meanwhile takes its copy away (a writer used to, and the reindex then failed)."""
    marker = tmp_path / "swap"
    reindex = _structrag("reindex", "--db", str(seeded), "-q", fault=f"rebuild-swap:wait:{marker}")
    try:
        _wait_for(marker, reindex, "the swap")
        copies = _copies(seeded)
        assert copies
        with Index(seeded, read_only=True) as index:
            assert index.notes == []
        assert _copies(seeded) == copies
        with Index(seeded) as index:
            assert index.notes == []
        assert _copies(seeded) == copies
    finally:
        code, err = _finish(reindex, marker)
    assert code == 0, err
    assert _copies(seeded) == []
    with Index(seeded, read_only=True) as index:
        assert index.notes == []
        assert index.stats()["messages"] == 20


def test_a_reader_without_leftovers_takes_no_lock(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The common open (nothing to repair, nothing left over) does not touch the lock, so
    it works while a writer holds it, at once."""
    from structrag.store.workspace import WriterLock

    monkeypatch.setenv("STRUCTRAG_LOCK_TIMEOUT", "30")
    held = WriterLock(seeded)
    held.acquire("test")
    try:
        started = time.monotonic()
        with Index(seeded, read_only=True) as index:
            assert index.notes == []
        assert time.monotonic() - started < 15  # not the lock's 30 s wait
        assert held.busy() is None  # this object holds it
        assert WriterLock(seeded).busy() == f"process {os.getpid()}: test"
        assert not WriterLock(seeded).try_acquire("other")
    finally:
        held.release()
    assert WriterLock(seeded).busy() is None
