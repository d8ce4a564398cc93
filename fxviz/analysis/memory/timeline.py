"""Live memory after each step of a partition's forward and backward: each line of inductor's code
that allocates or frees, where the step runs inductor's code; each node of the graphs otherwise.

*Saved* bytes are what the forward hands to the backward; the *peak* is the most memory held at
any moment, and a partition that saves less does not always peak lower (the backward may build
the same large temporaries either way).  The timeline shows where each peak happens: its highest
point plus the resident bytes *is* the memory table's ``forward_peak_bytes`` / ``backward_peak_bytes``.

Under inductor (``analysis.memory.program``) a row is a line of the generated code that changed
memory: its ``line``, the buffer's FX node and module (the node the buffer computes, its primary
origin), the bytes live while it ran (an extern kernel's scratch included).  Under ``aot_eager`` (and
``unfused=True``) a row is a node of the *unfused* graph the partitioner returns, one storage per
FX node from the node that makes it to its last use: the memory table's ``unfused_*`` walk
(``memory.live_bytes``).  A graph's inputs (the backward's saved values and tangents) are all handed
in before its first op runs, so every ``placeholder`` row shows them all.  A value torch's activation
offloading copied to the host counts while it is on the device.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

import pandas as pd
import torch.fx as fx

from fxviz.analysis.memory.compiled import Event
from fxviz.analysis.memory.compiled_step import StepMemory
from fxviz.analysis.memory.inductor_code import CompiledGraph
from fxviz.analysis.memory.storage import elsewhere, live_bytes, storage_owners
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import Storages
from fxviz.sources.graphs import JointGraph

__all__ = ["TIMELINE_COLUMNS", "memory_timeline", "compiled_rows", "walk_rows", "named_event", "timeline_peaks"]

TIMELINE_COLUMNS: list[str] = ["strategy", "phase", "step", "piece", "node", "joint_node", "op", "module", "line",
                               "live_bytes", "resident_bytes", "total_bytes"]


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


def walk_rows(graph: JointGraph, p: Partition) -> list[dict[str, object]]:
    """One row per node of ``p``'s forward then backward graph: the unfused walk."""
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
            rows.append({"strategy": p.name, "phase": phase, "step": step, "piece": graph.index, "node": node.name,
                         "joint_node": joint,
                         "op": _op(node), "module": info.module if info is not None else None, "line": None,
                         "live_bytes": live, "resident_bytes": held, "total_bytes": live + held})
    return rows


def _resident(graph: JointGraph, p: Partition) -> int:
    storages = Storages(graph.gm, p.forward, p.backward)
    return sum(storages.nbytes(k) for k in storage_owners(graph, storages))


def _kernel(line: str) -> str:
    """The op a code line runs, as a row names it: ``mm`` (extern), ``cpp_fused_gelu_3``, ``del``."""
    head = line.split("(", 1)[0].split("=")[-1].strip()
    if line.startswith("del "):
        return "del"
    if "empty_strided" in head:
        return "empty_strided"
    return head.rsplit(".", 2)[-2] if head.endswith(".default") else head.rsplit(".", 1)[-1] or line[:30]


_NAMED: weakref.WeakKeyDictionary[fx.GraphModule, tuple[int, dict[str, fx.Node]]] = weakref.WeakKeyDictionary()


def _by_name(gm: fx.GraphModule | None) -> dict[str, fx.Node]:
    """``gm``'s nodes by name, built once per graph (a timeline names thousands of events of one graph:
    building it per event took 2.6 of a 64-layer log's report's 26 s)."""
    if gm is None:
        return {}
    count = len(gm.graph.nodes)
    kept = _NAMED.get(gm)
    if kept is None or kept[0] != count:
        kept = _NAMED[gm] = (count, {n.name: n for n in gm.graph.nodes})
    return kept[1]


def named_event(graph: JointGraph, p: Partition, compiled: CompiledGraph, step: StepMemory, e: Event
                ) -> dict[str, object]:
    """What a code line made, as a timeline row names it: the FX node its buffer computes (primary
    origin), that node in the joint graph, its op (or the line's kernel) and its module."""
    made = step.pool.storages[e.made] if e.made is not None else None
    gm = p.forward if e.phase == "forward" else p.backward
    nodes = _by_name(gm)
    to_joint = p.fw_to_joint if e.phase == "forward" else p.bw_to_joint
    names = compiled.origins[0 if e.phase == "forward" else 1].get(made.name, ()) if made is not None else ()
    node = next((n for n in names if n in nodes), names[0] if names else None)
    joint = to_joint.get(node, node) if node is not None else None
    info = graph.info.get(joint) if joint is not None else None
    fx_node = nodes.get(node) if node is not None else None
    return {"node": node, "joint_node": joint if info is not None else None,
            "op": _op(fx_node) if fx_node is not None else _kernel(e.line),
            "module": info.module if info is not None else None}


def compiled_rows(graph: JointGraph, p: Partition, compiled: CompiledGraph, step: StepMemory
                  ) -> list[dict[str, object]]:
    """One row per line of ``p``'s compiled code that changed memory (or held more inside a kernel)."""
    held = _resident(graph, p)
    rows: list[dict[str, object]] = []
    counter = {"forward": 0, "backward": 0}
    for e in step.pool.events:
        rows.append({"strategy": p.name, "phase": e.phase, "step": counter[e.phase], "piece": graph.index,
                     **named_event(graph, p, compiled, step, e), "line": e.line, "live_bytes": e.high,
                     "resident_bytes": held, "total_bytes": e.high + held})
        counter[e.phase] += 1
    return rows


def memory_timeline(graph: JointGraph, partitions: Iterable[Partition],
                    compiled: Callable[[Partition], tuple[CompiledGraph, StepMemory | None] | None] | None = None
                    ) -> pd.DataFrame:
    """One row per step of each partition's forward then backward: ``live_bytes`` (what the step holds
    beyond the parameters and inputs while it runs), ``total_bytes`` (plus those, resident throughout).
    ``compiled(p)``: ``p``'s compiled code and its simulated step where the step runs inductor's code
    (rows per code line), None for the unfused walk (rows per node).  Partitions without graphs (the
    measured ``eager`` reference, a failed strategy) or without code have no timeline:
    ``df.attrs["skipped"]`` names them."""
    rows: list[dict[str, object]] = []
    skipped: list[str] = []
    for p in partitions:
        if p.error is not None or p.forward is None or p.backward is None or p.reference:
            skipped.append(p.name)
            continue
        code = compiled(p) if compiled is not None else None
        if code is None:
            rows += walk_rows(graph, p)
        elif code[1] is None:
            skipped.append(p.name)
        else:
            rows += compiled_rows(graph, p, code[0], code[1])
    df = pd.DataFrame(rows, columns=TIMELINE_COLUMNS)
    for c in ("step", "live_bytes", "resident_bytes", "total_bytes"):
        df[c] = df[c].astype("int64")
    df["piece"] = pd.array(df["piece"].tolist(), dtype="Int64")
    df.attrs["skipped"] = skipped
    df.attrs["program"] = "inductor's code, line by line" if compiled is not None else "the graphs, node by node"
    return df


def timeline_peaks(df: pd.DataFrame) -> pd.DataFrame:
    """The highest point of each (strategy, phase) curve: its step, node, op, module and bytes
    (the first node to reach it, when several do)."""
    if df.empty:
        return df.iloc[0:0]
    idx = df.groupby(["strategy", "phase"], sort=False)["total_bytes"].idxmax()
    return df.loc[idx.to_numpy()].reset_index(drop=True)
