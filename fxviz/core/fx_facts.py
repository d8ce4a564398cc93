"""Facts about an ``fx.Graph`` that several layers read (public fx API only).

One home for "the values a graph returns": AOTAutograd's graphs return a flat tuple (the joint
graph: forward outputs, then gradients; a forward graph: outputs, then saved values), but an
``fx`` output node may also hold a single value.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch.fx as fx

__all__ = ["output_node", "output_values", "ancestors"]


def output_node(gm: fx.GraphModule | fx.Graph) -> fx.Node:
    """The graph's ``output`` node (always its last node)."""
    graph = gm.graph if isinstance(gm, fx.GraphModule) else gm
    # iter(): torch 2.9's reversed(graph.nodes) is an iterable, not an iterator (2.10+: an iterator)
    return next(iter(reversed(graph.nodes)))


def output_values(gm: fx.GraphModule | fx.Graph) -> list[Any]:
    """What the graph returns, as a flat list in order (nodes, ``None`` for absent gradients,
    constants)."""
    args = output_node(gm).args[0]
    return list(args) if isinstance(args, (tuple, list)) else [args]


def ancestors(starts: Iterable[fx.Node], keep: Callable[[fx.Node], bool] = lambda _n: True) -> set[fx.Node]:
    """``starts`` and every node they read from, transitively, following only inputs ``keep``
    accepts: what a value needs recomputed, or what a graph output depends on."""
    seen: set[fx.Node] = set()
    todo = list(starts)
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(a for a in n.all_input_nodes if keep(a))
    return seen
