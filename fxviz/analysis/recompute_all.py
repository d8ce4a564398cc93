"""The ``recompute_all`` strategy: save only graph inputs, recompute everything else.

The floor of activation memory for a partition: the forward hands the backward its graph inputs
(and the outputs of random ops, which must not be redrawn) and the backward recomputes every
other forward op it needs.  Built from torch's own extraction helper, so the graphs are shaped
exactly as torch's partitioners shape theirs.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from .. import _torch
from .._fx import ancestors, output_values

__all__ = ["recompute_all_partition", "drop_dead_random"]


def recompute_all_partition(joint: fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int,
                            static_lifetime_input_indices: list[int] | None = None
                            ) -> tuple[fx.GraphModule, fx.GraphModule]:
    """A partitioner that saves only graph inputs (and random ops' outputs, which must not be
    redrawn) and recomputes every other forward op the backward needs: the floor of activation
    memory.  Built from torch's own extraction helper, so the graphs are as torch would build them.
    """
    nodes = list(joint.graph.nodes)
    outs = output_values(joint)
    bwd_outputs = [o for o in outs[num_fwd_outputs:] if isinstance(o, fx.Node)]
    tangents = {n for n in nodes if n.op == "placeholder" and "tangents" in n.name}
    for n in nodes:
        desc = _torch.node_desc(n)
        if n.op == "placeholder" and desc is not None and _torch.describe_input(desc).kind == "tangent":
            tangents.add(n)
    # forward-only values: not downstream of a tangent
    downstream: set[fx.Node] = set()
    for n in nodes:
        if n in tangents or any(a in downstream for a in n.all_input_nodes):
            downstream.add(n)
    needed = ancestors(bwd_outputs)
    saved: list[fx.Node] = []
    sym: list[fx.Node] = []
    for n in nodes:
        if n not in needed or n in downstream:
            continue
        val = _torch.meta_val(n)
        if n.op == "placeholder":
            (saved if isinstance(val, torch.Tensor) else sym).append(n)
        elif n.op == "call_function" and _torch.is_random(n):
            if isinstance(val, (tuple, list)):
                saved.extend(u for u in n.users if u in needed)
            else:
                saved.append(n)
    fwd, bwd = _torch.extract_fwd_bwd_modules(joint, saved, sym, num_fwd_outputs=num_fwd_outputs)
    drop_dead_random(bwd)
    return fwd, bwd


def drop_dead_random(bwd: fx.GraphModule) -> None:
    """torch's extraction keeps dead random ops (they are impure); in the backward they would only
    burn RNG, so drop the ones nothing reads (fxviz's own partitioners call this), and then what
    only they read (a dropout's input, recomputed for nothing)."""
    erased = False
    for n in reversed(list(bwd.graph.nodes)):
        if n.op == "call_function" and _torch.is_random(n) and not n.users:
            bwd.graph.erase_node(n)
            erased = True
    if erased:
        bwd.graph.eliminate_dead_code()
    bwd.recompile()
