"""The collector kept off a trace's objects while a big result is built from them.

A trace holds millions of long-lived objects (graphs, fake tensors, meta dicts); building a report
or a drawing allocates hundreds of thousands of records, and each full collection walks every old
object again: 2.4 of a 1,482-node report's 10-14 s; 1 s of a 60-layer GPT's 2-3 s first picture
(9,951 nodes), when one falls inside it (issue 36).  And a real step's or an eager run's own ``gc.collect()``
(what the run left in reference cycles freed before its memory is read) walks only what the run made: a full
one walks the whole session again, a second or more each time in a notebook (or a test session) holding traces.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["old_objects_frozen"]


_held = 0
"""How many ``old_objects_frozen`` blocks are running: one inside another freezes nothing more, and never asks
``gc.get_freeze_count()``, which counts the frozen objects one by one (CPython walks its list: 50 ms with
torch's millions of objects frozen, once per drawing of a report)."""


@contextlib.contextmanager
def old_objects_frozen() -> Iterator[None]:
    """The objects that exist before the block (the trace) left out of the collector's passes
    while it runs, and handed back afterwards.  Nothing is kept alive longer than the block takes;
    a session that froze objects itself, or turned the collector off, is left as it is (and so is a
    block inside another)."""
    global _held
    if _held or not gc.isenabled() or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    _held += 1
    try:
        yield
    finally:
        _held -= 1
        gc.unfreeze()
