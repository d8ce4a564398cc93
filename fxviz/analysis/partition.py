"""Run one partition strategy on a copy of the joint graph -> ``Partition``.

A strategy arrives as a ``Strategy`` value (``strategies.py`` parses strings and callables once
and describes the kinds).  This module is the dispatcher: it maps each kind to the code that runs
it (torch's partitioners, ``recompute_all``, ``optimal``, the eager measurement, the logged
graphs), importing those implementations; none of them imports it back.  Partitioners get exactly
the arguments torch passed when it built the graph (``num_fwd_outputs``,
``static_lifetime_input_indices``), recorded at capture.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from .. import _torch
from ..capture import INFERENCE_NOTE, Capture, JointGraph
from ..errors import StrategyError
from ..graph_facts import draws_random, saved_values
from .eager import EagerMeasurement, failure_reason, measure_eager
from .optimal import OptimalPartitioner, Solution
from .recompute_all import recompute_all_partition
from .strategies import PartitionFn, Strategy, StrategyLike

__all__ = ["Partition", "partition", "partitioner", "from_graphs"]


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
    solution: Solution | None = None  # what the optimal partitioner reports

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
    saved = [fw_map.get(o.name, o.name) for o in saved_values(fwd, graph.num_fwd_outputs)]
    in_fwd = set(fw_map.values())
    bwd_inputs = _placeholders(bwd)
    recomputed = {j for b, j in bw_map.items()
                  if graph.info[j].phase == "forward" and graph.info[j].op == "call_function"
                  and b not in bwd_inputs}
    present = in_fwd | set(bw_map.values())
    removed = {n for n in joint_names if n not in present}
    # a random op run again in the backward draws new values (on CPU torch does not functionalize
    # RNG), so its gradients no longer match the forward: worth a loud flag
    random = {n.name for n in bwd.graph.nodes
              if n.name in recomputed and draws_random(n) and n.users}
    return Partition(strategy=strategy, forward=fwd, backward=bwd, saved=saved, recomputed=recomputed,
                     removed=removed, fw_to_joint=fw_map, bw_to_joint=bw_map, caller=graph.partitioner_caller,
                     seconds=seconds, recomputed_random=random)


def _placeholders(gm: fx.GraphModule) -> set[str]:
    """The names of a graph's inputs, once (a scan per recomputed node was quadratic: seconds on a
    10,000-node graph whose min-cut recomputes thousands of nodes, issue 26)."""
    return {n.name for n in gm.graph.nodes if n.op == "placeholder"}


# --- the dispatcher: from a kind to the code that runs it ------------------------------------------
def _budget_partitioner(s: Strategy) -> PartitionFn:
    budget, solver = float(s.budget or 0.0), str(s.solver)

    def budgeted(gm: Any, joint_inputs: Any, **kwargs: Any) -> Any:
        with _torch.budget_config(budget, solver):
            return _torch.min_cut_partition(gm, joint_inputs, **kwargs)

    budgeted.__qualname__ = f"budget_{budget:g}_{solver}"
    return budgeted


def _user_partitioner(s: Strategy) -> PartitionFn:
    assert s.fn is not None
    return s.fn


_PARTITIONERS: dict[str, Callable[[Strategy], PartitionFn]] = {
    "default": lambda _s: _torch.default_partition,
    "min_cut": lambda _s: _torch.min_cut_partition,
    "budget": _budget_partitioner,
    "recompute_all": lambda _s: recompute_all_partition,
    "optimal": lambda s: OptimalPartitioner(budget=s.budget, budget_bytes=s.budget_bytes),
    "callable": _user_partitioner,
}


def _measure_eager(s: Strategy, graph: JointGraph, capture: Capture | None) -> Partition:
    """The ``eager`` strategy as a ``Partition``: ``saved`` are the joint nodes eager's saved tensors
    correspond to (in save order), ``unmapped`` describes those with no joint node."""
    if capture is not None and capture.route == "log":
        raise StrategyError("the eager strategy runs the model, and a log of a run has no model",
                            "compare with 'logged' (what the run saved), or trace the model with fxviz.trace")
    if capture is None or capture.fn is None:
        raise StrategyError("the eager strategy needs the model and its inputs",
                            "use Trace.partition('eager') on a trace of a model")
    start = time.perf_counter()
    try:
        m = measure_eager(capture, graph)
    except Exception as exc:  # the user's model under eager autograd: a row with the reason
        return Partition(strategy=s, forward=None, backward=None, caller="eager autograd",
                         error=failure_reason(capture, exc), seconds=time.perf_counter() - start)
    saved = list(dict.fromkeys(t.joint for t in m.saved if t.joint is not None))
    unmapped = [f"{t.op} {list(t.shape)} {t.dtype} ({t.owner})" for t in m.saved if t.joint is None]
    return Partition(strategy=s, forward=None, backward=None, saved=saved, unmapped=unmapped,
                     caller="eager autograd", seconds=time.perf_counter() - start, measurement=m)


def _measure_logged(s: Strategy, graph: JointGraph, _capture: Capture | None) -> Partition:
    if graph.logged is None:
        raise StrategyError("the 'logged' strategy is what a real run saved, read from its log; this trace was "
                            "not read from a log", "use fxviz.load_logs(dir).trace() on a TORCH_TRACE log")
    forward, backward = graph.logged
    return from_graphs(graph, s, forward, backward)


_MEASURES: dict[str, Callable[[Strategy, JointGraph, Capture | None], Partition]] = {
    "eager": _measure_eager,
    "logged": _measure_logged,
}


def partitioner(spec: StrategyLike, time_limit: float | None = None) -> PartitionFn:
    """A function with a torch partitioner's signature for ``spec``, usable as ``partition_fn``
    in ``aot_function`` / ``aot_autograd``: ``fxviz.partitioner("optimal:0.5")``.  Strategies that
    measure a model (``eager``) have none.  ``time_limit``: seconds per MILP solve (``optimal``;
    default 30)."""
    s = Strategy.parse(spec)
    if s.kind not in _PARTITIONERS:
        raise StrategyError(f"strategy {s.name!r} measures a model; it is not a partitioner",
                            "use default, min_cut, budget:B, recompute_all or optimal:B")
    fn = _PARTITIONERS[s.kind](s)
    if time_limit is not None:
        if s.kind != "optimal":
            raise StrategyError(f"time_limit applies to optimal:B, not to {s.name!r}", "drop time_limit")
        fn.time_limit = float(time_limit)  # type: ignore[attr-defined]
    return fn


def partition(graph: JointGraph, strategy: StrategyLike = "default", capture: Capture | None = None) -> Partition:
    """Partition a copy of ``graph`` with ``strategy``.  A strategy that fails returns a
    ``Partition`` whose ``error`` says why (a table keeps its other rows); a malformed strategy
    raises ``StrategyError``."""
    s = Strategy.parse(strategy)
    if not graph.has_backward:
        why = INFERENCE_NOTE if graph.inference else "no backward graph: nothing the loss depends on requires grad"
        return Partition(strategy=s, forward=graph.gm, backward=None, caller=graph.partitioner_caller, error=why)
    if s.kind in _MEASURES:
        return _MEASURES[s.kind](s, graph, capture)
    fn = _PARTITIONERS[s.kind](s)
    start = time.perf_counter()
    try:
        with _torch.quiet_torch(), _torch.partitioner_context(graph.gm):
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
