"""Live memory after each node of a partition's forward and backward graphs.

*Saved* bytes are what the forward hands to the backward; the *peak* is the most memory held at
any moment, and a partition that saves less does not always peak lower (the backward may build
the same large temporaries either way).  The timeline shows where each peak happens.  It is the
memory table's own liveness walk (``memory.live_bytes``, which ``memory.peak_bytes`` takes the
maximum of) kept per node, so its highest point plus the resident bytes *is* the table's
``forward_peak_bytes`` / ``backward_peak_bytes``.

What it counts: one storage per FX node of the *unfused* graph the partitioner returns, from the
node that makes it to its last use.  A graph's inputs (the backward's saved values and tangents) are
all handed in before its first op runs, so every ``placeholder`` row shows them all (the liveness
walk adds them one row at a time, which drew a ramp the real backward never builds).  A fusing
backend (inductor) never materializes fused pointwise intermediates and reuses buffers, so a real
step peaks lower than these curves; they compare partitions of the same graph.  A value torch's
activation offloading copied to the host counts while it is on the device: from the op that makes
it to its copy, and from its reload in the backward (the copy on the host is not device memory).
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd
import torch.fx as fx

from fxviz.analysis.memory.storage import elsewhere, live_bytes, storage_owners
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import Storages
from fxviz.sources.graphs import JointGraph

__all__ = ["TIMELINE_COLUMNS", "memory_timeline", "timeline_peaks"]

TIMELINE_COLUMNS: list[str] = ["strategy", "phase", "step", "node", "joint_node", "op", "module", "live_bytes",
                               "resident_bytes", "total_bytes"]


def _op(node: fx.Node) -> str:
    if node.op != "call_function":
        return node.op
    packet = getattr(node.target, "overloadpacket", None)
    return str(getattr(packet, "__name__", None) or getattr(node.target, "__name__", node.target))


def _inputs_held_from_the_start(gm: fx.GraphModule, curve: list[int]) -> list[int]:
    """The curve with every leading ``placeholder`` row at the bytes of the last one: all inputs
    the graph still needs, which the caller holds before the first op runs (a value on the curve,
    so the peak is unchanged)."""
    leading = 0
    for node in gm.graph.nodes:
        if node.op != "placeholder":
            break
        leading += 1
    if leading == 0:
        return curve
    return [curve[leading - 1]] * leading + curve[leading:]


def _rows(graph: JointGraph, p: Partition) -> list[dict[str, object]]:
    assert p.forward is not None and p.backward is not None
    storages = Storages(graph.gm, p.forward, p.backward)  # as memory.memory_row builds them
    resident = {k: storages.nbytes(k) for k in storage_owners(graph, storages)}
    held = sum(resident.values())
    away = elsewhere(p, storages)  # offloaded copies on the host: not the device's memory
    rows: list[dict[str, object]] = []
    for phase, gm, to_joint, throughout in (("forward", p.forward, p.fw_to_joint, True),
                                            ("backward", p.backward, p.bw_to_joint, False)):
        curve = _inputs_held_from_the_start(gm, live_bytes(gm, storages, resident, inputs_live_throughout=throughout,
                                                                away=away))
        for step, (node, live) in enumerate(zip(gm.graph.nodes, curve)):
            joint = to_joint.get(node.name)
            info = graph.info.get(joint) if joint is not None else None
            rows.append({"strategy": p.name, "phase": phase, "step": step, "node": node.name, "joint_node": joint,
                         "op": _op(node), "module": info.module if info is not None else None,
                         "live_bytes": live, "resident_bytes": held, "total_bytes": live + held})
    return rows


def memory_timeline(graph: JointGraph, partitions: Iterable[Partition]) -> pd.DataFrame:
    """One row per node of each partition's forward then backward graph: ``live_bytes`` (storages
    the graph made or was handed that are still needed while the node runs), ``total_bytes`` (plus
    the parameters and inputs resident throughout).  Partitions without graphs (the measured
    ``eager`` reference, a failed strategy) have no timeline: ``df.attrs["skipped"]`` names them."""
    rows: list[dict[str, object]] = []
    skipped: list[str] = []
    for p in partitions:
        if p.error is not None or p.forward is None or p.backward is None or p.reference:
            skipped.append(p.name)
            continue
        rows += _rows(graph, p)
    df = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    for c in ("step", "live_bytes", "resident_bytes", "total_bytes"):
        df[c] = df[c].astype("int64")
    df.attrs["skipped"] = skipped
    return df


def timeline_peaks(df: pd.DataFrame) -> pd.DataFrame:
    """The highest point of each (strategy, phase) curve: its step, node, op, module and bytes
    (the first node to reach it, when several do)."""
    if df.empty:
        return df.iloc[0:0]
    idx = df.groupby(["strategy", "phase"], sort=False)["total_bytes"].idxmax()
    return df.loc[idx.to_numpy()].reset_index(drop=True)
