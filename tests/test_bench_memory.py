"""``structrag bench memory`` end to end on a tiny LoCoMo-format file: a real DuckDB file
and Whoosh index in ``tmp_path``, real spaCy, no mocks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from structrag.bench.memory import run_memory
from structrag.cli import cli
from structrag.errors import ConfigError
from structrag.query.modes import SEARCH_MODES
from tests.test_bench import qa_sample


@pytest.fixture
def two_conversations(tmp_path: Path) -> Path:
    path = tmp_path / "qa.json"
    path.write_text(json.dumps([qa_sample("conv-a"), qa_sample("conv-b")]), encoding="utf-8")
    return path


def test_bench_memory_writes_speed_and_quality(two_conversations: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "memory", "--data", str(two_conversations), "--out", str(out)),
            *("--sizes", "60", "--samples", "6", "--quiet"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "## Speed" in result.output and "## Quality" in result.output
    assert (out / "memory.md").read_text() in result.output
    data = json.loads((out / "memory.json").read_text())
    assert set(data) == {"meta", "speed", "targets", "quality"}

    (row,) = data["speed"]
    assert row["size"] == 60 and row["preloaded"] >= 60
    assert row["add_ms"]["n"] == 6 and row["add_ms"]["p50"] > 0
    assert set(row["search_ms"]) == set(SEARCH_MODES)
    assert all(row["search_ms"][m]["p50"] > 0 for m in SEARCH_MODES)
    assert 0 < row["context_ms"]["p50"] <= row["context_ms"]["p95"]
    assert row["context_tokens_max"] <= 2000
    prune = row["prune"]
    assert prune["examined_per_second"] > 0 and prune["dry_run_examined"] >= 60
    # The real prune removes what the timed adds wrote, leaving the index as it was.
    assert prune["removed"] >= 6 and prune["left"] == 0
    assert isinstance(data["targets"]["add_p50_ms"]["met"], bool)

    quality = data["quality"]
    assert quality["replayed_messages"] == 16
    assert quality["questions"] == 10
    expected = {"ask (batch index)", "ask (replayed index)"}
    expected |= {f"memory search {m}" for m in SEARCH_MODES}
    assert set(quality["recall"]) == expected
    assert all(0.0 <= v <= 1.0 for v in quality["recall"].values())
    # Every question's evidence fits in 1,000 tokens of this small file.
    assert quality["recall"]["ask (batch index)"] == 1.0
    profile = quality["profile"]
    assert profile["entries"] >= 1
    assert profile["sample"][0]["source_text"]
    lines = (out / "memory_quality.jsonl").read_text().splitlines()
    assert len(lines) == 10 * len(expected)


def test_bench_memory_reuses_a_complete_index(two_conversations: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run_memory([two_conversations], out, sizes=[40], samples=4, quality=False)
    marker = out / "indexes" / "40.complete.json"
    built = marker.stat().st_mtime_ns
    second = run_memory([two_conversations], out, sizes=[40], samples=4, quality=False)
    assert marker.stat().st_mtime_ns == built
    # The real prune left the index as the build made it.
    assert first["speed"][0]["preloaded"] == second["speed"][0]["preloaded"]
    assert "quality" not in second


def test_bench_memory_needs_something_to_run(two_conversations: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        [
            *("bench", "memory", "--data", str(two_conversations), "--out", str(tmp_path)),
            *("--skip-speed", "--skip-quality"),
        ],
    )
    assert result.exit_code != 0
    assert isinstance(result.exception, ConfigError)
    assert "nothing to run" in str(result.exception)
