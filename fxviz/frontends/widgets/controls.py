"""The explorer's controls: plain ipywidgets 8 (view, strategy, compare-with, budget and solver,
grouping and depth, the graph piece, the parameter capture mode), made and laid out in two rows,
and which of them show for the choices made."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from fxviz.analysis.strategy.strategies import SOLVERS
from fxviz.frontends.widgets.strategy_map import reads_slider
from fxviz.render.graph.spec import PAGE_VIEWS

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["GROUP_CHOICES", "Controls", "max_depth"]

GROUP_CHOICES: list[tuple[str, str]] = [("auto", "auto"), ("by module", "module"), ("every node", "none")]
_STYLE = {"description_width": "initial"}


def max_depth(tr: Trace) -> int:
    """The depth slider's end: the deepest module path of the graph shown."""
    depths = [len(i.module.split(".")) for i in tr.graph.info.values() if i.module]
    return max(depths, default=1)


def _wide() -> widgets.Layout:  # one Layout per widget: visibility is set per widget
    return widgets.Layout(width="auto")


class Controls:
    """One widget per control (``view``, ``strategy``, ``compare``, ``budget``, ``solver``, ``group``,
    ``depth``, ``piece``, ``params``); ``choices``: the strategy controls' (label, kind) options."""

    def __init__(self, choices: Sequence[tuple[str, str]], *, params: str, view: str, strategy: str, compare: str,
                 budget: float, solver: str, group: str | None, depth: int | None) -> None:
        self.params = widgets.ToggleButtons(
            options=[("lifted", "lifted"), ("closure", "closure")], value=params,
            tooltips=["parameters as graph inputs (what torch.compile does)",
                      "parameters captured as constants (aot_function on a closure)"],
            style={**_STYLE, "button_width": "76px"}, layout=_wide())
        self.piece = widgets.Dropdown(options=[("graph 1", 0)], value=0, description="graph", style=_STYLE,
                                      layout=_wide())
        # ToggleButtons put their description above the buttons: a Label beside them instead
        self.view = widgets.ToggleButtons(options=list(PAGE_VIEWS), value=view,
                                          style={**_STYLE, "button_width": "92px"}, layout=_wide())
        self.strategy = widgets.Dropdown(options=list(choices), value=strategy, description="strategy", style=_STYLE,
                                         layout=_wide())
        self.compare = widgets.Dropdown(options=list(choices), value=compare, description="compare with",
                                        style=_STYLE, layout=_wide())
        self.budget = widgets.FloatSlider(value=budget, min=0.0, max=1.0, step=0.05, description="budget",
                                          continuous_update=False, readout_format=".2f", style=_STYLE,
                                          layout=widgets.Layout(width="300px"))
        self.solver = widgets.Dropdown(options=list(SOLVERS), value=solver, description="solver", style=_STYLE,
                                       layout=_wide())
        self.group = widgets.Dropdown(options=GROUP_CHOICES, value=group or "auto", description="group",
                                      style=_STYLE, layout=_wide())
        # its end is the trace's deepest module, set once the trace is known; until then wide enough for ``depth``
        self.depth = widgets.IntSlider(value=depth or 1, min=1, max=max(depth or 1, 2), description="depth",
                                       continuous_update=False, style=_STYLE, layout=widgets.Layout(width="260px"))

    def rows(self, with_params: bool) -> list[widgets.HBox]:
        """The two rows of controls (the parameter mode only where there is a model to trace again)."""
        # ipywidgets' Layout has no `gap` (a traitlets warning, and no spacing): explorer.css spaces the rows
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        first = [widgets.Label("view"), self.view, self.strategy, self.budget, self.solver, self.compare]
        # the search box is the pane's own (Enter / Shift+Enter step through the hits there)
        second = [self.group, self.depth, self.piece]
        if with_params:
            second[:0] = [widgets.Label("parameters"), self.params]
        rows = [widgets.HBox(first, layout=row), widgets.HBox(second, layout=row)]
        for r in rows:
            r.add_class("fxviz-controls")
        return rows

    def redrawing(self) -> list[Any]:
        """The controls whose every change redraws (the parameter mode traces again first)."""
        return [self.view, self.strategy, self.compare, self.budget, self.solver, self.group, self.depth, self.piece]

    def show_what_applies(self) -> None:
        """Show the slider, the solver, the compare and the depth control only where they apply."""
        compare = self.view.value == "compare"
        picked = [self.strategy.value] + ([self.compare.value] if compare else [])
        self.budget.layout.display = "" if any(reads_slider(k)[0] for k in picked) else "none"
        self.solver.layout.display = "" if any(reads_slider(k)[1] for k in picked) else "none"
        self.compare.layout.display = "" if compare else "none"
        self.depth.layout.display = "" if self.group.value == "module" else "none"
