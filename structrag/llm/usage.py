"""Cost visibility: running totals of LLM work, and estimates made before any call.

:class:`UsageMeter` is updated from worker threads and read by the ingest, which reports
the difference over each source: calls, cache hits, tokens, failures, retries, invented
items dropped. :func:`estimate_tokens` gives a dry run's numbers with tiktoken: the input
side is counted exactly as sent (system prompt, schema, message); the output side is a
rough rule of thumb (:data:`OUTPUT_TOKENS_BASE` plus :data:`OUTPUT_TOKENS_PER_INPUT_TOKEN`
per message token), since what a model answers cannot be known before it answers.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict, dataclass, fields

from structrag.llm.base import CallStats
from structrag.tokens import TokenCounter

#: Tokens a chat request adds around each message (role markers); OpenAI documents ~3-4.
MESSAGE_OVERHEAD_TOKENS = 4
#: Rough size of an extraction answer: a fixed part plus a share per message token.
OUTPUT_TOKENS_BASE = 60
OUTPUT_TOKENS_PER_INPUT_TOKEN = 1.5
#: The most an extraction answer may take: generous for real answers, short enough that a
#: small model that loops stops soon (the client's ``max_tokens`` caps it further).
OUTPUT_BUDGET_BASE = 256
OUTPUT_BUDGET_PER_INPUT_TOKEN = 3


def output_budget(message_tokens: int) -> int:
    """The ``max_tokens`` of an extraction request for a message of this many tokens."""
    return OUTPUT_BUDGET_BASE + OUTPUT_BUDGET_PER_INPUT_TOKEN * message_tokens


@dataclass
class Usage:
    """Totals of LLM work (all counts)."""

    messages: int = 0  # messages answered (from the LLM or the cache)
    calls: int = 0  # HTTP requests
    cache_hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_calls: int = 0  # calls whose tokens were counted with tiktoken (no usage)
    failures: int = 0
    retries: int = 0
    invalid_outputs: int = 0
    invented_dropped: int = 0

    def as_dict(self) -> dict[str, int | float]:
        return dict(asdict(self))


class UsageMeter:
    """Thread-safe running :class:`Usage`."""

    def __init__(self) -> None:
        self._usage = Usage()
        self._lock = threading.Lock()

    def add_call(self, stats: CallStats, *, failed: bool = False) -> None:
        with self._lock:
            u = self._usage
            u.calls += stats.calls
            u.retries += stats.retries
            u.invalid_outputs += stats.invalid_outputs
            u.input_tokens += stats.input_tokens
            u.output_tokens += stats.output_tokens
            u.estimated_calls += stats.estimated_calls
            if failed:
                u.failures += 1

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, n in counts.items():
                setattr(self._usage, name, getattr(self._usage, name) + n)

    def snapshot(self) -> Usage:
        with self._lock:
            return Usage(**{f.name: getattr(self._usage, f.name) for f in fields(Usage)})


def estimate_tokens(
    counter: TokenCounter, system: str, schema: dict[str, object], user: str
) -> tuple[int, int]:
    """(input, output) token estimates of one extraction request."""
    message_tokens = counter.count(user)
    input_tokens = (
        3
        + 2 * MESSAGE_OVERHEAD_TOKENS
        + counter.count(system)
        + counter.count(json.dumps(schema))
        + message_tokens
    )
    output = OUTPUT_TOKENS_BASE + round(OUTPUT_TOKENS_PER_INPUT_TOKEN * message_tokens)
    return input_tokens, output
