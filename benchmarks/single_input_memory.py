"""Peak memory of ingesting ONE large input, a file of short chat messages.

    python benchmarks/single_input_memory.py --messages 1000000
        [--format jsonl|json|whatsapp|typeagent|telegram] [--read-only [--whole]]
        [--json OUT] [--keep DIR]

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

``--format telegram`` writes a whole Telegram Desktop account export (``result.json``:
``chats.list`` of two large groups and many one-to-one chats, ``left_chats``, messages
of one to eight words as Telegram Desktop writes them, with replies, edits, text entity
lists, photos, stickers and service messages). ``--read-only`` measures reading alone,
no index: a new process checks the input as an ingest does (``scan_source``) and reads
every message once, and reports its peak RSS (``ru_maxrss``) and time; with ``--whole``
it loads the input whole instead (``load_source``), for comparison.
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
from typing import Any, TextIO

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
    if fmt == "telegram":
        write_telegram(path, messages)
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


def write_telegram(path: Path, messages: int) -> None:
    """A Telegram Desktop export of a whole account with ``messages`` messages: a third in
    one group, a sixth in another, the rest in one-to-one chats of about 2,000 messages,
    the last of them a left chat. One message in twenty replies to an earlier one, one
    in thirty is edited, one in thirty carries a link entity, one in twenty is a photo
    (half with a caption), one in fifty a sticker, one in a hundred a service message."""
    rnd = random.Random(0)
    sizes = [messages // 3, messages // 6]
    rest = messages - sum(sizes)
    sizes += [2000] * (rest // 2000) + ([rest % 2000] if rest % 2000 else [])
    sizes = [size for size in sizes if size]
    people = ["Ann", "Bob", "Carla", "Dev", "Eve", "Femi"]
    start = 1_704_067_200  # 2024-01-01 UTC

    def message(k: int, chat_people: list[str]) -> dict[str, object]:
        unix = start + k * 7
        who = chat_people[k % len(chat_people)]
        msg: dict[str, object] = {
            "id": k,
            "type": "message",
            "date": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix)),
            "date_unixtime": str(unix),
        }
        user = f"user{people.index(who) + 1000}"
        roll = rnd.random()
        if roll < 0.01:
            msg.update(type="service", actor=who, actor_id=user, action="pin_message")
            msg.update(message_id=max(k - 1, 1), text="", text_entities=[])
            return msg
        msg["from"], msg["from_id"] = who, user
        text = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 8)))
        if roll < 0.03:
            msg.update(file="stickers/sticker.webp", media_type="sticker", sticker_emoji="😀")
            msg.update(text="", text_entities=[])
            return msg
        if roll < 0.08:
            caption = text if rnd.random() < 0.5 else ""
            msg.update(photo=f"photos/photo_{k}@01-01-2024_10-00-00.jpg", width=1280, height=960)
            msg["text"] = caption
            msg["text_entities"] = [{"type": "plain", "text": caption}] if caption else []
            return msg
        if rnd.random() < 1 / 30:
            link = {"type": "link", "text": "https://example.org/" + rnd.choice(WORDS)}
            msg["text"] = [text + " ", link]
            msg["text_entities"] = [{"type": "plain", "text": text + " "}, link]
        else:
            msg["text"] = text
            msg["text_entities"] = [{"type": "plain", "text": text}]
        if rnd.random() < 0.05 and k > 1:
            msg["reply_to_message_id"] = rnd.randint(max(1, k - 50), k - 1)
        if rnd.random() < 1 / 30:
            msg["edited"] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(unix + 60))
            msg["edited_unixtime"] = str(unix + 60)
        return msg

    def write_chat(out: TextIO, number: int, size: int, first_id: int) -> None:
        group = number < 2
        chat_people = people if group else ["Ann", people[1 + number % (len(people) - 1)]]
        header = {
            "name": f"Group {number}" if group else chat_people[1],
            "type": "private_supergroup" if group else "personal_chat",
            "id": 4_000_000 + number,
        }
        out.write(json.dumps(header, indent=1)[:-2] + ',\n "messages": [\n')
        for k in range(size):
            item = json.dumps(message(first_id + k, chat_people), indent=1, ensure_ascii=False)
            out.write(item + (",\n" if k + 1 < size else "\n"))
        out.write(" ]\n}")

    profile = {"first_name": "Ann", "last_name": "", "phone_number": "+00 000", "bio": ""}
    listed = sizes[:-1] if len(sizes) > 1 else sizes
    with path.open("w", encoding="utf-8") as out:
        out.write('{\n "about": "Here is the data you requested.",\n')
        out.write(f' "personal_information": {json.dumps(profile)},\n')
        out.write(' "chats": {\n  "about": "This page lists all chats.",\n  "list": [\n')
        first = 1
        for number, size in enumerate(listed):
            write_chat(out, number, size, first)
            out.write(",\n" if number + 1 < len(listed) else "\n")
            first += size
        out.write("  ]\n }")
        if len(sizes) > 1:
            out.write(',\n "left_chats": {\n  "about": "Left chats.",\n  "list": [\n')
            write_chat(out, len(listed), sizes[-1], first)
            out.write("\n  ]\n }")
        out.write("\n}\n")


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


#: What ``--read-only`` runs in its own process: check the input as an ingest does and
#: read every message (or, with ``whole``, load it whole); its figures as JSON.
_READ = """
import json, resource, sys, time
from structrag.importers import load_source, scan_source
started = time.perf_counter()
source = (load_source if sys.argv[2] == "whole" else scan_source)(sys.argv[1])
count = sum(1 for _ in source.iter_messages())
print(json.dumps({
    "read_messages": count,
    "conversations": len(source.conversations),
    "reader": type(source).__name__,
    "seconds": round(time.perf_counter() - started, 1),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
}))
"""


def measure_reading(path: Path, whole: bool) -> dict[str, Any]:
    """Peak RSS and time of reading ``path`` alone, in a new process (see ``_READ``)."""
    mode = "whole" if whole else "stream"
    run = subprocess.run(
        [sys.executable, "-c", _READ, str(path), mode], capture_output=True, text=True
    )
    if run.returncode:
        raise SystemExit(f"reading failed with exit code {run.returncode}:\n{run.stderr}")
    figures: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    return {"mode": mode, **figures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument(
        "--format",
        choices=("jsonl", "json", "whatsapp", "typeagent", "telegram"),
        default="jsonl",
    )
    parser.add_argument(
        "--read-only",
        action="store_true",
        help="measure reading the input alone (no index, no extraction)",
    )
    parser.add_argument(
        "--whole", action="store_true", help="with --read-only: load the input whole"
    )
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    if not Path("/proc/self/smaps_rollup").exists():
        raise SystemExit("this benchmark reads /proc (Linux only)")
    work = args.keep or Path(tempfile.mkdtemp(prefix="structrag-single-input-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        suffix = {
            "jsonl": ".jsonl",
            "json": ".json",
            "whatsapp": ".txt",
            "typeagent": ".json",
            "telegram": ".json",
        }[args.format]
        chat = work / f"chat-{args.messages}{suffix}"
        if args.format == "telegram":
            chat = work / f"telegram-{args.messages}" / "result.json"
            chat.parent.mkdir(exist_ok=True)
        if not chat.exists():
            write_chat(chat, args.messages, args.format)
        if args.read_only:
            result = {
                "messages": args.messages,
                "format": args.format,
                "file_mb": round(chat.stat().st_size / 1e6, 1),
                **measure_reading(chat, args.whole),
                "load_average": os.getloadavg()[0],
                "cpus": os.cpu_count(),
                "environment": environment(),
            }
            print(json.dumps(result, indent=2))
            if args.json:
                args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            return
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
