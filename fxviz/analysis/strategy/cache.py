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
