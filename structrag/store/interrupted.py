"""How DuckDB reports Ctrl-C: a query running when it came raises an error of its own
instead of Python's ``KeyboardInterrupt`` (no import of duckdb: the command line asks this
of an error without loading the store)."""

from __future__ import annotations


def from_duckdb(exc: BaseException) -> bool:
    """Whether ``exc`` is one of DuckDB's own error types."""
    return type(exc).__module__.split(".")[0] in {"duckdb", "_duckdb"}


def duckdb_interrupted(exc: BaseException) -> bool:
    """Whether ``exc`` is Ctrl-C as DuckDB reports it: a query running when it came
    raises ``RuntimeError("Query interrupted")`` (or an error naming KeyboardInterrupt)
    instead of Python's ``KeyboardInterrupt``."""
    if isinstance(exc, RuntimeError) and str(exc) == "Query interrupted":
        return True
    if from_duckdb(exc):
        return type(exc).__name__ == "InterruptException" or str(exc).startswith(
            "KeyboardInterrupt"
        )
    return False
