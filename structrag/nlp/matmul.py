"""Matrix products through numpy's BLAS instead of blis, in the extraction processes.

thinc's CPU ops run the matrix products of ``tok2vec``, the tagger and the parser's
feature layer through blis (the parser's per-step products stay with blis: spaCy calls it
directly). On the machine this project is measured on (AMD EPYC with AVX-512) blis took
19 ms for the tok2vec product of 4,000 tokens (4,000 x 288 by 288 x 288) and numpy's
OpenBLAS 6.5 ms; the pipeline parsed ``locomo_dev``'s 2,760 messages in 3.05 against 5.18
CPU-seconds, with the same tags, heads and labels and the same knowledge rows
(``benchmarks/matmul_check.py``).

OpenBLAS would spread a product over every core and keep the other threads spinning (the
whole of ``locomo_dev`` parsed in 2.4-2.8 s of wall time but 4.8-5.5 CPU-seconds with two
threads), and its thread count is one setting for the whole process, not safe to change
while another thread may be inside a BLAS call. So numpy's products are used only in
processes that structrag runs for extraction and holds to one BLAS thread from the start
(:func:`for_extraction`): the extraction workers and Ray actors. Elsewhere (a question's
parse, an ingest small enough to extract in the caller's process) the pipeline keeps
thinc's blis, and the caller's BLAS settings are left alone.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spacy.language import Language


def for_extraction(nlp: Language) -> None:
    """Make this process extract with numpy's products: every BLAS library of the process
    on one thread, and ``nlp``'s models (this process's copy) multiplying with numpy.
    Only for a process of structrag's own (a worker, an actor)."""
    one_blas_thread()
    numpy_matmul(nlp)


def one_blas_thread() -> None:
    """Every BLAS library loaded in this process on one thread (the workers already use
    every core between them)."""
    with contextlib.suppress(ImportError):
        from threadpoolctl import threadpool_limits  # type: ignore[import-untyped]

        threadpool_limits(1)


def numpy_matmul(nlp: Language) -> None:
    """Have ``nlp``'s models multiply matrices with numpy (thinc's ``NumpyOps`` without
    blis); GPU ops are left alone."""
    from thinc.api import Model, NumpyOps

    ops = NumpyOps(use_blis=False)
    for _, component in nlp.components:
        model = getattr(component, "model", None)
        if isinstance(model, Model):
            for node in model.walk():
                if isinstance(node.ops, NumpyOps):
                    node.ops = ops
