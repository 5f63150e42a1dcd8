"""The scale figures of ``bench perf``: the memory of a process tree (extraction workers
are the fork server's children, so ``RUSAGE_CHILDREN`` cannot see them), spaCy's own
two-process pipe as the ceiling an ingest is compared with, and ingest on a local Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from structrag.bench.perf import TreePeak, parser_throughput, ray_throughput
from tests.test_bench import qa_sample

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="needs /proc")


@pytest.fixture
def qa_file(tmp_path: Path) -> Path:
    path = tmp_path / "qa.json"
    path.write_text(json.dumps([qa_sample()]), encoding="utf-8")
    return path


def test_tree_peak_counts_the_memory_of_grandchildren() -> None:
    # A child that starts a grandchild holding 300 MB: only a walk of the tree sees it.
    grandchild = (
        "import time; b = bytearray(300 * 2**20); b[::4096] = b'x' * len(b[::4096]); time.sleep(3)"
    )
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    with TreePeak(interval=0.05) as sampler:
        proc = subprocess.Popen([sys.executable, "-c", child])
        time.sleep(2.5)
        proc.wait()
    peak = sampler.peak()
    assert peak["workers"] >= 300
    assert peak["together"] >= peak["workers"] + 1
    assert peak["together_pss"] >= 300  # the grandchild's pages are its own
    assert 0 < peak["process"] < peak["together"]
    assert peak["process_run"] >= peak["process"]


def test_parser_throughput_parses_every_message(qa_file: Path) -> None:
    count, seconds = parser_throughput([qa_file], workers=1)
    assert count == 8 and seconds > 0


def test_ray_throughput_ingests_every_message(qa_file: Path) -> None:
    result = ray_throughput([qa_file], workers=(1,))
    assert result["1"]["messages"] == 8
    assert result["1"]["messages_per_second_median"] > 0


@pytest.mark.parametrize("fmt", ["jsonl", "json", "whatsapp"])
def test_single_input_memory_benchmark_ingests_its_file_and_reports_peaks(
    tmp_path: Path, fmt: str
) -> None:
    """`benchmarks/single_input_memory.py` (the README's single-file memory figures) writes
    its chat, ingests it with the CLI and reports non-zero peaks and the commit."""
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "single_input_memory.py"
    out = tmp_path / "result.json"
    keep = tmp_path / "work"
    args = ["--messages", "40", "--format", fmt, "--json", str(out), "--keep", str(keep)]
    run = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    result = json.loads(out.read_text())
    assert result["messages"] == 40 and result["format"] == fmt
    assert 0 < result["tree_pss_mb"] <= result["tree_rss_mb"]
    assert result["ingest_rss_mb"] > 0 and "git_commit" in result["environment"]
    stats = subprocess.run(
        [sys.executable, "-m", "structrag", "stats", "--db", str(keep / "index"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads(stats.stdout)["messages"] == 40, stats.stderr
