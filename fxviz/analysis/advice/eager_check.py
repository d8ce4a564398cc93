"""One eager forward and backward of a changed copy of the model, before fxviz offers the change.

Every way a checkpoint option's code failed on models people bring (a KV cache updated again in the
recompute: eager attention's mask of the old length, selective checkpointing's "invocation index ...
not found in storage") fails in plain eager PyTorch too, in the backward, where a trace does not go:
torch.compile's capture traces the forward and differentiates it, and never runs a recompute.  So a
change is run once, eagerly, on the capture's inputs; the backward's FLOPs are counted on the way
(``FlopCounterMode``), which is what an eager checkpointed region recomputes beyond the plain step.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch.utils.flop_counter import FlopCounterMode

from fxviz import _torch
from fxviz.core.state import private_copy, restore_rng, rng_state
from fxviz.sources.graphs import Capture

if TYPE_CHECKING:  # pragma: no cover
    import torch.nn as nn

__all__ = ["EagerRun", "run_eagerly", "plain_backward_flops"]


@dataclass(frozen=True)
class EagerRun:
    """``error``: the first line of what the run raised (None: it ran); ``backward_flops``: the
    backward's matmul, convolution and attention FLOPs (``FlopCounterMode``'s count)."""

    error: str | None
    backward_flops: int = 0


def run_eagerly(cap: Capture, model: nn.Module) -> EagerRun:
    """``model`` (a copy fxviz made: its gradients are written) run forward and backward on a private
    copy of ``cap``'s inputs, its loss as the capture applies it; the RNG is put back afterwards."""
    assert cap.reduce is not None
    state = rng_state()
    inputs = private_copy(cap.example_inputs)
    try:
        with _torch.quiet_torch(), torch.enable_grad():
            loss = cap.reduce(model(*inputs))
            with FlopCounterMode(display=False) as flops:
                loss.backward()
        return EagerRun(None, int(flops.get_total_flops()))
    except Exception as exc:  # the user's model under the change's code: what it raised, said in one line
        text = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        return EagerRun(text[:240])
    finally:
        restore_rng(state)


def plain_backward_flops(cap: Capture) -> int:
    """The plain step's eager backward FLOPs (a deep copy of the model run, the user's untouched)."""
    assert cap.model is not None
    return run_eagerly(cap, copy.deepcopy(cap.model)).backward_flops
