"""FSDP2's all-gathered parameters in what a graph saves (issue 33, a logged FSDP2 run).

When a block is compiled and then sharded (torchtitan's recipe: ``block.compile()``, then
``fully_shard(block)``), FSDP2's hooks run eagerly around the graph and hand it the unsharded
parameters as inputs; the backward reads the weights its matmuls need, so the graph saves them.
They are not "held anyway" as a model's parameters are: FSDP2 owns their storage.  Under
``reshard_after_forward=True`` (``fully_shard``'s default) it frees that storage after the forward,
whatever the graph saved, and all-gathers again before the backward; under ``False`` it keeps it to
the backward.  The log records which modules are FSDP2's (dynamo's guards), not which setting ran,
so the finding gives both costs, per rank, beside the saved activations.
"""

from __future__ import annotations

from collections.abc import Sequence

from fxviz.analysis.doctor.findings import Finding
from fxviz.analysis.memory.storage import saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import alias_base
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.log.guards import ALLGATHERED

__all__ = ["allgathered_findings", "allgathered_bytes"]


def allgathered_bytes(graph: JointGraph, part: Partition) -> tuple[dict[str, int], int]:
    """(all-gathered parameter qualname -> bytes of its storage the partition saves, activation bytes)."""
    nodes = {n.name: n for n in graph.gm.graph.nodes}
    gathered: dict[str, int] = {}
    activations = 0
    for use in saved_memory(part, graph).storages:
        if use.owner == "activation":
            activations += use.nbytes
            continue
        for name in use.names:
            node = nodes.get(name)
            if node is None:
                continue
            info = graph.info.get((alias_base(node) or node).name)
            if info is not None and info.note and info.note.startswith(ALLGATHERED):
                gathered[info.qualname or info.name] = use.nbytes
                break
    return gathered, activations


def allgathered_findings(cap: Capture, parts: Sequence[Partition | None]) -> list[Finding]:
    """One finding per graph whose partition saves FSDP2's all-gathered parameters."""
    out: list[Finding] = []
    for i, (graph, part) in enumerate(zip(cap.graphs, parts)):
        if part is None or part.forward is None:
            continue
        gathered, activations = allgathered_bytes(graph, part)
        if not gathered:
            continue
        total = sum(gathered.values())
        notes = {i_.note for i_ in graph.info.values() if i_.note and i_.note.startswith(ALLGATHERED)}
        who = sorted(notes)[0].split(";")[0] if notes else ALLGATHERED
        names = ", ".join(f"{q} {format_bytes(b)}" for q, b in sorted(gathered.items(), key=lambda kv: -kv[1]))
        message = (f"the backward reads {len(gathered)} parameters {who} ({names}): {format_bytes(total)} per rank "
                   f"of the saved set is all-gathered parameters, {format_bytes(activations)} activations. Under "
                   "reshard_after_forward=True (fully_shard's default) FSDP2 frees them after the forward whatever "
                   "the graph saved, and all-gathers them again for the backward: a second all-gather, no memory "
                   f"between; under False they are held from forward to backward: {format_bytes(total)} per rank "
                   "on top of the activations. The log does not record which setting ran.")
        nodes = tuple(n for n, inf in graph.info.items() if inf.note and inf.note.startswith(ALLGATHERED)
                      and inf.qualname in gathered)
        out.append(Finding("allgathered", "info", None, nodes, message,
                           "memory for communication: fully_shard(block, reshard_after_forward=False) keeps them "
                           "(no second all-gather), True frees them; see the saved table's parameter rows",
                           graph=i if len(cap.graphs) > 1 else None, bytes=total))
    return out
