"""Exact memory facts of a ``Partition``: saved bytes by storage, peaks, the cost of recomputing.

torch's own estimate (``_size_of``: ``numel * itemsize`` per node) is blind to aliasing: a saved
``detach`` of a saved ``sigmoid`` counts twice, a transposed weight counts as a new activation.
Here every byte is attributed to a *storage*, identified through the fake tensors torch recorded
on each node (they keep the traced program's aliasing), so views and aliases count once and a
saved view of a parameter or input is reported as such, not as an activation.  Symbolic sizes are
evaluated at the example inputs' sizes (the caption says so when it happened).
"""

from __future__ import annotations

from collections.abc import Container
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import (
    Storages,
    node_flops,
    node_traffic,
    saved_values,
    tensors,
)
from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import STATE_ROLES

__all__ = [
    "Storages", "StorageUse", "SavedMemory", "has_symbolic_sizes", "storage_spans", "storage_owners", "Offload",
    "input_positions", "crossing_inputs",
    "offloads", "elsewhere", "saved_memory", "peak_bytes", "live_bytes", "recompute_cost",
]




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
    crossing = crossing_inputs(graph)
    for n in graph.gm.graph.nodes:
        if n.op not in ("placeholder", "get_attr"):
            continue
        info = graph.info.get(n.name)
        role = info.role if info is not None else ("constant" if n.op == "get_attr" else None)
        if role in STATE_ROLES:  # storages the model or the caller own: never activations
            owner = "parameter"
        elif role == "primal" and n.name not in crossing:  # a value the step made is an activation
            owner = "input"
        else:
            continue
        for t in tensors(_torch.meta_val(n)):
            owners.setdefault(storages.key(t), owner)
    return owners


def input_positions(graph: JointGraph) -> dict[str, int]:
    """Each non-tangent placeholder of the joint graph -> the index of the graph input it receives
    (``PlainAOTInput(idx)``; in placeholder order where torch records no descriptor)."""
    out: dict[str, int] = {}
    k = 0
    for n in graph.gm.graph.nodes:
        if n.op != "placeholder":
            continue
        desc = _torch.node_desc(n)
        kind = _torch.describe_input(desc) if desc is not None else None
        info = graph.info.get(n.name)
        if kind is not None and kind.kind == "plain" and kind.index is not None:
            out[n.name] = kind.index
        elif kind is None and (info is None or info.role != "tangent"):
            out[n.name] = k
        k += 1
    return out


def crossing_inputs(graph: JointGraph) -> set[str]:
    """Placeholders whose tensors the step itself made before this graph ran: another graph's output
    or what eager code at a graph break computed (``JointGraph.crossing``).  The step holds them as
    activations; they are not inputs the caller holds anyway."""
    if not graph.crossing:
        return set()
    return {name for name, i in input_positions(graph).items() if i in graph.crossing}


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


