"""Peak memory of ingesting ONE large input, a file of short chat messages.

    python benchmarks/single_input_memory.py --messages 1000000
        [--format jsonl|json|whatsapp|typeagent] [--json OUT] [--keep DIR]

It writes ``--messages`` one-to-five-word messages between two people (deterministic) to
one file, JSON Lines, one JSON document (``{"messages": [...]}``), a WhatsApp export or a
TypeAgent index (with three semantic refs per message, kept by kind as KnowPro keeps
them rather than by message, and a term index over them), all read as streams, runs
``structrag
ingest FILE --db DIR --quiet`` in a new process and samples, every 0.25 s, the resident
memory of that process and of its extraction workers (Linux ``/proc``): RSS of the
ingest process, RSS of the whole tree (which counts the pages the forked workers share
with it once per process), and PSS of the whole tree (each shared page split between the
processes that map it: the memory the ingest really takes). Short messages are the worst
case per byte of input: the per-message costs dominate. The reliability target is a peak
under 1.5 GB for any single input, the scale target 2 GB at 1,000,000 messages.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from structrag.bench.machine import environment
from structrag.bench.perf import process_memory_kb

WORDS = [
    *("yes", "no", "haha", "ok", "sure", "great", "thanks", "lol", "maybe", "tomorrow"),
    *("dinner", "pizza", "movie", "park", "dog", "cat", "run", "gym", "work", "Paris"),
    *("beach", "coffee"),
]


def write_chat(path: Path, messages: int, fmt: str = "jsonl") -> None:
    if fmt == "typeagent":
        write_typeagent(path, messages)
        return
    rnd = random.Random(0)
    with path.open("w", encoding="utf-8") as out:
        if fmt == "json":
            out.write('{"id": "chat", "messages": [\n')
        for i in range(messages):
            text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 5)))
            day, second = 1 + (i // 10_000) % 28, i % 3600
            speaker = ("Ann", "Bob")[i % 2]
            if fmt == "whatsapp":
                stamp = f"{day:02d}/01/2024, 10:{second // 60:02d}:{second % 60:02d}"
                out.write(f"[{stamp}] {speaker}: {text}\n")
                continue
            line = {
                "id": str(i),
                "speaker": speaker,
                "text": text,
                "timestamp": f"2024-01-{day:02d}T10:{second // 60:02d}:{second % 60:02d}",
            }
            if fmt == "json":
                out.write(json.dumps(line) + (",\n" if i + 1 < messages else "\n"))
            else:
                out.write(json.dumps(line) + "\n")
        if fmt == "json":
            out.write("]}\n")


def write_typeagent(path: Path, messages: int) -> None:
    """A TypeAgent index of ``messages`` messages; message ``i`` names ``WORDS[i % 22]``,
    which is its entity (refs ``[0, n)``), its topic (``[2n, 3n)``) and the object of its
    action (``[n, 2n)``); the term index lists each word's refs."""
    rnd = random.Random(0)
    n = len(WORDS)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"nameTag": "chat", "messages": [\n')
        for i in range(messages):
            words = [rnd.choice(WORDS) for _ in range(rnd.randint(0, 4))]
            words.insert(rnd.randint(0, len(words)), WORDS[i % n])
            day, second = 1 + (i // 10_000) % 28, i % 3600
            message = {
                "textChunks": [" ".join(words)],
                "metadata": {
                    "speaker": ("Ann", "Bob")[i % 2],
                    "listeners": [("Bob", "Ann")[i % 2]],
                },
                "tags": [],
                "timestamp": f"2024-01-{day:02d}T10:{second // 60:02d}:{second % 60:02d}Z",
            }
            out.write(json.dumps(message) + (",\n" if i + 1 < messages else "\n"))
        out.write('], "tags": [], "semanticRefs": [\n')
        for kind in ("entity", "action", "topic"):
            for i in range(messages):
                word = WORDS[i % n]
                knowledge: dict[str, object] = (
                    {"name": word, "type": ["thing"]}
                    if kind == "entity"
                    else {"text": word}
                    if kind == "topic"
                    else {
                        "verbs": ["say"],
                        "verbTense": "past",
                        "subjectEntityName": "none",
                        "objectEntityName": word,
                        "indirectObjectEntityName": "none",
                    }
                )
                ref = {
                    "range": {"start": {"messageOrdinal": i, "chunkOrdinal": 0}},
                    "knowledgeType": kind,
                    "knowledge": knowledge,
                }
                last = kind == "topic" and i + 1 == messages
                out.write(json.dumps(ref) + ("\n" if last else ",\n"))
        out.write('], "semanticIndexData": {"items": [\n')
        for w, word in enumerate(WORDS):
            ordinals = [
                {"semanticRefOrdinal": block * messages + i, "score": 1}
                for block in range(3)
                for i in range(w, messages, n)
            ]
            item = {"term": word.lower(), "semanticRefOrdinals": ordinals}
            out.write(json.dumps(item) + (",\n" if w + 1 < n else "\n"))
        out.write(']}, "fileHeader": {"version": "0.1"}}\n')


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                children = (task / "children").read_text(encoding="ascii")
                todo.extend(int(c) for c in children.split())
        except OSError:
            continue
    return found


def measure(path: Path, db: Path) -> dict[str, float]:
    command = [sys.executable, "-m", "structrag", "ingest", str(path), "--db", str(db)]
    started = time.perf_counter()
    proc = subprocess.Popen([*command, "--quiet"])
    peaks = {"ingest_rss_mb": 0.0, "tree_rss_mb": 0.0, "tree_pss_mb": 0.0}
    while proc.poll() is None:
        pids = _tree(proc.pid)
        sample = {
            "ingest_rss_mb": process_memory_kb(proc.pid, "VmRSS") / 1024,
            "tree_rss_mb": sum(process_memory_kb(p, "VmRSS") for p in pids) / 1024,
            "tree_pss_mb": sum(process_memory_kb(p, "Pss", "smaps_rollup") for p in pids) / 1024,
        }
        peaks = {k: max(v, sample[k]) for k, v in peaks.items()}
        time.sleep(0.25)
    if proc.returncode:
        raise SystemExit(f"the ingest failed with exit code {proc.returncode}")
    seconds = time.perf_counter() - started
    return {**{k: round(v) for k, v in peaks.items()}, "seconds": round(seconds, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument(
        "--format", choices=("jsonl", "json", "whatsapp", "typeagent"), default="jsonl"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    if not Path("/proc/self/smaps_rollup").exists():
        raise SystemExit("this benchmark reads /proc (Linux only)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="structrag-single-input-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        suffix = {"jsonl": ".jsonl", "json": ".json", "whatsapp": ".txt", "typeagent": ".json"}[
            args.format
        ]
        chat = work / f"chat-{args.messages}{suffix}"
        if not chat.exists():
            write_chat(chat, args.messages, args.format)
        db = work / "index"
        shutil.rmtree(db, ignore_errors=True)
        env = environment()  # the commit the ingest runs, taken before it starts
        figures = measure(chat, db)
        result = {
            "messages": args.messages,
            "format": args.format,
            "file_mb": round(chat.stat().st_size / 1e6, 1),
            **figures,
            "messages_per_second": round(args.messages / figures["seconds"]),
            "load_average": os.getloadavg()[0],
            "cpus": os.cpu_count(),
            "environment": env,
        }
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
