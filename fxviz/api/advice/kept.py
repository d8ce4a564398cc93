"""An advised log's steps, kept in the log's cache for the next ``advise`` of the same log (issue 46: "a second
view of the same log is faster than the first").

``advise`` on a log partitions its step once per strategy it weighs: the plain step, each budget of the sweep
(0.95 down to the first that meets the target: a min-cut with its knapsack each, seconds apiece on a big graph)
and the exact-optimum bound (a MILP).  What it reads of each is a ``StepPeak`` (plain figures: bytes, FLOPs,
the tensors live at the peak), which the log cache (``sources.log.cache``) keeps as JSON.  The entry is keyed by
the step's graphs' own entry keys (the md5s torch wrote for them, the run's config, this torch and fxviz's
code), and each step in it by its strategy's name (its solver in it), the optimizer's state and this session's
partitioner and inductor settings (``_torch.step_config_state``): the same log, command and fxviz give the same
figures, read instead of partitioned.  A refusal (``InputError``: no partition meets the bound's goal) is kept
too, so the second advise does not solve that MILP again.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from fxviz import _torch
from fxviz.analysis.advice.anatomy import StepPeak
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import InputError
from fxviz.sources.log_source import LogSource

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.sources.graphs import Capture

__all__ = ["KeptSteps"]


class KeptSteps:
    """The steps kept for the capture ``cap`` (a log's step, read with a cache: ``LogSource.cache``) under
    ``optimizer``; keeps nothing for a model's capture, a log read without a cache, or a graph whose entry has
    no key (a damaged payload)."""

    def __init__(self, cap: Capture, optimizer: str | int | None) -> None:
        source = cap.source
        cache, keys = (source.cache, source.keys) if isinstance(source, LogSource) else (None, ())
        usable = cache is not None and len(keys) == len(cap.graphs) and all(k is not None for k in keys)
        self.cache = cache if usable else None
        self.key = hashlib.sha256(json.dumps({"advised step": keys}).encode()).hexdigest()[:40] if usable else None
        config = hashlib.sha256(_torch.step_config_state()).hexdigest()[:16] if usable else ""
        self._suffix = f"|{optimizer!r}|{config}"
        self.steps: dict[str, Any] = dict(self.cache.load(self.key).get("steps", {})) if self.cache else {}
        self.read = 0
        """How many steps came from the cache in this advise (a test and the progress lines read it)."""

    def has(self, strategy: Strategy) -> bool:
        """Whether the step of ``strategy`` is kept."""
        return strategy.name + self._suffix in self.steps

    def get(self, strategy: Strategy) -> StepPeak | None:
        """The kept step of ``strategy`` (None: not kept); raises the ``InputError`` that was kept for it."""
        got = self.steps.get(strategy.name + self._suffix)
        if got is None:
            return None
        self.read += 1
        if "refused" in got:
            raise InputError(*got["refused"])
        return StepPeak.from_json(got["step"])

    def keep(self, strategy: Strategy, step: StepPeak | InputError) -> None:
        """Keep the step of ``strategy`` (or why it was refused) for the next advise of this log."""
        if self.cache is None:
            return
        value = {"refused": list(step.said)} if isinstance(step, InputError) else {"step": step.to_json()}
        self.steps[strategy.name + self._suffix] = value
        self.cache.update(self.key, "steps", self.steps)
