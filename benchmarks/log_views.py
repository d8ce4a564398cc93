"""Every view of a big log against ``tlparse`` on the same file, as whole processes side by side (issue 46).

The log is a Llama-shaped model's compiled training step (Hugging Face ``LlamaForCausalLM`` from a config:
RMSNorm, rotary attention with grouped KV heads, SwiGLU; ``--layers`` decoder layers at width 64; with ``--arch
gpt_neox`` a Pythia-shaped one instead, an architecture the tests never use;
``torch.compile`` with inductor, one step), made once per layer count by a fresh process with
``TORCH_TRACE`` set (``--logs DIR`` reuses ``DIR/L16``, ``DIR/L64``...; a 64-layer log takes ~20 min of a
busy 2-core machine to make).  Then, per log, in one run, each a fresh process (start-up included),
measured with ``os.wait4`` (wall, user+system CPU, peak resident memory of that process alone):

* ``tlparse FILE -o OUT`` (every compile's page: what torch.compile users run on these logs);
* ``fxviz logs``; ``fxviz table --logs`` and ``fxviz saved --logs``, each twice (a fresh log cache, then the
  cache the first filled: the second view of a log); ``fxviz draw --logs`` twice (the first rebuilds the
  graph, the second starts from the graph it kept), ``fxviz report --logs``, ``fxviz diff --logs`` (the
  run's partition against min-cut's), the notebook explorer (``fxviz.explore`` of the log's trace), and
  ``fxviz advise --logs --saved 50%`` twice (the second finds the log's cache the first filled);
* the load average before and after: on a shared machine wall time is the machine's, CPU time the
  command's own.  Ratios are to tlparse's wall and CPU time on the same file in the same run.

    python -m benchmarks.log_views --layers 16 64 80 --logs /tmp/logs46 [--views table,saved]
    python -m benchmarks.log_views --arch gpt_neox --layers 64 --logs /tmp/logs46
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

STEP = """
import sys, torch
import transformers
torch.manual_seed(0)
config = getattr(transformers, sys.argv[3])(num_hidden_layers=int(sys.argv[1]), {config})
model = getattr(transformers, sys.argv[2])(config)
step = torch.compile(lambda ids: model(input_ids=ids, labels=ids).loss)
step(torch.randint(0, 256, (2, 16))).backward()
"""

ARCHS = {
    # the model: RMSNorm, rotary attention with grouped KV heads, SwiGLU
    "llama": ("LlamaForCausalLM", "LlamaConfig", "hidden_size=64, intermediate_size=128, num_attention_heads=4, "
              "num_key_value_heads=2, vocab_size=256"),
    # another architecture the tests never use (Pythia's): LayerNorm, one fused QKV projection, partial rotary,
    # attention and MLP in parallel off one residual, GeLU
    "gpt_neox": ("GPTNeoXForCausalLM", "GPTNeoXConfig", "hidden_size=64, intermediate_size=256, "
                 "num_attention_heads=4, rotary_pct=0.25, use_parallel_residual=True, vocab_size=256"),
}

EXPLORE = """
import sys, fxviz
w = fxviz.explore(fxviz.load_logs(sys.argv[1]).trace())
"""


def make_log(directory: pathlib.Path, layers: int, arch: str = "llama") -> pathlib.Path:
    """The one file torch writes for a ``layers``-layer step of ``arch`` (made unless ``directory`` holds it)."""
    found = sorted(directory.glob("*.log")) if directory.is_dir() else []
    if found:
        return found[0]
    directory.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCH_TRACE": str(directory), "OMP_NUM_THREADS": "1"}
    model, config, kwargs = ARCHS[arch]
    subprocess.run([sys.executable, "-c", STEP.format(config=kwargs), str(layers), model, config], env=env, check=True)
    return sorted(directory.glob("*.log"))[0]


def measure(argv: list[str], env: dict[str, str]) -> tuple[float, float, float, int]:
    """(wall s, CPU s, peak MiB, exit status) of one whole process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def views(log: pathlib.Path, out: pathlib.Path, tlparse: str) -> list[tuple[str, list[str]]]:
    """Each view's command line, in the order they run (the first table and saved find a fresh cache)."""
    fx = [sys.executable, "-m", "fxviz"]
    d = str(log.parent)
    return [
        ("tlparse LOG -o OUT", [tlparse, str(log), "--no-browser", "--overwrite", "-o", str(out / "tl")]),
        ("fxviz logs", fx + ["logs", d]),
        ("fxviz table --logs (first view)", fx + ["table", "--logs", d]),
        ("fxviz saved --logs (first view)", fx + ["saved", "--logs", d]),
        ("fxviz table --logs (second view)", fx + ["table", "--logs", d]),
        ("fxviz saved --logs (second view)", fx + ["saved", "--logs", d]),
        ("fxviz draw --logs (first rebuild)", fx + ["draw", "--logs", d, "-o", str(out / "d.svg")]),
        ("fxviz draw --logs (second: rebuilt graph kept)", fx + ["draw", "--logs", d, "-o", str(out / "d2.svg")]),
        ("fxviz report --logs", fx + ["report", "--logs", d, "-o", str(out / "r.html")]),
        ("fxviz diff --logs (logged vs min_cut)", fx + ["diff", "--logs", d, "--strategy-b", "min_cut"]),
        ("explorer (fxviz.explore of the trace)", [sys.executable, "-c", EXPLORE, d]),
        ("fxviz advise --logs --saved 50%", fx + ["advise", "--logs", d, "--saved", "50%"]),
        ("fxviz advise --logs --saved 50% (second view)", fx + ["advise", "--logs", d, "--saved", "50%"]),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--layers", type=int, nargs="+", default=[16, 64, 80])
    ap.add_argument("--arch", choices=sorted(ARCHS), default="llama",
                    help="the model: llama (the issue's) or gpt_neox (an architecture the tests never use)")
    ap.add_argument("--logs", default=str(pathlib.Path(tempfile.gettempdir()) / "fxviz_log_views"),
                    help="where the logs are made (DIR/L16, DIR/L64, ... for llama, DIR/gpt_neox-L64 ...) or found")
    ap.add_argument("--views", help="comma-separated words a view's name must contain (default: all)")
    found = shutil.which("tlparse") or str(pathlib.Path(sys.executable).with_name("tlparse"))
    ap.add_argument("--tlparse", default=found, help="the tlparse executable (pip install tlparse)")
    args = ap.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(ROOT)
    env["OMP_NUM_THREADS"] = "1"
    for layers in args.layers:
        prefix = "" if args.arch == "llama" else f"{args.arch}-"
        log = make_log(pathlib.Path(args.logs) / f"{prefix}L{layers}", layers, args.arch)
        work = pathlib.Path(tempfile.mkdtemp(prefix="fxviz_views_"))
        env["FXVIZ_CACHE_DIR"] = str(work / "cache")  # fresh: the first view of this log
        chosen = [v for v in views(log, work, args.tlparse) if v[0].startswith("tlparse") or not args.views
                  or any(w in v[0] for w in args.views.split(","))]
        measure(chosen[0][1], env)  # untimed: the page cache warm for every command alike
        before = os.getloadavg()
        rows = [(name, *measure(argv, env)) for name, argv in chosen]
        after = os.getloadavg()
        tl_wall, tl_cpu = rows[0][1], rows[0][2]
        print(f"\n{args.arch}, {layers} layers: {log} ({log.stat().st_size / 1e6:.1f} MB); load {before[0]:.1f} "
              f"before, {after[0]:.1f} after")
        print("| command | wall s | CPU s | peak MiB | wall / tlparse | CPU / tlparse | exit |")
        print("|---|---|---|---|---|---|---|")
        for name, wall, cpu, peak, rc in rows:
            print(f"| `{name}` | {wall:.1f} | {cpu:.1f} | {peak:.0f} | {wall / tl_wall:.2f}x | {cpu / tl_cpu:.2f}x | "
                  f"{rc} |", flush=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
