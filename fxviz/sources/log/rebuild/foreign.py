"""What a log written elsewhere needs to be rebuilt here: AOT descriptors a torch older than 2.9 did
not print, made back from torch's own input names; stand-ins for ops this torch lacks (a
``torch.library`` op registered only in the process that wrote the log, or one of another build)."""

from __future__ import annotations

import re
from typing import Any

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz.core.errors import LogError

__all__ = ["descriptors_from_names", "stand_in", "is_stand_in", "STAND_IN_NOTE"]

STAND_IN_NOTE = "custom op, not registered here: shapes from the log"
_STAND_INS: dict[str, Any] = {}
_MARK = "fxviz_stand_in"


def stand_in(name: str) -> Any:
    """The opaque stand-in for ``torch.ops.<name>`` (``mylib.op.default``), an op this torch lacks: a
    ``torch.library`` op registered only in the process that wrote the log, or one of another torch
    build.  It is named as in the log (FX prints it ``torch.ops.mylib.op.default``), its values are the
    log's annotations, and calling it raises ``LogError``: nothing here knows what it computes."""
    if name not in _STAND_INS:
        def op(*args: Any, **kwargs: Any) -> Any:
            raise LogError(f"torch.ops.{name} is a {STAND_IN_NOTE}: fxviz cannot run it",
                           "import the library that registers the op before reading the log, or use strategy "
                           "'logged'")

        op.__name__ = op.__qualname__ = name
        op.__module__ = "torch.ops"  # FX names it torch.ops.<name> in printed code, as the log did
        setattr(op, _MARK, True)
        _STAND_INS[name] = op
    return _STAND_INS[name]


def is_stand_in(target: Any) -> bool:
    """Whether ``target`` is a :func:`stand_in` (an op this torch lacks)."""
    return getattr(target, _MARK, False) is True


_PRIMAL = re.compile(r"^(?:primals|arg)_?(\d+)(?:_1)?$")
_TANGENT = re.compile(r"^tangents_(\d+)$")


def descriptors_from_names(graph: fx.Graph, joint: bool) -> bool:
    """A log from a torch older than 2.9 prints no ``# PlainAOTInput`` comments; torch names the
    inputs the same on every version (``primals_N``, ``tangents_N``; ``argN_1`` in an inference graph),
    and a joint graph returns the forward outputs, then one gradient (or None) per primal.  Those give
    the descriptors back: a tangent belongs to the first forward output not yet taken with its dtype
    and shape (AOTAutograd makes one per differentiable output, in order).  Nothing is made when any
    input descriptor was logged (logged output descriptors are kept); True when they were made."""
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    output = nodes[-1] if nodes and nodes[-1].op == "output" else None
    if any(_torch.node_desc(n) is not None for n in placeholders):
        return False
    cls = _torch.DESCRIPTOR_CLASSES
    plain_in, tangent_in, plain_out, grad_out = (cls.get(k) for k in ("PlainAOTInput", "TangentAOTInput",
                                                                       "PlainAOTOutput", "GradAOTOutput"))
    if plain_in is None or tangent_in is None or plain_out is None or grad_out is None:
        return False
    primals: list[tuple[int, fx.Node]] = []
    tangent_nodes: list[fx.Node] = []
    for n in placeholders:
        m = _PRIMAL.match(n.name)
        if m:
            primals.append((int(m.group(1)) - (1 if n.name.startswith("primals") else 0), n))
        elif _TANGENT.match(n.name):
            tangent_nodes.append(n)
    if not primals and not tangent_nodes:
        return False
    for idx, n in primals:
        _torch.LogGraphBuilder.set_desc(n, plain_in(idx))
    outs = list(output.args[0]) if output is not None and isinstance(output.args[0], (list, tuple)) else []
    num_fwd = len(outs) - len(primals) if joint else len(outs)
    taken: set[int] = set()
    for t in tangent_nodes if joint else []:  # a backward graph's tangents: by their name (graph_facts.is_tangent)
        for j in range(max(num_fwd, 0)):
            if j not in taken and isinstance(outs[j], fx.Node) and _same_value(outs[j], t):
                taken.add(j)
                _torch.LogGraphBuilder.set_desc(t, tangent_in(plain_out(j)))
                break
    if joint and output is not None and num_fwd >= 0 and _torch.node_desc(output) is None:
        descs = [plain_out(j) for j in range(num_fwd)] + [
            grad_out(plain_in(idx)) if outs[num_fwd + k] is not None else None for k, (idx, _) in enumerate(primals)]
        _torch.LogGraphBuilder.set_desc(output, descs)
    return True


def _same_value(a: fx.Node, b: fx.Node) -> bool:
    va, vb = _torch.meta_val(a), _torch.meta_val(b)
    if isinstance(va, torch.Tensor) and isinstance(vb, torch.Tensor):
        return va.dtype == vb.dtype and str(list(va.shape)) == str(list(vb.shape))
    return False
