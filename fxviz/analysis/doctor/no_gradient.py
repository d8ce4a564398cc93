"""Parameters with no gradient: captured as constants, or a path to the loss cut (detach, a cast,
argmax, a comparison...), found in the graphs or, where they cannot tell, by an eager probe."""

from __future__ import annotations

from collections.abc import Iterable

from fxviz import _torch
from fxviz.analysis.doctor.findings import CAUSE_WORDS, FIX_LIFT, Finding, Param
from fxviz.analysis.doctor.gradient_paths import Cut, EagerPath, graph_paths, is_view_of
from fxviz.core.errors import Do, Say
from fxviz.sources.graphs import Capture, JointGraph, graph_name


# --- findings -------------------------------------------------------------------------------------
def where_in_graph(p: Param, cap: Capture) -> str:
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


def constant_finding(p: Param, cap: Capture, computed: bool) -> Finding:
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
    words = CAUSE_WORDS.get(cut_cause, CAUSE_WORDS["other"])[0]
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


def _map_eager_cut(cap: Capture, p: Param, module: str | None, source: str | None) -> tuple[int | None, str | None]:
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


def no_gradient_finding(p: Param, cap: Capture, eager: dict[str, EagerPath] | None) -> Finding:
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
        return Finding("no_path", "error", p.name, nodes, msg, CAUSE_WORDS.get(c.cause, CAUSE_WORDS["other"])[1],
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
                       CAUSE_WORDS.get(ec.cause, CAUSE_WORDS["other"])[1], cause=ec.cause, graph=cut_graph,
                       module=ec.module, source=ec.source)
    if ep is not None and ep.used and not ep.reaches_loss:
        msg = _cut_message(p.name, "ignored_output", None, None, ep.last_module, ep.last_source,
                           ep.last_source_code, zero)
        msg += " torch deleted the ops that compute it, so the graph shows none of them."
        return Finding("no_path", "error", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       CAUSE_WORDS["ignored_output"][1], cause="ignored_output", module=ep.last_module,
                       source=ep.last_source)
    if cap.graph_breaks and (ep is None or ep.gets_gradient):
        breaks = "; ".join(cap.graph_breaks[:2]) + (" ..." if len(cap.graph_breaks) > 2 else "")
        msg = (f"{p.name} gets no gradient from the captured graph(s): dynamo split the model at a graph "
               f"break ({breaks}), and the ops that use {p.name} ran outside the graphs, where eager "
               "autograd differentiates them (a real torch.compile run does give it a gradient).")
        return Finding("no_path", "warning", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       CAUSE_WORDS["graph_break"][1], cause="graph_break")
    if ep is not None and ep.gets_gradient:
        msg = (f"{p.name} gets a gradient from eager autograd but none from the traced graph(s); "
               "fxviz cannot tell where the traced path is cut.")
        return Finding("no_path", "error", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                       Say("compare ", Do("check_gradients"), " and report this model to fxviz"), cause="other")
    msg = f"{p.name} gets no gradient, and neither the graph nor eager autograd shows a path to the loss."
    return Finding("no_path", "error", p.name, tuple(x.node for x in cuts), msg,
                   CAUSE_WORDS["other"][1], cause="other")


def needs_eager(p: Param, cap: Capture) -> bool:
    for g, names in p.nodes.items():
        gp = graph_paths(cap.graphs[g], names)
        if gp.cuts and not gp.differentiable:
            return False
    return True


# --- a loss applied outside the graph ----------------------------------------------------------------
def outside_loss_candidates(cap: Capture, params: dict[str, Param]) -> list[str]:
    """The parameters the eager probe must follow to the loss when the loss is applied outside the
    graph (a ``loss_fn``, the model's own ``.loss``): the graph then returns every output and its
    backward gets a tangent for each, so a parameter whose values reach only outputs the loss
    ignores still has a gradient node in the graph.  The loss itself, run on the model's outputs,
    is the judge."""
    if not cap.loss_outside or cap.model is None or all(g.inference for g in cap.graphs):
        return []
    return [p.name for p in params.values() if p.tensor.requires_grad and p.role != "constant" and p.grads]


def ignored_by_loss(params: dict[str, Param], eager: dict[str, EagerPath]) -> set[str]:
    """Parameters the graph gives a gradient whose values the (outside) loss never reads: used in
    the forward, yet their autograd leaf is not reachable from the loss."""
    return {n for n, ep in eager.items()
            if n in params and params[n].grads and ep.used and not ep.reaches_loss and not ep.gets_gradient}


def ignored_output_finding(p: Param, ep: EagerPath) -> Finding:
    """``p`` reaches only outputs the loss (applied outside the graph) ignores."""
    msg = _cut_message(p.name, "ignored_output", None, None, ep.last_module, ep.last_source,
                       ep.last_source_code, False)
    grads = ", ".join(n for _, n in p.grads)
    msg += (f" The loss is applied outside the graph, so the graph returns that output too and its backward "
            f"computes {p.name}'s gradient ({grads}) from the output's tangent; the loss never reads the output, "
            f"so that tangent is zero: a torch.compile step fills {p.name}.grad with zeros (eager autograd "
            "leaves it None).")
    return Finding("no_path", "error", p.name, tuple(n for ns in p.nodes.values() for n in ns), msg,
                   CAUSE_WORDS["ignored_output"][1], cause="ignored_output", module=ep.last_module,
                   source=ep.last_source)
