"""Fixes of the server found by a tester: inputs that are not regular files, Ctrl-C during
a request, a server started while an ingest writes, uploads (temporary paths, unknown
fields), option checks, a memory id no route reached, the request log, and the explorer's
pages, counts and errors."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from structrag import Index, MemoryInputError
from structrag.errors import InputError
from structrag.importers import expand_inputs, load_source, scan_source
from structrag.server.app import create_app
from structrag.server.auth import Tokens
from structrag.server.discovery import FILENAME, find_server
from structrag.server.service import Service
from tests.serve_helpers import (
    ROOT,
    conversation_file,
    copy_index,
    http,
    start_server,
)

LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def service(example_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    directory = copy_index(example_index, tmp_path_factory.mktemp("fixes") / "index")
    service = Service(directory, readers=1, warm=False)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[TestClient]:
    with TestClient(create_app(service, mcp=False), base_url=LOCAL) as client:
        yield client


def structrag(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """The CLI, killed after ``timeout`` (an input that is read forever must not hang)."""
    return subprocess.run(
        [sys.executable, "-m", "structrag", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
    )


# -- 1. inputs that are not regular files ------------------------------------------------


def test_a_device_or_a_fifo_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    """/dev/zero was read until memory ran out; a FIFO blocked forever."""
    fifo = tmp_path / "chat.jsonl"
    os.mkfifo(fifo)
    for path in (Path("/dev/null"), fifo):
        for read in (scan_source, load_source):
            with pytest.raises(InputError, match="not a regular file") as caught:
                read(path)
            assert str(path) in str(caught.value)
    done = structrag("ingest", "/dev/zero", str(fifo), "--db", str(tmp_path / "index"))
    assert done.returncode == 1, done.stderr
    assert "/dev/zero: is a character device, not a regular file" in done.stderr
    assert f"{fifo}: is a FIFO (named pipe), not a regular file" in done.stderr
    assert "save what it holds to a regular file" in done.stderr


def test_a_folder_leaves_out_its_fifos_and_links_to_devices(tmp_path: Path) -> None:
    folder = tmp_path / "chats"
    folder.mkdir()
    conversation_file(folder / "ok.jsonl", "ok", 3)
    os.mkfifo(folder / "pipe.jsonl")
    (folder / "zero.jsonl").symlink_to("/dev/zero")
    found = expand_inputs([folder])
    assert found.paths == [folder / "ok.jsonl"]
    ((_, note),) = found.skipped
    assert "pipe.jsonl (a FIFO (named pipe), not a regular file)" in note
    assert "zero.jsonl (a character device, not a regular file)" in note


def test_the_api_refuses_a_device_before_queueing_a_job(client: TestClient) -> None:
    jobs = len(client.get("/v1/jobs").json())
    for route in ("/v1/ingest", "/v1/ingest/estimate"):
        answer = client.post(route, json={"paths": ["/dev/null"]})
        assert answer.status_code == 400, (route, answer.text)
        error = answer.json()["error"]
        assert error["code"] == "input_error"
        assert "/dev/null: is a character device, not a regular file" in error["message"]
    assert len(client.get("/v1/jobs").json()) == jobs


# -- 2. Ctrl-C while a request is answered -------------------------------------------------


def _batch(url: str, questions: int, out: dict[str, Any]) -> None:
    import urllib.error
    import urllib.request

    body = {"questions": [{"question": f"Who adopted Biscuit? ({n})"} for n in range(questions)]}
    request = urllib.request.Request(
        f"{url}/v1/ask/batch",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            out["status"], out["body"] = response.status, response.read()
    except urllib.error.HTTPError as exc:
        out["status"], out["body"] = exc.code, exc.read()
    except Exception as exc:  # the point of the test: there must be none
        out["error"] = repr(exc)


def _ask_during_stop(url: str, process: subprocess.Popen[bytes], questions: int) -> dict[str, Any]:
    """A batch long enough to be in flight when SIGINT comes; what its client got."""
    out: dict[str, Any] = {}
    thread = threading.Thread(target=_batch, args=(url, questions, out))
    thread.start()
    time.sleep(0.5)  # the batch is under way
    assert thread.is_alive(), out
    process.send_signal(signal.SIGINT)
    thread.join(timeout=120)
    return out


def test_ctrl_c_answers_the_request_in_flight_then_exits_130(
    example_index: Path, tmp_path: Path
) -> None:
    """The client got a 200 cut short (invalid JSON) or a plain-text 500 after 10 s."""
    directory = copy_index(example_index, tmp_path / "index")
    server = start_server(directory)
    out = _ask_during_stop(server.url, server.process, 250)
    assert server.process.wait(timeout=120) == 130, server.log.read_text()
    assert "error" not in out, out
    assert out["status"] == 200
    assert len(json.loads(out["body"])["answers"]) == 250
    assert not (directory / FILENAME).exists()
    log = server.log.read_text()
    assert "stopping: answering the requests in flight (up to 60 s)" in log
    assert "timeout graceful shutdown exceeded" not in log


def test_a_request_past_the_grace_gets_a_json_503_not_a_cut_off_answer(
    example_index: Path, tmp_path: Path
) -> None:
    directory = copy_index(example_index, tmp_path / "index")
    held = tmp_path / "held"  # the batch waits at its fault point while this file is there
    server = start_server(
        directory, "--grace", "1", env={"STRUCTRAG_FAULT": f"serve-batch:wait:{held}"}
    )
    out: dict[str, Any] = {}
    thread = threading.Thread(target=_batch, args=(server.url, 3, out))
    thread.start()
    deadline = time.monotonic() + 60
    while not held.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert held.exists(), "the batch did not reach its fault point"
    server.process.send_signal(signal.SIGINT)
    thread.join(timeout=60)
    held.unlink()  # let the request's thread end
    server.process.wait(timeout=120)
    assert "error" not in out, out
    assert out["status"] == 503, out
    error = json.loads(out["body"])["error"]
    assert error["code"] == "server_closing" and "send it again" in error["hint"]
    assert "a write (a memory, an ingest, a removal) may have been done" in error["hint"]


# -- 3. serve while an ingest writes ------------------------------------------------------


def test_serve_waits_for_an_ingest_that_writes_the_index(
    example_index: Path, tmp_path: Path
) -> None:
    """The ingest failed at its end: the server had taken the file ("owned by the
    structrag server ... waited 10 s")."""
    directory = copy_index(example_index, tmp_path / "index")
    chat = conversation_file(tmp_path / "long.jsonl", "long-one", 1500, seed=5)
    ingest = subprocess.Popen(
        [sys.executable, "-m", "structrag", "ingest", str(chat), "--db", str(directory)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "STRUCTRAG_LOCK_TIMEOUT": "3"},
    )
    lock = directory / ".writer.lock"
    deadline = time.monotonic() + 60
    while not (lock.exists() and lock.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert lock.read_text().startswith(f"process {ingest.pid}"), "the ingest did not start"
    server = start_server(directory)  # returns once it serves: after the ingest
    try:
        _out, err = ingest.communicate(timeout=120)
        assert ingest.returncode == 0, err
        assert "waiting for another process to finish writing" in server.log.read_text()
        _, stats = http("GET", f"{server.url}/v1/stats")
        assert stats["messages"] >= 1500
        # While it serves, an ingest on the files is refused at its start, naming it.
        other = conversation_file(tmp_path / "other.jsonl", "other-one", 3)
        refused = subprocess.run(
            [
                sys.executable,
                "-m",
                "structrag",
                "ingest",
                str(other),
                "--db",
                str(directory),
                "--no-server",
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "STRUCTRAG_LOCK_TIMEOUT": "0.5"},
            timeout=120,
        )
        assert refused.returncode == 1
        assert server.url in refused.stderr, refused.stderr  # the server owns the files
    finally:
        assert server.stop() == 0
    assert find_server(directory) is None
    with Index(directory, read_only=True) as index:
        assert "long-one" in {c["id"] for c in index.conversation_summaries()}


# -- 4, 5, 7. uploads and ingest options ----------------------------------------------------


def _upload(
    client: TestClient, name: str, content: bytes, **fields: str
) -> tuple[int, dict[str, Any]]:
    answer = client.post("/v1/ingest/upload", files={"files": (name, content)}, data=fields)
    data = answer.json()
    if answer.status_code == 202:
        deadline = time.monotonic() + 60
        while data["state"] in ("queued", "checking", "running") and time.monotonic() < deadline:
            time.sleep(0.05)
            data = client.get(f"/v1/jobs/{data['id']}").json()
    return answer.status_code, data


def test_an_earlier_uploads_temporary_path_is_never_shown(client: TestClient) -> None:
    first = b'{"id": "u1", "speaker": "Zoe", "text": "I flew to Oslo in March."}\n'
    status, job = _upload(client, "same-name.jsonl", first)
    assert status == 202 and job["state"] == "done", job
    other = b'{"id": "z1", "speaker": "Other", "text": "Totally different chat."}\n'
    status, answer = _upload(client, "same-name.jsonl", other)
    assert status == 400, answer
    text = json.dumps(answer)
    assert "structrag-upload" not in text and "/tmp" not in text
    error = answer["error"]
    assert "upload:same-name.jsonl" in error["message"]
    assert "--conversation" not in error["hint"]
    assert "the form field conversation" in error["hint"]


def test_an_uploads_unknown_field_is_a_422_and_its_options_are_taken(
    client: TestClient,
) -> None:
    line = b'{"id": "f1", "speaker": "Ann", "text": "Field test."}\n'
    answer = client.post(
        "/v1/ingest/upload", files={"files": ("fields.jsonl", line)}, data={"extracter": "llm"}
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and "extracter" in error["message"]
    # the options of a JSON ingest are taken: an LLM extractor is checked as for /v1/ingest
    status, refused = _upload(client, "fields.jsonl", line, extractor="llm")
    assert status == 400 and refused["error"]["code"] == "config_error", refused
    status, job = _upload(client, "fields.jsonl", line, conversation="field-test", workers="1")
    assert status == 202 and job["options"]["conversation"] == "field-test", job


def test_an_embedding_model_the_index_does_not_use_is_refused_at_once(
    client: TestClient, tmp_path: Path
) -> None:
    """The job was queued (202), then failed with config_error."""
    chat = conversation_file(tmp_path / "emb.jsonl", "emb", 3)
    jobs = len(client.get("/v1/jobs").json())
    for route in ("/v1/ingest", "/v1/ingest/estimate"):
        answer = client.post(route, json={"paths": [str(chat)], "embeddings": "minilm"})
        assert answer.status_code == 400, (route, answer.text)
        assert answer.json()["error"]["code"] == "config_error"
        assert "not 'minilm'" in answer.json()["error"]["message"]
    status, refused = _upload(client, "emb.jsonl", chat.read_bytes(), embeddings="minilm")
    assert status == 400 and refused["error"]["code"] == "config_error"
    assert len(client.get("/v1/jobs").json()) == jobs


# -- 6. sizes ------------------------------------------------------------------------------


@pytest.mark.parametrize("option", ["--max-body", "--max-upload"])
@pytest.mark.parametrize("value", ["-5", "0", "0K"])
def test_a_size_of_zero_or_less_is_refused(option: str, value: str, tmp_path: Path) -> None:
    from structrag.cli import cli

    result = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path), option, value])
    assert result.exit_code == 2, result.output
    assert "more than 0 bytes" in result.output


# -- 8. a memory id that is another route ---------------------------------------------------


def test_a_memory_id_that_is_the_count_route_is_refused(client: TestClient, tmp_path: Path) -> None:
    answer = client.post("/v1/agents/count-bot/memories", json={"text": "hi", "id": "count"})
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "memory_input_error"
    assert "count" in answer.json()["error"]["message"]
    counted = client.get("/v1/agents/count-bot/memories/count").json()
    assert counted["count"] == 0
    # the Python API (and so the CLI and MCP) refuses it too
    with Index(tmp_path / "ix") as index, pytest.raises(MemoryInputError, match="'count'"):
        index.memory("bot").add("hi", id="count")


# -- 13. the request log, and a body sent without its Content-Type ----------------------------


def test_json_without_its_content_type_says_which_header_is_missing(client: TestClient) -> None:
    answer = client.post(
        "/v1/ask", content=b'{"question": "Who adopted Biscuit?"}', headers={"content-type": ""}
    )
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "not read as JSON" in error["message"]
    assert "Content-Type: application/json" in error["hint"]


def test_the_request_log_says_who_for_every_request(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    token = "t" * 24
    app = create_app(service, tokens=Tokens.of(token), mcp=False)
    with (
        TestClient(app, base_url=LOCAL) as client,
        caplog.at_level(logging.INFO, logger="structrag.server"),
    ):
        client.get("/health")
        client.get("/static/explorer.js")
        client.get("/v1/stats")  # 401
        client.get("/v1/stats", headers={"Authorization": f"Bearer {token}"})
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name.endswith("access")]
    who = {(line["path"], line["status"]): line["who"] for line in lines}
    assert who[("/health", 200)] == "anonymous"
    assert who[("/static/explorer.js", 200)] == "anonymous"
    assert who[("/v1/stats", 401)] == "anonymous"
    fingerprint = Tokens.of(token).fingerprints[0]
    assert who[("/v1/stats", 200)] == fingerprint


# -- 9-12. the explorer ----------------------------------------------------------------------

EXPLORER = ROOT / "structrag" / "server" / "static" / "explorer.js"


def test_the_explorer_sends_the_budget_as_typed() -> None:
    """parseInt(budget) || 1000 asked with 1000 when 0 was typed."""
    import shutil

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node binary")
    source = EXPLORER.read_text(encoding="utf-8")
    start = source.index("function budgetOf(")
    end = source.index("\n}\n", start) + 3
    script = source[start:end] + (
        'console.log(JSON.stringify(["", " ", "0", "-5", "1.5", "abc", "200"].map(budgetOf)));'
    )
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == [1000, 1000, 0, -5, 1.5, "abc", 200]


def test_the_explorers_pages_errors_and_agent_tokens_in_a_browser(
    example_index: Path, tmp_path: Path
) -> None:
    from tests.test_serve_e2e import CHROMIUM

    if CHROMIUM is None:
        if os.environ.get("STRUCTRAG_REQUIRE_BROWSER"):
            pytest.fail("no chromium binary, and STRUCTRAG_REQUIRE_BROWSER is set")
        pytest.skip("no chromium binary (Debian: apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    admin, bot = "a" * 24, "b" * 24
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {admin: "*", bot: ["support-bot"]}}))
    directory = copy_index(example_index, tmp_path / "index")
    server = start_server(directory, "--token-file", str(tokens))
    errors: list[str] = []
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
            page = browser.new_page()
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"{server.url}/health")
            page.evaluate(f"sessionStorage.setItem('structrag-token', '{admin}')")

            def shown(hash_: str, ready: str | None = None) -> str:
                page.goto(f"{server.url}/#{hash_}")
                page.wait_for_selector(f"main[data-ready='#{ready or hash_}']")
                return str(page.locator("main").inner_text())

            # 9. a page past the end shows the last page (and says so in the address)
            text = shown("/c/friends?page=99", "/c/friends?page=0")
            assert "page 1 of 1" in text and "page 100" not in text
            assert page.locator("#messages .msg").count() > 0
            # 10. an address that does not decode is an error on the page
            assert "is not valid" in shown("/c/100%")
            # 12. a budget of 0 is the API's error, not an answer for 1000 tokens
            text = shown("/ask?q=Who%20adopted%20Biscuit%3F&budget=0")
            page.wait_for_selector("#ask-result .error")
            assert "budget" in page.locator("#ask-result").inner_text()
            # 11. a token for some agents: a clear message, and their memory at hand
            page.evaluate(f"sessionStorage.setItem('structrag-token', '{bot}')")
            page.goto(f"{server.url}/health")  # the page reads its token when it loads
            text = shown("/")
            assert "support-bot" in text and "whole index" in text
            assert "support-bot" in shown("/agents")
            page.fill("#agent-name", "support-bot")
            page.click("#agent-form button")
            page.wait_for_selector("#agent-body :is(table, p)")
            assert "Memory of support-bot" in page.locator("h1").inner_text()
            browser.close()
    finally:
        server.stop()
    assert not errors, errors
