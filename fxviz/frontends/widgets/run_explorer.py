"""The explorer of a logged run: a rank and a graph (compile id) selector above the explorer of the
chosen graph, and "compare with" any other graph of the run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from fxviz.analysis.strategy.choices import shown_graphs
from fxviz.frontends.widgets.explorer import Explorer

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.run import Run

__all__ = ["RunExplorer"]

GraphId = tuple[int, str, int]  # rank, compile id, piece


class RunExplorer(widgets.VBox):
    """The explorer of a logged run: the graphs ``choices.shown_graphs`` offers (every graph with a
    backward, and every inference-only graph), each explorer built once and kept; each opens on its
    own default strategy (``choices.default_strategy``: what the run saved, where logged)."""

    def __init__(self, run: Run, rank: int | None = None, compile_id: str | None = None, **options: Any) -> None:
        self.run = run
        self._graphs: list[GraphId] = [(int(r["rank"]), str(r["compile_id"]), int(r["piece"]))
                                       for _, r in shown_graphs(run.graphs).iterrows()]
        self._options = options  # compare: choices.compare_partner
        self._explorers: dict[GraphId, Explorer] = {}
        start = run.trace(rank=rank, compile_id=compile_id)
        first = next((g for g in self._graphs if run.trace(*g) is start), self._graphs[0])
        style = {"description_width": "initial"}
        ranks = sorted({g[0] for g in self._graphs})
        self.rank_control = widgets.Dropdown(options=[(f"rank {r}", r) for r in ranks], value=first[0],
                                             description="rank", style=style)
        self.graph_control = widgets.Dropdown(options=self._graph_options(first[0]), value=first,
                                              description="graph", style=style)
        # "compare with another trace": any other graph of the run, diffed against the one shown
        self.diff_control = widgets.Dropdown(
            options=[("(none)", None)] + [(f"rank {g[0]}, {g[1]}" + (f" piece {g[2]}" if g[2] else ""), g)
                                          for g in self._graphs],
            value=None, description="compare with", style=style)
        self.rank_control.observe(self._on_rank, names="value")
        self.graph_control.observe(self._on_graph, names="value")
        self.diff_control.observe(self._on_diff, names="value")
        self.selectors = widgets.HBox([self.rank_control, self.graph_control, self.diff_control])
        super().__init__([self.selectors, self._explorer(first)])

    def _graph_options(self, rank: int) -> list[tuple[str, GraphId]]:
        return [(f"{g[1]}" + (f" piece {g[2]}" if g[2] else ""), g) for g in self._graphs if g[0] == rank]

    def _explorer(self, key: GraphId) -> Explorer:
        if key not in self._explorers:
            self._explorers[key] = Explorer(self.run.trace(*key), **self._options)
        return self._explorers[key]

    @property
    def explorer(self) -> Explorer:
        """The explorer of the graph shown now."""
        return self._explorer(self.graph_control.value)

    def _on_rank(self, change: dict[str, Any]) -> None:
        rank = change["new"]
        options = self._graph_options(rank)
        same = next((v for _, v in options if v[1] == self.graph_control.value[1]), options[0][1])
        self.graph_control.options = options
        self.graph_control.value = same
        self._on_graph({"new": same})

    def _on_graph(self, change: dict[str, Any]) -> None:
        self.children = (self.selectors, self._explorer(change["new"]))
        self._on_diff({"new": self.diff_control.value})

    def _on_diff(self, change: dict[str, Any]) -> None:
        key = change["new"]
        shown = self.explorer
        if key is None or key == self.graph_control.value:  # nothing, or the graph itself: no panel
            if shown.diff_panel is not None:
                shown.compare_with(None)
            return
        shown.compare_with(self.run.trace(*key))
