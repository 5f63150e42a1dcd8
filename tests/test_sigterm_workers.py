"""The CLI turns SIGTERM into an interruption for the commands that write; the
extraction workers it forks must not inherit that: the kernel sends them SIGTERM when the
ingest dies (kill -9, the OOM killer), and it must end them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields.get("PPid", "").strip() == str(pid):
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state  # a zombie has ended


def test_workers_end_when_a_killed_ingest_leaves_them(tmp_path: Path) -> None:
    chat = tmp_path / "big.jsonl"
    said = "Ana told Ben about the trip to Porto and the boat"
    chat.write_text(
        "".join(
            json.dumps({"id": f"m{i}", "speaker": ("Ana", "Ben")[i % 2], "text": f"{said} {i}."})
            + "\n"
            for i in range(20000)
        )
    )
    command = [sys.executable, "-m", "structrag", "ingest", str(chat), "--db", str(tmp_path / "db")]
    proc = subprocess.Popen(
        [*command, "--workers", "2", "-q"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    workers: set[int] = set()
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline and len(workers) < 2:
        workers = _children(proc.pid)
        time.sleep(0.2)
    assert len(workers) >= 2 and proc.poll() is None, workers
    time.sleep(2)  # the workers are extracting
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.2)
    left = [pid for pid in workers if _alive(pid)]
    for pid in left:  # do not leave them behind whatever the outcome
        os.kill(pid, signal.SIGKILL)
    assert left == [], "workers outlived the killed ingest"
