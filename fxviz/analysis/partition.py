"""Run one partition strategy on a copy of the joint graph -> ``Partition``.

(Interface first: the implementation lands in the next commit.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.fx as fx

__all__ = ["Partition"]


@dataclass
class Partition:
    """What one strategy did with a joint graph.  Node names are always joint-graph names.

    ``saved``: joint nodes whose values the backward reads from the forward, in torch's order
    (the forward graph's outputs after the first ``num_fwd_outputs``), tensors and SymInts alike.
    ``recomputed``: joint forward ops that appear (again) in the backward graph.
    ``removed``: joint nodes that appear in neither graph (dead code).
    ``fw_to_joint`` / ``bw_to_joint``: forward/backward graph node name -> joint node name.
    ``error``: why the strategy failed (then forward/backward are None and the sets are empty).
    """

    strategy: str
    label: str
    forward: fx.GraphModule | None
    backward: fx.GraphModule | None
    saved: list[str] = field(default_factory=list)
    recomputed: set[str] = field(default_factory=set)
    removed: set[str] = field(default_factory=set)
    fw_to_joint: dict[str, str] = field(default_factory=dict)
    bw_to_joint: dict[str, str] = field(default_factory=dict)
    caller: str = ""
    error: str | None = None
    seconds: float = 0.0
