"""Built-in example models used by the docs, the tests, the notebooks and the CLI.

Each factory returns ``(model, example_inputs)`` where ``example_inputs`` is a tuple, so
``fxviz.trace(model, *example_inputs)`` works.  Every factory has a size knob so tests stay fast;
the defaults are the faithful sizes (AlexNet is torchvision's layout at 224x224).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

__all__ = ["alexnet", "mlp", "resnet_block", "mini_gpt", "pointwise_chain", "EXAMPLES", "get_example"]

Example = tuple[nn.Module, tuple[torch.Tensor, ...]]


def _seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _init(model: nn.Module, seed: int) -> nn.Module:
    """Deterministic weights without touching the global RNG (fxviz never moves the user's RNG)."""
    gen = _seeded(seed)
    with torch.no_grad():
        for p in model.parameters():
            bound = 1.0 / math.sqrt(max(1, p[0].numel() if p.dim() > 1 else p.numel()))
            p.copy_(torch.rand(p.shape, generator=gen) * 2 * bound - bound)
    return model


class AlexNet(nn.Module):
    """torchvision's AlexNet layout (features / avgpool / classifier), written here."""

    def __init__(self, num_classes: int = 1000, width: float = 1.0, dropout: float = 0.5) -> None:
        super().__init__()
        c = [max(1, round(n * width)) for n in (64, 192, 384, 256, 256)]
        hidden = max(1, round(4096 * width))
        self.features = nn.Sequential(
            nn.Conv2d(3, c[0], kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(c[0], c[1], kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(c[1], c[2], kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(c[2], c[3], kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(c[3], c[4], kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(c[4] * 6 * 6, hidden),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(hidden, hidden),
            nn.ReLU(inplace=True),
            nn.Linear(hidden, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def alexnet(batch: int = 1, image: int = 224, width: float = 1.0, num_classes: int = 1000,
            dropout: float = 0.5, seed: int = 0) -> Example:
    """The AlexNet of the original story: batch 1, 3x224x224, training mode (dropout active)."""
    model = _init(AlexNet(num_classes=num_classes, width=width, dropout=dropout), seed)
    x = torch.randn(batch, 3, image, image, generator=_seeded(seed + 1))
    return model, (x,)


class MLP(nn.Module):
    def __init__(self, sizes: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


def mlp(batch: int = 8, sizes: tuple[int, ...] = (32, 64, 64, 10), seed: int = 0) -> Example:
    """A plain multilayer perceptron: Linear / ReLU, the smallest interesting graph."""
    model = _init(MLP(sizes), seed)
    return model, (torch.randn(batch, sizes[0], generator=_seeded(seed + 1)),)


class ResidualBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the identity, then ReLU (ResNet's BasicBlock)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + x)


def resnet_block(batch: int = 2, channels: int = 16, size: int = 16, blocks: int = 1,
                 seed: int = 0) -> Example:
    """``blocks`` residual blocks with BatchNorm in training mode (its running stats are buffers)."""
    model = nn.Sequential(*[ResidualBlock(channels) for _ in range(blocks)])
    _init(model, seed)
    x = torch.randn(batch, channels, size, size, generator=_seeded(seed + 1))
    return model, (x,)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        h = self.n_head
        q = q.view(b, t, h, c // h).transpose(1, 2)
        k = k.view(b, t, h, c // h).transpose(1, 2)
        v = v.view(b, t, h, c // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // h))
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int, dropout: float) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential()
        self.mlp.add_module("c_fc", nn.Linear(n_embd, 4 * n_embd))
        self.mlp.add_module("gelu", nn.GELU())
        self.mlp.add_module("c_proj", nn.Linear(4 * n_embd, n_embd))
        self.mlp.add_module("dropout", nn.Dropout(dropout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class MiniGPT(nn.Module):
    """A GPT-2-shaped decoder: token + position embedding, blocks, final LayerNorm, tied head."""

    def __init__(self, vocab: int, block_size: int, n_layer: int, n_head: int, n_embd: int,
                 dropout: float) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.drop = nn.Dropout(dropout)
        self.h = nn.ModuleList([Block(n_embd, n_head, dropout) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as in GPT-2

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def mini_gpt(n_layer: int = 2, n_embd: int = 64, n_head: int = 4, vocab: int = 128,
             block_size: int = 64, batch: int = 2, seq: int = 32, dropout: float = 0.1,
             device: str | torch.device = "cpu", seed: int = 0) -> Example:
    """A small GPT-2; inputs are token ids and targets, the output is the cross-entropy loss.

    ``mini_gpt(n_layer=12, n_embd=768, n_head=12, vocab=50257, block_size=1024, batch=1, seq=128)``
    is GPT-2 small.  ``device="meta"`` builds it without allocating weights.
    """
    with torch.device(device):
        model = MiniGPT(vocab, block_size, n_layer, n_head, n_embd, dropout)
    if str(device) != "meta":
        _init(model, seed)
    gen = _seeded(seed + 1)
    idx = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    targets = torch.randint(0, vocab, (batch, seq), generator=gen).to(device)
    return model, (idx, targets)


class PointwiseChain(nn.Module):
    """Linear, then a chain of cheap pointwise ops, then Linear: the classic recomputation case."""

    def __init__(self, features: int, depth: int) -> None:
        super().__init__()
        self.depth = depth
        self.inp = nn.Linear(features, features)
        self.out = nn.Linear(features, features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        for _ in range(self.depth):
            h = torch.sin(h) * torch.sigmoid(h) + h.cos()
        return self.out(h)


def pointwise_chain(batch: int = 64, features: int = 128, depth: int = 3, seed: int = 0) -> Example:
    model = _init(PointwiseChain(features, depth), seed)
    return model, (torch.randn(batch, features, generator=_seeded(seed + 1)),)


# the names live in a torch-free module, so the CLI checks a model name before torch loads (issue 26);
# imported here, at the end, so the source lines the golden drawings and tests pin do not move
from fxviz.core.example_names import NAMES  # noqa: E402

EXAMPLES: dict[str, Callable[..., Example]] = {name: globals()[name] for name in NAMES}


def get_example(name: str, **kwargs: object) -> Example:
    """Build a built-in example by name (the CLI's ``MODEL`` argument)."""
    from fxviz.core.errors import ModelSpecError

    try:
        factory = EXAMPLES[name]
    except KeyError:
        raise ModelSpecError(f"no built-in example named {name!r}; known: {', '.join(EXAMPLES)}") from None
    return factory(**kwargs)
