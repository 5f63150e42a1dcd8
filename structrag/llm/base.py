"""What the core asks of an LLM: one structured answer per request, and what it cost.

:class:`StructuredLLM` is the protocol the extractor (and later the question translator)
depends on; :class:`~structrag.llm.client.InstructorLLM` implements it over the OpenAI
chat-completions protocol. Every answer and every failure carries :class:`CallStats`, so
tokens spent on a request that failed are still counted.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from structrag.errors import LLMError

T = TypeVar("T", bound=BaseModel)


@dataclass
class CallStats:
    """The cost of one logical request: HTTP calls, retries, tokens.

    ``calls`` counts every HTTP request (a validation re-ask and a retry after a 429 are
    calls too); ``retries`` is ``calls - 1`` when the request went through, the number of
    repeated calls otherwise. ``estimated_calls`` counts calls whose response carried no
    ``usage``, whose tokens were counted with tiktoken instead.
    """

    calls: int = 0
    retries: int = 0
    invalid_outputs: int = 0
    truncated: bool = False  # the last answer stopped at the token limit
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_calls: int = 0


@dataclass
class Completion(Generic[T]):
    """A validated answer and what it cost."""

    value: T
    stats: CallStats


class LLMCallFailed(LLMError):
    """One request failed after its retries; the failure belongs to that request only."""

    def __init__(self, message: str, stats: CallStats, *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.stats = stats


class LLMEndpointError(LLMError):
    """The endpoint itself is unusable (unreachable, bad API key, unknown model): every
    request would fail the same way, so the work stops instead of failing each message."""


class StructuredLLM(Protocol):
    """A chat model that answers with a validated pydantic object."""

    @property
    def model(self) -> str: ...

    @property
    def concurrency(self) -> int:
        """How many requests may usefully run at once."""
        ...

    def settings(self) -> dict[str, object]:
        """What changes the answers (model, mode, temperature); no secrets."""
        ...

    def complete(
        self,
        messages: list[dict[str, str]],
        response_model: type[T],
        *,
        max_tokens: int | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion[T]:
        """One structured answer of at most ``max_tokens`` (capped by the client's own
        limit). Raises :class:`LLMCallFailed` when this request failed after retries,
        :class:`LLMEndpointError` when no request can succeed. Once ``cancel`` is set no
        new attempt starts (a request in flight may finish): the request fails with
        :class:`LLMCallFailed`."""
        ...


class OfflineLLM:
    """A :class:`StructuredLLM` that knows its model but sends nothing: for dry runs and
    for reading cached answers without an endpoint."""

    def __init__(self, model: str, settings: dict[str, object] | None = None) -> None:
        self._model = model
        self._settings = settings or {"model": model}

    @property
    def model(self) -> str:
        return self._model

    @property
    def concurrency(self) -> int:
        return 1

    def settings(self) -> dict[str, object]:
        return dict(self._settings)

    def complete(
        self,
        messages: list[dict[str, str]],
        response_model: type[T],
        *,
        max_tokens: int | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion[T]:
        raise LLMEndpointError(
            "no LLM endpoint configured: this extractor only reads cached answers",
            hint="set --llm-base-url or STRUCTRAG_LLM_BASE_URL",
        )
