"""structrag: Structured RAG for conversation histories.

Public API: :class:`Index` (open an index directory, ingest, inspect, query, ask), the data
model, and the exception hierarchy.

The names are imported when first used (PEP 562), so that a command that only talks to a
running server (``structrag ask`` with ``structrag serve`` up) starts without loading the
query engine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from structrag.errors import (
    ConfigError,
    IndexStateError,
    InputError,
    InputErrors,
    MemoryInputError,
    NotFoundError,
    QueryError,
    QueryPlanError,
    QuerySyntaxError,
    StructragError,
)

if TYPE_CHECKING:
    from structrag.index import Index, open_index
    from structrag.ingest import IngestReport
    from structrag.models import (
        Action,
        Conversation,
        Entity,
        Facet,
        Message,
        SemanticRef,
        Span,
        Tag,
        Topic,
    )
    from structrag.query.graph import entity_graph

from structrag.version import __version__

#: Where each public name lives (imported on first use).
_LAZY = {
    "Index": "structrag.index",
    "open_index": "structrag.index",
    "IngestReport": "structrag.ingest",
    "Action": "structrag.models",
    "Conversation": "structrag.models",
    "Entity": "structrag.models",
    "Facet": "structrag.models",
    "Message": "structrag.models",
    "SemanticRef": "structrag.models",
    "Span": "structrag.models",
    "Tag": "structrag.models",
    "Topic": "structrag.models",
    "entity_graph": "structrag.query.graph",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'structrag' has no attribute {name!r}")


__all__ = [
    "Action",
    "ConfigError",
    "Conversation",
    "Entity",
    "Facet",
    "Index",
    "IndexStateError",
    "IngestReport",
    "InputError",
    "InputErrors",
    "MemoryInputError",
    "Message",
    "NotFoundError",
    "QueryError",
    "QueryPlanError",
    "QuerySyntaxError",
    "SemanticRef",
    "Span",
    "StructragError",
    "Tag",
    "Topic",
    "__version__",
    "entity_graph",
    "open_index",
]
