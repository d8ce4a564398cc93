"""Tiny models whose real ``torch.compile`` training step fxviz's inductor capture is checked
against (tests/test_inductor.py).  Each returns its scalar loss, so the compiled step is exactly
``model(*inputs)`` then ``.backward()``, the step fxviz traces."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fxviz import examples

__all__ = ["MODELS"]


class SumLoss(nn.Module):
    """``net(x).sum()``: the loss fxviz uses by default, inside the model."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).sum()


class ConvNet(nn.Module):
    """Conv2d -> BatchNorm2d -> SiLU -> Conv2d -> Linear (the issue's second model)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.act = nn.SiLU()
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.fc = nn.Linear(4 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv2(self.act(self.bn(self.conv1(x))))
        return self.fc(h.flatten(1)).sum()


def gelu_mlp() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    model = SumLoss(nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4)))
    return model, (torch.randn(2, 8),)


def conv_net() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return ConvNet().eval(), (torch.randn(2, 3, 6, 6),)


def mini_gpt() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    model, inputs = examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=8, batch=2, seq=8)
    return model.eval(), inputs


def two_blocks() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """Two attention blocks (issue 32's model: 32 activations under aot_eager's default_partition,
    28 in the real step)."""
    model, inputs = examples.mini_gpt(n_layer=2, n_embd=16, n_head=2, vocab=32, block_size=8, batch=2, seq=8)
    return model.eval(), inputs


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "gelu_mlp": gelu_mlp, "conv_net": conv_net, "mini_gpt": mini_gpt, "two_blocks": two_blocks,
}
