"""Activations that cross a graph break.  A tensor one graph (or eager code between graphs) makes and a
later graph's backward reads is held by the step for its backward, though the later graph sees it as an
input (its memory table files it under "input (held anyway)"): GPT-2 called with ``labels=`` breaks the
graph before its loss, and the real step holds the 65,536 B of logits the loss graph saves on top of
every partition's activations.

Counted here for ``advise`` until the step's memory table counts them itself (issue 44, the whole step):
:func:`crossing_bytes` is the one function that then goes.  What eager code between graphs holds is not
counted here (issue 44 measures it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fxviz import _torch
from fxviz._torch import pytree
from fxviz.analysis.memory.storage import saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.fx_facts import output_node
from fxviz.core.graph_facts import Storages, tensors
from fxviz.sources.graphs import Capture, JointGraph

__all__ = ["crossing_bytes"]


def _key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def _real(v: Any) -> bool:
    return isinstance(v, torch.Tensor) and v.device.type != "meta" and not _torch.is_fake(v)


def crossing_bytes(cap: Capture, pieces: Sequence[tuple[JointGraph, Partition, int]]) -> int:
    """Bytes of the storages a piece's backward reads that are inputs of its graph but neither the
    model's parameters and buffers nor the user's inputs: tensors that crossed a graph break, each
    storage once, times the runs of its graph (dynamo reuses one graph per layer, each run with its own).

    A model's capture holds the real tensors of its graphs' first run, so whose a tensor is, is an
    identity test by storage; a log has none, and there a later graph's input is counted when the
    backward returns its gradient (an activation; a user's input rarely requires grad in training)."""
    if len(pieces) < 2 and all(runs < 2 for _, _, runs in pieces):
        return 0
    user = {_key(t) for t in pytree.tree_leaves(cap.example_inputs) if _real(t)}
    if cap.model is not None:
        user |= {_key(t) for t in [*cap.model.parameters(), *cap.model.buffers()] if _real(t)}
    seen: dict[Any, int] = {}
    for g, p, runs in pieces:
        storages = Storages(g.gm, p.forward, p.backward)
        on: dict[int, list[str]] = {}  # storage -> the primal placeholders on it (a saved view names its base)
        for n in g.gm.graph.nodes:
            if n.op == "placeholder" and g.info.get(n.name) is not None and g.info[n.name].role == "primal":
                for t in tensors(_torch.meta_val(n)):
                    on.setdefault(storages.key(t), []).append(n.name)
        graded = _inputs_with_gradients(g)
        for use in saved_memory(p, g, storages).storages:
            if use.owner != "input":
                continue
            names = on.get(use.key, list(use.names))
            real = next((v for v in (g.placeholder_values.get(n) for n in names) if _real(v)), None)
            if real is not None:
                if _key(real) not in user:
                    seen.setdefault(_key(real), use.nbytes * max(1, runs))
            elif g.index > 0 and any(n in graded for n in names):
                seen.setdefault((g.index, use.key), use.nbytes * max(1, runs))
    return sum(seen.values())


def _inputs_with_gradients(g: JointGraph) -> set[str]:
    """The placeholders of ``g`` whose gradient its backward returns (by the outputs' AOT descriptors)."""
    plain: dict[int, str] = {}
    for n in g.gm.graph.nodes:
        if n.op == "placeholder" and (d := _torch.node_desc(n)) is not None:
            kind = _torch.describe_input(d)
            if kind.kind == "plain" and kind.index is not None:
                plain[kind.index] = n.name
    found = set()
    for d in _torch.output_descs(output_node(g.gm)):
        out = _torch.describe_output(d)
        if out.kind == "grad" and out.of is not None and out.of.kind == "plain" and out.of.index in plain:
            found.add(plain[out.of.index])
    return found
