"""Ctrl-C during a memory write: what committed is said (the CLI's lines, ``--json``,
the API's ``WriteInterrupted.committed``), and an interrupt before the commit leaves
nothing. Real DuckDB and Whoosh indexes in ``tmp_path``; the interrupt comes at a named
fault point (``STRUCTRAG_FAULT=<point>:interrupt``, or a real SIGINT while the process
waits at ``<point>:wait:<file>``)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from structrag import Index
from structrag.cli import main

#: Memories in the busy room: one more add makes it due for compaction (over 200).
BUSY = 201


@pytest.fixture(scope="module")
def busy_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An index whose room ``r`` holds :data:`BUSY` memories of agent ``bot``, none
    summarised: the next ``memory add`` to the room compacts it."""
    folder = tmp_path_factory.mktemp("busy")
    source = folder / "r.jsonl"
    source.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"m{i}",
                    "conversation": "r",
                    "speaker": ("priya", "bot")[i % 2],
                    "text": f"Note {i}: the boat trip to Porto is on Friday.",
                }
            )
            + "\n"
            for i in range(BUSY)
        ),
        encoding="utf-8",
    )
    db = folder / "db"
    run_main(["ingest", str(source), "--db", str(db), "--agent", "bot", "-q"])
    return db


def run_main(args: list[str]) -> int:
    """``structrag ARGS`` in this process; its exit status."""
    try:
        main(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def _copy(busy_index: Path, tmp_path: Path) -> Path:
    db = tmp_path / "db"
    shutil.copytree(busy_index, db)
    return db


def _texts(db: Path, text: str) -> int:
    with Index(db, read_only=True) as ix:
        return int(ix.sql("SELECT count(*) FROM messages WHERE text = ?", [text])[0][0])


def _summaries(db: Path) -> int:
    with Index(db, read_only=True) as ix:
        return int(ix.sql("SELECT count(*) FROM room_summaries")[0][0])


def _memory_id(db: Path, text: str) -> str:
    with Index(db, read_only=True) as ix:
        (record,) = [m for m in ix.memory("bot").recent("r", 5) if m.text == text]
        return record.id


def _warm_up(db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A first memory in room ``r`` (the index made), its output read away."""
    args = ["memory", "add", "warm up", "--agent", "bot", "--room", "r", "--db", str(db)]
    assert run_main(args) == 0
    capsys.readouterr()


ADD = ["memory", "add", "I moved to Lisbon.", "--agent", "bot", "--user", "priya", "--room", "r"]


# -- the command line ------------------------------------------------------------------------


def test_add_interrupted_during_its_compaction_says_the_memory_is_stored(
    busy_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = _copy(busy_index, tmp_path)
    monkeypatch.setenv("STRUCTRAG_FAULT", "memory-compact:interrupt")
    code = run_main([*ADD, "--db", str(db)])
    out, err = capsys.readouterr()
    assert code == 130
    assert out == ""
    added = _memory_id(db, "I moved to Lisbon.")
    assert f"added memory {added} (agent 'bot', room 'r', table messages) before the " in err
    assert "the compaction of room 'r' did not finish" in err
    assert "runs again on the next add to the room" in err
    assert "nothing was written" not in err
    assert _texts(db, "I moved to Lisbon.") == 1 and _summaries(db) == 0
    # The compaction was its own transaction: none of it is there, and the next add runs it.
    monkeypatch.delenv("STRUCTRAG_FAULT")
    assert (
        run_main(["memory", "add", "Later.", "--agent", "bot", "--room", "r", "--db", str(db)]) == 0
    )
    assert _summaries(db) == 1


def test_add_whose_compaction_fails_succeeds_once_with_a_warning(
    busy_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An error (not Ctrl-C) in the compaction an add runs after its commit: the add
    stored the memory, so it succeeds (an error would have its retry store it twice), and
    a warning says the compaction runs again; the next add runs it."""
    db = _copy(busy_index, tmp_path)
    monkeypatch.setenv("STRUCTRAG_FAULT", "memory-compact:disk-full")
    code = run_main([*ADD, "--db", str(db), "--json"])
    out, _ = capsys.readouterr()
    assert code == 0
    added = json.loads(out)["id"]
    assert added == _memory_id(db, "I moved to Lisbon.")
    assert _texts(db, "I moved to Lisbon.") == 1 and _summaries(db) == 0
    (warning,) = [r.getMessage() for r in caplog.records if "compaction" in r.getMessage()]
    assert "the memory was added, but the compaction of room 'r' failed" in warning
    assert "No space left on device" in warning and "runs again on the next add" in warning
    monkeypatch.delenv("STRUCTRAG_FAULT")
    assert (
        run_main(["memory", "add", "Later.", "--agent", "bot", "--room", "r", "--db", str(db)]) == 0
    )
    assert _summaries(db) == 1


def test_add_interrupted_with_json_prints_the_record_marked_interrupted(
    busy_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db = _copy(busy_index, tmp_path)
    monkeypatch.setenv("STRUCTRAG_FAULT", "memory-compact:interrupt")
    code = run_main([*ADD, "--db", str(db), "--json"])
    out, err = capsys.readouterr()
    assert code == 130
    data = json.loads(out)
    assert data["interrupted"] is True and data["duplicate"] is False  # as add prints it
    assert data["id"] == _memory_id(db, "I moved to Lisbon.")
    assert (data["room"], data["table"], data["text"]) == ("r", "messages", "I moved to Lisbon.")
    assert data["committed"] == [
        f"added memory {data['id']} (agent 'bot', room 'r', table messages)"
    ]
    assert "compaction of room 'r' did not finish" in data["unfinished"][0]
    assert f"added memory {data['id']}" in err


def test_add_interrupted_after_the_store_commit_names_the_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    _warm_up(db, capsys)
    monkeypatch.setenv("STRUCTRAG_FAULT", "text-commit:interrupt")  # store in, text index not
    code = run_main([*ADD, "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 130
    added = _memory_id(db, "I moved to Lisbon.")
    assert f"added memory {added} (agent 'bot', room 'r', table messages) before the " in err
    assert "text index did not take the change in yet" in err
    assert _texts(db, "I moved to Lisbon.") == 1
    monkeypatch.delenv("STRUCTRAG_FAULT")
    with Index(db) as ix:  # the text index catches up on opening: it is searchable
        hits = ix.memory("bot").search("Lisbon", room="r", mode="text")
        assert [h.memory.id for h in hits] == [added]


def test_add_interrupted_before_the_commit_stores_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    _warm_up(db, capsys)
    monkeypatch.setenv("STRUCTRAG_FAULT", "store-commit:interrupt")
    code = run_main([*ADD, "--db", str(db), "--json"])
    out, err = capsys.readouterr()
    assert code == 130 and out == ""
    assert err.strip().splitlines()[-1] == (
        "interrupted: nothing was written (a memory write commits whole or not at all)"
    )
    assert "before the interruption" not in err
    assert _texts(db, "I moved to Lisbon.") == 0


def test_remove_interrupted_after_its_commit_names_what_it_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    base = ["--agent", "bot", "--room", "r", "--db", str(db)]
    for text in ("one", "two", "three"):
        assert run_main(["memory", "add", text, *base, "--id", text]) == 0
    capsys.readouterr()
    monkeypatch.setenv("STRUCTRAG_FAULT", "text-commit:interrupt")
    assert run_main(["memory", "remove", "one", *base, "--json"]) == 130
    out, err = capsys.readouterr()
    assert "removed memory one (agent 'bot', room 'r', table messages)" in err
    assert json.loads(out)["removed"] == 1 and json.loads(out)["ids"] == ["one"]
    assert _texts(db, "one") == 0
    assert run_main(["memory", "remove", "--all", *base]) == 130
    err = capsys.readouterr().err
    assert "removed 2 memories (agent 'bot', room 'r') before the interruption" in err
    assert _texts(db, "two") == _texts(db, "three") == 0


def test_prune_interrupted_after_its_commit_names_the_pruned_memories(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    with Index(db) as ix:
        mem = ix.memory("bot")
        mem.add("an old note", room="r", id="old", timestamp=_long_ago())
        mem.add("a new note", room="r", id="new")
    monkeypatch.setenv("STRUCTRAG_FAULT", "text-commit:interrupt")
    code = run_main(["memory", "prune", "--apply", "--agent", "bot", "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 130
    assert "pruned 1 memory of agent 'bot': old before the interruption" in err
    assert _texts(db, "an old note") == 0 and _texts(db, "a new note") == 1


def test_an_interrupt_while_the_index_closes_after_the_add_names_the_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "db"
    _warm_up(db, capsys)
    real = Index.close

    def close(self: Index) -> None:
        real(self)
        monkeypatch.setattr(Index, "close", real)
        raise KeyboardInterrupt  # Ctrl-C as the command closes the index

    monkeypatch.setattr(Index, "close", close)
    code = run_main([*ADD, "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 130
    added = _memory_id(db, "I moved to Lisbon.")
    assert f"added memory {added} (agent 'bot', room 'r', table messages) before the " in err


def test_compact_interrupted_after_its_summary_was_written_names_it(
    busy_index: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``memory compact`` writes the summary, then reads its observations: Ctrl-C during
    the read comes after the commit, and the summary is named (not 'nothing written')."""
    from structrag.memory.api import Memory

    db = _copy(busy_index, tmp_path)

    def observations(self: Memory, *args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Memory, "observations", observations)
    args = ["memory", "compact", "--agent", "bot", "--room", "r", "--keep-recent", "10"]
    code = run_main([*args, "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 130
    assert _summaries(db) == 1
    assert "compacted room 'r' of agent 'bot' into summary-" in err, err
    assert "nothing was written" not in err


def test_real_sigint_during_the_compaction_of_an_add(busy_index: Path, tmp_path: Path) -> None:
    """A real Ctrl-C (SIGINT to the process group) while the add's compaction waits at its
    fault point: exit 130, no traceback, the memory named."""
    db = _copy(busy_index, tmp_path)
    marker = tmp_path / "at-compaction"
    env = {**os.environ, "STRUCTRAG_FAULT": f"memory-compact:wait:{marker}"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "structrag", *ADD, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    added = _memory_id(db, "I moved to Lisbon.")
    assert f"added memory {added} (agent 'bot', room 'r', table messages) before the " in err
    assert "the compaction of room 'r' did not finish" in err
    assert _texts(db, "I moved to Lisbon.") == 1 and _summaries(db) == 0


# -- the Python API --------------------------------------------------------------------------


def test_the_api_raises_write_interrupted_carrying_what_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from structrag.errors import WriteInterrupted
    from structrag.memory.api import MemorySettings

    with Index(tmp_path / "db") as ix:
        mem = ix.memory("bot", settings=MemorySettings(compact_after=2, keep_recent=0))
        first = mem.add("one", room="r")
        assert mem.last_committed is not None
        assert mem.last_committed.done == [
            f"added memory {first.id} (agent 'bot', room 'r', table messages)"
        ]
        mem.add("two", room="r")
        monkeypatch.setenv("STRUCTRAG_FAULT", "memory-compact:interrupt")
        with pytest.raises(KeyboardInterrupt) as info:
            mem.add("three", room="r")
        assert isinstance(info.value, WriteInterrupted)
        committed = info.value.committed
        assert committed.data["text"] == "three"
        assert committed.done == [
            f"added memory {committed.data['id']} (agent 'bot', room 'r', table messages)"
        ]
        assert "compaction of room 'r' did not finish" in committed.unfinished[0]
        assert [m.text for m in mem.recent("r", 5)] == ["three", "two", "one"]

        monkeypatch.setenv("STRUCTRAG_FAULT", "store-commit:interrupt")
        with pytest.raises(KeyboardInterrupt) as info:
            mem.add("four", room="r")
        assert not isinstance(info.value, WriteInterrupted)  # nothing committed
        assert [m.text for m in mem.recent("r", 5)] == ["three", "two", "one"]

        # The compaction itself committed, then Ctrl-C before its text index: both named.
        monkeypatch.setenv("STRUCTRAG_FAULT", "text-commit:interrupt")
        with pytest.raises(WriteInterrupted) as raised:
            mem.compact("r")
        assert raised.value.committed.done[0].startswith("compacted room 'r' of agent 'bot'")
        assert raised.value.committed.data["summary"]["covers"] == 3
        monkeypatch.delenv("STRUCTRAG_FAULT")
        assert len(mem.summaries("r")) == 1


def _long_ago() -> datetime:
    return datetime.now() - timedelta(days=400)
