"""The whole training step's figures for the ``total`` row of ``memory_table(scope="step")``: its peaks
and what it holds for its backward, over every graph run in run order.

- Peaks: where the step runs inductor's code, the top of the simulated step (every graph's forward code
  in run order, then the backwards in reverse, on one pool: ``program.whole_step``); where it runs the
  graphs op by op (``aot_eager``), and as every total's ``unfused_*``, the liveness walk composed over the
  runs: a run's forward peaks on top of what earlier runs saved, a run's backward on top of what earlier
  runs saved and the gradients later runs' backwards made.  Bytes plus the step's ``resident_bytes``
  (the model's parameters and buffers and the user's inputs, each storage once).
- Saved activations: every run's, a value that crosses a graph break counted once although the graph
  that made it and the graph that read it may both keep it (it is one storage).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from fxviz import _torch
from fxviz.analysis.memory.compiled_step import StepMemory
from fxviz.analysis.memory.storage import input_positions, saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.fx_facts import output_values
from fxviz.core.graph_facts import Storages, tensors
from fxviz.sources.graphs import Capture, JointGraph

__all__ = ["StepPart", "StepTotals", "step_totals", "gradient_bytes", "step_resident"]


@dataclass(frozen=True)
class StepPart:
    """One graph of the step under one strategy: its partition, its memory-table row, its runs."""

    graph: JointGraph
    partition: Partition
    row: dict[str, Any]
    runs: int


@dataclass(frozen=True)
class StepTotals:
    """The total row's whole-step columns (None: not known, shown empty)."""

    forward_peak_bytes: int | None
    backward_peak_bytes: int | None
    unfused_forward_peak_bytes: int | None
    unfused_backward_peak_bytes: int | None
    resident_bytes: int | None
    saved_activation_bytes: int | None
    layout_copy_bytes: int | None
    eager_held_bytes: int | None = None


def gradient_bytes(graph: JointGraph, p: Partition) -> int:
    """Bytes of the gradients ``p``'s backward returns (each storage once)."""
    if p.backward is None or p.forward is None:
        return 0
    storages = Storages(graph.gm, p.forward, p.backward)
    keys = {storages.key(t) for o in output_values(p.backward) if isinstance(o, torch.fx.Node)
            for t in tensors(_torch.meta_val(o))}
    return sum(storages.nbytes(k) for k in keys)


def _shared_saves(parts: Sequence[StepPart]) -> int:
    """Bytes two runs both count as saved although they hold one storage: a graph's output that the
    next graph saves as its input while the producing graph saves it too (or two readers do)."""
    by_seq = {seq: part for part in parts for seq, _ in part.graph.runs}
    counted: set[tuple[int, int]] = set()
    twice = 0
    for part in parts:
        p, graph = part.partition, part.graph
        if p.forward is None or not graph.run_links:
            continue
        saved = {n for s in saved_memory(p, graph).storages if s.owner == "activation" for n in s.names}
        by_index = {i: name for name, i in input_positions(graph).items()}
        for links in graph.run_links.values():
            for i, source in links.items():
                name = by_index.get(i)
                if name is None or name not in saved:
                    continue
                nbytes = _output_saved_bytes(by_seq.get(source[0]), source[1])
                if source in counted or nbytes:
                    twice += nbytes or _input_bytes(graph, name)
                counted.add(source)
    return twice


def _output_saved_bytes(part: StepPart | None, j: int) -> int:
    """Bytes of user output ``j`` of ``part`` when its own partition saves it too, else 0."""
    if part is None or part.partition.forward is None:
        return 0
    p, graph = part.partition, part.graph
    descs = _torch.output_descs(next(n for n in graph.gm.graph.nodes if n.op == "output"))
    k = next((k for k, d in enumerate(descs[:graph.num_fwd_outputs]) if _torch.describe_output(d).index == j
              and _torch.describe_output(d).kind == "user"), j)
    outs = output_values(p.forward) if p.forward is not None else []
    node = outs[k] if k < len(outs) else None
    if not isinstance(node, torch.fx.Node):
        return 0
    name = p.fw_to_joint.get(node.name, node.name)
    for s in saved_memory(p, graph).storages:
        if s.owner == "activation" and name in s.names:
            return s.nbytes
    return 0


def _input_bytes(graph: JointGraph, name: str) -> int:
    node = next((n for n in graph.gm.graph.nodes if n.name == name), None)
    val = _torch.meta_val(node) if node is not None else None
    return int(val.untyped_storage().nbytes()) if isinstance(val, torch.Tensor) else 0


def _walk(parts: Sequence[StepPart]) -> tuple[int | None, int | None]:
    """The unfused walk over the runs in order: (forward, backward) peaks above the step's start."""
    order = sorted((seq, k) for k, part in enumerate(parts) for seq, _ in part.graph.runs) \
        or [(k, k) for k in range(len(parts))]
    rows = [part.row for part in parts]
    if any(r.get("unfused_forward_peak_bytes") is None for r in rows):
        return None, None
    live_f = [int(r["unfused_forward_peak_bytes"]) - int(r["resident_bytes"]) for r in rows]
    live_b = [int(r["unfused_backward_peak_bytes"]) - int(r["resident_bytes"]) for r in rows]
    saved = [int(r["saved_activation_bytes"]) for r in rows]
    grads = [gradient_bytes(part.graph, part.partition) for part in parts]
    ks = [k for _, k in order]
    forward = max(live_f[k] + sum(saved[j] for j in ks[:i]) for i, k in enumerate(ks))
    backward = max(live_b[k] + sum(saved[j] for j in ks[:i]) + sum(grads[j] for j in ks[i + 1:])
                   for i, k in enumerate(ks))
    return forward, backward


def step_totals(parts: Sequence[StepPart], resident: int, compiled: StepMemory | None, compiles: bool,
                layout_copies: int | None) -> StepTotals:
    """The total row's whole-step columns over ``parts`` (every graph with a backward, under one
    strategy).  ``resident``: the step's parameters, buffers and user inputs; ``compiled``: the
    simulated compiled step (None where it was not asked for or a graph has no code)."""
    if not parts or any(part.row.get("error") for part in parts):
        return StepTotals(None, None, None, None, resident, None, None)
    walk_f, walk_b = _walk(parts)
    if compiles:
        fwd = None if compiled is None else compiled.forward_peak.nbytes + resident
        bwd = None if compiled is None else compiled.backward_peak.nbytes + resident
    else:
        fwd = None if walk_f is None else walk_f + resident
        bwd = None if walk_b is None else walk_b + resident
    saved = sum(int(part.row["saved_activation_bytes"]) * part.runs for part in parts) - _shared_saves(parts)
    return StepTotals(fwd, bwd, None if walk_f is None else walk_f + resident,
                      None if walk_b is None else walk_b + resident, resident, saved,
                      layout_copies if compiles else 0, compiled.outside_held if compiled is not None else None)


def step_resident(capture: Capture, parts: Sequence[StepPart]) -> int:
    """What the caller holds through the step: the model's parameters and buffers and the user's input
    tensors, each storage once; a log (no model): every run's resident bytes."""
    if capture.model is None:
        return sum(int(part.row.get("resident_bytes") or 0) * part.runs for part in parts)
    seen: dict[int, int] = {}
    held = [*capture.model.parameters(), *capture.model.buffers()]
    held += [t for t in _torch.pytree.tree_leaves(capture.example_inputs) if isinstance(t, torch.Tensor)]
    for t in held:
        if t.device.type != "meta":
            seen.setdefault(_torch.storage_key(t), int(t.untyped_storage().nbytes()))
    return sum(seen.values())
