"""Storage: the protocols the core uses, and their DuckDB and Whoosh implementations."""
