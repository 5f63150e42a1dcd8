"""LLM endpoint settings: from flags, then environment variables, then defaults.

One :class:`LLMConfig` describes an OpenAI-compatible chat-completions endpoint (OpenAI,
Ollama, llama.cpp's server, vLLM ...) and how structrag talks to it: the structured-output
mode, the per-request timeout, retries and the number of requests in flight. Anything
missing or out of range raises :class:`~structrag.errors.ConfigError` naming the flag and
the environment variable that set it.

The API key never appears in ``repr``, in :meth:`LLMConfig.public_settings` or in the ingest
log; local servers need none (a placeholder is sent).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast
from urllib.parse import urlparse

from structrag.errors import ConfigError

Mode = Literal["tools", "json", "md_json"]
#: ``tools``: the schema goes as a function tool and the model calls it (OpenAI, llama.cpp,
#: Ollama). ``json``: ``response_format={"type": "json_object"}`` with the schema in the
#: system prompt. ``md_json``: plain text with the schema in the prompt, JSON parsed from the
#: reply (for servers that support neither).
MODES: tuple[Mode, ...] = ("tools", "json", "md_json")

#: Sent as the API key when none is configured; local servers ignore it.
NO_API_KEY = "not-needed"

ENV_BASE_URL = "STRUCTRAG_LLM_BASE_URL"
ENV_MODEL = "STRUCTRAG_LLM_MODEL"
ENV_API_KEY = "STRUCTRAG_LLM_API_KEY"
ENV_CONCURRENCY = "STRUCTRAG_LLM_CONCURRENCY"
ENV_TIMEOUT = "STRUCTRAG_LLM_TIMEOUT"
ENV_MODE = "STRUCTRAG_LLM_MODE"
ENV_MAX_RETRIES = "STRUCTRAG_LLM_MAX_RETRIES"
ENV_MAX_TOKENS = "STRUCTRAG_LLM_MAX_TOKENS"

# setting -> (flag, environment variable), for error messages.
_SOURCES = {
    "base_url": ("--llm-base-url", ENV_BASE_URL),
    "model": ("--llm-model", ENV_MODEL),
    "api_key": ("--llm-api-key", ENV_API_KEY),
    "concurrency": ("--llm-concurrency", ENV_CONCURRENCY),
    "timeout": ("--llm-timeout", ENV_TIMEOUT),
    "mode": ("--llm-mode", ENV_MODE),
    "max_retries": ("--llm-max-retries", ENV_MAX_RETRIES),
    "max_tokens": ("--llm-max-tokens", ENV_MAX_TOKENS),
}


def _where(name: str) -> str:
    flag, env = _SOURCES[name]
    return f"set {flag} or the environment variable {env}"


@dataclass(frozen=True)
class LLMConfig:
    """How to reach an OpenAI-compatible endpoint and how hard to try.

    ``backoff`` is the first retry delay in seconds (doubled per retry, with jitter, capped
    by ``max_backoff``); a ``Retry-After`` header from the server takes precedence, up to
    ``max_backoff``. ``max_tokens`` caps the answer's length: a small model that loops
    stops there instead of running into the timeout (callers may ask for less).
    """

    base_url: str
    model: str
    api_key: str = field(default=NO_API_KEY, repr=False)
    concurrency: int = 4
    timeout: float = 60.0
    mode: Mode = "tools"
    max_retries: int = 3
    max_tokens: int = 4096
    backoff: float = 1.0
    max_backoff: float = 30.0
    temperature: float = 0.0

    def __post_init__(self) -> None:
        if not self.model.strip():
            raise ConfigError("the LLM model name is empty", hint=_where("model"))
        if self.base_url:
            parsed = urlparse(self.base_url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ConfigError(
                    f"the LLM base URL {self.base_url!r} is not an http(s) URL",
                    hint=f"{_where('base_url')}, e.g. http://127.0.0.1:8080/v1",
                )
        if not 1 <= self.concurrency <= 256:
            raise ConfigError(
                f"LLM concurrency must be between 1 and 256, got {self.concurrency}",
                hint=_where("concurrency"),
            )
        if not 0 < self.timeout <= 3600:
            raise ConfigError(
                f"LLM timeout must be between 0 and 3600 seconds, got {self.timeout}",
                hint=_where("timeout"),
            )
        if self.mode not in MODES:
            raise ConfigError(
                f"unknown LLM mode {self.mode!r}",
                hint=f"choose one of {', '.join(MODES)} ({_where('mode')})",
            )
        if not 0 <= self.max_retries <= 20:
            raise ConfigError(
                f"LLM max retries must be between 0 and 20, got {self.max_retries}",
                hint=_where("max_retries"),
            )
        if not 16 <= self.max_tokens <= 1_000_000:
            raise ConfigError(
                f"LLM max tokens must be between 16 and 1000000, got {self.max_tokens}",
                hint=_where("max_tokens"),
            )
        if self.backoff < 0 or self.max_backoff < 0:
            raise ConfigError("LLM backoff delays must not be negative")

    @classmethod
    def resolve(
        cls,
        *,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        concurrency: int | None = None,
        timeout: float | None = None,
        mode: str | None = None,
        max_retries: int | None = None,
        max_tokens: int | None = None,
        backoff: float = 1.0,
        max_backoff: float = 30.0,
        temperature: float = 0.0,
        env: Mapping[str, str] | None = None,
        require_endpoint: bool = True,
    ) -> LLMConfig:
        """Settings from explicit values (flags), else ``STRUCTRAG_LLM_*`` variables.

        ``require_endpoint=False`` accepts a missing base URL (a dry run needs the model,
        which keys the cache, but sends nothing).
        """
        env = os.environ if env is None else env

        def pick(value: object, name: str) -> str | None:
            if value is not None and value != "":
                return str(value)
            found = env.get(_SOURCES[name][1], "").strip()
            return found or None

        url = pick(base_url, "base_url")
        if url is None and require_endpoint:
            raise ConfigError(
                "no LLM endpoint configured",
                hint=f"{_where('base_url')} (e.g. http://127.0.0.1:8080/v1 for llama.cpp's "
                "server, http://localhost:11434/v1 for Ollama, https://api.openai.com/v1)",
            )
        name = pick(model, "model")
        if name is None:
            raise ConfigError(
                "no LLM model configured",
                hint=f"{_where('model')} (e.g. gpt-4o-mini, llama3.2, or any name for "
                "llama.cpp's server)",
            )
        return cls(
            base_url=(url or "").rstrip("/"),
            model=name,
            api_key=pick(api_key, "api_key") or NO_API_KEY,
            concurrency=_number(pick(concurrency, "concurrency"), "concurrency", int, 4),
            timeout=_number(pick(timeout, "timeout"), "timeout", float, 60.0),
            mode=cast(Mode, (pick(mode, "mode") or "tools").lower()),
            max_retries=_number(pick(max_retries, "max_retries"), "max_retries", int, 3),
            max_tokens=_number(pick(max_tokens, "max_tokens"), "max_tokens", int, 4096),
            backoff=backoff,
            max_backoff=max_backoff,
            temperature=temperature,
        )

    @classmethod
    def resolve_optional(
        cls, *, env: Mapping[str, str] | None = None, **settings: Any
    ) -> LLMConfig | None:
        """Like :meth:`resolve`, but ``None`` when no endpoint is configured at all (no
        base URL from a flag or the environment): for work whose LLM is optional (``ask``
        translating offline, ``--answer`` saying there is none). Settings that are given
        but wrong (a URL without a scheme, a timeout that is not a number, an unknown
        mode, a missing model) still raise :class:`ConfigError` naming them."""
        env = os.environ if env is None else env
        url = settings.get("base_url")
        if (url is None or url == "") and not env.get(ENV_BASE_URL, "").strip():
            return None
        return cls.resolve(**settings, env=env)

    @property
    def shown_url(self) -> str:
        """The base URL as errors and notes show it: without a user and password written
        into it (``http://user:pw@host/v1``) or its query (which may hold a key)."""
        from urllib.parse import urlsplit, urlunsplit

        try:
            parts = urlsplit(self.base_url)
            host = parts.netloc.rpartition("@")[2]
        except ValueError:
            return "(the configured URL)"
        return urlunsplit((parts.scheme, host, parts.path, "", ""))

    def public_settings(self) -> dict[str, object]:
        """The settings that change what is extracted; safe to log (no key, no URL)."""
        return {"model": self.model, "mode": self.mode, "temperature": self.temperature}


N = TypeVar("N", int, float)


def _number(text: str | None, name: str, kind: type[N], default: N) -> N:
    if text is None:
        return default
    try:
        return kind(text)
    except ValueError:
        raise ConfigError(
            f"{name.replace('_', ' ')} must be a number, got {text!r}", hint=_where(name)
        ) from None
