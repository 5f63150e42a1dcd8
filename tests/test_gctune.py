"""The collector's settings during a write (structrag.gctune) are put back after it."""

from __future__ import annotations

import gc

import pytest

from structrag.gctune import FULL_EVERY, fewer_full_collections


def test_full_collections_are_rarer_inside_and_as_before_after() -> None:
    before = gc.get_threshold()
    with fewer_full_collections():
        inside = gc.get_threshold()
    assert inside[:2] == before[:2] and inside[2] == max(before[2], FULL_EVERY)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_full_collections():
        raise RuntimeError("a failed ingest")
    assert gc.get_threshold() == before
