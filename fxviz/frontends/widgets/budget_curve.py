"""The explorer's budget curve (``fxviz.explore(tr, runs=..., advice=...)`` or
``ex.show_budget_curve(runs, advice)``): the plain trace's budget sweep with logged runs of the same
model and an advice's options on it, the same SVG the report shows (``payloads.pareto``), in a box
below the graph."""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from fxviz.payloads.pareto import RunsLike, budget_points, pareto_data

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.api.advice.options import Advice
    from fxviz.api.facade import Trace

__all__ = ["BudgetCurveView"]


class BudgetCurveView:
    """``Explorer.show_budget_curve``, apart from the explorer's own module (a mixin of ``Explorer``)."""

    budget_curve: Any = None  # the box below the graph, made by the first show_budget_curve

    if TYPE_CHECKING:
        children: tuple[Any, ...]  # the explorer's VBox's (ipywidgets is untyped)
        _traces: dict[str, Trace]

    def show_budget_curve(self, runs: RunsLike | None = None, advice: Advice | None = None) -> pd.DataFrame:
        """Show the budget curve of the trace explored (its first graph's sweep) with ``runs`` (logged
        runs of the same model: a ``Run``, a list or ``{label: run}``) and ``advice`` (``tr.advise(...)``)
        on it, below the graph; returns their points (``fxviz.budget_points``)."""
        tr = next(iter(self._traces.values()))
        data = pareto_data(tr, runs, advice)
        html = "" if data is None else (f'<figure class="fxviz-pareto-plot" style="margin:8px 0">{data["svg"]}'
                                        f'<figcaption style="font-size:11px;max-width:640px">'
                                        f'{escape(data["caption"])}</figcaption></figure>')
        if self.budget_curve is None:
            self.budget_curve = widgets.HTML(layout=widgets.Layout(max_width="760px"))
            self.children = (*self.children, self.budget_curve)
        self.budget_curve.value = html
        return budget_points(runs, advice)
