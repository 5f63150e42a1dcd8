"""The writer's memory at the commits of merges into a large store: DuckDB's own
checkpoint against the one a staged merge runs (``structrag.store.duckdb.staging``).

    python benchmarks/checkpoint_memory.py --db INDEX_DIR [--commits 8] [--json OUT]

It copies the index's DuckDB file once per way of committing. Into each copy it appends,
commit after commit, a copy of the last ingested file's rows (messages, embeddings,
knowledge and digests, under new keys and conversation names), as the merge of an
ingest does, and commits:

* ``duckdb``: under the store's 1 GB limit, DuckDB checkpointing by itself at the commit
  that takes its log past 16 MiB (how merges committed before);
* ``structrag``: as a merge commits
  (:func:`structrag.store.duckdb.staging.commit_then_checkpoint`).

Each way runs in a process of its own; for each commit it reports the process's peak RSS
(``VmHWM``, reset before the commit) and the seconds it took. The index needs a few
files ingested; the spikes show on a large one (build it with ``structrag bench perf
--keep`` or ``writer_memory.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import duckdb

from structrag.bench.perf import process_memory_kb
from structrag.store.duckdb.lease import MEMORY_LIMIT
from structrag.store.duckdb.staging import commit_then_checkpoint

#: Tables copied, and how their rows find the last file's: by message key or by ref id.
BY_MKEY = ("messages", "embeddings")
BY_REF = (
    "semantic_refs",
    "entities",
    "actions",
    "action_params",
    "entity_facets",
    "topics",
    "properties",
)
#: Offsets that keep the copies' keys clear of the store's.
MKEY_STEP, REF_STEP = 100_000_000, 1_000_000_000


def peak_mb() -> int:
    return process_memory_kb(os.getpid(), "VmHWM") // 1024


def reset_peak() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def columns(con: duckdb.DuckDBPyConnection, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? ORDER BY column_index",
        [table],
    ).fetchall()
    return [str(name) for (name,) in rows]


def copy_rows(con: duckdb.DuckDBPyConnection, copy: int, where: dict[str, str]) -> None:
    """One copy of the last file's rows, under new keys and conversation names."""
    renamed = {
        "mkey": f"mkey + {copy * MKEY_STEP}",
        "ref_id": f"ref_id + {copy * REF_STEP}",
        "conversation": f"conversation || '-copy{copy}'",
    }

    def insert(table: str, condition: str) -> None:
        select = ", ".join(renamed.get(c, c) for c in columns(con, table))
        con.execute(f"INSERT INTO {table} SELECT {select} FROM {table} WHERE {condition}")

    insert("conversations", where["conversation"])
    for table in BY_MKEY:
        insert(table, where["mkey"])
    for table in BY_REF:
        insert(table, where["ref_id"])
    insert("digests", where["conversation"])


def run(path: Path, way: str, commits: int) -> list[dict[str, Any]]:
    """Commit ``commits`` copies into the file at ``path`` one way; a row per commit."""
    con = duckdb.connect(str(path))
    con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
    source = con.execute("SELECT max(source_id) FROM messages").fetchone()
    low, high = con.execute(
        "SELECT min(mkey), max(mkey) FROM messages WHERE source_id = ?",
        [source[0] if source else None],
    ).fetchone() or (None, None)
    if low is None:
        raise SystemExit(f"{path} holds no ingested messages")
    first, last = con.execute(
        "SELECT min(ref_id), max(ref_id) FROM semantic_refs WHERE mkey BETWEEN ? AND ?",
        [low, high],
    ).fetchone() or (0, -1)
    where = {
        "mkey": f"mkey BETWEEN {low} AND {high}",
        "ref_id": f"ref_id BETWEEN {first} AND {last}",
        "conversation": "conversation IN (SELECT DISTINCT conversation FROM messages "
        f"WHERE mkey BETWEEN {low} AND {high})",
    }
    rows: list[dict[str, Any]] = []
    for copy in range(1, commits + 1):
        con.execute("BEGIN TRANSACTION")
        copy_rows(con, copy, where)
        reset_peak()
        start = time.perf_counter()
        if way == "structrag":
            commit_then_checkpoint(con, lambda: con.execute("COMMIT"))
        else:
            con.execute("COMMIT")
        rows.append(
            {"commit": copy, "peak_rss_mb": peak_mb(), "seconds": time.perf_counter() - start}
        )
    con.close()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True, help="an index directory")
    parser.add_argument("--commits", type=int, default=8)
    parser.add_argument("--json", type=Path, help="write the figures here as JSON")
    parser.add_argument("--way", choices=("duckdb", "structrag"), help=argparse.SUPPRESS)
    parser.add_argument("--file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.way:  # one way, in a process of its own (see below)
        print(json.dumps(run(args.file, args.way, args.commits)))
        return 0
    store = args.db / "structrag.duckdb"
    if not store.exists():
        parser.error(f"{store} not found: --db takes an index directory")
    result: dict[str, Any] = {"db": str(args.db), "commits": args.commits}
    with tempfile.TemporaryDirectory(dir=args.db.parent) as tmp:
        for way in ("duckdb", "structrag"):
            copy = Path(tmp) / f"{way}.duckdb"
            shutil.copyfile(store, copy)
            command = [sys.executable, __file__, "--db", str(args.db), "--way", way]
            command += ["--file", str(copy), "--commits", str(args.commits)]
            done = subprocess.run(command, check=True, capture_output=True, text=True)
            result[way] = json.loads(done.stdout.strip().splitlines()[-1])
            copy.unlink()
            for row in result[way]:
                print(
                    f"{way:9} commit {row['commit']}: {row['peak_rss_mb']:5} MB "
                    f"{row['seconds']:.2f} s",
                    flush=True,
                )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
