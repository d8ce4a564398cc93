"""The first picture of a ~50,000-node joint graph read from a log (issue 26): a long narrow GPT
(``--layers``, width 64) is compiled once with ``TORCH_TRACE`` set and ``aot_eager`` (a real run's
log, made in a child process), then a fresh process reads it (``fxviz.load_logs``), rebuilds the
graph (``run.trace()``) and lays out the default view (``tr.draw().svg()``), each timed.

    python -m benchmarks.log_rung --layers 300 [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

MAKE = """
import sys, torch
sys.path.insert(0, {root!r})
from fxviz.examples import mini_gpt
model, (idx, tgt) = mini_gpt(n_layer={layers}, n_embd=64, n_head=4, vocab=256, block_size=64, batch=1, seq=32)
loss = torch.compile(model, backend="aot_eager")(idx, tgt)
loss.backward()
"""

READ = """
import json, os, sys, time
t0 = time.perf_counter()
import fxviz
run = fxviz.load_logs(sys.argv[1])
t1 = time.perf_counter()
tr = run.trace()
t2 = time.perf_counter()
svg = tr.draw().svg()
t3 = time.perf_counter()
from fxviz.graph_facts import joint_node_count
print(json.dumps({"nodes": joint_node_count(tr.graph.info.values()), "load_logs_s": t1 - t0,
                  "trace_from_log_s": t2 - t1, "first_picture_s": t3 - t2, "load": os.getloadavg()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=300)
    ap.add_argument("--keep")
    args = ap.parse_args()
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="fxviz_rung_"))
    log = work / "log"
    if not log.exists():
        t = time.perf_counter()
        env = {**os.environ, "TORCH_TRACE": str(log), "PYTHONPATH": str(ROOT)}
        subprocess.run([sys.executable, "-c", MAKE.format(root=str(ROOT), layers=args.layers)], env=env, check=True,
                       capture_output=True)
        print(f"compiled {args.layers} layers with TORCH_TRACE in {time.perf_counter() - t:.1f} s", flush=True)
    size = sum(f.stat().st_size for f in log.iterdir()) / 1e6
    out = subprocess.run([sys.executable, "-c", READ, str(log)], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True)
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"layers": args.layers, "log_mb": round(size, 1), **res}, indent=1))


if __name__ == "__main__":
    main()
