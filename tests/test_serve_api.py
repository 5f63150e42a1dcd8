"""The HTTP API on a real index (FastAPI's TestClient, in this process): the shapes the CLI
prints, errors with their codes and positions, limits, memory, and ingest jobs."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from structrag.cli import cli
from structrag.server.app import create_app
from structrag.server.service import Service
from tests.serve_helpers import conversation_file, copy_index

MAX_BODY = 64 * 1024
LOCAL = "http://127.0.0.1:8765"


@pytest.fixture(scope="module")
def service(example_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    directory = copy_index(example_index, tmp_path_factory.mktemp("api") / "index")
    service = Service(directory, readers=2, warm=False)
    yield service
    service.close()


@pytest.fixture(scope="module")
def client(service: Service) -> Iterator[TestClient]:
    with TestClient(create_app(service, max_body=MAX_BODY), base_url=LOCAL) as client:
        yield client


def cli_json(*args: str) -> Any:
    result = CliRunner().invoke(cli, [*args, "--json", "--no-server"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def without_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_times(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [without_times(v) for v in value]
    return value


def test_health_and_the_openapi_document(client: TestClient) -> None:
    health = client.get("/health").json()
    assert health["status"] == "ok" and len(health["instance"]) == 16
    spec = client.get("/openapi.json").json()
    paths = set(spec["paths"])
    assert {
        "/v1/ask",
        "/v1/ask/batch",
        "/v1/query",
        "/v1/stats",
        "/v1/ingest",
        "/v1/ingest/upload",
        "/v1/jobs/{job_id}",
        "/v1/agents/{agent}/memories",
        "/v1/agents/{agent}/memories/search",
        "/v1/agents/{agent}/context",
    } <= paths
    assert {"AskIn", "AskOut", "MemoryIn", "ErrorOut"} <= set(spec["components"]["schemas"])
    ask = spec["paths"]["/v1/ask"]["post"]
    assert ask["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "ErrorOut"
    )
    # every status the server answers with is in the document (the README's error table)
    assert {"400", "401", "403", "404", "409", "413", "421", "422", "500", "502", "503"} <= set(
        ask["responses"]
    )


@pytest.mark.parametrize(
    ("method", "path", "body", "command"),
    [
        (
            "POST",
            "/v1/ask",
            {"question": "When did Marco adopt Biscuit?", "budget": 150},
            ["ask", "When did Marco adopt Biscuit?", "--budget", "150"],
        ),
        (
            "POST",
            "/v1/query",
            {"expression": "action(Marco, adopt, *) OR entity:Biscuit", "explain": True},
            ["query", "action(Marco, adopt, *) OR entity:Biscuit", "--explain"],
        ),
        ("GET", "/v1/messages/m11", None, ["show", "m11"]),
        ("GET", "/v1/entities?top=5", None, ["entities", "--top", "5"]),
        ("GET", "/v1/topics?top=5", None, ["topics", "--top", "5"]),
        ("GET", "/v1/conversations", None, ["conversations"]),
    ],
)
def test_the_api_answers_what_the_cli_prints(
    client: TestClient,
    example_index: Path,
    method: str,
    path: str,
    body: Any,
    command: list[str],
) -> None:
    answer = client.request(method, path, json=body)
    assert answer.status_code == 200, answer.text
    printed = cli_json(*command, "--db", str(example_index))
    assert without_times(answer.json()) == without_times(printed)


def test_stats_count_what_the_cli_counts(client: TestClient, example_index: Path) -> None:
    served, printed = client.get("/v1/stats").json(), cli_json("stats", "--db", str(example_index))
    keep = ("conversations", "messages", "semantic_refs", "extractors", "sources")
    assert {k: served[k] for k in keep} == {k: printed[k] for k in keep}


def test_a_query_syntax_error_keeps_its_caret(client: TestClient) -> None:
    answer = client.post("/v1/query", json={"expression": "date:2023-13"})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "query_syntax_error"
    assert error["position"] == 5 and error["column"] == 6
    assert error["message"].endswith("date:2023-13\n       ^")
    assert error["snippet"] == "date:2023-13\n     ^"
    assert "YYYY-MM" in error["hint"]


def test_malformed_json_is_422_with_its_position(client: TestClient) -> None:
    body = '{"question": "Who?",\n  "budget": 100,, }'
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(body)
    answer = client.post("/v1/ask", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_json"
    assert error["position"] == parsed.value.pos
    assert f"line 2, column {parsed.value.colno}" in error["message"]


def test_a_body_that_is_not_utf8_says_so(client: TestClient) -> None:
    """A 422 invalid_json, as every body that is not JSON (it was a 400)."""
    body = '{"question": "café?"}'.encode("latin-1")
    answer = client.post("/v1/ask", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_json" and error["position"] == body.index(b"\xe9")
    assert "not UTF-8 text: byte 0xe9" in error["message"] and "UTF-8" in error["hint"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"question": "Who?", "budget": 0}, "budget"),
        ({"question": ""}, "question"),
        ({"question": "Who?", "colour": "red"}, "colour"),
        ({}, "question"),
    ],
)
def test_a_body_that_does_not_fit_its_schema_is_422(
    client: TestClient, body: dict[str, Any], field: str
) -> None:
    answer = client.post("/v1/ask", json=body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert error["code"] == "invalid_request" and error["position"] == field


def test_an_oversized_body_is_413(client: TestClient) -> None:
    big = json.dumps({"question": "x" * (MAX_BODY + 10)})
    answer = client.post("/v1/ask", content=big, headers={"content-type": "application/json"})
    assert answer.status_code == 413
    assert answer.json()["error"]["code"] == "body_too_large"
    assert "uploads to /v1/ingest/upload have a higher limit" in answer.json()["error"]["hint"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit is counted as it comes
        yield b'{"question": "'
        for _ in range(MAX_BODY // 1024 + 2):
            yield b"x" * 1024
        yield b'"}'

    answer = client.post("/v1/ask", content=chunks(), headers={"content-type": "application/json"})
    assert answer.status_code == 413


def test_an_oversized_upload_names_the_upload_limit(service: Service) -> None:
    with TestClient(create_app(service, max_upload=100, mcp=False), base_url=LOCAL) as small:
        answer = small.post("/v1/ingest/upload", files={"files": ("a.jsonl", b"x" * 500)})
    assert answer.status_code == 413
    assert "the server's --max-upload is the limit of uploads" in answer.json()["error"]["hint"]


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/v1/nothing-here", "not_found"),
        ("/v1/messages/no-such-id", "not_found_error"),
        ("/v1/conversations/nope/messages", "not_found_error"),
        # a message the conversation does not hold: not its first page
        ("/v1/conversations/friends/messages?around=zzz&limit=3", "not_found_error"),
        ("/v1/entities/Nobody-At-All", "not_found_error"),
        ("/v1/jobs/job-0", "not_found_error"),
    ],
)
def test_what_does_not_exist_is_a_json_404(client: TestClient, path: str, code: str) -> None:
    answer = client.get(path)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == code


def test_a_batch_answers_in_order_and_names_the_question_that_fails(client: TestClient) -> None:
    good = client.post(
        "/v1/ask/batch",
        json={
            "questions": [
                {"question": "When did Marco adopt Biscuit?", "id": "q1"},
                {"question": "Who teaches the cooking class?", "budget": 80},
            ],
            "budget": 150,
        },
    )
    assert good.status_code == 200
    answers = good.json()["answers"]
    assert [a.get("id") for a in answers] == ["q1", None]
    assert "m11" in answers[0]["message_ids"] and answers[1]["tokens"] <= 80
    bad = client.post(
        "/v1/ask/batch",
        json={"questions": [{"question": "Who?"}, {"question": "Who?", "conversation": "nope"}]},
    )
    assert bad.status_code == 404
    assert bad.json()["error"]["position"] == 1


def test_pages_of_messages_and_an_entity(client: TestClient) -> None:
    page = client.get("/v1/conversations/friends/messages?around=m30&limit=10").json()
    assert page["total"] == 46 and page["offset"] == 20
    assert [m["id"] for m in page["messages"]][9] == "m30"
    spans = [k for m in page["messages"] for k in m["knowledge"] if k["kind"] == "entity"]
    for item in spans:
        message = next(m for m in page["messages"] if item in m["knowledge"])
        start, end = item["span"]
        assert message["text"][start:end] == item["span_text"]
    biscuit = client.get("/v1/entities/biscuit").json()
    assert biscuit["name"] == "Biscuit" and biscuit["mentions"] >= 5
    assert {"m11", "m35"} <= {o["message_id"] for o in biscuit["occurrences"]}
    assert "Marco" in {r["name"] for r in biscuit["related"]}
    assert sum(m["mentions"] for m in biscuit["by_month"]) == biscuit["mentions"]


def test_an_agents_memory_round_trip(client: TestClient) -> None:
    base = "/v1/agents/support-bot"
    added = client.post(
        f"{base}/memories",
        json={"text": "I moved to Lisbon last month.", "user": "priya", "room": "dm-priya"},
    )
    assert added.status_code == 201, added.text
    memory = added.json()
    assert memory["agent"] == "support-bot" and memory["access_count"] == 0
    got = client.get(f"{base}/memories/{memory['id']}").json()
    assert got["text"] == "I moved to Lisbon last month." and got["access_count"] == 1
    recent = client.get(f"{base}/memories", params={"room": "dm-priya"}).json()
    assert [m["id"] for m in recent] == [memory["id"]]
    hits = client.post(
        f"{base}/memories/search", json={"query": "Who moved to Lisbon?", "mode": "hybrid"}
    ).json()
    assert hits[0]["id"] == memory["id"] and hits[0]["mode"] == "hybrid"
    count = client.get(f"{base}/memories/count", params={"room": "dm-priya"}).json()
    assert count["count"] == 1 + len(client.get(f"{base}/facts").json())
    count = client.get(f"{base}/memories/count?room=dm-priya&table=messages").json()
    assert count == {"agent": "support-bot", "room": "dm-priya", "table": "messages", "count": 1}
    window = client.post(
        f"{base}/context", json={"message": "Any cafés near me?", "room": "dm-priya", "budget": 300}
    ).json()
    assert window["tokens"] <= 300 and memory["id"] in window["text"]
    profile = client.get(f"{base}/profile", params={"user": "priya"}).json()
    assert any("Lisbon" in e["text"] for e in profile)
    facts = client.get(f"{base}/facts", params={"user": "priya"}).json()
    assert facts and all(f["sources"] for f in facts)
    client.post(
        f"{base}/memories",
        json={"text": "I live in Berlin now.", "user": "priya", "room": "dm-priya"},
    )
    now = client.get(f"{base}/facts", params={"user": "priya"}).json()
    assert "Lisbon" not in str(now) and "Berlin" in str(now)
    mine = client.post(f"{base}/memories/search", json={"query": "Berlin", "user": "priya"})
    assert mine.status_code == 200 and {h["user"] for h in mine.json()} == {"priya"}
    every = client.get(f"{base}/facts", params={"user": "priya", "history": "true"}).json()
    assert {f["status"] for f in every if "Lisbon" in f["text"]} == {"superseded"}
    dry = client.post(
        f"{base}/memories/prune", json={"older_than": "0d", "keep_if_accessed_more_than": 99}
    ).json()
    assert dry["dry_run"] and memory["id"] in dry["removed"]
    # Reads are counted by the writer shortly after (get, recent, search, context: 4).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with_reads = client.get(f"{base}/memories", params={"room": "dm-priya"}).json()[0]
        if with_reads["access_count"] >= 5:
            break
        time.sleep(0.05)
    assert with_reads["access_count"] >= 5
    assert client.delete(f"{base}/memories/{memory['id']}").json() == {"removed": 1}
    assert client.get(f"{base}/memories/{memory['id']}").status_code == 404
    assert client.delete(f"{base}/memories").status_code == 400  # needs all=true


def wait(client: TestClient, job: dict[str, Any], timeout: float = 120) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while job["state"] in ("queued", "checking", "running") and time.monotonic() < deadline:
        time.sleep(0.05)
        job = client.get(f"/v1/jobs/{job['id']}").json()
    return job


def test_an_upload_is_ingested_by_a_job(client: TestClient, tmp_path: Path) -> None:
    path = conversation_file(tmp_path / "upload-chat.jsonl", "uploaded", 12)
    before = client.get("/v1/stats").json()["messages"]
    with path.open("rb") as handle:
        answer = client.post("/v1/ingest/upload", files={"files": ("upload-chat.jsonl", handle)})
    assert answer.status_code == 202 and answer.headers["location"].startswith("/v1/jobs/")
    job = wait(client, answer.json())
    assert job["state"] == "done", job
    (report,) = job["reports"]
    assert report["path"].endswith("upload-chat.jsonl") and "structrag-upload" not in str(job)
    assert report["messages_added"] == 12
    assert job["progress"]["messages"] == job["progress"]["messages_total"] == 12
    assert client.get("/v1/stats").json()["messages"] == before + 12
    assert "uploaded" in {c["id"] for c in client.get("/v1/conversations").json()}


def test_a_malformed_input_is_refused_before_a_job_is_queued(
    client: TestClient, tmp_path: Path
) -> None:
    """Inputs that fail their check are a 400, as /v1/ingest/estimate answers: no job is
    queued to fail later, and nothing is written."""
    good = conversation_file(tmp_path / "good.jsonl", "good-one", 5)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"speaker": "Ann", "text": "hi"}\n{"speaker": ', encoding="utf-8")
    before = client.get("/v1/stats").json()["messages"]
    jobs = len(client.get("/v1/jobs").json())
    answer = client.post("/v1/ingest", json={"paths": [str(good), str(bad)]})
    assert answer.status_code == 400, answer.json()
    error = answer.json()["error"]
    assert error["code"] == "input_error"
    assert error["position"] == {"path": str(bad), "line": 2, "column": 13}
    # Two that fail: one error naming both, each with its position.
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    answer = client.post("/v1/ingest", json={"paths": [str(good), str(bad), str(empty)]})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["code"] == "input_errors", error
    assert [e["code"] for e in error["errors"]] == ["input_error", "input_error"]
    assert error["errors"][0]["position"] == {"path": str(bad), "line": 2, "column": 13}
    assert str(empty) in error["message"]
    missing = client.post("/v1/ingest", json={"paths": [str(tmp_path / "nope.jsonl")]})
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "input_error"
    assert "nope.jsonl: file not found" in missing.json()["error"]["message"]
    estimate = client.post("/v1/ingest/estimate", json={"paths": [str(good), str(bad)]})
    assert estimate.status_code == 400  # the same answer as the dry run
    assert len(client.get("/v1/jobs").json()) == jobs
    assert client.get("/v1/stats").json()["messages"] == before


def test_a_file_that_changes_while_its_job_waits_is_checked_again(
    client: TestClient, tmp_path: Path
) -> None:
    """The job reuses the check made before it was queued only while no file changed:
    a file broken while the job waited behind another fails it, and nothing of it is
    written."""
    first = conversation_file(tmp_path / "first.jsonl", "waited-for", 600, seed=13)
    kept = conversation_file(tmp_path / "kept.jsonl", "unchanged-one", 4)
    later = conversation_file(tmp_path / "later.jsonl", "changed-later", 4)
    running = client.post("/v1/ingest", json={"paths": [str(first)]}).json()
    queued = client.post("/v1/ingest", json={"paths": [str(kept), str(later)]})
    assert queued.status_code == 202
    later.write_text('{"speaker": "Ann", "text": "hi"}\n{"speaker": ', encoding="utf-8")
    assert client.get(f"/v1/jobs/{running['id']}").json()["state"] != "done"  # it waited
    job = wait(client, queued.json())
    assert job["state"] == "failed" and job["error"]["code"] == "input_error", job
    assert job["error"]["position"] == {"path": str(later), "line": 2, "column": 13}
    assert wait(client, running)["state"] == "done"
    written = {c["id"] for c in client.get("/v1/conversations").json()}
    assert "waited-for" in written
    assert not {"unchanged-one", "changed-later"} & written  # checked whole, again


def test_an_llm_extractor_with_no_llm_configured_is_refused_at_once(
    client: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("STRUCTRAG_LLM_BASE_URL", "STRUCTRAG_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    chat = conversation_file(tmp_path / "llm.jsonl", "llm-one", 2)
    jobs = len(client.get("/v1/jobs").json())
    for extractor in ("llm", "hybrid"):
        answer = client.post("/v1/ingest", json={"paths": [str(chat)], "extractor": extractor})
        assert answer.status_code == 400, answer.json()
        assert answer.json()["error"]["code"] == "config_error"
        assert "no LLM endpoint configured" in answer.json()["error"]["message"]
    assert len(client.get("/v1/jobs").json()) == jobs


def test_an_uploads_errors_name_its_files_not_the_servers_temporary_paths(
    client: TestClient,
) -> None:
    """Each input's error (a list of them) and its position name the file as uploaded."""
    truncated = b'{"id": "a1", "speaker": "Z", "text": "ok"}\n{"id": "a2", "speaker": "Z", "text":'
    answer = client.post(
        "/v1/ingest/upload",
        files=[
            ("files", ("broken.jsonl", truncated)),
            ("files", ("weird.bin", b"hello world this is not a chat")),
        ],
    )
    assert answer.status_code == 400, answer.json()
    error = answer.json()["error"]
    assert error["code"] == "input_errors"
    assert "structrag-upload" not in answer.text
    first, second = error["errors"]
    assert first["message"].startswith("broken.jsonl, line 2")
    assert first["position"] == {"path": "broken.jsonl", "line": 2, "column": 37}
    assert second["message"].startswith("weird.bin: ")
    assert "structrag-upload" not in json.dumps(client.get("/v1/jobs").json())


def test_the_conversation_list_counts_what_its_pages_show(client: TestClient) -> None:
    """A memory room's facts (and a document's fragments) are rows no page shows: the
    list counts the messages a page holds."""
    room = "/v1/agents/counter-bot/memories"
    client.post(room, json={"text": "I moved to Lisbon in May.", "user": "sam", "room": "dm-c"})
    listed = {c["id"]: c for c in client.get("/v1/conversations").json()}
    page = client.get("/v1/conversations/dm-c/messages").json()
    assert listed["dm-c"]["messages"] == page["total"] == 1
    facts = client.get("/v1/agents/counter-bot/facts").json()
    assert facts  # the statement became a fact, in the same conversation's rows


def test_ingest_options_no_input_could_be_read_with_are_refused_at_once(
    client: TestClient, tmp_path: Path
) -> None:
    chat = conversation_file(tmp_path / "ok.jsonl", "ok-opts", 2)
    jobs = len(client.get("/v1/jobs").json())
    answer = client.post("/v1/ingest", json={"paths": [str(chat)], "format": "nope"})
    assert answer.status_code == 400 and "unknown format 'nope'" in answer.text
    with chat.open("rb") as handle:
        answer = client.post(
            "/v1/ingest/upload", files={"files": ("ok.jsonl", handle)}, data={"encoding": "nope"}
        )
    assert answer.status_code == 400 and "unknown encoding 'nope'" in answer.text
    assert len(client.get("/v1/jobs").json()) == jobs  # no job was queued


def test_ids_that_hold_a_slash_are_reached(client: TestClient, tmp_path: Path) -> None:
    """Discord's conversations are ``discord:<server>/<channel>``, a memory's id may be
    the caller's own: a "/" in an id, encoded or not, still reaches it."""
    chat = conversation_file(tmp_path / "slash.jsonl", "guild/chan", 4)
    job = wait(client, client.post("/v1/ingest", json={"paths": [str(chat)]}).json())
    assert job["state"] == "done", job
    for path in ("guild%2Fchan", "guild/chan"):
        page = client.get(f"/v1/conversations/{path}/messages")
        assert page.status_code == 200, page.json()
        assert page.json()["total"] == 4
    first = page.json()["messages"][0]["id"]
    shown = client.get(f"/v1/messages/{first}", params={"conversation": "guild/chan"})
    assert shown.status_code == 200
    made = client.post("/v1/agents/bot/memories", json={"text": "Hi there.", "id": "notes/1"})
    assert made.status_code == 201, made.json()
    assert client.get("/v1/agents/bot/memories/notes%2F1").json()["id"] == "notes/1"
    assert client.delete("/v1/agents/bot/memories/notes/1").json()["removed"]
    assert client.get("/v1/agents/bot/memories/notes%2F1").status_code == 404


def test_a_folder_job_leaves_out_what_exclude_names(client: TestClient, tmp_path: Path) -> None:
    folder = tmp_path / "exports"
    folder.mkdir()
    conversation_file(folder / "chat.jsonl", "folder-chat", 4)
    (folder / "README.md").write_text("# Exports\n\nFrom the phone.\n", encoding="utf-8")
    body: dict[str, Any] = {"paths": [str(folder)]}
    refused = client.post("/v1/ingest", json=body)
    assert refused.status_code == 400
    assert '"exclude": ["README.md"]' in refused.json()["error"]["hint"]
    job = wait(client, client.post("/v1/ingest", json={**body, "exclude": ["*.md"]}).json())
    assert job["state"] == "done", job
    assert job["options"]["exclude"] == ["*.md"]
    assert [r["messages_added"] for r in job["reports"] if r["format"] != "folder"] == [4]
    assert any("README.md (--exclude *.md)" in (r["skipped"] or "") for r in job["reports"])


def test_readers_see_an_ingest_whole_or_not_at_all(client: TestClient, tmp_path: Path) -> None:
    path = conversation_file(tmp_path / "long.jsonl", "long-one", 300, seed=11)
    before = client.get("/v1/stats").json()["messages"]
    job = client.post("/v1/ingest", json={"paths": [str(path)]}).json()
    seen = set()
    while job["state"] in ("queued", "checking", "running"):
        seen.add(client.get("/v1/stats").json()["messages"])
        job = client.get(f"/v1/jobs/{job['id']}").json()
    assert job["state"] == "done"
    seen.add(client.get("/v1/stats").json()["messages"])
    assert seen == {before, before + 300}


def test_a_cancelled_job_rolls_its_file_back(client: TestClient, tmp_path: Path) -> None:
    path = conversation_file(tmp_path / "cancelled.jsonl", "cancelled-one", 600, seed=12)
    before = client.get("/v1/stats").json()["messages"]
    job = client.post("/v1/ingest", json={"paths": [str(path)]}).json()
    while not (job["state"] == "running" and job["progress"]["messages"] > 0):
        assert job["state"] in ("queued", "checking", "running"), job
        time.sleep(0.01)
        job = client.get(f"/v1/jobs/{job['id']}").json()
    client.post(f"/v1/jobs/{job['id']}/cancel")
    job = wait(client, job)
    assert job["state"] == "cancelled" and job["error"]["code"] == "job_cancelled"
    assert client.get("/v1/stats").json()["messages"] == before
    assert "cancelled-one" not in {c["id"] for c in client.get("/v1/conversations").json()}


def test_a_closing_server_takes_no_more_writes(tmp_path: Path) -> None:
    service = Service(tmp_path / "closing", readers=1, warm=False)
    try:
        with TestClient(create_app(service, mcp=False), base_url=LOCAL) as client:
            service.begin_shutdown()
            answer = client.post("/v1/agents/bot/memories", json={"text": "Too late."})
            assert answer.status_code == 503
            assert answer.json()["error"]["code"] == "server_closing"
            assert client.get("/health").json()["status"] == "closing"
            assert client.get("/v1/stats").status_code == 200  # reads go on
    finally:
        service.close()


def test_values_out_of_range_are_client_errors_not_500s(client: TestClient) -> None:
    """Each of these answered 500 with a traceback in the log."""
    pages = client.get("/v1/conversations/friends/messages", params={"offset": 10**20})
    assert pages.status_code == 422 and pages.json()["error"]["code"] == "invalid_request"
    prune = client.post("/v1/agents/bot/memories/prune", json={"older_than": "99999999999d"})
    assert prune.status_code == 400 and "before the calendar starts" in prune.text
    for shares in ('{"history": 1e308, "retrieval": 1e308}', '{"history": Infinity}'):
        window = client.post(
            "/v1/agents/bot/context",
            content=f'{{"message": "x", "shares": {shares}}}',
            headers={"content-type": "application/json"},
        )
        assert window.status_code == 400, shares
        assert window.json()["error"]["code"] == "memory_input_error"


def test_an_open_server_answers_loopback_names_only(client: TestClient) -> None:
    assert client.get("/health", headers={"host": "localhost:8765"}).status_code == 200
    assert client.get("/health", headers={"host": "[::1]:8765"}).status_code == 200
    rebound = client.get("/v1/stats", headers={"host": "evil.example:8765"})
    assert rebound.status_code == 421 and rebound.json()["error"]["code"] == "bad_host"


def test_an_open_server_takes_changes_from_its_own_pages_only(
    client: TestClient, tmp_path: Path
) -> None:
    """A web page elsewhere can post a form to 127.0.0.1 without asking (an upload, a
    memory): the browser's Origin or Sec-Fetch-Site says where it comes from, and the
    server refuses it. Its own explorer and clients that are not browsers go on."""
    chat = conversation_file(tmp_path / "csrf.jsonl", "csrf", 3)
    before = client.get("/v1/stats").json()["messages"]
    forged = (
        {"origin": "https://evil.example"},
        {"origin": "http://127.0.0.1:9999"},  # another port on this machine
        {"origin": "null"},
        {"sec-fetch-site": "cross-site"},
        {"sec-fetch-site": "same-site"},
    )
    for headers in forged:
        with chat.open("rb") as handle:
            answer = client.post(
                "/v1/ingest/upload", files={"files": ("csrf.jsonl", handle)}, headers=headers
            )
        assert answer.status_code == 403, headers
        assert answer.json()["error"]["code"] == "cross_origin"
        memory = client.post("/v1/agents/bot/memories", json={"text": "x"}, headers=headers)
        assert memory.status_code == 403
    assert client.get("/v1/stats").json()["messages"] == before
    assert client.get("/v1/stats", headers=forged[0]).status_code == 200  # reads are read
    own = {"origin": LOCAL, "sec-fetch-site": "same-origin"}
    added = client.post("/v1/agents/bot/memories", json={"text": "From the explorer."}, headers=own)
    assert added.status_code == 201, added.json()


def test_memory_times_with_a_zone_are_taken_as_utc(client: TestClient) -> None:
    """``start``/``end`` with a zone (``Z``, ``+02:00``) are compared with the stored,
    naive UTC times, as a memory's ``timestamp`` is stored: no 500."""
    base = "/v1/agents/zone-bot"
    added = client.post(
        f"{base}/memories",
        json={"text": "I bought oat milk.", "timestamp": "2024-01-02T10:00:00+02:00"},
    )
    assert added.status_code == 201 and added.json()["ts"].startswith("2024-01-02T08:00")
    for start, end, found in (
        ("2023-12-31T00:00:00Z", None, True),
        ("2024-01-02T09:30:00+02:00", None, True),  # 07:30 UTC (not 09:30)
        ("2024-01-02T08:30:00Z", None, False),
        (None, "2024-01-02T07:30:00-01:00", True),  # 08:30 UTC (not 07:30)
        (None, "2024-01-02T07:30:00Z", False),
    ):
        body = {"query": "milk", "mode": "text", "start": start, "end": end}
        hits = client.post(f"{base}/memories/search", json=body)
        assert hits.status_code == 200, hits.json()
        assert bool(hits.json()) == found, (start, end)
        params = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
        recent = client.get(f"{base}/memories", params=params)
        assert recent.status_code == 200, recent.json()
        assert bool(recent.json()) == found, (start, end)


def test_an_agent_whose_name_holds_a_slash_is_reached(service: Service, client: TestClient) -> None:
    """MCP's add_memory takes "team/bot" and /v1/agents lists it: its routes take the
    name percent-encoded, as the CLI sends it, and as one segment (a memory id after it
    may hold a "/" too)."""
    made = service.add_memory("team/bot", "I like green tea.", id="notes/1")  # as MCP does
    assert "team/bot" in {a["agent"] for a in client.get("/v1/agents").json()}
    base = "/v1/agents/team%2Fbot"
    recent = client.get(f"{base}/memories")
    assert recent.status_code == 200, recent.json()
    assert [m["id"] for m in recent.json()] == [made["id"]]
    assert client.get(f"{base}/memories/notes/1").json()["agent"] == "team/bot"
    hits = client.post(f"{base}/memories/search", json={"query": "tea", "mode": "text"}).json()
    assert [h["id"] for h in hits] == ["notes/1"]
    assert client.get(f"{base}/memories/count").json()["count"] >= 1
    added = client.post(f"{base}/memories", json={"text": "I live in Oslo."})
    assert added.status_code == 201 and added.json()["agent"] == "team/bot"
    assert added.json()["duplicate"] is False
    # unique: an exact duplicate is a 200 that says so, not a 201 that drops its fields
    once = {"text": "Door code 4711.", "room": "codes", "unique": True}
    assert client.post(f"{base}/memories", json=once).status_code == 201
    again = client.post(f"{base}/memories", json={**once, "importance": "high"})
    assert again.status_code == 200 and again.json()["duplicate"] is True
    assert again.json()["importance"] == "normal"
    assert client.get("/v1/agents/team/memories").json() == []  # another agent, "team"
    split = client.get("/v1/agents/team/bot/memories")  # unencoded: not found, and why
    assert split.status_code == 404 and "%2F" in split.json()["error"]["hint"]
    percent = client.post("/v1/agents/50%25off/memories", json={"text": "A sale."})
    assert percent.status_code == 201 and percent.json()["agent"] == "50%off"
    assert client.delete(f"{base}/memories/notes%2F1").json() == {"removed": 1}


def test_an_internal_error_is_a_500_with_its_request_id_and_is_logged(
    service: Service,
    client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An error no route answers: a JSON 500 carrying the request id (header and body),
    the traceback logged under it, and the access log with status 500 and its bytes."""

    def broken() -> dict[str, Any]:
        raise TypeError("can't compare offset-naive and offset-aware datetimes")

    monkeypatch.setattr(service, "stats", broken)
    with caplog.at_level(logging.INFO, logger="structrag.server"):
        answer = client.get("/v1/stats")
    assert answer.status_code == 500
    error = answer.json()["error"]
    request_id = answer.headers["x-request-id"]
    assert error["code"] == "internal" and error["request_id"] == request_id
    assert request_id in error["message"] and "offset-naive" not in answer.text
    logged = [r for r in caplog.records if r.name == "structrag.server" and r.exc_info]
    assert logged and request_id in logged[-1].getMessage()
    access = [
        json.loads(r.getMessage())
        for r in caplog.records
        if r.name == "structrag.server.access" and request_id in r.getMessage()
    ]
    assert access and access[0]["status"] == 500
    assert access[0]["bytes"] == len(answer.content)


def test_an_id_two_rooms_have_is_reached_with_its_room(client: TestClient) -> None:
    base = "/v1/agents/id-bot"
    for room, text in (("r1", "hello one"), ("r2", "hello two")):
        added = client.post(f"{base}/memories", json={"text": text, "room": room, "id": "fixed-1"})
        assert added.status_code == 201, added.text
    either = client.get(f"{base}/memories/fixed-1")
    assert either.status_code == 400
    assert "several rooms (r1, r2)" in either.json()["error"]["message"]
    assert client.get(f"{base}/memories/fixed-1", params={"room": "r2"}).json()["text"] == (
        "hello two"
    )
    gone = client.delete(f"{base}/memories/fixed-1", params={"room": "r1"})
    assert gone.json() == {"removed": 1}
    assert client.get(f"{base}/memories/fixed-1").json()["room"] == "r2"


def test_a_goal_is_marked_done_over_http(client: TestClient) -> None:
    base = "/v1/agents/goal-bot"
    goal = client.post(f"{base}/memories", json={"text": "Ship v2", "table": "goals"}).json()
    assert goal["status"] == "open"
    done = client.patch(f"{base}/memories/{goal['id']}", json={"status": "done"})
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "done" and done.json()["text"] == "Ship v2"
    assert client.get(f"{base}/memories/{goal['id']}").json()["status"] == "done"
    bad = client.patch(f"{base}/memories/{goal['id']}", json={"status": "banana"})
    assert bad.status_code == 422
    empty = client.patch(f"{base}/memories/{goal['id']}", json={})
    assert empty.status_code == 400 and "nothing to change" in empty.text
    unknown = client.patch(f"{base}/memories/mem-000000000000", json={"importance": "high"})
    assert unknown.status_code == 404
