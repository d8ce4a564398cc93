"""The first picture of a ~50,000-node joint graph read from a log (issues 26, 36): a long narrow GPT
(``--layers``, width 64) is compiled once with ``TORCH_TRACE`` set and ``aot_eager`` (a real run's
log, made in a child process), then a fresh process reads it (``fxviz.load_logs``), rebuilds the
graph (``run.trace()``) and lays out the default view (``tr.draw().svg()``), each timed: wall
seconds, and for the first picture also the CPU seconds of the process and of ``dot`` (on a shared
2-core machine at load 8 the wall time is 3-5x the CPU time).

Torch alone, for the rebuild: (a) the run itself, ``torch.compile`` tracing that step (dynamo,
AOTAutograd's joint trace and partition, the first step run with ``aot_eager``), timed in the child
that writes the log; (b) torch's own ``FakeTensorProp`` over the rebuilt joint graph, every op
dispatched through a fresh fake mode from the same input values: torch propagating fake values
through the same graph, without reading any text.

    python -m benchmarks.log_rung --layers 300 [--keep DIR] [--png]
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
import json, time
t = time.perf_counter()
loss = torch.compile(model, backend="aot_eager")(idx, tgt)
loss.backward()
print(json.dumps({{"torch_compile_step_s": time.perf_counter() - t}}))
"""

READ = """
import json, os, sys, time
t0 = time.perf_counter()
import fxviz
run = fxviz.load_logs(sys.argv[1])
t1 = time.perf_counter()
tr = run.trace()
t2 = time.perf_counter()
print(json.dumps({"trace_from_log_s": t2 - t1}), flush=True)
import resource
load_before_picture = os.getloadavg()
c2, k2 = time.process_time(), resource.getrusage(resource.RUSAGE_CHILDREN)
drawing = tr.draw()
svg = drawing.svg()
t3 = time.perf_counter()
k3 = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = {"first_picture_cpu_s": time.process_time() - c2,  # this process's CPU: what load does not stretch
       "first_picture_dot_cpu_s": k3.ru_utime + k3.ru_stime - k2.ru_utime - k2.ru_stime}
import re
svg_size = re.search(r'<svg width="([^"]+)" height="([^"]+)"', svg).groups()
if len(sys.argv) > 2:
    drawing.save(sys.argv[2], dpi=24)  # a small raster: the whole drawing at a glance
from fxviz.core.graph_facts import joint_node_count
import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
gm = tr.graph.before_joint_passes or tr.graph.gm
mode = FakeTensorMode(allow_non_fake_inputs=True)
inputs = [mode.from_tensor(n.meta["val"]) if isinstance(n.meta.get("val"), torch.Tensor) else n.meta.get("val")
          for n in gm.graph.nodes if n.op == "placeholder"]
t4 = time.perf_counter()
FakeTensorProp(gm, mode).propagate_dont_convert_inputs(*inputs)
t5 = time.perf_counter()
print(json.dumps({"nodes": joint_node_count(tr.graph.info.values()), "load_logs_s": t1 - t0,
                  "trace_from_log_s": t2 - t1, "first_picture_s": t3 - t2, **cpu,
                  "torch_fake_tensor_prop_s": t5 - t4, "boxes": drawing.nodes, "svg": svg_size,
                  "load_before_picture": load_before_picture, "load": os.getloadavg()}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--layers", type=int, default=300)
    ap.add_argument("--keep")
    ap.add_argument("--png", action="store_true", help="also save the first picture as DIR/first_picture.png")
    args = ap.parse_args()
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="fxviz_rung_"))
    log = work / "log"
    if not log.exists():
        t = time.perf_counter()
        env = {**os.environ, "TORCH_TRACE": str(log), "PYTHONPATH": str(ROOT)}
        made = subprocess.run([sys.executable, "-c", MAKE.format(root=str(ROOT), layers=args.layers)], env=env,
                              check=True, capture_output=True, text=True)
        (work / "compile.json").write_text(made.stdout.strip().splitlines()[-1])
        print(f"compiled {args.layers} layers with TORCH_TRACE in {time.perf_counter() - t:.1f} s", flush=True)
    compiled = json.loads((work / "compile.json").read_text()) if (work / "compile.json").exists() else {}
    size = sum(f.stat().st_size for f in log.iterdir()) / 1e6
    png = [str(work / "first_picture.png")] if args.png else []
    out = subprocess.run([sys.executable, "-c", READ, str(log), *png], env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stdout[-1000:] + out.stderr[-3000:])
    res = json.loads(out.stdout.strip().splitlines()[-1])
    print(json.dumps({"layers": args.layers, "log_mb": round(size, 1), **compiled, **res}, indent=1))


if __name__ == "__main__":
    main()
