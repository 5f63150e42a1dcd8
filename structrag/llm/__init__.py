"""LLM support: endpoint settings, a structured-output client, the extraction schema and
prompt, the answer cache and cost accounting.

Only :mod:`structrag.llm.client` talks to the network (``openai`` + ``instructor``); the
rest is plain data and protocols that the core (the extractor, later the question
translator) can use without an adapter.
"""

from structrag.llm.base import (
    CallStats,
    Completion,
    LLMCallFailed,
    LLMEndpointError,
    OfflineLLM,
    StructuredLLM,
)
from structrag.llm.cache import AnswerCache, CachedAnswer, MemoryAnswerCache
from structrag.llm.config import LLMConfig

__all__ = [
    "AnswerCache",
    "CachedAnswer",
    "CallStats",
    "Completion",
    "LLMCallFailed",
    "LLMConfig",
    "LLMEndpointError",
    "MemoryAnswerCache",
    "OfflineLLM",
    "StructuredLLM",
]
