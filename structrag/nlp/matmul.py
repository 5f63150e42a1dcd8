"""Matrix products for the spaCy pipeline: numpy's BLAS on one thread, instead of blis.

thinc's CPU ops run each matrix product of ``tok2vec``, the tagger and the parser through
blis. On the machine this project is measured on (AMD EPYC with AVX-512) blis took 19 ms
for the tok2vec product of 4,000 tokens (4,000 x 288 by 288 x 288) and numpy's OpenBLAS
6.5 ms; the pipeline parsed ``locomo_dev``'s 2,760 messages in 2.8-3.1 against 4.8-5.2
CPU-seconds, with the same tags, heads and labels and the same knowledge rows
(``benchmarks/matmul_check.py``).

OpenBLAS would spread even a question's products over every core and keep the other
threads spinning: a question took 2.6-2.9 ms of CPU for 1.3 ms of wall time, against
1.7-2.1 ms with blis. The products therefore run on one BLAS thread, as blis's did; the
process's own setting is put back as soon as no product is running (other threads'
numpy work meanwhile also gets one thread).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Any

import numpy
from thinc.api import NumpyOps

if TYPE_CHECKING:
    from spacy.language import Language


class _OneThread:
    """A context in which the process's BLAS libraries use one thread; nested and
    concurrent entries share it, and the last to leave puts the setting back."""

    def __init__(self) -> None:
        self._libraries: list[Any] | None = None
        self._reset()
        # A process forked while another thread was inside (a server's question parse
        # while an ingest forks its workers) would inherit a held lock and a count no
        # thread of it will bring back down.
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._saved: list[tuple[Any, int]] = []

    def __enter__(self) -> None:
        with self._lock:
            if self._inside == 0:
                if self._libraries is None:
                    from threadpoolctl import (  # type: ignore[import-untyped]
                        ThreadpoolController,
                    )

                    found = ThreadpoolController().select(user_api="blas")
                    self._libraries = list(found.lib_controllers)
                self._saved = [(lib, lib.get_num_threads()) for lib in self._libraries]
                for lib, threads in self._saved:
                    if threads != 1:
                        lib.set_num_threads(1)
            self._inside += 1

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._inside -= 1
            if self._inside == 0:
                for lib, threads in self._saved:
                    if threads != 1:
                        lib.set_num_threads(threads)


_ONE_THREAD = _OneThread()


class OneThreadNumpyOps(NumpyOps):  # type: ignore[misc]
    """thinc's CPU ops with matrix products by numpy on one BLAS thread."""

    def __init__(self) -> None:
        super().__init__(use_blis=False)

    def gemm(
        self,
        x: Any,
        y: Any,
        out: Any = None,
        trans1: bool = False,
        trans2: bool = False,
    ) -> Any:
        if trans1:
            x = x.T
        if trans2:
            y = y.T
        with _ONE_THREAD:
            if out is None:
                return numpy.dot(x, y)
            numpy.dot(x, y, out=out)
            return out


def numpy_matmul(nlp: Language) -> None:
    """Have the pipeline's models multiply matrices with numpy on one thread (see the
    module docstring). Only this pipeline's models change, not thinc's current ops; GPU
    ops are left alone."""
    from thinc.api import Model

    ops = OneThreadNumpyOps()
    for _, component in nlp.components:
        model = getattr(component, "model", None)
        if isinstance(model, Model):
            for node in model.walk():
                if type(node.ops) is NumpyOps:
                    node.ops = ops
