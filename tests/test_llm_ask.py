"""LLM question translation and written answers, against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from structrag import Index
from structrag.llm.config import LLMConfig
from structrag.translate.llm import QuestionQuery, to_translation
from tests.openai_server import Reply, serve

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
