"""The Python encoder of the static model (structrag.static_vocab) against the native one."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

static_model = pytest.importorskip("static_model")

from static_model._static_model import encode_batch  # noqa: E402

from structrag import static_vocab  # noqa: E402
from structrag.embedders import StaticEmbedder  # noqa: E402

MODEL_DIR = Path(static_model.__file__).parent / "model"

VARIED = [
    "What did Caroline say about adoption?",
    "",
    " ",
    "hello",
    "Hello, WORLD!!! ... .... .. .",
    "When did Melanie paint a sunrise? (2022)",
    "Café crème brûlée, naïve Zoë, straße, ÉCOLE, Ørsted, Œuvre, Ñandú",
    "I'm so happy 😀🎉 — it's “great” ‘really’ … ok?",
    "supercalifragilisticexpialidocious pneumonoultramicroscopicsilicovolcanoconiosis",
    "xxqzj zzqqxx LGBTQ+ e-mail U.S.A. 7:30pm 1,000,000 $5.99 €10 £3 ¥100",
    "tabs\tand\nnewlines\n\n  and   spaces",
    "½ ² ™ © ® µ ¿qué? ¡sí! ▁ ■ ─",
    "\u2581leading metaspace\u2581 and\u2581\u2581inside",
    "Ελληνικά και русский текст, ѢѣѤ",
    "→ ⇒ ∀x ∈ ℝ: x² ≥ 0 ☃ ✓ ❤ ☀",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory: pytest.TempPathFactory) -> static_vocab.StaticVocab:
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        built = static_vocab.load_vocab(MODEL_DIR)
        assert built is not None
        files = list((cache / "structrag" / "static-vocab").iterdir())
        assert len(files) == 1
        cached = static_vocab.load_vocab(MODEL_DIR)
        assert cached is not None
    return cached


def _native(texts: list[str]) -> list[np.ndarray]:
    return [np.asarray(row, dtype=np.float32) for row in encode_batch(str(MODEL_DIR), texts, 512)]


def _fuzz(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    letters = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    letters += list(" .,;:!?'\"-()[]{}…—–’“”‘\t\n\u00a0éèêëàâäôöûüçñÉÈÀÇÑßøåæœ😀🎉❤☃€£½²\u2581")
    words = ["hello", "Caroline", "adoption", "naïve", "...", "don't", "2023", "e-mail"]
    texts = []
    for _ in range(count):
        parts = [
            rng.choice(letters) if rng.random() < 0.7 else rng.choice(words) + " "
            for _ in range(rng.randint(0, 50))
        ]
        texts.append("".join(parts))
    return texts


def test_python_vectors_are_bit_identical_to_native(vocab: static_vocab.StaticVocab) -> None:
    texts = VARIED + _fuzz(1500, seed=7) + ["ﬁne Ａ ① ㎏ (outside the mapped blocks)"]
    # every character the Python encoder maps, alone and repeated
    texts += list(vocab.char_map) + [char * 3 for char in list(vocab.char_map)[::5]]
    encoded = 0
    for text, native in zip(texts, _native(texts), strict=True):
        ids = vocab.tokenize(text)
        if ids is None:
            continue
        encoded += 1
        pooled = vocab.pool(ids)
        assert pooled.dtype == np.float32
        assert pooled.tobytes() == native.tobytes(), repr(text)
    assert encoded >= len(texts) - 10
    for text in VARIED:
        assert vocab.tokenize(text) is not None, repr(text)


def test_texts_it_cannot_prove_fall_back(vocab: static_vocab.StaticVocab) -> None:
    assert vocab.encode(["e\u0301"]) is None  # a combining mark joins its grapheme
    assert vocab.encode(["👍🏽"]) is None  # an emoji modifier
    assert vocab.encode(["a <unk> b"]) is None  # an added token
    assert vocab.encode(["long " * 200]) is None  # the native encoder truncates
    assert vocab.encode(["ok", "\u200d"]) is None  # one text falls back: the batch does


def test_embedder_uses_python_for_short_batches_and_native_for_long(
    vocab: static_vocab.StaticVocab, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedder = StaticEmbedder()
    embedder._vocab = vocab
    question = ["What did Caroline say about adoption?", "Zoë's café 🎉"]
    vectors = embedder.encode(question)
    assert embedder._encode is None  # the native encoder was not loaded
    native = StaticEmbedder()
    monkeypatch.setattr(StaticEmbedder, "short_batch_chars", 0)
    expected = native.encode(question)
    assert native._encode is not None
    assert vectors.tobytes() == expected.tobytes()
    # once loaded, the native encoder is used for everything
    embedder._encode = native._encode
    monkeypatch.setattr(StaticEmbedder, "short_batch_chars", 10**9)
    assert embedder.encode(["e\u0301"]).tobytes() == native.encode(["e\u0301"]).tobytes()


def test_cache_is_keyed_validated_and_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert static_vocab.load_vocab(MODEL_DIR) is not None
    (path,) = (tmp_path / "structrag" / "static-vocab").iterdir()
    data = bytearray(path.read_bytes())
    data[-100] ^= 0xFF  # damaged: the checksum fails, so it is built and written again
    path.write_bytes(bytes(data))
    key = static_vocab._model_key(MODEL_DIR)
    assert static_vocab._load(path, key) is None
    rebuilt = static_vocab.load_vocab(MODEL_DIR)
    assert rebuilt is not None
    assert static_vocab._load(path, key) is not None
    assert static_vocab._load(path, key + "other") is None  # other model files
    path.write_bytes(b"junk")
    assert static_vocab.load_vocab(MODEL_DIR) is not None
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []


def test_unknown_model_directory_gives_none(tmp_path: Path) -> None:
    assert static_vocab.load_vocab(tmp_path) is None
