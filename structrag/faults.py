"""Fault points: places where a crash test can kill the process, deterministically.

``STRUCTRAG_FAULT=<point>`` in the environment makes the process SIGKILL itself when it
reaches that point (the crash suite in ``tests/test_crash.py`` uses it to check that an
index survives a crash at the worst moments, e.g. between the store's commit and the text
index's). Unset, a point costs one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

#: The points the code marks, and what happens there.
POINTS = {
    "store-commit": "an ingest is about to commit its store transaction",
    "text-commit": "the store has committed; the text index has not",
    "rebuild-swap": "a text index rebuild is about to swap the new index in",
}


def point(name: str) -> None:
    """Die here when ``STRUCTRAG_FAULT`` names this point."""
    if os.environ.get("STRUCTRAG_FAULT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
