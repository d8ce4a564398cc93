"""Leave the user's model and session exactly as we found them.

Tracing runs the model (dynamo executes the forward), which moves BatchNorm running statistics and
the global RNG.  ``preserved(model)`` snapshots everything fxviz could disturb and puts it back,
bitwise, even when the traced code raises.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch
from torch import nn

__all__ = ["preserved", "rng_state", "restore_rng"]


def rng_state() -> dict[str, object]:
    state: dict[str, object] = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, object]) -> None:
    torch.set_rng_state(state["cpu"])  # type: ignore[arg-type]
    if "cuda" in state:
        torch.cuda.set_rng_state_all(state["cuda"])  # type: ignore[arg-type]


@contextlib.contextmanager
def preserved(model: nn.Module | None) -> Iterator[None]:
    """Snapshot parameters, buffers, ``.grad``, ``training`` flags, ``requires_grad`` and RNG."""
    rng = rng_state()
    tensors: list[tuple[torch.Tensor, torch.Tensor]] = []
    grads: list[tuple[torch.Tensor, torch.Tensor | None]] = []
    flags: list[tuple[nn.Module, bool]] = []
    requires: list[tuple[torch.Tensor, bool]] = []
    if model is not None:
        seen: set[int] = set()
        for t in list(model.parameters()) + list(model.buffers()):
            if id(t) in seen:
                continue
            seen.add(id(t))
            if t.device.type != "meta":
                tensors.append((t, t.detach().clone()))
            requires.append((t, t.requires_grad))
        for p in model.parameters():
            grads.append((p, p.grad))
        flags = [(m, m.training) for m in model.modules()]
    try:
        yield
    finally:
        with torch.no_grad():
            for t, saved in tensors:
                if not torch.equal(t, saved) or t.dtype != saved.dtype:
                    t.copy_(saved)
        for t, flag in requires:
            if t.is_leaf and t.requires_grad != flag:
                t.requires_grad_(flag)
        for p, g in grads:
            if p.grad is not g:
                p.grad = g
        for m, flag in flags:
            m.training = flag
        restore_rng(rng)
