"""``fxviz logs`` on a big TORCH_TRACE log against ``tlparse`` (issue 26), start-up included.

The big log is made in one of two ways:

* ``--model mini_gpt`` (the default): a fresh process compiles the tests' mini_gpt training step with
  ``TORCH_TRACE`` set (``aot_eager``: joint, forward and backward graphs, dynamo's graph, metrics), and
  its records are repeated, each copy under a new compile id, until the file reaches ``--mb``
  megabytes (the way ``benchmarks/logs_memory.py`` makes its 1 GB log): a tiny graph repeated;
* ``--model llama``: a real model's step, every compile a distinct one.  A fresh process builds a
  Hugging Face Llama from a config (``--layers`` decoder layers, hidden 256, no weights downloaded)
  and runs its training step under ``torch.compile(backend="aot_eager")`` once per sequence length
  (8, 9, 10, ...; automatic dynamic shapes off, so each length is a recompile with its own joint,
  forward and backward graphs), until the log reaches ``--mb`` megabytes or ``--compiles`` compiles.

Then, after one untimed run of each (page cache warm, bytecode written as an install leaves it),
interleaved round by round, each in a fresh process, wall time and CPU time (a busy machine's share
makes wall time noisy; CPU time is each command's own work):

* ``fxviz logs BIG`` (``python -m fxviz logs BIG``, stdout to a pipe): the whole command, and the time
  until its first table row arrives (the table streams as the file is read);
* ``tlparse BIG --no-browser --overwrite -o OUT`` (tlparse writes its HTML index and one page per
  artifact; it is what torch.compile users run on these logs).

    python -m benchmarks.big_log --mb 100 --rounds 3 [--log existing.log] [--keep DIR]
    python -m benchmarks.big_log --model llama --layers 8 --mb 200 --keep DIR   # 107 compiles, ~1 h at load 6-9
    python -m benchmarks.big_log --log DIR/llama_log/*.log --before OLD_CHECKOUT
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def make_big_log(directory: pathlib.Path, mb: float) -> pathlib.Path:
    sys.path.insert(0, str(ROOT))
    from tests.logs_util import MINI_GPT, make_log

    src = make_log(MINI_GPT, directory / "src", "aot_eager")
    (one,) = list(src.iterdir())
    text = one.read_bytes()
    big = directory / "big.log"
    k = 0
    with open(big, "wb") as f:
        while f.tell() < int(mb * 1e6):
            f.write(re.sub(rb'"frame_compile_id": 0', b'"frame_compile_id": %d' % k, text))
            k += 1
    return big


LLAMA = """
import os, sys, torch, torch._dynamo
from transformers import LlamaConfig, LlamaForCausalLM
torch._dynamo.config.automatic_dynamic_shapes = False  # every sequence length: its own compile
torch._dynamo.config.recompile_limit = 10_000
torch._dynamo.config.accumulated_recompile_limit = 10_000
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers={layers},
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096)
model = LlamaForCausalLM(cfg)
step = torch.compile(lambda ids: model(input_ids=ids, labels=ids).loss, backend="aot_eager")
log = sys.argv[1]
for k in range({compiles}):
    step(torch.randint(0, 1000, (1, 8 + k))).backward()
    size = sum(os.path.getsize(os.path.join(log, f)) for f in os.listdir(log))
    print(k + 1, size, flush=True)
    if size >= {mb} * 1e6:
        break
"""


def make_llama_log(directory: pathlib.Path, mb: float, layers: int, compiles: int) -> pathlib.Path:
    """A TORCH_TRACE log of a real Llama training step compiled at ``compiles`` sequence lengths
    (fewer once it reaches ``mb`` megabytes): the one file torch wrote."""
    logdir = directory / "llama_log"
    logdir.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCH_TRACE": str(logdir), "OMP_NUM_THREADS": "1"}
    script = LLAMA.format(layers=layers, compiles=compiles, mb=mb)
    with open(directory / "progress.txt", "w") as progress:  # compiles made, bytes written: the rate, while it runs
        subprocess.run([sys.executable, "-c", script, str(logdir)], env=env, check=True, stdout=progress)
    (one,) = list(logdir.iterdir())
    return one


def _child_cpu() -> float:
    """CPU seconds (user + system) the waited-for children took so far: a fresh process's share of a
    busy machine is its wall time's noise, its CPU time is not."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _fxviz_env(checkout: pathlib.Path) -> dict[str, str]:
    """A user's environment: bytecode cached as an install leaves it (a session's PYTHONDONTWRITEBYTECODE
    would make every run compile fxviz's sources, which no user pays)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(checkout)
    return env


def time_fxviz(log: pathlib.Path, checkout: pathlib.Path = ROOT) -> tuple[float, float, int, float]:
    """(whole command s, first row s, rows printed, CPU s) of ``checkout``'s fxviz."""
    cpu = _child_cpu()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "fxviz", "logs", str(log)], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, env=_fxviz_env(checkout), cwd=tempfile.gettempdir(), text=True)
    assert proc.stdout is not None
    first, rows = None, 0
    for line in proc.stdout:
        if re.match(r"^\s*\d+\s+\S+/\S+", line):  # a table row: rank, compile id
            rows += 1
            if first is None:
                first = time.perf_counter() - t0
    proc.wait()
    whole = time.perf_counter() - t0
    if proc.returncode:
        raise SystemExit(f"fxviz logs exited {proc.returncode}")
    return whole, first if first is not None else whole, rows, _child_cpu() - cpu


IMPORTS_TORCH = """
import runpy, sys
sys.argv = ["fxviz", "logs", sys.argv[1]]
try:
    runpy.run_module("fxviz", run_name="__main__")
except SystemExit:
    pass
print("TORCH_IMPORTED", "torch" in sys.modules, file=sys.stderr)
"""


def imports_torch(log: pathlib.Path) -> bool:
    """Whether ``fxviz logs LOG`` imported torch (run once, outside the timed rounds)."""
    out = subprocess.run([sys.executable, "-c", IMPORTS_TORCH, str(log)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=tempfile.gettempdir())
    return "TORCH_IMPORTED True" in out.stderr


def time_tlparse(log: pathlib.Path, out: pathlib.Path) -> tuple[float, float]:
    """(whole command s, CPU s) of tlparse."""
    exe = shutil.which("tlparse") or str(pathlib.Path(sys.executable).with_name("tlparse"))
    cpu = _child_cpu()
    t0 = time.perf_counter()
    subprocess.run([exe, str(log), "--no-browser", "--overwrite", "-o", str(out)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, _child_cpu() - cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--mb", type=float, default=100.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--model", choices=("mini_gpt", "llama"), default="mini_gpt")
    ap.add_argument("--layers", type=int, default=2, help="llama: decoder layers")
    ap.add_argument("--compiles", type=int, default=1000, help="llama: at most this many sequence lengths")
    ap.add_argument("--log", help="an existing big log (skip making one)")
    ap.add_argument("--keep", help="make the log in this directory and keep it")
    ap.add_argument("--before", help="a directory holding another checkout's fxviz/ to time beside")
    args = ap.parse_args()
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="fxviz_biglog_"))
    if args.log:
        log = pathlib.Path(args.log)
    elif args.model == "llama":
        t = time.perf_counter()
        log = make_llama_log(work, args.mb, args.layers, args.compiles)
        print(f"made {log} in {time.perf_counter() - t:.0f} s", flush=True)
    else:
        log = make_big_log(work, args.mb)
    size = log.stat().st_size / 1e6
    checkouts = [ROOT] + ([pathlib.Path(args.before)] if args.before else [])
    for checkout in checkouts:  # untimed: the page cache warm and bytecode written for every command alike
        time_fxviz(log, checkout)
    time_tlparse(log, work / "tl_out")
    before = os.getloadavg()
    fx: list[tuple[float, float, int, float]] = []
    old: list[tuple[float, float, int, float]] = []
    tl: list[tuple[float, float]] = []
    for r in range(args.rounds):
        steps = [lambda: fx.append(time_fxviz(log)), lambda: tl.append(time_tlparse(log, work / "tl_out"))]
        if args.before:
            steps.append(lambda: old.append(time_fxviz(log, pathlib.Path(args.before))))
        for step in steps if r % 2 == 0 else reversed(steps):
            step()
    after = os.getloadavg()
    med = statistics.median
    tlp, tl_cpu = med(t[0] for t in tl), med(t[1] for t in tl)
    print(f"log {log} {size:.1f} MB, {fx[0][2]} table rows; load before {before}, after {after}; "
          f"{args.rounds} rounds interleaved; `fxviz logs` imports torch: {imports_torch(log)}")
    print("| command | median s | fastest s | ratio to tlparse (median) | CPU s (median) | CPU ratio |\n"
          "|---|---|---|---|---|---|")

    def row(what: str, runs: list[tuple[float, float, int, float]], k: int = 0) -> None:
        w, c = med(f[k] for f in runs), med(f[3] for f in runs)
        print(f"| {what} | {w:.2f} | {min(f[k] for f in runs):.2f} | {w / tlp:.2f}x | {c:.2f} | {c / tl_cpu:.2f}x |")

    row("`fxviz logs BIG` (whole)", fx)
    w = med(f[1] for f in fx)
    print(f"| `fxviz logs BIG` (first row) | {w:.2f} | {min(f[1] for f in fx):.2f} | {w / tlp:.2f}x | | |")
    fastest = min(t[0] for t in tl)
    print(f"| `tlparse BIG --no-browser -o OUT` | {tlp:.2f} | {fastest:.2f} | 1.00x | {tl_cpu:.2f} | 1.00x |")
    if old:
        row("before: `fxviz logs BIG` (whole)", old)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
