"""The collector's settings during a write (structrag.gctune) are put back after it."""

from __future__ import annotations

import gc

import pytest

from structrag.gctune import FULL_EVERY, fewer_full_collections, freeze_before_fork, unfreeze


def test_full_collections_are_rarer_inside_and_as_before_after() -> None:
    before = gc.get_threshold()
    with fewer_full_collections():
        inside = gc.get_threshold()
    assert inside[:2] == before[:2] and inside[2] == max(before[2], FULL_EVERY)
    assert gc.get_threshold() == before
    with pytest.raises(RuntimeError), fewer_full_collections():
        raise RuntimeError("a failed ingest")
    assert gc.get_threshold() == before


def test_the_last_hold_gives_frozen_objects_back_and_a_hosts_freeze_is_kept() -> None:
    assert gc.get_freeze_count() == 0, "a test before this one left objects frozen"
    assert freeze_before_fork() and freeze_before_fork()  # two extractors' workers
    unfreeze()
    assert gc.get_freeze_count() > 0  # the other one's workers still run
    unfreeze()
    assert gc.get_freeze_count() == 0
    unfreeze()  # nothing held: nothing to give back
    gc.freeze()  # the host program's own freeze (a pre-forking server)
    try:
        assert gc.get_freeze_count() > 0
        assert not freeze_before_fork()
        unfreeze()
        # Still frozen (frozen objects that die in between leave the count, so it is
        # not compared exactly): structrag's unfreeze would have made it 0.
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
