"""Whether two indexes hold the same: every DuckDB table and the Whoosh text index.

    python benchmarks/compare_indexes.py INDEX_A INDEX_B

For checking that a change to the ingest's code is one of speed only: ingest the same
file with the old code and the new (``benchmarks/ingest_cpu.py --keep DIR``) and compare.

* **DuckDB**: every table of the store, its rows compared as multisets, every column but
  the times of the ingest itself (``TIMESTAMP`` columns other than a message's ``ts``) and
  the digests' bytes, which hold those times (the digest's knowledge is read from the
  tables compared here).
* **Whoosh**: every field's terms with their postings (document number, weight, value),
  and every document's stored fields.

Prints a line per table and field, and exits 1 if anything differs.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
from whoosh import index as whoosh_index

#: Columns that hold when an ingest ran, not what it wrote.
INGEST_TIMES = ("TIMESTAMP",)
#: Kept message times: ``ts`` is the message's own.
KEPT_TIMES = frozenset({"ts"})


def _tables(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[str, str]]]:
    rows = con.execute(
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = 'main' ORDER BY table_name, ordinal_position"
    ).fetchall()
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, data_type in rows:
        tables.setdefault(str(table), []).append((str(column), str(data_type)))
    return tables


def _kept(table: str, column: str, data_type: str) -> bool:
    if data_type.startswith(INGEST_TIMES) and column not in KEPT_TIMES:
        return False
    return not (table == "digests" and column == "data")


def compare_store(a: Path, b: Path) -> int:
    differ = 0
    with (
        duckdb.connect(str(a), read_only=True) as con_a,
        duckdb.connect(str(b), read_only=True) as con_b,
    ):
        tables_a, tables_b = _tables(con_a), _tables(con_b)
        if tables_a.keys() != tables_b.keys():
            print(f"tables differ: {sorted(tables_a.keys() ^ tables_b.keys())}")
            differ += 1
        for table in sorted(tables_a.keys() & tables_b.keys()):
            columns = [c for c, t in tables_a[table] if _kept(table, c, t)]
            if [c for c, t in tables_b[table] if _kept(table, c, t)] != columns:
                print(f"{table}: columns differ")
                differ += 1
                continue
            select = ", ".join(f'"{c}"' for c in columns)
            query = f'SELECT {select} FROM "{table}"'
            rows_a = Counter(repr(r) for r in con_a.execute(query).fetchall())
            rows_b = Counter(repr(r) for r in con_b.execute(query).fetchall())
            same = rows_a == rows_b
            differ += not same
            total = sum(rows_a.values())
            only = sum((rows_a - rows_b).values()) + sum((rows_b - rows_a).values())
            print(
                f"store {table:<22} {total:7} rows, {len(columns)} columns: "
                f"{'same' if same else f'{only} rows on one side only'}"
            )
    return differ


def _postings(reader: Any) -> dict[str, Counter[str]]:
    fields: dict[str, Counter[str]] = {}
    for field_name, term in reader.all_terms():
        matcher = reader.postings(field_name, term)
        postings = []
        while matcher.is_active():
            postings.append((matcher.id(), matcher.weight(), matcher.value()))
            matcher.next()
        fields.setdefault(field_name, Counter())[repr((term, postings))] += 1
    return fields


def compare_text(a: Path, b: Path) -> int:
    differ = 0
    with (
        whoosh_index.open_dir(str(a)).reader() as reader_a,
        whoosh_index.open_dir(str(b)).reader() as reader_b,
    ):
        post_a, post_b = _postings(reader_a), _postings(reader_b)
        for field_name in sorted(post_a.keys() | post_b.keys()):
            same = post_a.get(field_name) == post_b.get(field_name)
            differ += not same
            terms = sum(post_a.get(field_name, Counter()).values())
            print(f"text  {field_name:<22} {terms:7} terms: {'same' if same else 'DIFFER'}")
        stored_a = Counter(repr(sorted(f.items())) for f in reader_a.all_stored_fields())
        stored_b = Counter(repr(sorted(f.items())) for f in reader_b.all_stored_fields())
        same = stored_a == stored_b and reader_a.doc_count() == reader_b.doc_count()
        differ += not same
        print(
            f"text  stored fields          {reader_a.doc_count():7} documents: "
            f"{'same' if same else 'DIFFER'}"
        )
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("a", type=Path, help="an index directory")
    parser.add_argument("b", type=Path, help="another index directory")
    args = parser.parse_args(argv)
    differ = compare_store(args.a / "structrag.duckdb", args.b / "structrag.duckdb")
    differ += compare_text(args.a / "whoosh", args.b / "whoosh")
    print("same" if not differ else f"{differ} differences")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
