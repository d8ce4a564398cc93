"""How each stage grows with the joint graph: seconds against joint nodes across the ladder.

    python benchmarks/scaling.py run.json [--plot docs/scaling.png] [--models gpt2,gpt6,gpt12,gpt62-narrow]

Reads a saved ``bench.py --json`` run (plain JSON; neither torch nor fxviz is imported), fits
``seconds = a * nodes ** k`` per stage by least squares on the logarithms, and says whether a stage
grows linearly (k <= 1.15), or faster.  Rungs whose stage failed or was skipped are left out; a
stage needs three rungs to be fitted.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from benchmarks.recorder import stage_seconds
from benchmarks.sides import FXVIZ_STAGES, TORCH_STAGES
from benchmarks.views import VIEW_STAGES

__all__ = ["points", "fit", "main"]

LINEAR = 1.15  # an exponent up to this counts as linear growth (noise on a shared machine)


def points(results: dict[str, Any]) -> dict[str, list[tuple[int, float]]]:
    """stage -> [(joint nodes, seconds)] over the rungs that measured it."""
    out: dict[str, list[tuple[int, float]]] = {}
    for entry in results.values():
        pair = entry.get("pair", {})
        fx_res, th_res, views = pair.get("fxviz", {}), pair.get("torch", {}), entry.get("fxviz", {})
        nodes = fx_res.get("joint_nodes") or th_res.get("joint_nodes") or views.get("joint_nodes")
        if not isinstance(nodes, int):
            continue
        sources = [("fxviz " + s, fx_res, s) for s in FXVIZ_STAGES] + \
                  [("torch " + s, th_res, s) for s in TORCH_STAGES] + \
                  [("fxviz " + v.name, views, v.name) for v in VIEW_STAGES]
        for label, res, stage in sources:
            secs = stage_seconds(res.get("stages", {}).get(stage))
            if secs is not None and secs > 0:
                out.setdefault(label, []).append((nodes, float(secs)))
    return {k: sorted(v) for k, v in out.items()}


def fit(pts: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(a, k) of ``seconds = a * nodes ** k``, or None below three rungs."""
    if len({n for n, _ in pts}) < 3:
        return None
    xs = [math.log(n) for n, _ in pts]
    ys = [math.log(s) for _, s in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    k = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return math.exp(my - k * mx), k


def table(pts: dict[str, list[tuple[int, float]]]) -> list[str]:
    lines = ["| stage | rungs | nodes | seconds | growth k (s ∝ nodes^k) | verdict |", "|---|---|---|---|---|---|"]
    for stage, p in pts.items():
        f = fit(p)
        verdict = "-" if f is None else ("linear" if f[1] <= LINEAR else "faster than linear")
        lines.append(f"| {stage} | {len(p)} | {p[0][0]}-{p[-1][0]} | {p[0][1]:.2f}-{p[-1][1]:.2f} | "
                     f"{'-' if f is None else f'{f[1]:.2f}'} | {verdict} |")
    return lines


def plot(pts: dict[str, list[tuple[int, float]]], path: pathlib.Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=110)
    colors = plt.get_cmap("tab20")  # one color per stage (its i-th of 20): the default cycle repeats after ten
    for i, (stage, p) in enumerate(pts.items()):
        if len(p) < 2:
            continue
        f = fit(p)
        label = stage + ("" if f is None else f" (k={f[1]:.2f})")
        ax.plot([n for n, _ in p], [s for _, s in p], marker="o", linestyle="-" if stage.startswith("fxviz") else "--",
                label=label, color=colors(i % 20))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("joint graph nodes")
    ax.set_ylabel("seconds (best of the run's repeats)")
    ax.set_title("fxviz and torch alone: seconds against joint nodes across the ladder")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("json", type=pathlib.Path, help="a run saved with bench.py --json")
    ap.add_argument("--plot", type=pathlib.Path, help="write the log-log plot here (PNG)")
    ap.add_argument("--models", help="fit only these rungs (comma-separated): one family of models, whose "
                                     "seconds per node are comparable (the whole ladder mixes convolutions "
                                     "and transformers)")
    args = ap.parse_args(argv)
    data = json.loads(args.json.read_text())
    results = data["results"]
    if args.models:
        keep = args.models.split(",")
        results = {n: r for n, r in results.items() if n in keep}
    pts = points(results)
    print("\n".join(table(pts)))
    if args.plot:
        plot(pts, args.plot)
        print(f"\nplot: {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
