"""Awkward but real model structures (issue 27), as factories the CLI can load
(``tests/awkward_models.py:router``): each returns ``(model, example_inputs)``."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["FACTORIES", "router", "frozen", "argmax_beside_loss", "odd_parameters", "int_only_graph",
           "all_eager", "all_eager_scalar", "moe_stack",
           "int_only_function"]


class Router(nn.Module):
    """The first graph has no backward: the gate's output is topk's integer indices, then a break."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(4, 2)
        self.expert = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = self.gate(x).topk(1, dim=-1).indices
        torch._dynamo.graph_break()
        return self.expert(x) * (idx + 1)


class Frozen(nn.Module):
    """No parameter requires grad (and neither does the input): no backward anywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3))
        self.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x)


class ArgmaxBeside(nn.Module):
    """Returns (loss, argmax): an integer output beside the scalar loss."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.fc(x)
        return y.pow(2).mean(), y.argmax(-1)


class OddParameters(nn.Module):
    """A zero-element parameter and a complex one, both on the way to the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.empty = nn.Parameter(torch.zeros(0, 3))
        self.phase = nn.Parameter(torch.randn(3, dtype=torch.complex64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.cat([self.fc(x), self.empty], 0)
        return (y * self.phase).abs()


class IntOnly(nn.Module):
    """The first graph computes only integers (token ids), then a break, then an embedding."""

    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(7, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        k = (ids * 3 + 1) % 7
        torch._dynamo.graph_break()
        return self.emb(k)


class AllEager(nn.Module):
    """A graph break inside the forward's loop: dynamo runs the whole frame as plain Python."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = x @ self.w
            torch._dynamo.graph_break()
        return x


class AllEagerScalar(AllEager):
    """As ``AllEager``, its loss computed in the same skipped frame: no graph at all is left."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(2):
            x = x @ self.w
            torch._dynamo.graph_break()
        return x.sum()


class _MoEBlock(nn.Module):
    """Seven graphs per block, split by breaks: norm, two parameter-free ones (a rotation, a SiLU), a
    mixing projection, the gate's topk, the experts, the output projection (as a HF Mixtral layer splits)."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.gate = nn.Linear(d, 2)
        self.experts = nn.ModuleList(nn.Linear(d, d) for _ in range(2))
        self.mix = nn.Linear(d, d)
        self.out = nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        torch._dynamo.graph_break()
        h = torch.cat([h[:, 1:], -h[:, :1]], -1) * 0.5 + h  # no parameter: a graph reused without any
        torch._dynamo.graph_break()
        h = h * torch.sigmoid(h)  # another one
        torch._dynamo.graph_break()
        h = self.mix(h)
        torch._dynamo.graph_break()
        top, idx = torch.topk(torch.softmax(self.gate(h), -1), 1, dim=-1)
        torch._dynamo.graph_break()
        mixed = sum(e(h) * (top * (idx == i)) for i, e in enumerate(self.experts))
        torch._dynamo.graph_break()
        return x + self.out(mixed)


class MoEStack(nn.Module):
    """Two Mixtral-style blocks in a loop with breaks: every block graph runs twice (reused)."""

    def __init__(self, d: int = 8) -> None:
        super().__init__()
        self.layers = nn.ModuleList(_MoEBlock(d) for _ in range(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _seeded(make: type[nn.Module]) -> nn.Module:
    torch.manual_seed(0)
    return make()


def router() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(Router), (torch.randn(3, 4),)


def frozen() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(Frozen), (torch.randn(2, 4),)


def argmax_beside_loss() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(ArgmaxBeside), (torch.randn(2, 4),)


def odd_parameters() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(OddParameters), (torch.randn(2, 4),)


def int_only_graph() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(IntOnly), (torch.tensor([1, 2, 3]),)


def _int_step(ids: torch.Tensor) -> torch.Tensor:
    return (ids * 3 + 1) % 7


def int_only_function() -> tuple[object, tuple[torch.Tensor, ...]]:
    """A function computing only integers: nothing to differentiate at all."""
    return _int_step, (torch.tensor([1, 2, 3]),)


def moe_stack() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(MoEStack), (torch.randn(3, 8),)


def all_eager() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(AllEager), (torch.randn(2, 4),)


def all_eager_scalar() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _seeded(AllEagerScalar), (torch.randn(2, 4),)


FACTORIES = {"router": router, "frozen": frozen, "argmax_beside_loss": argmax_beside_loss,
             "odd_parameters": odd_parameters, "int_only_graph": int_only_graph, "all_eager": all_eager,
             "moe_stack": moe_stack}
