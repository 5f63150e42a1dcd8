"""The LLM client layer: endpoint settings (:mod:`~structrag.llm.config`), the
structured-output client protocol (:mod:`~structrag.llm.base`) and its implementation on
``openai`` + ``instructor`` (:mod:`~structrag.llm.client`), the answer cache
(:mod:`~structrag.llm.cache`) and token accounting (:mod:`~structrag.llm.usage`).

It knows nothing of what it is used for: the LLM extractor (:mod:`structrag.extract`), the
LLM question translator (:mod:`structrag.translate.llm`) and answer writing
(:mod:`structrag.answer`) sit above it. Only :mod:`structrag.llm.client` talks to the
network.
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
