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

The measurement lives in :func:`structrag.bench.perf.ingest_throughput`; ``structrag bench
perf`` runs it together with latency, size and scaling.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from structrag.bench.perf import ingest_throughput


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("path", type=Path, help="conversation file (e.g. LoCoMo JSON)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} not found (LoCoMo: github.com/snap-research/locomo)")
    summary = ingest_throughput([args.path], repeat=args.repeat, workers=args.workers)
    print(
        f"{args.path.name}: {summary['cli']['messages']} messages, {args.workers} workers, "
        f"{os.cpu_count()} cores, {args.repeat} runs (median, min-max)"
    )
    for label, info in summary.items():
        if label.startswith("ratio_to_"):
            ratios = ", ".join(f"{k} {v:.2f}" for k, v in info.items())
            print(f"  {label}: {ratios}")
            continue
        print(
            f"  {label:<16} {info['messages_per_second_median']:5.0f} msg/s "
            f"({info['messages_per_second_min']:.0f}-{info['messages_per_second_max']:.0f}), "
            f"{info['seconds_median']:.2f} s"
        )
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
