"""The ``recompute_all`` strategy: save only graph inputs, recompute everything else.

The floor of activation memory for a partition: the forward hands the backward its graph inputs
(and the outputs of ops that draw random values, which must not be redrawn: not attention at
``dropout_p=0``, which torch tags seeded but which draws nothing) and the backward recomputes every
other forward op it needs.  Built from torch's own extraction helper, so the graphs are shaped
exactly as torch's partitioners shape theirs.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz.core.fx_facts import ancestors
from fxviz.core.graph_facts import gradient_slots, redraws_if_recomputed, tangent_dependent

__all__ = ["recompute_all_partition", "drop_dead_random"]


def recompute_all_partition(joint: fx.GraphModule, _joint_inputs: Any, *, num_fwd_outputs: int,
                            static_lifetime_input_indices: list[int] | None = None
                            ) -> tuple[fx.GraphModule, fx.GraphModule]:
    """A partitioner that saves only graph inputs (and the outputs of ops that draw random values,
    which must not be redrawn) and recomputes every other forward op the backward needs: the floor of activation
    memory.  Built from torch's own extraction helper, so the graphs are as torch would build them.
    """
    nodes = list(joint.graph.nodes)
    bwd_outputs = [o for o in gradient_slots(joint, num_fwd_outputs) if isinstance(o, fx.Node)]
    downstream = tangent_dependent(joint)  # the rest are forward values
    needed = ancestors(bwd_outputs)
    saved: list[fx.Node] = []
    sym: list[fx.Node] = []
    for n in nodes:
        if n not in needed or n in downstream:
            continue
        val = _torch.meta_val(n)
        if n.op == "placeholder":
            (saved if isinstance(val, torch.Tensor) else sym).append(n)
        elif n.op == "call_function" and redraws_if_recomputed(n):
            if isinstance(val, (tuple, list)):
                saved.extend(u for u in n.users if u in needed)
            else:
                saved.append(n)
    fwd, bwd = _torch.extract_fwd_bwd_modules(joint, saved, sym, num_fwd_outputs=num_fwd_outputs)
    drop_dead_random(bwd)
    return _torch.replay_rng(joint, fwd, bwd, len(sym))  # random ops torch replays (checkpointed) draw as before


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
