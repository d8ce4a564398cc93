"""The node-meta keys torch writes and fxviz reads, the AOT descriptors in fxviz's words, and the
other facts read off one node (an op's named argument, dynamo's module path text).  Nothing outside
``fxviz._torch`` reads ``node.meta``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._functorch._aot_autograd import descriptors as _desc
from torch._subclasses.fake_tensor import FakeTensor

# --- node meta keys (the package's modules write them too: module hooks, the log graph builder) --
VAL_KEY = "val"
TAG_KEY = "partitioner_tag"
SEQ_KEY = "seq_nr"
STACK_KEY = "nn_module_stack"
FWD_STACK_KEY = "fwd_nn_module_stack"
TRACE_KEY = "stack_trace"
DESC_KEY = "desc"
RECOMPUTE_KEY = "recompute"  # a torch.utils.checkpoint.CheckpointPolicy, set inside checkpoint regions
AC_GRAPH_ID_KEY = "ac_graph_id"  # which checkpoint call (region) an op was traced in


def meta_val(node: fx.Node) -> Any:
    """The fake tensor (or SymInt, or tuple of them) torch recorded for ``node``."""
    return node.meta.get(VAL_KEY)


def partitioner_tag(node: fx.Node) -> str | None:
    """``is_forward`` / ``is_backward`` / ``must_be_in_forward`` / ``must_be_in_backward``."""
    return node.meta.get(TAG_KEY)


def seq_nr(node: fx.Node) -> int | None:
    value = node.meta.get(SEQ_KEY)
    return int(value) if value is not None else None


def _stack(node: fx.Node, key: str) -> list[tuple[str, str, Any]]:
    """``[(key, path, module_type), ...]`` outermost first."""
    raw = node.meta.get(key) or {}
    out = []
    for k, v in raw.items():
        path, typ = (v[0], v[1]) if isinstance(v, tuple) else (str(v), None)
        # dynamo keys the n-th call of one module "<id>@n" (torch/_dynamo/variables/nn_module.py
        # record_nn_module_stack): the module is still the one with that id
        out.append((str(k).split("@")[0], str(path), typ))
    return out


def module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """The module nesting dynamo recorded for a forward op."""
    return _stack(node, STACK_KEY)


def fwd_module_stack(node: fx.Node) -> list[tuple[str, str, Any]]:
    """For a backward op: the module nesting of the forward op it differentiates."""
    return _stack(node, FWD_STACK_KEY)


def stack_trace(node: fx.Node) -> str | None:
    return node.meta.get(TRACE_KEY)


def checkpoint_policy(node: fx.Node) -> str | None:
    """The checkpoint policy torch tagged ``node`` with (``must_save``, ``prefer_recompute``...),
    as traced (the partitioner later adds ``must_save`` tags of its own on its private copy)."""
    policy = node.meta.get(RECOMPUTE_KEY)
    if policy is None:
        return None
    return str(getattr(policy, "name", policy)).lower()


def checkpoint_region(node: fx.Node) -> int | None:
    """Which ``torch.utils.checkpoint`` call ``node`` ran in (torch's ``ac_graph_id``), or None."""
    value = node.meta.get(AC_GRAPH_ID_KEY)
    return int(value) if value is not None else None


def node_desc(node: fx.Node) -> Any:
    """The AOT descriptor of a placeholder (``PlainAOTInput(idx=0)``, ``TangentAOTInput``...)."""
    return node.meta.get(DESC_KEY)


def output_descs(output_node: fx.Node) -> list[Any]:
    descs = output_node.meta.get(DESC_KEY)
    return list(descs) if descs is not None else []


def is_fake(value: Any) -> bool:
    return isinstance(value, FakeTensor)


# --- descriptors, in fxviz's words ---------------------------------------------------------------
@dataclass(frozen=True)
class InputKind:
    """What a joint-graph placeholder is: ``kind`` in plain/param/buffer/tangent/rng/token/other."""

    kind: str
    index: int | None = None  # PlainAOTInput index into the flat example inputs
    target: str | None = None  # qualified name for Param/BufferAOTInput
    tangent_of: Any = None  # the output descriptor a tangent belongs to


def describe_input(desc: Any) -> InputKind:
    if isinstance(desc, _desc.ParamAOTInput):
        return InputKind("param", target=desc.target)
    if isinstance(desc, _desc.BufferAOTInput):
        return InputKind("buffer", target=desc.target)
    if isinstance(desc, _desc.PlainAOTInput):
        return InputKind("plain", index=desc.idx)
    if isinstance(desc, _desc.TangentAOTInput):
        return InputKind("tangent", tangent_of=desc.output)
    if isinstance(desc, (_desc.ViewBaseAOTInput, _desc.SyntheticBaseAOTInput)):
        return describe_input(desc.base_of)
    name = type(desc).__name__
    if "Philox" in name:
        return InputKind("rng")
    if "Token" in name:
        return InputKind("token")
    return InputKind("other")


@dataclass(frozen=True)
class OutputKind:
    """What a joint-graph output is: ``kind`` in user/mutation/grad/other."""

    kind: str
    index: int | None = None
    of: InputKind | None = None  # the input a gradient or a mutation belongs to


def describe_output(desc: Any) -> OutputKind:
    if isinstance(desc, _desc.PlainAOTOutput):
        return OutputKind("user", index=desc.idx)
    if isinstance(desc, _desc.InputMutationAOTOutput):
        return OutputKind("mutation", of=describe_input(desc.mutated_input))
    if isinstance(desc, _desc.GradAOTOutput):
        return OutputKind("grad", of=describe_input(desc.grad_of))
    return OutputKind("other")


def module_path_from_stack_entry(path: str) -> str:
    """Turn dynamo's ``L['self'].features[0]`` / ``L['self']._modules['features']`` into
    ``features.0`` (used only when the module object cannot be matched by identity)."""
    path = re.sub(r"^[LG]\[['\"][^'\"]+['\"]\]\.?", "", path)
    # a class with its own __getattr__ (diffusers' ModelMixin) makes dynamo spell the submodule
    # dict lookup out: L['fn'].__dict__['_modules']['blocks']
    path = re.sub(r"(^|\.)__dict__\[['\"](_modules|_parameters|_buffers)['\"]\]", r"\1\2", path)
    path = re.sub(r"(^|\.)__dict__\.", r"\1", path)
    path = re.sub(r"\._modules\[['\"]([^'\"]+)['\"]\]", r".\1", "." + path)
    path = re.sub(r"\[['\"]?([^\]'\"]+)['\"]?\]", r".\1", path)
    return path.strip(".")


# --- named arguments of an aten op ------------------------------------------------------------------
def op_argument(node: fx.Node, name: str) -> Any:
    """The value of ``node``'s argument called ``name`` in its op's schema (e.g. the
    ``output_mask`` of ``convolution_backward``: which gradients the op computes), or None."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return None
    for i, arg in enumerate(schema.arguments):
        if arg.name == name:
            if name in node.kwargs:
                return node.kwargs[name]
            return node.args[i] if i < len(node.args) else None
    return None


def attention_flop_formulas() -> dict[Any, Any]:
    """torch's SDPA formulas for the attention kernels ``flop_counter`` has none for: the CPU
    flash kernel torch dispatches ``scaled_dot_product_attention`` to on CPU (and on meta), and the
    ``overrideable`` one of other backends.  They run the same two matmuls (four in the backward,
    plus the scores again) as the CUDA kernels the formulas are registered for, so attention counts
    on CPU as on GPU (without them it counted 0: ``forward_flops`` was the Linears' alone)."""
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    fwd = flop_registry[aten._scaled_dot_product_flash_attention]
    bwd = flop_registry[aten._scaled_dot_product_flash_attention_backward]
    out: dict[Any, Any] = {}
    for name, formula in (("_scaled_dot_product_flash_attention_for_cpu", fwd),
                          ("_scaled_dot_product_flash_attention_for_cpu_backward", bwd),
                          ("_scaled_dot_product_fused_attention_overrideable", fwd),
                          ("_scaled_dot_product_fused_attention_overrideable_backward", bwd)):
        packet = getattr(aten, name, None)
        if packet is not None and packet not in flop_registry:
            out[packet] = _raw(formula)
    return out


def _raw(formula: Any) -> Any:
    """A registered (already shape-wrapped) formula as ``FlopCounterMode``'s ``custom_mapping``
    takes it without wrapping it again."""
    def counted(*args: Any, **kwargs: Any) -> int:
        return int(formula(*args, **kwargs))

    counted._get_raw = True  # type: ignore[attr-defined]
    return counted
