"""Readers and writers in different processes at the same time (DuckDB alone lets one
process write a file or many read it, never both): readers keep working on the last
committed state while an ingest runs, a long reader does not block a writer, a second
writer waits (or says who holds the index), and a reader never sees half of a memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from structrag import Index

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="flock, /proc")


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


def _structrag(*args: str, timeout: float = 10, fault: str | None = None) -> subprocess.Popen[str]:
    env = dict(os.environ, STRUCTRAG_LOCK_TIMEOUT=str(timeout))
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


def _paused_ingest(directory: Path, path: Path, marker: Path) -> subprocess.Popen[str]:
    """An ingest that has extracted and staged everything and waits, before touching the
    store, until ``marker`` is removed."""
    ingest = _structrag(
        "ingest",
        str(path),
        "--db",
        str(directory),
        "--conversation",
        path.stem,
        fault=f"store-commit:wait:{marker}",
    )
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert ingest.poll() is None, ingest.communicate()
        assert time.monotonic() < deadline, "the ingest never got to its commit"
        time.sleep(0.05)
    assert any((directory / ".staging").iterdir())
    return ingest


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    directory = tmp_path / "idx"
    with Index(directory) as index:
        index.ingest([_chat(tmp_path / "first.jsonl", 20)], conversation="first")
    return directory


def test_readers_work_on_the_last_commit_while_an_ingest_runs(seeded: Path, tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    ingest = _paused_ingest(seeded, _chat(tmp_path / "big.jsonl", 300, start=1000), marker)
    try:
        # While it works, another process reads what was committed before it.
        asked = _structrag("ask", "bakery", "--db", str(seeded), "--json")
        out, err = asked.communicate(timeout=60)
        assert asked.returncode == 0, err
        assert ingest.poll() is None, "the ingest ended before the reader was done"
        answer = json.loads(out)
        assert answer["messages"], answer
        assert {m["conversation"] for m in answer["messages"]} == {"first"}
        with Index(seeded, read_only=True) as index:
            assert index.stats()["messages"] == 20
    finally:
        marker.unlink(missing_ok=True)
        out, err = ingest.communicate(timeout=300)
    assert ingest.returncode == 0, err
    with Index(seeded, read_only=True) as index:
        assert index.stats()["messages"] == 320
        assert not (seeded / ".staging").exists()


def test_a_reader_that_stays_open_does_not_block_a_writer(seeded: Path, tmp_path: Path) -> None:
    """As ``ask --batch`` does: one process asks question after question while another
    ingests; the ingest gets its turn, and the reader then sees what it wrote."""
    more = _chat(tmp_path / "more.jsonl", 30, start=500)
    with Index(seeded, read_only=True) as reader:
        before = reader.ask("violin", budget=400)
        assert before.context.messages
        ingest = _structrag("ingest", str(more), "--db", str(seeded), "--conversation", "more")
        deadline = time.monotonic() + 120
        while ingest.poll() is None:
            assert time.monotonic() < deadline
            reader.ask("river", budget=400)  # keeps reading all along
        assert ingest.returncode == 0, ingest.communicate()
        assert reader.stats()["messages"] == 50
        after = reader.ask("violin 15", budget=4000)
        assert "more" in {m.conversation for m in after.context.messages}


def test_a_second_writer_waits_and_says_who_holds_the_index(seeded: Path, tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    ingest = _paused_ingest(seeded, _chat(tmp_path / "big.jsonl", 300, start=1000), marker)
    try:
        impatient = _structrag(
            "memory", "add", "hello", "--db", str(seeded), "--agent", "bot", timeout=0.5
        )
        _, err = impatient.communicate(timeout=60)
        assert impatient.returncode != 0
        assert "another process is writing the index" in err
        assert f"process {ingest.pid}: ingest" in err
        assert "Traceback" not in err
        patient = _structrag(
            "memory", "add", "hello again", "--db", str(seeded), "--agent", "bot", timeout=300
        )
        time.sleep(1.0)
        assert patient.poll() is None, "the second writer did not wait"
        marker.unlink()
        _, err = patient.communicate(timeout=300)
        assert patient.returncode == 0, err
        assert ingest.wait(timeout=300) == 0
    finally:
        marker.unlink(missing_ok=True)
        ingest.communicate(timeout=300)
    with Index(seeded, read_only=True) as index:
        assert index.stats()["messages"] == 321
        assert [m.text for m in index.memory("bot").recent()] == ["hello again"]


WRITER = textwrap.dedent(
    """
    import sys, time
    from structrag import Index
    from pathlib import Path
    with Index(sys.argv[1]) as index:
        mem = index.memory("bot")
        for i in range(int(sys.argv[2])):
            mem.add(f"My sister Ana lives in Porto and I moved to Lisbon {i}.",
                    user="priya", room="dm")
            time.sleep(0.05)
    Path(sys.argv[3]).touch()
    """
)
READER = textwrap.dedent(
    """
    import json, sys, time
    from pathlib import Path
    from structrag import Index
    seen, checks = 0, 0
    done = Path(sys.argv[2])
    with Index(sys.argv[1], read_only=True) as index:
        memory = index.memory("bot")
        memory.search("where does Priya live?", count=3)  # loads the pipeline
        Path(sys.argv[3]).touch()  # ready
        deadline = time.monotonic() + 120
        while not done.exists() and time.monotonic() < deadline:
            with index.store.using():
                rows = index.sql(
                    "SELECT m.mkey, (SELECT count(*) FROM semantic_refs r WHERE r.mkey = m.mkey),"
                    " (SELECT count(*) FROM memory_sources s WHERE s.source_mkey = m.mkey)"
                    " FROM messages m WHERE m.agent = 'bot' AND m.memory_table = 'messages'"
                )
            # a memory comes with its knowledge and the facts read from it, or not at all
            for mkey, refs, facts in rows:
                assert refs > 0 and facts >= 2, (mkey, refs, facts)
            seen = max(seen, len(rows))
            memory.search("where does Priya live?", count=3)
            checks += 1
    print(json.dumps({"seen": seen, "checks": checks}))
    """
)


def test_readers_in_other_processes_never_see_half_a_memory(seeded: Path, tmp_path: Path) -> None:
    done = tmp_path / "done"
    ready = [tmp_path / f"ready-{n}" for n in range(2)]
    readers = [
        subprocess.Popen(
            [sys.executable, "-c", READER, str(seeded), str(done), str(flag)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for flag in ready
    ]
    deadline = time.monotonic() + 120
    while not all(flag.exists() for flag in ready):
        assert all(r.poll() is None for r in readers), [r.communicate() for r in readers]
        assert time.monotonic() < deadline
        time.sleep(0.05)
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(seeded), "30", str(done)],
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    _, err = writer.communicate(timeout=180)
    assert writer.returncode == 0, err
    results = []
    for reader in readers:
        out, err = reader.communicate(timeout=180)
        assert reader.returncode == 0, err
        results.append(json.loads(out))
    # both readers kept reading while the memories went in, and saw some of them
    assert all(r["checks"] >= 5 and r["seen"] > 0 for r in results), results
    with Index(seeded, read_only=True) as index:
        assert index.memory("bot").count(table="messages") == 30
