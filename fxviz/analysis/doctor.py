"""The missing-gradient doctor: which parameters get no gradient, where the path is cut, and how
to fix it, in words a user understands.

``diagnose`` reads the captured joint graph(s) (every piece of a trace with graph breaks), their
partitions, and, only for parameters the graphs cannot explain, one eager probe run of the model
(``gradient_paths.eager_paths``).  It returns plain data: a list of ``Finding`` and a
per-parameter table.  Rendering lives in ``fxviz.render.doctor_view``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

import pandas as pd
import torch
import torch.fx as fx

from .. import _torch
from .._fx import output_values
from ..capture import Capture, JointGraph, graph_name
from ..graph_facts import storage_key
from ..roles import short_op
from ..units import format_bytes
from .gradient_paths import (
    Cut,
    EagerPath,
    eager_paths,
    graph_paths,
    is_view_of,
    resolve_state,
    tangent_dependent,
)
from .gradients import gradient_outputs
from .partition import Partition
from .pieces import PieceFacts, PieceRun, modules_of, piece_facts

__all__ = ["Finding", "Diagnosis", "diagnose", "KINDS", "SEVERITIES", "TABLE_COLUMNS"]

KINDS = ("captured_as_constant", "no_path", "unused", "gradient_dropped", "outside_graphs", "eager_frame",
         "reused_graph", "duplicate_data", "frozen")
SEVERITIES = ("error", "warning", "info")
TABLE_COLUMNS = ["parameter", "requires_grad", "gets_gradient", "gradient_node", "in_graph", "reason"]

FIX_LIFT = ("lift the parameters into graph inputs: fxviz.trace(model, x) (params='lifted'), "
            "aot_module(model, ...), or aot_function over torch.func.functional_call(model, params, x) "
            "with the parameters passed as arguments")

_CAUSE_WORDS = {
    "detach": ("is detached (.detach() or .data)",
               "remove the .detach() / .data (or compute this value from the parameter without it)"),
    "data": ("is read through .data", "use the parameter itself, not .data"),
    "no_grad": ("is computed inside torch.no_grad() (gradient tracking off)",
                "move the computation out of the torch.no_grad() / set_grad_enabled(False) block"),
    "cast": ("is cast to an integer/bool dtype", "keep the value floating point on the way to the loss"),
    "argmax": ("goes through argmax/argmin/indices (integer results carry no gradient)",
               "use a differentiable relaxation (softmax weights, Gumbel-softmax, a straight-through estimator)"),
    "comparison": ("goes through a comparison (a bool result carries no gradient)",
                   "use a differentiable relaxation (e.g. a sigmoid instead of x > 0) or a straight-through estimator"),
    "integer": ("becomes an integer value (no gradient)", "keep the value floating point on the way to the loss"),
    "zero_derivative": ("goes through an op whose derivative is zero everywhere",
                        "use a straight-through estimator (x + (round(x) - x).detach()) if the rounding is intended"),
    "overwrite": ("is overwritten in place before the loss reads it",
                  "write into a new tensor (torch.where, out = x.clone()) instead of overwriting the parameter's "
                  "result"),
    "shape_only": ("is used only for its shape", "use the value itself if it should influence the loss"),
    "ignored_output": ("reaches an output that the loss ignores",
                       "include that output in the loss (or pass loss_fn=...), or drop the unused module"),
    "other": ("goes through a non-differentiable operation", "make that operation differentiable"),
    "graph_break": ("is used by code that ran outside the captured graph(s) at a graph break",
                    "nothing is wrong in a real run (eager autograd differentiates that code); to see it in "
                    "the graph, avoid the graph break (or try capture_route='aot')"),
}


@dataclass(frozen=True)
class Finding:
    """One thing the doctor found.  ``nodes`` are joint-graph node names (of graph ``graph``)."""

    kind: str
    severity: str
    parameter: str | None
    nodes: tuple[str, ...]
    message: str
    fix: str
    cause: str | None = None
    graph: int | None = None
    module: str | None = None
    source: str | None = None
    bytes: int | None = None


@dataclass
class Diagnosis:
    """Every finding, and one table row per model parameter."""

    findings: list[Finding]
    table: pd.DataFrame
    strategy: str
    graphs: int = 1
    title: str = ""
    params_mode: str = "lifted"

    @property
    def healthy(self) -> bool:
        """True when every parameter that requires grad gets a (non-zero) gradient."""
        t = self.table
        if not len(t):
            return True
        return bool((t["gets_gradient"] | ~t["requires_grad"]).all())

    @property
    def missing(self) -> list[str]:
        """Parameters that require grad and get no gradient."""
        t = self.table
        if not len(t):
            return []
        return list(t[t["requires_grad"] & ~t["gets_gradient"]]["parameter"])

    def for_parameter(self, name: str) -> list[Finding]:
        return [f for f in self.findings if f.parameter == name]

    def of_kind(self, kind: str) -> list[Finding]:
        return [f for f in self.findings if f.kind == kind]


# --- gathering ------------------------------------------------------------------------------------
@dataclass
class _Param:
    name: str
    tensor: torch.Tensor
    nodes: dict[int, list[str]] = field(default_factory=dict)  # graph -> its placeholder/constant nodes
    role: str | None = None  # parameter | constant
    grads: list[tuple[int, str]] = field(default_factory=list)  # (graph, gradient output node)
    zero_grads: list[tuple[int, str]] = field(default_factory=list)


def _gradient_nodes(graph: JointGraph) -> list[tuple[str | None, str | None, str]]:
    """(real name, gradient node name, role of the input) for every gradient output."""
    if not graph.has_backward:
        return []
    args = output_values(graph.gm)
    res = []
    for j, qual, role in gradient_outputs(graph):
        node = args[j] if j < len(args) else None
        res.append((qual, node.name if isinstance(node, fx.Node) else None, role))
    return res


def _collect(cap: Capture) -> dict[str, _Param]:
    params: dict[str, _Param] = {}
    for name, p in cap.named_parameters():  # a log's parameters when there is no model
        params[name] = _Param(name, p)
    for g in cap.graphs:
        for n, info in g.info.items():
            if info.qualname in params and info.role in ("parameter", "constant"):
                entry = params[info.qualname]
                entry.nodes.setdefault(g.index, []).append(n)
                entry.role = "constant" if info.role == "constant" or entry.role == "constant" else "parameter"
        dep = tangent_dependent(g) if g.has_backward else set()
        for qual, node, role in _gradient_nodes(g):
            if qual in params and role == "parameter" and node is not None:
                (params[qual].grads if node in dep else params[qual].zero_grads).append((g.index, node))
    return params


# --- findings -------------------------------------------------------------------------------------
def _in_graph(p: _Param, cap: Capture) -> str:
    if not p.nodes:
        return "not in the graph"
    many = len(cap.graphs) > 1
    parts = []
    for g, nodes in sorted(p.nodes.items()):
        where = f"{graph_name(g)}: " if many else ""
        parts.append(f"{where}{p.role} ({', '.join(nodes)})")
    return "; ".join(parts)


def _view_closure(graph: JointGraph, names: Iterable[str]) -> set[str]:
    """``names`` plus every node that is a pure view of them (``t``, ``view``...), any phase."""
    nodes = {n.name: n for n in graph.gm.graph.nodes}
    out = set(names)
    for n in graph.gm.graph.nodes:
        base = is_view_of(n)
        if base is not None and base.name in out:
            out.add(n.name)
    return out & set(nodes)


def _backward_readers(graph: JointGraph, names: Iterable[str]) -> list[str]:
    """Backward ops (not views) that read a constant, directly or through views of it."""
    held = _view_closure(graph, names)
    res = []
    for n in graph.gm.graph.nodes:
        if n.op != "call_function" or graph.info[n.name].phase != "backward" or n.name in held:
            continue
        if any(a.name in held for a in n.all_input_nodes):
            res.append(n.name)
    return res


def _mask_text(graph: JointGraph, name: str) -> str:
    node = next(n for n in graph.gm.graph.nodes if n.name == name)
    mask = _torch.op_argument(node, "output_mask")
    return f"{name} (output_mask={list(mask)})" if isinstance(mask, (list, tuple)) else name


def _constant_finding(p: _Param, cap: Capture, computed: bool) -> Finding:
    nodes: list[str] = []
    readers: list[str] = []
    graph_i = min(p.nodes)
    for g, names in sorted(p.nodes.items()):
        nodes += names
        readers += [_mask_text(cap.graphs[g], r) for r in _backward_readers(cap.graphs[g], names)]
    msg = (f"{p.name} is a constant in the graph ({', '.join(nodes)}), not an input, so no gradient "
           "can be returned for it")
    if computed:
        msg += "; the joint graph does compute one and throws it away (see the dropped-gradient finding)"
    elif readers:
        shown = ", ".join(readers[:3]) + (" ..." if len(readers) > 3 else "")
        msg += (f"; torch computes none (nothing for the partitioner to remove): the backward uses it "
                f"only in {shown}, to pass the gradient on")
    elif any(cap.graphs[g].has_backward for g in p.nodes):
        msg += "; the backward does not use it"
    else:
        msg += "; there is no backward graph at all"
    return Finding("captured_as_constant", "error", p.name, tuple(nodes), msg + ".", FIX_LIFT,
                   cause="closure", graph=graph_i)


def _cut_message(name: str, cut_cause: str, node: str | None, op: str | None, module: str | None,
                 source: str | None, code: str | None, zero: bool) -> str:
    words = _CAUSE_WORDS.get(cut_cause, _CAUSE_WORDS["other"])[0]
    where = []
    if node:
        where.append(f"at node {node}" + (f" ({op})" if op and op != node else ""))
    if module:
        where.append(f"in module {module}")
    if source:
        where.append(f"at {source}" + (f": {code}" if code else ""))
    head = (f"{name} gets a gradient that is always zero" if zero
            else f"{name} gets no gradient: no differentiable path leads from it to the loss")
    return f"{head}; its value {words}" + (" " + ", ".join(where) if where else "") + "."


def _map_eager_cut(cap: Capture, p: _Param, module: str | None, source: str | None) -> tuple[int | None, str | None]:
    """The joint node an eager cut corresponds to: the last node of the parameter's forward
    values computed at that source line, else in that module."""
    for g, names in sorted(p.nodes.items()):
        graph = cap.graphs[g]
        sl = graph_paths(graph, names).slice
        for key, attr in ((source, "source"), (module, "module")):
            if key is None:
                continue
            hits = [n for n in sl if getattr(graph.info[n], attr) == key]
            if hits:
                return g, hits[-1]
    return None, None


def _no_gradient_finding(p: _Param, cap: Capture, eager: dict[str, EagerPath] | None) -> Finding:
    zero = bool(p.zero_grads) and not p.grads
    cuts: list[Cut] = []
    differentiable = False
    used_in_graph = False
    for g, names in sorted(p.nodes.items()):
        gp = graph_paths(cap.graphs[g], names)
        cuts += gp.cuts
        differentiable |= gp.differentiable
        used_in_graph |= gp.used
    if (cuts and not differentiable) or (zero and cuts):
        c = cuts[0]
        nodes = tuple(dict.fromkeys(x.node for x in cuts))
        msg = _cut_message(p.name, c.cause, c.node, c.op, c.module, c.source, c.source_code, zero)
        if len(cuts) > 1:
            msg += " Other cuts on its paths: " + ", ".join(f"{x.node} ({x.cause})" for x in cuts[1:4]) + "."
        return Finding("no_path", "error", p.name, nodes, msg, _CAUSE_WORDS.get(c.cause, _CAUSE_WORDS["other"])[1],
                       cause=c.cause, graph=c.graph, module=c.module, source=c.source)
    ep = (eager or {}).get(p.name)
    if ep is not None and not ep.used and not used_in_graph:
        return Finding("unused", "warning", p.name, tuple(n for ns in p.nodes.values() for n in ns),
                       f"{p.name} is never used in the forward: no op reads it, so it gets no gradient "
                       "(DistributedDataParallel needs find_unused_parameters=True for such parameters).",
                       "remove the parameter (or its module), freeze it (requires_grad_(False)), or use it "
                       "in forward", cause="unused")
    if ep is not None and ep.cuts:
        ec = ep.cuts[0]
        cut_graph, node = _map_eager_cut(cap, p, ec.module, ec.source)
        msg = _cut_message(p.name, ec.cause, node, None, ec.module, ec.source, ec.source_code, zero)
        return Finding("no_path", "error", p.name, (node,) if node else (), msg,
                       _CAUSE_WORDS.get(ec.cause, _CAUSE_WORDS["other"])[1], cause=ec.cause, graph=cut_graph,
                       module=ec.module, source=ec.source)
    if ep is not None and ep.used and not ep.reaches_loss:
        msg = _cut_message(p.name, "ignored_output", None, None, ep.last_module, ep.last_source,
                           ep.last_source_code, zero)
        msg += " torch deleted the ops that compute it, so the graph shows none of them."
        return Finding("no_path", "error", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       _CAUSE_WORDS["ignored_output"][1], cause="ignored_output", module=ep.last_module,
                       source=ep.last_source)
    if cap.graph_breaks and (ep is None or ep.gets_gradient):
        breaks = "; ".join(cap.graph_breaks[:2]) + (" ..." if len(cap.graph_breaks) > 2 else "")
        msg = (f"{p.name} gets no gradient from the captured graph(s): dynamo split the model at a graph "
               f"break ({breaks}), and the ops that use {p.name} ran outside the graphs, where eager "
               "autograd differentiates them (a real torch.compile run does give it a gradient).")
        return Finding("no_path", "warning", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       _CAUSE_WORDS["graph_break"][1], cause="graph_break")
    if ep is not None and ep.gets_gradient:
        msg = (f"{p.name} gets a gradient from eager autograd but none from the traced graph(s); "
               "fxviz cannot tell where the traced path is cut.")
        return Finding("no_path", "error", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       "compare tr.check_gradients() and report this model to fxviz", cause="other")
    msg = f"{p.name} gets no gradient, and neither the graph nor eager autograd shows a path to the loss."
    return Finding("no_path", "error", p.name, tuple(x.node for x in cuts), msg,
                   _CAUSE_WORDS["other"][1], cause="other")


def _needs_eager(p: _Param, cap: Capture) -> bool:
    for g, names in p.nodes.items():
        gp = graph_paths(cap.graphs[g], names)
        if gp.cuts and not gp.differentiable:
            return False
    return True


# --- gradients computed but thrown away -----------------------------------------------------------
def _state_name(graph: JointGraph, node: str) -> str:
    info = graph.info[node]
    return info.qualname or node


def _tensor_args(node: fx.Node) -> list[fx.Node]:
    from .._torch import pytree

    return [a for a in pytree.tree_leaves((node.args, node.kwargs))
            if isinstance(a, fx.Node) and isinstance(_torch.meta_val(a), torch.Tensor)]


def _differentiated_input(graph: JointGraph, node: fx.Node, index: int | None) -> str | None:
    """The parameter/constant whose gradient ``node`` (element ``index``) computes: element i of
    a multi-output backward op is the gradient of the i-th tensor input of the forward op with the
    same ``seq_nr``; the shapes must agree."""
    value = _torch.meta_val(node)
    if index is not None:
        value = value[index] if isinstance(value, (tuple, list)) and index < len(value) else None
    if not isinstance(value, torch.Tensor):
        return None
    seq = _torch.seq_nr(node)
    fwd = [n for n in graph.gm.graph.nodes if n.op == "call_function" and graph.info[n.name].phase == "forward"
           and seq is not None and _torch.seq_nr(n) == seq]
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


def _dropped(cap: Capture, parts: Sequence[Partition | None], params: dict[str, _Param]) -> list[Finding]:
    findings = []
    for graph, part in zip(cap.graphs, parts):
        if not graph.has_backward:
            continue
        removed = set(part.removed) if part is not None and part.ok else set()
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
                state = _differentiated_input(graph, n, index)
                if state is None:
                    continue
                findings.append(_dropped_finding(cap, graph, n, state, label, n.name in removed, params, part))
        if part is not None and part.ok:
            findings += _lost_by_partitioner(graph, part)
    return findings


def _dropped_finding(cap: Capture, graph: JointGraph, node: fx.Node, state: str, label: str, removed: bool,
                     params: dict[str, _Param], part: Partition | None) -> Finding:
    name = _state_name(graph, state)
    p = params.get(name)
    role = graph.info[state].role
    why = {"constant": "it is a constant (captured, not an input), so nothing can return its gradient",
           "buffer": "it is a buffer, which gets no gradient"}.get(role, "")
    if p is not None and not p.tensor.requires_grad:
        why = "it is frozen (requires_grad=False)"
    strategy = part.name if part is not None else "default"
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
    """Gradient outputs of the joint graph that the partition's backward graph does not return."""
    if part.backward is None:
        return []
    returned = {part.bw_to_joint.get(a.name, a.name) for a in output_values(part.backward)
                if isinstance(a, fx.Node)}
    res = []
    for qual, node, role in _gradient_nodes(graph):
        if node is None or node in returned or role != "parameter":
            continue
        res.append(Finding(
            "gradient_dropped", "error", qual, (node,),
            f"The joint graph returns the gradient of {qual} ({node}) but the backward graph of the "
            f"'{part.name}' partition does not: the partitioner dropped it.",
            "use a partitioner that keeps every gradient output (torch's default_partition does)",
            cause="partitioner", graph=graph.index))
    return res


# --- constants that hold the same data ------------------------------------------------------------
def _real(t: Any) -> TypeGuard[torch.Tensor]:
    return isinstance(t, torch.Tensor) and not _torch.is_fake(t) and t.device.type != "meta"


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _same_data(a: torch.Tensor, b: torch.Tensor) -> str | None:
    """How ``a`` holds ``b``'s values: 'a copy', 'transposed', 'reshaped', or None."""
    if a.dtype != b.dtype or a.numel() != b.numel() or a.numel() < 2:
        return None
    flat = a.detach().reshape(-1)
    if bool((flat == flat[0]).all()):
        return None  # constant-valued tensors (zeros, ones) match by coincidence
    if a.shape == b.shape and torch.equal(a, b):
        return "a copy"
    if a.dim() == 2 and b.dim() == 2 and a.shape == b.shape[::-1] and torch.equal(a, b.t()):
        return "transposed"
    if torch.equal(flat, b.detach().reshape(-1)):
        return "reshaped"
    return None


def _saved_views(cap: Capture, parts: Sequence[Partition | None]) -> list[tuple[int, str, str, int]]:
    """(graph, saved node, constant node, bytes) for every value a partition saves for the
    backward that is only a view (``t``, ``view``...) of a constant."""
    res = []
    for graph, part in zip(cap.graphs, parts):
        if part is None or not part.ok:
            continue
        nodes = {n.name: n for n in graph.gm.graph.nodes}
        for name in part.saved:
            n = nodes.get(name)
            if n is None or is_view_of(n) is None:
                continue
            state = resolve_state(graph, n)
            if state is not None and graph.info[state].role == "constant":
                res.append((graph.index, name, state, graph.info[name].bytes or 0))
    return res


_VIEW_WORDS = {"t": "its transpose", "transpose": "its transpose", "permute": "a permutation of it",
               "view": "a reshape of it", "reshape": "a reshape of it", "_unsafe_view": "a reshape of it",
               "expand": "an expansion of it"}


def _view_words(graph: JointGraph, node: str) -> str:
    op = graph.info[node].short_op
    return _VIEW_WORDS.get(op, f"a {op} view of it") + ", same storage"


def _holders(cap: Capture, items: list[tuple[int, str, torch.Tensor]], names: list[str]) -> str:
    """``2 constant nodes (...)`` / ``2 graph inputs (...)``: a placeholder is an input (in a
    graph-broken model, often a tensor one graph hands the next), never a constant."""
    ops = {cap.graphs[g].info[n].op for g, n, _ in items}
    noun = ("constant node" if ops == {"get_attr"} else "graph input" if ops == {"placeholder"}
            else "constant node or graph input")
    if len(items) == 1:
        return f"{noun} {names[0]}"
    between = "; passed between graphs" if "placeholder" in ops and len({g for g, _, _ in items}) > 1 else ""
    return f"{len(items)} {noun}s ({', '.join(names)}{between})"


def _duplicates(cap: Capture, parts: Sequence[Partition | None]) -> list[Finding]:
    model = cap.model
    param_of = {}
    if model is not None:
        for name, p in model.named_parameters():
            if _real(p):
                param_of[storage_key(p)] = name
    # every tensor a graph holds that is not a user input: constants, and graph inputs that are
    # neither parameters nor the user's example inputs (dynamo lifts module tensor attributes)
    held: dict[int, list[tuple[int, str, torch.Tensor]]] = {}
    user_inputs = {id(t) for t in cap.example_inputs}
    labels: dict[str, str] = {}
    storage_of: dict[tuple[int, str], int] = {}
    for g in cap.graphs:
        for n in g.gm.graph.nodes:
            t = None
            if n.op == "get_attr":
                t = g.constant_values.get(str(n.target), getattr(g.gm, str(n.target), None))
            elif n.op == "placeholder" and g.info[n.name].role == "primal":
                t = g.placeholder_values.get(n.name)
                if t is None or id(t) in user_inputs:
                    t = None
            if _real(t):
                key = storage_key(t)
                held.setdefault(key, []).append((g.index, n.name, t))
                storage_of[(g.index, n.name)] = key
                qual = g.info[n.name].qualname
                labels[n.name] = f"{qual} ({n.name})" if qual and qual != n.name and n.op == "placeholder" else n.name
    views: dict[int, list[tuple[int, str, int]]] = {}
    for gi, saved_node, const, nbytes in _saved_views(cap, parts):
        if (gi, const) in storage_of:
            views.setdefault(storage_of[(gi, const)], []).append((gi, saved_node, nbytes))
    findings = []
    many = len(cap.graphs) > 1
    for key, items in held.items():
        owner = param_of.get(key)
        label = owner or items[0][1]
        names = [f"{n} ({graph_name(g)})" if many else n for g, n, _ in items]
        saved = views.get(key, [])
        if len(items) + len(saved) < 2:
            continue
        nb = max(_nbytes(t) for _, _, t in items)
        counted = nb * len(items) + sum(b for _, _, b in saved)
        what = _holders(cap, items, names)
        if saved:
            shown = ", ".join((f"{n} ({graph_name(g)}, " if many else f"{n} (") + _view_words(cap.graphs[g], n) + ")"
                              for g, n, _ in saved)
            what += f" and saved for the backward as {shown}"
        findings.append(Finding(
            "duplicate_data", "info", owner, tuple(n for _, n, _ in items) + tuple(n for _, n, _ in saved),
            f"{label} is held by {what}, all reading one storage: {format_bytes(nb)} in memory once, but a "
            f"per-node count (torch's _size_of) counts {format_bytes(counted)}.",
            "nothing to fix in memory; count unique storages when you add up bytes" +
            ("" if owner is None else "; lifting the parameters removes the constants altogether"),
            cause="same_tensor", graph=items[0][0], bytes=counted - nb))
    # separate storages with the same values: real duplicated bytes
    keys = list(held)
    params = [(n, p) for n, p in (model.named_parameters() if model is not None else []) if _real(p)]
    for i, k in enumerate(keys):
        if k in param_of:
            continue
        gi, node, t = held[k][0]
        others: list[tuple[str, torch.Tensor, bool]] = [(n, p, True) for n, p in params
                                                         if storage_key(p) != k]
        others += [(held[k2][0][1], held[k2][0][2], False) for k2 in keys[i + 1:] if k2 not in param_of]
        for other, ot, is_param in others:
            how = _same_data(t, ot)
            if how is None:
                continue
            what = f"parameter {other}" if is_param else f"constant {labels.get(other, other)}"
            findings.append(Finding(
                "duplicate_data", "warning", other if is_param else None, (node,) if is_param else (node, other),
                f"{labels.get(node, node)} holds the same data as {what} ({how}) in a separate copy: "
                f"{format_bytes(_nbytes(t))} "
                "duplicated" + (", and the copy neither follows the parameter's updates nor gives it a gradient"
                               if is_param else "") + ".",
                "compute it from the parameter inside forward (e.g. self.fc.weight.t()) instead of keeping a copy",
                cause=how, graph=gi, bytes=_nbytes(t)))
            break
    return findings


# --- the whole diagnosis --------------------------------------------------------------------------
def diagnose(cap: Capture, parts: Sequence[Partition | None] | None = None) -> Diagnosis:
    """Diagnose every graph of ``cap`` (all pieces of a trace with graph breaks).

    ``parts`` holds one partition per graph (the strategy whose backward graphs are checked for
    dropped gradients), or None."""
    parts = list(parts) if parts is not None else [None] * len(cap.graphs)
    params = _collect(cap)
    facts = piece_facts(cap)
    many = len(cap.graphs) > 1
    findings: list[Finding] = []
    rows = []
    missing = [p for p in params.values() if p.tensor.requires_grad and p.role != "constant" and not p.grads]
    try:
        # eager autograd is the judge of "gets a gradient" wherever the graphs cannot tell alone:
        # after graph breaks a graph's cut may sit on one path of several, and a parameter may be
        # used only in code that ran outside every graph or in a graph reused for another module
        probe = [p.name for p in missing if many or not p.nodes or _needs_eager(p, cap)]
        eager = eager_paths(cap, probe) if probe else {}
    except Exception:  # the probe is an aid: a model it cannot run is still diagnosed from its graphs
        eager = {}
    dropped = _dropped(cap, parts, params)
    computed = {f.parameter for f in dropped}
    outside: list[str] = []
    for p in params.values():
        reason = "gets a gradient"
        gets = bool(p.grads)
        grad_node = ", ".join(n for _, n in (p.grads or p.zero_grads)) or None
        in_graph = _in_graph(p, cap)
        ep = eager.get(p.name)
        eager_grad = ep is not None and ep.gets_gradient and not p.zero_grads
        # a later run of a graph dynamo reused returns this parameter's gradient (torch's runtime)
        run = facts.run_of_parameter(p.name)
        reused_from = _template(params, facts, run, p.name)
        if not p.tensor.requires_grad:
            f = Finding("frozen", "info", p.name, tuple(n for ns in p.nodes.values() for n in ns),
                        f"{p.name} is frozen (requires_grad=False): no gradient is expected.",
                        "nothing to fix, unless it should train: call requires_grad_(True) before tracing",
                        cause="frozen")
            findings.append(f)
            reason = "frozen (requires_grad=False)"
        elif p.role == "constant":
            f = _constant_finding(p, cap, p.name in computed)
            findings.append(f)
            reason = "captured as a constant (closure)"
        elif not p.grads and not p.zero_grads and (reused_from is not None or (eager_grad and (many or not p.nodes))):
            gets = True
            if run is not None and reused_from is not None:
                template = reused_from
                reason = (f"gets a gradient from {graph_name(run.graph)} (run {run.run + 1}, the graph compiled for "
                          f"{', '.join(facts.runs_of(run.graph)[0].modules) or 'another module'})")
                grad_node = f"{template} ({graph_name(run.graph)}, run {run.run + 1})"
                in_graph = f"{graph_name(run.graph)}, run {run.run + 1}: parameter"
            elif run is not None or p.nodes:
                # in a graph that returns no gradient for it, yet eager autograd gives one: its path to
                # the loss leaves the graph and runs through code outside every graph
                reason = ("gets a gradient from eager autograd through code outside the captured graphs "
                          "(its graph returns none for it)")
            else:
                reason = "gets a gradient from eager code that ran outside every captured graph"
                in_graph = "in no graph (ran as eager Python)"
                outside.append(p.name)
        elif not p.grads:
            f = _no_gradient_finding(p, cap, eager)
            findings.append(f)
            reason = _reason(f)
        rows.append({"parameter": p.name, "requires_grad": bool(p.tensor.requires_grad),
                     "gets_gradient": gets, "gradient_node": grad_node,
                     "in_graph": in_graph, "reason": reason})
    findings += _outside_findings(outside, eager, facts)
    findings += _frame_findings(facts)
    findings += _reuse_findings(facts, cap)
    findings += dropped
    findings += _duplicates(cap, parts)
    order = {s: i for i, s in enumerate(SEVERITIES)}
    kinds = {k: i for i, k in enumerate(KINDS)}
    findings.sort(key=lambda f: (order[f.severity], kinds[f.kind]))
    table = pd.DataFrame(rows, columns=TABLE_COLUMNS)
    strategy = next((p.name for p in parts if p is not None), "default")
    return Diagnosis(findings=findings, table=table, strategy=strategy, graphs=len(cap.graphs), title=cap.title,
                     params_mode=cap.params)


# --- graph breaks: code outside the graphs, graphs run for several modules -------------------------
def _template(params: dict[str, _Param], facts: PieceFacts, run: PieceRun | None, name: str) -> str | None:
    """The gradient node of graph ``run.graph`` that returns ``name``'s gradient in that run: the
    gradient of the parameter its first run received at the same input position."""
    owner = facts.counterpart.get(name)
    if run is None or owner is None or owner not in params:
        return None
    nodes = [n for g, n in params[owner].grads if g == run.graph]
    return nodes[0] if nodes else None


def _outside_findings(names: list[str], eager: dict[str, EagerPath], facts: PieceFacts) -> list[Finding]:
    """One finding per module whose parameters get their gradient from code outside every graph."""
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(modules_of([n])[0], []).append(n)
    findings = []
    frames = (" (in " + ", ".join(facts.eager_frames) + ", a frame dynamo ran as plain Python)"
              if facts.eager_frames else "")
    for module, members in groups.items():
        ep = eager.get(members[0])
        first = ep.first_use if ep is not None else None
        where = ""
        if first is not None and first[1]:
            where = f", called at {first[1]}" + (f": {first[2]}" if first[2] else "")
        shown = ", ".join(members[:4]) + (" ..." if len(members) > 4 else "")
        findings.append(Finding(
            "outside_graphs", "warning", None, (),
            f"{module} ran outside every captured graph{where}{frames}. Its parameters ({shown}) get their "
            "gradient from eager autograd, but no graph fxviz shows contains its ops: the drawings, the "
            "graph rows of the memory table and the per-piece saved bytes leave it out (only the eager row "
            "counts what it saves).",
            "nothing to fix for correctness; for graphs that cover it, remove the graph break that makes dynamo "
            "skip the frame (a graph break inside a for/while loop skips the whole frame)",
            cause="outside", module=module))
    return findings


def _frame_findings(facts: PieceFacts) -> list[Finding]:
    return [Finding(
        "eager_frame", "info", None, (),
        f"dynamo skipped the frame {frame} and ran it as plain eager Python (torch: 'graph break in a "
        "for/while loop ... Skipping the frame and falling back to eager'): the functions it calls are "
        "compiled on their own, each into its own graphs, and what it computes itself is in no graph.",
        "move the graph break out of the loop (or the loop into a function of its own) for one graph per "
        "iteration", cause="skipped_frame") for frame in facts.eager_frames]


def _reuse_findings(facts: PieceFacts, cap: Capture) -> list[Finding]:
    findings = []
    for g, runs in facts.reused.items():
        mods = ["; ".join(r.modules) or "(no parameters)" for r in runs]
        first = mods[0]
        others = ", ".join(mods[1:])
        findings.append(Finding(
            "reused_graph", "info", None, (),
            f"{graph_name(g)} was compiled once, for {first}, and ran {len(runs)} times: also for {others}, each run "
            f"with that module's own parameters. Their gradients come from the same backward graph, run again; "
            f"fxviz draws and measures one run of {graph_name(g)}, so this step holds its saved values "
            f"{len(runs)} times.",
            "nothing to fix: dynamo reuses a graph for every call its guards accept", cause="reused",
            graph=g, module=first))
    return findings


def _reason(f: Finding) -> str:
    if f.kind == "unused":
        return "never used in the forward"
    words = _CAUSE_WORDS.get(f.cause or "other", _CAUSE_WORDS["other"])[0]
    if f.cause == "ignored_output":
        where = f" (module {f.module})" if f.module else ""
    else:
        where = f" at {f.nodes[0]}" if f.nodes else (f" in {f.module}" if f.module else "")
    return f"no path to the loss: value {words}{where}"
