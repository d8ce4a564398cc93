"""The flow network torch's min-cut partitioner cuts, exactly as torch builds it.

``min_cut_rematerialization_partition`` turns the joint graph into a max-flow / min-cut problem
(``torch/_functorch/partitioners.py``, ``solve_min_cut``): every node ``X`` becomes two vertices
``X_in -> X_out`` joined by an edge whose capacity is what saving ``X`` costs (torch's ``_size_of``
bytes, times ``1.1 ** dist_from_bw``, doubled when ``X`` could be fused into its users); every data
dependency is an infinite edge ``X_out -> user_in``; ``source -> X_in`` (infinite) bans recomputing
``X`` (inputs, matmuls, random ops, values the backward materializes anyway); ``X_in -> sink`` or
``X_out -> sink`` (infinite) marks what the backward needs.  The cheapest set of finite edges whose
removal separates source from sink is the saved set.

Rather than re-derive those rules (they change between torch releases), this module runs torch's
own min-cut on a copy of the joint graph and records the network it hands to
``networkx.minimum_cut``, with networkx's answer.  networkx is a public library torch imports at
call time, so recording it touches no torch internal.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from fxviz import _torch
from fxviz.analysis.strategy.partition import Partition, partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import StrategyError
from fxviz.sources.graphs import JointGraph

__all__ = ["FlowEdge", "FlowNetwork", "min_cut_network", "SOURCE", "SINK"]

SOURCE, SINK = "source", "sink"


@dataclass(frozen=True)
class FlowEdge:
    """One edge of the network: ``capacity`` is ``math.inf`` for the edges no cut may cross."""

    tail: str
    head: str
    capacity: float
    reason: str | None = None  # torch's own words for an infinite edge ("cannot recompute: ...")

    @property
    def node(self) -> str | None:
        """The joint node an ``X_in -> X_out`` edge stands for (None for the other edges)."""
        if self.tail.endswith("_in") and self.head.endswith("_out") and self.tail[:-3] == self.head[:-4]:
            return self.tail[:-3]
        return None

    @property
    def infinite(self) -> bool:
        return math.isinf(self.capacity)


@dataclass
class FlowNetwork:
    """The network of one min-cut solve and its cut.

    ``edges``: every edge, in torch's insertion order.  ``source_side``: the vertices networkx
    found on the source's side of the minimum cut.  ``cut``: the edges from the source side to the
    sink side (all finite, all ``X_in -> X_out``).  ``saved``: the joint nodes whose edge is cut, in
    joint-graph order: what this solve saves.  ``partition``: torch's min-cut partition of the same
    graph (its ``saved`` is what the forward really returns for the backward).
    """

    edges: list[FlowEdge]
    cut_value: float
    source_side: frozenset[str]
    saved: list[str]
    partition: Partition
    solves: int = 1  # how many networks torch solved in this partitioner call
    vertices: list[str] = field(default_factory=list)

    @property
    def cut(self) -> list[FlowEdge]:
        return [e for e in self.edges if e.tail in self.source_side and e.head not in self.source_side]

    def capacity(self, node: str) -> float | None:
        """The capacity of ``node``'s ``_in -> _out`` edge (None if the network has no such edge)."""
        for e in self.edges:
            if e.node == node:
                return e.capacity
        return None


@contextmanager
def _recording(into: list[tuple[Any, Any]]) -> Iterator[None]:
    """Record every ``networkx.minimum_cut(G, ...)`` call made inside: (a copy of G, the answer)."""
    import networkx as nx

    original = nx.minimum_cut

    def spy(graph: Any, s: Any, t: Any, *args: Any, **kwargs: Any) -> Any:
        answer = original(graph, s, t, *args, **kwargs)
        into.append((graph.copy(), answer))
        return answer

    nx.minimum_cut = spy
    try:
        yield
    finally:
        nx.minimum_cut = original


def min_cut_network(graph: JointGraph, strategy: Any = "min_cut") -> FlowNetwork:
    """Run torch's min-cut partitioner on a copy of ``graph`` (called exactly as ``Trace.partition``
    calls it) and return the flow network it solved, with its cut.  Only ``min_cut`` solves one
    network whose cut is the answer (a memory budget solves several and then a knapsack)."""
    s = Strategy.parse(strategy)
    if s.kind != "min_cut":
        raise StrategyError(f"the flow drawing shows min-cut's network, not {s.label}'s",
                            "use strategy='min_cut' (a memory budget solves several networks, then a knapsack)")
    fn = _torch.min_cut_partition  # what the min_cut strategy calls, with the same arguments
    calls: list[tuple[Any, Any]] = []

    def recorded(joint: Any, joint_inputs: Any, **kwargs: Any) -> Any:
        with _recording(calls), _torch.plain_min_cut_config():
            return fn(joint, joint_inputs, **kwargs)

    p = partition(graph, recorded)
    if p.error is not None:
        raise StrategyError(f"min-cut failed on this graph: {p.error}", "see tr.memory_table() for every strategy")
    if not calls:
        raise StrategyError("min-cut solved no flow network on this graph (nothing to cut)",
                            "the flow drawing needs a graph with a backward that reads forward values")
    nx_graph, (value, (reachable, _non_reachable)) = calls[-1]
    edges = [FlowEdge(str(u), str(v), float(d.get("capacity", math.inf)), d.get("reason"))
             for u, v, d in nx_graph.edges(data=True)]
    side = frozenset(str(v) for v in reachable)
    cut_nodes = {e.node for e in edges if e.tail in side and e.head not in side and e.node is not None}
    order = {n.name: i for i, n in enumerate(graph.gm.graph.nodes)}
    saved = sorted(cut_nodes, key=lambda n: order.get(n, len(order)))
    return FlowNetwork(edges=edges, cut_value=float(value), source_side=side, saved=saved,
                       partition=p, solves=len(calls), vertices=[str(v) for v in nx_graph.nodes])
