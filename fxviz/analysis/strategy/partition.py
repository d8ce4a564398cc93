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

from fxviz import _torch
from fxviz.analysis.strategy.eager import EagerMeasurement, failure_reason, measure_eager
from fxviz.analysis.strategy.optimal import OptimalPartitioner, Solution
from fxviz.analysis.strategy.recompute_all import recompute_all_partition
from fxviz.analysis.strategy.strategies import PartitionFn, Strategy, StrategyLike
from fxviz.core.errors import StrategyError
from fxviz.core.graph_facts import draws_random, saved_values
from fxviz.sources.graphs import INFERENCE_NOTE, Capture, JointGraph

__all__ = ["MadeValue", "Partition", "partition", "partitioner", "from_graphs"]


MADE_PREFIX = "forward:"


def made_name(forward_node: str) -> str:
    """The name of a value the partitioner made: a forward node name with a prefix no joint
    node name can have (FX names are identifiers)."""
    return MADE_PREFIX + forward_node


@dataclass(frozen=True)
class MadeValue:
    """A saved value no joint node computes: the partitioner made it (its RNG states, the copies
    activation offloading saves)."""

    name: str  # its name in Partition.saved
    node: str  # the forward graph node
    kind: str  # "rng state", "offloaded" (activation offloading's copy) or "partitioner-made"
    what: str  # in words
    wraps: str | None = None  # the joint node of the op whose RNG state it is


@dataclass
class Partition:
    """What one strategy did with a joint graph.  Node names are always joint-graph names.

    ``saved``: joint nodes whose values the backward reads from the forward, in torch's order
    (the forward graph's outputs after the first ``num_fwd_outputs``), tensors and SymInts alike.
    ``recomputed``: joint forward ops that appear (again) in the backward graph.
    ``removed``: joint nodes that appear in neither graph (dead code).
    ``fw_to_joint`` / ``bw_to_joint``: forward/backward graph node name -> joint node name, only for
    nodes that ARE that joint value (a partitioner may reuse a joint name for a node of its own).
    ``made``: saved values the partitioner made itself (min-cut's saved RNG states), keyed by
    their name in ``saved`` (``forward:getitem_19``: never a joint name).
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
    made: dict[str, MadeValue] = field(default_factory=dict)  # saved values with no joint node

    def saved_name(self, forward_node: str) -> str:
        """The name in ``saved`` of the forward graph's node ``forward_node``."""
        return self.fw_to_joint.get(forward_node) or made_name(forward_node)

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
    def reference(self) -> bool:
        """True for a reference measured by running the model (eager autograd): no forward/backward
        graphs, only what the run held (``measurement``)."""
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


def _args_key(n: fx.Node, name_of: Callable[[fx.Node], str | None]) -> str | None:
    """``n``'s target and inputs, each input named by ``name_of``; None if an input has no name
    (``_key`` of the node, its inputs named once each, before any text is made)."""
    named: dict[fx.Node, str] = {}
    for a in n.all_input_nodes:
        m = name_of(a)
        if m is None:
            return None
        named[a] = f"%{m}"
    return str((n.op, _target_text(n.target), fx.map_arg((n.args, n.kwargs), named.__getitem__)))


def _key(op: str, target: Any, args: Any, kwargs: Any, name_of: Callable[[fx.Node], str | None]) -> str | None:
    missing = False

    def name(a: fx.Node) -> str:
        nonlocal missing
        m = name_of(a)
        missing = missing or m is None
        return f"%{m}"

    key = str((op, _target_text(target), fx.map_arg((args, kwargs), name)))
    return None if missing else key


_TARGET_TEXT: dict[Any, str] = {}


def _target_text(target: Any) -> str:
    """``str(target)``, once per op (an ``OpOverload`` spells itself in Python: 5% of a 50k-node
    graph's first picture when asked per node)."""
    try:
        text = _TARGET_TEXT.get(target)
    except TypeError:  # unhashable
        return str(target)
    if text is None:
        text = _TARGET_TEXT[target] = str(target)
    return text


def _wrapped_key(n: fx.Node, name_of: Callable[[fx.Node], str | None]) -> str | None:
    """For a node that stands for an op min-cut's RNG functionalization wrapped (the forward's
    ``run_and_save_rng_state(op, ...)[1]``, the backward's ``run_with_rng_state(state, op, ...)``),
    the key of the op it stands for."""
    wrapper: fx.Node | None = None
    skip = 0
    if n.op == "call_function" and _target_name(n) == "getitem" and n.args[1:] == (1,) \
            and isinstance(n.args[0], fx.Node) and _target_name(n.args[0]) == "run_and_save_rng_state":
        wrapper, skip = n.args[0], 0
    elif n.op == "call_function" and _target_name(n) == "run_with_rng_state":
        wrapper, skip = n, 1
    if wrapper is None or len(wrapper.args) <= skip:
        return None
    return _key("call_function", wrapper.args[skip], tuple(wrapper.args[skip + 1:]), dict(wrapper.kwargs), name_of)


def _target_name(n: fx.Node) -> str:
    return str(getattr(n.target, "__name__", n.target)).split(".")[0]


@dataclass
class _JointValues:
    """The joint graph's nodes by name, each node's first duplicate (``canon``: the first joint node
    computing the same value) and the nodes of each op-and-inputs key: what ``_to_joint`` compares a
    partition's nodes with, made once for both of a partition's graphs."""

    nodes: dict[str, fx.Node]
    canon: dict[str, str]
    keys: dict[str, list[str]]


def _joint_values(joint: fx.GraphModule) -> _JointValues:
    jnodes = {n.name: n for n in joint.graph.nodes if n.op != "output"}
    canon: dict[str, str] = {}  # joint node -> the first joint node computing the same value
    keys: dict[str, list[str]] = {}
    for j in jnodes.values():
        k = None if j.op == "placeholder" else _args_key(j, lambda a: canon.get(a.name))
        if k is None:
            canon[j.name] = j.name
            continue
        same = keys.setdefault(k, [])
        canon[j.name] = same[0] if same and not _torch.is_random(j) else j.name
        same.append(j.name)
    return _JointValues(jnodes, canon, keys)


def _input_is(n: fx.Node, j: fx.Node | None, inputs: dict[str, str | None] | None) -> str | None:
    """The joint node a partition's input ``n`` is: in a backward, the one the forward's saved value it receives
    is (None: none); else the joint's input of its name (``j``), if that is an input."""
    if inputs is not None and n.name in inputs:
        got = inputs[n.name]
        return None if got is None else str(got)
    return n.name if j is not None and j.op == "placeholder" else None


def _to_joint(gm: fx.GraphModule, joint: _JointValues, inputs: dict[str, str | None] | None = None,
              copies: dict[str, str] | None = None) -> dict[str, str]:
    """Partition node name -> the joint node it IS: the joint node of its name, if that one runs the
    same op and target on the same values (torch copies nodes by name, but a node a partitioner makes
    itself may reuse a joint name: min-cut names a saved RNG state ``getitem_19``, a name the joint
    gives a layer-norm value).  Values are compared up to duplicates the joint computes more than
    once (inductor's joint passes, run again on a log's graph, may pick another of two equal
    ``ne``).  A node standing for an op the RNG functionalization wrapped maps to that op.
    ``inputs`` (backward): the forward's saved values by name and the joint node each is (or None).
    ``copies`` (backward): saved copies of a joint value (activation offloading's ``cpu_offload_relu``)
    by name -> that value: they, and a ``device_put`` reload of one, are not the joint node, but
    the ops that read them compute on its value, so those ops map as they would on the value."""
    jnodes, canon, keys = joint.nodes, joint.canon, joint.keys
    out: dict[str, str] = {}
    through = {name: canon.get(j, j) for name, j in (copies or {}).items()}  # stands for, without being

    def value(a: fx.Node) -> str | None:
        return canon.get(out.get(a.name, "")) or through.get(a.name)

    for n in gm.graph.nodes:
        if n.op == "output":
            continue
        j = jnodes.get(n.name)
        if n.op == "placeholder":
            if (mapped := _input_is(n, j, inputs)) is not None:
                out[n.name] = mapped
            continue
        if _target_name(n) == "device_put" and n.args and isinstance(n.args[0], fx.Node) \
                and n.args[0].name in through:  # a reload of an offloaded copy: the value it copies
            through[n.name] = through[n.args[0].name]
            continue
        key = _args_key(n, value)
        if key is not None and n.name in keys.get(key, ()):
            out[n.name] = n.name
            continue
        wrapped = _wrapped_key(n, value)
        same = keys.get(wrapped, []) if wrapped is not None else []
        if len(same) == 1:
            out[n.name] = same[0]
    return out


def _made(graph: JointGraph, saved_nodes: list[fx.Node], fw_map: dict[str, str]) -> dict[str, MadeValue]:
    """The saved values no joint node computes, described."""
    made: dict[str, MadeValue] = {}
    for n in saved_nodes:
        if n.name in fw_map:
            continue
        name = made_name(n.name)
        src = n.args[0] if n.op == "call_function" and n.args else None
        if isinstance(src, fx.Node) and _target_name(src) == "run_and_save_rng_state" and n.args[1:] == (0,):
            out1 = [u for u in src.users if u.args[1:] == (1,)]
            wraps = fw_map.get(out1[0].name) if out1 else None
            op = graph.info[wraps].short_op if wraps in graph.info \
                else str(getattr(src.args[0], "__name__", src.args[0]))
            made[name] = MadeValue(name, n.name, "rng state",
                                   f"CPU RNG state saved by run_and_save_rng_state for {op}", wraps)
        elif isinstance(src, fx.Node) and _target_name(n) == "device_put" and fw_map.get(src.name) in graph.info:
            # torch's activation offloading: the forward saves a copy on another device, the backward
            # reloads it (``_functorch/_activation_offloading``)
            wraps = fw_map[src.name]
            device = n.args[1] if len(n.args) > 1 else "another device"
            made[name] = MadeValue(name, n.name, "offloaded",
                                   f"`{wraps}` offloaded to {device} by torch's activation offloading "
                                   "(the backward reloads it)", wraps)
        else:
            made[name] = MadeValue(name, n.name, "partitioner-made",
                                   f"a value the partitioner made ({n.format_node()})")
    return made


def from_graphs(graph: JointGraph, strategy: Strategy, fwd: fx.GraphModule, bwd: fx.GraphModule,
                seconds: float = 0.0) -> Partition:
    """Describe a (forward, backward) pair in joint-graph terms."""
    joint_names = {n.name for n in graph.gm.graph.nodes if n.op != "output"}
    joint = _joint_values(graph.gm)
    fw_map = _to_joint(fwd, joint)
    saved_nodes = saved_values(fwd, graph.num_fwd_outputs)
    made = _made(graph, saved_nodes, fw_map)
    copies = {m.node: m.wraps for m in made.values() if m.kind == "offloaded" and m.wraps is not None}
    bw_map = _to_joint(bwd, joint, {o.name: fw_map.get(o.name) for o in saved_nodes}, copies)
    saved = [fw_map.get(o.name) or made_name(o.name) for o in saved_nodes]
    in_fwd = set(fw_map.values())
    bwd_inputs = _placeholders(bwd)
    recomputed = {j for b, j in bw_map.items()
                  if graph.info[j].phase == "forward" and graph.info[j].op == "call_function"
                  and b not in bwd_inputs}
    present = in_fwd | set(bw_map.values())
    removed = {n for n in joint_names if n not in present}
    # a random op run again in the backward draws new values (on CPU torch does not functionalize
    # RNG), so its gradients no longer match the forward: worth a loud flag
    random = {bw_map[n.name] for n in bwd.graph.nodes
              if bw_map.get(n.name) in recomputed and n.name not in bwd_inputs and draws_random(n) and n.users}
    return Partition(strategy=strategy, forward=fwd, backward=bwd, saved=saved, recomputed=recomputed,
                     removed=removed, fw_to_joint=fw_map, bw_to_joint=bw_map, caller=graph.partitioner_caller,
                     seconds=seconds, recomputed_random=random, made=made)


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


def _plain_min_cut(gm: Any, joint_inputs: Any, **kwargs: Any) -> Any:
    """min-cut as it is without a memory budget: a budget the user set in torch's config is the
    ``budget:B`` strategy's, not this one's."""
    with _torch.plain_min_cut_config():
        return _torch.min_cut_partition(gm, joint_inputs, **kwargs)


def _user_partitioner(s: Strategy) -> PartitionFn:
    assert s.fn is not None
    return s.fn


_PARTITIONERS: dict[str, Callable[[Strategy], PartitionFn]] = {
    "default": lambda _s: _torch.default_partition,
    "min_cut": lambda _s: _plain_min_cut,
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


def _captured_min_cut(graph: JointGraph, s: Strategy) -> Partition | None:
    """Strategy ``min_cut`` on a graph inductor's capture already partitioned with plain min-cut and
    the same arguments: that result, described (a second min-cut of the same graph gives the same
    graphs and was most of a big report's time); None when the capture ran none or torch's functorch
    config has changed since (``min_cut`` then runs as it is now)."""
    if s.kind != "min_cut" or graph.captured_min_cut is None:
        return None
    fwd, bwd, seconds, state = graph.captured_min_cut
    if state != _torch.min_cut_config_state():
        return None
    # copies, as every other strategy's graphs are fresh: a caller's edit never reaches the capture's
    return from_graphs(graph, s, _torch.copy_graph_module(fwd), _torch.copy_graph_module(bwd), seconds)


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
    reused = _captured_min_cut(graph, s)
    if reused is not None:
        return reused
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
