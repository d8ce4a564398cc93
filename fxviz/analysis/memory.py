"""Exact memory facts of a ``Partition``: saved bytes by storage, peaks, the cost of recomputing.

torch's own estimate (``_size_of``: ``numel * itemsize`` per node) is blind to aliasing: a saved
``detach`` of a saved ``sigmoid`` counts twice, a transposed weight counts as a new activation.
Here every byte is attributed to a *storage*, identified through the fake tensors torch recorded
on each node (they keep the traced program's aliasing), so views and aliases count once and a
saved view of a parameter or input is reported as such, not as an activation.  Symbolic sizes are
evaluated at the example inputs' sizes (the caption says so when it happened).
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import torch
import torch.fx as fx

from .. import _torch
from ..capture import JointGraph
from ..errors import StrategyError
from ..graph_facts import Storages, graph_flops, graph_op_count, node_flops, node_traffic, saved_values, tensors
from ..roles import STATE_ROLES
from .optimal import gaps_to_optimal
from .partition import Partition
from .strategies import Strategy, parse_list

if TYPE_CHECKING:
    import pandas as pd

    from .measure import Measured

__all__ = [
    "COLUMNS",
    "Storages",
    "StorageUse",
    "SavedMemory",
    "MemoryRow",
    "has_symbolic_sizes",
    "storage_spans",
    "storage_owners",
    "Offload",
    "offloads",
    "elsewhere",
    "saved_memory",
    "peak_bytes",
    "live_bytes",
    "recompute_cost",
    "memory_row",
    "offload_notes",
    "memory_table",
    "caption",
    "checkpoint_summary",
    "MEASURED_TABLE_COLUMNS",
    "add_measured",
]

COLUMNS: list[str] = [
    "strategy", "saved_tensors", "saved_symints", "saved_storages", "saved_activation_bytes", "saved_param_bytes",
    "saved_input_bytes", "offloaded_bytes", "recomputed_ops", "recomputed_random_ops", "recompute_flops",
    "recompute_bytes", "forward_graph_ops", "backward_graph_ops", "forward_flops", "forward_peak_bytes",
    "backward_peak_bytes", "resident_bytes", "torch_estimate_bytes", "gap_to_optimal_flops", "gap_to_optimal_bytes",
    "seconds", "error",
]
_INT_COLUMNS = [c for c in COLUMNS if c not in ("strategy", "seconds", "error")]
MEASURED_TABLE_COLUMNS: list[str] = ["measured_saved_bytes", "measured_difference_bytes", "measured_reason"]
"""The measured twin (``add_measured``): what the real compiled step kept, on the row of the strategy it
used; the difference from that row's ``saved_activation_bytes``, and why."""



# --- sizes ---------------------------------------------------------------------------------------
def has_symbolic_sizes(gm: fx.GraphModule) -> bool:
    """Whether any value's size is symbolic (then every figure is at the example sizes)."""
    for n in gm.graph.nodes:
        val = _torch.meta_val(n)
        if isinstance(val, torch.SymInt):
            return True
        for t in tensors(val):
            if any(isinstance(s, torch.SymInt) for s in t.shape):
                return True
    return False


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
        if role in STATE_ROLES:  # storages the model or the caller own: never activations
            owner = "parameter"
        elif role == "primal":
            owner = "input"
        else:
            continue
        for t in tensors(_torch.meta_val(n)):
            owners.setdefault(storages.key(t), owner)
    return owners


# --- what is saved -------------------------------------------------------------------------------
@dataclass(frozen=True)
class StorageUse:
    """One storage the backward keeps alive, and the saved values (joint names) that view it."""

    key: int
    nbytes: int
    owner: str  # activation | parameter | input | offloaded
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

    @property
    def offloaded_bytes(self) -> int:
        """The copies torch's activation offloading saves instead of the values (``offloaded``)."""
        return self.bytes_of("offloaded")


def saved_nodes(p: Partition, graph: JointGraph) -> list[fx.Node]:
    """The forward graph's outputs after the first ``num_fwd_outputs``: what the backward reads."""
    assert p.forward is not None
    return saved_values(p.forward, graph.num_fwd_outputs)


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
        name = p.saved_name(node.name)
        owner = "offloaded" if name in p.made and p.made[name].kind == "offloaded" else "activation"
        groups.setdefault(key, (owners.get(key, owner), []))[1].append(name)
    result.storages = [StorageUse(k, storages.nbytes(k), ow, tuple(names)) for k, (ow, names) in groups.items()]
    return result


# --- activation offloading ---------------------------------------------------------------------
@dataclass(frozen=True)
class Offload:
    """A value torch's activation offloading copied to another device for the backward (the
    forward's ``device_put``; the backward reloads it): its name in ``Partition.saved``, the joint
    value it holds, the device that value was made on and the one the copy went to."""

    name: str
    wraps: str | None
    source: str
    target: str

    @property
    def moved(self) -> bool:
        """Whether the copy left the device (a CPU run offloads to the CPU: the same memory)."""
        return self.source != self.target


def _device(n: Any) -> str | None:
    val = _torch.meta_val(n) if isinstance(n, fx.Node) else None
    return str(val.device) if isinstance(val, torch.Tensor) else None


def offloads(p: Partition) -> list[Offload]:
    """The values ``p`` offloads, in saved order: the ``MadeValue``s of kind ``offloaded``, with the
    devices their forward-graph nodes' fake tensors carry (the log's annotations)."""
    if p.forward is None or not any(m.kind == "offloaded" for m in p.made.values()):
        return []  # the usual case: no graph walk
    nodes = {n.name: n for n in p.forward.graph.nodes}
    out = []
    for name in p.saved:
        made = p.made.get(name)
        node = nodes.get(made.node) if made is not None and made.kind == "offloaded" else None
        if made is None or node is None:
            continue
        target = _device(node) or str(node.args[1] if len(node.args) > 1 else "?")
        out.append(Offload(name, made.wraps, _device(node.args[0] if node.args else None) or target, target))
    return out


def elsewhere(p: Partition, storages: Storages) -> set[int]:
    """Storages of ``p``'s graphs on a device offloading moved values to (the host), which the
    device's peaks leave out: an offloaded value counts on the device only from the op that makes it
    to its copy, and again from its reload in the backward to its last use."""
    targets = {o.target for o in offloads(p) if o.moved}
    keys: set[int] = set()
    for gm in (p.forward, p.backward) if targets else ():
        for n in gm.graph.nodes if gm is not None else ():
            keys.update(storages.key(t) for t in tensors(_torch.meta_val(n)) if str(t.device) in targets)
    return keys


# --- liveness ------------------------------------------------------------------------------------
def peak_bytes(gm: fx.GraphModule, storages: Storages, resident: dict[int, int], *,
               inputs_live_throughout: bool, away: AbstractSet[int] = frozenset()) -> int:
    """Peak bytes while ``gm`` runs: resident storages (parameters, user inputs) all the time,
    plus every other storage from the node that creates it to the last user of any value that
    views it.  Graph outputs live to the end.  Other graph inputs live throughout in a forward
    (the caller holds them) and until their last use in a backward (AOTAutograd hands the saved
    values over and lets each go once read).  ``away``: storages on another device (``elsewhere``)."""
    live = live_bytes(gm, storages, resident, inputs_live_throughout=inputs_live_throughout, away=away)
    return max(live, default=0) + sum(resident.values())


def storage_spans(gm: fx.GraphModule, storages: Storages, resident: Container[int], *,
                  inputs_live_throughout: bool) -> tuple[dict[int, tuple[int, int]], dict[int, fx.Node]]:
    """Storage -> (first, last) index of the nodes while which it is live, and the node that made
    it (``resident`` storages left out): the one liveness rule of the peaks, the timeline and the
    peak's anatomy.  A storage lives from the node that creates it to the last user of any value
    that views it; graph outputs to the end; other inputs throughout when ``inputs_live_throughout``."""
    nodes = list(gm.graph.nodes)
    end = len(nodes)
    index = {n: i for i, n in enumerate(nodes)}
    span: dict[int, tuple[int, int]] = {}
    maker: dict[int, fx.Node] = {}
    for i, n in enumerate(nodes):
        if n.op == "output":
            for a in n.all_input_nodes:
                for t in tensors(_torch.meta_val(a)):
                    k = storages.key(t)
                    if k in span:
                        span[k] = (span[k][0], end)
            continue
        use = max((index[u] for u in n.users), default=i)
        if n.op == "placeholder" and inputs_live_throughout:
            use = end
        for t in tensors(_torch.meta_val(n)):
            k = storages.key(t)
            if k in resident:
                continue
            first, last = span.get(k, (i, i))
            span[k] = (first, max(last, use))
            maker.setdefault(k, n)
    return span, maker


def live_bytes(gm: fx.GraphModule, storages: Storages, resident: dict[int, int], *,
               inputs_live_throughout: bool, away: AbstractSet[int] = frozenset()) -> list[int]:
    """Bytes live (resident storages and those ``away`` on another device left out) while each
    node of ``gm`` runs, one entry per node in graph order: the liveness walk ``peak_bytes`` takes
    the maximum of."""
    end = len(gm.graph.nodes)
    left_out: Container[int] = set(resident) | away if away else resident
    span, _ = storage_spans(gm, storages, left_out, inputs_live_throughout=inputs_live_throughout)
    delta = [0] * (end + 2)
    for key, (start, last) in span.items():
        delta[start] += storages.nbytes(key)
        delta[last + 1] -= storages.nbytes(key)
    curve, live = [], 0
    for d in delta[:end]:  # after the last node only the outputs are live, as at the output node
        live += d
        curve.append(live)
    return curve


# --- FLOPs and the cost of recomputing -----------------------------------------------------------
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
            forward_graph_ops=measurement.forward_aten_ops, resident_bytes=sum(resident.values()),
            torch_estimate_bytes=measurement.estimate_bytes, seconds=p.seconds)
        return MemoryRow(values, list(measurement.notes))
    if p.forward is None or p.backward is None:
        return _error_row(p.name, "the partition has no forward/backward graphs to measure")
    saved = saved_memory(p, graph, storages)
    away = elsewhere(p, storages)
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
        "offloaded_bytes": saved.offloaded_bytes,
        "recomputed_ops": len(p.recomputed),
        "recomputed_random_ops": len(random),
        "recompute_flops": flops,
        "recompute_bytes": traffic,
        "forward_graph_ops": graph_op_count(p.forward),
        "backward_graph_ops": graph_op_count(p.backward),
        "forward_flops": graph_flops(p.forward),
        "forward_peak_bytes": peak_bytes(p.forward, storages, resident, inputs_live_throughout=True, away=away),
        "backward_peak_bytes": peak_bytes(p.backward, storages, resident, inputs_live_throughout=False, away=away),
        "resident_bytes": sum(resident.values()),
        "torch_estimate_bytes": saved.torch_estimate_bytes,
        "seconds": p.seconds,
        "error": None,
    }
    return MemoryRow(values, offload_notes(p))


def offload_notes(p: Partition) -> list[str]:
    """The caption's words on what ``p`` offloads (none when it offloads nothing)."""
    moved = offloads(p)
    if not moved:
        return []
    names = ", ".join(f"{o.wraps or o.name} to {o.target}" for o in moved)
    away = sorted({o.target for o in moved if o.moved})
    same = sorted({o.target for o in moved if not o.moved})
    words = [f"offloaded_bytes: {p.name} offloads {len(moved)} saved value(s) with torch's activation offloading "
             f"({names}): the copies, not in saved_activation_bytes."]
    if away:
        words.append(f"The peaks count an offloaded value on the device only until its copy to {', '.join(away)} "
                     "and again from its reload in the backward; storages on " + ", ".join(away) + " are left out.")
    if same:
        words.append(f"A copy to {', '.join(same)}, the device the value was on, stays in the same memory: the "
                     "peaks count it.")
    return [" ".join(words)]


def _index_list(indices: list[int]) -> str:
    """A long index list as runs (a 60-layer GPT's 724 parameter inputs, not 37 lines of numbers).

    >>> _index_list([0, 1, 2, 5, 7, 8, 9, 10, 11, 12, 13, 20, 21, 30])
    '[0-2, 5, 7-13, 20-21, 30] (14 inputs)'
    """
    if len(indices) <= 12:
        return str(indices)
    runs: list[str] = []
    start = prev = indices[0]
    for i in [*indices[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return f"[{', '.join(runs)}] ({len(indices)} inputs)"


def caption(graph: JointGraph, symbolic: bool = False, notes: Sequence[str] = ()) -> str:
    """What the partitioners were given and how the bytes were counted."""
    static = list(graph.static_lifetime_input_indices)
    why = ("the parameter inputs: torch.compile treats them as free to save" if static
           else "none: aot_function / aot_module pass []")
    # "torch.compile (read from the log; ...)": the remark goes after "calls them", so the sentence reads
    caller, _, remark = graph.partitioner_caller.partition(" (")
    how = f" ({remark}" if remark else ""
    parts = [
        f"Joint graph of backend={graph.backend!r}.",
        f"Partitioners called as {caller} calls them{how}: num_fwd_outputs={graph.num_fwd_outputs}, "
        f"static_lifetime_input_indices={_index_list(static)} ({why})"
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
    import pandas as pd
    df = pd.DataFrame(rows, columns=COLUMNS)
    for c in _INT_COLUMNS:
        df[c] = df[c].astype("Int64")
    df["seconds"] = df["seconds"].astype("float64")
    df["error"] = pd.Series([r.get("error") for r in rows], index=df.index, dtype="object")  # None when fine
    return df


def memory_table(graph: JointGraph, get_partition: Callable[[Strategy], Partition],
                 strategies: Iterable[Any], gaps: bool | None = None,
                 measured: Measured | None = None, step: dict[str, str] | None = None) -> pd.DataFrame:
    """One row per strategy of ``strategies`` (the caller's choice: ``Trace.offered`` by default).
    ``get_partition(strategy)`` partitions ``graph`` (``analysis.cache.GraphCache.partition``).
    A strategy that fails on this graph gives a row with ``error`` set; a malformed strategy
    raises ``StrategyError``.  ``df.attrs["caption"]`` says how the partitioners were called.

    ``gaps``: fill ``gap_to_optimal_flops`` (extra recompute FLOPs over the exact optimum at the
    row's saved activation bytes) and ``gap_to_optimal_bytes`` (extra saved bytes over the optimum
    at the row's recompute FLOPs), two MILP solves per row; default: when an ``optimal`` strategy
    is among ``strategies`` (the default table stays fast).  ``measured``: ``Trace.measure()``'s
    result, added as its twin columns (``add_measured``).  ``step``: the strategy the user's own
    step runs, by name, and what it is (``choices.step_names``), said first in the caption."""
    chosen = parse_list(list(strategies)) or []
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
    lead = "".join(f"{s.name} is {(step or {})[s.name]}: fxviz's default. " for s in chosen if s.name in (step or {}))
    df.attrs["caption"] = lead + caption(graph, has_symbolic_sizes(graph.gm), notes)
    return df if measured is None else add_measured(df, measured)


_Frame = TypeVar("_Frame", bound="pd.DataFrame")


def add_measured(table: _Frame, measured: Measured) -> _Frame:
    """``table`` with the measured twin (``MEASURED_TABLE_COLUMNS``) on the row of the strategy the
    real step used (``measured.strategy``), empty on the others.  A step of several graphs is
    measured whole: its twin belongs beside ``memory_table_by_piece``'s total row, not one graph's."""
    import pandas as pd

    out = table.copy()
    out.attrs = dict(table.attrs)
    row = (out["strategy"] == measured.strategy) & out["error"].isna()
    whole = "piece" in out.columns
    if whole:
        row &= out["piece"] == "total"
    elif measured.graphs > 1:
        row &= False
    out["measured_saved_bytes"] = pd.array([measured.saved_bytes if r else None for r in row], dtype="Int64")
    diff = [measured.saved_bytes - int(b) if r and not pd.isna(b) else None
            for r, b in zip(row, out["saved_activation_bytes"])]
    out["measured_difference_bytes"] = pd.array(diff, dtype="Int64")
    reason = measured.reason() or "none: the step keeps what the partition saves"
    out["measured_reason"] = pd.Series([reason if r else None for r in row], index=out.index, dtype="object")
    where = "its row" if bool(row.any()) else "no row here (measured over the whole step: see the total row)"
    out.attrs["caption"] = (str(out.attrs.get("caption", "")) + f" measured_*: the real torch.compile(backend="
                            f"{measured.backend!r}) step, caught with saved-tensor hooks (Trace.measure()), beside "
                            f"the {measured.strategy} partition it used: {where}.").strip()
    return out
