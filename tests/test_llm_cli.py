"""The LLM options of ``structrag ingest``: environment and flags, dry run, reports,
``--retry-failed`` and ``stats --json``, against the local OpenAI-protocol server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag.cli import cli, main
from tests.llm_helpers import CHAT, clear_llm_env, write_chat
from tests.openai_server import FakeOpenAIServer, Reply, serve


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAIServer]:
    clear_llm_env(monkeypatch)
    with serve() as s:
        monkeypatch.setenv("STRUCTRAG_LLM_BASE_URL", s.url)
        monkeypatch.setenv("STRUCTRAG_LLM_MODEL", "test-model")
        yield s


def invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_dry_run_ingest_again_and_stats(tmp_path: Path, server: FakeOpenAIServer) -> None:
    chat = str(write_chat(tmp_path / "chat.jsonl"))
    db = tmp_path / "db"
    args = ["ingest", chat, "--db", str(db), "--extractor", "llm"]
    estimate = json.loads(invoke(*args, "--dry-run", "--json"))
    assert estimate["llm"]["calls"] == len(CHAT) and estimate["llm"]["input_tokens"] > 0
    assert "nothing was sent" in invoke(*args, "--dry-run")
    assert server.calls == 0 and not db.exists()

    (report,) = json.loads(invoke(*args, "--json"))
    assert report["messages_added"] == len(CHAT) and report["messages_failed"] == 0
    assert report["llm"]["calls"] == len(CHAT) and report["llm"]["input_tokens"] > 0
    assert server.calls == len(CHAT)

    output = invoke(*args, "--force")
    assert "llm: 0 calls" in output and server.calls == len(CHAT)
    estimate = json.loads(invoke(*args, "--dry-run", "--json", "--force"))
    assert estimate["llm"]["calls"] == 0 and server.calls == len(CHAT)

    stats = json.loads(invoke("stats", "--db", str(db), "--json"))
    assert stats["extractors"]["llm"]["extracted"] == len(CHAT)
    assert stats["extractors"]["llm"]["failed"] == 0
    assert stats["extractors"]["llm"]["refs"] > 0


def test_failures_are_reported_and_retried(tmp_path: Path, server: FakeOpenAIServer) -> None:
    chat = str(write_chat(tmp_path / "chat.jsonl"))
    db = str(tmp_path / "db")
    server.on("Ghibli", Reply(status=500))
    result = CliRunner().invoke(
        cli, ["ingest", chat, "--db", db, "--extractor", "llm", "--llm-max-retries", "1"]
    )
    assert result.exit_code == 0, result.output
    assert "1 failed" in result.output and "--retry-failed" in result.output
    assert json.loads(invoke("stats", "--db", db, "--json"))["extractors"]["llm"]["failed"] == 1
    server.rules.clear()
    output = invoke("ingest", "--retry-failed", "--db", db, "--extractor", "llm")
    assert "(retry-failed)" in output and "llm: 1 calls" in output
    assert json.loads(invoke("stats", "--db", db, "--json"))["extractors"]["llm"]["failed"] == 0


def test_flags_override_the_environment(tmp_path: Path, server: FakeOpenAIServer) -> None:
    chat = str(write_chat(tmp_path / "chat.jsonl", CHAT[:2]))
    db = str(tmp_path / "db")
    invoke(
        "ingest", chat, "--db", db, "--extractor", "llm", "--llm-model", "flag-model",
        "--llm-mode", "json", "--llm-concurrency", "1", "--llm-timeout", "5",
    )  # fmt: skip
    body = server.requests[0].body
    assert body["model"] == "flag-model" and body["response_format"]["type"] == "json_object"


def test_missing_settings_are_clean_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clear_llm_env(monkeypatch)
    chat = str(write_chat(tmp_path / "chat.jsonl"))
    with pytest.raises(SystemExit) as info:
        main(["ingest", chat, "--db", str(tmp_path / "db"), "--extractor", "llm"])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "no LLM endpoint configured" in err and "STRUCTRAG_LLM_BASE_URL" in err
    assert not (tmp_path / "db").exists()
    with pytest.raises(SystemExit) as info:
        main(["ingest", "--db", str(tmp_path / "db")])
    assert info.value.code == 2
    assert "--retry-failed" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["ingest", chat, "--db", str(tmp_path / "db"), "--retry-failed"])
    assert info.value.code == 2
    assert "--extractor llm" in capsys.readouterr().err
    assert not (tmp_path / "db").exists()


def test_a_failed_first_llm_ingest_keeps_the_answers_paid_for(
    tmp_path: Path, server: FakeOpenAIServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    monkeypatch.setenv("STRUCTRAG_LLM_CONCURRENCY", "1")
    server.on("Biscuit", Reply(status=401, error="bad key"))  # the endpoint turns unusable
    chat = str(write_chat(tmp_path / "chat.jsonl"))
    db = tmp_path / "db"
    with pytest.raises(SystemExit) as info:
        main(["ingest", chat, "--db", str(db), "--extractor", "llm", "-q"])
    assert info.value.code == 1
    con = duckdb.connect(str(db / "structrag.duckdb"), read_only=True)
    try:
        cached = con.execute("SELECT count(*) FROM llm_cache").fetchone()
        messages = con.execute("SELECT count(*) FROM messages").fetchone()
    finally:
        con.close()
    assert cached and cached[0] == 4  # m1..m4 were answered before m5 failed
    assert messages and messages[0] == 0  # the ingest itself was rolled back
