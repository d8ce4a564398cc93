"""What one process measures: named stages timed in wall and CPU seconds, and its peak RSS.

Shared by both sides, so torch alone and fxviz are timed by the very same clock code.
"""

from __future__ import annotations

import resource
import time
import traceback
from collections.abc import Callable
from typing import Any

__all__ = ["Recorder", "cpu_seconds", "peak_rss_mib", "reset_between_runs", "stage_seconds", "total_seconds"]


def peak_rss_mib() -> float:
    """This process's peak resident set size so far (Linux reports ``ru_maxrss`` in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def cpu_seconds() -> float:
    """User + system seconds of this process and its waited-for children (``dot`` runs as one)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime + c.ru_utime + c.ru_stime


def reset_between_runs() -> None:
    """Forget dynamo's compiled code and collect garbage, so no run reuses another's work."""
    import gc

    import torch._dynamo

    torch._dynamo.reset()
    gc.collect()


class Recorder:
    """Times named stages; a stage that raises is recorded as an error, not fatal.

    ``out`` is plain JSON: ``stages`` maps a stage to ``{"wall", "cpu"}`` seconds or to a status
    string (``error``, ``skipped``, ``n/a (...)``, ``refused (...)``); ``errors`` and ``notes`` say why.
    """

    def __init__(self) -> None:
        self.out: dict[str, Any] = {"stages": {}, "errors": {}, "notes": []}

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        w0, c0 = time.perf_counter(), cpu_seconds()
        try:
            value = fn()
        except Exception as exc:
            self.out["stages"][name] = "error"
            self.out["errors"][name] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"
            self.out["errors"][name + " traceback"] = traceback.format_exc(limit=6)[-1500:]
            return None
        self.out["stages"][name] = {"wall": time.perf_counter() - w0, "cpu": cpu_seconds() - c0}
        return value

    def mark(self, name: str, status: str) -> None:
        """Record why a stage has no timing (``skipped``, ``n/a (not built)``...)."""
        self.out["stages"][name] = status


def stage_seconds(stage: Any, key: str = "wall") -> float | None:
    """The seconds of one recorded stage, or None when it holds a status instead."""
    return stage.get(key) if isinstance(stage, dict) else None


def total_seconds(res: dict[str, Any], names: tuple[str, ...], key: str = "wall") -> float | None:
    """The sum over ``names`` of a recorder's output, or None if any of them was not timed."""
    vals = [stage_seconds(res.get("stages", {}).get(n), key) for n in names]
    return None if any(v is None for v in vals) else sum(vals)  # type: ignore[arg-type]
