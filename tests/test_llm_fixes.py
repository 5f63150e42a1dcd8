"""Fixes in the LLM extraction path, end to end against the local OpenAI-protocol server
with a real DuckDB file and Whoosh index in ``tmp_path``:

* a 429 of an exhausted quota (``insufficient_quota``) stops the ingest at once;
* an ingest in which every message sent to the LLM failed exits non-zero;
* an error that stops an ingest of several files names the files written before it;
* ``--retry-failed`` redoes failures with the extractor that made them (and refuses
  another);
* re-ingesting with another extractor, model or prompt version extracts again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from structrag import Index
from structrag.cli import main
from structrag.errors import ConfigError
from structrag.llm import LLMEndpointError
from tests.llm_helpers import CHAT, EMPTY, clear_llm_env, config, write_chat
from tests.openai_server import FakeOpenAIServer, Reply, serve

#: ``Reply.error`` that the quota server answers as OpenAI does for an exhausted quota.
QUOTA = "insufficient_quota"


class QuotaServer(FakeOpenAIServer):
    """The fake server, answering a reply whose ``error`` is :data:`QUOTA` with OpenAI's
    429 of an exhausted quota."""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        base: Any = super()._handler()

        class Handler(base):  # type: ignore[misc]
            def _reply(self, body: dict[str, Any], reply: Reply) -> None:
                if reply.error != QUOTA:
                    super()._reply(body, reply)
                    return
                error = {
                    "message": "You exceeded your current quota, please check your plan and "
                    "billing details.",
                    "type": "insufficient_quota",
                    "param": None,
                    "code": "insufficient_quota",
                }
                self._send(429, {"error": error}, {})

        return Handler


@contextmanager
def serve_quota(default: Reply) -> Iterator[QuotaServer]:
    server = QuotaServer(lambda prompt: default)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    clear_llm_env(monkeypatch)
    return monkeypatch


def _count(index: Index, query: str, *params: Any) -> int:
    (row,) = index.store.sql(query, list(params))
    return int(row[0])


# -- a quota that is used up --------------------------------------------------------------


def test_an_exhausted_quota_stops_the_ingest_at_once(tmp_path: Path) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    with serve_quota(Reply(status=429, error=QUOTA)) as srv:
        with Index(tmp_path / "ix") as index:
            with pytest.raises(LLMEndpointError) as info:
                index.ingest([chat], extractor="llm", llm=config(srv, concurrency=1))
            assert index.stats()["messages"] == 0  # nothing half-written
            assert _count(index, "SELECT count(*) FROM sources") == 0
        assert srv.calls == 1  # not retried, not asked again for every message
    message = str(info.value)
    assert "quota exhausted" in message and srv.url in message and "test-model" in message
    assert "billing" in message


def test_an_exhausted_quota_is_one_clear_line_in_the_cli(
    tmp_path: Path, env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = str(write_chat(tmp_path / "chat.jsonl"))
    db = tmp_path / "db"
    with serve_quota(Reply(status=429, error=QUOTA)) as srv:
        env.setenv("STRUCTRAG_LLM_BASE_URL", srv.url)
        env.setenv("STRUCTRAG_LLM_MODEL", "test-model")
        with pytest.raises(SystemExit) as info:
            main(["ingest", chat, "--db", str(db), "--extractor", "llm", "-q"])
        assert srv.calls <= 4  # at most the requests in flight at once
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "quota exhausted" in err and "hint:" in err
    assert not db.exists()  # a failed first ingest leaves no trace


# -- every message failed -----------------------------------------------------------------


def test_an_ingest_whose_every_llm_message_failed_exits_non_zero(
    tmp_path: Path, env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # four messages: five failed in a row, before any answer, would stop the ingest
    rows = CHAT[:4]
    chat = str(write_chat(tmp_path / "chat.jsonl", rows))
    db = str(tmp_path / "db")
    with serve(default=lambda prompt: Reply(status=500)) as srv:
        env.setenv("STRUCTRAG_LLM_BASE_URL", srv.url)
        env.setenv("STRUCTRAG_LLM_MODEL", "test-model")
        env.setenv("STRUCTRAG_LLM_MAX_RETRIES", "0")
        with pytest.raises(SystemExit) as info:
            main(["ingest", chat, "--db", db, "--extractor", "llm", "--json"])
        assert info.value.code == 1
        out, err = capsys.readouterr()
        assert '"messages_failed": 4' in out  # the reports still come
        assert f"failed for all {len(rows)} messages" in err
        assert f"structrag ingest --retry-failed --extractor llm --db {db}" in err
        with Index(db) as index:  # failures are kept, for --retry-failed
            assert index.stats()["extractors"]["llm"]["failed"] == len(rows)
        # the retry that fails again fails the command again
        with pytest.raises(SystemExit) as info:
            main(["ingest", "--retry-failed", "--db", db, "--extractor", "llm"])
        assert info.value.code == 1
        srv.default = lambda prompt: Reply(knowledge={"entities": [], "topics": ["x"]})
        main(["ingest", "--retry-failed", "--db", db, "--extractor", "llm"])  # succeeds
    assert "(retry-failed)" in capsys.readouterr().out


def test_an_endpoint_that_fails_every_request_alike_stops_the_ingest(tmp_path: Path) -> None:
    """A 400 for every request (a model that does not take a parameter sent): the first
    five requests fail alike and none succeeds, so the ingest stops there, writing
    nothing, instead of paying for every message of the input to fail."""
    rows = [("Kim", f"Note {i} about the trip.") for i in range(30)]
    chat = write_chat(tmp_path / "chat.jsonl", rows)
    refused = Reply(status=400, error="Unsupported parameter: 'max_tokens'")
    with serve(default=lambda prompt: refused) as srv, Index(tmp_path / "ix") as index:
        with pytest.raises(
            LLMEndpointError, match="failed its first 5 requests, answering none"
        ) as info:
            index.ingest([chat], extractor="llm", llm=config(srv, concurrency=1))
        assert "max_tokens" in str(info.value) and "--llm-model" in str(info.value.hint)
        assert srv.calls < len(rows) and index.stats()["messages"] == 0
    # an endpoint that takes the requests and never answers stops it too
    never = Reply(knowledge=EMPTY, delay=0.6)
    with (
        serve(default=lambda prompt: never) as srv,
        Index(tmp_path / "iz") as index,
        pytest.raises(LLMEndpointError, match="failed its first 5 requests"),
    ):
        index.ingest(
            [chat], extractor="llm", llm=config(srv, concurrency=1, timeout=0.2, max_retries=0)
        )
    # output that does not validate is the model's answer, not a refusal: not counted
    with serve(default=lambda prompt: Reply(raw="[1, 2")) as srv, Index(tmp_path / "iy") as index:
        srv.on("Note 7 about", Reply(knowledge={"entities": [], "topics": ["trip"]}))
        (report,) = index.ingest([chat], extractor="llm", llm=config(srv, concurrency=1))
        assert report.messages_failed == len(rows) - 1
    # once one request has succeeded, a failure is that message's alone
    rows[0] = ("Kim", "I booked the flights to Tokyo.")
    write_chat(tmp_path / "chat.jsonl", rows)
    with serve(default=lambda prompt: refused) as srv, Index(tmp_path / "ix") as index:
        srv.on("Tokyo", Reply(knowledge={"entities": [{"name": "Tokyo"}]}))
        (report,) = index.ingest([chat], extractor="llm", llm=config(srv, concurrency=1))
        assert report.messages_failed == len(rows) - 1


# -- files written before an error ---------------------------------------------------------


def test_the_files_written_before_an_endpoint_error_are_named(
    tmp_path: Path, env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    first = str(write_chat(tmp_path / "a.jsonl", CHAT[:2]))
    second = str(
        write_chat(
            tmp_path / "big.jsonl", [("Kim", "Zebras at noon"), ("Lee", "Ok")], conversation="b"
        )
    )
    with serve([("Zebras", [Reply(status=401, error="bad key")])]) as srv:
        env.setenv("STRUCTRAG_LLM_BASE_URL", srv.url)
        env.setenv("STRUCTRAG_LLM_MODEL", "test-model")
        for extra in ([], ["--json"]):
            db = str(tmp_path / f"db{len(extra)}")
            with pytest.raises(SystemExit) as info:
                main(["ingest", first, second, "--db", db, "--extractor", "llm", "-q", *extra])
            assert info.value.code == 1
            out, err = capsys.readouterr()
            # the written file's report, as a finished ingest prints it (lines or JSON)
            if extra:
                assert [(r["path"], r["messages_added"]) for r in json.loads(out)] == [(first, 2)]
            else:
                assert out.startswith(f"{first} (jsonl): 2 new") and second not in out, out
            assert f"{first}: written before the error" in err
            assert f"{second}: not written (the ingest stopped on it)" in err
            assert "error: " in err and "401" in err
            assert "run the same command again" in err
            with Index(db) as index:
                assert {c.id for c in index.store.conversations()} == {"friends"}


def test_the_python_error_carries_the_files_written(tmp_path: Path) -> None:
    first = write_chat(tmp_path / "a.jsonl", CHAT[:2])
    second = write_chat(tmp_path / "b.jsonl", [("Kim", "Zebras at noon")], conversation="b")
    with (
        serve([("Zebras", [Reply(status=401, error="bad key")])]) as srv,
        Index(tmp_path / "ix") as index,
        pytest.raises(LLMEndpointError) as info,
    ):
        index.ingest([first, second], extractor="llm", llm=config(srv))
    assert info.value.written == [str(first)]  # type: ignore[attr-defined]
    assert info.value.stopped_on == str(second)  # type: ignore[attr-defined]


# -- --retry-failed and the extractor that failed ------------------------------------------


def _spacy_refs(index: Index, message_id: str) -> int:
    return _count(
        index,
        "SELECT count(*) FROM semantic_refs WHERE message_id = ? AND extractor = 'spacy'",
        message_id,
    )


def test_retry_failed_keeps_the_extractor_that_failed(
    tmp_path: Path, env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    db = tmp_path / "db"
    with serve([("Ghibli", [Reply(status=500)])]) as srv:
        with Index(db) as index:
            (report,) = index.ingest(
                [chat], extractor="hybrid", llm=config(srv, max_retries=0), workers=1
            )
            assert report.messages_failed == 1
            before = _spacy_refs(index, "m4")
            assert before > 0
            srv.rules.clear()
            # llm alone would drop the failed message's spaCy knowledge: refused
            with pytest.raises(ConfigError, match="retry them with --extractor hybrid"):
                index.ingest([], extractor="llm", llm=config(srv), retry_failed=True)
            assert _spacy_refs(index, "m4") == before
            assert index.stats()["extractors"]["llm"]["failed"] == 1
        env.setenv("STRUCTRAG_LLM_BASE_URL", srv.url)
        env.setenv("STRUCTRAG_LLM_MODEL", "test-model")
        with pytest.raises(SystemExit) as info:
            main(["ingest", "--retry-failed", "--db", str(db), "--extractor", "llm"])
        assert info.value.code == 1
        assert "--extractor hybrid" in capsys.readouterr().err
        calls = srv.calls
        # without --extractor, the retry uses the one that failed
        main(["ingest", "--retry-failed", "--db", str(db), "--workers", "1"])
        assert srv.calls == calls + 1
    out = capsys.readouterr().out
    assert "(retry-failed)" in out and "1 updated" in out
    with Index(db) as index:
        assert index.stats()["extractors"]["llm"]["failed"] == 0
        assert _spacy_refs(index, "m4") > 0
        assert any(k["extractor"].startswith("llm") for k in index.show("m4")["knowledge"])


def test_an_llm_failure_is_not_retried_with_the_hybrid(tmp_path: Path) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    with serve([("Ghibli", [Reply(status=500)])]) as srv, Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(srv, max_retries=0))
        srv.rules.clear()
        with pytest.raises(ConfigError, match="retry them with --extractor llm"):
            index.ingest([], extractor="hybrid", llm=config(srv), retry_failed=True, workers=1)
        (retry,) = index.ingest([], extractor="llm", llm=config(srv), retry_failed=True)
        assert retry.messages_updated == 1 and retry.messages_failed == 0
        assert _spacy_refs(index, "m4") == 0


# -- re-ingesting with other LLM settings --------------------------------------------------


def test_another_model_or_extractor_extracts_again(tmp_path: Path) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    n = len(CHAT)
    with serve() as srv, Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(srv, model="model-a"))
        assert srv.calls == n
        (again,) = index.ingest([chat], extractor="llm", llm=config(srv, model="model-b"))
        assert again.messages_reextracted == n and srv.calls == 2 * n
        assert {r[0] for r in index.store.sql("SELECT DISTINCT model FROM extractions")} == {
            "model-b"
        }
        (same,) = index.ingest([chat], extractor="llm", llm=config(srv, model="model-b"))
        assert same.skipped and srv.calls == 2 * n
        # back to model A: its answers are cached, nothing is paid twice
        (back,) = index.ingest([chat], extractor="llm", llm=config(srv, model="model-a"))
        assert back.messages_reextracted == n and srv.calls == 2 * n
        # another extractor: the hybrid adds spaCy's knowledge (answers from the cache)
        (hybrid,) = index.ingest(
            [chat], extractor="hybrid", llm=config(srv, model="model-a"), workers=1
        )
        assert hybrid.messages_reextracted == n and srv.calls == 2 * n
        assert _spacy_refs(index, "m1") > 0
        (hybrid,) = index.ingest(
            [chat], extractor="hybrid", llm=config(srv, model="model-a"), workers=1
        )
        assert hybrid.skipped
        (llm,) = index.ingest([chat], extractor="llm", llm=config(srv, model="model-a"))
        assert llm.messages_reextracted == n and _spacy_refs(index, "m1") == 0
        # another LLM setting that is not what answers are cached by (the mode) extracts
        # nothing again
        (same,) = index.ingest(
            [chat], extractor="llm", llm=config(srv, model="model-a", mode="json")
        )
        assert same.messages_reextracted == 0 and not same.skipped
        # spaCy re-ingests are as they were: nothing is extracted again
        (spacy,) = index.ingest([chat], workers=1)
        assert spacy.messages_reextracted == 0 and spacy.refs_added == 0


def test_another_prompt_version_extracts_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import structrag.extract.llm_extractor as llm_extractor

    chat = write_chat(tmp_path / "chat.jsonl")
    with serve() as srv, Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(srv))
        monkeypatch.setattr(llm_extractor, "PROMPT_VERSION", "2")
        (again,) = index.ingest([chat], extractor="llm", llm=config(srv))
        assert again.messages_reextracted == len(CHAT) and srv.calls == 2 * len(CHAT)
        estimate = index.estimate([chat], extractor="llm", llm=config(srv))
        assert estimate["messages_to_extract"] == 0  # the dry run sees it done


def test_a_dry_run_counts_the_messages_to_extract_again(tmp_path: Path) -> None:
    chat = write_chat(tmp_path / "chat.jsonl")
    with serve() as srv, Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(srv, model="model-a"))
        estimate = index.estimate([chat], extractor="llm", llm=config(srv, model="model-b"))
        assert estimate["messages_to_extract"] == len(CHAT)
        assert estimate["llm"]["calls"] == len(CHAT)
        (source,) = estimate["sources"]
        assert source["messages_reextracted"] == len(CHAT)


def test_errors_show_the_endpoint_without_the_credentials_in_its_url(tmp_path: Path) -> None:
    """``http://user:pw@host/v1`` works as a base URL, but errors (and the notes of
    ``ask``, which repeat them) name the host alone."""
    from structrag.llm.config import LLMConfig

    chat = write_chat(tmp_path / "chat.jsonl")
    llm = LLMConfig.resolve(
        base_url="http://annuser:hunter2@127.0.0.1:9/v1?key=sk-secret",
        model="m",
        backoff=0.01,
        max_retries=0,
        env={},
    )
    with Index(tmp_path / "ix") as index, pytest.raises(LLMEndpointError) as info:
        index.ingest([chat], extractor="llm", llm=llm)
    shown = str(info.value)
    assert "http://127.0.0.1:9/v1" in shown
    assert "hunter2" not in shown and "sk-secret" not in shown and "annuser" not in shown


def test_retry_failed_with_nothing_to_retry_is_no_error(
    tmp_path: Path, example_index: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A scheduled ``ingest --retry-failed`` on an index with no failed extraction has
    nothing to do: it says so and exits 0 (``--json``: no reports); with no index at
    ``--db`` it is a usage error."""
    main(["ingest", "--retry-failed", "--db", str(example_index), "--json"])
    out, err = capsys.readouterr()
    assert json.loads(out) == [] and "nothing to retry" in err
    with pytest.raises(SystemExit) as info:
        main(["ingest", "--retry-failed", "--db", str(tmp_path / "none")])
    assert info.value.code == 2 and "no index at" in capsys.readouterr().err
