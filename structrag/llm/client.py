"""The OpenAI-compatible client: instructor over ``openai``, with retries and accounting.

:class:`InstructorLLM` implements :class:`~structrag.llm.base.StructuredLLM`:

* **Structured output** through instructor, in tool-calling mode (default), JSON mode or
  markdown-JSON mode (:data:`~structrag.llm.config.MODES`), validated in lax mode
  (``strict=False``: ``"false"`` is ``False``). Output that does not validate, and a reply
  with no structured answer in it (no tool call, no JSON), is re-asked with the error, up
  to ``max_retries`` times (instructor's loop), unless it was cut off at the token limit:
  a model that loops would loop again.
* **Retries with backoff** on 429 (a rate limit, not an exhausted quota), 5xx, 408/409
  and timeouts: exponential delays with jitter, or the server's ``Retry-After`` /
  ``retry-after-ms`` when it sends one, capped by ``max_backoff`` (30 s). The openai
  client's own retries are off so every call is counted here.
* **Rate limits**: a 429 that is not an exhausted quota pauses every request of the
  client for the wait it asks (spread over up to a second), and a request retries it for
  as long as it lasts, up to :data:`RATE_LIMIT_PATIENCE` seconds.
* **Bounded concurrency**: at most ``concurrency`` requests in flight per client, across
  threads (a semaphore; sleeping between retries does not hold it).
* **Accounting**: calls, retries, invalid outputs, input and output tokens from the API's
  ``usage``, or counted with tiktoken when a server sends none.
* **Fatal endpoint errors** (401/403, unknown model, a 429 of an exhausted quota,
  :data:`QUOTA_CODES`; unreachable after retries when the endpoint never answered this
  client, or for :data:`UNREACHABLE_STREAK` requests in a row) raise
  :class:`~structrag.llm.base.LLMEndpointError` instead of failing every request. A
  connection that keeps failing for one request while others are answered is that
  request's :class:`~structrag.llm.base.LLMCallFailed`. So do the first
  :data:`FAILING_STREAK` requests failing with an HTTP error or a timeout before any
  succeeded (a parameter the model does not take, a server that never answers).
* **Cancellation**: once the caller's ``cancel`` event is set (Ctrl-C in an ingest), no
  new attempt starts, and a wait before a retry ends at once.

This module is an adapter: it is the only one importing ``openai`` and ``instructor``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any

import instructor
import openai
from instructor.core.exceptions import (
    IncompleteOutputException,
    InstructorRetryException,
    ResponseParsingError,
)
from instructor.core.hooks import Hooks
from pydantic import ValidationError
from tenacity import Retrying, retry_if_exception, stop_after_attempt

from structrag.llm.base import CallStats, Completion, LLMCallFailed, LLMEndpointError, T
from structrag.llm.config import LLMConfig
from structrag.llm.usage import MESSAGE_OVERHEAD_TOKENS
from structrag.tokens import TokenCounter, get_counter

# instructor logs every failed attempt at ERROR level; structrag reports failures itself.
logging.getLogger("instructor").addHandler(logging.NullHandler())
logging.getLogger("instructor").propagate = False

#: Replies worth re-asking with the error: output that does not validate, is not JSON, or
#: holds no structured answer at all (no tool call, no JSON in the text).
_REASKABLE = (ValidationError, json.JSONDecodeError, ResponseParsingError)

#: Requests in a row (with no answer between them) whose connection failed after their
#: retries, after which the endpoint is taken to be gone and the work stops.
UNREACHABLE_STREAK = 3
#: Seconds a request the endpoint rate-limits (a 429 that is not an exhausted quota) is
#: retried for before it fails: a rate limit clears, so it is not held to the retries of
#: other errors; and every request of the client waits out the delay the last 429 asked
#: for, so requests in flight take turns under the limit rather than each using its tries.
RATE_LIMIT_PATIENCE = 120.0
#: Requests in a row that failed with an HTTP error or a timeout after their retries
#: before any succeeded, after which the endpoint is taken to refuse them all (a parameter
#: the model does not take, a server that always errs or never answers) and the work
#: stops, rather than sending every message of the input to fail the same way.
FAILING_STREAK = 5

_MODES = {
    "tools": instructor.Mode.TOOLS,
    "json": instructor.Mode.JSON,
    "md_json": instructor.Mode.MD_JSON,
}


def retry_after_seconds(headers: Any) -> float | None:
    """The delay a response asks for: ``retry-after-ms``, or ``Retry-After`` in seconds
    or as an HTTP date. ``None`` when absent or unreadable."""
    if headers is None:
        return None
    value = headers.get("retry-after-ms")
    if value:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status(error: BaseException) -> int | None:
    return error.status_code if isinstance(error, openai.APIStatusError) else None


#: Error codes (OpenAI's ``code`` or ``type`` in the error body) of a 429 that no wait
#: ends: the account's quota or credit is used up. Any other 429 is a rate limit.
QUOTA_CODES = frozenset({"insufficient_quota"})


def _error_fields(error: BaseException) -> set[str]:
    """The ``code`` and ``type`` of an HTTP error's body (``{"error": {...}}`` or the inner
    object), as the strings they are."""
    if not isinstance(error, openai.APIStatusError):
        return set()
    found = {getattr(error, "code", None), getattr(error, "type", None)}
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error")
        for part in (body, inner if isinstance(inner, dict) else {}):
            found.update((part.get("code"), part.get("type")))
    return {str(v) for v in found if v}


def _quota_exhausted(error: BaseException) -> bool:
    """A 429 that says the account's quota is exhausted (OpenAI's ``insufficient_quota``):
    no retry can succeed until someone pays."""
    return _status(error) == 429 and bool(_error_fields(error) & QUOTA_CODES)


def _is_transient(error: BaseException) -> bool:
    """Worth another try: rate limits, server errors, timeouts, dropped connections (not a
    429 of an exhausted quota)."""
    if isinstance(error, openai.APITimeoutError | openai.APIConnectionError):
        return True
    status = _status(error)
    if status == 429:
        return not _quota_exhausted(error)
    return status is not None and (status in (408, 409) or status >= 500)


def _is_fatal(error: BaseException) -> bool:
    """No request to this endpoint can succeed: bad key, no permission, unknown model/path,
    an exhausted quota."""
    return _status(error) in (401, 403, 404) or _quota_exhausted(error)


def _describe(error: BaseException) -> str:
    status = _status(error)
    if isinstance(error, openai.APIStatusError):
        body = error.body
        detail = body.get("message") if isinstance(body, dict) else None
        if isinstance(body, dict) and isinstance(body.get("error"), dict):
            detail = body["error"].get("message", detail)
        return f"HTTP {status}: {detail or error.message}"
    if isinstance(error, openai.APITimeoutError):
        return "request timed out"
    if isinstance(error, openai.APIConnectionError):
        cause = error.__cause__
        return f"connection failed: {cause or error}"
    if isinstance(error, ValidationError):
        details = error.errors()
        if not details:
            return f"invalid output: {error}"
        where = ".".join(str(p) for p in details[0]["loc"])
        return f"invalid output: {details[0]['msg']}" + (f" at {where}" if where else "")
    if isinstance(error, json.JSONDecodeError):
        return f"invalid JSON output: {error}"
    if isinstance(error, ResponseParsingError):
        return f"no structured answer in the reply ({error})"
    if isinstance(error, IncompleteOutputException):
        return "output cut off at the token limit"
    return f"{type(error).__name__}: {error}"


def _load_httpx() -> None:
    """Import the legacy ``httpx`` package now, if it is installed. openai reads
    ``sys.modules["httpx"]`` as each response comes back (to learn whether that package
    is loaded too); when the first import of spaCy (whose ``weasel`` imports httpx) runs
    on another thread while requests are in flight, a request thread finds the module
    half-initialised and fails with ``AttributeError`` after the endpoint has answered
    (and been paid). Loaded whole before the first request, it is never seen so."""
    with contextlib.suppress(ImportError):
        import httpx  # noqa: F401


class InstructorLLM:
    """A :class:`~structrag.llm.base.StructuredLLM` on an OpenAI-compatible endpoint."""

    def __init__(
        self,
        config: LLMConfig,
        *,
        counter: TokenCounter | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not config.base_url:
            raise LLMEndpointError(
                "no LLM endpoint configured",
                hint="set --llm-base-url or STRUCTRAG_LLM_BASE_URL",
            )
        _load_httpx()
        self.config = config
        self._counter = counter
        self._sleep = sleep
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._health = threading.Lock()
        self._ever_answered = False  # some request got an HTTP response
        self._unreachable_streak = 0  # requests in a row that failed to connect
        self._resume_at = 0.0  # time.monotonic() before which no request is sent (a 429)
        self._ever_succeeded = False  # some request got a valid answer
        self._failing_streak = 0  # requests in a row that failed, before any succeeded
        self._openai = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key,
            timeout=config.timeout,
            max_retries=0,
        )
        self._client = instructor.from_openai(self._openai, mode=_MODES[config.mode])

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def concurrency(self) -> int:
        return self.config.concurrency

    def settings(self) -> dict[str, object]:
        return self.config.public_settings()

    def close(self) -> None:
        self._openai.close()

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self._counter = get_counter()
        return self._counter

    def backoff(self, retry: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (1-based)."""
        cap = self.config.max_backoff
        if retry_after is not None:
            return min(cap, retry_after)
        delay = min(cap, self.config.backoff * 2.0 ** (retry - 1))
        return delay * (0.5 + random.random() / 2)  # jitter: spread retries of parallel calls

    def complete(
        self,
        messages: list[dict[str, str]],
        response_model: type[T],
        *,
        max_tokens: int | None = None,
        cancel: threading.Event | None = None,
    ) -> Completion[T]:
        try:
            completion = self._complete(
                messages, response_model, max_tokens=max_tokens, cancel=cancel
            )
        except LLMCallFailed as exc:
            # Only an HTTP error or a timeout counts: output that does not validate, or is
            # cut off at the limit, is the model's answer (the endpoint works; one message
            # may be hard), and a cancelled request failed for no reason of the endpoint's.
            refused = isinstance(exc.__cause__, openai.APIStatusError | openai.APITimeoutError)
            if refused and (cancel is None or not cancel.is_set()):
                self._failed(exc)
            raise
        with self._health:
            self._ever_succeeded = True
        return completion

    def _failed(self, error: LLMCallFailed) -> None:
        """A request failed after its retries: when :data:`FAILING_STREAK` have in a row
        and none ever succeeded, the endpoint refuses them all (raises)."""
        with self._health:
            if self._ever_succeeded:
                return
            self._failing_streak += 1
            if self._failing_streak < FAILING_STREAK:
                return
        raise LLMEndpointError(
            f"the LLM endpoint {self.config.shown_url} failed its first {FAILING_STREAK} "
            f"requests, answering none (the last: {error})",
            hint="check --llm-model (the model may not take a parameter sent) and that the "
            "server works and answers within --llm-timeout, then run the same command again",
        ) from error

    def _complete(
        self,
        messages: list[dict[str, str]],
        response_model: type[T],
        *,
        max_tokens: int | None,
        cancel: threading.Event | None,
    ) -> Completion[T]:
        stats = CallStats()
        limit = min(max_tokens or self.config.max_tokens, self.config.max_tokens)
        transport_retries = rate_limited = 0
        limited_since: float | None = None  # time.monotonic() of this request's first 429

        def cancelled() -> bool:
            return cancel is not None and cancel.is_set()

        while True:
            if cancelled():
                raise self._cancelled(stats)
            hooks = self._hooks(stats, messages, limit)
            # Re-ask output that does not validate or holds no structured answer (no tool
            # call), but not output cut off at the limit, and not once cancelled.
            reasks = Retrying(
                stop=stop_after_attempt(self.config.max_retries + 1),
                retry=retry_if_exception(
                    lambda e: isinstance(e, _REASKABLE) and not stats.truncated and not cancelled()
                ),
                reraise=True,
            )
            try:
                with self._slots:
                    # in the slot: a request that waited for one sees the latest 429
                    self._wait_out_rate_limit(cancel, stats)
                    value = self._client.chat.completions.create(
                        model=self.config.model,
                        messages=list(messages),  # type: ignore[arg-type]
                        response_model=response_model,
                        max_retries=reasks,
                        max_tokens=limit,
                        temperature=self.config.temperature,
                        hooks=hooks,
                        strict=False,  # lax validation: "false" -> False, "2" -> 2.0
                    )
            except (InstructorRetryException, IncompleteOutputException) as exc:
                cause: BaseException = exc.__cause__ or exc
                if stats.truncated or isinstance(cause, IncompleteOutputException):
                    self._answered()
                    stats.retries = max(0, stats.calls - 1)
                    sized = limit < self.config.max_tokens  # to the message, under the cap
                    raise LLMCallFailed(
                        f"output cut off at the {limit}-token limit"
                        + (
                            " (256 + 3 per token of the message; --llm-max-tokens caps it, "
                            "it does not raise it)"
                            if sized
                            else ""
                        )
                        + f" (after {stats.calls} attempts)",
                        stats,
                        hint="the model may be looping, or writing its reasoning before the "
                        "answer: a model that answers directly may help"
                        if sized
                        else "the model may be looping; a larger --llm-max-tokens or a "
                        "stronger model may help",
                    ) from cause
                if _quota_exhausted(cause):
                    raise LLMEndpointError(
                        f"the LLM endpoint {self.config.shown_url} refused model "
                        f"{self.config.model}: quota exhausted / billing ({_describe(cause)})",
                        hint="the API key's account is out of credit or over its usage limit: "
                        "add credit or raise the limit in its plan and billing settings (or "
                        "use another --llm-api-key), then run the same command again",
                    ) from cause
                if _is_fatal(cause):
                    raise LLMEndpointError(
                        f"the LLM endpoint {self.config.shown_url} refused the request "
                        f"({_describe(cause)})",
                        hint="check --llm-base-url, --llm-model and --llm-api-key",
                    ) from cause
                unreachable = isinstance(cause, openai.APIConnectionError) and not isinstance(
                    cause, openai.APITimeoutError
                )
                if not unreachable and not isinstance(cause, openai.APITimeoutError):
                    self._answered()  # an HTTP status or a reply: the endpoint is there
                limited = _status(cause) == 429  # not a quota: that is fatal, above
                if limited:
                    if limited_since is None:
                        limited_since = time.monotonic()
                    if time.monotonic() - limited_since < RATE_LIMIT_PATIENCE:
                        rate_limited += 1
                        headers = getattr(getattr(cause, "response", None), "headers", None)
                        delay = self.backoff(rate_limited, retry_after_seconds(headers))
                        with self._health:
                            self._resume_at = max(self._resume_at, time.monotonic() + delay)
                        continue
                elif _is_transient(cause) and transport_retries < self.config.max_retries:
                    transport_retries += 1
                    headers = getattr(getattr(cause, "response", None), "headers", None)
                    delay = self.backoff(transport_retries, retry_after_seconds(headers))
                    if cancel is None:
                        self._sleep(delay)
                    elif cancel.wait(delay):
                        raise self._cancelled(stats) from cause
                    continue
                stats.retries = max(0, stats.calls - 1)
                if unreachable and self._endpoint_down():
                    raise LLMEndpointError(
                        f"cannot reach the LLM endpoint {self.config.shown_url} after "
                        f"{stats.calls} attempts ({_describe(cause)})",
                        hint="is the server running? check --llm-base-url",
                    ) from cause
                raise LLMCallFailed(
                    f"{_describe(cause)} (after {stats.calls} attempts)", stats
                ) from cause
            self._answered()
            stats.retries = stats.calls - 1
            return Completion(value=value, stats=stats)

    def _wait_out_rate_limit(self, cancel: threading.Event | None, stats: CallStats) -> None:
        """Wait until the delay the endpoint's last 429 asked for has passed (whichever
        request got it): requests in flight back off together rather than each retrying
        into the limit on its own."""
        with self._health:
            delay = self._resume_at - time.monotonic()
        if delay <= 0:
            return
        # spread over up to a second, so the waiting requests do not meet the limit again
        # all at once
        delay += random.random() * min(1.0, delay)
        if cancel is None:
            self._sleep(delay)
        elif cancel.wait(delay):
            raise self._cancelled(stats)

    def _cancelled(self, stats: CallStats) -> LLMCallFailed:
        stats.retries = max(0, stats.calls - 1)
        return LLMCallFailed(f"cancelled (after {stats.calls} attempts)", stats)

    def _answered(self) -> None:
        """The endpoint answered a request (with a reply or an HTTP status)."""
        with self._health:
            self._ever_answered = True
            self._unreachable_streak = 0

    def _endpoint_down(self) -> bool:
        """Whether a request whose connection failed after its retries means the whole
        endpoint is unusable: it never answered this client, or the last
        :data:`UNREACHABLE_STREAK` requests to finish all failed to connect (it went
        away). Otherwise the failure belongs to that request alone."""
        with self._health:
            self._unreachable_streak += 1
            return not self._ever_answered or self._unreachable_streak >= UNREACHABLE_STREAK

    def _hooks(self, stats: CallStats, messages: list[dict[str, str]], limit: int) -> Hooks:
        """Per-request hooks that count calls, invalid outputs and tokens, and notice an
        answer that stopped at the token limit."""
        hooks = Hooks()
        request: dict[str, Any] = {}

        def on_kwargs(*args: Any, **kwargs: Any) -> None:
            stats.calls += 1
            request.clear()
            request.update(kwargs)

        def on_response(response: Any) -> None:
            usage = getattr(response, "usage", None)
            prompt = getattr(usage, "prompt_tokens", None)
            output = getattr(usage, "completion_tokens", None)
            if not (isinstance(prompt, int) and isinstance(output, int)):
                stats.estimated_calls += 1
                prompt = self._count_request(request or {"messages": messages})
                output = self._count_response(response)
            stats.input_tokens += prompt
            stats.output_tokens += output
            choices = getattr(response, "choices", None) or []
            finish = getattr(choices[0], "finish_reason", None) if choices else None
            # Some servers say "tool_calls" even when they stopped at the limit.
            stats.truncated = finish == "length" or output >= limit

        def on_parse_error(error: Exception, **kwargs: Any) -> None:
            stats.invalid_outputs += 1

        hooks.on("completion:kwargs", on_kwargs)
        hooks.on("completion:response", on_response)
        hooks.on("parse:error", on_parse_error)
        return hooks

    def _count_request(self, request: dict[str, Any]) -> int:
        total = 3
        for message in request.get("messages", []):
            total += MESSAGE_OVERHEAD_TOKENS + self.counter.count(str(message.get("content", "")))
        if request.get("tools"):
            total += self.counter.count(json.dumps(request["tools"]))
        return total

    def _count_response(self, response: Any) -> int:
        total = 0
        for choice in getattr(response, "choices", None) or []:
            message = getattr(choice, "message", None)
            total += self.counter.count(str(getattr(message, "content", None) or ""))
            for call in getattr(message, "tool_calls", None) or []:
                total += self.counter.count(str(call.function.arguments or ""))
        return total
