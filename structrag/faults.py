"""Fault points: places where a test can stop the process, deterministically.

``STRUCTRAG_FAULT=<point>`` in the environment makes the process SIGKILL itself when it
reaches that point (the crash suite in ``tests/test_crash.py`` uses it to check that an
index survives a crash at the worst moments, e.g. between the store's commit and the text
index's). ``STRUCTRAG_FAULT=<point>:wait:<file>`` makes it create ``<file>`` there and wait
until the file is removed (the concurrency tests use it to act while an ingest is at that
point; a SIGINT meanwhile is Ctrl-C there). ``STRUCTRAG_FAULT=<point>:interrupt`` raises
``KeyboardInterrupt`` there, as Ctrl-C at that moment would, and
``STRUCTRAG_FAULT=<point>:disk-full`` raises the ``OSError`` a full disk gives. Unset, a
point costs one dictionary lookup.
"""

from __future__ import annotations

import errno
import os
import signal
import time
from pathlib import Path

#: The points the code marks, and what happens there.
POINTS = {
    "store-commit": "an ingest is about to commit its store transaction",
    "text-commit": "the store has committed; the text index has not",
    "rebuild-swap": "a text index rebuild is about to swap the new index in",
    "text-adopt": "an ingest's staged text segment has moved into the index, uncommitted",
    "segment-write": "the segment process is about to write an ingest's text segment",
    "serve-batch": "the server is about to answer a batch of questions",
    "knowledge-conversations": "a knowledge remove or clear has committed; its documents' "
    "conversations are not dropped yet",
    "memory-compact": "a room's compaction is about to write its summary (in a memory add: "
    "after the add committed)",
}


#: How long a waiting point waits for its file to go, at most.
WAIT_SECONDS = 600


def point(name: str) -> None:
    """Die (wait, or raise ``KeyboardInterrupt``) here when ``STRUCTRAG_FAULT`` names this
    point."""
    fault = os.environ.get("STRUCTRAG_FAULT")
    if fault is None or not fault.startswith(name):
        return
    if fault == name:
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == f"{name}:interrupt":
        raise KeyboardInterrupt
    elif fault == f"{name}:disk-full":
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    elif fault.startswith(f"{name}:wait:"):
        marker = Path(fault[len(name) + len(":wait:") :])
        marker.touch()
        deadline = time.monotonic() + WAIT_SECONDS
        while marker.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
