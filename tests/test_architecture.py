"""The core knows no adapter: DuckDB, Whoosh and spaCy sit behind protocols."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import structrag

PACKAGE = Path(structrag.__file__).parent
ADAPTERS = (
    "duckdb",
    "whoosh",
    "spacy",
    "openai",
    "instructor",
    "structrag.store.duckdb",
    "structrag.store.whoosh_index",
    "structrag.extract.spacy_extractor",
)
CORE = [
    "models.py",
    "ingest.py",
    "errors.py",
    "timeparse.py",
    "store/protocols.py",
    "query/ast.py",
    "query/parser.py",
    "query/timeexpr.py",
    "query/nodes.py",
    "query/compile.py",
    "query/question.py",
    "query/derived.py",
    "query/graph.py",
    "query/scope.py",
    "query/engine.py",
    "query/context.py",
    "query/settings.py",
]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("module", CORE)
def test_core_module_imports_no_adapter(module: str) -> None:
    imported = _imports(PACKAGE / module)
    offending = {n for n in imported if any(n == a or n.startswith(a + ".") for a in ADAPTERS)}
    assert not offending, f"{module} imports {offending}"


def test_public_api_is_declared() -> None:
    assert set(structrag.__all__) >= {"Index", "StructragError", "QuerySyntaxError", "Message"}
    for name in structrag.__all__:
        assert hasattr(structrag, name)


def test_exceptions_share_one_root_and_mix_in_builtins() -> None:
    assert issubclass(structrag.QuerySyntaxError, structrag.StructragError)
    assert issubclass(structrag.QuerySyntaxError, ValueError)
    assert issubclass(structrag.InputError, ValueError)
    assert issubclass(structrag.NotFoundError, LookupError)
