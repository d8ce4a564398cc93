"""The notebook explorer: the controls (``controls.Controls``) around one anywidget graph pane
(``pane.GraphPane``, whose front-end is ``fxviz/frontends/static/explorer.js``, shared with the HTML report).

Every partition and drawing is computed once (partitions and drawings are cached on the
``Trace``; each view's ``payloads.ViewPayload`` is cached here by ``DrawSpec``), so switching back
to a view already seen only sends its payload to the browser: one trait, ``GraphPane.view_data``,
the same dict the HTML report embeds for that view.  A first computation shows a progress note in the pane.
The first picture comes first: the memory table fills in after it (``table_fill``).
``explore(model, ...)`` shows what it is tracing while it traces.  Without a kernel (a saved
notebook on a static viewer) the explorer displays as plain HTML: the current graph, the memory
table and the legend.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import ipywidgets as widgets

from fxviz.analysis.strategy.choices import default_strategy
from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.api.facade import Trace
from fxviz.api.tracing import trace
from fxviz.core.errors import FxvizError, InputError, did_you_mean
from fxviz.frontends.widgets.boxes import OpenBoxes
from fxviz.frontends.widgets.budget_curve import BudgetCurveView
from fxviz.frontends.widgets.controls import Controls, max_depth
from fxviz.frontends.widgets.measured import MeasuredView
from fxviz.frontends.widgets.pane import GraphPane, SwitchTiming
from fxviz.frontends.widgets.strategy_map import (
    ON_REQUEST,
    controls_of,
    names,
    partner_choice,
    reads_slider,
    statuses_of,
    strategy_choices,
    strategy_of,
)
from fxviz.frontends.widgets.table_fill import TableFill
from fxviz.frontends.widgets.tracing_note import tracing_note
from fxviz.payloads.panels import doctor_data, legend_data, node_data
from fxviz.payloads.pieces import overview_data, piece_options
from fxviz.payloads.views import ViewPayload, view_payload
from fxviz.render.graph.spec import PAGE_VIEWS, DrawSpec
from fxviz.render.page.static_html import static_html

__all__ = ["Explorer", "GraphPane", "SwitchTiming"]


class Explorer(MeasuredView, BudgetCurveView, widgets.VBox):
    """``fxviz.explore(...)``: the controls, the graph pane and what is beside it.

    Attributes worth knowing: ``trace`` (the Trace shown), ``pane`` (the :class:`GraphPane`),
    ``timings`` (one :class:`SwitchTiming` per view switch), ``first_picture_s`` (seconds from
    the call to the first drawing handed to the pane, tracing included), and one ``*_control``
    widget per control.  ``select(name)`` selects a node as a click would; ``expand(name)`` and
    ``collapse(name)`` open and close a box as a double click and its chip's x do (``expanded``:
    the boxes open now); ``await ex.filled()`` waits for tables still being computed after a
    notebook cell returned.
    """

    diff_panel: Any = None  # the "compare with another trace" panel, made by compare_with

    def __init__(self, tr: Trace | None = None, *, model: Any = None, inputs: Sequence[Any] = (),
                 params: str = "lifted", trace_kwargs: dict[str, Any] | None = None, view: str = "joint",
                 strategy: str | None = None, compare: str | None = None, budget: float = 0.5, solver: str = "dp",
                 group: str | None = None, depth: int | None = None, expand: Sequence[str] = (),
                 differences: bool = False) -> None:
        if tr is None and model is None:
            raise InputError("explore needs a model (with example inputs) or a Trace",
                             "call fxviz.explore(model, x) or fxviz.explore(fxviz.trace(model, x))")
        if view not in PAGE_VIEWS:
            raise InputError(f"unknown view {view!r}", f"{did_you_mean(str(view), PAGE_VIEWS)}use one of "
                                                       f"{', '.join(PAGE_VIEWS)}")
        self._t_start = time.perf_counter()
        self._model, self._inputs, self._trace_kwargs = model, tuple(inputs), dict(trace_kwargs or {})
        if tr is None:  # traced first: the choices, the strategy and its words are the trace's (choices.offered)
            with tracing_note(model, params):
                tr = trace(model, *self._inputs, params=params, **self._trace_kwargs)
        self._traces: dict[str, Trace] = {tr.capture.params: tr}
        params = tr.capture.params
        self._choices = strategy_choices(tr)
        kinds = [v for _, v in self._choices]
        if strategy is None:  # the trace's own default (choices.default_strategy): a log's is what the run saved
            strategy = default_strategy(tr.graph, tr.capture).name
        strategy, budget, solver = controls_of(strategy, budget, solver, kinds)
        compare, _, _ = controls_of(compare or partner_choice(strategy, kinds) or strategy, budget, solver, kinds)
        self.first_picture_s: float | None = None
        self._views: dict[tuple[Any, ...], ViewPayload] = {}
        self._doctors: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._shown: tuple[Any, ...] | None = None
        self._shown_trace: tuple[Any, ...] | None = None
        self._boxes = OpenBoxes()
        self._differences = bool(differences)  # "differences only" (drawn in the compare view)
        self.timings: list[SwitchTiming] = []
        self._controls(Controls(self._choices, params=params, view=view, strategy=strategy, compare=compare,
                                budget=budget, solver=solver, group=group, depth=depth), with_params=model is not None)
        self._sync_trace_controls()
        if expand:  # boxes open from the start, as draw(expand=...) names them
            self._boxes.start([expand] if isinstance(expand, str) else list(expand), self._openable_now(self.view_key))
        self._refresh()
        for c in self._ctl.redrawing():
            c.observe(self._on_control, "value")
        self.params_control.observe(self._on_params, "value")
        self.pane.on_msg(self._on_pane_msg)

    def _controls(self, c: Controls, with_params: bool) -> None:
        """Take the controls (one ``*_control`` attribute each) and the pane, and lay them out."""
        self._ctl = c
        self.params_control, self.piece_control, self.view_control = c.params, c.piece, c.view
        self.strategy_control, self.compare_control = c.strategy, c.compare
        self.budget_control, self.solver_control = c.budget, c.solver
        self.group_control, self.depth_control = c.group, c.depth
        self.pane = GraphPane(legend=legend_data())
        self._fill = TableFill(self.pane, self._table_shown)
        super().__init__([*c.rows(with_params), self.pane], layout=widgets.Layout(width="100%"))
        self.add_class("fxviz-explorer-widget")

    # --- compare with another trace ---------------------------------------------------------------
    def compare_with(self, other: Trace | None, strategy: StrategyLike | None = None,
                     strategy_b: StrategyLike | None = None) -> Any:
        """Compare the trace shown (A) with ``other`` (B): ``fxviz.diff(self.trace, other, ...)`` in a
        panel below the graph (summary, both sides drawn, bytes per module, every saved value).
        ``None`` closes the panel.  Returns the ``Diff`` (or None)."""
        from fxviz.api.diffing import diff
        from fxviz.frontends.widgets.diff_panel import DiffPanel

        panel = self.diff_panel
        if panel is None:
            panel = self.diff_panel = DiffPanel()
            self.children = (*self.children, panel)  # typed by BudgetCurveView (ipywidgets is untyped)
        d = None if other is None else diff(self.trace, other, strategy, strategy_b)
        panel.show(d)
        return d

    # --- what is shown ---------------------------------------------------------------------------
    @property
    def trace(self) -> Trace:
        """The Trace (graph piece) currently shown."""
        base = self._traces[self.params_control.value]
        return base.pieces[max(0, min(self.piece_control.value, len(base.pieces) - 1))]  # -1: overview

    @property
    def strategy(self) -> str:
        """The canonical key of the selected strategy (``budget:0.5:dp`` for the budget)."""
        return self._key(self.strategy_control.value)

    @property
    def view_key(self) -> DrawSpec:
        """The view the controls describe.  A graph without a backward (inference only) has no
        partition to mark: its joint view is the graph itself, as the report's shared layout."""
        view = self.view_control.value
        group = self.group_control.value
        marked = view != "joint" or self.trace.graph.has_backward
        vk = DrawSpec.of(
            view=view, strategy=self._strategy(self.strategy_control.value) if marked else None,
            compare=self._strategy(self.compare_control.value) if view == "compare" else None,
            group=None if group == "auto" else group,
            depth=self.depth_control.value if group == "module" else None,
            differences=self._differences and view == "compare")
        if vk.differences:  # drawn node by node, never in boxes: grouping and opened boxes do not apply
            return vk.replace(group=None, depth=None)
        if not self._boxes.names or self.piece_control.value == -1:
            return vk
        return vk.replace(expand=self._boxes.within(self._openable_now(vk)))

    @property
    def expanded(self) -> list[str]:
        """The boxes opened now (names ``Trace.draw(expand=...)`` takes), in the order opened."""
        return list(self._boxes.names)

    def expand(self, name: str) -> None:
        """Open a box, as a double click on it (or its "open" button) does: ``name`` is its
        module path, function box name or bookkeeping name (the box record's ``key``)."""
        if self._boxes.open(name, self._openable_now(dataclasses.replace(self.view_key, expand=()))):
            self._refresh()

    def collapse(self, name: str | None = None) -> None:
        """Close the box ``name`` again (and the boxes opened inside it); ``None`` closes every box."""
        if self._boxes.close(name):
            self._refresh()

    @property
    def differences(self) -> bool:
        """Whether the compare view shows only the nodes its two strategies treat differently (the
        "differences only" toggle); kept across strategy and view switches."""
        return self._differences

    def show_differences(self, on: bool = True) -> None:
        """Turn "differences only" on or off, as the pane's toggle does: the compare view is then
        drawn by the kernel with only the nodes A and B treat differently and their neighbors
        (``Trace.draw('compare', ..., differences=True)``), cached like every view."""
        if bool(on) != self._differences:
            self._differences = bool(on)
            self._refresh()

    def _openable_now(self, vk: DrawSpec) -> set[str]:
        """What ``expand`` takes in the view ``vk`` describes."""
        return self._boxes.openable(self.trace, (self.params_control.value, self.piece_control.value), vk)

    def select(self, name: str) -> None:
        """Select a node (its joint-graph name) as a click in the graph would."""
        self.pane.selected = name

    def _strategy(self, choice: str) -> Strategy:
        """The strategy a control's choice means (a kind that takes a budget reads the slider and solver)."""
        return strategy_of(choice, self.budget_control.value, self.solver_control.value)

    def _key(self, choice: str) -> str:
        return self._strategy(choice).name

    def _table_strategies(self) -> list[str]:
        """The table's rows: the offered strategies, and a kind offered on request (the optimum)
        only while it is picked (each budget is a MILP solve)."""
        picked = [self.strategy_control.value] + ([self.compare_control.value]
                                                  if self.view_control.value == "compare" else [])
        kinds = [c for _, c in self._choices if c not in ON_REQUEST or c in picked]
        return [self._key(c) for c in kinds]

    # --- reacting to the controls ----------------------------------------------------------------
    def _on_control(self, _change: dict[str, Any]) -> None:
        self._refresh()

    def _on_params(self, change: dict[str, Any]) -> None:
        mode = change["new"]
        if mode not in self._traces:
            self.pane.busy = f"tracing the model with parameters {mode} (first time only)…"
            try:
                self._traces[mode] = trace(self._model, *self._inputs, params=mode, **self._trace_kwargs)
            except FxvizError as exc:
                self.pane.busy = ""
                self.pane.alert = f"{exc.message}\nWhat to do: {exc.hint}"
                return
            finally:
                self.pane.busy = ""
        self._sync_trace_controls()
        self._refresh()

    def _on_pane_msg(self, _widget: Any, content: dict[str, Any], _buffers: Any) -> None:
        event = content.get("event")
        if event == "expand":
            try:
                self.expand(str(content.get("key", "")))
            except FxvizError as exc:
                self.pane.alert = f"{exc.message}\nWhat to do: {exc.hint}"
        elif event == "collapse":
            self.collapse(str(content["key"]) if content.get("key") else None)
        elif event == "differences":
            self.show_differences(bool(content.get("on")))
        elif event == "row":
            self._pick_row(str(content.get("strategy", "")))

    def _pick_row(self, name: str) -> None:
        """A click on a memory-table row: show that strategy (its budget on the slider where it takes one)."""
        try:
            kind, budget, solver = controls_of(name, self.budget_control.value, self.solver_control.value,
                                               [v for _, v in self._choices])
        except FxvizError:
            return
        takes_budget, _ = reads_slider(kind)
        with self.hold_trait_notifications():
            self.budget_control.value = budget
            self.solver_control.value = solver
        self.strategy_control.value = kind
        if takes_budget:
            self._refresh()

    def _sync_trace_controls(self) -> None:
        base = self._traces[self.params_control.value]
        pieces = base.pieces
        shown = self.piece_control.value
        options = piece_options(base)
        self.piece_control.options = options  # resets the value to the first choice (the overview)
        self.piece_control.value = shown if shown in [v for _, v in options] else 0
        self.piece_control.layout.display = "" if len(pieces) > 1 else "none"
        depth = max_depth(self.trace)
        self.depth_control.max = max(depth, 1)

    def _avoid_self_compare(self) -> bool:
        """A compare view never compares a strategy with itself: when B would equal A, B becomes
        ``choices.compare_partner`` of A.  True when it changed B (which refreshed)."""
        if self.view_control.value != "compare" or self._key(self.compare_control.value) != self.strategy:
            return False
        partner = partner_choice(self.strategy_control.value, [v for _, v in self._choices])
        if partner is None:
            return False
        self.compare_control.value = partner
        return True

    def _refresh(self) -> None:
        """Show the view the controls describe: from the caches when seen before."""
        if self._avoid_self_compare():
            return
        self._ctl.show_what_applies()
        if self.piece_control.value == -1:
            self._show_overview()
            return
        tr = self.trace
        vk = self.view_key
        trace_id = (self.params_control.value, self.piece_control.value)
        key = trace_id + (vk,)
        if key == self._shown:
            return
        t0 = time.perf_counter()
        cached = key in self._views
        if trace_id != self._shown_trace:
            self.pane.nodes = node_data(tr)
            self.pane.doctor = self._doctor(tr, trace_id)
            self._shown_trace = trace_id
        payload = self._views[key] if cached else self._compute(tr, vk, key)
        table = self._fill.table(tr, trace_id + tuple(self._table_strategies()), self._table_strategies())
        self.pane.show(payload, statuses_of(tr, vk), table if not payload.error else None,
                       keep_zoom=self._keeps_zoom(key))
        self._shown = key if not payload.error else None
        if self.first_picture_s is None and not payload.error:
            self.first_picture_s = time.perf_counter() - self._t_start
        if not payload.error:
            self.timings.append(SwitchTiming(vk.text(), time.perf_counter() - t0, cached))

    def _compute(self, tr: Trace, vk: DrawSpec, key: tuple[Any, ...]) -> ViewPayload:
        """The payload of a view not seen before, with a busy note while it is drawn."""
        self.pane.busy = f"computing the {vk.view} view of {names(vk)}: partition and layout (first time only)…"
        try:
            payload = view_payload(tr, vk)
        finally:
            self.pane.busy = ""
        if not payload.error:  # a failed view is tried again next time
            self._views[key] = payload
        return payload

    def _keeps_zoom(self, key: tuple[Any, ...]) -> bool:
        """Whether the front-end keeps its window: the same graph, view and grouping (one box more
        or less open); a differences drawing is another layout for every pair: its own fit."""
        previous, vk = self._shown, key[2]
        return bool(previous and previous[:2] == key[:2] and isinstance(previous[2], DrawSpec)
                    and previous[2].view == vk.view and previous[2].group == vk.group
                    and previous[2].depth == vk.depth and not vk.differences and not previous[2].differences)

    def _show_overview(self) -> None:
        """The whole-model overview of a graph-broken model (the piece selector's first choice)."""
        base = self._traces[self.params_control.value]
        key = (self.params_control.value, "overview")
        if key not in self._fill.tables:
            self.pane.busy = "drawing the whole-model overview (first time only)…"
            try:
                self._fill.tables[key] = overview_data(base, self._table_strategies())
            finally:
                self.pane.busy = ""
        data = self._fill.tables[key]
        self.pane.show(ViewPayload(**data["view"]), {}, data["table"])
        self._shown = key

    def _table_shown(self) -> tuple[Any, ...] | None:
        """The key of the memory table the pane shows now (None: the overview, or nothing yet)."""
        shown = self._shown
        if shown is None or shown[1] == "overview":
            return None
        return shown[:2] + tuple(self._table_strategies())

    async def filled(self) -> None:
        """Wait until every table being computed in the background is complete (notebooks)."""
        await self._fill.filled()

    def _doctor(self, tr: Trace, trace_id: tuple[Any, ...]) -> dict[str, Any]:
        if trace_id not in self._doctors:
            self._doctors[trace_id] = doctor_data(tr, measured=self._fill.measured_of(tr))
        return self._doctors[trace_id]

    # --- without a kernel ------------------------------------------------------------------------
    def static_html(self) -> str:
        """The current graph, the memory table and the legend as script-free HTML."""
        key = self._shown
        r = self._views.get(key) if key is not None else None
        if key is None or r is None:
            return "<p>fxviz explorer: run the notebook to see the graph</p>"
        table = self._fill.tables.get(key[:2] + tuple(self._table_strategies()))
        label = self.trace.partition(key[2].strategy).label if key[2].strategy else ""
        return static_html(r.svg, table, r.strategy, r.caption,
                           title=f"fxviz explorer: {r.view} view, {label}")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:
            data["text/html"] = self.static_html()
        return bundle
