"""A ~10,000-node joint graph (the ``gpt62-narrow`` rung) end to end, in one process (issue 26):
the trace, the first picture (the default collapsed drawing laid out to SVG), ``min_cut`` and the
memory table against torch's own partitioner calls on the same joint graph (interleaved, medians),
and the HTML report against the trace.  ``--profile DIR`` writes cProfile stats of the report and of
fxviz's min_cut.

    python -m benchmarks.big_graph [--rung gpt62-narrow] [--repeat 3] [--profile /tmp/prof]
    python -m benchmarks.big_graph --rung gpt66 --repeat 0   # the report against the trace only

Under inductor's default capture ``gpt62-narrow`` is 14,250 joint nodes and ``gpt66`` (GPT-2's width)
15,162 (issue 36).
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import os
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[1]


def timed(fn: Any) -> tuple[float, Any]:
    t = time.perf_counter()
    out = fn()
    return time.perf_counter() - t, out


def _say(began: float, message: str) -> None:
    """A report's progress line, with the seconds since it began."""
    print(f"  {time.perf_counter() - began:7.2f} s  {message}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rung", default="gpt62-narrow")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile")
    ap.add_argument("--skip-report", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import fxviz
    from benchmarks.ladder import LADDER, build_model
    from fxviz import _torch
    from fxviz.analysis.strategy.partition import partition

    print(f"load before {os.getloadavg()}", flush=True)
    model, inputs = build_model(LADDER[args.rung])
    t_trace, tr = timed(lambda: fxviz.trace(model, *inputs))
    g = tr.graph
    print(f"{args.rung}: {len(g.info)} joint nodes; trace {t_trace:.2f} s", flush=True)
    t_first, _ = timed(lambda: tr.draw().svg())
    print(f"first picture (tr.draw().svg()) {t_first:.2f} s", flush=True)

    def torch_call(which: str) -> Any:
        fn = {"default": _torch.default_partition, "min_cut": _torch.min_cut_partition}[which]
        kw: dict[str, Any] = {"num_fwd_outputs": g.num_fwd_outputs,
                              "static_lifetime_input_indices": list(g.static_lifetime_input_indices)}
        with _torch.quiet_torch():
            return fn(_torch.copy_graph_module(g.gm), g.joint_inputs, **kw)

    times: dict[str, list[float]] = {k: [] for k in ("torch min_cut", "torch default", "fxviz min_cut",
                                                     "fxviz default", "fxviz memory table")}
    for r in range(args.repeat):
        steps = [("torch min_cut", lambda: torch_call("min_cut")), ("torch default", lambda: torch_call("default")),
                 ("fxviz min_cut", lambda: partition(g, "min_cut")), ("fxviz default", lambda: partition(g, "default"))]
        for name, fn in steps if r % 2 == 0 else reversed(steps):
            times[name].append(timed(fn)[0])
        tr._cache._values.clear()  # the memory table from scratch: partitions included
        times["fxviz memory table"].append(timed(lambda: tr.memory_table(["default", "min_cut"]))[0])
    if args.repeat:
        med = {k: statistics.median(v) for k, v in times.items()}
        for k, v in times.items():
            print(f"{k}: median {med[k]:.2f} s, runs {', '.join(f'{x:.2f}' for x in v)}", flush=True)
        print(f"ratio fxviz min_cut / torch min_cut: {med['fxviz min_cut'] / med['torch min_cut']:.2f}x")
        print(f"ratio fxviz memory table (default + min_cut partitions included) / torch (default + min_cut): "
              f"{med['fxviz memory table'] / (med['torch min_cut'] + med['torch default']):.2f}x", flush=True)
    if args.profile:
        pathlib.Path(args.profile).mkdir(parents=True, exist_ok=True)
    if not args.skip_report:
        # every view (what the report did before issue 26), then within the default budget; the
        # Trace's caches cleared before each, so both compute their partitions and tables
        for budget in ([None] if args.profile else []) + ["default"]:
            tr._cache._values.clear()
            tr._model_cache._values.clear()  # the doctor's findings too
            out = pathlib.Path(tempfile.mkdtemp()) / "big.html"
            kw: dict[str, Any] = {"progress": functools.partial(_say, time.perf_counter())}
            if budget != "default":
                kw["budget"] = None
            prof = cProfile.Profile() if args.profile and budget is None else None
            if prof:
                prof.enable()
            t_report, _ = timed(functools.partial(fxviz.report, tr, out, **kw))
            if prof:
                prof.disable()
                prof.dump_stats(f"{args.profile}/report.prof")
            print(f"report (budget {budget}) {t_report:.2f} s ({out.stat().st_size / 1e6:.1f} MB) = "
                  f"{t_report / t_trace:.2f} x the trace (target < 0.5 x){' (profiled)' if prof else ''}", flush=True)
    print(f"load after {os.getloadavg()}")


if __name__ == "__main__":
    main()
