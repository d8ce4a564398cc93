"""Run one partition strategy on a copy of the joint graph -> ``Partition``.

Strategies: ``default`` and ``min_cut`` (torch's partitioners), ``budget:B[:solver]`` (min-cut
under ``activation_memory_budget=B``, solver ``dp``/``greedy``/``ilp``), ``recompute_all`` (save
only inputs), ``eager`` (what eager autograd saves; see ``eager.py``), or any callable with a
torch partitioner's signature.  The partitioners get exactly the arguments torch passed when it
built the graph (``num_fwd_outputs``, ``static_lifetime_input_indices``), recorded at capture.
"""

from __future__ import annotations

import inspect
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Union

import torch.fx as fx

from .. import _torch
from ..capture import Capture, JointGraph
from ..errors import StrategyError

__all__ = ["Partition", "partition", "strategy_key", "STRATEGY_FORMS", "SOLVERS"]

SOLVERS = ("dp", "greedy", "ilp")
STRATEGY_FORMS = ("default", "min_cut", "budget:B", "budget:B:dp", "budget:B:greedy", "budget:B:ilp",
                  "eager", "recompute_all", "<callable>")
Strategy = Union[str, Callable[..., Any]]


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

    strategy: str
    label: str
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

    @property
    def ok(self) -> bool:
        return self.error is None


_BUDGET = re.compile(r"^budget:([0-9]*\.?[0-9]+)(?::([a-z]+))?$")


def strategy_key(strategy: Strategy) -> str:
    """Canonical name of a strategy (``budget:0.3`` -> ``budget:0.3:dp``); raises on bad input."""
    if callable(strategy):
        return f"callable:{getattr(strategy, '__qualname__', repr(strategy))}"
    if not isinstance(strategy, str):
        raise StrategyError(f"a strategy is a string or a callable, not {type(strategy).__name__}")
    s = strategy.strip().lower().replace("-", "_")
    if s in ("default", "min_cut", "eager", "recompute_all"):
        return s
    if s == "mincut":
        return "min_cut"
    m = _BUDGET.match(s)
    if m:
        budget = float(m.group(1))
        solver = m.group(2) or "dp"
        if not 0.0 <= budget <= 1.0:
            raise StrategyError(f"budget {budget} is outside 0..1 in strategy {strategy!r}",
                                "the budget is a fraction of min-cut's activation memory: 0 <= B <= 1")
        if solver not in SOLVERS:
            raise StrategyError(f"unknown solver {solver!r} in strategy {strategy!r}",
                                f"use one of {', '.join(SOLVERS)}")
        return f"budget:{budget:g}:{solver}"
    raise StrategyError(f"unknown strategy {strategy!r}; valid forms: {', '.join(STRATEGY_FORMS)}")


def _label(key: str) -> str:
    if key == "default":
        return "default (torch default_partition)"
    if key == "min_cut":
        return "min_cut (torch min_cut_rematerialization_partition)"
    if key == "recompute_all":
        return "recompute_all (save inputs only)"
    if key.startswith("budget:"):
        _, b, solver = key.split(":")
        return f"budget {b} ({solver} solver)"
    return key


def _call(fn: Callable[..., Any], gm: fx.GraphModule, graph: JointGraph) -> tuple[fx.GraphModule, fx.GraphModule]:
    kwargs: dict[str, Any] = {"num_fwd_outputs": graph.num_fwd_outputs}
    try:
        accepts = inspect.signature(fn).parameters
        takes_static = "static_lifetime_input_indices" in accepts or any(
            p.kind == p.VAR_KEYWORD for p in accepts.values())
    except (TypeError, ValueError):
        takes_static = True
    if takes_static:
        kwargs["static_lifetime_input_indices"] = list(graph.static_lifetime_input_indices)
    result = fn(gm, graph.joint_inputs, **kwargs)
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(g, fx.GraphModule) for g in result)):
        raise StrategyError(f"the partitioner returned {type(result).__name__}, not (forward, backward) GraphModules")
    return result


def _partitioner(key: str, strategy: Strategy) -> Callable[..., Any]:
    if callable(strategy):
        return strategy
    if key == "default":
        return _torch.default_partition
    if key == "min_cut":
        return _torch.min_cut_partition
    if key == "recompute_all":
        return _torch.recompute_all_partition
    if key.startswith("budget:"):
        _, budget, solver = key.split(":")

        def budgeted(gm: fx.GraphModule, joint_inputs: Any, **kwargs: Any) -> Any:
            with _torch.budget_config(float(budget), solver):
                return _torch.min_cut_partition(gm, joint_inputs, **kwargs)

        return budgeted
    raise StrategyError(f"no partitioner for {key!r}")


def _names(gm: fx.GraphModule) -> list[str]:
    return [n.name for n in gm.graph.nodes]


def _outputs(gm: fx.GraphModule) -> list[Any]:
    out = list(gm.graph.nodes)[-1]
    args = out.args[0]
    return list(args) if isinstance(args, (tuple, list)) else [args]


def _to_joint(gm: fx.GraphModule, joint_names: set[str]) -> dict[str, str]:
    """Partition graphs keep joint node names (torch copies nodes by name); anything the
    partitioner created itself (none for torch's own partitioners on these graphs) stays unmapped."""
    return {n.name: n.name for n in gm.graph.nodes if n.name in joint_names and n.op != "output"}


def from_graphs(graph: JointGraph, key: str, label: str, fwd: fx.GraphModule, bwd: fx.GraphModule,
                seconds: float = 0.0) -> Partition:
    """Describe a (forward, backward) pair in joint-graph terms."""
    joint_names = {n.name for n in graph.gm.graph.nodes if n.op != "output"}
    fw_map, bw_map = _to_joint(fwd, joint_names), _to_joint(bwd, joint_names)
    saved = []
    for o in _outputs(fwd)[graph.num_fwd_outputs:]:
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
    return Partition(strategy=key, label=label, forward=fwd, backward=bwd, saved=saved, recomputed=recomputed,
                     removed=removed, fw_to_joint=fw_map, bw_to_joint=bw_map, caller=graph.partitioner_caller,
                     seconds=seconds, recomputed_random=random)


def _is_placeholder(gm: fx.GraphModule, name: str) -> bool:
    for n in gm.graph.nodes:
        if n.name == name:
            return n.op == "placeholder"
    return False


def partition(graph: JointGraph, strategy: Strategy = "default", capture: Capture | None = None) -> Partition:
    """Partition a copy of ``graph`` with ``strategy``.  A strategy that fails returns a
    ``Partition`` whose ``error`` says why (a table keeps its other rows); a malformed strategy
    raises ``StrategyError``."""
    key = strategy_key(strategy)
    if not graph.has_backward:
        return Partition(strategy=key, label=_label(key), forward=graph.gm, backward=None,
                         caller=graph.partitioner_caller,
                         error="no backward graph: nothing the loss depends on requires grad")
    if key == "eager":
        from .eager import eager_partition

        if capture is None:
            raise StrategyError("the eager strategy needs the model and inputs (use Trace.partition)")
        return eager_partition(capture, graph)
    fn = _partitioner(key, strategy)
    start = time.perf_counter()
    try:
        with _torch.quiet_torch():
            gm = _torch.copy_graph_module(graph.gm)
            fwd, bwd = _call(fn, gm, graph)
    except StrategyError:
        raise
    except Exception as exc:  # a solver needing a missing package, a partitioner bug, ...
        return Partition(strategy=key, label=_label(key), forward=None, backward=None,
                         caller=graph.partitioner_caller,
                         error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
    return from_graphs(graph, key, _label(key), fwd, bwd, time.perf_counter() - start)
