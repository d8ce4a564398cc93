"""A partition as the code inductor makes of it: lowered now from a model's graphs
(``_torch.lowering``), or the log's own ``inductor_output_code`` for the partition a logged run used;
with the maps the step simulation needs (which output is the user's, which tangent belongs to which
output, which inputs are parameters) read from torch's AOT descriptors, and the extern kernels'
inner allocations measured where their device is here (``analysis.real.probe``).

Lowering is the costly part (a few seconds per graph on 2 cores, see ``_torch.lowering``): the
caller caches one ``CompiledGraph`` per graph and strategy.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fxviz import _torch
from fxviz._torch.lowering import LoweredGraph, LoweringFailed, lower_partition
from fxviz.analysis.memory.code_text import CodeText
from fxviz.analysis.memory.compiled_step import GraphCode, grad_copies
from fxviz.analysis.memory.storage import crossing_inputs
from fxviz.analysis.real.probe import line_peaks
from fxviz.analysis.strategy.partition import Partition
from fxviz.sources.graphs import JointGraph
from fxviz.sources.roles import STATE_ROLES

__all__ = ["CompiledGraph", "compiled_graph", "from_code"]


@dataclass
class CompiledGraph:
    """One partition as inductor's code, or why there is none (``error``).

    ``origins``: (forward, backward) buffer -> the partition's FX nodes it computes, primary first;
    ``layout_copy_bytes``: copies the forward's code saves where the partition saves a parameter or an
    input as itself (channels-last weights on CPU); ``source``: where the code came from."""

    code: GraphCode | None
    origins: tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]] = field(default_factory=lambda: ({}, {}))
    layout_copy_bytes: int = 0
    seconds: float = 0.0
    probed: bool = False
    source: str = "lowered"
    error: str | None = None


def _joint_node(graph: JointGraph, name: str) -> torch.fx.Node | None:
    return next((n for n in graph.gm.graph.nodes if n.name == name), None)


def _maps(graph: JointGraph, p: Partition, forward: CodeText, backward: CodeText | None
          ) -> tuple[dict[int, int], dict[str, int], frozenset[int]]:
    """(user output -> forward output position, tangent input -> user output, parameter positions)."""
    user: dict[int, int] = {}
    out = next(n for n in graph.gm.graph.nodes if n.op == "output")
    for k, desc in enumerate(_torch.output_descs(out)[:graph.num_fwd_outputs]):
        kind = _torch.describe_output(desc)
        if kind.kind == "user" and kind.index is not None:
            user[kind.index] = k
    tangents: dict[str, int] = {}
    names = [n for n in (backward.inputs if backward is not None else []) if n not in backward.int_inputs] \
        if backward is not None else []
    order = 0
    for name in names:
        node = _joint_node(graph, p.bw_to_joint.get(name, name))
        info = graph.info.get(node.name) if node is not None else None
        if info is None or info.role != "tangent":
            continue
        desc = _torch.node_desc(node) if node is not None else None
        of = _torch.describe_input(desc).tangent_of if desc is not None else None
        index = _torch.describe_output(of).index if of is not None else None
        tangents[name] = index if index is not None else order
        order += 1
    parameters = set()
    for position, name in enumerate(forward.inputs):
        info = graph.info.get(p.fw_to_joint.get(name, name))
        if info is not None and info.role in STATE_ROLES:
            parameters.add(position)
    return user, tangents, frozenset(parameters)


def _layout_copies(graph: JointGraph, p: Partition, forward: CodeText) -> int:
    """Bytes of the buffers the forward's code returns for the backward where the partition's forward
    returns a placeholder (a parameter or an input saved as itself) of the same shape."""
    assert p.forward is not None
    outputs = list(p.forward.graph.nodes)[-1].args[0]
    crossing = crossing_inputs(graph)
    total = 0
    for node, expr in list(zip(outputs, forward.returned))[graph.num_fwd_outputs:]:
        if not isinstance(node, torch.fx.Node) or node.op != "placeholder" or expr == node.name:
            continue
        if p.fw_to_joint.get(node.name, node.name) in crossing or expr not in forward.layouts:
            continue
        layout, val = forward.layouts[expr], _torch.meta_val(node)
        if isinstance(val, torch.Tensor) and tuple(int(s) for s in val.shape) == layout.size:
            total += layout.nbytes
    return total


def _device_here(text: CodeText) -> str | None:
    """The device the code runs on, when this process has it (then its extern calls can be probed)."""
    device = text.device
    if device == "cpu" or (device == "cuda" and torch.cuda.is_available()):
        return device
    return None


def from_code(graph: JointGraph, p: Partition, forward: str, backward: str | None, *,
              lowered: tuple[LoweredGraph, LoweredGraph | None] | None = None, probe: bool = True,
              source: str = "lowered") -> CompiledGraph:
    """A ``CompiledGraph`` from the code text (IR facts from ``lowered`` when the code was lowered here)."""
    fw = CodeText(forward)
    bw = CodeText(backward) if backward is not None else None
    user, tangents, parameters = _maps(graph, p, fw, bw)
    device = _device_here(fw) if probe else None
    code = GraphCode(graph.index, fw, bw, graph.num_fwd_outputs, user, tangents, parameters,
                     dict(lowered[0].buffers) if lowered else {},
                     dict(lowered[1].buffers) if lowered and lowered[1] else {},
                     line_peaks(fw, device) if device else {},
                     line_peaks(bw, device) if device and bw is not None else {},
                     grad_copies(fw, bw, parameters) if bw is not None else ())
    origins = (dict(lowered[0].origins), dict(lowered[1].origins) if lowered[1] else {}) if lowered else ({}, {})
    seconds = (lowered[0].seconds + (lowered[1].seconds if lowered[1] else 0.0)) if lowered else 0.0
    return CompiledGraph(code, origins, _layout_copies(graph, p, fw), seconds, device is not None, source)


def compiled_graph(graph: JointGraph, p: Partition, probe: bool = True) -> CompiledGraph:
    """``p`` lowered by inductor now (its graphs as the user's ``torch.compile`` step would compile
    them), or a ``CompiledGraph`` whose ``error`` says why not."""
    if p.error is not None or p.forward is None:
        return CompiledGraph(None, error=p.error or "no forward graph")
    try:
        with _torch.quiet_torch(silent=True):
            lowered = lower_partition(p.forward, p.backward, graph.num_fwd_outputs,
                                      graph.static_lifetime_input_indices)
    except LoweringFailed as exc:
        return CompiledGraph(None, error=f"inductor could not lower it here: {exc}")
    fw, bw = lowered
    return from_code(graph, p, fw.code, bw.code if bw is not None else None, lowered=lowered, probe=probe)

