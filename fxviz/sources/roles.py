"""Give every joint-graph node its role, phase, real name, module path and source line.

Pure bookkeeping over torch's node metadata (read through ``fxviz._torch``): no tracing here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.fx as fx
from torch._ops import OpOverload, OpOverloadPacket

from fxviz import _torch
from fxviz.core.fx_facts import output_values
from fxviz.core.graph_facts import innermost_frame, is_tangent, tangent_dependent
from fxviz.sources.role_names import (
    CALLER_INPUT_ROLES,
    CHECKPOINT_POLICIES,
    INPUT_ROLES,
    LIFTED_STATE_ROLES,
    PARAMETER_ROLES,
    PHASES,
    ROLES,
    STATE_ROLES,
)

__all__ = ["ROLES", "PHASES", "STATE_ROLES", "LIFTED_STATE_ROLES", "PARAMETER_ROLES", "CALLER_INPUT_ROLES",
           "INPUT_ROLES", "NodeInfo", "InputName", "classify_nodes", "input_roles", "role_counts", "short_op",
           "tensor_facts", "symbolic_shape", "CHECKPOINT_POLICIES"]


@dataclass(frozen=True)
class InputName:
    """What fxviz knows about one flat example input: its role and its real name."""

    role: str  # primal | parameter | buffer
    qualname: str


@dataclass(frozen=True)
class NodeInfo:
    """One row of ``Trace.nodes``."""

    name: str
    op: str
    target: str
    short_op: str
    role: str
    phase: str
    qualname: str | None
    module: str | None
    shape: tuple[int, ...] | None
    dtype: str | None
    bytes: int | None
    source: str | None
    source_code: str | None
    seq_nr: int | None
    checkpoint_policy: str | None = None  # must_save / prefer_save / must_recompute / prefer_recompute
    checkpoint_region: int | None = None  # torch's ac_graph_id: which checkpoint call the op ran in
    symbolic_shape: str | None = None  # under dynamic shapes: the size as torch traced it, e.g. "[s77, 16]"
    note: str | None = None  # a log's op this torch lacks: "custom op, not registered here: shapes from the log"


def role_counts(infos: Iterable[NodeInfo]) -> dict[str, int]:
    """Nodes per role, every role present (0 when none): the one definition of a joint graph's
    *forward ops* and *backward ops* (roles ``forward`` / ``backward``: a forward output is an
    ``output``, a parameter's gradient a ``gradient``, not counted among them).  The ops of a
    partition's forward or backward graph are another fact: ``graph_facts.graph_op_count``."""
    counts = Counter(i.role for i in infos)
    return {r: counts.get(r, 0) for r in ROLES}


def short_op(node: fx.Node) -> str:
    """``aten.convolution_backward.default`` -> ``convolution_backward``."""
    if node.op in ("placeholder", "output", "get_attr"):
        return node.op
    target = node.target
    if isinstance(target, OpOverload):
        return target.overloadpacket.__name__
    if isinstance(target, OpOverloadPacket):
        return target.__name__
    return getattr(target, "__name__", str(target))


def _concrete(v: Any) -> int:
    """A shape entry as an int, evaluating symbolic sizes at their example value."""
    if isinstance(v, torch.SymInt):
        hint = v.node.hint if hasattr(v.node, "hint") else None
        return int(hint) if hint is not None else int(str(v)) if str(v).isdigit() else -1
    return int(v)


def symbolic_shape(value: Any) -> str | None:
    """The traced size of a value when it is symbolic (``"[s77, 16]"``, or ``"s77"`` for a SymInt);
    None when every size is a plain int (then ``shape`` says it all)."""
    if isinstance(value, torch.SymInt):
        return str(value)
    if isinstance(value, torch.Tensor) and any(isinstance(s, torch.SymInt) for s in value.shape):
        return "[" + ", ".join(str(s) for s in value.shape) + "]"
    if isinstance(value, (tuple, list)):
        parts = [symbolic_shape(v) for v in value]
        if any(parts):
            return "(" + ", ".join(p or "-" for p in parts) + ")"
    return None


def tensor_facts(value: Any) -> tuple[tuple[int, ...] | None, str | None, int | None]:
    """(shape, dtype, numel*itemsize) of a node's value; tuples sum their tensors' bytes."""
    if isinstance(value, torch.Tensor):
        shape = tuple(_concrete(s) for s in value.shape)
        numel = 1
        for s in shape:
            numel *= max(s, 0)
        return shape, str(value.dtype).replace("torch.", ""), numel * value.element_size()
    if isinstance(value, (tuple, list)):
        total = 0
        tensors = [v for v in value if isinstance(v, torch.Tensor)]
        for t in tensors:
            total += tensor_facts(t)[2] or 0
        return None, None, total if tensors else None
    return None, None, None


def _module_of(stack: list[tuple[str, str, Any]], module_paths: Mapping[str, str]) -> str | None:
    if not stack:
        return None
    key, path, _ = stack[-1]
    if key in module_paths:
        return module_paths[key]
    return _torch.module_path_from_stack_entry(path) or None


def input_roles(gm: fx.GraphModule, input_names: Mapping[int, InputName],
                primal_param_targets: Mapping[str, InputName] | None = None) -> dict[str, tuple[str, str | None]]:
    """Placeholder name -> (role, real name): from its AOT descriptor, else its position in
    ``input_names``; a tangent is a tangent whatever it is described as."""
    out: dict[str, tuple[str, str | None]] = {}
    for i, ph in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        desc = _torch.node_desc(ph)
        kind = _torch.describe_input(desc) if desc is not None else None
        out[ph.name] = ("tangent", None) if is_tangent(ph) else _input_role(kind, input_names, primal_param_targets, i)
    return out


def classify_nodes(
    gm: fx.GraphModule,
    num_fwd_outputs: int,
    input_names: Mapping[int, InputName],
    constant_names: Mapping[str, str],
    module_paths: Mapping[str, str],
    primal_param_targets: Mapping[str, InputName] | None = None,
    user_output_names: Mapping[int, str] | None = None,
    *,
    phases: Mapping[str, str] | None = None,
    modules: Mapping[str, str] | None = None,
) -> dict[str, NodeInfo]:
    """Role, phase and names of every node of a joint (or forward-only) graph.

    ``input_names`` maps a ``PlainAOTInput`` index to its role and real name; ``constant_names``
    maps a ``get_attr`` target to the parameter/buffer it holds; ``module_paths`` maps dynamo's
    module key (``id(module)``) to the module's qualified name.  A graph without torch's meta
    (one read from a log) passes what fxviz worked out as data: ``phases`` (op name ->
    ``forward``/``backward``) and ``modules`` (op name -> module path; an op not in it has none).
    """
    nodes = list(gm.graph.nodes)
    output = nodes[-1]
    placeholder_role = input_roles(gm, input_names, primal_param_targets)
    tangents = [n for n in nodes if n.op == "placeholder" and placeholder_role[n.name][0] == "tangent"]

    out_args = output_values(gm)
    out_descs = _torch.output_descs(output)
    output_role: dict[str, tuple[str, str | None]] = {}
    for j, arg in enumerate(out_args):
        if not isinstance(arg, fx.Node) or arg.op != "call_function":
            continue
        okind = _torch.describe_output(out_descs[j]) if j < len(out_descs) else None
        if j < num_fwd_outputs:
            qual = _output_name(okind, input_names, primal_param_targets, j, user_output_names or {})
            output_role.setdefault(arg.name, ("output", qual))
        else:
            qual = None
            if okind is not None and okind.of is not None:
                qual = _input_role(okind.of, input_names, primal_param_targets, None)[1]
            output_role[arg.name] = ("gradient", qual)

    after_tangent = {n.name for n in tangent_dependent(gm)}  # untagged ops: torch's own split
    seq_module: dict[int, str | None] = {}
    infos: dict[str, NodeInfo] = {}
    for n in nodes:
        if n.op == "call_function" and _torch.partitioner_tag(n) in (None, "is_forward", "must_be_in_forward"):
            s = _torch.seq_nr(n)
            if s is not None and s not in seq_module:
                seq_module[s] = modules.get(n.name) if modules is not None else _module_of(_torch.module_stack(n),
                                                                                          module_paths)

    for n in nodes:
        shape, dtype, nbytes = tensor_facts(_torch.meta_val(n))
        qual = None
        module: str | None = None
        if n.op == "placeholder":
            role, qual = placeholder_role[n.name]
            phase = "backward" if role == "tangent" else "forward"
        elif n.op == "get_attr":
            role, phase = "constant", "forward"
            qual = constant_names.get(str(n.target))
        elif n.op == "output":
            role, phase = "output", "backward" if tangents else "forward"
        else:
            phase = phases[n.name] if phases is not None and n.name in phases else _phase(n, after_tangent)
            role = phase
            if n.name in output_role:
                role, qual = output_role[n.name]
            if modules is not None:  # a backward op outside them: the forward op of its seq_nr's
                module = modules.get(n.name)
                if module is None and phase == "backward":
                    module = seq_module.get(_torch.seq_nr(n) or -1)
            elif phase == "forward":
                module = _module_of(_torch.module_stack(n), module_paths)
            else:
                module = _module_of(_torch.fwd_module_stack(n), module_paths)
                if module is None:
                    module = seq_module.get(_torch.seq_nr(n) or -1)
            if module is None and modules is None and _made_by_pass(n):
                module = _shared_module([infos[a.name].module for a in n.all_input_nodes if a.name in infos])
            if qual is None:
                qual, module = _in_graph_update(n, placeholder_role, module)
        source, code = innermost_frame(_torch.stack_trace(n))
        infos[n.name] = NodeInfo(
            name=n.name, op=n.op, target=_target_str(n), short_op=short_op(n), role=role, phase=phase,
            qualname=qual, module=module, shape=shape, dtype=dtype, bytes=nbytes, source=source,
            source_code=code, seq_nr=_torch.seq_nr(n), checkpoint_policy=_torch.checkpoint_policy(n),
            checkpoint_region=_torch.checkpoint_region(n), symbolic_shape=symbolic_shape(_torch.meta_val(n)),
        )
    return infos


def _made_by_pass(n: fx.Node) -> bool:
    """An op a graph pass made after tracing, which records no place of its own: inductor's joint-graph
    pattern rewrites (a ViT's eager attention becomes ``_scaled_dot_product_flash_attention_for_cpu``)
    leave no stack trace, module stack or ``seq_nr`` on the ops they insert."""
    return (n.op == "call_function" and _torch.stack_trace(n) is None and _torch.seq_nr(n) is None
            and not _torch.module_stack(n) and not _torch.fwd_module_stack(n))


def _shared_module(modules: list[str | None]) -> str | None:
    """The deepest module holding every one of ``modules`` that is set (a pass-made op's inputs): where
    the op it replaced ran.  None when none is set or they share no module."""
    paths = [m.split(".") for m in modules if m]
    if not paths:
        return None
    shared = paths[0]
    for p in paths[1:]:
        k = 0
        while k < min(len(shared), len(p)) and shared[k] == p[k]:
            k += 1
        shared = shared[:k]
    return ".".join(shared) or None


def _in_graph_update(n: fx.Node, placeholder_role: Mapping[str, tuple[str, str | None]], module: str | None
                     ) -> tuple[str | None, str | None]:
    """The name of an input an op writes in the graph (inductor keeps input mutations as ``copy_``
    into the input, a BatchNorm's running statistics among them, where aot_eager returns the new
    value as an output): ``"<input> (updated in place)"``, in the module that owns a buffer."""
    if n.target is not torch.ops.aten.copy_.default or not n.args or not isinstance(n.args[0], fx.Node):
        return None, module
    role, qual = placeholder_role.get(n.args[0].name, (None, None))
    if role not in CALLER_INPUT_ROLES or qual is None:
        return None, module
    if module is None and role in LIFTED_STATE_ROLES and "." in qual:
        module = qual.rsplit(".", 1)[0]
    return f"{qual} (updated in place)", module


def _phase(n: fx.Node, after_tangent: set[str]) -> str:
    """An op's phase by its partitioner tag, else by whether it reads a tangent (torch's split)."""
    tag = _torch.partitioner_tag(n)
    if tag in ("is_backward", "must_be_in_backward"):
        return "backward"
    if tag in ("is_forward", "must_be_in_forward"):
        return "forward"
    return "backward" if n.name in after_tangent else "forward"


def _target_str(n: fx.Node) -> str:
    t = n.target
    if isinstance(t, OpOverload):
        return str(t)
    return getattr(t, "__name__", str(t)) if callable(t) else str(t)


def _input_role(kind: Any, input_names: Mapping[int, InputName],
                param_targets: Mapping[str, InputName] | None, position: int | None
                ) -> tuple[str, str | None]:
    if kind is None:
        name = input_names.get(position) if position is not None else None
        return (name.role, name.qualname) if name else ("primal", None)
    if kind.kind == "tangent":
        return "tangent", None
    if kind.kind in ("param", "buffer"):
        target = kind.target or ""
        if param_targets and target in param_targets:
            return param_targets[target].role, param_targets[target].qualname
        return ("parameter" if kind.kind == "param" else "buffer"), target
    if kind.kind == "plain" and kind.index is not None:
        name = input_names.get(kind.index)
        if name is not None:
            return name.role, name.qualname
        return "primal", f"input {kind.index}"
    return "primal", kind.kind


def _output_name(kind: Any, input_names: Mapping[int, InputName],
                 param_targets: Mapping[str, InputName] | None, j: int,
                 user_output_names: Mapping[int, str]) -> str:
    if kind is None:
        return f"output {j}"
    if kind.kind == "mutation" and kind.of is not None:
        return f"{_input_role(kind.of, input_names, param_targets, None)[1]} (updated in place)"
    if kind.kind == "user":
        return user_output_names.get(kind.index, f"output {kind.index}")
    return f"output {j}"
