"""``structrag serve`` as a user runs it (a subprocess on a free loopback port): the CLI
going through it, clients that go away, the web explorer in a real headless Chromium,
graceful shutdown, and ``kill -9`` in the middle of writes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from structrag import Index
from structrag.server.discovery import FILENAME, find_server
from tests.serve_helpers import (
    Served,
    conversation_file,
    copy_index,
    http,
    run_cli,
    start_server,
    wait_for_job,
)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def server(example_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    directory = copy_index(example_index, tmp_path_factory.mktemp("e2e") / "index")
    served = start_server(directory)
    yield served
    assert served.stop() == 0, served.log.read_text()
    assert not (directory / FILENAME).exists()
    lines = [json.loads(line) for line in served.log.read_text().splitlines() if "{" in line]
    requests = [line for line in lines if "status" in line]
    assert requests and {"method", "path", "status", "ms", "who"} <= set(requests[0])
    # nothing left hanging at shutdown (a GET /mcp event stream did)
    assert "without completing response" not in served.log.read_text()


def test_the_cli_goes_through_a_running_server(server: Served, tmp_path: Path) -> None:
    db = str(server.directory)
    done = run_cli("ask", "When did Marco adopt Biscuit?", "--db", db, "--budget", "150", "-v")
    assert done.returncode == 0, done.stderr
    assert f"using the server at {server.url}" in done.stderr
    assert "m11" in done.stdout and "tokens" in done.stdout
    printed = json.loads(run_cli("ask", "Who adopted Biscuit?", "--db", db, "--json").stdout)
    _, answered = http("POST", f"{server.url}/v1/ask", {"question": "Who adopted Biscuit?"})
    assert printed["query"] == answered["query"] and printed["context"] == answered["context"]
    stats = json.loads(run_cli("stats", "--db", db, "--json").stdout)
    assert stats["messages"] >= 46
    added = run_cli(
        "memory", "add", "I keep my kayak in Cascais.", "--db", db, "--agent", "cli-bot",
        "--user", "ana", "--room", "dm", "--json",
    )  # fmt: skip
    memory = json.loads(added.stdout)
    found = run_cli("memory", "search", "kayak", "--db", db, "--agent", "cli-bot", "--json")
    assert memory["id"] in {h["id"] for h in json.loads(found.stdout)}
    chat = conversation_file(tmp_path / "through-server.jsonl", "through-server", 6)
    ingested = run_cli("ingest", str(chat), "--db", db, "--json")
    assert ingested.returncode == 0, ingested.stderr
    assert json.loads(ingested.stdout)[0]["messages_added"] == 6
    bad = run_cli("query", "date:2023-13", "--db", db)
    assert bad.returncode == 1 and "       ^" in bad.stderr and "Traceback" not in bad.stderr
    refused = run_cli("reindex", "--db", db)
    assert refused.returncode == 1 and f"a server owns {db}" in refused.stderr
    refused = run_cli("stats", "--db", db, "--no-server")
    assert refused.returncode == 1, refused.stderr
    assert f"the structrag server at {server.url}" in refused.stderr
    assert "leave out --no-server" in refused.stderr


def test_structrag_no_server_is_the_no_server_flag(server: Served) -> None:
    """STRUCTRAG_NO_SERVER=1 does what --no-server does: it does not go through the
    server, and since the server holds the files that is refused at once, naming it."""
    db = str(server.directory)
    for flag, env in (("--no-server", {}), ("-v", {"STRUCTRAG_NO_SERVER": "1"})):
        done = run_cli("query", "entity:Biscuit", "--db", db, flag, env=env)
        assert done.returncode == 1, (flag, done.stderr)
        assert f"the structrag server at {server.url}" in done.stderr, done.stderr
        assert "--no-server cannot open its files" in done.stderr
        assert "using the server" not in done.stderr


def test_ask_batch_prints_the_same_through_a_server_as_without(
    server: Served, example_index: Path, tmp_path: Path
) -> None:
    """A question that fails: the answers to the lines before it are printed, then the
    error names the file and the line, whichever way the command goes."""
    questions = tmp_path / "questions.jsonl"
    questions.write_text(
        '{"question": "When did Marco adopt Biscuit?", "id": "q1"}\n'
        '{"question": "?"}\n'
        '{"question": "Who is Sam?"}\n',
        encoding="utf-8",
    )
    args = ("ask", "--batch", str(questions), "--budget", "80")
    through = run_cli(*args, "--db", str(server.directory), "-v")
    direct = run_cli(*args, "--db", str(example_index), "-v")
    assert "using the server" in through.stderr and "no server owns" in direct.stderr
    for done in (through, direct):
        assert done.returncode == 1, done.stderr
        (answer,) = [json.loads(line) for line in done.stdout.splitlines()]
        assert answer["id"] == "q1" and answer["line"] == 1 and "m11" in answer["message_ids"]
        error = done.stderr.splitlines()[-2]
        assert error == f"error: {questions}, line 2: the question has no words: '?'"


def test_an_agent_whose_name_holds_a_slash_through_the_cli(server: Served) -> None:
    db = str(server.directory)
    added = run_cli(
        "memory", "add", "I keep bees.", "--db", db, "--agent", "team/bot", "--json", "-v"
    )
    assert added.returncode == 0, added.stderr
    assert "using the server" in added.stderr
    recent = run_cli("memory", "recent", "--db", db, "--agent", "team/bot", "--json")
    assert recent.returncode == 0, recent.stderr
    assert [m["id"] for m in json.loads(recent.stdout)] == [json.loads(added.stdout)["id"]]
    status, found = http("GET", f"{server.url}/v1/agents/team%2Fbot/memories")
    assert status == 200 and found[0]["agent"] == "team/bot"


def test_get_mcp_is_405_and_post_mcp_answers(server: Served) -> None:
    """The endpoint is stateless JSON: GET (an event stream) is refused at once, not held
    open for ever; POST goes on working."""
    import urllib.error
    import urllib.request

    from structrag.server.discovery import opener

    request = urllib.request.Request(
        f"{server.url}/mcp", headers={"accept": "text/event-stream"}, method="GET"
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener().open(request, timeout=10)
    assert refused.value.code == 405 and refused.value.headers["allow"] == "POST"
    assert json.loads(refused.value.read())["error"]["code"] == "method_not_allowed"
    call = urllib.request.Request(
        f"{server.url}/mcp",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).encode(),
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            "mcp-protocol-version": "2025-06-18",
        },
        method="POST",
    )
    with opener().open(call, timeout=60) as answer:
        tools = json.loads(answer.read())["result"]["tools"]
    assert "ask" in {t["name"] for t in tools}


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_a_db_that_holds_no_index_is_refused(command: str, tmp_path: Path) -> None:
    """As for `structrag stats`: a mistyped --db is an error, not a new, empty index
    served in its place (--create starts one)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    for db in (tmp_path / "mistyped", empty):
        port = ["--port", "0"] if command == "serve" else []
        done = run_cli(command, "--db", str(db), *port)
        assert done.returncode == 1, done.stderr
        assert f"error: no index at {db}" in done.stderr, done.stderr
        assert "--create" in done.stderr and "Traceback" not in done.stderr
        stats = run_cli("stats", "--db", str(db))
        assert stats.stderr.splitlines()[0] == f"error: no index at {db}"
    assert not (tmp_path / "mistyped").exists() and not any(empty.iterdir())


def _raw(url: str, head: bytes, body: bytes) -> None:
    """Send part of a request and hang up."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80)) as sock:
        sock.sendall(head + body)


def test_a_client_that_hangs_up_mid_upload_leaves_no_trace(server: Served) -> None:
    _, jobs_before = http("GET", f"{server.url}/v1/jobs")
    _, stats_before = http("GET", f"{server.url}/v1/stats")
    boundary = "XyZ"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="files"; '
        f'filename="half.jsonl"\r\nContent-Type: application/octet-stream\r\n\r\n'
        '{"speaker": "Ann", "text": "only half of this upload arrives"}\n'
    ).encode()
    head = (
        f"POST /v1/ingest/upload HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: multipart/form-data; boundary={boundary}\r\n"
        f"Content-Length: {len(body) * 50}\r\n\r\n"
    ).encode()
    _raw(server.url, head, body)
    time.sleep(0.5)
    _, jobs_after = http("GET", f"{server.url}/v1/jobs")
    _, stats_after = http("GET", f"{server.url}/v1/stats")
    assert len(jobs_after) == len(jobs_before)
    assert stats_after["messages"] == stats_before["messages"]


def test_a_job_goes_on_when_its_client_hangs_up(server: Served, tmp_path: Path) -> None:
    chat = conversation_file(tmp_path / "orphan.jsonl", "orphan-job", 40, seed=21)
    body = json.dumps({"paths": [str(chat)]}).encode()
    head = (
        f"POST /v1/ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    _raw(server.url, head, body)  # and never reads the answer
    deadline = time.monotonic() + 60
    job = None
    while job is None and time.monotonic() < deadline:
        _, jobs = http("GET", f"{server.url}/v1/jobs")
        job = next((j for j in jobs if j["inputs"] == [str(chat)]), None)
        time.sleep(0.05)
    assert job is not None
    assert wait_for_job(server.url, job["id"])["state"] == "done"
    _, page = http("GET", f"{server.url}/v1/conversations/orphan-job/messages?limit=100")
    assert page["total"] == 40


def test_the_explorer_in_a_browser(server: Served, tmp_path: Path) -> None:
    if CHROMIUM is None:
        if os.environ.get("STRUCTRAG_REQUIRE_BROWSER"):  # .ci/run installs it
            pytest.fail("no chromium binary, and STRUCTRAG_REQUIRE_BROWSER is set")
        pytest.skip("no chromium binary (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    shots = Path(os.environ.get("STRUCTRAG_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        requests: list[str] = []
        page.on("request", lambda r: requests.append(r.url))
        page.goto(f"{server.url}/")
        page.wait_for_selector("#conversations a")
        assert "friends" in page.locator("#conversations").inner_text()
        page.screenshot(path=str(shots / "explorer-index.png"))

        page.goto(f"{server.url}/#/c/friends?focus=m11")
        page.wait_for_selector("#messages .msg")
        message = page.locator("#m-m11")
        assert "Biscuit" in message.inner_text()
        biscuit = message.locator("mark.k-entity", has_text="Biscuit")
        assert "entity: Biscuit" in (biscuit.get_attribute("title") or "")
        assert message.locator("mark.k-action").count() >= 1
        assert page.locator("#messages mark.k-topic").count() >= 1
        page.screenshot(path=str(shots / "explorer-conversation.png"))

        biscuit.click()
        page.wait_for_selector("#mentions td")
        assert page.locator("h1").inner_text() == "Biscuit"
        assert page.locator("#timeline .bar").count() >= 2
        assert "Marco" in page.locator("#related").inner_text()
        page.screenshot(path=str(shots / "explorer-entity.png"))

        page.goto(f"{server.url}/#/ask")
        page.fill("#question", "When did Marco adopt Biscuit?")
        page.click("#ask-form button")
        page.wait_for_selector("#ask-result pre.context")
        assert "action(Marco, adopt" in page.locator("#ask-result code.query").inner_text()
        assert "PatternMatch" in page.locator("#ask-result pre.plan").inner_text()
        assert "Guess what, I adopted a puppy" in page.locator("pre.context").inner_text()
        used, budget = page.locator(".tokens").inner_text().split(" tokens")[0].split(" / ")
        assert 0 < int(used) <= int(budget) == 1000
        page.screenshot(path=str(shots / "explorer-ask.png"))

        page.goto(f"{server.url}/#/agents")
        page.wait_for_selector("#agents a")
        page.click("#agents a >> text=cli-bot")
        page.wait_for_selector("table.memories")
        assert "kayak" in page.locator("table.memories").inner_text()
        page.click(".tabs button >> text=search")
        page.fill("#memory-query", "Where is the kayak kept?")
        page.select_option("#memory-mode", "hybrid")
        page.click(".form-result >> xpath=.. >> button")
        page.wait_for_selector(".form-result table.memories")
        assert "Cascais" in page.locator(".form-result table.memories").inner_text()
        page.screenshot(path=str(shots / "explorer-memory.png"))
        browser.close()
    assert not errors, errors
    assert all(r.startswith(server.url) for r in requests), "the explorer left the server"
    assert (shots / "explorer-ask.png").stat().st_size > 10_000


def test_serve_on_a_port_in_use_says_so_before_opening_the_index(tmp_path: Path) -> None:
    """The port is bound before the index is opened: one error line with a hint, exit
    status 1, and no index created."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_cli("serve", "--db", str(tmp_path / "index"), "--port", str(port), "--create")
    assert done.returncode == 1, done.stderr
    assert f"error: cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "pass another --port" in done.stderr and "Traceback" not in done.stderr
    assert "open and warm" not in done.stderr
    assert not (tmp_path / "index").exists()
    # Two servers started together: the second's socket is refused at once too (a bound
    # socket not yet listening would let it bind, then fail after the index was warmed).
    from structrag import ConfigError
    from structrag.server.run import listen_on

    first = listen_on("127.0.0.1", 0)
    with first, pytest.raises(ConfigError, match="cannot listen on"):
        listen_on("127.0.0.1", first.getsockname()[1])


def test_sigterm_rolls_back_the_running_ingest(tmp_path: Path) -> None:
    directory = tmp_path / "index"
    chat = conversation_file(tmp_path / "big.jsonl", "big-one", 2000, seed=31)
    server = start_server(directory, "--create")  # a new, empty index
    _, job = http("POST", f"{server.url}/v1/ingest", {"paths": [str(chat)]})
    while not (job["state"] == "running" and job["progress"]["messages"] > 0):
        assert job["state"] in ("queued", "checking", "running"), job
        time.sleep(0.02)
        _, job = http("GET", f"{server.url}/v1/jobs/{job['id']}")
    started = time.monotonic()
    assert server.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 30
    assert not (directory / FILENAME).exists()
    with Index(directory, read_only=True) as index:
        assert index.stats()["messages"] == 0
        assert index.text_index.generation() == index.store.generation()


def test_kill_9_during_writes_keeps_every_acknowledged_write(
    example_index: Path, tmp_path: Path
) -> None:
    directory = copy_index(example_index, tmp_path / "index")
    chat = conversation_file(tmp_path / "during.jsonl", "during-crash", 1500, seed=41)
    server = start_server(directory)
    acknowledged: list[str] = []
    stop = threading.Event()

    def writer() -> None:
        number = 0
        while not stop.is_set():
            number += 1
            try:
                status, memory = http(
                    "POST",
                    f"{server.url}/v1/agents/crash-bot/memories",
                    {"text": f"Note {number}: the ferry to Sintra leaves at {number % 24}h."},
                    timeout=30,
                )
            except OSError:
                return  # the server is gone
            if status == 201:
                acknowledged.append(memory["id"])

    thread = threading.Thread(target=writer)
    thread.start()
    http("POST", f"{server.url}/v1/ingest", {"paths": [str(chat)]})
    deadline = time.monotonic() + 30
    while len(acknowledged) < 8 and time.monotonic() < deadline:
        time.sleep(0.05)
    server.stop(signal.SIGKILL)
    stop.set()
    thread.join(timeout=60)
    assert len(acknowledged) >= 8
    assert find_server(directory) is None  # the file it left is stale
    with Index(directory) as index:  # opening repairs the text index if it was behind
        assert index.text_index.generation() == index.store.generation()
        memory = index.memory("crash-bot")
        for memory_id in acknowledged:
            assert memory.get(memory_id).text.startswith("Note ")
        assert memory.count(table="messages") in (len(acknowledged), len(acknowledged) + 1)
        during = index.sql("SELECT count(*) FROM messages WHERE conversation = 'during-crash'")[0][
            0
        ]
        assert during in (0, 1500)  # the file being ingested: all of it, or none
        hits = memory.search("When does the ferry to Sintra leave?", count=50, mode="text")
        assert set(acknowledged) <= {h.memory.id for h in hits}
