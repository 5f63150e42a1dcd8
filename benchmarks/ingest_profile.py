"""Where ingest time goes: a profile of one warm ingest, grouped by component.

    python benchmarks/ingest_profile.py PATH [--top 25]

PATH is a conversation file, e.g. LoCoMo's ``locomo10.json`` (github.com/snap-research/locomo,
CC BY-NC 4.0; not shipped with structrag). The pipeline is loaded by a first ingest, then a
second ingest into a fresh index runs under ``cProfile`` in one process (``workers=1``, so
every stage is in the profile; the profiler itself adds overhead). It prints the exclusive
time of each component (the spaCy pipeline, structrag's extraction code, Whoosh, DuckDB,
pydantic, the rest) and the top functions by cumulative time.

It also times the spaCy pipeline alone on the same texts (``nlp.pipe`` with the components
the extractor uses), which bounds what any extractor built on it can reach per CPU core.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from pathlib import Path

from structrag import Index
from structrag.bench.perf import parser_rate

#: (component, path fragments of the code it covers), first match wins.
COMPONENTS = (
    ("spaCy + thinc (pipeline, token access)", ("/spacy/", "/thinc/", "spacy/", "thinc/")),
    ("structrag extraction (tree walks)", ("/structrag/extract/",)),
    ("Whoosh (text index)", ("/whoosh/",)),
    ("DuckDB (store)", ("/duckdb", "duckdb_store", "'duckdb")),
    ("pydantic (models)", ("/pydantic", "pydantic_core")),
    ("structrag ingest + embeddings", ("/structrag/",)),
)


def component(filename: str) -> str:
    for name, fragments in COMPONENTS:
        if any(f in filename for f in fragments):
            return name
    return "other (numpy, stdlib, builtins)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("path", type=Path, help="conversation file (e.g. LoCoMo JSON)")
    parser.add_argument("--top", type=int, default=25, help="functions to list")
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} not found (LoCoMo: github.com/snap-research/locomo)")
    with tempfile.TemporaryDirectory() as tmp:
        with Index(Path(tmp) / "warm") as index:
            index.ingest([args.path], workers=1)  # loads the pipeline
        with Index(Path(tmp) / "profiled") as index:
            profile = cProfile.Profile()
            started = time.perf_counter()
            profile.enable()
            (report,) = index.ingest([args.path], workers=1)
            profile.disable()
            seconds = time.perf_counter() - started
    messages = report.messages_added
    stats = pstats.Stats(profile)
    by_component: dict[str, float] = {}
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]]
    raw = stats.stats  # type: ignore[attr-defined]
    for (filename, _, function), (_, _, tottime, _, _) in raw.items():
        key = component(filename if filename != "~" else function)
        by_component[key] = by_component.get(key, 0.0) + tottime
    total = sum(by_component.values())
    print(f"{messages:,} messages in {seconds:.2f} s under the profiler, one process")
    print(f"{'component':<38} {'seconds':>8} {'share':>6} {'ms/msg':>7}")
    for name, spent in sorted(by_component.items(), key=lambda kv: -kv[1]):
        print(f"{name:<38} {spent:8.2f} {spent / total:6.1%} {spent / messages * 1000:7.2f}")
    rate = parser_rate([args.path])
    print(
        f"\nspaCy pipeline alone, no profiler: {rate:.0f} messages per CPU-second "
        f"({1000 / rate:.2f} ms/msg): on 2 cores at most {2 * rate:.0f} messages/s "
        "before any extraction, storage or indexing"
    )
    print(f"\ntop {args.top} functions by cumulative time:")
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
