"""Tiny models with the loss a user would write, for tests/test_loss_ops.py: each case is (model,
inputs, the ``loss_fn`` handed to fxviz or None for fxviz's default loss, and the user's own step
``user_step(model, *inputs)`` that a real ``torch.compile`` run differentiates)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["CASES", "build"]


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 6)
        self.a = nn.Linear(6, 3)
        self.b = nn.Linear(6, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.relu(self.body(x))
        return self.a(h), self.b(h)


def _mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))


def _sum_both(out: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    a, b = out
    return a.sum() + b.sum()


_TARGET = torch.tensor([0, 2, 1, 0, 2])

# name: (model maker, loss_fn for fxviz (None: its default), the user's own step)
CASES: dict[str, tuple[Callable[[], nn.Module], Callable | None, Callable[..., Any]]] = {
    "mse_0dim": (_mlp, lambda o: o.pow(2).mean(), lambda m, x: m(x).pow(2).mean()),
    "cross_entropy_0dim": (_mlp, lambda o: F.cross_entropy(o, _TARGET), lambda m, x: F.cross_entropy(m(x), _TARGET)),
    "one_element_loss": (_mlp, lambda o: o.sum().reshape(1), lambda m, x: m(x).sum().reshape(1)),
    "default_sum": (_mlp, None, lambda m, x: m(x).sum()),
    "default_sum_of_two_outputs": (TwoHeads, None, lambda m, x: _sum_both(m(x))),
}


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], Callable | None, Callable[..., Any]]:
    make, loss_fn, user_step = CASES[name]
    torch.manual_seed(0)
    return make(), (torch.randn(5, 4),), loss_fn, user_step
