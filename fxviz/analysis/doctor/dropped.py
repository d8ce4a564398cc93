"""Gradients computed but thrown away: a backward op differentiates a parameter and its result
never reaches a gradient output (ignored by the graph, or lost by a partitioner)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.analysis.doctor.findings import FIX_LIFT, Finding, Param
from fxviz.analysis.doctor.gradient_paths import resolve_state
from fxviz.analysis.real.gradients import gradient_outputs
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.fx_facts import output_values
from fxviz.sources.graphs import Capture, JointGraph
from fxviz.sources.roles import short_op


# --- gradients computed but thrown away -----------------------------------------------------------
def _state_name(graph: JointGraph, node: str) -> str:
    info = graph.info[node]
    return info.qualname or node


def _tensor_args(node: fx.Node) -> list[fx.Node]:

    return [a for a in pytree.tree_leaves((node.args, node.kwargs))
            if isinstance(a, fx.Node) and isinstance(_torch.meta_val(a), torch.Tensor)]


def _forward_by_seq(graph: JointGraph) -> dict[int, list[fx.Node]]:
    """The forward ops of ``graph`` by ``seq_nr``, in graph order: built once per graph (a scan of
    the whole graph per backward op was quadratic: 70 of a 15,000-node report's 250 s, issue 36)."""
    out: dict[int, list[fx.Node]] = {}
    for n in graph.gm.graph.nodes:
        if n.op == "call_function" and graph.info[n.name].phase == "forward":
            seq = _torch.seq_nr(n)
            if seq is not None:
                out.setdefault(seq, []).append(n)
    return out


def _differentiated_input(graph: JointGraph, node: fx.Node, index: int | None,
                          by_seq: dict[int, list[fx.Node]]) -> str | None:
    """The parameter/constant whose gradient ``node`` (element ``index``) computes: element i of
    a multi-output backward op is the gradient of the i-th tensor input of the forward op with the
    same ``seq_nr`` (``by_seq``: :func:`_forward_by_seq` of ``graph``); the shapes must agree."""
    value = _torch.meta_val(node)
    if index is not None:
        value = value[index] if isinstance(value, (tuple, list)) and index < len(value) else None
    if not isinstance(value, torch.Tensor):
        return None
    seq = _torch.seq_nr(node)
    fwd = by_seq.get(seq, []) if seq is not None else []
    for f in fwd:
        args = _tensor_args(f)
        picks = [args[index]] if index is not None and index < len(args) else ([] if index is not None else args)
        for a in picks:
            av = _torch.meta_val(a)
            if isinstance(av, torch.Tensor) and tuple(av.shape) == tuple(value.shape):
                state = resolve_state(graph, a)
                if state is not None:
                    return state
    return None


def dropped_gradients(cap: Capture, parts: Sequence[Partition | None], params: dict[str, Param]) -> list[Finding]:
    findings = []
    for graph, part in zip(cap.graphs, parts):
        if not graph.has_backward:
            continue
        removed = set(part.removed) if part is not None and part.ok else set()
        by_seq: dict[int, list[fx.Node]] | None = None
        for n in graph.gm.graph.nodes:
            if n.op != "call_function" or graph.info[n.name].phase != "backward":
                continue
            value = _torch.meta_val(n)
            candidates: list[tuple[int | None, str]] = []
            if isinstance(value, (tuple, list)):
                used = {u.args[1] for u in n.users if short_op(u) == "getitem"}
                candidates = [(i, f"element {i} of {n.name}") for i, v in enumerate(value)
                              if isinstance(v, torch.Tensor) and i not in used]
            elif n.name in removed:
                candidates = [(None, n.name)]
            for index, label in candidates:
                by_seq = _forward_by_seq(graph) if by_seq is None else by_seq
                state = _differentiated_input(graph, n, index, by_seq)
                if state is None:
                    continue
                findings.append(_dropped_finding(cap, graph, n, state, label, n.name in removed, params, part))
        if part is not None and part.ok:
            findings += _lost_by_partitioner(graph, part)
    return findings


def _dropped_finding(cap: Capture, graph: JointGraph, node: fx.Node, state: str, label: str, removed: bool,
                     params: dict[str, Param], part: Partition | None) -> Finding:
    name = _state_name(graph, state)
    p = params.get(name)
    role = graph.info[state].role
    why = {"constant": "it is a constant (captured, not an input), so nothing can return its gradient",
           "buffer": "it is a buffer, which gets no gradient"}.get(role, "")
    if p is not None and not p.tensor.requires_grad:
        why = "it is frozen (requires_grad=False)"
    strategy = part.name if part is not None else Strategy("default").name
    fate = (f"the '{strategy}' partitioner removes it as dead code" if removed else
            f"{node.name} still runs in the backward graph (its other results are needed), so the "
            "gradient is computed at run time and thrown away")
    msg = (f"The joint graph computes a gradient for {name} ({label}) that nothing returns"
           + (f": {why}" if why else "") + f"; {fate}.")
    severity = "warning" if role == "constant" or (p is not None and p.tensor.requires_grad) else "info"
    fix = FIX_LIFT if role == "constant" else (
        "nothing to fix if the parameter is meant to be frozen; the fused kernel always computes all its gradients")
    return Finding("gradient_dropped", severity, name if p is not None else None, (node.name, state), msg, fix,
                   cause="removed" if removed else "discarded", graph=graph.index)


def _lost_by_partitioner(graph: JointGraph, part: Partition) -> list[Finding]:
    """Gradient outputs of the joint graph that the partition's backward graph does not return.
    The backward graph returns the joint graph's gradient outputs in the same slots (torch's
    partitioners keep their order), so a slot is checked, not a node name: a run's backward may
    return a node its compiler rewrote (inductor's joint passes rename ``permute_71``)."""
    if part.backward is None:
        return []
    bw_outs = output_values(part.backward)
    if len(bw_outs) != len(output_values(graph.gm)) - graph.num_fwd_outputs:
        return []  # not a partition of this joint graph's outputs: no slot to compare
    args = output_values(graph.gm)
    res = []
    for j, qual, role in gradient_outputs(graph):
        node = args[j].name if isinstance(args[j], fx.Node) else None
        if node is None or isinstance(bw_outs[j - graph.num_fwd_outputs], fx.Node) or role != "parameter":
            continue
        res.append(Finding(
            "gradient_dropped", "error", qual, (node,),
            f"The joint graph returns the gradient of {qual} ({node}) but the backward graph of the "
            f"'{part.name}' partition does not: the partitioner dropped it.",
            "use a partitioner that keeps every gradient output (torch's default_partition does)",
            cause="partitioner", graph=graph.index))
    return res
