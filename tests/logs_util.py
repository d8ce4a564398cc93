"""Make TORCH_TRACE logs of real runs for the log tests: every log is written by a fresh Python
process running real torch.compile (nothing is checked in)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

ROOT = pathlib.Path(__file__).resolve().parents[1]

MINI_GPT = """
import sys, torch, fxviz
backend = sys.argv[1]
model, (idx, tgt) = fxviz.examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=16, batch=2,
                                            seq=8, dropout=0.0)
loss = torch.compile(model, backend=backend)(idx, tgt)
loss.backward()
"""

BREAK_AND_RECOMPILE = """
import torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)
    def forward(self, x):
        h = torch.relu(self.a(x))
        if h.sum() > 0:  # a graph break: data-dependent Python
            h = h * 2
        return self.b(h).sum()
torch.manual_seed(0)
m = torch.compile(M(), backend="aot_eager")
m(torch.randn(4, 8)).backward()
m(torch.randn(6, 8)).backward()  # a recompile: another batch size
"""

DISTRIBUTED = """
import os, sys, torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)
    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))).sum()

def main(rank, world, port, mode):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    if mode == "ddp":  # DDP over torch.compile(model), as DDP's docs show it
        model = DDP(torch.compile(Net(), backend="aot_eager"))
    elif mode == "fsdp_forward":  # FSDP2, each block's forward compiled: FSDP's hooks run eagerly around it
        from torch.distributed.fsdp import fully_shard
        model = Net()
        for m in (model.fc1, model.fc2):
            fully_shard(m)
            m.forward = torch.compile(m.forward, backend="aot_eager")
        fully_shard(model)
    else:  # FSDP2: fully_shard each block, then the root, then compile (its docs' order)
        from torch.distributed.fsdp import fully_shard
        model = Net()
        for m in (model.fc1, model.fc2):
            fully_shard(m)
        fully_shard(model)
        model = torch.compile(model, backend="aot_eager")
    x = torch.randn(4 + 2 * rank, 8)  # a different batch size per rank
    model(x).backward()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(main, args=(2, int(sys.argv[2]), sys.argv[1]), nprocs=2)
"""

MISSING_GRADIENTS = """
import torch, torch.nn as nn
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 4)
        self.c = nn.Linear(4, 4)
        self.c.requires_grad_(False)  # frozen: no gradient expected
    def forward(self, x):
        with torch.no_grad():  # a's gradient is cut off
            h = self.a(x)
        return self.c(self.b(h)).sum()
torch.manual_seed(0)
torch.compile(M(), backend="aot_eager")(torch.randn(4, 8)).backward()
"""

INFERENCE_ONLY = """
import torch
m = torch.nn.Linear(4, 4)
with torch.no_grad():
    torch.compile(m, backend="eager")(torch.randn(2, 4))
"""


def backward_by_rank(directory: pathlib.Path) -> dict[int, str]:
    """Each rank's first logged backward graph (``aot_backward_graph``), by the rank in its file's name."""
    import re

    from fxviz.sources.log.reader import ReadStats, read_records

    backward: dict[int, str] = {}
    for f in sorted(directory.iterdir()):
        rank = int(re.search(r"rank_(\d+)_", f.name).group(1))  # type: ignore[union-attr]
        with open(f, "rb") as fh:
            for rec in read_records(fh, ReadStats(), keep=lambda r: r.kind == "aot_backward_graph"):
                if rec.payload:
                    backward.setdefault(rank, rec.payload)
    return backward


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_log(script: str, directory: pathlib.Path, *args: str, timeout: float = 600) -> pathlib.Path:
    """Run ``script`` in a fresh process with ``TORCH_TRACE=directory``; return the directory."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory.parent / (directory.name + "_script.py")
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, TORCH_TRACE=str(directory), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, str(path), *args], env=env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(directory.parent))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return directory

FSDP_BLOCKS = """
import os, sys, torch, torch.nn as nn, torch.distributed as dist, torch.multiprocessing as mp

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.wq = nn.Linear(d, d, bias=False)
        self.w1 = nn.Linear(d, 2 * d)
    def forward(self, x):
        h = x + self.wq(self.norm(x))
        return h + self.w1(torch.tanh(h)).chunk(2, -1)[0]

class Net(nn.Module):
    def __init__(self, d=16, n=2):
        super().__init__()
        self.layers = nn.ModuleDict({str(i): Block(d) for i in range(n)})
    def forward(self, x):
        for b in self.layers.values():
            x = b(x)
        return x.sum()

def main(rank, world, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.fsdp import fully_shard
    torch.manual_seed(0)
    model = Net()
    for b in model.layers.values():  # torchtitan's recipe: compile each block, then shard it
        b.compile(backend="aot_eager", fullgraph=True)
        fully_shard(b)
    fully_shard(model)
    model(torch.randn(4 + 2 * rank, 16)).backward()
    dist.destroy_process_group()

if __name__ == "__main__":
    mp.spawn(main, args=(2, int(sys.argv[1])), nprocs=2)
"""
