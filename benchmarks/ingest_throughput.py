"""Ingest throughput (messages/s) of the offline spaCy extractor, end to end.

    python benchmarks/ingest_throughput.py PATH [--repeat 3] [--workers 2] [--json OUT]

PATH is a conversation file, e.g. LoCoMo's ``locomo10.json`` (github.com/snap-research/locomo,
CC BY-NC 4.0; not shipped with structrag). Each repetition ingests PATH into a fresh index
three ways and reports messages per second:

* ``cli``: the ``structrag ingest`` command in a new process (interpreter start, imports,
  model load, extraction, DuckDB + Whoosh writes), what a user waits for;
* ``api-cold``: ``Index.ingest`` in a fresh process, timed from the call (includes
  importing spaCy and loading its pipeline);
* ``api-warm``: ``Index.ingest`` again in the same process into another fresh index (the
  pipeline already loaded), the rate of a long-running service.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_CHILD = r"""
import json, sys, tempfile, time
from pathlib import Path
from structrag import Index
path, workers = sys.argv[1], int(sys.argv[2])
out = {}
for label in ("api-cold", "api-warm"):
    with tempfile.TemporaryDirectory() as tmp, Index(Path(tmp) / "idx") as index:
        start = time.perf_counter()
        (report,) = index.ingest([path], workers=workers)
        out[label] = (report.messages_added, time.perf_counter() - start)
print(json.dumps(out))
"""


def run_once(path: Path, workers: int) -> dict[str, tuple[int, float]]:
    results: dict[str, tuple[int, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "structrag",
                "ingest",
                str(path),
                "--db",
                f"{tmp}/idx",
                "--json",
                "-q",
                "--workers",
                str(workers),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        elapsed = time.perf_counter() - start
        (report,) = json.loads(proc.stdout)
        results["cli"] = (report["messages_added"], elapsed)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(workers)],
        capture_output=True,
        text=True,
        check=True,
    )
    for label, (count, seconds) in json.loads(proc.stdout).items():
        results[label] = (int(count), float(seconds))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="conversation file (e.g. LoCoMo JSON)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} not found (LoCoMo: github.com/snap-research/locomo)")
    runs = [run_once(args.path, args.workers) for _ in range(args.repeat)]
    summary: dict[str, dict[str, float]] = {}
    print(
        f"{args.path.name}: {runs[0]['cli'][0]} messages, {args.workers} workers, "
        f"{os.cpu_count()} cores, {args.repeat} runs (median, min-max)"
    )
    for label in ("cli", "api-cold", "api-warm"):
        rates = [r[label][0] / r[label][1] for r in runs]
        seconds = [r[label][1] for r in runs]
        summary[label] = {
            "messages": runs[0][label][0],
            "seconds_median": statistics.median(seconds),
            "messages_per_second_median": statistics.median(rates),
            "messages_per_second_min": min(rates),
            "messages_per_second_max": max(rates),
        }
        print(
            f"  {label:<9} {statistics.median(rates):7.0f} msg/s "
            f"({min(rates):.0f}-{max(rates):.0f}), {statistics.median(seconds):.2f} s"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
