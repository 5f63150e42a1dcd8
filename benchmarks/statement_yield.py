"""What the offline statement patterns find in a conversation file, how fast, and a sample
for a person to judge.

    python benchmarks/statement_yield.py PATH [--sample 30] [--seed 0] [--json OUT]

PATH is any file ``structrag ingest`` reads, e.g. LoCoMo's ``locomo10.json``
(github.com/snap-research/locomo, CC BY-NC 4.0; not shipped with structrag). Every message
goes through :func:`structrag.memory.statement_rules.extract_statements` in one process;
the script prints

* the yield: statements per category and per predicate, negated ones, tenses, and how
  many messages give at least one;
* the speed in messages per second, the pipeline already loaded (its loading is timed
  apart);
* a random sample of statements (``--seed`` makes it repeatable), each with its speaker,
  the fields, and the sentence of the message it came from with the span in [brackets],
  so that precision can be checked by hand.

Nothing is kept: the message texts are printed, never written to the repository.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from structrag.importers import load_source
from structrag.memory.statement_rules import extract_statements
from structrag.memory.statements import Statement
from structrag.models import Message
from structrag.nlp.pipeline import DEFAULT_MODEL, load_pipeline

_SENTENCE_END = re.compile(r"[.!?\n]")


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence (roughly) around ``text[start:end]``, the span in [brackets]."""
    before = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    after = _SENTENCE_END.search(text, end)
    stop = after.end() if after else len(text)
    return (
        text[before:start].lstrip() + "[" + text[start:end] + "]" + text[end:stop].rstrip()
    ).replace("\n", " ")


def measure(messages: list[Message]) -> tuple[list[list[Statement]], float, float]:
    """The statements of each message, the seconds to load the pipeline, and the seconds
    to extract (pipeline loaded)."""
    began = time.perf_counter()
    load_pipeline(DEFAULT_MODEL, ner=False)
    extract_statements(messages[:8])  # warm the lemma tables and caches
    loaded = time.perf_counter() - began
    began = time.perf_counter()
    found = extract_statements(messages)
    return found, loaded, time.perf_counter() - began


def summary(
    messages: list[Message], found: list[list[Statement]], seconds: float
) -> dict[str, Any]:
    flat = [s for statements in found for s in statements]
    return {
        "messages": len(messages),
        "statements": len(flat),
        "messages_with_statements": sum(1 for statements in found if statements),
        "seconds": round(seconds, 2),
        "messages_per_second": round(len(messages) / seconds, 1) if seconds else None,
        "by_category": dict(Counter(s.category for s in flat).most_common()),
        "by_predicate": dict(Counter(s.predicate for s in flat).most_common()),
        "negated": sum(s.negated for s in flat),
        "by_tense": dict(Counter(s.tense for s in flat).most_common()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("path", type=Path, help="conversation file (e.g. LoCoMo JSON)")
    parser.add_argument("--sample", type=int, default=30, help="statements to print")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the counts here as JSON")
    args = parser.parse_args(argv)
    if not args.path.exists():
        parser.error(f"{args.path} not found (LoCoMo: github.com/snap-research/locomo)")
    messages = [m for m in load_source(args.path).messages if m.text.strip()]
    found, loaded, seconds = measure(messages)
    figures = summary(messages, found, seconds)
    print(
        f"{args.path.name}: {figures['messages']} messages, {figures['statements']} statements "
        f"from {figures['messages_with_statements']} messages; "
        f"{figures['messages_per_second']} msg/s ({seconds:.1f} s, pipeline load {loaded:.1f} s)"
    )
    for key in ("by_category", "by_predicate", "by_tense"):
        print(
            f"  {key.replace('_', ' ')}: " + ", ".join(f"{k} {v}" for k, v in figures[key].items())
        )
    print(f"  negated: {figures['negated']}")
    pairs = [(m, s) for m, statements in zip(messages, found, strict=True) for s in statements]
    rng = random.Random(args.seed)
    sample = rng.sample(pairs, min(args.sample, len(pairs)))
    print(f"\nA random sample of {len(sample)} (seed {args.seed}):")
    for n, (message, s) in enumerate(sample, 1):
        flags = " NEG" if s.negated else ""
        print(
            f"{n:3}. {s.text}  [{s.category}/{s.predicate}{flags}, {s.tense}, "
            f"conf {s.confidence:.2f}]\n"
            f"     {message.speaker} ({message.id}): "
            + sentence_around(message.text, s.start, s.end)
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
