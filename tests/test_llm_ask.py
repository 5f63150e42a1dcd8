"""LLM question translation and written answers, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.llm.config import LLMConfig
from structrag.translate.llm import QuestionQuery, to_translation
from tests.openai_server import Reply, serve

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "friends_chat.jsonl"

TRANSLATION = {
    "question_type": "when",
    "people": ["Marco"],
    "actions": [{"subject": "Marco", "verb": "adopt", "object": "Biscuit"}],
    "entities": [{"name": "Biscuit", "types": []}, {"name": "Luna", "types": []}],
    "topics": [],
    "terms": ["puppy"],
    "time": "in May 2024",
    "speaker": None,
}


@pytest.fixture(scope="module")
def ix(example_index: Path) -> Iterator[Index]:
    with Index(example_index, read_only=True) as index:
        yield index


def config(url: str) -> LLMConfig:
    return LLMConfig(base_url=url, model="test-model", timeout=5, max_retries=1, backoff=0.01)


def test_llm_translation_becomes_the_query_shown(ix: Index) -> None:
    with serve([("Question:", [Reply(knowledge=TRANSLATION)])]) as server:
        answer = ix.ask(
            "When did Marco adopt Biscuit in May 2024?",
            budget=150,
            translator="llm",
            llm=config(server.url),
        )
        assert server.calls == 1
    assert answer.query.startswith("action(Marco, adopt, Biscuit) entity:Biscuit")
    assert 'when:"in May 2024"' in answer.query
    assert answer.kind == "when"
    assert any("dropped names not in the question: Luna" in n for n in answer.notes)
    assert any("translated by test-model" in n for n in answer.notes)
    assert answer.message_ids[0] == "m11"


def test_llm_failure_falls_back_to_the_offline_translator(ix: Index) -> None:
    with serve([("Question:", [Reply(status=500)])]) as server:
        answer = ix.ask(
            "When did Marco adopt Biscuit?", budget=150, translator="llm", llm=config(server.url)
        )
        assert server.calls >= 1
    assert any("translated offline" in n for n in answer.notes)
    assert "action(Marco, adopt, Biscuit)" in answer.query
    assert answer.message_ids[0] == "m11"


def test_translation_without_an_llm_is_offline_and_says_so(
    ix: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("STRUCTRAG_LLM_BASE_URL", "STRUCTRAG_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    answer = ix.ask("When did Marco adopt Biscuit?", budget=150, translator="llm")
    assert any("no LLM configured" in n for n in answer.notes)


def test_written_answer_cites_only_messages_in_the_context(ix: Index) -> None:
    written = {"answered": True, "answer": "In May 2024 [m11].", "citations": ["m11", "m99"]}
    with serve([("Excerpts:", [Reply(knowledge=written)])]) as server:
        answer = ix.ask(
            "When did Marco adopt Biscuit?", budget=150, answer=True, llm=config(server.url)
        )
        (request,) = server.calls_for("Excerpts:")
    assert answer.written is not None
    assert answer.written["text"] == "In May 2024 [m11]."
    assert answer.written["citations"] == ["m11"]
    assert answer.written["dropped_citations"] == ["m99"]
    assert "(m11) [21 May 2024] Marco: Guess what" in request.user_text
    assert answer.as_dict()["answer"]["citations"] == ["m11"]


def test_answer_without_an_llm_explains_and_keeps_the_context(
    ix: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("STRUCTRAG_LLM_BASE_URL", raising=False)
    answer = ix.ask("When did Marco adopt Biscuit?", budget=150, answer=True)
    assert answer.written is not None and "no LLM configured" in answer.written["error"]
    assert answer.message_ids


def test_to_translation_keeps_speakers_and_drops_unknown_times() -> None:
    query = QuestionQuery(
        question_type="what",
        people=["Mel"],
        actions=[{"subject": "Melanie", "verb": "paint", "object": "*"}],
        time="during the great flood",
    )
    found = to_translation(query, "What did Mel paint?", ["Melanie", "Caroline"])
    assert found.query.to_query() == "action(Melanie, paint, *)"
    assert any("not understood" in n for n in found.notes)


def test_to_translation_drops_a_speaker_the_question_does_not_name() -> None:
    """ "Who got a beagle?" names no one: a speaker the model adds is its guess, and
    would narrow the search to that person's messages."""
    query = QuestionQuery(
        question_type="who",
        people=["Sam"],
        speaker="Sam",
        actions=[{"subject": "Sam", "verb": "get", "object": "beagle"}],
    )
    found = to_translation(query, "Who got a beagle?", ["Sam", "Priya", "Zoë"])
    assert "Sam" not in found.query.to_query() and found.people == []
    assert any("Sam" in n for n in found.notes)
    named = QuestionQuery(question_type="what", people=["Zoë"], speaker="Zoë")
    kept = to_translation(named, "What did Zoe say?", ["Sam", "Priya", "Zoë"])
    assert kept.people == ["Zoë"] and "speaker:Zoë" in kept.query.to_query()
    # a word that starts a name is no name ("Will", "How", "car"); a short one can be
    speakers = ["William", "Howard", "Caroline", "Ed Park", "Melanie"]
    for question, guess, kept_it in [
        ("Will Caroline go?", "William", False),
        ("How did Caroline feel?", "Howard", False),
        ("What car did she buy?", "Caroline", False),
        ("What did Ed say?", "Ed Park", True),
        ("What did Mel paint?", "Melanie", True),
    ]:
        found = to_translation(
            QuestionQuery(question_type="what", people=[guess]), question, speakers
        )
        assert (found.people == [guess]) is kept_it, (question, guess)


def test_cli_answer_flag(example_index: Path) -> None:
    written = {"answered": True, "answer": "On 21 May 2024 [m11].", "citations": ["m11"]}
    with serve([("Excerpts:", [Reply(knowledge=written)])]) as server:
        env = {
            **os.environ,
            "STRUCTRAG_LLM_BASE_URL": server.url,
            "STRUCTRAG_LLM_MODEL": "test-model",
        }
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "structrag",
                "ask",
                "When did Marco adopt Biscuit?",
                "--db",
                str(example_index),
                "--budget",
                "150",
                "--answer",
                "--json",
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["answer"]["citations"] == ["m11"]
    assert data["tokens"] <= 150


def test_dropped_citations_leave_the_text(ix: Index) -> None:
    written = {
        "answered": True,
        "answer": "Marco adopted Biscuit [m11] [m999]. He was a puppy [m11, m998]; see [21 May]."
        " A photo [image] of him [sic], on [2024-05-21]; [more](http://x).",
        "citations": ["m11", "m999", "m998"],
    }
    with serve([("Excerpts:", [Reply(knowledge=written)])]) as server:
        answer = ix.ask(
            "When did Marco adopt Biscuit?", budget=150, answer=True, llm=config(server.url)
        )
    assert answer.written is not None
    assert answer.written["text"] == (
        "Marco adopted Biscuit [m11]. He was a puppy [m11]; see [21 May]."
        " A photo [image] of him [sic], on [2024-05-21]; [more](http://x)."
    )
    assert answer.written["citations"] == ["m11"]
    assert answer.written["dropped_citations"] == ["m999", "m998"]


def test_a_reply_without_a_tool_call_is_reasked_for_translations_and_answers(ix: Index) -> None:
    written = {"answered": True, "answer": "In May 2024 [m11].", "citations": ["m11"]}
    rules = [
        ("Excerpts:", [Reply(knowledge=written, tool_call=False), Reply(knowledge=written)]),
        (
            "Question:",
            [Reply(knowledge=TRANSLATION, tool_call=False), Reply(knowledge=TRANSLATION)],
        ),
    ]
    with serve(rules) as server:
        answer = ix.ask(
            "When did Marco adopt Biscuit in May 2024?",
            budget=150,
            translator="llm",
            answer=True,
            llm=config(server.url),
        )
        assert server.calls == 4
    assert any("translated by test-model (2 call(s)" in n for n in answer.notes)
    assert answer.written is not None and answer.written["citations"] == ["m11"]
    assert answer.written["calls"] == 2


def _cites_the_first_two(prompt: str) -> Reply:
    """An answer citing the first two excerpts of the prompt by the ids shown."""
    ids = re.findall(r"^\(([^)]+)\)", prompt, re.M)[:2]
    text = "Marco adopted Biscuit " + " ".join(f"[{i}]" for i in ids) + "."
    return Reply(knowledge={"answered": True, "answer": text, "citations": ids})


def test_answers_over_several_conversations_cite_qualified_ids(tmp_path: Path) -> None:
    rows = [json.loads(line) for line in EXAMPLE.read_text(encoding="utf-8").splitlines()]
    chat = tmp_path / "two.jsonl"
    chat.write_text(
        "".join(
            json.dumps({**row, "conversation": room}) + "\n"
            for room in ("friends", "copy")
            for row in rows
        ),
        encoding="utf-8",
    )
    with Index(tmp_path / "ix") as index:
        index.ingest([chat])
        with serve(default=_cites_the_first_two) as server:
            answer = index.ask(
                "When did Marco adopt Biscuit?", budget=300, answer=True, llm=config(server.url)
            )
            (request,) = server.requests
        rooms = {m.conversation for m in answer.context.messages}
        assert rooms == {"friends", "copy"}
        assert "(friends/m11) [21 May 2024] Marco:" in request.user_text
        assert "(copy/m11) [21 May 2024] Marco:" in request.user_text
        assert answer.written is not None
        citations = answer.written["citations"]
        assert len(citations) == 2 and all("/" in c for c in citations)
        assert answer.written["text"].endswith(" ".join(f"[{c}]" for c in citations) + ".")
        for cited in citations:  # each names one message that `show` finds
            room, _, message_id = cited.partition("/")
            shown = index.show(cited)
            assert (shown["conversation"], shown["id"]) == (room, message_id)


@pytest.mark.parametrize(
    ("flags", "env", "named"),
    [
        (["--llm-base-url", "localhost:18811/v1"], {}, "not an http(s) URL"),
        ([], {"STRUCTRAG_LLM_TIMEOUT": "abc"}, "STRUCTRAG_LLM_TIMEOUT"),
        ([], {"STRUCTRAG_LLM_MODE": "tool"}, "unknown LLM mode 'tool'"),
        ([], {"STRUCTRAG_LLM_MODEL": ""}, "STRUCTRAG_LLM_MODEL"),
    ],
    ids=["url-without-scheme", "timeout-not-a-number", "unknown-mode", "no-model"],
)
def test_ask_names_bad_llm_settings(
    example_index: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    flags: list[str],
    env: dict[str, str],
    named: str,
) -> None:
    from structrag.cli import main

    monkeypatch.setenv("STRUCTRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STRUCTRAG_LLM_MODEL", "test-model")
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    question = ["ask", "When did Marco adopt Biscuit?", "--db", str(example_index)]
    with pytest.raises(SystemExit) as info:
        main([*question, "--answer", "--json", *flags])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert named in err and "no LLM configured" not in err


def test_ask_without_any_llm_settings_still_answers_with_the_context(
    example_index: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from structrag.cli import main

    for name in ("STRUCTRAG_LLM_BASE_URL", "STRUCTRAG_LLM_MODEL", "STRUCTRAG_LLM_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("STRUCTRAG_LLM_MODE", "tool")  # not used: no endpoint is configured
    question = ["ask", "When did Marco adopt Biscuit?", "--db", str(example_index)]
    main([*question, "--answer", "--json", "--translator", "llm"])
    data = json.loads(capsys.readouterr().out)
    assert "no LLM configured" in data["answer"]["error"] and data["message_ids"]


def test_the_python_api_names_bad_llm_settings_and_follows_changed_ones(
    ix: Index, monkeypatch: pytest.MonkeyPatch
) -> None:
    from structrag import ConfigError
    from structrag.llm.config import LLMConfig

    monkeypatch.setenv("STRUCTRAG_LLM_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("STRUCTRAG_LLM_MODEL", "test-model")
    monkeypatch.setenv("STRUCTRAG_LLM_TIMEOUT", "abc")
    with pytest.raises(ConfigError, match="STRUCTRAG_LLM_TIMEOUT"):
        ix.ask("When did Marco adopt Biscuit?", answer=True)
    monkeypatch.delenv("STRUCTRAG_LLM_TIMEOUT")
    first = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout=1.0)
    second = LLMConfig(base_url="http://127.0.0.1:9/v1", model="m", timeout=30.0)
    client = ix._question_llm("llm", first, needed=True)
    assert ix._question_llm("llm", first, needed=True) is client
    changed = ix._question_llm("llm", second, needed=True)
    assert changed is not client and changed is not None


def test_citation_shapes_tell_ids_from_words() -> None:
    from structrag.answer import _shape

    assert _shape("m999") == _shape("m11") and _shape("D9:99") == _shape("D1:3")
    assert _shape("mem-77aa") == _shape("mem-9f0a1b2c3d4e")  # memory ids of hex digits
    assert _shape("12:30") != _shape("D1:3") and _shape("2019") != _shape("m11")
    assert _shape("image") == "image" and _shape("beef") == "beef"
