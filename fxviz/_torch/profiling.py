"""What the allocator did while some code ran, from torch's profiler: every allocation and free in
time order.

The profiler's ``[memory]`` events (``profile_memory=True``) are read from ``kineto_results.events()``,
sorted by ``start_ns()``, as a running sum of ``nbytes()`` (a free is negative): bytes above the
state when profiling began, at every allocation.  That is the only reading that sees a peak inside a
compiled graph: summing each op's ``self_cpu_memory_usage`` (the profiler's table) books everything
a compiled graph allocates and frees, Python ``del``s included, at the start of the one op that
runs it, so it shows the memory *after* each graph, not its peak (mini_gpt's compiled backward read
that way: 763,916 B; in time order: 907,016 B).  Named ranges (``record_function``) mark phases.
The event tree gives each allocation's pointer, to tell whose a free was.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["MemoryTrace", "profiled", "mark", "Allocation", "allocations_by_pointer", "high_water"]


@dataclass
class MemoryTrace:
    """Every ``[memory]`` event while profiling, in time order, and the named ranges' spans."""

    events: list[tuple[int, int]] = field(default_factory=list)  # (start ns, +bytes or -bytes)
    ranges: dict[str, list[tuple[int, int]]] = field(default_factory=dict)  # name -> [(start ns, end ns)]
    raw: Any = None  # torch's kineto results (for allocations_by_pointer)

    def curve(self) -> list[tuple[int, int]]:
        """(time, bytes above the start) after each event."""
        out, live = [], 0
        for t, n in self.events:
            live += n
            out.append((t, live))
        return out

    def phase(self, name: str) -> tuple[int, int] | None:
        """(highest point, bytes when it ended) above the start, inside the first range called ``name``."""
        spans = self.ranges.get(name)
        if not spans:
            return None
        start, end = spans[0]
        high = None
        at_start = 0
        live = 0
        for t, n in self.events:
            if t < start:
                live += n
                at_start = live
                continue
            if t > end:
                break
            live += n
            high = live if high is None else max(high, live)
        return (at_start if high is None else max(high, at_start)), live


@contextlib.contextmanager
def _stderr_closed() -> Iterator[None]:
    """File descriptor 2 pointed at /dev/null for the block (what C++ writes there too)."""
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr to silence
        yield
        return
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def mark(name: str) -> contextlib.AbstractContextManager[Any]:
    """A named range the trace can find (``torch.profiler.record_function``)."""
    return torch.profiler.record_function(name)


@contextlib.contextmanager
def profiled() -> Iterator[MemoryTrace]:
    """Profile the block's CPU allocations; the yielded trace is filled when the block ends."""
    from torch.profiler import ProfilerActivity, profile

    trace = MemoryTrace()
    prof = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
    with _stderr_closed():  # kineto writes "USDT: ... profiler_start" to the process's stderr
        prof.start()
    try:
        yield trace
    finally:
        with _stderr_closed():
            prof.stop()
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    if results is None:
        return
    events = results.events()
    trace.events = sorted((e.start_ns(), e.nbytes()) for e in events  # type: ignore[attr-defined]
                          if e.name() == "[memory]")
    for e in events:
        if e.name() != "[memory]":
            trace.ranges.setdefault(e.name(), []).append((e.start_ns(), e.start_ns() + e.duration_ns()))
    trace.raw = results


def high_water(fn: Callable[[], Any], device: str = "cpu") -> int:
    """The most bytes ``fn()`` had allocated at once, its result's included (freed afterwards): on CPU
    from the profiler's events, on CUDA from the caching allocator's peak (blocks of 512 B)."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        base = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        result = fn()
        torch.cuda.synchronize()
        del result
        return int(torch.cuda.max_memory_allocated()) - base
    with profiled() as trace:
        result = fn()
        del result
    return max((live for _, live in trace.curve()), default=0)


@dataclass(frozen=True)
class Allocation:
    """One allocator event with its pointer: (time ns, pointer, +bytes / -bytes)."""

    t: int
    ptr: int
    nbytes: int


def allocations_by_pointer(trace: MemoryTrace) -> list[Allocation]:
    """Every allocation and free of ``trace`` with its pointer, in time order (the profiler's event
    tree: a free can be matched to the allocation it undoes)."""
    from torch._C._profiler import _EventType

    out: list[Allocation] = []
    stack = list(trace.raw.experimental_event_tree()) if trace.raw is not None else []
    while stack:
        e = stack.pop()
        if e.tag == _EventType.Allocation:
            f = e.extra_fields
            out.append(Allocation(e.start_time_ns, int(f.ptr), int(f.alloc_size)))
        stack.extend(e.children)
    out.sort(key=lambda a: a.t)
    return out
