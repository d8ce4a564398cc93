"""The inputs AOTAutograd's runtime hands a partition's graphs, built on real tensors: the one place
both ``gradients`` (which checks a partition's gradients) and ``replay`` (which measures its bytes)
assemble them, so the two run a partition the same way.

The forward takes the capture's values by joint name (an effect token, which ``with_effects`` threads
through ops with side effects, an empty tensor).  The backward takes the saved values by place, in
the forward's order (a value the partitioner made, an RNG state ``forward:NAME``, has no joint name:
its place), a tangent of ones for the loss, and its own token.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.strategy.partition import Partition
from fxviz.core.errors import FxvizError
from fxviz.sources.graphs import JointGraph

__all__ = ["is_token", "token", "forward_args", "backward_args"]


def is_token(n: fx.Node) -> bool:
    """An effect token (e.g. ``_linalg_check_errors`` in ``linalg.cholesky``): the runtime feeds it an
    empty tensor."""
    desc = _torch.node_desc(n)
    return desc is not None and _torch.describe_input(desc).kind == "token"


def token() -> torch.Tensor:
    return torch.empty(0)


def _detached(joint: str, v: Any) -> Any:
    return v.detach() if isinstance(v, torch.Tensor) else v


def forward_args(part: Partition, values: dict[str, Any],
                 prepare: Callable[[str, Any], Any] = _detached) -> list[Any]:
    """The forward graph's inputs: ``values`` by joint name, each through ``prepare(joint, value)``
    (default: detached; a caller that lets the graph update buffers in place hands clones)."""
    assert part.forward is not None
    args: list[Any] = []
    for n in part.forward.graph.nodes:
        if n.op != "placeholder":
            continue
        joint = part.fw_to_joint.get(n.name, n.name)
        if joint not in values:
            if not is_token(n):
                raise FxvizError(f"no value for the forward graph's input {joint}", "trace the model again")
            args.append(token())
        else:
            args.append(prepare(joint, values[joint]))
    return args


def backward_args(graph: JointGraph, part: Partition, saved_out: list[Any]) -> list[Any]:
    """The backward graph's inputs from what its forward returned past the model's outputs."""
    assert part.backward is not None
    handed = dict(zip(part.saved, saved_out))
    args: list[Any] = []
    position = 0
    for n in part.backward.graph.nodes:
        if n.op != "placeholder":
            continue
        joint = part.bw_to_joint.get(n.name, n.name)
        info = graph.info.get(joint)
        if joint not in handed and is_token(n):
            args.append(token())
        elif info is not None and info.role == "tangent":
            fake = _torch.meta_val(n)
            args.append(torch.ones(fake.shape, dtype=fake.dtype, device=fake.device))
        else:
            args.append(handed[joint] if joint in handed else saved_out[position])
            position += 1
    return args
