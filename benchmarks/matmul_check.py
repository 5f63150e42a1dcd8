"""The spaCy pipeline with numpy's matrix products against thinc's own (blis).

    python benchmarks/matmul_check.py PATH... [--rounds 3] [--json OUT]

:func:`structrag.nlp.pipeline.load_pipeline` runs the pipeline's matrix products through
numpy on one thread (:mod:`structrag.nlp.matmul`) rather than blis, thinc's default.
This script checks that the change is only one of speed. It reads every message of each
PATH with structrag's importers (e.g. LoCoMo's ``locomo10.json``,
github.com/snap-research/locomo, CC BY-NC 4.0; not shipped with structrag) and, in one
process with one BLAS thread:

* parses the messages with both pipelines, alternating, ``--rounds`` times each, and
  reports CPU-seconds and messages per CPU-second (medians);
* compares every token's tag, head and dependency label between the two parses;
* extracts knowledge from every message with the offline extractor on each pipeline and
  compares the knowledge rows (message, kind, span, fields) as sets.

It exits 1 if a parse or a knowledge row differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

from structrag.extract.spacy_extractor import SpacyExtractor, pack_refs
from structrag.importers import load_source
from structrag.models import Message
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline


def _parse(nlp: Any, texts: Sequence[str]) -> tuple[float, list[tuple[Any, ...]]]:
    started = time.process_time()
    docs = list(nlp.pipe(texts, batch_size=256))
    seconds = time.process_time() - started
    return seconds, [tuple((t.tag_, t.head.i, t.dep_) for t in doc) for doc in docs]


def _rows(nlp: Any, messages: Sequence[Message]) -> set[tuple[str, str]]:
    extractor = SpacyExtractor(workers=1)
    extractor._nlp = nlp
    rows: set[tuple[str, str]] = set()
    for message, refs in zip(messages, extractor.extract(messages), strict=True):
        rows.update((message.id, repr(row)) for row in pack_refs(refs))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="conversation files")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    threadpool_limits(1)
    messages = [m for p in args.paths for m in load_source(p).messages]
    texts = [m.text for m in messages]
    pipelines = {
        "numpy": load_pipeline(DEFAULT_MODEL, ner=False),
        "blis": load_pipeline(DEFAULT_MODEL, ner=False, blis=True),
    }
    for nlp in pipelines.values():
        list(nlp.pipe(texts[:50]))
    seconds: dict[str, list[float]] = {name: [] for name in pipelines}
    parses: dict[str, list[tuple[Any, ...]]] = {}
    for _ in range(args.rounds):
        for name, nlp in pipelines.items():
            spent, parses[name] = _parse(nlp, texts)
            seconds[name].append(spent)
    differing = sum(a != b for a, b in zip(parses["numpy"], parses["blis"], strict=True))
    rows = {name: _rows(nlp, messages) for name, nlp in pipelines.items()}
    result = {
        "messages": len(messages),
        "rounds": args.rounds,
        "cpu_seconds_median": {k: round(statistics.median(v), 2) for k, v in seconds.items()},
        "messages_per_cpu_second": {
            k: round(len(texts) / statistics.median(v), 1) for k, v in seconds.items()
        },
        "parses_differing": differing,
        "knowledge_rows": {k: len(v) for k, v in rows.items()},
        "rows_only_numpy": len(rows["numpy"] - rows["blis"]),
        "rows_only_blis": len(rows["blis"] - rows["numpy"]),
    }
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    same = not differing and rows["numpy"] == rows["blis"]
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
