"""Tiny model pairs for the diff tests (tests/test_diff.py), importable by the log-writing
subprocesses too: a two-block MLP with or without ``torch.utils.checkpoint`` on block 1, or with
one extra op inserted before block 0's second projection."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

__all__ = ["Block", "Net", "net", "DIM", "BATCH", "LOG_SCRIPT"]

DIM = 16
BATCH = 8


class Block(nn.Module):
    """Linear -> GELU -> [x * 0.5] -> Linear, a residual, and a scale (a ``mul`` of its own)."""

    def __init__(self, extra: bool = False) -> None:
        super().__init__()
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * DIM, DIM)
        self.extra = extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.act(self.fc1(x))
        if self.extra:  # the one inserted op, before the projection
            h = h * 0.5
        return x + self.fc2(h) * 0.5


class Net(nn.Module):
    def __init__(self, checkpointed: bool = False, extra: bool = False) -> None:
        super().__init__()
        self.b0 = Block(extra)
        self.b1 = Block()
        self.checkpointed = checkpointed

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.b0(x)
        x = checkpoint(self.b1, x, use_reentrant=False) if self.checkpointed else self.b1(x)
        return x.sum()


def net(checkpointed: bool = False, extra: bool = False) -> tuple[Net, torch.Tensor]:
    """The model (same weights for every variant) and its input."""
    torch.manual_seed(0)
    return Net(checkpointed, extra), torch.randn(BATCH, DIM)


LOG_SCRIPT = """
import sys, torch
from tests.compile_models import MODELS
from tests.diff_models import net
backend = sys.argv[1]
for variant in sys.argv[2].split(","):
    if variant == "gelu_mlp":
        model, inputs = MODELS["gelu_mlp"]()
    else:
        model, x = net(checkpointed=variant == "checkpointed", extra=variant == "extra")
        inputs = (x,)
    torch.compile(model, backend=backend)(*inputs).backward()
"""
"""A real ``torch.compile`` training step of each listed variant (``plain``, ``checkpointed``,
``extra``, ``gelu_mlp``), in order, under ``argv[1]``'s backend: run it with ``TORCH_TRACE`` set."""
