"""The spaCy pipeline with numpy's matrix products against thinc's own (blis).

    python benchmarks/matmul_check.py PATH... [--rounds 3] [--json OUT]

The extraction workers switch their pipeline's matrix products from blis, thinc's
default, to numpy on one BLAS thread (:mod:`structrag.nlp.matmul`). This script checks
that the switch is only one of speed. It reads every message of each PATH with
structrag's importers (e.g. LoCoMo's ``locomo10.json``, github.com/snap-research/locomo,
CC BY-NC 4.0; not shipped with structrag) and, in one process held to one BLAS thread:

* parses the messages with both pipelines, alternating, ``--rounds`` times each, and
  reports CPU-seconds and messages per CPU-second (medians);
* compares every token's tag, head and dependency label between the two parses;
* extracts knowledge from every message with the offline extractor on each pipeline and
  compares the knowledge rows (conversation, message, kind, span, fields), repeats
  counted.

It exits 1 if a parse or a knowledge row differs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from structrag.extract.spacy_extractor import SpacyExtractor, pack_refs
from structrag.importers import load_source
from structrag.models import Message
from structrag.nlp.matmul import numpy_matmul, one_blas_thread
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline


def _parse(nlp: Any, texts: Sequence[str]) -> tuple[float, list[tuple[Any, ...]]]:
    started = time.process_time()
    docs = list(nlp.pipe(texts, batch_size=256))
    seconds = time.process_time() - started
    return seconds, [tuple((t.tag_, t.head.i, t.dep_) for t in doc) for doc in docs]


def _rows(nlp: Any, messages: Sequence[Message]) -> Counter[tuple[str, str, str]]:
    extractor = SpacyExtractor(workers=1)
    extractor._nlp = nlp
    rows: Counter[tuple[str, str, str]] = Counter()
    for message, refs in zip(messages, extractor.extract(messages), strict=True):
        rows.update((message.conversation, message.id, repr(row)) for row in pack_refs(refs))
    return rows


def _numpy_pipeline() -> Any:
    """A second copy of the pipeline (the first stays as loaded), with numpy's products."""
    import spacy

    from structrag.nlp import pipeline

    pipeline._import_spacy()
    nlp = spacy.load(
        DEFAULT_MODEL,
        exclude=["senter", "ner", "tokenizer"],
        disable=["attribute_ruler", "lemmatizer"],
    )
    pipeline._load_tokenizer(nlp)
    numpy_matmul(nlp)
    return nlp


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("paths", type=Path, nargs="+", help="conversation files")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    args = parser.parse_args(argv)
    one_blas_thread()
    messages = [m for p in args.paths for m in load_source(p).messages]
    texts = [m.text for m in messages]
    pipelines = {"numpy": _numpy_pipeline(), "blis": load_pipeline(DEFAULT_MODEL, ner=False)}
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
        "knowledge_rows": {k: sum(v.values()) for k, v in rows.items()},
        "rows_only_numpy": sum((rows["numpy"] - rows["blis"]).values()),
        "rows_only_blis": sum((rows["blis"] - rows["numpy"]).values()),
    }
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text + "\n")
    print(text)
    same = not differing and rows["numpy"] == rows["blis"]
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
