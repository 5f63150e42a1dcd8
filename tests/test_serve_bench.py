"""``structrag bench serve``, briefly: it measures what it says, and the CLI through a
server is faster than a CLI that opens the files."""

from __future__ import annotations

import json
from pathlib import Path

from structrag.bench.serve import run_serve_bench, synthetic_conversation


def test_synthetic_conversations_are_stable_and_well_formed() -> None:
    first = synthetic_conversation("c", 30, seed=5)
    assert first == synthetic_conversation("c", 30, seed=5)
    assert [m["id"] for m in first] == [f"c-{i}" for i in range(30)]
    assert all(m["text"] and m["speaker"] != m["recipients"][0] for m in first)


def test_a_short_run_reports_every_endpoint(tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run_serve_bench(
        out, seconds=3, clients=3, readers=1, base_conversations=1, cli_runs=1, log=lambda _: None
    )
    saved = json.loads((out / "serve.json").read_text())
    assert saved["requests"] == result["requests"] > 0
    assert result["errors"] == 0, result
    assert set(result["endpoints"]) == {"ask", "memory add", "memory search"}
    assert all(
        e["n"] > 0 and e["p50"] <= e["p95"] <= e["p99"] for e in result["endpoints"].values()
    )
    assert result["server_exit_code"] == 0 and result["server_peak_rss_mb"] > 50
    cli = result["cli_ask_s"]
    assert cli["through_server"]["p50"] < cli["opening_the_files"]["p50"]
    assert "| ask |" in (out / "serve.md").read_text()
