"""The facts of one joint graph and of one model, each computed once and kept, keyed by its inputs.

``Trace`` holds one ``GraphCache`` per graph and one ``Cache`` per model (shared by every piece).
Analysis that needs many partitions of a graph (the memory table, the budget sweep) is handed
``GraphCache.partition``: a partition function on this floor, so no analysis calls the facade.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from fxviz.analysis.strategy.strategies import Strategy, StrategyLike

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.memory.compiled_step import StepMemory
    from fxviz.analysis.memory.inductor_code import CompiledGraph
    from fxviz.analysis.memory.program import RowPeaks
    from fxviz.analysis.strategy.partition import Partition
    from fxviz.sources.graphs import Capture, JointGraph

__all__ = ["Cache", "GraphCache"]

T = TypeVar("T")
F = TypeVar("F", bound="pd.DataFrame")


class Cache:
    """Values by key, each made once by the function that first asks for it."""

    def __init__(self) -> None:
        self._values: dict[Hashable, Any] = {}

    def get(self, key: Hashable, make: Callable[[], T]) -> T:
        """The value under ``key``, made by ``make()`` the first time."""
        if key not in self._values:
            self._values[key] = make()
        value: T = self._values[key]
        return value

    def frame(self, key: Hashable, make: Callable[[], pd.DataFrame], as_type: type[F]) -> F:
        """A copy of the frame under ``key`` (made once), as ``as_type`` (a presentation subclass of
        ``DataFrame``), with its ``attrs``: the cache keeps its own, whatever the caller does to the copy."""
        df = self.get(key, make)
        out = as_type(df.copy())
        out.attrs = dict(df.attrs)
        return out

    def __contains__(self, key: Hashable) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[Hashable]:
        """The keys made so far (what a test reads to see that nothing was computed early)."""
        return iter(list(self._values))


class GraphCache(Cache):
    """The facts of one joint graph of ``capture``, with the partitions of every strategy asked for."""

    def __init__(self, graph: JointGraph, capture: Capture) -> None:
        super().__init__()
        self.graph = graph
        self.capture = capture

    def partition(self, strategy: StrategyLike) -> Partition:
        """``analysis.partition.partition`` of this graph under ``strategy``, once per strategy."""
        from fxviz.analysis.strategy.partition import partition

        s = Strategy.parse(strategy)
        return self.get(("partition", s), lambda: partition(self.graph, s, self.capture))

    def compiled(self, strategy: StrategyLike) -> CompiledGraph:
        """The partition under ``strategy`` as inductor's code (``analysis.memory.program.compiled_for``:
        lowered now, seconds per graph, or a logged run's own code), once per strategy."""
        from fxviz.analysis.memory.program import compiled_for

        s = Strategy.parse(strategy)
        return self.get(("compiled", s), lambda: compiled_for(self.graph, self.capture, self.partition(s)))

    def graph_step(self, strategy: StrategyLike) -> StepMemory | None:
        """This graph's own step under ``strategy`` as its compiled code runs it (its forward, then its
        backward: ``analysis.memory.program.graph_step``), once per strategy."""
        from fxviz.analysis.memory.program import graph_step

        s = Strategy.parse(strategy)
        last = self.graph.index == len(self.capture.graphs) - 1
        return self.get(("graph_step", s), lambda: graph_step(self.graph, self.partition(s), self.compiled(s), last))

    def row_peaks(self, strategy: StrategyLike) -> RowPeaks:
        """The memory table's program peaks of this graph under ``strategy`` (``program.row_peaks``)."""
        from fxviz.analysis.memory.program import row_peaks

        return row_peaks(self.graph_step(strategy), self.compiled(strategy))
