"""The LLM extractor, and the hybrid of spaCy and the LLM.

:class:`LLMExtractor` asks a :class:`~structrag.llm.base.StructuredLLM` for the knowledge of
each message (:class:`~structrag.extract.llm_schema.MessageKnowledge`), grounds the answer in the
text (:mod:`structrag.extract.grounding`: spans, invented items dropped and counted) and
adds the metadata knowledge every extractor gives.

* **Nothing paid twice**: answers are looked up in an
  :class:`~structrag.llm.cache.AnswerCache` by (model, prompt version, message hash) before
  any request, and stored as soon as they arrive (from the worker thread), so a re-run or
  an interrupted ingest makes no call for work already done. Identical messages in one run
  share one request.
* **Bounded concurrency, in order**: up to ``concurrency`` requests run in a thread pool,
  a few windows ahead of the consumer; results are yielded in message order.
* **Failures do not stop the ingest**: a message whose request fails after retries yields
  its metadata knowledge and a failed :class:`~structrag.extract.base.ExtractionOutcome`,
  which the ingest records for ``--retry-failed``. Only an unusable endpoint
  (:class:`~structrag.llm.base.LLMEndpointError`) stops it.

:class:`HybridExtractor` runs a base extractor (spaCy) on every message and merges the
LLM's knowledge in where it is available, preferring the LLM's entity or topic when both
name the same thing.
"""

from __future__ import annotations

import inspect
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from pydantic import ValidationError

from structrag.analysis import term_key
from structrag.extract.base import (
    METADATA_EXTRACTOR,
    ExtractedRefs,
    ExtractionOutcome,
    Extractor,
    Progress,
    close_extractor,
    metadata_knowledge,
    outcome_of,
)
from structrag.extract.grounding import ground
from structrag.extract.llm_prompt import (
    PROMPT_VERSION,
    SYSTEM_PROMPT,
    message_hash,
    prompt_messages,
    render_message,
)
from structrag.extract.llm_schema import MessageKnowledge, extraction_json_schema
from structrag.llm.base import LLMCallFailed, LLMEndpointError, StructuredLLM
from structrag.llm.cache import AnswerCache, CachedAnswer
from structrag.llm.usage import UsageMeter, estimate_tokens, output_budget
from structrag.models import Entity, Message, SemanticRef, Topic
from structrag.tokens import TokenCounter, get_counter

EXTRACTOR_NAME = "llm"
#: How many windows of ``concurrency`` requests may run ahead of the consumer.
LOOKAHEAD_WINDOWS = 4


@dataclass(frozen=True)
class _Answered:
    answer: MessageKnowledge
    attempts: int = 0  # 0: from the cache


@dataclass(frozen=True)
class _Failed:
    failure: ExtractionOutcome


_Outcome = _Answered | _Failed


class LLMExtractor:
    """An :class:`~structrag.extract.base.Extractor` asking an LLM, one request a message."""

    name = EXTRACTOR_NAME
    failure_extractors: tuple[str, ...] = (EXTRACTOR_NAME,)

    def __init__(
        self,
        llm: StructuredLLM,
        *,
        cache: AnswerCache | None = None,
        include_metadata: bool = True,
        counter: TokenCounter | None = None,
    ) -> None:
        self.llm = llm
        self.cache = cache
        self.include_metadata = include_metadata
        self.version = PROMPT_VERSION
        self.meter = UsageMeter()
        self._counter = counter
        self._broken: LLMEndpointError | None = None  # set once the endpoint is unusable
        # A StructuredLLM written before ``cancel`` existed is still called without it.
        self._cancellable = "cancel" in inspect.signature(llm.complete).parameters

    def settings(self) -> dict[str, object]:
        return {**self.llm.settings(), "prompt_version": PROMPT_VERSION}

    def usage_report(self) -> dict[str, int | float]:
        return self.meter.snapshot().as_dict()

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = get_counter()
        return self._counter

    # -- extraction ------------------------------------------------------------------------

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        self._broken = None
        cancel = threading.Event()
        hashes = [message_hash(m) if m.text.strip() else "" for m in messages]
        cached = self._cached(hashes)
        workers = max(1, self.llm.concurrency)
        window = workers * LOOKAHEAD_WINDOWS
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="structrag-llm")
        # (message, outcome now, or the future of it, or None for an empty message, shared)
        pending: deque[tuple[Message, _Outcome | Future[_Outcome] | None, bool]] = deque()
        running: dict[str, Future[_Outcome]] = {}
        in_flight = 0
        source = iter(zip(messages, hashes, strict=True))
        try:
            while True:
                while in_flight < window:
                    item = next(source, None)
                    if item is None:
                        break
                    message, digest = item
                    if not digest:
                        pending.append((message, None, False))
                    elif digest in cached:
                        pending.append((message, cached[digest], True))
                    else:
                        future = running.get(digest)
                        shared = future is not None
                        if future is None:
                            future = running[digest] = pool.submit(
                                self._ask, message, digest, cancel
                            )
                        pending.append((message, future, shared))
                        in_flight += 1
                if not pending:
                    return
                message, outcome, shared = pending.popleft()
                if isinstance(outcome, Future):
                    in_flight -= 1
                    outcome = outcome.result()
                if shared:
                    self.meter.add(cache_hits=1)
                yield self._refs(message, outcome)
                if progress:
                    progress(1)
        finally:
            # Requests not started are dropped, and no running one starts another attempt
            # (a retry after a 429 or a re-ask); the HTTP requests in flight are waited
            # for, so what they cost is cached (a later run pays nothing twice).
            cancel.set()
            pool.shutdown(wait=True, cancel_futures=True)

    def _cached(self, hashes: Sequence[str]) -> dict[str, _Outcome]:
        if self.cache is None:
            return {}
        found = self.cache.get_many(self.llm.model, PROMPT_VERSION, [h for h in hashes if h])
        out: dict[str, _Outcome] = {}
        for digest, cached in found.items():
            try:
                out[digest] = _Answered(MessageKnowledge.model_validate_json(cached.response))
            except ValidationError:
                continue  # written by an incompatible schema: ask again
        return out

    def _ask(self, message: Message, digest: str, cancel: threading.Event) -> _Outcome:
        """One request, in a worker thread; the answer is cached before it is returned.

        :class:`~structrag.llm.base.LLMEndpointError` (the client's verdict that no request
        can succeed: unreachable before any answer, or after several requests in a row,
        or a refused key or model) stops the ingest; any other failure, a connection that
        keeps dropping for this request included, is this message's failure row."""
        if self._broken is not None:
            raise self._broken  # queued requests do not knock on a door known to be shut
        try:
            completion = self.llm.complete(
                prompt_messages(message),
                MessageKnowledge,
                max_tokens=output_budget(self.counter.count(message.text)),
                **({"cancel": cancel} if self._cancellable else {}),
            )
        except LLMEndpointError as exc:
            self._broken = exc
            raise
        except LLMCallFailed as exc:
            self.meter.add_call(exc.stats, failed=True)
            failure = ExtractionOutcome(
                extractor=self.name,
                model=self.llm.model,
                error=exc.message,
                attempts=max(1, exc.stats.calls),
            )
            return _Failed(failure)
        except Exception as exc:  # a request must not take the whole ingest down
            self.meter.add(failures=1)
            failure = ExtractionOutcome(
                extractor=self.name, model=self.llm.model, error=f"{type(exc).__name__}: {exc}"
            )
            return _Failed(failure)
        stats = completion.stats
        self.meter.add_call(stats)
        if self.cache is not None:
            answer = CachedAnswer(
                completion.value.model_dump_json(), stats.input_tokens, stats.output_tokens
            )
            self.cache.put(self.llm.model, PROMPT_VERSION, digest, answer)
        return _Answered(completion.value, completion.stats.calls)

    def _refs(self, message: Message, outcome: _Outcome | None) -> ExtractedRefs:
        refs = ExtractedRefs(metadata_knowledge(message) if self.include_metadata else ())
        if outcome is None:
            return refs
        if isinstance(outcome, _Failed):
            refs.outcome = outcome.failure
            return refs
        grounded = ground(message, outcome.answer, extractor=self.name, version=self.version)
        refs.extend(grounded.refs)
        refs.outcome = ExtractionOutcome(self.name, self.llm.model, attempts=outcome.attempts)
        self.meter.add(messages=1, invented_dropped=len(grounded.invented))
        return refs

    # -- dry run ---------------------------------------------------------------------------

    @cached_property
    def _schema(self) -> dict[str, object]:
        return extraction_json_schema()

    def estimate(self, messages: Sequence[Message]) -> dict[str, Any]:
        """What extracting ``messages`` would cost; sends nothing, writes nothing."""
        texts = [m for m in messages if m.text.strip()]
        unique: dict[str, Message] = {}
        for m in texts:
            unique.setdefault(message_hash(m), m)
        cached = self._cached(list(unique))
        calls = [m for h, m in unique.items() if h not in cached]
        input_tokens = output_tokens = 0
        for m in calls:
            i, o = estimate_tokens(self.counter, SYSTEM_PROMPT, self._schema, render_message(m))
            input_tokens += i
            output_tokens += o
        return {
            "extractor": self.name,
            "model": self.llm.model,
            "prompt_version": PROMPT_VERSION,
            "messages": len(messages),
            "empty_messages": len(messages) - len(texts),
            "cache_hits": len(texts) - len(calls),
            "calls": len(calls),
            "input_tokens": input_tokens,
            "output_tokens_estimate": output_tokens,
            "token_encoding": self.counter.name,
        }


class HybridExtractor:
    """spaCy knowledge for every message, the LLM's merged in where it is available."""

    name = "hybrid"
    failure_extractors: tuple[str, ...] = (EXTRACTOR_NAME,)

    def __init__(self, base: Extractor, llm: LLMExtractor) -> None:
        self.base = base
        self.llm = llm
        llm.include_metadata = False  # the base extractor gives it
        self.version = f"{base.name}-{base.version}+{llm.name}-{llm.version}"

    def settings(self) -> dict[str, object]:
        return {
            "base": {"name": self.base.name, "version": self.base.version, **self.base.settings()},
            "llm": self.llm.settings(),
        }

    def usage_report(self) -> dict[str, int | float]:
        return self.llm.usage_report()

    def estimate(self, messages: Sequence[Message]) -> dict[str, Any]:
        return {**self.llm.estimate(messages), "extractor": self.name}

    def close(self) -> None:
        """Stop the base extractor's worker processes, if it has any."""
        close_extractor(self.base)

    def extract(
        self, messages: Sequence[Message], progress: Progress | None = None
    ) -> Iterator[list[SemanticRef]]:
        # The LLM generator goes first so its requests are in flight while spaCy parses.
        for llm_refs, base_refs in zip(
            self.llm.extract(messages, progress), self.base.extract(messages), strict=True
        ):
            yield merge(base_refs, llm_refs)


def _key(ref: SemanticRef) -> tuple[str, str] | None:
    k = ref.knowledge
    if isinstance(k, Entity):
        return ("entity", term_key(k.name))
    if isinstance(k, Topic):
        return ("topic", term_key(k.text))
    return None


def merge(base: Sequence[SemanticRef], llm: Sequence[SemanticRef]) -> ExtractedRefs:
    """The base refs and the LLM refs of one message; a base entity or topic that the LLM
    also names is left out (the LLM's has types and facets). Metadata refs stay."""
    named = {key for key in map(_key, llm) if key is not None}
    kept = [r for r in base if r.extractor == METADATA_EXTRACTOR or _key(r) not in named]
    return ExtractedRefs([*kept, *llm], outcome=outcome_of(llm))
