"""What torch's activation offloading moves off the device, for the offload option: the saved
activation storages of a partition whose every saved value torch's pass can offload
(``_torch.offloadable``: a view of a saved value is not moved, and keeps its storage on the device).

torch 2.13 offloads only the forward values a joint pass marks ``should_offload``; the option's code
marks every op, so this is what its step moves (``offload_code``).  Nothing in the pass checks the
device: on a CPU step it copies each value to the CPU it is on, and the step holds the same bytes
(measured: 262,144 B held without offloading, 262,140 B with it), so the option is one for a step
whose activations are on an accelerator.
"""

from __future__ import annotations

from fxviz import _torch
from fxviz.analysis.memory.storage import saved_memory
from fxviz.analysis.strategy.partition import Partition
from fxviz.sources.graphs import JointGraph

__all__ = ["offloaded_bytes"]


def offloaded_bytes(graph: JointGraph, p: Partition) -> int:
    """Bytes of ``p``'s saved activation storages that torch's offloading moves to the host (each
    storage once)."""
    assert p.forward is not None
    moved = {p.saved_name(n) for n in _torch.offloadable(p.forward, graph.num_fwd_outputs)}
    return sum(s.nbytes for s in saved_memory(p, graph).storages
               if s.owner == "activation" and all(n in moved for n in s.names))
