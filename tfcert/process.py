"""What a whole tfcert process sets for itself: the garbage collector's pace.

A long run of the checker or the construction builds millions of small containers that live
to its end (each token's tuple of FLINT rationals, the float analysis's bounds and values).
CPython's cyclic collector starts a collection after every 700 new containers and, now and
then, walks every container alive; none of that frees memory here, yet at N = 1000 sequences
of 64 tokens it is about a tenth of verify's time (docs/scaling.md). So the command line, a
shard's worker and each phase of ``tfcert bench`` collect rarely, as mypy does for the same
reason: cycles are still freed, only in larger batches. The library does not change it: a
notebook that calls ``tfcert.api`` keeps its interpreter's settings.
"""
from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

RARE = (200_000, 30, 30)  # mypy's thresholds (mypy/build.py): a young collection per 200 000 containers


@contextmanager
def rare_collection() -> Iterator[None]:
    """Collect rarely inside the block; the thresholds it found are restored after it."""
    old = gc.get_threshold()
    gc.set_threshold(*RARE)
    try:
        yield
    finally:
        gc.set_threshold(*old)
