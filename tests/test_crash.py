"""The crash suite: ``kill -9`` at random moments and at the worst fixed points (before the
store commits, between the store's commit and the text index's, in the middle of a text
index rebuild), then the index is opened again and checked against a clean ingest of the
same files. Also: extraction workers die with their parent."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from structrag import Index

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")

WORDS = [
    "dog",
    "river",
    "book",
    "garden",
    "bakery",
    "sailing",
    "Lisbon",
    "market",
    "bread",
    "violin",
    "engine",
]


def _chat(path: Path, messages: int, seed: int = 7) -> Path:
    rng = random.Random(seed)
    rows = []
    for i in range(messages):
        speaker = ("Ann", "Bo", "Cy")[i % 3]
        words = " ".join(rng.choice(WORDS) for _ in range(8))
        rows.append(
            {"id": str(i), "speaker": speaker, "text": f"On day {i} {speaker} saw the {words}."}
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _ingest(
    directory: Path, path: Path, *, workers: int = 1, fault: str | None = None
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env.pop("STRUCTRAG_FAULT", None)
    if fault:
        env["STRUCTRAG_FAULT"] = fault
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "structrag", "ingest", str(path)),
            *("--db", str(directory), "-q", "--workers", str(workers)),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )


def _knowledge(index: Index) -> dict[str, Any]:
    """Everything an ingest writes, as sets that do not depend on key numbering."""
    rows = index.sql(
        "SELECT m.conversation, m.message_id, m.text, r.kind, r.span_start, r.span_end, "
        "r.extractor FROM semantic_refs r JOIN messages m USING (mkey)"
    )
    messages = index.sql("SELECT conversation, message_id, text FROM messages")
    return {
        "stats": index.stats()["semantic_refs"],
        "messages": set(messages),
        "refs": set(rows),
        "docs": index.text_index.doc_count(),
        "generation_ok": index.text_index.generation() == index.store.generation(),
    }


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A first file (already in the index before each crash) and a second one (the ingest
    that is killed), and what a clean ingest of both gives."""
    root = tmp_path_factory.mktemp("crash")
    first = _chat(root / "first.jsonl", 30, seed=1)
    second = _chat(root / "second.jsonl", 900, seed=2)
    clean = root / "clean"
    with Index(clean) as index:
        index.ingest([first])
        before = _knowledge(index)
        index.ingest([second])
        after = _knowledge(index)
    return {"root": root, "first": first, "second": second, "before": before, "after": after}


def _fresh(files: dict[str, Any], name: str) -> Path:
    directory: Path = files["root"] / name
    with Index(directory) as index:
        index.ingest([files["first"]])
    return directory


def _state(directory: Path) -> dict[str, Any]:
    with Index(directory) as index:  # opening repairs what a crash left
        found = _knowledge(index)
        leftovers = [
            p.name for p in directory.iterdir() if p.name.startswith((".whoosh-", ".staging"))
        ]
    found["leftovers"] = leftovers
    return found


def _same(found: dict[str, Any], expected: dict[str, Any]) -> bool:
    return all(found[k] == expected[k] for k in ("stats", "messages", "refs", "docs"))


@pytest.mark.parametrize(
    ("fault", "expect"),
    [("store-commit", "before"), ("text-commit", "after"), ("text-adopt", "after")],
)
def test_a_kill_at_commit_leaves_a_consistent_index(
    files: dict[str, Any], fault: str, expect: str
) -> None:
    directory = _fresh(files, f"fault-{fault}")
    proc = _ingest(directory, files["second"], fault=fault)
    assert proc.wait(timeout=300) == -signal.SIGKILL
    found = _state(directory)
    assert found["generation_ok"] and not found["leftovers"]
    assert _same(found, files[expect])
    # and the next ingest finishes the job
    with Index(directory) as index:
        index.ingest([files["second"]])
    assert _same(_state(directory), files["after"])


def test_kills_at_random_moments_leave_the_index_before_or_after(files: dict[str, Any]) -> None:
    rng = random.Random(42)
    outcomes = []
    for trial in range(4):
        directory = _fresh(files, f"random-{trial}")
        proc = _ingest(directory, files["second"], workers=2)
        time.sleep(rng.uniform(0.5, 6.0))
        finished = proc.poll() is not None
        if not finished:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=300)
        found = _state(directory)
        assert found["generation_ok"] and not found["leftovers"], trial
        if _same(found, files["after"]):
            outcomes.append("after")
        else:
            assert _same(found, files["before"]), f"trial {trial}: a partial ingest is visible"
            outcomes.append("before")
        with Index(directory) as index:
            index.ingest([files["second"]])
        assert _same(_state(directory), files["after"]), trial
    assert "before" in outcomes  # at least one kill landed during the ingest


def test_a_killed_rebuild_leaves_nothing_behind(files: dict[str, Any]) -> None:
    directory = _fresh(files, "rebuild")
    env = dict(os.environ, STRUCTRAG_FAULT="rebuild-swap")
    done = subprocess.run(
        [sys.executable, "-m", "structrag", "reindex", "--db", str(directory), "-q"],
        env=env,
        capture_output=True,
        check=False,
    )
    assert done.returncode == -signal.SIGKILL
    assert any(p.name.startswith(".whoosh-new-") for p in directory.iterdir())
    found = _state(directory)
    assert not found["leftovers"] and found["generation_ok"]
    assert _same(found, files["before"])
    assert (directory / "whoosh").stat().st_mode & 0o777 == 0o777 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields: Sequence[str] = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_extraction_workers_die_with_the_ingest(files: dict[str, Any]) -> None:
    """Every process the ingest started (its workers, and whatever started them) ends
    with it."""
    directory = files["root"] / "workers"
    proc = _ingest(directory, files["second"], workers=2)
    deadline = time.monotonic() + 60
    started: list[int] = []
    while time.monotonic() < deadline and proc.poll() is None:
        children = [c for c in _children(proc.pid) if _alive(c)]
        started = children + [g for c in children for g in _children(c) if _alive(g)]
        if len(started) >= 2:
            break
        time.sleep(0.05)
    assert len(started) >= 2, "the ingest never started its workers"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(w) for w in started):
        time.sleep(0.1)
    assert not [w for w in started if _alive(w)], "workers outlived their parent"
