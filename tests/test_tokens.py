"""Token counting offline: the vocabulary seeded from the bundled copy, and the saved
arguments that let a cold process skip reading it."""

from __future__ import annotations

import hashlib
import marshal
from pathlib import Path
from typing import Any

import pytest

from structrag import tokens
from structrag.errors import ConfigError
from structrag.tokens import TiktokenCounter

TEXTS = [
    "",
    "When did Marco adopt Biscuit?",
    "[2024-07-03 10:00] Priya: the engine's fine, ça marche 👍\n",
    "<|endoftext|> is counted as text, not as a special token",
    "  spaces,\ttabs\r\nand 12345678901234567890 digits",
]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    return tmp_path


def saved(cache: Path, name: str = "cl100k_base") -> list[Path]:
    return sorted(cache.glob(f"{name}-*.marshal"))


@pytest.mark.parametrize(("name", "question_tokens"), [("cl100k_base", 8), ("o200k_base", 7)])
def test_a_saved_encoding_counts_as_the_vocabulary_does(
    cache: Path, name: str, question_tokens: int
) -> None:
    first = TiktokenCounter(name)  # reads the vocabulary, keeps the arguments
    assert len(saved(cache, name)) == 1
    again = TiktokenCounter(name)  # from the saved arguments
    assert again._encoding is not first._encoding
    assert [again.count(t) for t in TEXTS] == [first.count(t) for t in TEXTS]
    assert again.count(TEXTS[1]) == question_tokens


def test_a_damaged_or_foreign_saved_file_is_not_read(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = [TiktokenCounter().count(t) for t in TEXTS]
    (path,) = saved(cache)
    loads: list[str] = []
    real = TiktokenCounter._load

    def counted(name: str) -> Any:
        loads.append(name)
        return real(name)

    monkeypatch.setattr(TiktokenCounter, "_load", staticmethod(counted))
    foreign = marshal.dumps(("a pattern", {}, {b"a": -1, b"b": -1}))  # sound digest, bad ranks
    for damage in (
        b"",
        b"\0" * 40,
        path.read_bytes()[:-1] + b"x",
        hashlib.sha256(foreign).digest() + foreign,
    ):
        path.write_bytes(damage)
        assert [TiktokenCounter().count(t) for t in TEXTS] == expected
    assert loads == ["cl100k_base"] * 4
    # Rewritten by the last load: read again without the vocabulary.
    TiktokenCounter()
    assert loads == ["cl100k_base"] * 4
    assert [p.name for p in cache.iterdir() if p.name.startswith(".")] == []
    assert tokens._load_saved("cl100k_base") is not None
    assert tokens._load_saved("p50k_base") is None  # not one structrag ships


def test_a_cache_that_cannot_be_written_still_counts(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = cache / "not-a-folder"
    blocker.write_text("a file where the saved arguments' folder should be")
    monkeypatch.setattr(tokens, "_saved_path", lambda name: blocker / f"{name}.marshal")
    counter = TiktokenCounter("cl100k_base")
    assert counter.count(TEXTS[1]) == 8
    assert tokens._load_saved("cl100k_base") is None


def test_an_encoding_that_cannot_be_loaded_is_tried_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A vocabulary structrag does not ship is downloaded by tiktoken: offline that fails.
    The error does not carry the download's URL, and a second ask (a server's next
    request) fails at once, without trying the network again."""
    import tiktoken

    calls: list[str] = []

    def offline(name: str) -> tiktoken.Encoding:
        calls.append(name)
        raise OSError("Failed to resolve 'openaipublic.blob.core.windows.net'")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    monkeypatch.setattr(tokens, "_UNAVAILABLE", {})
    for _ in range(3):
        with pytest.raises(ConfigError, match="does not ship it") as info:
            tokens.TiktokenCounter("gpt2")
        assert "openaipublic" not in str(info.value)
    assert calls == ["gpt2"]
