"""LLM extraction end to end: a real HTTP server on 127.0.0.1 speaking the OpenAI protocol,
a real DuckDB file and Whoosh index in ``tmp_path``.

Scenarios: valid extraction, malformed JSON (re-asked, or failing for good), invented
entities, timeouts, 429 then success, 500 on some messages, interrupted ingests, dry runs,
the answer cache, retry of failed messages, JSON mode, hybrid mode, bounded concurrency.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.extract.llm_schema import extraction_json_schema
from structrag.index import estimate_ingest
from structrag.llm import LLMEndpointError
from tests.llm_helpers import CHAT, EMPTY, config, write_chat
from tests.openai_server import FakeOpenAIServer, Reply, grounded_knowledge, serve
from tests.sinks import Interrupt


@pytest.fixture
def server() -> Iterator[FakeOpenAIServer]:
    with serve() as s:
        yield s


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    return write_chat(tmp_path / "chat.jsonl")


def _failures(index: Index) -> list[tuple[str, str, int]]:
    rows = index.store.sql(
        "SELECT message_id, error, attempts FROM extraction_failures ORDER BY message_id"
    )
    return [(str(m), str(e), int(a)) for m, e, a in rows]


def test_valid_extraction_is_grounded_with_spans(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on(
        "my sister Mina",
        Reply(
            knowledge={
                "entities": [
                    {
                        "name": "Mina",
                        "types": ["person"],
                        "facets": [{"name": "relation", "value": "sister"}],
                    },
                    {"name": "I", "types": ["person"]},
                ],
                "actions": [
                    {"subject": "Mina", "verbs": ["come"], "tense": "present", "object": "me"}
                ],
                "topics": ["sister Mina coming", "family trip with Mina", "sister"],
            }
        ),
    )
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_added == len(CHAT) and report.messages_failed == 0
        assert report.llm is not None
        assert report.llm["calls"] == len(CHAT) and report.llm["cache_hits"] == 0
        assert report.llm["input_tokens"] > 0 and report.llm["output_tokens"] > 0
        assert report.llm["failures"] == 0 and report.llm["seconds"] > 0
        shown = index.show("m3")
        llm_items = [k for k in shown["knowledge"] if k["extractor"] == "llm/1"]
        mina = next(k for k in llm_items if k.get("name") == "Mina")
        assert mina["span_text"] == "Mina" and mina["facets"][0]["value"] == "sister"
        action = next(k for k in llm_items if k["kind"] == "action")
        # "me" is the speaker; "coming" locates the lemma "come"
        assert action["object"] == "Kim" and action["span_text"] == "coming"
        topics = {k["text"]: k["span_text"] for k in llm_items if k["kind"] == "topic"}
        assert topics["sister"] == "sister"
        assert topics["sister Mina coming"] == shown["text"]  # implied: the whole message
        assert "family trip with Mina" not in topics  # "family" and "trip" are not said
        stats = index.stats()
        assert stats["extractors"]["llm"]["failed"] == 0
        assert stats["extractors"]["llm"]["extracted"] == len(CHAT)
        assert stats["extractors"]["metadata"]["extracted"] == len(CHAT)
        for ref in index.refs():
            text = index.show(ref.message_id)["text"]
            assert 0 <= ref.span.start <= ref.span.end <= len(text)


def test_a_second_run_makes_no_call(tmp_path: Path, server: FakeOpenAIServer, chat: Path) -> None:
    with Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(server))
        assert server.calls == len(CHAT)
        (again,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert again.skipped and server.calls == len(CHAT)
        (forced,) = index.ingest([chat], extractor="llm", llm=config(server), force=True)
        assert forced.messages_reextracted == len(CHAT) and forced.messages_updated == 0
        assert server.calls == len(CHAT)  # cached
        # Tags change a message's content hash but not what the model is shown: the edited
        # messages are re-written from cached answers.
        write_chat(chat, tags=["trip"])
        (edited,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert edited.messages_updated == len(CHAT)
        assert edited.llm is not None and edited.llm["cache_hits"] == len(CHAT)
        assert edited.llm["calls"] == 0 and server.calls == len(CHAT)
        assert index.stats()["extractors"]["llm"]["extracted"] == len(CHAT)


def test_identical_messages_share_one_request(tmp_path: Path, server: FakeOpenAIServer) -> None:
    chat = write_chat(tmp_path / "c.jsonl", [("Kim", "Hello Lee!"), ("Kim", "Hello Lee!")])
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
    assert report.messages_added == 2 and server.calls == 1
    assert report.llm is not None and report.llm["cache_hits"] == 1


def test_malformed_json_is_reasked_with_the_error(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on(
        "Ghibli",
        Reply(raw='{"entities": [{"name": "Ghibli'),
        Reply(knowledge={"topics": ["museum"]}),
    )
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_failed == 0
        assert report.llm is not None
        assert report.llm["retries"] == 1 and report.llm["invalid_outputs"] == 1
        assert report.llm["calls"] == len(CHAT) + 1
        _, second = server.calls_for("Ghibli")
        assert "Validation Error" in json.dumps(second.body["messages"])
        assert any(k.get("text") == "museum" for k in index.show("m4")["knowledge"])


def test_output_that_never_validates_is_recorded_and_the_ingest_goes_on(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Ghibli", Reply(raw="{not json"))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server, max_retries=1))
        assert report.messages_added == len(CHAT) and report.messages_failed == 1
        assert report.llm is not None and report.llm["failures"] == 1
        ((message_id, error, attempts),) = _failures(index)
        assert message_id == "m4" and "invalid" in error and attempts == 2
        shown = index.show("m4")
        assert shown["knowledge"] and {k["extractor"] for k in shown["knowledge"]} == {"metadata/1"}
        stats = index.stats()
        assert stats["extractors"]["llm"]["failed"] == 1
        assert stats["extractors"]["llm"]["extracted"] == len(CHAT) - 1


def test_invented_items_are_dropped_and_counted(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on(
        "flights to Tokyo",
        Reply(
            knowledge={
                "entities": [{"name": "Tokyo"}, {"name": "Atlantis"}, {"name": "flight"}],
                "actions": [
                    {"subject": "I", "verbs": ["book"], "object": "flights", "tense": "past"},
                    {"subject": "Zorro", "verbs": ["book"], "object": "flights"},
                ],
                "topics": ["volcanology", "travel to Tokyo", "Tokyo flights"],
            }
        ),
    )
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.llm is not None and report.llm["invented_dropped"] == 4
        items = [k for k in index.show("m1")["knowledge"] if k["extractor"] == "llm/1"]
    names = {k["name"]: k["span_text"] for k in items if k["kind"] == "entity"}
    assert names == {"Tokyo": "Tokyo", "flight": "flights"}  # "flight" by its stem
    (action,) = [k for k in items if k["kind"] == "action"]
    assert action["subject"] == "Kim" and action["span_text"] == "booked"
    assert [k["text"] for k in items if k["kind"] == "topic"] == ["Tokyo flights"]


def test_a_timeout_is_retried(tmp_path: Path, server: FakeOpenAIServer, chat: Path) -> None:
    # the answers that come at once leave a wide margin under the timeout on a loaded machine
    server.on("Shibuya", Reply(delay=5.0), Reply(knowledge={"entities": [{"name": "Shibuya"}]}))
    server.on("Biscuit then", Reply(delay=5.0))  # always too slow
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest(
            [chat], extractor="llm", llm=config(server, timeout=2.0, max_retries=1)
        )
        assert report.messages_failed == 1
        assert any(k.get("name") == "Shibuya" for k in index.show("m2")["knowledge"])
        ((message_id, error, attempts),) = _failures(index)
    assert message_id == "m6" and "timed out" in error and attempts == 2
    assert len(server.calls_for("Shibuya")) == 2


def test_429_waits_for_retry_after_then_succeeds(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on(
        "Tokyo",
        Reply(status=429, headers={"Retry-After": "1"}, error="rate limited"),
        Reply(knowledge={"entities": [{"name": "Tokyo"}]}),
    )
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_failed == 0
        assert report.llm is not None and report.llm["retries"] == 1
        assert any(k.get("name") == "Tokyo" for k in index.show("m1")["knowledge"])
    first, second = server.calls_for("Tokyo")
    assert second.at - first.at >= 0.9  # the backoff alone would be ~0.01 s


def test_a_rate_limited_endpoint_slows_the_ingest_and_loses_no_message(tmp_path: Path) -> None:
    """An endpoint that takes 2 requests in each 0.4 s and answers the rest with a 429
    (Retry-After 0.2 s): with 12 requests in flight and 2 retries each, requests retrying
    on their own ran into the limit again and messages failed; they back off together
    and retry a rate limit for as long as it lasts (up to 2 minutes), so every message
    is extracted."""
    lock = threading.Lock()
    sent: list[float] = []

    def limited(prompt: str) -> Reply:
        with lock:
            now = time.monotonic()
            recent = [t for t in sent if now - t < 0.4]
            if len(recent) >= 2:
                return Reply(status=429, headers={"retry-after-ms": "200"}, error="rate limited")
            sent.append(now)
        return Reply(knowledge=grounded_knowledge(prompt))

    rows = [("Kim", f"Note {i} about the trip to Lisbon.") for i in range(20)]
    chat = write_chat(tmp_path / "c.jsonl", rows)
    with (
        serve(default=limited) as server,
        Index(tmp_path / "ix") as index,
    ):
        (report,) = index.ingest(
            [chat], extractor="llm", llm=config(server, concurrency=12, max_retries=2)
        )
        assert report.messages_failed == 0, _failures(index)
        assert any(r.status == 429 for r in server.requests)  # the limit was met
    assert len(sent) == len(rows)


def test_500s_are_recorded_and_retry_failed_picks_them_up(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Shibuya", Reply(status=500))
    server.on("beagle", Reply(status=503))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_failed == 2 and report.messages_added == len(CHAT)
        assert [m for m, _, _ in _failures(index)] == ["m2", "m5"]
        assert "HTTP 500" in _failures(index)[0][1]
        llm_stats = index.stats()["extractors"]["llm"]
        assert (llm_stats["extracted"], llm_stats["failed"]) == (4, 2)
        server.rules.clear()  # the server recovers
        before = server.calls
        (retry,) = index.ingest([], extractor="llm", llm=config(server), retry_failed=True)
        assert server.calls - before == 2
        assert retry.messages_updated == 2 and retry.messages_failed == 0
        assert _failures(index) == []
        llm_stats = index.stats()["extractors"]["llm"]
        assert (llm_stats["extracted"], llm_stats["failed"]) == (len(CHAT), 0)
        assert any(k.get("name") == "Biscuit" for k in index.show("m5")["knowledge"])
        assert index.stats()["messages"] == len(CHAT)
        (nothing,) = index.ingest([], extractor="llm", llm=config(server), retry_failed=True)
        assert nothing.skipped and server.calls - before == 2
        # the text index follows the store
        assert index.text_index.generation() == index.store.generation()
        # the retried messages are still the file's: one that leaves it is removed
        owners = index.store.message_inputs([index.show("m5")["conversation"]])
        assert set(owners.values()) == {str(chat.resolve())}


def test_an_interrupted_ingest_keeps_what_it_paid_for(
    tmp_path: Path, server: FakeOpenAIServer
) -> None:
    rows = [("Kim", f"Day {i}: Kim walked Biscuit to the river.") for i in range(30)]
    chat = write_chat(tmp_path / "long.jsonl", rows)
    with Index(tmp_path / "ix") as index:
        with pytest.raises(KeyboardInterrupt):
            index.ingest([chat], extractor="llm", llm=config(server), progress=Interrupt(3))
        assert index.stats()["messages"] == 0  # the source's transaction was rolled back
        paid = server.calls
        cached = index.store.sql("SELECT count(*) FROM llm_cache")[0][0]
        assert 3 <= paid == cached < len(rows)  # every answer received was kept
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_added == len(rows)
        assert report.llm is not None and report.llm["cache_hits"] == paid
        assert server.calls == len(rows)  # nothing paid twice


def test_a_killed_ingest_pays_nothing_twice(tmp_path: Path) -> None:
    rows = [("Kim", f"Day {i}: Kim walked Biscuit to the river.") for i in range(40)]
    chat = write_chat(tmp_path / "long.jsonl", rows)
    db = tmp_path / "ix"
    with serve(default=lambda prompt: Reply(knowledge={"topics": ["river"]}, delay=0.05)) as srv:
        env = {
            **os.environ,
            "STRUCTRAG_LLM_BASE_URL": srv.url,
            "STRUCTRAG_LLM_MODEL": "test-model",
            "STRUCTRAG_LLM_CONCURRENCY": "2",
            "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
        }
        command = [sys.executable, "-m", "structrag", "ingest", str(chat), "--db", str(db)]
        proc = subprocess.Popen(
            [*command, "-q", "--extractor", "llm"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while srv.calls < 8 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, "the ingest finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        killed_calls = srv.calls
        with Index(db) as index:
            assert index.stats()["messages"] == 0
            cached = int(index.store.sql("SELECT count(*) FROM llm_cache")[0][0])
            assert cached >= 6
            (report,) = index.ingest([chat], extractor="llm", llm=config(srv))
            assert report.messages_added == len(rows) and report.messages_failed == 0
        # Only the answers lost with the process (in flight, at most 2) are asked again.
        assert srv.calls - killed_calls == len(rows) - cached
        assert killed_calls - cached <= 2


def test_dry_run_sends_nothing_and_writes_nothing(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    db = tmp_path / "ix"
    estimate = estimate_ingest(db, [chat], extractor="llm", llm=config(server))
    assert not db.exists() and server.calls == 0
    llm = estimate["llm"]
    assert llm["calls"] == len(CHAT) and llm["cache_hits"] == 0 and llm["model"] == "test-model"
    assert llm["input_tokens"] > 100 * len(CHAT) and llm["output_tokens_estimate"] > 0
    # After ingesting the first half, only the new half would cost anything.
    write_chat(tmp_path / "half.jsonl", CHAT[:3])
    with Index(db) as index:
        index.ingest([tmp_path / "half.jsonl"], extractor="llm", llm=config(server))
    calls, size = server.calls, (db / "structrag.duckdb").stat().st_size
    estimate = estimate_ingest(db, [chat], extractor="llm", llm=config(server))
    assert estimate["llm"]["calls"] == 3 and estimate["messages_to_extract"] == 3
    assert server.calls == calls and (db / "structrag.duckdb").stat().st_size == size
    # A dry run needs no endpoint at all.
    no_endpoint = config(server, base_url="", require_endpoint=False)
    assert estimate_ingest(db, [chat], extractor="llm", llm=no_endpoint)["llm"]["calls"] == 3


def test_concurrency_is_bounded_and_results_stay_in_order(tmp_path: Path) -> None:
    rows = [("Kim", f"Note {i} about Biscuit.") for i in range(12)]
    chat = write_chat(tmp_path / "c.jsonl", rows)

    # later messages answer faster, so answers arrive out of order
    def slow_first(prompt: str) -> Reply:
        number = int(prompt.split("Note ")[1].split()[0])
        return Reply(knowledge={"topics": [f"note {number}"]}, delay=0.02 * (12 - number))

    with serve(default=slow_first) as srv, Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(srv, concurrency=3))
        assert srv.max_active == 3
        for i in range(12):
            topics = [
                k["text"] for k in index.show(f"m{i + 1}")["knowledge"] if k["kind"] == "topic"
            ]
            assert topics == [f"note {i}"]


def test_json_mode(tmp_path: Path, server: FakeOpenAIServer, chat: Path) -> None:
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server, mode="json"))
        assert report.messages_failed == 0
        assert any(k.get("name") == "Tokyo" for k in index.show("m1")["knowledge"])
    body = server.requests[0].body
    assert "tools" not in body and body["response_format"] == {"type": "json_object"}


def test_hybrid_merges_llm_knowledge_into_spacy(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Shibuya", Reply(status=500))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest(
            [chat], extractor="hybrid", llm=config(server, max_retries=0), workers=1
        )
        assert report.messages_failed == 1
        extractors = index.stats()["extractors"]
        assert set(extractors) == {"metadata", "spacy", "llm"}
        assert extractors["llm"]["failed"] == 1
        shown = index.show("m1")
        by = {(k["kind"], k.get("name")): k["extractor"] for k in shown["knowledge"]}
        assert by[("entity", "Tokyo")] == "llm/1"  # the LLM's, not spaCy's duplicate
        assert sum(1 for k in shown["knowledge"] if k.get("name") == "Tokyo") == 1
        assert any(k["extractor"].startswith("spacy") for k in shown["knowledge"])
        # the failed message still has spaCy's knowledge
        assert any(k["extractor"].startswith("spacy") for k in index.show("m2")["knowledge"])
        server.rules.clear()
        (retry,) = index.ingest([], extractor="hybrid", llm=config(server), retry_failed=True)
        assert retry.messages_updated == 1 and index.stats()["extractors"]["llm"]["failed"] == 0


def test_an_unreachable_endpoint_stops_the_ingest(tmp_path: Path, chat: Path) -> None:
    with serve() as srv:
        url = srv.url  # a port that nothing listens on once the server is gone
    with Index(tmp_path / "ix") as index:
        with pytest.raises(LLMEndpointError, match="cannot reach"):
            index.ingest([chat], extractor="llm", llm=config(srv, base_url=url))
        assert index.stats()["messages"] == 0


def test_a_rejected_api_key_stops_the_ingest(tmp_path: Path, chat: Path) -> None:
    with serve(default=lambda p: Reply(status=401, error="bad key")) as srv:
        with Index(tmp_path / "ix") as index, pytest.raises(LLMEndpointError, match="401"):
            index.ingest([chat], extractor="llm", llm=config(srv))
        assert srv.calls <= 4  # not one per message and retry


def test_tokens_are_counted_when_the_server_sends_no_usage(tmp_path: Path, chat: Path) -> None:
    no_usage = Reply(knowledge={"topics": ["x"]}, usage=False)
    with serve(default=lambda p: no_usage) as srv, Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(srv))
    assert report.llm is not None and report.llm["estimated_calls"] == len(CHAT)
    assert report.llm["input_tokens"] > 100 * len(CHAT) and report.llm["output_tokens"] > 0


def test_a_message_the_model_finds_nothing_in_still_counts_as_extracted(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Bring photos", Reply(knowledge={"entities": [], "actions": [], "topics": []}))
    with Index(tmp_path / "ix") as index:
        index.ingest([chat], extractor="llm", llm=config(server))
        llm = index.stats()["extractors"]["llm"]
        assert (llm["extracted"], llm["failed"]) == (len(CHAT), 0)
        assert not any(k["extractor"] == "llm/1" for k in index.show("m6")["knowledge"])
        rows = index.store.sql("SELECT message_id, model, attempts FROM extractions ORDER BY 1")
        assert [r[0] for r in rows] == [f"m{i}" for i in range(1, len(CHAT) + 1)]
        assert {(r[1], r[2]) for r in rows} == {("test-model", 1)}


def test_an_answer_cut_off_at_the_token_limit_is_not_reasked(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    looping = '{"actions": [' + '{"verbs": ["loaf"]}, ' * 200  # never closes
    server.on("Ghibli", Reply(raw=looping))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server, max_retries=3))
        ((message_id, error, attempts),) = _failures(index)
    assert message_id == "m4" and "cut off" in error and attempts == 1
    # the budget is sized to the message: raising --llm-max-tokens would not change it
    assert "--llm-max-tokens caps it, it does not raise it" in error
    assert report.llm is not None and report.llm["calls"] == len(CHAT)
    (request,) = server.calls_for("Ghibli")
    assert 256 < request.body["max_tokens"] < 400  # sized to the message, not the 4096 cap


# -- answers of the wrong shape, replies without a tool call, sloppy answers ----------------

_FULL = {
    "entities": [{"name": "Ghibli", "types": ["museum"]}, {"name": "Mina", "types": ["person"]}],
    "actions": [],
    "topics": [],
}
#: The top of the JSON schema, as a model that echoes it sends it back.
_SCHEMA = {key: extraction_json_schema()[key] for key in ("title", "description", "type")} | {
    "properties": {"entities": {"type": "array"}, "actions": {"type": "array"}}
}


@pytest.mark.parametrize(
    ("mode", "reply"),
    [
        ("tools", Reply(knowledge=_SCHEMA)),  # the schema echoed back
        ("tools", Reply(knowledge={"knowledge": _FULL})),  # wrapped
        ("tools", Reply(knowledge={})),
        # cut off in the reply text: instructor salvages the first entity's object
        ("md_json", Reply(raw="```json\n" + json.dumps(_FULL)[:70])),
    ],
    ids=["schema", "wrapped", "empty", "md_json-cut"],
)
def test_an_answer_of_the_wrong_shape_is_reasked_and_recorded_not_cached(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path, mode: str, reply: Reply
) -> None:
    server.on("Ghibli", reply)
    llm = config(server, mode=mode, max_retries=2)
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=llm)
        assert report.messages_failed == 1
        ((message_id, error, attempts),) = _failures(index)
        assert message_id == "m4" and "invalid output" in error and attempts == 3
        assert len(server.calls_for("Ghibli")) == 3
        assert "entities, actions and topics" in json.dumps(server.calls_for("Ghibli")[1].body)
        assert index.store.sql("SELECT count(*) FROM llm_cache")[0][0] == len(CHAT) - 1
        server.rules.clear()
        (retry,) = index.ingest([], extractor="llm", llm=llm, retry_failed=True)
        assert retry.messages_failed == 0 and _failures(index) == []
        assert any(k.get("name") == "Ghibli" for k in index.show("m4")["knowledge"])


def test_a_reply_without_a_tool_call_is_reasked(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Ghibli", Reply(knowledge=_FULL, tool_call=False), Reply(knowledge=_FULL))
    server.on("Biscuit then", Reply(knowledge=EMPTY, tool_call=False))  # never calls it
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server, max_retries=3))
        assert report.messages_failed == 1
        assert any(k.get("name") == "Ghibli" for k in index.show("m4")["knowledge"])
        ((message_id, error, attempts),) = _failures(index)
    assert message_id == "m6" and "no structured answer" in error and attempts == 4
    assert len(server.calls_for("Ghibli")) == 2 and len(server.calls_for("Biscuit then")) == 4


def test_harmless_sloppiness_is_coerced_not_reasked(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on(
        "beagle",
        Reply(
            knowledge={
                "entities": ["Biscuit", None],
                "actions": [
                    {"subject": "Kim", "verbs": "adopt", "object": "beagle", "negated": "false"}
                ],
                "topics": ["beagle", None],
            }
        ),
    )
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server))
        assert report.messages_failed == 0 and report.llm is not None
        assert report.llm["invalid_outputs"] == 0
        items = [k for k in index.show("m5")["knowledge"] if k["extractor"] == "llm/1"]
    assert len(server.calls_for("beagle")) == 1
    assert {k["name"] for k in items if k["kind"] == "entity"} == {"Biscuit"}
    (action,) = [k for k in items if k["kind"] == "action"]
    assert action["subject"] == "Kim" and action["object"] == "beagle"
    assert not action.get("negated")


# -- a connection that drops ----------------------------------------------------------------


def test_a_connection_that_keeps_dropping_fails_that_message_only(
    tmp_path: Path, server: FakeOpenAIServer, chat: Path
) -> None:
    server.on("Shibuya", Reply(drop=True))
    with Index(tmp_path / "ix") as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config(server, concurrency=1))
        assert report.messages_added == len(CHAT) and report.messages_failed == 1
        ((message_id, error, attempts),) = _failures(index)
        assert message_id == "m2" and "connection" in error and attempts == 3
        assert index.stats()["extractors"]["llm"]["extracted"] == len(CHAT) - 1


def test_an_endpoint_that_goes_away_stops_the_ingest(tmp_path: Path) -> None:
    gone = Reply(drop=True)
    with serve([("Tokyo", [Reply(knowledge=EMPTY)])], default=lambda p: gone) as srv:
        with Index(tmp_path / "ix") as index:
            with pytest.raises(LLMEndpointError, match="cannot reach"):
                index.ingest([chat_file(tmp_path)], extractor="llm", llm=config(srv, concurrency=1))
            assert index.stats()["messages"] == 0
        # m1 answered; m2, m3 and m4 failed to connect in a row (3 attempts each)
        assert srv.calls == 1 + 3 * 3 and not srv.calls_for("beagle")


def chat_file(tmp_path: Path) -> Path:
    return write_chat(tmp_path / "chat.jsonl")


# -- Ctrl-C ---------------------------------------------------------------------------------


class _TimedInterrupt(Interrupt):
    at = 0.0

    def advance(self, n: int) -> None:
        self.at = time.monotonic()
        super().advance(n)


def test_ctrl_c_starts_no_new_retries(tmp_path: Path, server: FakeOpenAIServer) -> None:
    rows = [("Kim", "I booked the flights to Tokyo.")] + [
        ("Kim", f"Note {i} about Biscuit.") for i in range(8)
    ]
    chat = write_chat(tmp_path / "c.jsonl", rows)
    server.on("Tokyo", Reply(knowledge=EMPTY))
    server.on("Note", Reply(status=429, headers={"Retry-After": "20"}, error="rate limited"))
    interrupt = _TimedInterrupt(1)
    llm = config(server, concurrency=3, max_retries=3)
    with Index(tmp_path / "ix") as index, pytest.raises(KeyboardInterrupt):
        index.ingest([chat], extractor="llm", llm=llm, progress=interrupt)
    stopped = time.monotonic()
    time.sleep(0.5)
    assert stopped - interrupt.at < 10  # without waiting the 20 s Retry-After asks for
    late = [r for r in server.requests if r.at > interrupt.at + 0.2]
    assert late == [] and all(len(server.calls_for(f"Note {i} ")) <= 1 for i in range(8))
