"""Helpers for the LLM tests: conversation files and settings for the local server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from structrag.llm.config import LLMConfig
from tests.openai_server import FakeOpenAIServer

#: An extraction answer that finds nothing.
EMPTY: dict[str, Any] = {"entities": [], "actions": [], "topics": []}

CHAT = [
    ("Kim", "I booked the flights to Tokyo for April."),
    ("Lee", "Great! Do you need a hotel near Shibuya?"),
    ("Kim", "Yes, and my sister Mina is coming with me."),
    ("Lee", "Mina will love the Ghibli Museum."),
    ("Kim", "She adopted a beagle named Biscuit last year."),
    ("Lee", "Bring photos of Biscuit then."),
]


#: The variables that configure the LLM: a test clears them, so a developer's own settings
#: never reach the fake server's tests.
LLM_ENV = (
    "STRUCTRAG_LLM_BASE_URL",
    "STRUCTRAG_LLM_MODEL",
    "STRUCTRAG_LLM_API_KEY",
    "STRUCTRAG_LLM_CONCURRENCY",
    "STRUCTRAG_LLM_TIMEOUT",
    "STRUCTRAG_LLM_MODE",
    "STRUCTRAG_LLM_MAX_RETRIES",
    "STRUCTRAG_LLM_MAX_TOKENS",
)


def clear_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unset every :data:`LLM_ENV` variable for the test."""
    for name in LLM_ENV:
        monkeypatch.delenv(name, raising=False)


def write_chat(path: Path, rows: list[tuple[str, str]] | None = None, **extra: Any) -> Path:
    """A JSON Lines chat ``friends`` with ids m1, m2 ... (``extra`` keys on every row)."""
    lines = [
        json.dumps({"id": f"m{i}", "conversation": "friends", "speaker": s, "text": t, **extra})
        for i, (s, t) in enumerate(rows or CHAT, start=1)
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def config(server: FakeOpenAIServer, **overrides: Any) -> LLMConfig:
    """Settings for the test server: fast backoff, short timeout, no environment."""
    settings: dict[str, Any] = {
        "base_url": server.url,
        "model": "test-model",
        "backoff": 0.01,
        "max_backoff": 2.0,
        "timeout": 5.0,
        "max_retries": 2,
        "env": {},
    }
    settings.update(overrides)
    return LLMConfig.resolve(**settings)
