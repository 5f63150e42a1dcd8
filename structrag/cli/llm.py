"""The LLM endpoint options of ``ingest`` and ``ask`` (``--llm-*``, ``STRUCTRAG_LLM_*``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import click

if TYPE_CHECKING:
    from structrag.llm.config import LLMConfig

F = TypeVar("F", bound=Callable[..., Any])


def llm_options(func: F) -> F:
    """The LLM endpoint flags, gathered into one ``llm_settings`` argument; unset flags
    fall back to the STRUCTRAG_LLM_* environment variables (see structrag.llm.config)."""
    specs = [
        (
            "--llm-base-url",
            "base_url",
            str,
            "OpenAI-compatible base URL, e.g. "
            "http://127.0.0.1:8080/v1. Env: STRUCTRAG_LLM_BASE_URL.",
        ),
        ("--llm-model", "model", str, "Model name. Env: STRUCTRAG_LLM_MODEL."),
        (
            "--llm-api-key",
            "api_key",
            str,
            "API key (local servers need none). Env: STRUCTRAG_LLM_API_KEY.",
        ),
        (
            "--llm-concurrency",
            "concurrency",
            click.IntRange(1, 256),
            "Requests in flight [default: 4]. Env: STRUCTRAG_LLM_CONCURRENCY.",
        ),
        (
            "--llm-timeout",
            "timeout",
            click.FloatRange(0, 3600, min_open=True),
            "Seconds per request [default: 60]. Env: STRUCTRAG_LLM_TIMEOUT.",
        ),
        (
            "--llm-mode",
            "mode",
            click.Choice(["tools", "json", "md_json"]),
            "Structured output: tool calling, JSON mode, or JSON in markdown "
            "[default: tools]. Env: STRUCTRAG_LLM_MODE.",
        ),
        (
            "--llm-max-retries",
            "max_retries",
            click.IntRange(0, 20),
            "Retries per message on 429/5xx/timeouts, and re-asks on invalid output "
            "[default: 3]. Env: STRUCTRAG_LLM_MAX_RETRIES.",
        ),
        (
            "--llm-max-tokens",
            "max_tokens",
            click.IntRange(16),
            "Longest answer, in tokens; requests ask for less on short messages "
            "[default: 4096]. Env: STRUCTRAG_LLM_MAX_TOKENS.",
        ),
    ]

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        kwargs["llm_settings"] = {key: kwargs.pop(f"llm_{key}") for _, key, _, _ in specs}
        return func(*args, **kwargs)

    for flag, key, kind, text in reversed(specs):
        wrapper = click.option(flag, f"llm_{key}", type=kind, help=text)(wrapper)
    return wrapper  # type: ignore[return-value]


def llm_config(settings: dict[str, Any], *, require_endpoint: bool = True) -> LLMConfig:
    """The LLM settings from the flags and the environment (an error names what is
    missing)."""
    from structrag.llm.config import LLMConfig

    return LLMConfig.resolve(**settings, require_endpoint=require_endpoint)


def optional_llm_config(settings: dict[str, Any]) -> LLMConfig | None:
    """The LLM settings, or None when no endpoint is configured at all (for ``ask``, whose
    translator falls back to offline and whose ``--answer`` says why there is none).
    Settings that are given but wrong raise :class:`~structrag.errors.ConfigError` naming
    the flag or variable, as for ``ingest``."""
    from structrag.llm.config import LLMConfig

    return LLMConfig.resolve_optional(**settings)
