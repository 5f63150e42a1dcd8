"""Python's cyclic garbage collector during long writes.

A full collection walks every object the process holds: during an ingest, the loaded
spaCy pipeline (hundreds of thousands of objects) and all the ingest has built so far.
With the default thresholds one runs about every 70,000 allocations, and on
``locomo_dev.json`` (2 workers) they took 1.4-1.9 s of the writer's 6-7 CPU-seconds
(measured with ``gc.callbacks``; 0.3 s with what follows), on a machine whose two
cores the workers already fill.

* :func:`fewer_full_collections` makes full collections ten times rarer for the length
  of a write. Young objects are still collected as usual, so cyclic garbage is still
  freed, only later.
* :func:`freeze_before_fork` moves what the process holds when it forks its extraction
  workers (the pipeline just loaded) out of the collector's sight: the workers' own
  collections no longer walk it, nor write to its pages (which would copy them from the
  parent's), and neither do the writer's. :func:`unfreeze` gives it back when the last
  extractor that froze stops its workers; objects the host program froze itself are
  never given back by structrag. This is what the ``gc.freeze`` documentation
  recommends before a fork.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: A full collection at most once per this many collections of the middle generation
#: (Python's default is 10).
FULL_EVERY = 100


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Full collections ten times rarer inside the block; the thresholds are restored."""
    young, middle, old = gc.get_threshold()
    gc.set_threshold(young, middle, max(old, FULL_EVERY))
    try:
        yield
    finally:
        gc.set_threshold(young, middle, old)


#: Extractors whose workers run with the pipeline frozen (see freeze_before_fork).
_holds = 0


def freeze_before_fork() -> bool:
    """Hide every object the process holds now from the collector (see above); True when
    this call took a hold that :func:`unfreeze` must give back. A process that froze
    objects itself (a pre-forking server) is left as it is: False."""
    global _holds
    if _holds == 0 and gc.get_freeze_count() > 0:
        return False
    gc.freeze()
    _holds += 1
    return True


def unfreeze() -> None:
    """Give back a hold of :func:`freeze_before_fork`; the last one gives the objects back
    to the collector."""
    global _holds
    if _holds == 0:
        return
    _holds -= 1
    if _holds == 0:
        gc.unfreeze()
