"""Plots of analysis frames: the memory / recompute Pareto plot of a budget sweep.

Matplotlib ``Figure`` objects are built without ``pyplot`` (no global state, no double display in
notebooks); colors come from ``theme``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..units import byte_unit, format_flops
from .theme import EDGE_COLOR, ROLE_COLORS, STATUS

__all__ = ["MemorySweep", "pareto_plot"]

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
                title: str | None = None) -> Any:
    """Saved activation memory (x, bytes) against the recompute cost (y): one point per distinct
    partition, labelled with its budget(s); the Pareto front drawn as a line.  Returns the
    ``Figure``."""
    from matplotlib.ticker import FuncFormatter

    if cost not in ("recompute_flops", "recompute_bytes"):
        raise ValueError(f"cost must be 'recompute_flops' or 'recompute_bytes', not {cost!r}")
    ok = df[df["error"].isna()] if "error" in df else df
    if ax is None:
        fig = _DisplayFigure(figsize=(6.4, 4.2), dpi=110, layout="constrained")
        ax = fig.add_subplot()
    else:
        fig = ax.figure
    x_unit, x_scale = byte_unit(ok["saved_activation_bytes"].max())
    y_unit, y_scale = byte_unit(ok[cost].max()) if cost == "recompute_bytes" else ("", 1)
    x = ok["saved_activation_bytes"].astype(float) / x_scale
    y = ok[cost].astype(float) / y_scale
    on_front = ok["pareto"].fillna(False).astype(bool) if "pareto" in ok else pd.Series(True, index=ok.index)
    if (~on_front).any():
        ax.scatter(x[~on_front], y[~on_front], s=36, color=EDGE_COLOR, alpha=0.6, label="dominated", zorder=2)
    ax.scatter(x[on_front], y[on_front], s=48, color=ROLE_COLORS["forward"], edgecolor="#000000",
               linewidth=0.8, label="Pareto-optimal", zorder=3)
    order = x[on_front].sort_values().index
    ax.plot(x[order], y[order], color=STATUS["saved"].color, linewidth=1.5, drawstyle="steps-post", zorder=1,
            label="front")
    for i, r in ok.iterrows():
        budgets = r["budgets"] if isinstance(r["budgets"], list) else [r["budget"]]
        text = f"{budgets[0]:g}" if len(budgets) == 1 else f"{min(budgets):g}–{max(budgets):g}"
        # pandas-stubs type iterrows() labels as Hashable, which Series indexing does not accept
        ax.annotate(text, (x[i], y[i]), fontsize=8, xytext=(4, 4), textcoords="offset points")  # type: ignore[index]
    ax.set_xlabel(f"saved activation memory ({x_unit}, storage-aware)")
    if cost == "recompute_flops":
        ax.set_ylabel("recompute FLOPs")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: format_flops(v) if v else "0"))
    else:
        ax.set_ylabel(f"recompute bytes read + written ({y_unit})")
    solver = df.attrs.get("solver", "")
    ax.set_title(title or f"memory budget sweep ({solver} solver): labels are budgets", fontsize=10)
    ax.grid(True, color="#DDDDDD", linewidth=0.6)
    ax.legend(fontsize=8, loc="upper right")
    return fig


class MemorySweep(pd.DataFrame):
    """The budget sweep's frame, with its Pareto plot one call away."""

    @property
    def _constructor(self) -> type:
        return MemorySweep

    def pareto_plot(self, cost: str = "recompute_flops", ax: Any = None, title: str | None = None) -> Any:
        """Saved activation memory against ``cost`` (``recompute_flops`` or ``recompute_bytes``)."""
        return pareto_plot(self, cost=cost, ax=ax, title=title)
