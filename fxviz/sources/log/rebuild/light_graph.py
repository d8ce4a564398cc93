"""A rebuilt ``GraphModule`` as a :class:`LightGraph`: the form the rules that read only a graph's
structure, stack traces and shapes take (``light.modules``), so they run alike on a graph rebuilt on
fake tensors and on one read from the log's text alone."""

from __future__ import annotations

import operator
from typing import Any

import torch.fx as fx

from fxviz import _torch
from fxviz.core.graph_facts import is_cast, is_view_op
from fxviz.sources.log.light.nodes import GETITEM, Dim, LightGraph, LightNode, LightOp

__all__ = ["as_light"]


def _dims(shape: Any) -> tuple[Dim, ...]:
    """A shape as a key: ints, and a symbolic size (a dynamic recompile's ``s0``) by its expression, so it
    hashes (a SymInt does not) and equals the same size elsewhere in the graph."""
    return tuple(d if isinstance(d, int) else str(d) for d in shape)


def _op(n: fx.Node, ops: dict[Any, LightOp]) -> LightOp | None:
    if n.op != "call_function":
        return None
    if n.target is operator.getitem:
        return GETITEM
    op = ops.get(n.target)
    if op is None:
        name = str(getattr(n.target, "__name__", n.target))
        op = ops[n.target] = LightOp(str(n.target), name.split(".")[0], view=is_view_op(n.target), cast=is_cast(n))
    return op


def _mapped(value: Any, made: dict[fx.Node, LightNode]) -> Any:
    """``value`` (an argument) with each node replaced by its light node."""
    if isinstance(value, fx.Node):
        return made[value]
    if isinstance(value, (list, tuple)):
        return type(value)(_mapped(v, made) for v in value)
    if isinstance(value, dict):
        return {k: _mapped(v, made) for k, v in value.items()}
    return value


def as_light(gm: fx.GraphModule) -> LightGraph:
    """``gm``'s nodes as light nodes: the same names, targets as :class:`LightOp` (a view by the op's
    schema), arguments, stack traces and the shapes of their values."""
    made: dict[fx.Node, LightNode] = {}
    ops: dict[Any, LightOp] = {}
    nodes: list[LightNode] = []
    outputs: list[tuple[LightNode | None, str]] = []
    for n in gm.graph.nodes:
        if n.op == "output":
            values = n.args[0] if isinstance(n.args[0], (list, tuple)) else [n.args[0]]
            outputs = [(made.get(v) if isinstance(v, fx.Node) else None, "") for v in values]
            continue
        ln = LightNode(n.name, n.op, _op(n, ops), _mapped(n.args, made), _mapped(dict(n.kwargs), made))
        ln.trace = _torch.stack_trace(n)
        ln.all_input_nodes = [made[a] for a in n.all_input_nodes]
        for a in ln.all_input_nodes:
            a.users[ln] = None
        val = _torch.meta_val(n)
        shape = _dims(val.shape) if hasattr(val, "shape") else None
        items = {_dims(x.shape) for x in val if hasattr(x, "shape")} if isinstance(val, (list, tuple)) else {shape}
        ln.shapes = (shape, frozenset(items))
        made[n] = ln
        nodes.append(ln)
    return LightGraph(nodes, outputs)
