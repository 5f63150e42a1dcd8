"""``structrag bench serve``: the server under load, on loopback.

It builds an index of synthetic conversations, starts ``structrag serve`` on a free
loopback port (a subprocess, as a user runs it), and runs ``clients`` client threads for
``seconds`` seconds, each on its own keep-alive connection, mixing ``ask`` (half of the
requests), memory ``add`` and memory ``search`` (a quarter each), while a background
ingest job feeds the server more synthetic conversations, file after file, until the
end. It reports requests per second, latency percentiles and errors per endpoint, the
ingest's progress, and the server's peak resident memory; then the CLI's ``ask``
latency through the server and, once the server has stopped, opening the files.

Everything is synthetic (no dataset needed) and stays on 127.0.0.1. Writes
``OUT/serve.json`` and ``OUT/serve.md``.
"""

from __future__ import annotations

import http.client
import json
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from structrag.bench.machine import environment
from structrag.bench.perf import percentiles

#: The targets the issue set: no errors, and ask's p95 at most this, under the load.
TARGET_ASK_P95_MS = 100.0
QUESTIONS = (
    "When did {a} adopt {pet}?",
    "Where did {a} go sailing?",
    "What did {a} bake for {b}?",
    "Who fixed the {thing}?",
    "What did {a} tell {b} about {place}?",
    "When is the {event}?",
)

_PEOPLE = ("Ana", "Bruno", "Chen", "Dara", "Elif", "Femi", "Goran", "Hana", "Ivo", "Jae")
_PLACES = ("Lisbon", "Porto", "Sintra", "Cascais", "Braga", "Faro", "Evora", "Coimbra")
_PETS = ("Biscuit", "Pepper", "Miso", "Tofu", "Nala", "Ziggy")
_THINGS = ("bike", "sailboat", "oven", "roof", "guitar", "laptop", "kayak", "camera")
_EVENTS = ("half marathon", "cooking class", "book club", "farmers market", "regatta")
_FOODS = ("sourdough", "rye bread", "pastel de nata", "lemon cake", "focaccia")
_LINES = (
    "I adopted a puppy named {pet} last weekend in {place}.",
    "We went sailing near {place} on Saturday, the wind was perfect.",
    "I baked {food} for {b} this morning.",
    "My neighbour fixed the {thing} yesterday, finally.",
    "Did you sign up for the {event} in {place}?",
    "{pet} chased every pigeon in the park.",
    "I am repainting the {thing} before the {event}.",
    "{b} told me the {event} moved to {place}.",
    "Can you send me the photos from {place}?",
    "The {thing} broke again, I need a new one before June.",
)


def _fill(template: str, rng: random.Random) -> str:
    a, b = rng.sample(_PEOPLE, 2)
    return template.format(
        a=a,
        b=b,
        pet=rng.choice(_PETS),
        place=rng.choice(_PLACES),
        thing=rng.choice(_THINGS),
        event=rng.choice(_EVENTS),
        food=rng.choice(_FOODS),
    )


def synthetic_conversation(name: str, messages: int, seed: int) -> list[dict[str, Any]]:
    """One conversation between two people, in the generic JSON Lines message schema."""
    rng = random.Random(seed)
    a, b = rng.sample(_PEOPLE, 2)
    rows = []
    for i in range(messages):
        speaker, other = (a, b) if i % 2 == 0 else (b, a)
        day, minute = divmod(i * 7 + seed % 60, 24 * 60)
        rows.append(
            {
                "id": f"{name}-{i}",
                "conversation": name,
                "speaker": speaker,
                "recipients": [other],
                "timestamp": f"2024-{1 + seed % 12:02d}-{1 + day % 28:02d}T"
                f"{minute // 60:02d}:{minute % 60:02d}:00",
                "text": _fill(rng.choice(_LINES), rng),
            }
        )
    return rows


def write_conversations(
    folder: Path, prefix: str, count: int, messages: int, seed: int
) -> list[Path]:
    """``count`` synthetic conversations, one JSON Lines file each."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for n in range(count):
        path = folder / f"{prefix}-{n:04d}.jsonl"
        rows = synthetic_conversation(f"{prefix}-{n}", messages, seed + n)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths


@dataclass
class Tally:
    """Latencies and errors of one endpoint."""

    seconds: list[float] = field(default_factory=list)
    errors: int = 0
    examples: list[str] = field(default_factory=list)

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.examples) < 5:
            self.examples.append(what[:300])


class Client:
    """One keep-alive HTTP connection to the server. A connection the server closed
    while it sat idle (its keep-alive timeout) is opened again and the request sent once
    more, as HTTP client pools do: the server never saw it."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.used = False

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (1, 2):
            try:
                self.conn.request(method, path, body=data, headers=headers)
                response = self.conn.getresponse()
                raw = response.read()
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                stale, self.used = self.used, False
                self._reconnect()
                if stale and attempt == 1:
                    continue
                raise
            except (OSError, http.client.HTTPException):
                self._reconnect()
                raise
            self.used = True
            return response.status, json.loads(raw) if raw else None
        raise AssertionError("unreachable")

    def _reconnect(self) -> None:
        self.conn.close()
        self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)


#: The share of each kind of request (``--mix``).
MIX = {"ask": 0.5, "memory add": 0.25, "memory search": 0.25}


def _client_loop(
    number: int,
    port: int,
    deadline: float,
    tallies: dict[str, Tally],
    lock: threading.Lock,
    mix: dict[str, float],
    think: float,
) -> None:
    rng = random.Random(number)
    client = Client(port)
    agent = f"agent-{number % 4}"
    room = f"room-{number}"
    user = _PEOPLE[number % len(_PEOPLE)]
    total = sum(mix.values())
    ask_share = mix.get("ask", 0.0) / total
    add_share = ask_share + mix.get("memory add", 0.0) / total
    while time.monotonic() < deadline:
        pick = rng.random()
        if pick < ask_share:
            name = "ask"
            call: tuple[str, str, dict[str, Any]] = (
                "POST",
                "/v1/ask",
                {"question": _fill(rng.choice(QUESTIONS), rng), "budget": 1000},
            )
        elif pick < add_share:
            name = "memory add"
            call = (
                "POST",
                f"/v1/agents/{agent}/memories",
                {"text": _fill(rng.choice(_LINES), rng), "user": user, "room": room},
            )
        else:
            name = "memory search"
            call = (
                "POST",
                f"/v1/agents/{agent}/memories/search",
                {"query": _fill(rng.choice(QUESTIONS), rng), "count": 10},
            )
        started = time.perf_counter()
        try:
            status, data = client.call(*call)
            ok = 200 <= status < 300
            what = "" if ok else f"HTTP {status}: {data}"
        except (OSError, http.client.HTTPException, ValueError) as exc:
            ok, what = False, f"{type(exc).__name__}: {exc}"
        elapsed = time.perf_counter() - started
        with lock:
            if ok:
                tallies[name].seconds.append(elapsed)
            else:
                tallies[name].error(what)
        if think:  # an agent between two calls (an LLM turn, say): random, ``think`` on average
            time.sleep(rng.expovariate(1.0 / think))


def _peak_rss_mb(pid: int) -> float | None:
    """The peak resident memory of a running process (Linux ``VmHWM``), in MB."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(r"VmHWM:\s+(\d+) kB", text)
    return round(int(match.group(1)) * 1024 / 1e6, 1) if match else None


def start_server(db: Path, out: Path, readers: int) -> tuple[subprocess.Popen[bytes], int]:
    """``structrag serve`` on a free loopback port; returns the process and the port."""
    from structrag.server.discovery import find_server

    log = (out / "serve-stderr.log").open("wb")
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "structrag",
            "serve",
            "--db",
            str(db),
            "--port",
            "0",
            "--readers",
            str(readers),
            "--log",
            str(out / "serve-requests.log"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=log,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        info = find_server(db)
        if info is not None:
            return process, int(info.url.rsplit(":", 1)[1])
        if process.poll() is not None:
            raise RuntimeError(f"the server stopped; see {out / 'serve-stderr.log'}")
        time.sleep(0.2)
    process.kill()
    raise RuntimeError("the server did not start within 120 s")


def stop_server(process: subprocess.Popen[bytes]) -> int:
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _cli_ask(db: Path, runs: int, question: str) -> list[float]:
    """Seconds of ``structrag ask --json`` as a whole process, ``runs`` times."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "structrag", "ask", question, "--db", str(db), "--json"],
            check=True,
            capture_output=True,
        )
        times.append(time.perf_counter() - started)
    return times


def _ingest_driver(
    port: int, files: list[Path], deadline: float, state: dict[str, Any], workers: int
) -> None:
    """Ingest jobs of a few files each, one after another, until the deadline."""
    client = Client(port)
    batch = 5
    position = 0
    while time.monotonic() < deadline and position < len(files):
        chunk = [str(p) for p in files[position : position + batch]]
        position += batch
        status, job = client.call("POST", "/v1/ingest", {"paths": chunk, "workers": workers})
        if status != 202:
            state["errors"].append(f"HTTP {status}: {job}")
            return
        while job["state"] in ("queued", "checking", "running"):
            time.sleep(0.25)
            _, job = client.call("GET", f"/v1/jobs/{job['id']}")
        state["jobs"] += 1
        if job["state"] != "done":
            state["errors"].append(f"job {job['id']} {job['state']}: {job['error']}")
            continue
        state["files"] += len(job["reports"])
        state["messages"] += sum(r.get("messages_added", 0) for r in job["reports"])


def run_serve_bench(
    out: Path,
    *,
    seconds: float = 60.0,
    clients: int = 16,
    readers: int = 2,
    base_conversations: int = 10,
    cli_runs: int = 5,
    mix: dict[str, float] | None = None,
    ingest_files: bool = True,
    ingest_workers: int = 2,
    think: float = 0.0,
    command: str | None = None,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Run the benchmark (see the module docstring); returns and writes the results."""
    from structrag.index import ingest_into

    out.mkdir(parents=True, exist_ok=True)
    db = out / "index"
    data = out / "data"
    for made in (db, data):  # this benchmark's own, from an earlier run
        shutil.rmtree(made, ignore_errors=True)
    base = write_conversations(data / "base", "base", base_conversations, 50, seed=1)
    feed = write_conversations(data / "feed", "feed", 400, 40, seed=1000)
    log(f"indexing {len(base)} synthetic conversations into {db}")
    ingest_into(db, base)
    process, port = start_server(db, out, readers)
    log(f"server on 127.0.0.1:{port} (pid {process.pid}); {clients} clients for {seconds:g} s")
    tallies = {name: Tally() for name in ("ask", "memory add", "memory search")}
    lock = threading.Lock()
    ingest: dict[str, Any] = {"jobs": 0, "files": 0, "messages": 0, "errors": []}
    try:
        started = time.monotonic()
        deadline = started + seconds
        mix = mix or MIX
        threads = [
            threading.Thread(
                target=_client_loop, args=(n, port, deadline, tallies, lock, mix, think)
            )
            for n in range(clients)
        ]
        if ingest_files:
            threads.append(
                threading.Thread(
                    target=_ingest_driver, args=(port, feed, deadline, ingest, ingest_workers)
                )
            )
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.monotonic() - started
        rss = _peak_rss_mb(process.pid)
        through_server = _cli_ask(db, cli_runs, "When did Ana adopt Biscuit?")
    finally:
        code = stop_server(process)
    local = _cli_ask(db, (cli_runs + 1) // 2, "When did Ana adopt Biscuit?")
    total = sum(len(t.seconds) + t.errors for t in tallies.values())
    endpoints = {
        name: {
            **percentiles(t.seconds),
            "errors": t.errors,
            "error_examples": t.examples,
            "requests_per_s": round((len(t.seconds) + t.errors) / elapsed, 1),
        }
        for name, t in tallies.items()
    }
    errors = sum(t.errors for t in tallies.values()) + len(ingest["errors"])
    ask_p95 = percentiles(tallies["ask"].seconds).get("p95", float("inf"))
    result = {
        "environment": environment(command),
        "settings": {
            "clients": clients,
            "seconds": seconds,
            "readers": readers,
            "mix": mix,
            "background_ingest": ingest_files,
            "ingest_workers": ingest_workers,
            "think_s": think,
            "ask_budget": 1000,
            "base_index_messages": base_conversations * 50,
        },
        "elapsed_s": round(elapsed, 2),
        "requests": total,
        "requests_per_s": round(total / elapsed, 1),
        "errors": errors,
        "endpoints": endpoints,
        "ingest": {
            **{k: v for k, v in ingest.items() if k != "errors"},
            "errors": ingest["errors"][:5],
            "messages_per_s": round(ingest["messages"] / elapsed, 1),
        },
        "server_peak_rss_mb": rss,
        "server_exit_code": code,
        "cli_ask_s": {
            "through_server": percentiles(through_server),
            "opening_the_files": percentiles(local),
        },
        "targets": {
            "errors": 0,
            "ask_p95_ms": TARGET_ASK_P95_MS,
            "met": errors == 0 and ask_p95 <= TARGET_ASK_P95_MS,
        },
    }
    (out / "serve.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    (out / "serve.md").write_text(markdown(result), encoding="utf-8")
    return result


def markdown(result: dict[str, Any]) -> str:
    env, settings = result["environment"], result["settings"]
    mix = {k: v for k, v in settings["mix"].items() if v}
    total = sum(mix.values())
    machine = env["machine"]
    lines = [
        "# structrag serve under load",
        "",
        f"{env['date']}, {machine['cores']} cores, {machine['ram_gb']} GB, Python "
        f"{machine['python']}, commit {env['git_commit']}; `{env['command']}`",
        "",
        f"{settings['clients']} clients for {settings['seconds']:g} s on loopback, mixing "
        + ", ".join(f"{name} ({share / total:.0%})" for name, share in mix.items())
        + " (asks with a budget of 1,000 tokens), "
        + (
            f"while a background ingest ran ({settings['ingest_workers']} extraction processes); "
            if settings["background_ingest"]
            else "with no background ingest; "
        )
        + f"{settings['readers']} reader threads; "
        + (
            f"each client paused {settings['think_s']:g} s on average between calls; "
            if settings["think_s"]
            else "each client sent its next request as soon as it had an answer; "
        )
        + f"the index started with {settings['base_index_messages']} messages.",
        "",
        "| endpoint | requests | req/s | p50 ms | p95 ms | p99 ms | errors |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for name, e in result["endpoints"].items():
        lines.append(
            f"| {name} | {e['n']} | {e['requests_per_s']} | {e.get('p50', '-')} | "
            f"{e.get('p95', '-')} | {e.get('p99', '-')} | {e['errors']} |"
        )
    ingest = result["ingest"]
    cli = result["cli_ask_s"]
    met = "met" if result["targets"]["met"] else "**missed**"
    lines += [
        "",
        f"All: {result['requests']} requests, {result['requests_per_s']} requests/s, "
        f"{result['errors']} errors. Target (0 errors, ask p95 <= "
        f"{result['targets']['ask_p95_ms']:g} ms): {met}.",
        "",
        f"Background ingest: {ingest['jobs']} jobs, {ingest['files']} files, "
        f"{ingest['messages']} messages ({ingest['messages_per_s']} messages/s).",
        "",
        f"Server peak RSS: {result['server_peak_rss_mb']} MB.",
        "",
        f"CLI `structrag ask --json` (the whole process): through the server p50 "
        f"{cli['through_server'].get('p50', '-')} ms; opening the files p50 "
        f"{cli['opening_the_files'].get('p50', '-')} ms.",
        "",
    ]
    return "\n".join(lines)
