"""Every ``TORCH_TRACE`` log the tests read, written by ONE helper: :func:`cached_log` runs a script (Python
source) in a fresh process with ``TORCH_TRACE`` set, as a user's training script runs, and keeps the log.

Each log is made once: cached on disk under ``test-artifacts/logs/<key>/`` (``FXVIZ_TEST_ARTIFACTS``), the key a
hash of the script, its arguments, the environment added to it, the versions of Python, torch, transformers and
kernels, and the text of the repository files the script names (``tests.<module>``; ``fxviz/examples.py`` when it
uses ``fxviz``).  Nothing is checked in: a clean clone makes every log on its first run; a changed model, script or
torch makes a new one.  Workers of one run (pytest-xdist) and threads wait for each other's log (a file lock).

- :func:`cached_log` (or the session fixture ``logged`` in ``tests/conftest.py``): the cached directory, shared by
  every test: read it, never write into it.
- :func:`make_log`: a private copy in the test's own directory, for a test that changes the files.
- :func:`fresh_log`: a run of its own (not cached) with the script beside the log, for pinned output that
  shows the script's path.

Every run has the same environment (``RUN_ENV``): one thread, no AOTAutograd cache (a cache hit logs no joint
graph), no profile-guided dynamism from earlier processes, one inductor compile thread.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.metadata
import json
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Mapping

ROOT = pathlib.Path(__file__).resolve().parents[1]
ARTIFACTS = pathlib.Path(os.environ.get("FXVIZ_TEST_ARTIFACTS", ROOT / "test-artifacts"))
LOGS = ARTIFACTS / "logs"

RUN_ENV = {
    "PYTHONPATH": str(ROOT),
    "OMP_NUM_THREADS": "1",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
    "TORCH_DYNAMO_AUTOMATIC_DYNAMIC_LOCAL_PGO": "0",
    "TORCHINDUCTOR_COMPILE_THREADS": "1",
}
_SCRIPT = "script.py"
_made: dict[str, pathlib.Path] = {}
_made_lock = threading.Lock()


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def _sources(script: str) -> list[pathlib.Path]:
    """The repository files ``script`` runs: the ``tests.<module>`` it names, fxviz's examples."""
    files = [ROOT / "tests" / f"{m}.py" for m in sorted(set(re.findall(r"\btests\.(\w+)", script)))]
    if re.search(r"\bfxviz\b", script):
        files.append(ROOT / "fxviz" / "examples.py")
    return [f for f in files if f.exists()]


def log_key(script: str, args: tuple[str, ...] = (), env: Mapping[str, str] | None = None) -> str:
    """What a log depends on, hashed: the script, its arguments and environment, the versions that
    shape a compile, and the repository files the script runs."""
    import torch

    h = hashlib.sha256()
    parts = [textwrap.dedent(script), json.dumps(list(args)), json.dumps(sorted((env or {}).items())),
             sys.version, torch.__version__, _version("transformers"), _version("kernels")]
    for part in parts:
        h.update(part.encode() + b"\0")
    for f in _sources(script):
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def cached_log(script: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 900) -> pathlib.Path:
    """The ``TORCH_TRACE`` directory of ``python script.py *args`` (``env`` added to ``RUN_ENV``), made once
    and shared: read it, never write into it (:func:`make_log` gives a private copy)."""
    key = log_key(script, args, env)
    with _made_lock:
        if key in _made:
            return _made[key]
    base = LOGS / key
    LOGS.mkdir(parents=True, exist_ok=True)
    with open(LOGS / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker or thread making the same log: wait for it
        if not (base / "done").exists():
            shutil.rmtree(base, ignore_errors=True)
            base.mkdir(parents=True)
            _run(script, args, env, base / _SCRIPT, base / "trace", timeout)
            (base / "done").write_text(json.dumps({"args": list(args), "env": dict(env or {})}))
    with _made_lock:
        _made[key] = base / "trace"
    return base / "trace"


def _run(script: str, args: tuple[str, ...], env: Mapping[str, str] | None, path: pathlib.Path,
         trace: pathlib.Path, timeout: float) -> None:
    """Write ``script`` to ``path`` and run it beside it with ``TORCH_TRACE=trace``."""
    path.write_text(textwrap.dedent(script))
    run_env = dict(os.environ, **RUN_ENV, **(env or {}), TORCH_TRACE=str(trace))
    proc = subprocess.run([sys.executable, str(path), *args], env=run_env, capture_output=True, text=True,
                          timeout=timeout, cwd=str(path.parent))
    path.with_suffix(".stderr").write_text(proc.stderr)
    assert proc.returncode == 0, f"the logged run failed ({path} {' '.join(args)}):\n{proc.stderr[-3000:]}"
    trace.mkdir(exist_ok=True)  # a run that compiled nothing still has its (empty) log directory


def make_log(script: str, directory: pathlib.Path, *args: str, timeout: float = 900) -> pathlib.Path:
    """A private copy of ``cached_log(script, *args)`` in ``directory``, for a test that changes the files
    (the records, torch's own, are copied as they are: the script's path in them is the cached run's)."""
    shutil.copytree(cached_log(script, *args, timeout=timeout), directory, dirs_exist_ok=True)
    return directory


def fresh_log(script: str, directory: pathlib.Path, *args: str, timeout: float = 900) -> pathlib.Path:
    """A new run, not cached: the script written to ``<directory>_script.py`` and run there, for output
    that shows the script's path and is pinned (a golden whose line wrapping depends on the path's length)."""
    directory.parent.mkdir(parents=True, exist_ok=True)
    _run(script, args, None, directory.parent / f"{directory.name}_script.py", directory, timeout)
    return directory


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (a Jupyter server's, a process group's)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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

if __name__ == "__main__":  # argv: mode [port]
    from torch.distributed.elastic.utils.distributed import get_free_port  # the rendezvous port, free now
    port = int(sys.argv[2]) if len(sys.argv) > 2 else get_free_port()
    mp.spawn(main, args=(2, port, sys.argv[1]), nprocs=2)
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
    from fxviz.sources.log.reader import ReadStats, read_records

    backward: dict[int, str] = {}
    for f in sorted(directory.iterdir()):
        rank = int(re.search(r"rank_(\d+)_", f.name).group(1))  # type: ignore[union-attr]
        with open(f, "rb") as fh:
            for rec in read_records(fh, ReadStats(), keep=lambda r: r.kind == "aot_backward_graph"):
                if rec.payload:
                    backward.setdefault(rank, rec.payload)
    return backward


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

if __name__ == "__main__":  # argv: [port]
    from torch.distributed.elastic.utils.distributed import get_free_port  # the rendezvous port, free now
    mp.spawn(main, args=(2, int(sys.argv[1]) if len(sys.argv) > 1 else get_free_port()), nprocs=2)
"""
