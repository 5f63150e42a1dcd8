"""The DuckDB store (the source of truth of an index): schema, reads, writes."""

from structrag.store.duckdb.store import (
    DB_FILENAME,
    DuckDBAnswerTable,
    DuckDBStore,
    SchemaUpgradeNeeded,
    may_write,
)

__all__ = ["DB_FILENAME", "DuckDBAnswerTable", "DuckDBStore", "SchemaUpgradeNeeded", "may_write"]
