"""FLOPs of a printed op, as ``graph_facts.node_flops`` counts them on a rebuilt graph (torch's
``flop_counter`` formulas on the values' shapes), without torch for the ops a transformer's step is made
of: matmuls and attention.  Any other op that counts FLOPs (a convolution) is run under torch's counter
on meta tensors of its printed shapes, torch imported then and only then.  Ops that count no FLOPs
(pointwise, views, reductions) count 0, as torch counts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fxviz.sources.log.light.nodes import Dim, LightNode, annotation
from fxviz.sources.log.signature import size_at

__all__ = ["FLOP_PACKETS", "node_flops"]

FLOP_PACKETS = frozenset({
    "_convolution", "_efficient_attention_backward", "_efficient_attention_forward", "_flash_attention_backward",
    "_flash_attention_forward", "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward", "_scaled_mm",
    "_slow_conv2d_forward", "addmm", "baddbmm", "bmm", "convolution", "convolution_backward",
    "convolution_overrideable", "cudnn_convolution", "mm",
    # fxviz's own (``_torch.attention_flop_formulas``): CPU attention and the overrideable kernel
    "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_fused_attention_overrideable", "_scaled_dot_product_fused_attention_overrideable_backward",
})
"""The aten ops whose FLOPs are counted (``flop_counter``'s registry and fxviz's attention formulas; the
tests check the list against both)."""

_MATMULS = {"mm": (0, 1), "addmm": (1, 2), "bmm": (0, 1), "baddbmm": (1, 2)}
"""Each matmul's two operands, by argument position."""
_ATTENTION = frozenset({"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                        "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention_for_cpu",
                        "_scaled_dot_product_fused_attention_overrideable"})
"""Attention forwards counted by torch's ``sdpa_flop_count`` on (query, key, value)."""


def _sizes(a: Any, hints: Mapping[str, int]) -> list[int] | None:
    """The sizes of argument ``a`` (a node), at the run's hints; None when unknown."""
    if not isinstance(a, LightNode):
        return None
    ann = annotation(a.annotation)
    if ann is None:
        return None
    return [_dim(d, hints) for d in ann.sizes]


def _dim(d: Dim, hints: Mapping[str, int]) -> int:
    return d if isinstance(d, int) else size_at(d, hints)


def _free(n: LightNode, hints: Mapping[str, int]) -> int | None:
    """FLOPs by torch's formulas for matmuls and attention (None for another op, or an unknown size)."""
    assert n.target is not None
    name, args = n.target.packet, n.args
    try:
        if name in _MATMULS:
            i, j = _MATMULS[name]
            left, right = _sizes(args[i], hints), _sizes(args[j], hints)
            if left is None or right is None:
                return None
            if len(left) == 2 and len(right) == 2:
                return 2 * left[0] * left[1] * right[1]
            if len(left) == 3 and len(right) == 3:
                return 2 * left[0] * left[1] * left[2] * right[2]
            return None
        if name in _ATTENTION:
            q, k, v = (_sizes(x, hints) for x in args[:3])
            if q is None or k is None or v is None or not len(q) == len(k) == len(v) == 4:
                return None
            batch, heads, s_q, d_q = q
            s_k, d_v = k[2], v[3]
            return 2 * batch * heads * s_q * d_q * s_k + 2 * batch * heads * s_q * s_k * d_v
    except (IndexError, ValueError):
        return None
    return None


def node_flops(n: LightNode, hints: Mapping[str, int]) -> int:
    """FLOPs of one op as ``graph_facts.node_flops`` counts them (see the module docstring)."""
    if n.op != "call_function" or n.target is None or n.target.packet not in FLOP_PACKETS \
            or not n.target.qualname.startswith("aten."):
        return 0
    free = _free(n, hints)
    return free if free is not None else _torch_flops(n, hints)


def _torch_flops(n: LightNode, hints: Mapping[str, int]) -> int:
    """torch's count of an op this module has no formula for, on meta tensors of the printed shapes."""
    import torch

    from fxviz import _torch
    from fxviz.core.graph_facts import op_flops

    def value(a: Any) -> Any:
        if isinstance(a, LightNode):
            ann = annotation(a.annotation)
            if ann is None:
                raise ValueError(f"{a.name} has no tensor annotation")
            return _torch.meta_tensor(ann.dtype, tuple(_dim(d, hints) for d in ann.sizes),
                                      tuple(_dim(d, hints) for d in ann.strides))
        if isinstance(a, (list, tuple)):
            return type(a)(value(x) for x in a)
        if isinstance(a, str):
            raise ValueError(f"an argument it does not read: {a}")
        return a

    target: Any = torch.ops
    for part in n.target.qualname.split(".") if n.target is not None else ():
        target = getattr(target, part)
    return op_flops(target, value(n.args), {k: value(v) for k, v in n.kwargs.items()})
