"""Tiny models the advice's log tests compile for real (``TORCH_TRACE``) and trace with fxviz: the
script that logs a run imports the very model the test traces."""

from __future__ import annotations

import torch
import torch.nn as nn

__all__ = ["Stack", "stack", "SCRIPT"]


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Stack(nn.Module):
    """Two identical blocks (a stack advice can checkpoint); ``broken``: a graph break between them."""

    def __init__(self, width: int = 16, broken: bool = False) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block(width) for _ in range(2))
        self.broken = broken

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers[0](x)
        if self.broken:
            torch._dynamo.graph_break()
        return torch.sin(self.layers[1](x)).sum()


def stack(broken: bool = False) -> tuple[Stack, tuple[torch.Tensor]]:
    torch.manual_seed(0)
    return Stack(broken=broken), (torch.randn(8, 16),)


SCRIPT = """
import sys, torch
import torch._functorch.config as functorch_config
from tests.advice_log_models import stack
mode = sys.argv[1]
model, (x,) = stack(broken=mode == "break")
if mode == "budget":
    functorch_config.activation_memory_budget = 0.3
if mode == "checkpoint":
    for block in model.layers:
        forward = block.forward
        block.forward = lambda *a, f=forward: torch.utils.checkpoint.checkpoint(f, *a, use_reentrant=False)
torch.compile(model, backend="aot_eager")(x).backward()
"""
"""One logged run of ``stack``: ``plain``, ``break`` (a graph break), ``budget`` (torch's budget 0.3) or
``checkpoint`` (each block under torch.utils.checkpoint), compiled with aot_eager."""
