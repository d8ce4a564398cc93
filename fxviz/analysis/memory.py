"""Exact memory facts of a ``Partition``: saved bytes by storage, peaks, the cost of recomputing.

torch's own estimate (``_size_of``: ``numel * itemsize`` per node) is blind to aliasing: a saved
``detach`` of a saved ``sigmoid`` counts twice, a transposed weight counts as a new activation.
Here every byte is attributed to a *storage*, identified through the fake tensors torch recorded
on each node (they keep the traced program's aliasing), so views and aliases count once and a
saved view of a parameter or input is reported as such, not as an activation.  Symbolic sizes are
evaluated at the example inputs' sizes (the caption says so when it happened).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
import torch.fx as fx
from torch.utils.flop_counter import FlopCounterMode, flop_registry

from .. import _torch
from .._fx import output_values
from ..capture import JointGraph
from ..errors import StrategyError
from .partition import Partition
from .strategies import OFFERED, Strategy, parse_list

__all__ = [
    "COLUMNS",
    "Storages",
    "StorageUse",
    "SavedMemory",
    "MemoryRow",
    "concrete",
    "has_symbolic_sizes",
    "storage_owners",
    "saved_memory",
    "peak_bytes",
    "live_bytes",
    "recompute_cost",
    "graph_flops",
    "memory_row",
    "memory_table",
    "gaps_to_optimal",
    "caption",
    "checkpoint_summary",
]

COLUMNS: list[str] = [
    "strategy", "saved_tensors", "saved_symints", "saved_storages", "saved_activation_bytes", "saved_param_bytes",
    "saved_input_bytes", "recomputed_ops", "recomputed_random_ops", "recompute_flops", "recompute_bytes",
    "forward_ops", "backward_ops", "forward_flops", "forward_peak_bytes", "backward_peak_bytes",
    "resident_bytes", "torch_estimate_bytes", "gap_to_optimal_flops", "gap_to_optimal_bytes", "seconds", "error",
]
_INT_COLUMNS = [c for c in COLUMNS if c not in ("strategy", "seconds", "error")]

# joint-graph roles whose storages the model or the caller own (never activations)
_PARAM_ROLES = ("parameter", "buffer", "constant")
_INPUT_ROLES = ("primal",)


# --- sizes ---------------------------------------------------------------------------------------
def concrete(v: Any) -> int:
    """An int, evaluating a SymInt at the example size it was traced with."""
    if isinstance(v, torch.SymInt):
        hint = getattr(v.node, "hint", None)
        if hint is None:
            raise ValueError(f"symbolic size {v} has no example value")
        return int(hint)
    return int(v)


def has_symbolic_sizes(gm: fx.GraphModule) -> bool:
    """Whether any value's size is symbolic (then every figure is at the example sizes)."""
    for n in gm.graph.nodes:
        val = _torch.meta_val(n)
        if isinstance(val, torch.SymInt):
            return True
        for t in _tensors(val):
            if any(isinstance(s, torch.SymInt) for s in t.shape):
                return True
    return False


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


class Storages:
    """Which storage every value of some graphs lives in, and how big it is.

    Identity comes from the fake tensors torch recorded (``meta["val"]``), which keep the traced
    program's aliasing, joined with the graphs' own view edges (an op whose schema says its
    output aliases an input: ``t``, ``view``, ``expand``, in-place ops).  The edges matter where
    the fakes cannot know: a ``get_attr`` constant (parameters captured in a closure) gets a
    fresh fake of its own, so its transpose ``t`` would otherwise look like a new tensor; and
    two ``get_attr`` reads of one attribute are one tensor.
    """

    def __init__(self, *gms: fx.GraphModule | None) -> None:
        self._parent: dict[int, int] = {}
        self._size: dict[int, int] = {}
        self._attrs: dict[str, int] = {}
        for gm in gms:
            if gm is not None:
                self.add(gm)

    def _find(self, k: int) -> int:
        root = k
        while self._parent.get(root, root) != root:
            root = self._parent[root]
        while k != root:
            self._parent[k], k = root, self._parent.get(k, k)
        return root

    def _raw(self, t: torch.Tensor) -> int:
        k = _torch.storage_key(t)
        if k not in self._parent:
            self._parent[k] = k
            self._size[k] = concrete(t.untyped_storage().nbytes())
        return k

    def _union(self, a: int, b: int) -> None:
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self._parent[rb] = ra
            self._size[ra] = max(self._size[ra], self._size.pop(rb))

    def add(self, gm: fx.GraphModule) -> None:
        for n in gm.graph.nodes:
            values = _tensors(_torch.meta_val(n))
            keys = [self._raw(t) for t in values]
            if n.op == "get_attr" and keys:  # every read of one attribute is one tensor
                self._union(self._attrs.setdefault(str(n.target), keys[0]), keys[0])
            base = _alias_base(n)
            base_values = _tensors(_torch.meta_val(base)) if base is not None else []
            if base_values:
                base_key = self._raw(base_values[0])
                for k in keys:
                    self._union(base_key, k)

    def key(self, t: torch.Tensor) -> int:
        """The storage of ``t`` (views and aliases of one storage share the key)."""
        return self._find(self._raw(t))

    def nbytes(self, key: int) -> int:
        return self._size[self._find(key)]


def _alias_base(node: fx.Node) -> fx.Node | None:
    """The input node whose storage ``node``'s output aliases, by the op's schema (or None)."""
    schema = getattr(node.target, "_schema", None)
    if node.op != "call_function" or schema is None or not schema.returns:
        return None
    ret = schema.returns[0].alias_info
    if ret is None:
        return None
    wanted = set(ret.before_set)
    for i, arg in enumerate(schema.arguments):
        if arg.alias_info is None or (wanted and not wanted & set(arg.alias_info.before_set)):
            continue
        value = node.args[i] if i < len(node.args) else node.kwargs.get(arg.name)
        return value if isinstance(value, fx.Node) else None
    return None


def _numel_bytes(t: torch.Tensor) -> int:
    n = 1
    for s in t.shape:
        n *= concrete(s)
    return n * t.element_size()


def _is_view_op(target: Any) -> bool:
    """An aten op whose output aliases an input (``t``, ``view``, ``detach``, ``expand``...)."""
    schema = getattr(target, "_schema", None)
    if schema is None:
        return False
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


# --- who owns a storage --------------------------------------------------------------------------
def storage_owners(graph: JointGraph, storages: Storages) -> dict[int, str]:
    """storage key -> "parameter" | "input" for every parameter, buffer, constant and user input
    of the joint graph.  These storages exist whatever the partitioner does."""
    owners: dict[int, str] = {}
    for n in graph.gm.graph.nodes:
        if n.op not in ("placeholder", "get_attr"):
            continue
        info = graph.info.get(n.name)
        role = info.role if info is not None else ("constant" if n.op == "get_attr" else None)
        if role in _PARAM_ROLES:
            owner = "parameter"
        elif role in _INPUT_ROLES:
            owner = "input"
        else:
            continue
        for t in _tensors(_torch.meta_val(n)):
            owners.setdefault(storages.key(t), owner)
    return owners


# --- what is saved -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StorageUse:
    """One storage the backward keeps alive, and the saved values (joint names) that view it."""

    key: int
    nbytes: int
    owner: str  # activation | parameter | input
    names: tuple[str, ...]


@dataclass
class SavedMemory:
    """Saved values of a partition, counted by storage."""

    tensors: int = 0
    symints: int = 0
    storages: list[StorageUse] = field(default_factory=list)
    torch_estimate_bytes: int = 0

    def bytes_of(self, owner: str) -> int:
        return sum(s.nbytes for s in self.storages if s.owner == owner)

    @property
    def activation_bytes(self) -> int:
        return self.bytes_of("activation")

    @property
    def param_bytes(self) -> int:
        return self.bytes_of("parameter")

    @property
    def input_bytes(self) -> int:
        return self.bytes_of("input")


def saved_nodes(p: Partition, graph: JointGraph) -> list[fx.Node]:
    """The forward graph's outputs after the first ``num_fwd_outputs``: what the backward reads."""
    assert p.forward is not None
    return [o for o in output_values(p.forward)[graph.num_fwd_outputs:] if isinstance(o, fx.Node)]


def saved_memory(p: Partition, graph: JointGraph, storages: Storages | None = None) -> SavedMemory:
    """Storage-aware bytes of everything ``p`` saves for the backward."""
    storages = Storages(graph.gm, p.forward, p.backward) if storages is None else storages
    owners = storage_owners(graph, storages)
    result = SavedMemory()
    groups: dict[int, tuple[str, list[str]]] = {}
    for node in saved_nodes(p, graph):
        val = _torch.meta_val(node)
        if not isinstance(val, torch.Tensor):
            result.symints += 1
            continue
        result.tensors += 1
        result.torch_estimate_bytes += _torch.torch_size_of(node)
        key = storages.key(val)
        groups.setdefault(key, (owners.get(key, "activation"), []))[1].append(p.fw_to_joint.get(node.name, node.name))
    result.storages = [StorageUse(k, storages.nbytes(k), ow, tuple(names)) for k, (ow, names) in groups.items()]
    return result


# --- liveness ------------------------------------------------------------------------------------
def peak_bytes(gm: fx.GraphModule, storages: Storages, resident: dict[int, int], *,
               inputs_live_throughout: bool) -> int:
    """Peak bytes while ``gm`` runs: resident storages (parameters, user inputs) all the time,
    plus every other storage from the node that creates it to the last user of any value that
    views it.  Graph outputs live to the end.  Other graph inputs live throughout in a forward
    (the caller holds them) and until their last use in a backward (AOTAutograd hands the saved
    values over and lets each go once read)."""
    live = live_bytes(gm, storages, resident, inputs_live_throughout=inputs_live_throughout)
    return max(live, default=0) + sum(resident.values())


def live_bytes(gm: fx.GraphModule, storages: Storages, resident: dict[int, int], *,
               inputs_live_throughout: bool) -> list[int]:
    """Bytes live (resident storages left out) while each node of ``gm`` runs, one entry per node
    in graph order: the liveness walk ``peak_bytes`` takes the maximum of."""
    nodes = list(gm.graph.nodes)
    end = len(nodes)
    index = {n: i for i, n in enumerate(nodes)}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, n in enumerate(nodes):
        if n.op == "output":
            for a in n.all_input_nodes:
                for t in _tensors(_torch.meta_val(a)):
                    last[storages.key(t)] = end
            continue
        use = max((index[u] for u in n.users), default=i)
        if n.op == "placeholder" and inputs_live_throughout:
            use = end
        for t in _tensors(_torch.meta_val(n)):
            key = storages.key(t)
            if key in resident:
                continue
            first.setdefault(key, i)
            last[key] = max(last.get(key, i), use)
    delta = [0] * (end + 2)
    for key, start in first.items():
        delta[start] += storages.nbytes(key)
        delta[last[key] + 1] -= storages.nbytes(key)
    curve, live = [], 0
    for d in delta[:end]:  # after the last node only the outputs are live, as at the output node
        live += d
        curve.append(live)
    return curve


# --- FLOPs and the cost of recomputing -----------------------------------------------------------
def _meta(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return torch.empty_strided([concrete(s) for s in value.shape], [concrete(s) for s in value.stride()],
                                   dtype=value.dtype, device="meta")
    if isinstance(value, torch.SymInt):
        return concrete(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_meta(v) for v in value)
    return value


def node_flops(node: fx.Node) -> int:
    """FLOPs of one node as ``torch.utils.flop_counter`` counts them (pointwise ops count 0), run
    on meta tensors of the recorded shapes: nothing is computed."""
    packet = getattr(node.target, "overloadpacket", None)
    if node.op != "call_function" or packet not in flop_registry:
        return 0
    key = _flop_key(node)
    if key is not None and key in _FLOPS:
        return _FLOPS[key]
    args = fx.node.map_arg(node.args, lambda a: _meta(_torch.meta_val(a)))
    kwargs = fx.node.map_arg(node.kwargs, lambda a: _meta(_torch.meta_val(a)))
    counter = FlopCounterMode(display=False)
    assert callable(node.target)  # a call_function node
    with counter:
        node.target(*args, **kwargs)
    flops = int(counter.get_total_flops())
    if key is not None:
        if len(_FLOPS) >= _FLOPS_LIMIT:
            _FLOPS.clear()
        _FLOPS[key] = flops
    return flops


# FLOPs by (op, argument shapes/dtypes, other arguments): twelve identical layers are counted once
# (gpt12's memory table spent 3.8 of 5.35 s re-running each matmul on meta tensors)
_FLOPS: dict[Any, int] = {}
_FLOPS_LIMIT = 65536


def _flop_key(node: fx.Node) -> Any:
    """A hashable description of what decides a node's FLOP count, or None if it has none."""
    def describe(a: Any) -> Any:
        if isinstance(a, fx.Node):
            v = _torch.meta_val(a)
            if isinstance(v, torch.Tensor):
                return ("t", tuple(str(d) for d in v.shape), tuple(str(d) for d in v.stride()), str(v.dtype))
            return ("v", str(v))
        if isinstance(a, (list, tuple)):
            return tuple(describe(x) for x in a)
        if isinstance(a, dict):
            return tuple(sorted((k, describe(x)) for k, x in a.items()))
        return repr(a)

    try:
        key = (node.target, describe(node.args), describe(node.kwargs))
        hash(key)
    except Exception:  # an argument that cannot be described: count afresh
        return None
    return key


def node_traffic(node: fx.Node) -> int:
    """Bytes an op reads and writes (``numel * itemsize`` of its tensor inputs and outputs);
    0 for views, which move nothing."""
    if node.op != "call_function" or _is_view_op(node.target) or not hasattr(node.target, "_schema"):
        return 0
    read = sum(_numel_bytes(t) for a in node.all_input_nodes for t in _tensors(_torch.meta_val(a)))
    write = sum(_numel_bytes(t) for t in _tensors(_torch.meta_val(node)))
    return read + write


def graph_flops(gm: fx.GraphModule) -> int:
    return sum(node_flops(n) for n in gm.graph.nodes)


def recompute_cost(p: Partition) -> tuple[int, int]:
    """(FLOPs, bytes read+written) of the forward ops the backward runs again."""
    if p.backward is None:
        return 0, 0
    flops = traffic = 0
    for n in p.backward.graph.nodes:
        if n.op == "call_function" and p.bw_to_joint.get(n.name) in p.recomputed:
            flops += node_flops(n)
            traffic += node_traffic(n)
    return flops, traffic


def _op_count(gm: fx.GraphModule | None) -> int:
    """call_function nodes, not counting ``getitem`` (which only unpacks a tuple)."""
    if gm is None:
        return 0
    return sum(1 for n in gm.graph.nodes if n.op == "call_function" and getattr(n.target, "__name__", "") != "getitem")


# --- one row, the table --------------------------------------------------------------------------
@dataclass
class MemoryRow:
    values: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _error_row(strategy: str, reason: str) -> MemoryRow:
    values: dict[str, Any] = {c: None for c in COLUMNS}
    values.update(strategy=strategy, error=reason)
    return MemoryRow(values)


def memory_row(graph: JointGraph, p: Partition) -> MemoryRow:
    """Every column of the memory table for one partition (an error row if ``p`` failed)."""
    if p.error is not None:
        return _error_row(p.name, p.error)
    storages = Storages(graph.gm, p.forward, p.backward)
    resident = {k: storages.nbytes(k) for k in storage_owners(graph, storages)}
    measurement = p.measurement
    if measurement is not None:  # the eager row: measured on real tensors, no graphs to walk
        values: dict[str, Any] = {c: None for c in COLUMNS}
        values.update(
            strategy=p.name, saved_tensors=measurement.saved_tensors, saved_storages=measurement.storages,
            saved_activation_bytes=measurement.activation_bytes, saved_param_bytes=measurement.param_bytes,
            saved_input_bytes=measurement.input_bytes, recomputed_ops=measurement.recomputed_ops,
            recomputed_random_ops=None, recompute_flops=measurement.recompute_flops,
            recompute_bytes=measurement.recompute_bytes,
            forward_ops=measurement.forward_ops, resident_bytes=sum(resident.values()),
            torch_estimate_bytes=measurement.estimate_bytes, seconds=p.seconds)
        return MemoryRow(values, list(measurement.notes))
    if p.forward is None or p.backward is None:
        return _error_row(p.name, "the partition has no forward/backward graphs to measure")
    saved = saved_memory(p, graph, storages)
    flops, traffic = recompute_cost(p)
    random = sorted(p.recomputed_random)
    values = {
        "strategy": p.name,
        "saved_tensors": saved.tensors,
        "saved_symints": saved.symints,
        "saved_storages": len(saved.storages),
        "saved_activation_bytes": saved.activation_bytes,
        "saved_param_bytes": saved.param_bytes,
        "saved_input_bytes": saved.input_bytes,
        "recomputed_ops": len(p.recomputed),
        "recomputed_random_ops": len(random),
        "recompute_flops": flops,
        "recompute_bytes": traffic,
        "forward_ops": _op_count(p.forward),
        "backward_ops": _op_count(p.backward),
        "forward_flops": graph_flops(p.forward),
        "forward_peak_bytes": peak_bytes(p.forward, storages, resident, inputs_live_throughout=True),
        "backward_peak_bytes": peak_bytes(p.backward, storages, resident, inputs_live_throughout=False),
        "resident_bytes": sum(resident.values()),
        "torch_estimate_bytes": saved.torch_estimate_bytes,
        "seconds": p.seconds,
        "error": None,
    }
    return MemoryRow(values)


def caption(graph: JointGraph, symbolic: bool = False, notes: Sequence[str] = ()) -> str:
    """What the partitioners were given and how the bytes were counted."""
    static = list(graph.static_lifetime_input_indices)
    why = ("the parameter inputs: torch.compile treats them as free to save" if static
           else "none: aot_function / aot_module pass []")
    parts = [
        f"Joint graph of backend={graph.backend!r}.",
        f"Partitioners called as {graph.partitioner_caller} calls them: num_fwd_outputs={graph.num_fwd_outputs}, "
        f"static_lifetime_input_indices={static} ({why})"
        + (f", compiler={graph.compiler!r}." if graph.compiler is not None else "."),
        "Bytes count unique storages: views and aliases count once; saves that view a parameter/buffer "
        "(saved_param_bytes) or a user input (saved_input_bytes) are not activations.",
        "Peaks: a liveness walk over each graph, parameters and inputs resident throughout (resident_bytes).",
        "FLOPs from torch.utils.flop_counter (pointwise ops count 0; recompute_bytes shows their cost).",
        "torch_estimate_bytes: torch's own per-value numel*itemsize sum over the saved values, blind to aliasing.",
    ]
    if symbolic:
        parts.append("Symbolic sizes were evaluated at the example inputs' sizes.")
    checkpoint = checkpoint_summary(graph)
    if checkpoint:
        parts.append(checkpoint)
    parts += list(dict.fromkeys(notes))
    return " ".join(parts)


def checkpoint_summary(graph: JointGraph) -> str:
    """One line on the model's torch.utils.checkpoint regions ("" without any): how many, and how
    many forward ops carry each policy (min-cut honours them: must_* always, prefer_* unless
    inductor decides otherwise)."""
    regions = {i.checkpoint_region for i in graph.info.values() if i.checkpoint_region is not None}
    if not regions:
        return ""
    policies: dict[str, int] = {}
    for i in graph.info.values():
        if i.checkpoint_policy is not None:
            policies[i.checkpoint_policy] = policies.get(i.checkpoint_policy, 0) + 1
    counts = ", ".join(f"{n} {name}" for name, n in sorted(policies.items()))
    return (f"Checkpointed: {len(regions)} torch.utils.checkpoint region(s); ops tagged {counts} "
            "(Trace.nodes columns checkpoint_policy, checkpoint_region); the partitioners honour the tags.")


def _frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in _INT_COLUMNS:
        df[c] = df[c].astype("Int64")
    df["seconds"] = df["seconds"].astype("float64")
    df["error"] = pd.Series([r.get("error") for r in rows], index=df.index, dtype="object")  # None when fine
    return df


def memory_table(graph: JointGraph, get_partition: Callable[[Strategy], Partition],
                 strategies: Iterable[Any] | None = None, gaps: bool | None = None) -> pd.DataFrame:
    """One row per strategy.  ``get_partition(strategy)`` is ``Trace.partition`` (cached there).
    A strategy that fails on this graph gives a row with ``error`` set; a malformed strategy
    raises ``StrategyError``.  ``df.attrs["caption"]`` says how the partitioners were called.

    ``gaps``: fill ``gap_to_optimal_flops`` (extra recompute FLOPs over the exact optimum at the
    row's saved activation bytes) and ``gap_to_optimal_bytes`` (extra saved bytes over the optimum
    at the row's recompute FLOPs), two MILP solves per row; default: when an ``optimal`` strategy
    is among ``strategies`` (the default table stays fast)."""
    chosen = list(OFFERED) if strategies is None else parse_list(list(strategies)) or []
    rows, notes = [], []
    for s in chosen:
        name = s.name
        try:
            p = get_partition(s)
            row = memory_row(graph, p)
        except StrategyError:
            raise
        except Exception as exc:  # one strategy's failure must not sink the table
            row = _error_row(name, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        rows.append(row.values)
        notes += row.notes
    redraws = [f"{r['strategy']} ({r['recomputed_random_ops']})" for r in rows if r.get("recomputed_random_ops")]
    if redraws:
        notes.insert(0, "recomputed_random_ops: random ops the backward runs again, drawing afresh unless torch "
                        "functionalizes the RNG (so the backward's mask is not the forward's): "
                        + ", ".join(redraws) + ".")
    if gaps or (gaps is None and any(s.kind == "optimal" for s in chosen)):
        notes += gaps_to_optimal(graph, rows)
    df = _frame(rows)
    df.attrs["caption"] = caption(graph, has_symbolic_sizes(graph.gm), notes)
    return df


def gaps_to_optimal(graph: JointGraph, rows: list[dict[str, Any]]) -> list[str]:
    """Fill the two ``gap_to_optimal`` columns of ``rows`` in place; returns the caption's notes.
    Rows that are measured (eager) or redraw random values are not partitions of the same
    program the optimum is computed for: their gaps stay empty, and the note says why."""
    from .optimal import model_of_joint, solve, solve_min_bytes

    model = model_of_joint(graph.gm, graph.num_fwd_outputs)
    skipped, bounds = [], []
    for r in rows:
        if r.get("error") is not None or r.get("saved_activation_bytes") is None:
            continue
        if r["backward_ops"] is None or r.get("recomputed_random_ops"):  # measured (eager) or redrawing
            skipped.append(r["strategy"])
            continue
        b, f = int(r["saved_activation_bytes"]), int(r["recompute_flops"])
        at_bytes, at_flops = solve(model, b), solve_min_bytes(model, f)
        if at_bytes.status == "optimal":
            r["gap_to_optimal_flops"] = f - at_bytes.recompute_flops
        if at_flops.status == "optimal":
            r["gap_to_optimal_bytes"] = b - at_flops.saved_bytes
        if not (at_bytes.optimal and at_flops.optimal):
            bounds.append(r["strategy"])
    notes = ["gap_to_optimal_flops: recompute FLOPs above the exact optimum (MILP, HiGHS) at the row's saved "
             "activation bytes; gap_to_optimal_bytes: saved activation bytes above the optimum at the row's "
             "recompute FLOPs, bytes moved not held equal (0: the row is on the optimal frontier)."]
    if skipped:
        notes.append("No gap for " + ", ".join(skipped) + ": measured on the model, or redrawing random values "
                     "in the backward, so not a partition of the same program.")
    if bounds:
        notes.append("Solver time limit reached for " + ", ".join(bounds) + ": those gaps are left empty.")
    return notes
