"""Shared by the server's tests: a served copy of an index, in this process (FastAPI's
TestClient) or as a real ``structrag serve`` subprocess on a free loopback port."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from structrag.server.discovery import find_server

ROOT = Path(__file__).resolve().parents[1]


def copy_index(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


@dataclass
class Served:
    """A ``structrag serve`` subprocess."""

    directory: Path
    url: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout)


def start_server(directory: Path, *args: str, env: dict[str, str] | None = None) -> Served:
    """``structrag serve --db DIRECTORY --port 0`` (a free port), once it answers."""
    log = directory.parent / f"{directory.name}-serve.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "structrag", "serve", "--db", str(directory), "--port", "0", *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
        env={**os.environ, **(env or {})},
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        info = find_server(directory)
        if info is not None and info.pid == process.pid:
            return Served(directory, info.url, process, log)
        if process.poll() is not None:
            raise AssertionError(f"the server stopped: {log.read_text()}")
        time.sleep(0.1)
    process.kill()
    raise AssertionError("the server did not start in 120 s")


@contextmanager
def served(directory: Path, *args: str) -> Iterator[Served]:
    server = start_server(directory, *args)
    try:
        yield server
    finally:
        if server.process.poll() is None:
            server.stop()


def http(
    method: str, url: str, body: Any = None, *, token: str | None = None, timeout: float = 60
) -> tuple[int, Any]:
    """A JSON request; (status, parsed answer)."""
    import urllib.error
    import urllib.request

    from structrag.server.discovery import opener

    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with opener().open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


def run_cli(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "structrag", *args],
        stdin=subprocess.DEVNULL,  # `structrag mcp` reads its protocol there: EOF ends it
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


def wait_for_job(url: str, job_id: str, *, timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _, job = http("GET", f"{url}/v1/jobs/{job_id}")
        if job["state"] not in ("queued", "checking", "running"):
            return dict(job)
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not end in {timeout} s")


def conversation_file(path: Path, name: str, messages: int, seed: int = 7) -> Path:
    """A synthetic conversation of ``messages`` messages (JSON Lines)."""
    from structrag.bench.serve import synthetic_conversation

    rows = synthetic_conversation(name, messages, seed)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path
