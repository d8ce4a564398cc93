"""Real models built from library configs with random weights (no downloads), kept tiny for a
2-core machine.  The image models come from transformers, not timm/torchvision: on this machine's
package index the only torchvision wheels for torch 2.13 are CUDA builds (their ``_C.so`` needs
``libc10_cuda.so``, and importing them fails on the CPU torch), and timm imports torchvision.
The UNet is written here in diffusers' layout: diffusers' UNet2DModel does not compile on
torch 2.13 CPU (see ``TinyUNet``).

Each builder returns ``(model, inputs)``; without transformers the HF builders raise
``ImportError`` (tests skip with ``pytest.importorskip``)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

__all__ = ["MODELS", "build"]


def _seed(seed: int = 0) -> None:
    torch.manual_seed(seed)


def llama() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    _seed()
    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      attn_implementation="eager", use_cache=False)
    return LlamaForCausalLM(cfg), (torch.randint(0, 128, (1, 16)),)


def t5() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import T5Config, T5ForConditionalGeneration

    _seed()
    cfg = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_decoder_layers=2, num_heads=4,
                   dropout_rate=0.0, use_cache=False, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(cfg)
    ids = torch.randint(1, 128, (1, 12))
    return model, (ids, None, torch.randint(1, 128, (1, 8)))


def gpt2() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    _seed()
    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4, resid_pdrop=0.0,
                     embd_pdrop=0.0, attn_pdrop=0.0, use_cache=False, attn_implementation="eager")
    return GPT2LMHeadModel(cfg), (torch.randint(0, 128, (1, 16)),)


def vit() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ViTConfig, ViTForImageClassification

    _seed()
    cfg = ViTConfig(image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, num_labels=10, attn_implementation="eager")
    return ViTForImageClassification(cfg), (torch.randn(1, 3, 32, 32),)


def convnext() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    _seed()  # ConvNeXt-atto's widths and depths
    cfg = ConvNextConfig(hidden_sizes=[40, 80, 160, 320], depths=[2, 2, 6, 2], num_labels=10)
    return ConvNextForImageClassification(cfg), (torch.randn(1, 3, 64, 64),)


def resnet18() -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ResNetConfig, ResNetForImageClassification

    _seed()  # ResNet-18: basic blocks, two per stage; train mode, so batch norm updates its statistics
    cfg = ResNetConfig(layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512],
                       embedding_size=64, num_labels=10)
    return ResNetForImageClassification(cfg).train(), (torch.randn(2, 3, 32, 32),)


class _ResBlock(nn.Module):
    """Norm, SiLU, conv, plus the time embedding projected to channels (diffusers' ResnetBlock2D)."""

    def __init__(self, cin: int, cout: int, tdim: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(8, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.time_emb_proj = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(8, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(nn.functional.silu(self.norm1(x)))
        h = h + self.time_emb_proj(nn.functional.silu(temb))[:, :, None, None]
        h = self.conv2(nn.functional.silu(self.norm2(h)))
        return self.skip(x) + h


class TinyUNet(nn.Module):
    """A UNet with time embeddings in the layout of diffusers' UNet2DModel: sinusoidal time
    projection, a time-embedding MLP read by every res block, down blocks, a mid block, up blocks
    with skip connections, each stage a ``ModuleList``.  (diffusers' own UNet2DModel cannot be
    captured on torch 2.13 CPU: ``torch.compile(backend="aot_eager")`` fails in its group norm with
    "Expected X.is_contiguous(memory_format)".)"""

    def __init__(self, channels: tuple[int, ...] = (16, 32), tdim: int = 32) -> None:
        super().__init__()
        self.tdim = tdim
        self.time_embedding = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.conv_in = nn.Conv2d(3, channels[0], 3, padding=1)
        self.down_blocks = nn.ModuleList()
        self.downsamplers = nn.ModuleList()
        c = channels[0]
        for cout in channels:
            self.down_blocks.append(_ResBlock(c, cout, tdim))
            self.downsamplers.append(nn.Conv2d(cout, cout, 3, stride=2, padding=1))
            c = cout
        self.mid_block = nn.ModuleList([_ResBlock(c, c, tdim), _ResBlock(c, c, tdim)])
        self.up_blocks = nn.ModuleList()
        for cout in reversed(channels):
            self.up_blocks.append(_ResBlock(c + cout, cout, tdim))
            c = cout
        self.conv_norm_out = nn.GroupNorm(8, c)
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        half = self.tdim // 2
        freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half)
        args = t.float()[:, None] * freqs[None, :]
        temb = self.time_embedding(torch.cat([torch.sin(args), torch.cos(args)], dim=-1))
        h = self.conv_in(x)
        skips = []
        for block, down in zip(self.down_blocks, self.downsamplers):
            h = block(h, temb)
            skips.append(h)
            h = down(h)
        for block in self.mid_block:
            h = block(h, temb)
        for block in self.up_blocks:
            h = nn.functional.interpolate(h, scale_factor=2.0, mode="nearest")
            h = block(torch.cat([h, skips.pop()], dim=1), temb)
        return self.conv_out(nn.functional.silu(self.conv_norm_out(h)))


def unet() -> tuple[nn.Module, tuple[Any, ...]]:
    _seed()
    return TinyUNet(), (torch.randn(2, 3, 16, 16), torch.tensor([10, 500]))


MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "llama": llama, "t5": t5, "gpt2": gpt2, "vit": vit, "convnext": convnext, "resnet18": resnet18, "unet": unet,
}


def build(name: str) -> tuple[nn.Module, tuple[Any, ...]]:
    return MODELS[name]()
