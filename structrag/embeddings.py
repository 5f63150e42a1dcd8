"""What the core asks of an embedding model: L2-normalised vectors for texts.

Messages are embedded for the vector fill of ``ask`` and for fuzzy term matching; the
models live in :mod:`structrag.embedders` (the composition root picks one).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

#: Embedding settings an index can be built with (``--embeddings``).
EMBEDDERS = ("static", "minilm", "none")


class Embedder(Protocol):
    name: str
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray:
        """L2-normalised vectors, one row per text."""
        ...


#: A message's embedding reads at most this many characters of it: the gist is in the
#: start, models read a few hundred tokens at most, and a 20 MB message would otherwise
#: take gigabytes.
MAX_EMBED_CHARS = 8_000


def message_text(speaker: str | None, text: str) -> str:
    """What is embedded for a message: ``speaker: text`` (its start, for a long text)."""
    text = text[:MAX_EMBED_CHARS]
    return f"{speaker}: {text}" if speaker else text
