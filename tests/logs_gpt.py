"""Logs of a real 2-block GPT (nn.MultiheadAttention, LayerNorm, a GELU MLP) for the log tests of
issue 23: plain and checkpointed (non-reentrant, and a selective policy), aot_eager and inductor,
an inference-only run, a graph break in the top-level forward.

Each variant is one run of ``_SCRIPT`` (its name the argument) through ``logs_util.cached_log``: made
once, shared by every test that reads it.
"""

from __future__ import annotations

import pathlib

from .logs_util import cached_log, make_log

VARIANTS = ("plain_aot", "ckpt_aot", "sac_aot", "plain_ind", "ckpt_ind", "infer", "break")
"""name -> (backend, what the step does): see ``_SCRIPT``."""

_SCRIPT = r'''
import os, sys, torch, torch.nn as nn, torch.nn.functional as F
from functools import partial
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts, CheckpointPolicy

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.proj = nn.Linear(4 * d, d)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.proj(F.gelu(self.fc(self.ln2(x))))

def _policy(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op == torch.ops.aten.mm.default else CheckpointPolicy.PREFER_RECOMPUTE

class GPT(nn.Module):
    def __init__(self, vocab=32, d=16, heads=2, n=2, ckpt=None, brk=False):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(n))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.ckpt, self.brk = ckpt, brk

    def forward(self, idx, tgt):
        x = self.emb(idx)
        for b in self.blocks:
            if self.brk:  # a break inside the loop: dynamo skips this frame and compiles each block's
                torch._dynamo.graph_break()
            if self.ckpt == "full":
                x = checkpoint(b, x, use_reentrant=False)
            elif self.ckpt == "sac":
                x = checkpoint(b, x, use_reentrant=False,
                               context_fn=partial(create_selective_checkpoint_contexts, _policy))
            else:
                x = b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), tgt.flatten())

CASES = {
    "plain_aot": ("aot_eager", None, False, True), "ckpt_aot": ("aot_eager", "full", False, True),
    "sac_aot": ("aot_eager", "sac", False, True), "plain_ind": ("inductor", None, False, True),
    "ckpt_ind": ("inductor", "full", False, True), "infer": ("aot_eager", None, False, False),
    "break": ("aot_eager", None, True, True),
}

def one(name):
    backend, ckpt, brk, train = CASES[name]
    torch.manual_seed(0)
    model = GPT(ckpt=ckpt, brk=brk)
    idx = torch.randint(0, 32, (2, 8))
    tgt = torch.randint(0, 32, (2, 8))
    step = torch.compile(model, backend=backend)
    if train:
        step(idx, tgt).backward()
    else:
        with torch.no_grad():
            step(idx, tgt)

one(sys.argv[1])
'''


def gpt_log(name: str) -> pathlib.Path:
    """The shared ``TORCH_TRACE`` directory of one variant (``VARIANTS``): read it, never write into it."""
    assert name in VARIANTS, name
    return cached_log(_SCRIPT, name)


def make_gpt_logs(root: pathlib.Path | None = None, names: tuple[str, ...] = VARIANTS, timeout: float = 900
                  ) -> dict[str, pathlib.Path]:
    """The logs of ``names`` by name: shared (``gpt_log``), or copied under ``root`` (``root/<name>``)."""
    if root is None:
        return {n: gpt_log(n) for n in names}
    return {n: make_log(_SCRIPT, root / n, n, timeout=timeout) for n in names}
