"""torch's partitioners and the partitioner-side helpers fxviz builds its own partitions with, and the
copy of a graph a partitioner may mutate."""

from __future__ import annotations

import collections
import contextlib
import copy
import hashlib
from collections.abc import Iterator
from typing import Any

import torch
import torch.fx as fx
from torch._functorch import config as functorch_config
from torch._functorch import partitioners as _partitioners
from torch.fx._lazy_graph_module import _LazyGraphModule

default_partition = _partitioners.default_partition
min_cut_partition = _partitioners.min_cut_rematerialization_partition


def extract_fwd_bwd_modules(joint: fx.GraphModule, saved_values: list[fx.Node], saved_sym_nodes: list[fx.Node],
                            *, num_fwd_outputs: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's own helper that cuts a joint graph into forward and backward graphs, given what
    the forward saves: partitions built by fxviz are shaped exactly as torch's."""
    return _partitioners._extract_fwd_bwd_modules(joint, saved_values, saved_sym_nodes,
                                                  num_fwd_outputs=num_fwd_outputs)


def replay_rng(joint: fx.GraphModule, fwd: fx.GraphModule, bwd: fx.GraphModule,
               num_sym_nodes: int) -> tuple[fx.GraphModule, fx.GraphModule]:
    """torch's RNG functionalization, applied as min-cut applies it after its extraction: a random
    op a checkpoint policy marks ``must_recompute``/``prefer_recompute`` that runs in both graphs
    saves its RNG state in the forward (``run_and_save_rng_state``) and replays it in the backward
    (``run_with_rng_state``), so the backward draws the forward's values.  Unchanged without one."""
    if not _partitioners.has_recomputable_rng_ops(joint):
        return fwd, bwd
    return _partitioners.functionalize_rng_ops(joint, fwd, bwd, num_sym_nodes)


def rng_state_bytes(device: torch.device | None) -> int:
    """Bytes of the RNG state ``replay_rng`` saves for one random op on ``device``: the CPU
    generator's state (torch saves ``torch.get_rng_state()``); 0 elsewhere, where torch's graph-safe
    functionalization passes the generator state as a graph input instead of saving it."""
    if device is None or device.type == "cpu":
        return int(torch.get_rng_state().numel())
    return 0


def is_random(node: fx.Node) -> bool:
    """A seeded random op (dropout, rand, bernoulli...): recomputing it redraws its values."""
    return _is_random(node)


def _is_random(node: fx.Node) -> bool:
    tags = getattr(node.target, "tags", ())
    return torch.Tag.nondeterministic_seeded in tags


def is_tangent(node: fx.Node) -> bool:
    """A joint-graph placeholder that is an incoming gradient (torch's own test: its name)."""
    return bool(_partitioners._is_tangent(node))


def must_be_in_forward(node: fx.Node) -> bool:
    """torch's extraction refuses to put this node in the backward (a mutation of the forward,
    or tagged ``must_be_in_forward``): it can never be recomputed."""
    return bool(_partitioners._must_be_in_forward(node))


def must_be_in_backward(node: fx.Node) -> bool:
    """torch's extraction puts this node only in the backward (tagged, or a backward mutation)."""
    return bool(_partitioners._must_be_in_backward(node))


def is_collective(node: fx.Node) -> bool:
    """A functional collective (``_c10d_functional``): torch never recomputes one, not even under
    an activation-memory budget (``ban_recomputation_if_allowed``)."""
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.namespace == "_c10d_functional"


def cse_like_min_cut(joint: fx.GraphModule) -> None:
    """What min-cut does to the joint graph before it partitions (in place): drop dead code and,
    when ``torch._functorch.config.cse`` is on (the default), merge common subexpressions (two
    layers' identical causal masks become one), so a partition built from the result is compared
    with min-cut on the same graph."""
    from torch._functorch.compile_utils import fx_graph_cse

    joint.graph.eliminate_dead_code()
    if functorch_config.cse:
        joint.graph = fx_graph_cse(joint.graph)


def torch_size_of(node: fx.Node) -> int:
    """torch's own per-node byte estimate (``numel * itemsize``, blind to aliasing)."""
    try:
        return int(_partitioners._size_of(node))
    except Exception:  # nodes without a tensor value
        return 0


def step_budget() -> tuple[float, str]:
    """The activation-memory budget and solver torch.compile's min-cut uses in this session (read
    beside where fxviz sets and pins them)."""
    return float(functorch_config.activation_memory_budget), str(functorch_config.activation_memory_budget_solver)


@contextlib.contextmanager
def plain_min_cut_config() -> Iterator[None]:
    """min-cut without a memory budget, whatever the caller's ``torch._functorch.config`` says."""
    with functorch_config.patch(activation_memory_budget=1.0):
        yield


def min_cut_config_state() -> bytes:
    """The settings min-cut reads, as plain min-cut sees them (``activation_memory_budget=1``): the
    functorch config, and the two inductor settings its partitioner reads (``fallback_random``: graph-safe
    RNG; ``post_grad_fusion_options``).  The same bytes then and now mean a min-cut run then is the one
    strategy ``min_cut`` would run now."""
    from torch._inductor import config as inductor_config

    with plain_min_cut_config():
        state = functorch_config.save_config()
    return state + repr((inductor_config.fallback_random, inductor_config.post_grad_fusion_options)).encode()


@contextlib.contextmanager
def budget_config(budget: float, solver: str) -> Iterator[None]:
    """Set the activation-memory budget and its solver for one partitioner call only."""
    with functorch_config.patch(
        activation_memory_budget=float(budget), activation_memory_budget_solver=solver
    ):
        yield


@contextlib.contextmanager
def partitioner_context(gm: fx.GraphModule) -> Iterator[None]:
    """The context torch's partitioners expect to run in: min-cut functionalizes the RNG of
    random ops a checkpoint region must recompute (CPU attention is tagged random), and that asks
    ``detect_fake_mode()`` for the fake mode the joint graph was traced in.  Outside torch.compile
    there is none, so the fake mode of the graph's own values is supplied (none: nothing to do)."""
    from torch._guards import TracingContext, detect_fake_mode, tracing
    from torch.fx._lazy_graph_module import _use_lazy_graph_module

    # the graphs a partitioner makes write their Python code when something runs or prints them, as under
    # torch.compile (inductor's compile sets the same flag): a partition's views never do, and writing the
    # code of a 64-layer graph's forward and backward was ~10% of a budget sweep (issue 46)
    with remembered_min_cuts(), _use_lazy_graph_module(True):
        if detect_fake_mode() is not None:
            yield
            return
        values = [n.meta.get("val") for n in gm.graph.nodes if n.op == "placeholder"]
        mode = detect_fake_mode([v for v in values if isinstance(v, torch.Tensor)])
        if mode is None:
            yield
            return
        with tracing(TracingContext(mode)):
            yield


_CUTS: collections.OrderedDict[bytes, tuple[Any, tuple[frozenset[Any], frozenset[Any]]]] = collections.OrderedDict()
_CUTS_KEPT = 16
"""The flow networks min-cut solved in this process, by their digest (the most recently used kept)."""


def _flow_digest(g: Any, s: Any, t: Any, capacity: Any) -> bytes:
    """A digest of everything ``networkx.minimum_cut`` reads of ``g``: its nodes, each edge with its data, in
    the order they were added (successors and predecessors: the order decides which of several minimum cuts
    the preflow-push finds), and the terminals."""
    h = hashlib.blake2b(repr((s, t, capacity)).encode(), digest_size=32)
    for u, data in g._node.items():  # networkx's own insertion-ordered dicts
        h.update(repr((u, sorted(data.items()), [(v, sorted(d.items())) for v, d in g._succ[u].items()],
                       list(g._pred[u]))).encode())
    return h.digest()


@contextlib.contextmanager
def remembered_min_cuts() -> Iterator[None]:
    """torch's min-cut solves its flow network with ``networkx.minimum_cut``: a network solved before in this
    process (the same nodes, edges, capacities and order) gets that solve's answer, which networkx's
    deterministic preflow-push would find again.  An activation-memory budget's partition solves three
    networks that do not depend on the budget (plain min-cut's and its two more aggressive ones) before its
    knapsack's: across a sweep of budgets (``fxviz advise``) those are solved once (issue 46: at 64 layers a
    solve took seconds).  Any other call of ``networkx.minimum_cut`` goes straight through."""
    try:
        import networkx as nx
    except ImportError:  # min-cut says it needs networkx itself
        yield
        return
    solve = nx.minimum_cut
    if getattr(solve, "_fxviz_remembered", False):  # nested: already in place
        yield
        return

    def minimum_cut(g: Any, s: Any, t: Any, capacity: str = "capacity", flow_func: Any = None,
                    **kwargs: Any) -> Any:
        if flow_func is not None or kwargs or not isinstance(g, nx.DiGraph) or type(g) is not nx.DiGraph:
            return solve(g, s, t, capacity=capacity, flow_func=flow_func, **kwargs)
        key = _flow_digest(g, s, t, capacity)
        found = _CUTS.get(key)
        if found is None:
            value, (a, b) = solve(g, s, t, capacity=capacity)
            found = _CUTS[key] = (value, (frozenset(a), frozenset(b)))
        _CUTS.move_to_end(key)
        while len(_CUTS) > _CUTS_KEPT:
            _CUTS.popitem(last=False)
        value, (a, b) = found
        return value, (set(a), set(b))

    minimum_cut._fxviz_remembered = True  # type: ignore[attr-defined]
    nx.minimum_cut = minimum_cut
    try:
        yield
    finally:
        nx.minimum_cut = solve


def copy_graph_module(gm: fx.GraphModule) -> fx.GraphModule:
    """A copy a partitioner may mutate freely.

    The graph and every node's meta dict are copied (``Graph.__deepcopy__`` copies meta
    shallowly, so fake tensors are shared, not duplicated); tensor attributes (``get_attr``
    constants, which are the user's real parameters in closure mode) are shared by reference, so
    copying never doubles the weights and constants keep their identity.
    """
    # a lazy GraphModule writes its Python code only when something calls or prints it: the
    # partitioners never do (0.2 s per copy on a 12-layer GPT, 2.3 s on a 3342-node graph)
    copied = _LazyGraphModule(gm, copy.deepcopy(gm.graph))
    copied.meta = dict(getattr(gm, "meta", {}))
    return copied


BUDGET_SETTING = "torch._functorch.config.activation_memory_budget"
"""Where a user's script sets torch.compile's activation-memory budget (what ``step_budget`` reads)."""


def budget_setting_code(budget: float) -> str:
    """The lines a training script runs to give torch.compile's min-cut ``budget``."""
    module, _, name = BUDGET_SETTING.rpartition(".")
    return f"import {module}\n\n{module}.{name} = {budget:g}\n"


def has_activation_offloading() -> bool:
    """Whether this torch's functorch config has activation offloading (a CUDA-only pass)."""
    return hasattr(functorch_config, "enable_activation_offloading")
