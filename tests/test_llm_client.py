"""The LLM building blocks: settings from flags and environment, retry timing, the
extraction schema (and its committed copy), and the core/adapter split."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from structrag.errors import ConfigError
from structrag.extract.llm_schema import MessageKnowledge, extraction_json_schema_text
from structrag.llm.config import LLMConfig

ROOT = Path(__file__).resolve().parent.parent

# -- settings ------------------------------------------------------------------------------


def test_settings_come_from_flags_then_environment() -> None:
    env = {
        "STRUCTRAG_LLM_BASE_URL": "http://127.0.0.1:8080/v1/",
        "STRUCTRAG_LLM_MODEL": "env-model",
        "STRUCTRAG_LLM_API_KEY": "sk-secret",
        "STRUCTRAG_LLM_CONCURRENCY": "8",
        "STRUCTRAG_LLM_TIMEOUT": "12.5",
        "STRUCTRAG_LLM_MODE": "JSON",
    }
    config = LLMConfig.resolve(model="flag-model", env=env)
    assert config.base_url == "http://127.0.0.1:8080/v1"
    assert config.model == "flag-model"
    assert (config.concurrency, config.timeout, config.mode) == (8, 12.5, "json")
    assert config.api_key == "sk-secret"
    assert "sk-secret" not in repr(config)
    assert "sk-secret" not in json.dumps(config.public_settings())
    local = LLMConfig.resolve(base_url="http://localhost:11434/v1", model="llama3.2", env={})
    assert local.api_key == "not-needed" and local.mode == "tools" and local.concurrency == 4


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        ({"model": "m"}, ["--llm-base-url", "STRUCTRAG_LLM_BASE_URL"]),
        ({"base_url": "http://x/v1"}, ["--llm-model", "STRUCTRAG_LLM_MODEL"]),
        ({"base_url": "localhost:8080", "model": "m"}, ["--llm-base-url"]),
        ({"base_url": "http://x/v1", "model": "m", "concurrency": 0}, ["--llm-concurrency"]),
        ({"base_url": "http://x/v1", "model": "m", "timeout": -1}, ["--llm-timeout"]),
        ({"base_url": "http://x/v1", "model": "m", "mode": "grammar"}, ["--llm-mode"]),
        ({"base_url": "http://x/v1", "model": "m", "max_retries": 99}, ["--llm-max-retries"]),
    ],
)
def test_bad_settings_say_which_flag_or_variable_to_set(
    settings: dict[str, object], names: list[str]
) -> None:
    with pytest.raises(ConfigError) as info:
        LLMConfig.resolve(env={}, **settings)  # type: ignore[arg-type]
    for name in names:
        assert name in str(info.value)


def test_a_non_number_in_the_environment_is_a_config_error() -> None:
    env = {"STRUCTRAG_LLM_CONCURRENCY": "many"}
    with pytest.raises(ConfigError, match="STRUCTRAG_LLM_CONCURRENCY"):
        LLMConfig.resolve(base_url="http://x/v1", model="m", env=env)


# -- retry timing --------------------------------------------------------------------------


def test_retry_after_headers() -> None:
    from structrag.llm.client import retry_after_seconds

    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 < (retry_after_seconds({"retry-after": when}) or 0) <= 30
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_grows_with_jitter_and_is_capped() -> None:
    from structrag.llm.client import InstructorLLM

    llm = InstructorLLM(
        LLMConfig.resolve(base_url="http://127.0.0.1:9/v1", model="m", backoff=1, env={})
    )
    try:
        for retry in range(1, 5):
            assert 2 ** (retry - 1) / 2 <= llm.backoff(retry) <= 2 ** (retry - 1)
        assert llm.backoff(20) <= 30
        assert llm.backoff(1, retry_after=7) == 7 and llm.backoff(1, retry_after=300) == 30
    finally:
        llm.close()


# -- schema and architecture ---------------------------------------------------------------


def test_the_committed_json_schema_is_the_generated_one() -> None:
    committed = (ROOT / "grammars" / "llm_extraction.schema.json").read_text(encoding="utf-8")
    assert committed == extraction_json_schema_text(), (
        "regenerate it: "
        "python -m structrag.extract.llm_schema > grammars/llm_extraction.schema.json"
    )


def test_the_schema_is_lenient_where_small_models_are_sloppy() -> None:
    answer = MessageKnowledge.model_validate(
        {
            "entities": [{"name": " Bob ", "types": "person", "extra": 1}],
            "actions": [{"verbs": "sign up", "tense": "Past tense"}],
            "topics": "cats",
        }
    )
    assert answer.entities[0].name == "Bob" and answer.entities[0].types == ["person"]
    assert answer.actions[0].tense == "past" and answer.topics == ["cats"]
    with pytest.raises(ValueError, match="tense"):
        MessageKnowledge.model_validate({"actions": [{"verbs": ["go"], "tense": "someday"}]})


def test_more_harmless_sloppiness_is_accepted() -> None:
    answer = MessageKnowledge.model_validate_json(
        json.dumps(
            {
                "entities": ["Biscuit", None, {"name": "Marco", "facets": {"mood": "happy"}}],
                "actions": [{"verbs": ["adopt", None], "negated": "false", "params": None}],
                "topics": ["dogs", None],
                "confidence": 0.9,  # an extra key beside the answer's own
            }
        ),
        strict=False,  # as the client validates
    )
    assert [e.name for e in answer.entities] == ["Biscuit", "Marco"]
    assert answer.entities[1].facets[0].name == "mood"
    assert answer.actions[0].verbs == ["adopt"] and answer.actions[0].negated is False
    assert answer.topics == ["dogs"]
    facet = {"name": "Biscuit", "facets": [{"name": "breed", "value": None}, {"name": "age"}]}
    assert MessageKnowledge.model_validate({"entities": [facet]}).entities[0].facets == []


@pytest.mark.parametrize(
    "answer",
    [
        {},
        {"knowledge": {"entities": [{"name": "Biscuit"}]}},
        {"name": "Biscuit", "types": ["dog"]},
        {"title": "MessageKnowledge", "type": "object", "properties": {"entities": {}}},
    ],
    ids=["empty", "wrapped", "inner-object", "schema"],
)
def test_an_object_of_another_shape_is_not_an_answer(answer: dict[str, object]) -> None:
    with pytest.raises(ValueError, match="entities, actions and topics"):
        MessageKnowledge.model_validate(answer)


# -- the client against the local server -----------------------------------------------------


def test_the_client_retries_and_counts() -> None:
    from structrag.extract.llm_prompt import SYSTEM_PROMPT
    from structrag.llm.base import Completion, LLMCallFailed
    from structrag.llm.client import InstructorLLM
    from tests.llm_helpers import EMPTY
    from tests.openai_server import Reply, serve

    rules = [
        ("rate", [Reply(status=429, headers={"retry-after-ms": "20"}), Reply(knowledge=EMPTY)]),
        ("junk", [Reply(raw="[1, 2"), Reply(knowledge={"topics": ["junk"]})]),
        ("down", [Reply(status=502)]),
        ("chatty", [Reply(knowledge=EMPTY, tool_call=False), Reply(knowledge={"topics": ["x"]})]),
    ]
    with serve(rules) as server:
        llm = InstructorLLM(
            LLMConfig.resolve(base_url=server.url, model="m", backoff=0.01, max_retries=2, env={})
        )
        try:

            def ask(text: str) -> Completion[MessageKnowledge]:
                messages = [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": text},
                ]
                return llm.complete(messages, MessageKnowledge)

            rate = ask("rate")
            assert rate.stats.calls == 2 and rate.stats.retries == 1
            junk = ask("junk")
            assert junk.value.topics == ["junk"]
            assert junk.stats.invalid_outputs == 1 and junk.stats.input_tokens > 0
            chatty = ask("chatty")  # answered in text, not with the tool: re-asked
            assert chatty.value.topics == ["x"] and chatty.stats.calls == 2
            assert "Validation Error" in json.dumps(server.calls_for("chatty")[1].body)
            with pytest.raises(LLMCallFailed, match="HTTP 502") as info:
                ask("down")
            assert info.value.stats.calls == 3 and info.value.stats.retries == 2
        finally:
            llm.close()


def test_the_client_loads_httpx_whole_before_its_first_request() -> None:
    """openai reads ``sys.modules["httpx"]`` on each response; spaCy's first import on
    another thread (an ingest's main thread, while requests are in flight) would leave it
    half-initialised there, and answered requests failed with AttributeError. The client
    imports it before any request."""
    import subprocess
    import sys

    pytest.importorskip("httpx")
    script = (
        "import sys\n"
        "from structrag.llm.client import InstructorLLM\n"
        "from structrag.llm.config import LLMConfig\n"
        "assert 'httpx' not in sys.modules, 'loaded already: the check proves nothing'\n"
        "InstructorLLM(LLMConfig(base_url='http://127.0.0.1:9/v1', model='m'))\n"
        "assert sys.modules['httpx'].Response\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
