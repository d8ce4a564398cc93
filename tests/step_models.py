"""Small models whose compiled step has several graphs, for the whole-step tests (``tests/test_step_diff.py``,
``tests/test_compiled_step.py``, ``scripts/gpu_check.py``): imported by the tests and by the processes that
run them for real."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.tanh(self.up(x)))


class Body(nn.Module):
    """The decoder stack: with ``split``, a graph break between its blocks (and each block
    checkpointed), so dynamo compiles this module's own frame and names its weights ``layers.0...``
    where the plain step names them ``body.layers.0...``."""

    def __init__(self, split: bool) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Block(), Block()])
        self.split = split

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.split:
            return self.layers[1](self.layers[0](x))
        x = checkpoint(self.layers[0], x, use_reentrant=False)
        torch._dynamo.graph_break()
        return checkpoint(self.layers[1], x, use_reentrant=False)


class Stack(nn.Module):
    def __init__(self, split: bool = False) -> None:
        super().__init__()
        self.embed = nn.Linear(8, 16)
        self.body = Body(split)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(torch.tanh(self.embed(x)))).sum()


def stack(split: bool) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return Stack(split), (torch.randn(4, 8),)


def tiny_llama(checkpointed: bool) -> tuple[nn.Module, torch.Tensor]:
    """A two-layer Llama from a small config (``transformers``), in training mode, with Hugging Face's
    gradient checkpointing when ``checkpointed`` (enabled as users do: the model then warns once that
    ``use_cache`` is off, and that warning is where dynamo breaks the step in two); and token ids.

    With ``kernels`` installed (transformers >= 5.x depends on it) each attention layer's forward is wrapped
    by the hub-kernel layer, whose context variable dynamo refuses to trace inside a checkpoint unless
    ``torch._dynamo.config.skip_fwd_side_effects_in_bwd_under_checkpoint`` is set: a script compiling the
    checkpointed model sets it (``tests/test_step_diff.py``), or each decoder layer runs eagerly."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    if checkpointed:
        model.gradient_checkpointing_enable()
    return model, torch.randint(0, 128, (2, 16))


class BreakBlock(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.ln, self.lin, self.out = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.gelu(self.lin(self.ln(x)))
        torch._dynamo.graph_break()
        return x + self.out(h)


class BreakNet(nn.Module):
    """A graph break inside every block, in a loop (dynamo then runs the loop and the head eagerly): several
    graphs and eager code between them (tests/test_compiled_step.py, scripts/gpu_check.py)."""

    def __init__(self, d: int = 32, n: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([BreakBlock(d) for _ in range(n)])
        self.head = nn.Linear(d, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for b in self.blocks:
            x = b(x)
        return self.head(x).logsumexp(-1).mean()
