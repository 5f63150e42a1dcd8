"""Opt-in: LLM extraction against a real endpoint (``-m llm_live``; runs only when
``STRUCTRAG_LLM_BASE_URL`` and ``STRUCTRAG_LLM_MODEL`` are set), e.g. llama.cpp's server:

    llama-server -m model.gguf --port 8080
    STRUCTRAG_LLM_BASE_URL=http://127.0.0.1:8080/v1 STRUCTRAG_LLM_MODEL=local \\
        pytest -m llm_live tests/test_llm_live.py

A tiny model may answer badly; what is checked is the contract: every message ends with
knowledge or a recorded failure, a second run makes no call, a dry run makes none.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from structrag import Index
from structrag.index import estimate_ingest
from structrag.llm.config import LLMConfig
from tests.llm_helpers import CHAT, write_chat

pytestmark = [
    pytest.mark.llm_live,
    pytest.mark.skipif(
        not os.environ.get("STRUCTRAG_LLM_BASE_URL"),
        reason="set STRUCTRAG_LLM_BASE_URL (and STRUCTRAG_LLM_MODEL) to run against a real LLM",
    ),
]


def test_live_extraction_contract(tmp_path: Path) -> None:
    config = LLMConfig.resolve(max_retries=int(os.environ.get("STRUCTRAG_LLM_MAX_RETRIES", "2")))
    chat = write_chat(tmp_path / "chat.jsonl")
    db = tmp_path / "ix"
    estimate = estimate_ingest(db, [chat], extractor="llm", llm=config)
    assert estimate["llm"]["calls"] == len(CHAT) and not db.exists()
    with Index(db) as index:
        (report,) = index.ingest([chat], extractor="llm", llm=config)
        assert report.llm is not None and report.llm["calls"] >= len(CHAT)
        failed = {str(r[0]) for r in index.store.sql("SELECT message_id FROM extraction_failures")}
        assert report.messages_failed == len(failed)
        for stored in index.messages():
            knowledge = index.show(stored.message.id)["knowledge"]
            assert knowledge or stored.message.id in failed
        (again,) = index.ingest([chat], extractor="llm", llm=config, force=True)
        assert again.llm is not None and again.llm["calls"] == 0
        stats = index.stats()["extractors"]["llm"]
        assert stats["failed"] == len(failed)
