"""Plots of analysis frames: the memory / recompute Pareto plot of a budget sweep, and the memory
timeline of partitions (live bytes after each node of the forward and the backward).

Matplotlib ``Figure`` objects are built without ``pyplot`` (no global state, no double display in
notebooks); colors come from ``theme``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.units import byte_unit, format_flops
from fxviz.render.theme import EDGE_COLOR, ROLE_COLORS, STATUS, TIMELINE_COLORS

__all__ = ["MemorySweep", "MemoryTimeline", "pareto_plot", "timeline_plot", "sweep_progress"]

def _display_figure_class() -> type:
    from matplotlib.figure import Figure

    class DisplayFigure(Figure):
        """A pyplot-free Figure that still shows itself in Jupyter: without pyplot no display
        formatter is registered for figures, so it renders its own PNG and SVG."""

        def _render(self, fmt: str) -> bytes:
            import io

            buf = io.BytesIO()
            self.savefig(buf, format=fmt)
            return buf.getvalue()

        def _repr_png_(self) -> bytes:
            return self._render("png")

    return DisplayFigure


def _DisplayFigure(**kwargs: Any) -> Any:
    return _display_figure_class()(**kwargs)


def pareto_plot(df: pd.DataFrame, cost: str = "recompute_flops", ax: Any = None,
                title: str | None = None, points: pd.DataFrame | None = None) -> Any:
    """Saved activation memory (x, bytes) against the recompute cost (y): one point per distinct
    partition, labelled with its budget(s); the Pareto front drawn as a line.  A sweep with
    ``optimal`` rows draws the exact optimal frontier instead, and every torch strategy's point
    against it (one marker per knapsack solver; ``default`` and ``min_cut`` named; partitions that
    redraw random values crossed out).  ``points`` (``fxviz.budget_points``): logged runs and advice
    options on top, each marker tagged (``L1``, ``A2``; coinciding points share one tag line) and
    named in the legend below the plot.  Returns the ``Figure``."""
    from matplotlib.ticker import FuncFormatter

    if cost not in ("recompute_flops", "recompute_bytes"):
        raise ValueError(f"cost must be 'recompute_flops' or 'recompute_bytes', not {cost!r}")
    ok = df[df["error"].isna()] if "error" in df else df
    extra = points if points is not None and len(points) else None
    if ax is None:
        tall = 0.0 if extra is None else 0.17 * (len(extra) + 1)
        fig = _DisplayFigure(figsize=(6.4, 4.2 + tall), dpi=110, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    both = [ok] if extra is None else [ok, extra]
    top_x = max(f["saved_activation_bytes"].max() for f in both)
    top_y = max(f[cost].max() for f in both)
    x_unit, x_scale = byte_unit(top_x)
    y_unit, y_scale = byte_unit(top_y) if cost == "recompute_bytes" else ("", 1)
    x = ok["saved_activation_bytes"].astype(float) / x_scale
    y = ok[cost].astype(float) / y_scale
    with_optimal = "kind" in ok and bool((ok["kind"] == "optimal").any())
    if with_optimal:
        _frontier_points(ax, ok, x, y)
    else:
        on_front = ok["pareto"].fillna(False).astype(bool) if "pareto" in ok else pd.Series(True, index=ok.index)
        # partitions that redraw random values compute other gradients: the sweep leaves them out of
        # the front, so they are drawn as excluded, not as dominated
        redraw = (ok["recomputed_random_ops"].fillna(0).astype(int) > 0 if "recomputed_random_ops" in ok
                  else pd.Series(False, index=ok.index))
        dominated = ~on_front & ~redraw
        if dominated.any():
            ax.scatter(x[dominated], y[dominated], s=36, color=EDGE_COLOR, alpha=0.6, label="dominated", zorder=2)
        if redraw.any():
            ax.scatter(x[redraw], y[redraw], s=44, marker="x", color=STATUS["removed"].color, zorder=2,
                       label="redraws dropout: left out of the front")
        ax.scatter(x[on_front], y[on_front], s=48, color=ROLE_COLORS["forward"], edgecolor="#000000",
                   linewidth=0.8, label="Pareto-optimal", zorder=3)
        order = x[on_front].sort_values().index
        ax.plot(x[order], y[order], color=STATUS["saved"].color, linewidth=1.5, drawstyle="steps-post", zorder=1,
                label="front")
        for i, r in ok.iterrows():
            budgets = r["budgets"] if isinstance(r["budgets"], list) else [r["budget"]]
            text = f"{budgets[0]:g}" if len(budgets) == 1 else f"{min(budgets):g}–{max(budgets):g}"
            # pandas-stubs type iterrows() labels as Hashable, which Series indexing does not accept
            ax.annotate(text, (x[i], y[i]), fontsize=8, xytext=(4, 4),  # type: ignore[index]
                        textcoords="offset points")
    ax.set_xlabel(f"saved activation memory ({x_unit}, storage-aware)")
    if cost == "recompute_flops":
        ax.set_ylabel("recompute FLOPs")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_flops(v) if v else "0"))
    else:
        ax.set_ylabel(f"recompute bytes read + written ({y_unit})")
    solver = df.attrs.get("solver", "")
    default_title = (f"torch's strategies against the optimal frontier ({solver} knapsack)" if with_optimal
                     else f"memory budget sweep ({solver} solver): labels are budgets")
    ax.set_title(title or default_title, fontsize=10)
    ax.grid(True, color="#DDDDDD", linewidth=0.6)
    if extra is None:
        ax.legend(fontsize=7 if with_optimal else 8, loc="upper right")
        return fig
    _other_points(ax, extra, cost, x_scale, y_scale)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), frameon=False, ncol=1)
    return fig


POINT_STYLE: dict[str, tuple[str, str]] = {"logged": ("s", "#E69F00"), "advice": ("D", "#009E73"),
                                           "bound": ("d", "#000000")}
"""Marker and color of each kind of extra point: a logged run, an advice option, the exact bound."""


def point_tags(points: pd.DataFrame, cost: str, tolerance: float) -> list[tuple[float, float, str]]:
    """The tags written beside the extra points: points closer than ``tolerance`` (a fraction of each
    axis' range) share one position and one comma-joined tag, so labels never pile up on a point."""
    xs = points["saved_activation_bytes"].astype(float).tolist()
    ys = points[cost].astype(float).tolist()
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    groups: list[tuple[float, float, list[str]]] = []
    for x, y, tag in zip(xs, ys, points["tag"]):
        for gx, gy, tags in groups:
            if abs(gx - x) / span_x <= tolerance and abs(gy - y) / span_y <= tolerance:
                tags.append(str(tag))
                break
        else:
            groups.append((x, y, [str(tag)]))
    return [(x, y, ",".join(tags)) for x, y, tags in groups]


def _other_points(ax: Any, points: pd.DataFrame, cost: str, x_scale: float, y_scale: float) -> None:
    """Logged runs and advice options over the sweep: markers by kind, tags below-right of them (the
    sweep's budget labels sit above-right), every point named in the legend by its tag."""
    for _, r in points.iterrows():
        marker, color = POINT_STYLE.get(str(r["kind"]), ("o", EDGE_COLOR))
        what = {"logged": "logged run", "advice": "advice", "bound": "advice bound"}.get(str(r["kind"]), "")
        verdict = "" if r["meets"] is None or pd.isna(r["meets"]) or r["kind"] == "bound" else (
            ": meets" if r["meets"] else ": misses")
        ax.scatter([float(r["saved_activation_bytes"]) / x_scale], [float(r[cost]) / y_scale], s=70, marker=marker,
                   color=color, edgecolor="#000000", linewidth=0.7, zorder=6, alpha=0.9,
                   label=f"{r['tag']} {what}: {r['label']}{verdict}")
    for x, y, tag in point_tags(points, cost, 0.03):
        ax.annotate(tag, (x / x_scale, y / y_scale), fontsize=8, fontweight="bold", xytext=(5, -11),
                    textcoords="offset points", zorder=7)


_SOLVER_MARKERS = {"dp": "o", "greedy": "s", "ilp": "^"}


def _frontier_points(ax: Any, ok: pd.DataFrame, x: pd.Series, y: pd.Series) -> None:
    """The optimal frontier as a step line (the optimum at budget b holds until the next
    breakpoint), torch's points on top."""
    opt = ok["kind"] == "optimal"
    bound = opt & (ok["status"] == "bound") if "status" in ok else opt & False
    order = x[opt].sort_values().index
    xs, ys = list(x[order]), list(y[order])
    if xs:
        right = float(x.max()) * 1.04
        ax.plot(xs + [right], ys + [ys[-1]], color="#000000", linewidth=1.6, drawstyle="steps-post", zorder=1,
                label="optimal frontier (MILP)")
        ax.scatter(x[opt & ~bound], y[opt & ~bound], s=14, marker="D", color="#000000", zorder=4)
    if bound.any():
        ax.scatter(x[bound], y[bound], s=40, marker="D", facecolor="none", edgecolor="#000000", zorder=4,
                   label="bound (time limit: not proven optimal)")
    redraw = ok["recomputed_random_ops"].fillna(0).astype(int) > 0
    palette = [ROLE_COLORS["forward"], ROLE_COLORS["gradient"], STATUS["recomputed"].color]
    budget_rows = (ok["kind"] == "budget") & ~redraw
    for k, sv in enumerate(sorted(ok.loc[ok["kind"] == "budget", "solver"].dropna().unique())):
        these = budget_rows & (ok["solver"] == sv)
        ax.scatter(x[these], y[these], s=70, marker=_SOLVER_MARKERS.get(sv, "o"), color=palette[k % len(palette)],
                   edgecolor="#000000", linewidth=0.6, alpha=0.9, zorder=3, label=f"torch budget ({sv})")
    if ((ok["kind"] == "budget") & redraw).any():
        bad = (ok["kind"] == "budget") & redraw
        ax.scatter(x[bad], y[bad], s=40, marker="x", color=STATUS["removed"].color, zorder=3,
                   label="torch budget, redraws dropout (not comparable)")
    for kind, marker in (("default", "*"), ("min_cut", "P")):
        rows = ok["kind"] == kind
        if rows.any():
            ax.scatter(x[rows], y[rows], s=110, marker=marker, color=STATUS["saved"].color, edgecolor="#000000",
                       linewidth=0.6, zorder=5, label=f"torch {Strategy(kind).name}")
    for i, r in ok[ok["kind"] == "budget"].iterrows():
        budgets = r["budgets"] if isinstance(r["budgets"], list) else [r["budget"]]
        text = f"{budgets[0]:g}" if len(budgets) == 1 else f"{min(budgets):g}–{max(budgets):g}"
        ax.annotate(text, (x.loc[i], y.loc[i]), fontsize=7, xytext=(4, 3), textcoords="offset points", color="#555555")


def sweep_progress(solver: object, budgets: int, progress: bool | None
                   ) -> Callable[[Iterable[float]], Iterable[float]] | None:
    """A tqdm bar over a budget sweep's loop when ``progress`` (default: more than five budgets)."""
    if not (progress or (progress is None and budgets > 5)):
        return None
    from tqdm.auto import tqdm

    def wrap(items: Iterable[float]) -> Iterable[float]:
        return tqdm(items, desc=f"budget sweep ({solver})", unit="budget", leave=False)

    return wrap


class MemorySweep(pd.DataFrame):
    """The budget sweep's frame, with its Pareto plot one call away."""

    @property
    def _constructor(self) -> type:
        return MemorySweep

    def pareto_plot(self, cost: str = "recompute_flops", ax: Any = None, title: str | None = None,
                    points: pd.DataFrame | None = None) -> Any:
        """Saved activation memory against ``cost`` (``recompute_flops`` or ``recompute_bytes``);
        with ``optimal`` rows, the exact frontier and torch's points against it; ``points``
        (``fxviz.budget_points(runs, advice)``): logged runs and advice options on it, tagged."""
        return pareto_plot(self, cost=cost, ax=ax, title=title, points=points)


def timeline_plot(df: pd.DataFrame, title: str | None = None) -> Any:
    """Two panels, forward and backward: the memory held while each node runs (parameters and
    inputs included, so each curve's top is the memory table's peak), one curve per strategy,
    each peak marked and named by its node and module.  Returns the ``Figure``."""
    from matplotlib.ticker import FuncFormatter

    from fxviz.analysis.memory.timeline import timeline_peaks

    program = str(df.attrs.get("program", ""))
    fig = _DisplayFigure(figsize=(10.0, 4.6), dpi=110, layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    unit, scale = byte_unit(df["total_bytes"].max() if len(df) else 1)
    peaks = timeline_peaks(df)
    strategies = list(dict.fromkeys(df["strategy"]))
    for ax, phase in zip(axes, ("forward", "backward")):
        for k, name in enumerate(strategies):
            rows = df[(df["strategy"] == name) & (df["phase"] == phase)]
            color = TIMELINE_COLORS[k % len(TIMELINE_COLORS)]
            label = name
            for _, r in peaks[(peaks["strategy"] == name) & (peaks["phase"] == phase)].iterrows():
                # a peak at a line no FX node made (AccumulateGrad's layout copy, a kernel's scratch): its op
                what = r["node"] if isinstance(r["node"], str) and r["node"] else str(r["op"]).split(":")[0]
                where = what + (f" ({r['module']})" if isinstance(r["module"], str) and r["module"] else "")
                ax.scatter([r["step"]], [r["total_bytes"] / scale], s=40, color=color, edgecolor="#000000", zorder=4)
                label = f"{name}: peak {r['total_bytes'] / scale:.4g} {unit} at {where}"
            ax.step(rows["step"], rows["total_bytes"] / scale, where="mid", color=color, linewidth=1.4,
                    label=label, alpha=0.9)
        resident = df["resident_bytes"].max() if len(df) else 0
        state = df["optimizer_bytes"].max() if "optimizer_bytes" in df and len(df) else 0
        ax.axhline((resident + state) / scale, color=EDGE_COLOR, linewidth=0.8, linestyle=":",
                   label="parameters + inputs" + (" + optimizer state" if state else "") + " (resident)")
        measured = (df.attrs.get("measured") or {}).get(phase)
        if measured is not None:  # the real step's peak (Trace.measure), beside the predicted ones
            ax.axhline(measured / scale, color="#000000", linewidth=1.0, linestyle="--",
                       label=f"measured peak of the real step {measured / scale:.4g} {unit}")
        ax.set_title(f"{phase} graph" + ("s" if "whole step" in program else ""), fontsize=10)
        ax.set_xlabel("line of inductor's code that allocates or frees" if "inductor" in program
                      else "node (graph order)")
        ax.grid(True, color="#DDDDDD", linewidth=0.6)
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), frameon=False)
    axes[0].set_ylabel(f"memory held ({unit})")
    what = "each line of inductor's code" if "inductor" in program else "each node"
    fig.suptitle(title or f"memory timeline: bytes held at {what} (dots: each curve's peak)", fontsize=10)
    return fig


class MemoryTimeline(pd.DataFrame):
    """The memory timeline's frame (one row per node of each strategy's forward and backward),
    with its plot and its peaks one call away."""

    @property
    def _constructor(self) -> type:
        return MemoryTimeline

    @property
    def peaks(self) -> pd.DataFrame:
        """One row per strategy and phase: the node (and its module) where memory is highest."""
        from fxviz.analysis.memory.timeline import timeline_peaks

        return pd.DataFrame(timeline_peaks(pd.DataFrame(self)))

    def plot(self, title: str | None = None) -> Any:  # type: ignore[override]
        """Forward and backward panels, one curve per strategy, each peak marked and named."""
        frame = pd.DataFrame(self)
        frame.attrs = dict(self.attrs)  # the program, the measured peaks
        return timeline_plot(frame, title=title)
