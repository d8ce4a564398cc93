"""Which inputs of a logged graph the step itself made (issue 44): a log holds no tensors, so the identity
test a model's capture makes (``sources.model.routes``: a later graph's input that is an earlier graph's
output) is not possible.  What the log does say: a later graph of the step whose backward returns the
gradient of a plain input (not a parameter or buffer) received a tensor the step computed, an activation it
holds for the backward (a user's input rarely requires grad in training)."""

from __future__ import annotations

from fxviz import _torch
from fxviz.core.fx_facts import output_node
from fxviz.sources.graphs import JointGraph

__all__ = ["logged_crossing"]


def logged_crossing(graph: JointGraph) -> frozenset[int]:
    """The dynamo input indices (``PlainAOTInput(idx)``) of ``graph``'s plain inputs whose gradient its
    backward returns: ``JointGraph.crossing`` of a logged step's graph after its first."""
    plain: set[int] = set()
    for n in graph.gm.graph.nodes:
        if n.op == "placeholder" and (d := _torch.node_desc(n)) is not None:
            kind = _torch.describe_input(d)
            if kind.kind == "plain" and kind.index is not None:
                plain.add(kind.index)
    found = set()
    for d in _torch.output_descs(output_node(graph.gm)):
        out = _torch.describe_output(d)
        if out.kind == "grad" and out.of is not None and out.of.kind == "plain" and out.of.index in plain:
            found.add(out.of.index)
    return frozenset(found)
