"""Ingest rate of a folder of many small files (a Slack export: one file per channel per
day), against the same messages in one file.

    python benchmarks/many_files.py [--files 200] [--messages 2] [--channels K] [--api]
                                    [--profile OUT] [--single] [--keep DIR]

Makes ``--files`` JSONL files of ``--messages`` messages each in a temporary folder (each
file a conversation of its own, or with ``--channels K`` the days of K channels: file
``n`` adds to conversation ``channel-{n % K}``, as a per-channel, per-day export does),
ingests the folder into a fresh index (``structrag ingest FOLDER --db DIR -q`` in a new
process, or ``Index.ingest`` in this one with ``--api``), and prints the seconds and
messages per second. ``--single`` also ingests the same messages as one file (one
conversation: the rate of one big file, with none of the per-file costs). ``--profile
OUT`` (with ``--api``) writes a cProfile of the ingest to OUT.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = [
    "dog",
    "river",
    "book",
    "garden",
    "bakery",
    "sailing",
    "Lisbon",
    "market",
    "bread",
    "violin",
    "engine",
    "Maria",
    "Tokyo",
    "concert",
    "hiking",
    "photos",
    "sister",
    "promotion",
    "marathon",
    "recipe",
]
SPEAKERS = ("Ann", "Bo", "Cy")


def make_files(folder: Path, files: int, messages: int, seed: int = 7, channels: int = 0) -> int:
    """``files`` JSONL files of ``messages`` messages each; returns the message count."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for f in range(files):
        rows = []
        for i in range(messages):
            speaker = SPEAKERS[(f + i) % 3]
            words = " ".join(rng.choice(WORDS) for _ in range(10))
            rows.append(
                {
                    "id": str(i + 1),
                    "speaker": speaker,
                    "text": f"On day {f} {speaker} talked about the {words}.",
                    "timestamp": f"2024-{1 + f % 12:02d}-{1 + f % 28:02d}T10:{i % 60:02d}:00",
                }
            )
            if channels:
                rows[-1]["conversation"] = f"channel-{f % channels}"
                rows[-1]["id"] = f"{f}-{i + 1}"
        path = folder / f"chat-{f:05d}.jsonl"
        path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return files * messages


def make_single(path: Path, files: int, messages: int, seed: int = 7) -> int:
    """The same messages as :func:`make_files` in one JSONL file."""
    rng = random.Random(seed)
    rows = []
    for f in range(files):
        for i in range(messages):
            speaker = SPEAKERS[(f + i) % 3]
            words = " ".join(rng.choice(WORDS) for _ in range(10))
            rows.append(
                {
                    "id": f"{f}-{i + 1}",
                    "speaker": speaker,
                    "text": f"On day {f} {speaker} talked about the {words}.",
                    "timestamp": f"2024-{1 + f % 12:02d}-{1 + f % 28:02d}T10:{i % 60:02d}:00",
                }
            )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return files * messages


def ingest_cli(inputs: Path, db: Path) -> float:
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "structrag", "ingest", str(inputs), "--db", str(db), "-q"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - started


def ingest_api(inputs: Path, db: Path, profile: Path | None = None) -> float:
    from structrag import Index

    # Warm up: load the extractor's pipeline in a throwaway index before timing.
    warm = db.with_name(db.name + "-warm")
    make_files(warm / "in", 1, 2)
    with Index(warm / "db") as index:
        index.ingest([warm / "in"])
    shutil.rmtree(warm, ignore_errors=True)
    with Index(db) as index:
        profiler = cProfile.Profile() if profile else None
        started = time.perf_counter()
        if profiler:
            profiler.enable()
        index.ingest([inputs])
        if profiler:
            profiler.disable()
            profiler.dump_stats(str(profile))
        return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--files", type=int, default=200)
    parser.add_argument("--messages", type=int, default=2, help="messages per file")
    parser.add_argument("--channels", type=int, default=0, help="conversations shared by files")
    parser.add_argument("--api", action="store_true", help="Index.ingest in this process")
    parser.add_argument("--single", action="store_true", help="also the same as one file")
    parser.add_argument("--profile", type=Path, help="cProfile output (with --api)")
    parser.add_argument("--keep", type=Path, help="keep the index (folder ingest) here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder = root / "many"
        total = make_files(folder, args.files, args.messages, channels=args.channels)
        db = args.keep or root / "many-index"
        shutil.rmtree(db, ignore_errors=True)
        run = (lambda i, d: ingest_api(i, d, args.profile)) if args.api else ingest_cli
        seconds = run(folder, db)
        how = "api" if args.api else "cli"
        print(
            f"{args.files} files x {args.messages} messages ({how}): {seconds:.2f} s, "
            f"{total / seconds:.0f} msg/s, {seconds / args.files * 1000:.1f} ms/file"
        )
        if args.single:
            single = root / "single.jsonl"
            make_single(single, args.files, args.messages)
            seconds = run(single, root / "single-index")
            print(
                f"1 file x {total} messages ({how}): {seconds:.2f} s, {total / seconds:.0f} msg/s"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
