"""How many of an LLM extraction's entity names the offline spaCy extractor also finds.

    python benchmarks/typeagent_entity_recall.py TRANSCRIPT TYPEAGENT_INDEX_JSON

Ingests the transcript with the spaCy extractor, aligns its messages with the messages of
a TypeAgent/KnowPro index of the same conversation (LLM-extracted, e.g. the Behind the Tech
episode 53 files), and counts, for every entity ref in the LLM index, whether our
extraction of the same message has an entity with that name. Names are compared by their
normalised key (stems, lower case): *exact* means equal keys; *lenient* also accepts one
name's words inside the other's ("Arthur C. Clarke" vs "Clarke"). Refs are split into
metadata (speaker and listener names, which every extractor gets from the transcript
itself) and content entities.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from structrag import Entity, Index
from structrag.analysis import term_key


def _norm_text(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _match(name: str, ours: set[str]) -> tuple[bool, bool]:
    key = term_key(name)
    if key in ours:
        return True, True
    words = set(key.split())
    lenient = any(words and (words <= set(o.split()) or set(o.split()) <= words) for o in ours)
    return False, lenient


def run(transcript: Path, typeagent_index: Path) -> dict[str, Any]:
    data = json.loads(typeagent_index.read_text(encoding="utf-8"))
    theirs = ["\n".join(m["textChunks"]) for m in data["messages"]]
    with tempfile.TemporaryDirectory() as tmp, Index(Path(tmp) / "idx") as index:
        index.ingest([transcript])
        messages = list(index.messages())
        entities: dict[str, set[str]] = {m.message.id: set() for m in messages}
        for ref in index.refs("entity"):
            assert isinstance(ref.knowledge, Entity)
            entities[ref.message_id].add(term_key(ref.knowledge.name))
    by_text = {_norm_text(m.message.text): m.message.id for m in messages}
    aligned: dict[int, str] = {}
    for ordinal, text in enumerate(theirs):
        found = by_text.get(_norm_text(text))
        if found is not None:
            aligned[ordinal] = found
    speakers = {
        term_key(n)
        for m in data["messages"]
        for n in [m["metadata"].get("speaker"), *m["metadata"].get("listeners", [])]
        if n
    }
    counts: Counter[str] = Counter()
    missed: Counter[str] = Counter()
    unique_found: dict[str, bool] = {}
    all_ours = set().union(*entities.values())
    for ref in data["semanticRefs"]:
        if ref["knowledgeType"] != "entity":
            continue
        name = ref["knowledge"]["name"]
        group = "metadata" if term_key(name) in speakers else "content"
        counts[f"{group}_total"] += 1
        counts["total"] += 1
        ordinal = ref["range"]["start"]["messageOrdinal"]
        ours = entities.get(aligned.get(ordinal, ""), set())
        exact, lenient = _match(name, ours)
        counts[f"{group}_exact"] += exact
        counts[f"{group}_lenient"] += lenient
        counts["exact"] += exact
        counts["lenient"] += lenient
        if not lenient:
            missed[name] += 1
        unique_found[term_key(name)] = (
            unique_found.get(term_key(name), False) or _match(name, all_ours)[1]
        )
    return {
        "llm_messages": len(theirs),
        "aligned_messages": len(aligned),
        "entity_refs": counts["total"],
        "found_exact": counts["exact"],
        "found_lenient": counts["lenient"],
        "metadata_refs": counts["metadata_total"],
        "metadata_found_exact": counts["metadata_exact"],
        "content_refs": counts["content_total"],
        "content_found_exact": counts["content_exact"],
        "content_found_lenient": counts["content_lenient"],
        "unique_names": len(unique_found),
        "unique_names_found_anywhere": sum(unique_found.values()),
        "most_missed": missed.most_common(25),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("transcript", type=Path)
    parser.add_argument("typeagent_index", type=Path)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    result = run(args.transcript, args.typeagent_index)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    total = result["entity_refs"]
    print(f"aligned {result['aligned_messages']} of {result['llm_messages']} LLM messages")
    print(f"entity refs in the LLM index: {total}")
    print(
        f"  found (same name key):      {result['found_exact']} "
        f"({result['found_exact'] / total:.1%})"
    )
    print(
        f"  found (lenient):            {result['found_lenient']} "
        f"({result['found_lenient'] / total:.1%})"
    )
    print(
        f"  metadata (speaker) refs:    {result['metadata_found_exact']} of "
        f"{result['metadata_refs']}"
    )
    content = result["content_refs"]
    print(
        f"  content refs:               {result['content_found_exact']} exact, "
        f"{result['content_found_lenient']} lenient of {content} "
        f"({result['content_found_lenient'] / max(content, 1):.1%})"
    )
    print(
        f"unique names found anywhere:  {result['unique_names_found_anywhere']} of "
        f"{result['unique_names']}"
    )
    print("most missed: " + "; ".join(f"{n} ({c})" for n, c in result["most_missed"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
