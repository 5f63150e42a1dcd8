"""structrag: Structured RAG for conversation histories.

Public API: :class:`Index` (open an index directory, ingest, inspect, query, ask), the data
model, and the exception hierarchy.
"""

from structrag.errors import (
    ConfigError,
    IndexStateError,
    InputError,
    MemoryInputError,
    NotFoundError,
    QueryError,
    QuerySyntaxError,
    StructragError,
)
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

__version__ = "0.1.0"

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
    "MemoryInputError",
    "Message",
    "NotFoundError",
    "QueryError",
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
