"""The static embedding model, encoded in Python for a few short texts.

The native encoder of ``tokenlearn-static-model`` parses its 10 MB ``tokenizer.json`` on
its first call (~0.6-0.9 s), which is most of a cold ``structrag ask``. A question is a
few words, so :func:`encode_short` encodes it here instead, from a table built once from
the model's files and cached in ``$XDG_CACHE_HOME/structrag/static-vocab/`` (keyed by the
files' size and modification time, validated when loaded, written atomically).

The steps are those of the native encoder (HF ``tokenizers`` 0.22 + Model2Vec pooling):

* normaliser ``Precompiled`` (a SentencePiece character map), applied per grapheme;
* pre-tokeniser ``WhitespaceSplit`` then ``Metaspace`` (``▁`` prepended to every word,
  split before every ``▁``);
* model ``Unigram`` (Viterbi on the token scores, unknown characters scored
  ``min_score - 10``, consecutive nodes of the unknown id fused and looked up again);
* pooling: float32 sum of ``embeddings[mapping[id]] * weights[id]`` in token order, times
  ``1 / count``, divided by the float32 norm summed in order (``max(norm, 1e-12)``).

Only texts whose characters are each their own grapheme cluster (a fixed set of scripts
and symbols with no combining marks, format characters, CR, Hangul jamo, regional
indicators or emoji modifiers) and that are at most 512 UTF-8 bytes (so neither of the
native encoder's truncations applies) and contain no ``<`` (the added tokens ``<pad>``
and ``<unk>``) are encoded here; :func:`encode_short` returns None for anything else,
and for any problem with the model files or the cache, and the caller uses the native
encoder. The vectors are bit-identical to the native encoder's
(``tests/test_static_vocab.py`` compares them).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import struct
import tempfile
import unicodedata
import zlib
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["StaticVocab", "encode_short", "load_vocab"]

_FORMAT = 1
_MAGIC = b"SRSV"
_MODEL_FILES = ("config.json", "model.safetensors", "tokenizer.json")
_MAX_TEXT_BYTES = 512
_UNK_PENALTY = 10.0
_SPACE = "\u2581"
# Rust's char::is_whitespace (the Unicode White_Space property).
_WHITESPACE = frozenset(
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
    "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)
# Blocks whose characters (bar the categories in _UNSAFE_CATEGORIES) each form a grapheme
# cluster of their own, so the per-grapheme normaliser maps them one by one.
_SAFE_RANGES = (
    (0x0020, 0x007E),  # ASCII printable
    (0x00A0, 0x024F),  # Latin-1 Supplement, Latin Extended-A/B
    (0x0250, 0x02FF),  # IPA, spacing modifier letters
    (0x0370, 0x03FF),  # Greek
    (0x0400, 0x0482),  # Cyrillic (0483-0489 are combining)
    (0x048A, 0x04FF),
    (0x2010, 0x2027),  # general punctuation (no format characters)
    (0x2030, 0x205E),
    (0x20A0, 0x20C0),  # currency
    (0x2100, 0x214F),  # letterlike symbols
    (0x2190, 0x22FF),  # arrows, mathematical operators
    (0x2500, 0x25FF),  # box drawing, block elements (U+2581, the metaspace), shapes
    (0x2600, 0x27BF),  # miscellaneous symbols, dingbats
    (0x1F300, 0x1F3FA),  # pictographs (1F3FB-1F3FF are emoji modifiers)
    (0x1F400, 0x1F64F),
    (0x1F680, 0x1F6FF),
    (0x1F900, 0x1F9FF),
)
_UNSAFE_CATEGORIES = frozenset({"Mn", "Mc", "Me", "Cf", "Cc", "Cs", "Co", "Cn", "Zl", "Zp"})


def _safe_chars() -> list[str]:
    chars = ["\t", "\n"]
    for low, high in _SAFE_RANGES:
        for code in range(low, high + 1):
            char = chr(code)
            if unicodedata.category(char) not in _UNSAFE_CATEGORIES:
                chars.append(char)
    return chars


class StaticVocab:
    """What the Python encoder needs: character map, vocabulary, scores and the model."""

    def __init__(
        self,
        char_map: dict[str, str],
        token_blob: bytes,
        offsets: np.ndarray,
        table: np.ndarray,
        scores: np.ndarray,
        unk_id: int,
        max_token_chars: int,
        mapping: np.ndarray,
        weights: np.ndarray,
        embeddings: np.ndarray,
    ) -> None:
        self.char_map = char_map
        self.token_blob = token_blob
        self.offsets = offsets
        self.table = table
        self._offsets = np.ascontiguousarray(offsets, dtype=np.int64).data.cast("B").cast("q")
        self._table = np.ascontiguousarray(table, dtype=np.int32).data.cast("B").cast("i")
        self._mask = len(table) - 1
        self.scores = scores
        self._score_list: list[float] | None = None
        self.unk_id = unk_id
        self.unk_score = float(scores.min()) - _UNK_PENALTY
        self.max_token_chars = max_token_chars
        self.mapping = mapping
        self.weights = weights
        self.embeddings = embeddings

    def token_id(self, token: str) -> int | None:
        """The id of ``token`` in the vocabulary (an open-addressing table on crc32)."""
        key = token.encode("utf-8")
        table = self._table
        offsets = self._offsets
        blob = self.token_blob
        mask = self._mask
        slot = zlib.crc32(key) & mask
        while True:
            entry = table[slot]
            if entry == 0:
                return None
            index = entry - 1
            if blob[offsets[index] : offsets[index + 1]] == key:
                return index
            slot = (slot + 1) & mask

    # -- tokenizer ---------------------------------------------------------------------

    def normalise(self, text: str) -> str | None:
        """The Precompiled normaliser's output, or None when a character is not mapped."""
        char_map = self.char_map
        parts = []
        for char in text:
            mapped = char_map.get(char)
            if mapped is None:
                return None
            parts.append(mapped)
        return "".join(parts)

    def words(self, normalised: str) -> list[str]:
        """WhitespaceSplit then Metaspace (prepend always, split)."""
        pieces: list[str] = []
        word: list[str] = []
        for char in normalised + " ":
            if char not in _WHITESPACE:
                word.append(char)
                continue
            if not word:
                continue
            text = "".join(word)
            word = []
            if not text.startswith(_SPACE):
                text = _SPACE + text
            start = 0
            for index in range(1, len(text)):
                if text[index] == _SPACE:
                    pieces.append(text[start:index])
                    start = index
            pieces.append(text[start:])
        return pieces

    def unigram(self, piece: str) -> list[int]:
        """The Unigram model's ids for one pre-token (tokenizers' ``encode_optimized``)."""
        if self._score_list is None:
            self._score_list = self.scores.tolist()
        scores = self._score_list
        # token_id() inlined: this loop is most of the time of a batch of words
        table, offsets, blob, mask = self._table, self._offsets, self.token_blob, self._mask
        crc32 = zlib.crc32
        unk_id = self.unk_id
        size = len(piece)
        limit = self.max_token_chars
        best_score = [0.0] * (size + 1)
        best_start: list[int | None] = [None] * (size + 1)
        best_id = [0] * (size + 1)
        encoded = [piece[i:].encode("utf-8") for i in range(size)]
        lengths = [len(char.encode("utf-8")) for char in piece]
        for start in range(size):
            till_here = best_score[start]
            has_single = False
            tail = encoded[start]
            length = 0
            for end in range(start + 1, min(size, start + limit) + 1):
                length += lengths[end - 1]
                key = tail[:length]
                slot = crc32(key) & mask
                while True:
                    entry = table[slot]
                    if entry == 0:
                        token_id = -1
                        break
                    if blob[offsets[entry - 1] : offsets[entry]] == key:
                        token_id = entry - 1
                        break
                    slot = (slot + 1) & mask
                if token_id < 0:
                    continue
                candidate = scores[token_id] + till_here
                if best_start[end] is None or candidate > best_score[end]:
                    best_score[end] = candidate
                    best_start[end] = start
                    best_id[end] = token_id
                if end == start + 1:
                    has_single = True
            if not has_single:
                end = start + 1
                candidate = self.unk_score + till_here
                if best_start[end] is None or candidate > best_score[end]:
                    best_score[end] = candidate
                    best_start[end] = start
                    best_id[end] = unk_id
        strings: list[str] = []
        fused: list[str] = []
        end = size
        while end > 0:
            begin = best_start[end]
            assert begin is not None
            if best_id[end] == unk_id:
                fused.append(piece[begin:end])
            else:
                if fused:
                    strings.append("".join(reversed(fused)))
                    fused = []
                strings.append(piece[begin:end])
            end = begin
        if fused:
            strings.append("".join(reversed(fused)))
        strings.reverse()
        ids = [self.token_id(string) for string in strings]
        return [unk_id if token_id is None else token_id for token_id in ids]

    def tokenize(self, text: str) -> list[int] | None:
        """The token ids of ``text``, or None when it is not one this module encodes."""
        if "<" in text or len(text.encode("utf-8")) > _MAX_TEXT_BYTES:
            return None
        normalised = self.normalise(text)
        if normalised is None or "<" in normalised:
            return None
        ids: list[int] = []
        for piece in self.words(normalised):
            ids.extend(self.unigram(piece))
        return ids[:512]

    # -- pooling -----------------------------------------------------------------------

    def pool(self, ids: list[int]) -> np.ndarray:
        """One text's vector (see :meth:`pool_many`)."""
        pooled: np.ndarray = self.pool_many([ids])[0]
        return pooled

    def pool_many(self, texts_ids: list[list[int]]) -> np.ndarray:
        """Model2Vec's pooling, in the native encoder's float32 operations and order: the
        sum of ``embeddings[mapping[id]] * weights[id]`` from 0.0 in token order, times
        ``1 / count``, divided by ``max(sqrt(sum of squares in order), 1e-12)``.
        (``np.add.accumulate`` adds strictly in order, unlike ``sum``.)"""
        dim = self.embeddings.shape[1]
        counts = [len(ids) for ids in texts_ids]
        flat = np.fromiter(
            (token_id for ids in texts_ids for token_id in ids), dtype=np.int64, count=sum(counts)
        )
        rows = self.embeddings[self.mapping[flat]].astype(np.float32)
        rows *= self.weights[flat][:, None]
        totals = np.zeros((len(texts_ids), dim), dtype=np.float32)
        start = 0
        for index, count in enumerate(counts):
            if count:
                block = np.empty((count + 1, dim), dtype=np.float32)
                block[0] = 0.0  # the sum starts from +0.0 (a -0.0 product stays +0.0)
                block[1:] = rows[start : start + count]
                totals[index] = np.add.accumulate(block, axis=0)[-1]
            start += count
        scale = np.float32(1.0) / np.maximum(np.asarray(counts, dtype=np.float32), 1)
        means = totals * scale.astype(np.float32)[:, None]
        squares = np.add.accumulate(means * means, axis=1)[:, -1]
        norms = np.maximum(np.sqrt(squares), np.float32(1e-12)).astype(np.float32)
        pooled: np.ndarray = (means / norms[:, None]).astype(np.float32)
        return pooled

    def encode(self, texts: list[str]) -> np.ndarray | None:
        texts_ids = []
        for text in texts:
            ids = self.tokenize(text)
            if ids is None:
                return None
            texts_ids.append(ids)
        return self.pool_many(texts_ids)


# -- building and caching the table ------------------------------------------------------


def _transform(trie: np.ndarray, normalized: bytes, key: bytes) -> str | None:
    """spm_precompiled's ``transform``: the replacement of the shortest key that is a
    prefix of ``key`` (a darts-clone double array), or None."""
    node = 0
    unit = int(trie[node])
    node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
    for byte in key:
        if byte == 0:
            break
        node ^= byte
        if node >= len(trie):
            return None
        unit = int(trie[node])
        if unit & ((1 << 31) | 0xFF) != byte:
            return None
        node ^= (unit >> 10) << ((unit & (1 << 9)) >> 6)
        if (unit >> 8) & 1:
            start = int(trie[node]) & ((1 << 31) - 1)
            stop = normalized.index(b"\0", start)
            return normalized[start:stop].decode("utf-8")
    return None


def _read_safetensors(path: Path) -> dict[str, np.ndarray]:
    dtypes = {"I8": np.int8, "I32": np.int32, "I64": np.int64, "F32": np.float32}
    data = path.read_bytes()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + header_len])
    body = memoryview(data)[8 + header_len :]
    arrays = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        start, stop = spec["data_offsets"]
        array = np.frombuffer(
            body[start:stop], dtype=np.dtype(dtypes[spec["dtype"]]).newbyteorder("<")
        )
        arrays[name] = array.reshape(spec["shape"]).copy()
    return arrays


def build_vocab(model_dir: Path) -> StaticVocab:
    """The table, from the model's files (~1 s); raises on anything unexpected."""
    spec = json.loads((model_dir / "tokenizer.json").read_text("utf-8"))
    normalizer = spec["normalizer"]
    pre = spec["pre_tokenizer"]
    model = spec["model"]
    expected_pre = [
        {"type": "WhitespaceSplit"},
        {"type": "Metaspace", "replacement": _SPACE, "prepend_scheme": "always", "split": True},
    ]
    if (
        normalizer.get("type") != "Precompiled"
        or pre != {"type": "Sequence", "pretokenizers": expected_pre}
        or model.get("type") != "Unigram"
        or model.get("byte_fallback")
        or spec.get("post_processor") is not None
        or spec.get("truncation") is not None
        or {token["content"] for token in spec.get("added_tokens", [])} - {"<pad>", "<unk>"}
    ):
        raise ValueError("the static model's tokenizer is not the one this module knows")
    config = json.loads((model_dir / "config.json").read_text("utf-8"))
    if config.get("normalize") is not True:
        raise ValueError("the static model does not normalise its vectors")
    blob = base64.b64decode(normalizer["precompiled_charsmap"])
    (trie_bytes,) = struct.unpack("<I", blob[:4])
    trie = np.frombuffer(blob[4 : 4 + trie_bytes], dtype="<u4")
    normalized = blob[4 + trie_bytes :]
    char_map = {}
    for char in _safe_chars():
        mapped = _transform(trie, normalized, char.encode("utf-8"))
        char_map[char] = char if mapped is None else mapped
    tokens = [str(entry[0]).encode("utf-8") for entry in model["vocab"]]
    scores = np.array([float(entry[1]) for entry in model["vocab"]], dtype=np.float64)
    if len(set(tokens)) != len(tokens) or not all(tokens):
        raise ValueError("the static model's vocabulary has duplicate or empty tokens")
    offsets = np.cumsum([0, *map(len, tokens)], dtype=np.int64)
    size = 1 << max(int(len(tokens) * 2).bit_length(), 4)
    table = np.zeros(size, dtype=np.int32)
    slots = table.tolist()
    for index, token in enumerate(tokens):
        slot = zlib.crc32(token) & (size - 1)
        while slots[slot]:
            slot = (slot + 1) & (size - 1)
        slots[slot] = index + 1
    table[:] = slots
    max_chars = max(len(token.decode("utf-8")) for token in tokens)
    arrays = _read_safetensors(model_dir / "model.safetensors")
    return _checked(
        char_map,
        b"".join(tokens),
        offsets,
        table,
        scores,
        int(model["unk_id"]),
        max_chars,
        arrays["mapping"],
        arrays["weights"],
        arrays["embeddings"],
    )


def _checked(
    char_map: dict[str, str],
    token_blob: bytes,
    offsets: np.ndarray,
    table: np.ndarray,
    scores: np.ndarray,
    unk_id: int,
    max_token_chars: int,
    mapping: np.ndarray,
    weights: np.ndarray,
    embeddings: np.ndarray,
) -> StaticVocab:
    count = len(scores)
    size = len(table)
    if not (
        scores.shape == (count,)
        and offsets.shape == (count + 1,)
        and int(offsets[0]) == 0
        and int(offsets[-1]) == len(token_blob)
        and bool(np.all(np.diff(offsets) > 0))
        and size >= 2 * count
        and size & (size - 1) == 0
        and int(np.count_nonzero(table)) == count
        and int(table.min()) >= 0
        and int(table.max()) == count
        and mapping.shape == (count,)
        and weights.shape == (count,)
        and weights.dtype == np.float32
        and embeddings.ndim == 2
        and embeddings.dtype == np.int8
        and 0 <= unk_id < count
        and int(mapping.min()) >= 0
        and int(mapping.max()) < embeddings.shape[0]
        and max_token_chars > 0
    ):
        raise ValueError("the static model's arrays do not fit together")
    return StaticVocab(
        char_map,
        token_blob,
        offsets,
        table,
        scores,
        unk_id,
        max_token_chars,
        mapping,
        weights,
        embeddings,
    )


def _model_key(model_dir: Path) -> str:
    parts = [str(model_dir.resolve()), str(_FORMAT), repr(_SAFE_RANGES)]
    for name in _MODEL_FILES:
        stat = (model_dir / name).stat()
        parts.append(f"{name}:{stat.st_size}:{stat.st_mtime_ns}")
    return "|".join(parts)


def _cache_path(key: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    digest = hashlib.sha256(key.encode()).hexdigest()[:20]
    return base / "structrag" / "static-vocab" / f"v{_FORMAT}-{digest}.bin"


_PARTS = (
    ("scores", "<f8"),
    ("offsets", "<i8"),
    ("table", "<i4"),
    ("mapping", "<i4"),
    ("weights", "<f4"),
    ("embeddings", "i1"),
)


def _save(path: Path, key: str, vocab: StaticVocab) -> None:
    arrays = [
        np.ascontiguousarray(getattr(vocab, name), dtype=dtype).tobytes() for name, dtype in _PARTS
    ]
    arrays.append(vocab.token_blob)
    payload = b"".join(arrays)
    header = json.dumps(
        {
            "key": key,
            "char_map": vocab.char_map,
            "unk_id": vocab.unk_id,
            "max_token_chars": vocab.max_token_chars,
            "embeddings_shape": list(vocab.embeddings.shape),
            "sizes": [len(part) for part in arrays],
            "crc32": zlib.crc32(payload),
        }
    ).encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".vocab-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(_MAGIC + struct.pack("<I", len(header)) + header + payload)
        Path(tmp).replace(path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load(path: Path, key: str) -> StaticVocab | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if data[:4] != _MAGIC:
        return None
    (header_len,) = struct.unpack("<I", data[4:8])
    header = json.loads(data[8 : 8 + header_len])
    if header.get("key") != key:
        return None
    payload = memoryview(data)[8 + header_len :]
    sizes = header["sizes"]
    if len(sizes) != len(_PARTS) + 1 or len(payload) != sum(sizes):
        return None
    if zlib.crc32(payload) != header["crc32"]:
        return None
    arrays: dict[str, np.ndarray] = {}
    start = 0
    for (name, dtype), size in zip(_PARTS, sizes, strict=False):
        arrays[name] = np.frombuffer(payload[start : start + size], dtype=dtype)
        start += size
    return _checked(
        {str(k): str(v) for k, v in header["char_map"].items()},
        bytes(payload[start:]),
        arrays["offsets"],
        arrays["table"],
        arrays["scores"],
        int(header["unk_id"]),
        int(header["max_token_chars"]),
        arrays["mapping"],
        arrays["weights"].astype(np.float32),
        arrays["embeddings"].reshape(header["embeddings_shape"]),
    )


def load_vocab(model_dir: Path) -> StaticVocab | None:
    """The table for the model in ``model_dir``: from the cache, else built and cached.
    None when the model is not one this module can encode."""
    try:
        key = _model_key(model_dir)
        path = _cache_path(key)
        try:
            cached = _load(path, key)
        except (ValueError, KeyError, TypeError, struct.error, UnicodeDecodeError):
            cached = None
        if cached is not None:
            return cached
        vocab = build_vocab(model_dir)
        try:
            _save(path, key, vocab)
        except OSError:
            pass  # an unwritable cache only costs the build next time
        return vocab
    except (OSError, ValueError, KeyError, TypeError, IndexError, struct.error):
        return None


def encode_short(vocab: StaticVocab | None, texts: list[str]) -> Any:
    """Vectors of ``texts`` (float32, normalised as the native encoder's), or None."""
    if vocab is None:
        return None
    return vocab.encode(texts)
