"""The optimal partition on a ladder of models: how long the exact MILP takes, and how far each of
torch's strategies is from it.

    python benchmarks/optimal_frontier.py                       # the ladder (minutes on 2 cores)
    python benchmarks/optimal_frontier.py --models alexnet,gpt2 --plot docs/optimal_frontier.png

Per model: the time to trace; the exact frontier at 11 budgets (``optimal:0``, ``optimal:0.1``,
..., ``optimal:1``: one MILP each, HiGHS, 30 s limit per solve) with the status of each solve;
torch's ``default``, ``min_cut`` and the activation-memory-budget knapsack at 0.2 / 0.5 / 0.8
with each solver, each with its gap to the optimum (extra recompute FLOPs at the same saved
bytes, extra saved bytes at the same recompute FLOPs).  Results go to a JSON file; the markdown
tables of ``benchmarks/OPTIMAL.md`` are printed.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import time
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import fxviz  # noqa: E402
from fxviz.analysis.memory.table import memory_row  # noqa: E402
from fxviz.analysis.strategy import optimal  # noqa: E402
from fxviz.core.units import format_bytes, format_flops  # noqa: E402

GPT2 = dict(n_embd=768, n_head=12, vocab=50257, block_size=1024, batch=1, seq=128)
LADDER: dict[str, tuple[str, dict[str, Any], str]] = {
    "mlp": ("mlp", {}, "32-64-64-10, batch 8"),
    "alexnet": ("alexnet", {}, "1x3x224x224, dropout active"),
    "resnet8": ("resnet_block", dict(blocks=8, channels=64, size=32, batch=2), "8 BasicBlocks, 64 channels"),
    "gpt-tiny": ("mini_gpt", dict(n_layer=2, n_embd=32, n_head=4, vocab=64, block_size=32, seq=16), "the tests' GPT"),
    "gpt2": ("mini_gpt", dict(n_layer=2, **GPT2), "2 layers, width 768, 1x128 tokens"),
    "gpt6": ("mini_gpt", dict(n_layer=6, **GPT2), "6 layers, width 768"),
    "gpt12": ("mini_gpt", dict(n_layer=12, **GPT2), "GPT-2 small: 12 layers, width 768"),
}
BUDGETS = [round(i / 10, 1) for i in range(11)]
TORCH = ["default", "min_cut"] + [f"budget:{b}:{s}" for b in (0.2, 0.5, 0.8) for s in ("dp", "greedy", "ilp")]


def run_model(name: str) -> dict[str, Any]:
    factory, kwargs, note = LADDER[name]
    model, inputs = getattr(fxviz.examples, factory)(**kwargs)
    start = time.perf_counter()
    tr = fxviz.trace(model, *inputs)
    out: dict[str, Any] = {"model": name, "note": note, "trace_s": time.perf_counter() - start,
                           "joint_nodes": len(tr.graph.info)}
    start = time.perf_counter()
    mdl = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    out.update(model_s=time.perf_counter() - start, forward_values=mdl.forward_values, variables=2 * mdl.size
               + len(mdl.storage_bytes), decisions=mdl.size, storages=len(mdl.storage_bytes))
    frontier = []
    start = time.perf_counter()
    for b in BUDGETS:
        p = tr.partition(f"optimal:{b:g}")
        sol = p.solution
        point = {"budget": b, "status": getattr(sol, "status", None), "seconds": getattr(sol, "seconds", None),
                 "error": p.error}
        if p.ok:
            row = memory_row(tr.graph, p).values
            point.update(saved=row["saved_activation_bytes"], flops=row["recompute_flops"],
                         traffic=row["recompute_bytes"], gap=sol.mip_gap, bound=sol.bound)
        frontier.append(point)
    out["frontier_s"] = time.perf_counter() - start
    out["frontier"] = frontier
    out["largest_solve_s"] = max((f["seconds"] or 0.0) for f in frontier)
    out["all_optimal"] = all(f["status"] in ("optimal", "infeasible") for f in frontier)
    points = []
    for spec in TORCH:
        p = tr.partition(spec)
        if not p.ok:
            points.append({"strategy": p.name, "error": p.error})
            continue
        row = memory_row(tr.graph, p).values
        b, f, t = row["saved_activation_bytes"], row["recompute_flops"], row["recompute_bytes"]
        point = {"strategy": p.name, "saved": b, "flops": f, "traffic": t, "redraws": row["recomputed_random_ops"],
                 "partition_s": p.seconds}
        if not row["recomputed_random_ops"]:
            at_bytes, at_flops = optimal.solve(mdl, b), optimal.solve_min_bytes(mdl, f)
            point.update(gap_flops=f - at_bytes.recompute_flops if at_bytes.optimal else None,
                         gap_bytes=b - at_flops.saved_bytes if at_flops.optimal else None,
                         opt_traffic=at_bytes.recompute_bytes, gap_status=[at_bytes.status, at_flops.status])
        points.append(point)
    out["torch"] = points
    return out


def plot(models: list[str], path: pathlib.Path) -> None:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4 * len(models), 4.6), dpi=110, layout="constrained")
    axes = fig.subplots(1, len(models), squeeze=False)[0]
    for ax, name in zip(axes, models):
        factory, kwargs, note = LADDER[name]
        model, inputs = getattr(fxviz.examples, factory)(**kwargs)
        tr = fxviz.trace(model, *inputs)
        sweep = tr.memory_sweep(BUDGETS, solver=["dp", "greedy", "ilp"], optimal=True, progress=False)
        sweep.pareto_plot(ax=ax, title=f"{name} ({note}): torch vs the optimal frontier")
    fig.savefig(path)


def _md(results: list[dict[str, Any]]) -> str:
    lines = ["| model | joint nodes | forward values | MILP decisions | trace | frontier (11 solves) | slowest solve "
             "| all proven |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in results:
        lines.append(f"| {r['model']} | {r['joint_nodes']} | {r['forward_values']} | {r['decisions']} | "
                     f"{r['trace_s']:.1f} s | {r['frontier_s']:.1f} s | {r['largest_solve_s']:.2f} s | "
                     f"{'yes' if r['all_optimal'] else 'no'} |")
    lines += ["", "| model | strategy | saved activations | recompute FLOPs | gap FLOPs (same bytes) "
              "| gap bytes (same FLOPs) |",
              "|---|---|---:|---:|---:|---:|"]
    for r in results:
        for p in r["torch"]:
            if p.get("error"):
                lines.append(f"| {r['model']} | {p['strategy']} | failed: {p['error'][:60]} | | | |")
                continue
            if p["redraws"]:
                gap = f"— (redraws {p['redraws']} random op(s))"
                lines.append(f"| {r['model']} | {p['strategy']} | {format_bytes(p['saved']) or '0 B'} | "
                             f"{format_flops(p['flops']) or '0 FLOP'} | {gap} | |")
                continue
            lines.append(f"| {r['model']} | {p['strategy']} | {format_bytes(p['saved']) or '0 B'} | "
                         f"{format_flops(p['flops']) or '0 FLOP'} | {format_flops(p['gap_flops']) or '0 FLOP'} | "
                         f"{format_bytes(p['gap_bytes']) or '0 B'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,alexnet,resnet8,gpt-tiny,gpt2,gpt6,gpt12")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "optimal_frontier.json"))
    ap.add_argument("--plot", help="write the Pareto plot of these models (comma-separated) to --plot-path")
    ap.add_argument("--plot-path", default=str(ROOT / "docs" / "optimal_frontier.png"))
    args = ap.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    results = []
    for name in [m for m in args.models.split(",") if m]:
        r = run_model(name)
        results.append(r)
        print(f"{name}: frontier {r['frontier_s']:.1f} s, slowest solve {r['largest_solve_s']:.2f} s, "
              f"all proven {r['all_optimal']}", flush=True)
        pathlib.Path(args.out).write_text(json.dumps(results, indent=1, default=str))
    print(_md(results))
    if args.plot:
        plot(args.plot.split(","), pathlib.Path(args.plot_path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
