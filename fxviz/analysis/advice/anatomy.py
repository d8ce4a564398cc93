"""What is in memory at a step's peak: every live storage at the highest point, by kind, and the
biggest of them by module and op.

Where the step runs inductor's code, the peak is its compiled step's (``compiled_step_peak``: every
buffer live at the top of the simulated code, named by the FX node it computes, its module and
shape, a kernel's own scratch as one entry).  Otherwise, and as ``step_peak``, the peak of the
forward and backward graphs' liveness walk:

The walk is ``memory.live_bytes``'s (one storage per FX node of the unfused graph, from the node
that makes it to its last use; a forward holds its inputs throughout, a backward lets each saved
value go once read), kept per storage so the peak can be taken apart; its kinds add up to the
memory table's peak (tests check it against ``memory_timeline``).  Over graph breaks the step runs
the pieces' forwards in order, then their backwards in reverse: a piece's peak also holds the
values earlier pieces saved, the gradients later pieces' backwards made, and the model's other
parameters.
"""

from __future__ import annotations

import dataclasses
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.memory.compiled import Storage
from fxviz.analysis.memory.compiled_step import StepMemory
from fxviz.analysis.memory.inductor_code import CompiledGraph
from fxviz.analysis.memory.program import step_runs
from fxviz.analysis.memory.storage import elsewhere, recompute_cost, saved_memory, storage_owners, storage_spans
from fxviz.analysis.memory.whole import WholeStep
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.graph_facts import Storages, concrete, tensors
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import JointGraph

__all__ = ["KINDS", "LiveTensor", "PiecePeak", "StepPeak", "piece_peak", "step_peak", "compiled_step_peak",
           "whole_step_peak"]

KINDS: tuple[str, ...] = ("saved activations", "temporaries", "gradients", "parameters", "inputs",
                          "model state outside the graph", "optimizer state", "other graph runs' saved activations",
                          "other graph runs' gradients", "code outside the graphs")
"""The kinds a peak's bytes are split into, in the order tables list them.  ``parameters``: the model
state the peak's graph reads (the memory table's resident bytes, with ``inputs``); ``model state outside
the graph``: parameters and buffers it does not read (other pieces', unused buffers), held all the same."""


@dataclass(frozen=True)
class LiveTensor:
    """One storage live at a peak: its bytes, kind, and the node that made it."""

    nbytes: int
    kind: str
    node: str
    op: str
    module: str | None
    shape: tuple[int, ...] | None

    @property
    def label(self) -> str:
        """``'lm_head' gradient [16, 128]``: module, kind and shape as a person reads them."""
        where = f"'{self.module}' " if self.module else ""
        what = {"gradients": "gradient", "saved activations": "saved " + self.op, "temporaries": self.op,
                "parameters": "parameter", "inputs": "input"}.get(self.kind, self.kind)
        shape = "" if self.shape is None else " [" + ", ".join(str(s) for s in self.shape) + "]"
        return f"{where}{what}{shape}"


@dataclass
class PiecePeak:
    """The peak of one piece's forward and backward graphs under one partition."""

    piece: int
    phase: str  # forward | backward
    step: int
    node: str
    peak_bytes: int
    saved_bytes: int  # the piece's saved activation bytes (storages counted once)
    gradient_bytes: int  # the piece's backward outputs
    param_bytes: int
    recompute_flops: int
    recompute_bytes: int
    live: list[LiveTensor] = field(default_factory=list)  # at the peak, biggest first


def _kind(phase: str, node: fx.Node, key: int, saved: set[int], grads: set[int]) -> str:
    if key in grads:
        return "gradients"
    if key in saved and (phase == "forward" or node.op == "placeholder"):
        return "saved activations"
    return "temporaries"


def piece_peak(graph: JointGraph, p: Partition) -> list[PiecePeak]:
    """The forward's and the backward's peak of ``p``, each taken apart (biggest storage first)."""
    assert p.forward is not None and p.backward is not None
    storages = Storages(graph.gm, p.forward, p.backward)
    owners = storage_owners(graph, storages)
    resident = {k: storages.nbytes(k) for k in owners}
    saved_mem = saved_memory(p, graph, storages)
    saved = {s.key for s in saved_mem.storages if s.owner == "activation"}
    out_node = next(n for n in p.backward.graph.nodes if n.op == "output")
    grads = {storages.key(t) for a in out_node.all_input_nodes for t in tensors(_torch.meta_val(a))} - set(resident)
    flops, traffic = recompute_cost(p)
    peaks = []
    for phase, gm, to_joint in (("forward", p.forward, p.fw_to_joint), ("backward", p.backward, p.bw_to_joint)):
        span, maker = storage_spans(gm, storages, set(resident) | elsewhere(p, storages),  # host copies: not here
                                    inputs_live_throughout=phase == "forward")
        nodes = list(gm.graph.nodes)
        delta = [0] * (len(nodes) + 2)
        for k, (a, b) in span.items():
            delta[a] += storages.nbytes(k)
            delta[b + 1] -= storages.nbytes(k)
        live, best, at = 0, -1, 0
        for i in range(len(nodes)):
            live += delta[i]
            if live > best:
                best, at = live, i
        tensors_at = []
        for k, (a, b) in span.items():
            if a <= at <= b:
                n = maker[k]
                info = graph.info.get(to_joint.get(n.name, ""))
                op = info.short_op if info is not None and n.op == "placeholder" else _op(n)
                tensors_at.append(LiveTensor(storages.nbytes(k), _kind(phase, n, k, saved, grads), n.name,
                                             op, info.module if info else None, _shape(n)))
        for k, nbytes in resident.items():
            tensors_at.append(LiveTensor(nbytes, "parameters" if owners[k] == "parameter" else "inputs", "", "",
                                         None, None))
        tensors_at.sort(key=lambda t: -t.nbytes)
        peaks.append(PiecePeak(graph.index, phase, at, nodes[at].name, max(best, 0) + sum(resident.values()),
                               saved_mem.activation_bytes, sum(storages.nbytes(k) for k in grads),
                               sum(v for k, v in resident.items() if owners[k] == "parameter"), flops, traffic,
                               tensors_at))
    return peaks


def _op(n: fx.Node) -> str:
    if n.op != "call_function":
        return n.op
    packet = getattr(n.target, "overloadpacket", None)
    return str(getattr(packet, "__name__", None) or getattr(n.target, "__name__", n.target))


def _shape(n: fx.Node) -> tuple[int, ...] | None:
    val = _torch.meta_val(n)
    shape = getattr(val, "shape", None)
    try:  # a dynamic-shape graph's sizes are SymInts: read at the sizes the graph was traced with
        return None if shape is None else tuple(concrete(s) for s in shape)
    except (TypeError, ValueError):  # a symbolic size with no hint
        return None


@dataclass
class StepPeak:
    """The step's peak: the highest of its pieces' peaks, with what other pieces hold then."""

    peak_bytes: int
    at: PiecePeak
    by_kind: dict[str, int]
    pieces: list[PiecePeak]  # each piece's forward peak, then each backward's in reverse: run order
    saved_bytes: int
    recompute_flops: int
    recompute_bytes: int

    @property
    def biggest(self) -> list[LiveTensor]:
        """The five biggest tensors live at the peak."""
        return [t for t in self.at.live if t.kind not in ("parameters", "inputs")][:5]

    def text(self, lead: str = "") -> str:
        """The head line (after ``lead``, e.g. "the plain step's "), wrapped at 100 columns, then the
        biggest tensors live at the peak."""
        kinds = ", ".join(f"{k} {format_bytes(v) or '0 B'}" for k, v in self.by_kind.items() if v)
        head = f"{lead}peak {format_bytes(self.peak_bytes)} in the {self.at.phase} of graph {self.at.piece + 1} " \
               f"at {self.at.node}: {kinds}"
        lines = textwrap.wrap(head, 100, subsequent_indent="  ")
        return "\n".join(lines + [f"  {format_bytes(t.nbytes):>10}  {t.label}"[:100] for t in self.biggest])

    def to_json(self) -> dict[str, Any]:
        """Every figure as JSON keeps it (:meth:`from_json` makes an equal ``StepPeak`` back): what the log
        cache keeps of an advised step (``api.advice.kept``)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepPeak:
        """The ``StepPeak`` :meth:`to_json` wrote."""
        def piece(d: dict[str, Any]) -> PiecePeak:
            live = [LiveTensor(**{**t, "shape": None if t["shape"] is None else tuple(t["shape"])}) for t in d["live"]]
            return PiecePeak(**{**d, "live": live})

        return cls(int(data["peak_bytes"]), piece(data["at"]), {k: int(v) for k, v in data["by_kind"].items()},
                   [piece(p) for p in data["pieces"]], int(data["saved_bytes"]), int(data["recompute_flops"]),
                   int(data["recompute_bytes"]))


def step_peak(pieces: Sequence[tuple[JointGraph, Partition, int]], model_param_bytes: int,
              optimizer_bytes: int = 0) -> StepPeak:
    """The step's peak over ``pieces`` (graph, partition, runs), in run order: forwards, then
    backwards in reverse.  ``model_param_bytes``: the model's parameters and buffers (a piece's own
    are in its peak, the rest are added); ``optimizer_bytes``: state held through the whole step."""
    per = [piece_peak(g, p) for g, p, _ in pieces]
    runs = [r for _, _, r in pieces]
    saved = [pp[0].saved_bytes * r for pp, r in zip(per, runs)]
    grads = [pp[1].gradient_bytes for pp in per]
    best: tuple[int, PiecePeak, dict[str, int]] | None = None
    for i, (fw, bw) in enumerate(per):
        for pk in (fw, bw):
            kinds = dict.fromkeys(KINDS, 0)
            for t in pk.live:
                kinds[t.kind] += t.nbytes
            kinds["model state outside the graph"] = max(0, model_param_bytes - pk.param_bytes)
            kinds["optimizer state"] = optimizer_bytes
            # a graph dynamo reused (one per layer) peaks at its last forward run and its first backward
            # run: its other runs' saved activations are all held then, as are the earlier graphs'
            own = (runs[i] - 1) * fw.saved_bytes
            kinds["other graph runs' saved activations"] = sum(saved[:i]) + own
            later = sum(g * r for g, r in zip(grads[i + 1:], runs[i + 1:]))  # their backwards ran already
            kinds["other graph runs' gradients"] = later if pk.phase == "backward" else 0
            total = sum(kinds.values())
            if best is None or total > best[0]:
                best = (total, pk, kinds)
    assert best is not None
    in_run_order = [pp[0] for pp in per] + [pp[1] for pp in reversed(per)]
    return StepPeak(best[0], best[1], best[2], in_run_order, sum(saved),
                    sum(pp[0].recompute_flops * r for pp, r in zip(per, runs)),
                    sum(pp[0].recompute_bytes * r for pp, r in zip(per, runs)))


def _origin(parts: Sequence[tuple[JointGraph, Partition, CompiledGraph]], graph_of_run: Sequence[int],
            store: Storage) -> tuple[str, str, str | None, tuple[int, ...] | None]:
    """(node, op, module, shape) of what a storage holds: the FX node its buffer computes (primary origin)."""
    if store.run < 0 or store.made in ("eager", "tangent", "zeros", "grad sum"):
        return store.name, store.made, None, None
    graph, p, compiled = parts[graph_of_run[store.run]]
    forward = store.phase == "forward"
    gm = p.forward if forward else p.backward
    to_joint = p.fw_to_joint if forward else p.bw_to_joint
    nodes = {n.name: n for n in gm.graph.nodes} if gm is not None else {}
    names = compiled.origins[0 if forward else 1].get(store.name, ()) or (store.name,)
    name = next((n for n in names if n in nodes), names[0])
    node = nodes.get(name)
    info = graph.info.get(to_joint.get(name, name))
    op = (info.short_op if info is not None and node is not None and node.op == "placeholder"
          else _op(node) if node is not None else store.name)
    return to_joint.get(name, name), op, info.module if info is not None else None, \
        _shape(node) if node is not None else None


def _compiled_kind(store: Storage, at_run: int, phase: str, saved: set[int], kept: frozenset[int]) -> str:
    if store.made == "eager":
        return "code outside the graphs"
    if store.sid in kept:
        return "gradients" if store.run == at_run else "other graph runs' gradients"
    if store.phase == "forward" and (store.sid in saved or store.run != at_run or phase == "backward"):
        return "saved activations" if store.run == at_run else "other graph runs' saved activations"
    return "temporaries"


def compiled_step_peak(step: StepMemory, graph_of_run: Sequence[int],
                       parts: Sequence[tuple[JointGraph, Partition, CompiledGraph]], resident: int,
                       model_param_bytes: int, optimizer_bytes: int = 0) -> StepPeak:
    """The step's peak from its compiled code (``analysis.memory.compiled_step``): the higher phase's
    top, every storage live then named by the FX node its buffer computes, with its module.
    ``graph_of_run``: each run's graph (index into ``parts``); ``resident``: the parameters, buffers
    and inputs the caller holds (``model_param_bytes`` of them the model's)."""
    fw, bw = step.forward_peak, step.backward_peak
    peak, phase = (bw, "backward") if bw.nbytes > fw.nbytes else (fw, "forward")
    saved = {sid for r, outs in step.outputs.items()
             for sid in outs[parts[graph_of_run[r]][0].num_fwd_outputs:] if sid is not None}
    live = []
    for sid in peak.live:
        store = step.pool.storages[sid]
        node, op, module, shape = _origin(parts, graph_of_run, store)
        live.append(LiveTensor(store.nbytes, _compiled_kind(store, peak.run, phase, saved, step.gradients), node, op,
                               module, shape))
    if peak.transient:
        live.append(LiveTensor(peak.transient, "temporaries", "(inside the kernel)", "scratch", None, None))
    live.sort(key=lambda t: -t.nbytes)
    kinds = dict.fromkeys(KINDS, 0)
    for t in live:
        kinds[t.kind] += t.nbytes
    kinds["parameters"] = model_param_bytes
    kinds["inputs"] = max(0, resident - model_param_bytes)
    kinds["optimizer state"] = optimizer_bytes
    piece = graph_of_run[peak.run] if peak.run >= 0 else 0
    flops = traffic = 0
    for r in graph_of_run:
        more_flops, more_bytes = recompute_cost(parts[r][1])
        flops, traffic = flops + more_flops, traffic + more_bytes
    graph, p, _ = parts[piece]
    made = next((e.made for e in step.pool.events if e.run == peak.run and e.index == peak.index
                 and e.phase == phase and e.made is not None), None)
    where = _origin(parts, graph_of_run, step.pool.storages[made])[0] if made is not None else peak.line[:60]
    at = PiecePeak(graph.index, phase, peak.index, where, sum(kinds.values()),
                   saved_memory(p, graph).activation_bytes, sum(step.pool.storages[s].nbytes for s in step.gradients),
                   model_param_bytes, flops, traffic, live)
    total_saved = sum(step.pool.storages[s].nbytes for s in saved)
    return StepPeak(sum(kinds.values()), at, kinds, [at], total_saved, flops, traffic)


def whole_step_peak(whole: WholeStep, s: Strategy, resident: int, model_param_bytes: int,
                    optimizer_bytes: int = 0) -> StepPeak | None:
    """:func:`compiled_step_peak` of the step ``whole`` runs under ``s`` (None where a graph has no
    compiled code): the anatomy of the peak the memory table shows for a step of inductor's code."""
    step = whole.compiled(s)
    if step is None:
        return None
    parts = [(c.graph, c.partition(s), c.compiled(s)) for c in whole.caches]
    runs, _ = step_runs(whole.capture, parts)
    return compiled_step_peak(step, [r.graph for r in runs], parts, resident, model_param_bytes, optimizer_bytes)
