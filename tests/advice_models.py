"""The models advice is checked on, built as their users build them and called as they call them:
a Hugging Face causal LM from a small config with every default left alone (``use_cache`` on, sdpa
attention), a model whose blocks break the graph, and a conv net with batch norm.  The real step
(``advice_run``) imports the very builders the tests trace."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["MODELS", "build", "call"]


def qwen3() -> tuple[nn.Module, torch.Tensor]:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=64)
    return Qwen3ForCausalLM(cfg), torch.randint(0, 128, (2, 16))


class _Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 4 * d)
        self.down = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = nn.functional.gelu(self.up(self.norm(x)))
        torch._dynamo.graph_break()  # as a print, a .item() or an unsupported call would
        return x + self.down(h)


class Broken(nn.Module):
    """A stack of MLP blocks, each with a graph break inside: the break sits in the model's loop, so dynamo
    runs the model's own frame eagerly (embedding, head, loss) and each block half is one graph, run once
    per block."""

    def __init__(self, vocab: int = 128, d: int = 32, n: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList(_Block(d) for _ in range(n))
        self.head = nn.Linear(d, vocab)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        x = self.embed(input_ids)
        for layer in self.layers:
            x = layer(x)
        logits = self.head(x)
        return {"loss": nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten()), "logits": logits}


def broken() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return Broken(), torch.randint(0, 128, (2, 16))


class _ConvBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)  # batch norm follows: no bias, as usual
        self.bn = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.conv2(torch.relu(self.bn(self.conv1(x))))


class ConvNet(nn.Module):
    def __init__(self, c: int = 8, n: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, c, 3, padding=1)
        self.layers = nn.Sequential(*[_ConvBlock(c) for _ in range(n)])
        self.head = nn.Linear(c, classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> dict[str, torch.Tensor]:
        logits = self.head(self.layers(torch.relu(self.stem(images))).mean((2, 3)))
        return {"loss": nn.functional.cross_entropy(logits, labels), "logits": logits}


def convnet() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    return ConvNet(), torch.randn(2, 3, 16, 16)


MODELS = {"qwen3": qwen3, "broken": broken, "convnet": convnet}


def call(name: str, x: torch.Tensor) -> dict[str, Any]:
    """The model's call, as its users make it (keywords; the loss is the model's own)."""
    if name == "convnet":
        return {"images": x, "labels": torch.randint(0, 10, (x.shape[0],), generator=torch.Generator().manual_seed(1))}
    return {"input_ids": x, "labels": x}


def build(name: str) -> tuple[nn.Module, dict[str, Any]]:
    """The model and the keywords it is called with."""
    model, x = MODELS[name]()
    return model, call(name, x)
