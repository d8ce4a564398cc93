"""Constants and graph inputs that hold the same data: one storage held (and counted) several
times, or separate storages with equal values."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeGuard

import torch

from fxviz import _torch
from fxviz.analysis.doctor.findings import Finding
from fxviz.analysis.doctor.gradient_paths import is_view_of, resolve_state
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.graph_facts import storage_key
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import Capture, JointGraph, graph_name


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


def duplicate_findings(cap: Capture, parts: Sequence[Partition | None]) -> list[Finding]:
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
