"""The writer's memory as an index grows, one input file after another.

    python benchmarks/writer_memory.py --data locomo_dev.json [--messages 200000]
        [--shard 25000] [--json OUT]

It writes a synthetic corpus of ``--messages`` LoCoMo-format messages in files of
about ``--shard`` (whole conversations: the corpus ``structrag bench perf`` ingests; LoCoMo:
github.com/snap-research/locomo, CC BY-NC 4.0, not shipped with structrag), then ingests
the files into one index, one ``Index.ingest`` call per file, in this process (2
extraction workers). After each file it prints the writer's peak during that file's
ingest (RSS of this process, and PSS of it and its workers), its RSS once the file is
committed, and what DuckDB's buffer pool holds (``duckdb_memory()``). A figure that
grows with every file is memory the writer keeps as the store grows: the peak of a
1,000,000-message ingest is its sum.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from structrag import Index
from structrag.bench.machine import environment
from structrag.bench.perf import TreePeak, process_memory_kb
from structrag.bench.synth import write_corpus

MEMORY = (
    "SELECT tag, memory_usage_bytes FROM duckdb_memory() WHERE memory_usage_bytes > 0 ORDER BY 1"
)


def measure(index: Index, shard: Path) -> dict[str, Any]:
    """Ingest one file into ``index``; the writer's memory during and after it."""
    with TreePeak() as sampler:
        start = time.perf_counter()
        (report,) = index.ingest([shard], workers=2)
        seconds = time.perf_counter() - start
    peak = sampler.peak()
    duck = index.store.sql(MEMORY)
    return {
        "file": shard.name,
        "messages_added": report.messages_added,
        "seconds": round(seconds, 1),
        "peak_writer_rss_mb": peak["process"],
        "peak_together_pss_mb": peak["together_pss"],
        "writer_rss_after_mb": process_memory_kb(os.getpid(), "VmRSS") // 1024,
        "duckdb_mb": {str(tag): round(int(size) / 2**20, 1) for tag, size in duck},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--data", type=Path, required=True, help="a LoCoMo-format file")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--shard", type=int, default=25_000, help="messages per file")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"{args.data} not found (LoCoMo: github.com/snap-research/locomo)")
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        shards = write_corpus(
            [args.data], args.messages, Path(tmp) / "corpus", shard_size=args.shard
        )
        with Index(Path(tmp) / "index") as index:
            for shard in shards:
                row = measure(index, shard)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        result = {"environment": environment(" ".join(sys.argv)), "files": rows}
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
