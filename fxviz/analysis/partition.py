"""Run one partition strategy on a copy of the joint graph -> ``Partition``.

A strategy arrives as a ``Strategy`` value (``strategies.py`` parses strings and callables once
and holds the registry of kinds).  Partitioners get exactly the arguments torch passed when it
built the graph (``num_fwd_outputs``, ``static_lifetime_input_indices``), recorded at capture.
Measured strategies (the eager reference) build their ``Partition`` themselves.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from .. import _torch
from .._fx import output_values
from ..capture import Capture, JointGraph
from ..errors import StrategyError
from .measured import EagerMeasurement
from .strategies import Strategy, StrategyLike

__all__ = ["Partition", "partition", "from_graphs"]


@dataclass
class Partition:
    """What one strategy did with a joint graph.  Node names are always joint-graph names.

    ``saved``: joint nodes whose values the backward reads from the forward, in torch's order
    (the forward graph's outputs after the first ``num_fwd_outputs``), tensors and SymInts alike.
    ``recomputed``: joint forward ops that appear (again) in the backward graph.
    ``removed``: joint nodes that appear in neither graph (dead code).
    ``fw_to_joint`` / ``bw_to_joint``: forward/backward graph node name -> joint node name.
    ``error``: why the strategy failed (then forward/backward are None and the sets are empty).
    """

    strategy: Strategy
    forward: fx.GraphModule | None
    backward: fx.GraphModule | None
    saved: list[str] = field(default_factory=list)
    recomputed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    fw_to_joint: dict[str, str] = field(default_factory=dict)
    bw_to_joint: dict[str, str] = field(default_factory=dict)
    caller: str = ""
    error: str | None = None
    seconds: float = 0.0
    unmapped: list[str] = field(default_factory=list)  # saved values with no joint node (eager)
    recomputed_random: set[str] = field(default_factory=set)  # random ops the backward redraws
    measurement: EagerMeasurement | None = None  # the eager reference: measured, no graphs
    solution: Any = None  # what an optimizing partitioner reports (optimal: an optimal.Solution)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def name(self) -> str:
        """The strategy's canonical name (``budget:0.5:dp``): the key in tables, views and data."""
        return self.strategy.name

    @property
    def label(self) -> str:
        """The strategy as a person reads it."""
        return self.strategy.label

    @property
    def measured(self) -> bool:
        """True for a reference measured on the model (no forward/backward graphs)."""
        return self.measurement is not None


def _call(fn: Callable[..., Any], gm: fx.GraphModule, graph: JointGraph) -> tuple[fx.GraphModule, fx.GraphModule]:
    kwargs: dict[str, Any] = {"num_fwd_outputs": graph.num_fwd_outputs}
    try:
        accepts = inspect.signature(fn).parameters
        any_kw = any(p.kind == p.VAR_KEYWORD for p in accepts.values())
        takes_static = "static_lifetime_input_indices" in accepts or any_kw
        takes_compiler = "compiler" in accepts or any_kw
    except (TypeError, ValueError):
        takes_static = takes_compiler = True
    if takes_static:
        kwargs["static_lifetime_input_indices"] = list(graph.static_lifetime_input_indices)
    if takes_compiler and graph.compiler is not None:
        kwargs["compiler"] = graph.compiler  # inductor calls min-cut with compiler="inductor"
    result = fn(gm, graph.joint_inputs, **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(g, fx.GraphModule) for g in result)):
        raise StrategyError(f"the partitioner returned {type(result).__name__}, not (forward, backward) GraphModules")
    return result


def _to_joint(gm: fx.GraphModule, joint_names: set[str]) -> dict[str, str]:
    """Partition graphs keep joint node names (torch copies nodes by name); anything the
    partitioner created itself (none for torch's own partitioners on these graphs) stays unmapped."""
    return {n.name: n.name for n in gm.graph.nodes if n.name in joint_names and n.op != "output"}


def from_graphs(graph: JointGraph, strategy: Strategy, fwd: fx.GraphModule, bwd: fx.GraphModule,
                seconds: float = 0.0) -> Partition:
    """Describe a (forward, backward) pair in joint-graph terms."""
    joint_names = {n.name for n in graph.gm.graph.nodes if n.op != "output"}
    fw_map, bw_map = _to_joint(fwd, joint_names), _to_joint(bwd, joint_names)
    saved = []
    for o in output_values(fwd)[graph.num_fwd_outputs:]:
        if isinstance(o, fx.Node):
            saved.append(fw_map.get(o.name, o.name))
    in_fwd = set(fw_map.values())
    recomputed = {j for b, j in bw_map.items()
                  if graph.info[j].phase == "forward" and graph.info[j].op == "call_function"
                  and not _is_placeholder(bwd, b)}
    present = in_fwd | set(bw_map.values())
    removed = {n for n in joint_names if n not in present}
    # a random op run again in the backward draws new values (on CPU torch does not functionalize
    # RNG), so its gradients no longer match the forward: worth a loud flag
    random = {n.name for n in bwd.graph.nodes
              if n.op == "call_function" and n.name in recomputed and _torch.is_random(n) and n.users}
    return Partition(strategy=strategy, forward=fwd, backward=bwd, saved=saved, recomputed=recomputed,
                     removed=removed, fw_to_joint=fw_map, bw_to_joint=bw_map, caller=graph.partitioner_caller,
                     seconds=seconds, recomputed_random=random)


def _is_placeholder(gm: fx.GraphModule, name: str) -> bool:
    for n in gm.graph.nodes:
        if n.name == name:
            return n.op == "placeholder"
    return False


def partition(graph: JointGraph, strategy: StrategyLike = "default", capture: Capture | None = None) -> Partition:
    """Partition a copy of ``graph`` with ``strategy``.  A strategy that fails returns a
    ``Partition`` whose ``error`` says why (a table keeps its other rows); a malformed strategy
    raises ``StrategyError``."""
    s = Strategy.parse(strategy)
    if not graph.has_backward:
        return Partition(strategy=s, forward=graph.gm, backward=None, caller=graph.partitioner_caller,
                         error="no backward graph: nothing the loss depends on requires grad")
    kind = s.spec
    if kind.measure is not None:
        return kind.measure(s, graph, capture)
    assert kind.partitioner is not None
    fn = kind.partitioner(s)
    start = time.perf_counter()
    try:
        with _torch.quiet_torch():
            gm = _torch.copy_graph_module(graph.gm)
            fwd, bwd = _call(fn, gm, graph)
    except StrategyError:
        raise
    except Exception as exc:  # a solver needing a missing package, a partitioner bug, ...
        return Partition(strategy=s, forward=None, backward=None, caller=graph.partitioner_caller,
                         error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}",
                         solution=getattr(fn, "solution", None))
    p = from_graphs(graph, s, fwd, bwd, time.perf_counter() - start)
    p.solution = getattr(fn, "solution", None)
    return p
