"""The notebook explorer: ipywidgets controls around one anywidget graph pane.

The controls (view, strategy, compare-with, budget and solver, grouping, search, parameter
capture mode) are plain ipywidgets 8.  The pane is an anywidget whose front-end is
``fxviz/static/explorer.js``, shipped inside the package and shared with the HTML report: SVG
zoom and pan, click for details, search highlighting, the memory table, the doctor's findings
and the legend.  Nothing is loaded from the network.

Every partition and drawing is computed once (partitions and drawings are cached on the
``Trace``; each view's ``payloads.ViewPayload`` is cached here by ``ViewKey``), so switching back
to a view already seen only sends its payload to the browser: one trait, ``GraphPane.view_data``,
the same dict the HTML report embeds for that view.  A first computation shows a progress note in the pane.

The first picture comes first: in a notebook kernel (a running asyncio loop) the memory table of
every offered strategy is computed after ``explore(...)`` returns, one strategy per loop turn, its
rows filling in with a progress note while the graph is already on screen (gpt12: the table is
most of the first render).  Without a running loop (plain Python, tests) it is computed at once,
so the explorer is complete when constructed.  ``explore(model, ...)`` shows what it is tracing
while it traces.
Without a kernel (a saved notebook on a static viewer) the explorer displays as plain HTML: the
current graph, the memory table and the legend.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..analysis.strategies import KINDS, OFFERED, SOLVERS, Strategy, StrategyLike
from ..errors import FxvizError, InputError
from ..facade import Trace, trace
from ..html_report import STATIC
from ..payloads import (
    VIEWS,
    ViewKey,
    ViewPayload,
    default_compare,
    doctor_data,
    legend_data,
    node_data,
    openable_boxes,
    overview_data,
    page_constants,
    piece_options,
    status_data,
    table_data,
    view_payload,
)
from ..render import theme
from ..render.embed import page_data
from ..render.static_html import static_html
from ..render.views import box_name

try:
    import anywidget
    import ipywidgets as widgets
    import traitlets as t
except ImportError as exc:  # pragma: no cover - exercised only without the notebook extra
    raise InputError("the explorer needs ipywidgets and anywidget",
                     "pip install 'fxviz[notebook]' (or: pip install ipywidgets anywidget)") from exc

__all__ = ["Explorer", "RunExplorer", "GraphPane", "SwitchTiming", "explore", "STRATEGY_CHOICES"]

# the strategies fxviz offers (one registry: fxviz/analysis/strategies.py), by kind: the budget
# kind's number and solver come from the slider and the solver control
STRATEGY_CHOICES: list[tuple[str, str]] = [(s.spec.short, s.kind) for s in OFFERED]
GROUP_CHOICES: list[tuple[str, str]] = [("auto", "auto"), ("by module", "module"), ("every node", "none")]


# every synced dict goes through the one page-data conversion (render.embed.page_data): no NaN or
# infinity, no numpy scalar reaches the page, as in the report
_PAGE: dict[str, Any] = {"sync": True, "to_json": lambda value, _widget: page_data(value)}


class GraphPane(anywidget.AnyWidget):
    """The front-end half: one SVG with zoom/pan, details, search, table, doctor, legend.

    The view shown travels as one value, ``view_data`` (a ``payloads.ViewPayload``: the same dict
    the report embeds for that view); ``keep_zoom`` says whether the switch keeps the window, and
    ``statuses`` holds what the strategies it names did (by name, as the report's ``status``).
    The other traits are the trace's (nodes, table, doctor), the page's (legend, constants) or the
    user's (selection, search).  The properties below read the view's fields.
    """

    _esm = STATIC / "explorer.js"
    _css = STATIC / "explorer.css"

    palette_css = t.Unicode(theme.css_variables(".fxviz-explorer")).tag(sync=True)
    constants = t.Dict(page_constants()).tag(**_PAGE)
    view_data = t.Dict().tag(**_PAGE)
    keep_zoom = t.Bool(False).tag(sync=True)
    statuses = t.Dict().tag(**_PAGE)
    nodes = t.Dict().tag(**_PAGE)
    table = t.Dict().tag(**_PAGE)
    doctor = t.Dict().tag(**_PAGE)
    legend = t.Dict().tag(**_PAGE)
    selected = t.Unicode("").tag(sync=True)
    search = t.Unicode("").tag(sync=True)
    matches = t.Int(0).tag(sync=True)
    drawn_matches = t.Int(0).tag(sync=True)
    busy = t.Unicode("").tag(sync=True)
    # an error that is no view's (a box that does not exist, a failed re-trace): shown over the view
    alert = t.Unicode("").tag(sync=True)

    def _field(self, name: str, default: Any = "") -> Any:
        return self.view_data.get(name, default)

    @property
    def svg(self) -> str:
        return str(self._field("svg"))

    @property
    def view_key(self) -> str:
        return str(self._field("key"))

    @property
    def view(self) -> str:
        return str(self._field("view", "joint"))

    @property
    def caption(self) -> str:
        return str(self._field("caption"))

    @property
    def boxes(self) -> list[dict[str, Any]]:
        return list(self._field("boxes", []))

    @property
    def expanded(self) -> list[str]:
        return list(self._field("expanded", []))

    @property
    def differences(self) -> bool:
        return bool(self._field("differences", False))

    @property
    def error(self) -> str:
        """The error shown: one that is no view's (``alert``), else the view's own."""
        return self.alert or str(self._field("error"))

    @property
    def highlight(self) -> str:
        """The strategy shown (A in the compare view): its memory-table row is highlighted."""
        return str(self._field("strategy") or "")

    @property
    def compare_highlight(self) -> str:
        return str(self._field("compare") or "")

    @property
    def status(self) -> dict[str, Any]:
        return dict(self.statuses.get(self.highlight, {}))

    @property
    def compare_status(self) -> dict[str, Any]:
        return dict(self.statuses.get(self.compare_highlight, {})) if self.compare_highlight else {}


@dataclass(frozen=True)
class SwitchTiming:
    """How long one view switch took in the kernel, and whether everything was cached."""

    key: str
    seconds: float
    cached: bool


def _max_depth(tr: Trace) -> int:
    depths = [len(i.module.split(".")) for i in tr.graph.info.values() if i.module]
    return max(depths, default=1)


class Explorer(widgets.VBox):
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
        if view not in VIEWS:
            raise InputError(f"unknown view {view!r}", f"use one of {', '.join(VIEWS)}")
        # the strategies this trace offers (a log's: what the run saved first, no eager)
        self._choices = ([(x.spec.short, x.kind) for x in tr.offered] if tr is not None else list(STRATEGY_CHOICES))
        # the exact optimum under the budget slider (issue 16): offered here, not in the default
        # table lists, because each budget is a MILP solve
        self._choices.append((KINDS["optimal"].short, "optimal"))
        if strategy is None:  # the trace's own default: a log's is what the run saved (logged)
            strategy = tr.default_strategy.name if tr is not None else "default"
        strategy, budget, solver = _choice(strategy, budget, solver, self._choices)
        if compare is None:
            compare = default_compare(strategy, [v for _, v in self._choices]) or strategy
        compare, _, _ = _choice(compare, budget, solver, self._choices)
        t_start = time.perf_counter()
        self._model = model
        self._inputs = tuple(inputs)
        self._trace_kwargs = dict(trace_kwargs or {})
        self._traces: dict[str, Trace] = {}
        if tr is not None:
            self._traces[tr.params] = tr
            params = tr.params
        else:
            with _tracing_note(model, params):
                self._traces[params] = trace(model, *self._inputs, params=params, **self._trace_kwargs)
        self._t_start = t_start
        self.first_picture_s: float | None = None
        self._fills: dict[tuple[Any, ...], asyncio.Task[None]] = {}
        self._views: dict[tuple[Any, ...], ViewPayload] = {}
        self._tables: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._doctors: dict[tuple[Any, ...], dict[str, Any]] = {}
        self._shown: tuple[Any, ...] | None = None
        self._shown_trace: tuple[Any, ...] | None = None
        self._expanded: list[str] = []  # the boxes opened, in the order they were opened
        self._differences = bool(differences)  # "differences only" (drawn in the compare view)
        self._openable: dict[tuple[Any, ...], set[str]] = {}
        self.timings: list[SwitchTiming] = []

        def wide() -> widgets.Layout:  # one Layout per widget: visibility is set per widget
            return widgets.Layout(width="auto")

        style = {"description_width": "initial"}
        self.params_control = widgets.ToggleButtons(
            options=[("lifted", "lifted"), ("closure", "closure")], value=params,
            tooltips=["parameters as graph inputs (what torch.compile does)",
                      "parameters captured as constants (aot_function on a closure)"],
            style={**style, "button_width": "76px"}, layout=wide())
        self.piece_control = widgets.Dropdown(options=[("graph 1", 0)], value=0, description="graph",
                                              style=style, layout=wide())
        # ToggleButtons put their description above the buttons: a Label beside them instead
        self.view_control = widgets.ToggleButtons(options=list(VIEWS), value=view,
                                                  style={**style, "button_width": "92px"}, layout=wide())
        self.strategy_control = widgets.Dropdown(options=self._choices, value=strategy, description="strategy",
                                                 style=style, layout=wide())
        self.compare_control = widgets.Dropdown(options=self._choices, value=compare, description="compare with",
                                                style=style, layout=wide())
        self.budget_control = widgets.FloatSlider(value=budget, min=0.0, max=1.0, step=0.05, description="budget",
                                                  continuous_update=False, readout_format=".2f", style=style,
                                                  layout=widgets.Layout(width="300px"))
        self.solver_control = widgets.Dropdown(options=list(SOLVERS), value=solver, description="solver",
                                               style=style, layout=wide())
        self.group_control = widgets.Dropdown(options=GROUP_CHOICES, value=group or "auto", description="group",
                                              style=style, layout=wide())
        self.depth_control = widgets.IntSlider(value=depth or 1, min=1, max=2, description="depth",
                                               continuous_update=False, style=style,
                                               layout=widgets.Layout(width="260px"))
        self.pane = GraphPane(legend=legend_data())

        # ipywidgets' Layout has no `gap` (a traitlets warning, and no spacing): explorer.css spaces the rows
        row = widgets.Layout(flex_flow="row wrap", align_items="center")
        first = [widgets.Label("view"), self.view_control, self.strategy_control, self.budget_control,
                 self.solver_control, self.compare_control]
        # the search box is the pane's own (Enter / Shift+Enter step through the hits there)
        second = [self.group_control, self.depth_control, self.piece_control]
        if model is not None:
            second[:0] = [widgets.Label("parameters"), self.params_control]
        rows = [widgets.HBox(first, layout=row), widgets.HBox(second, layout=row)]
        for r in rows:
            r.add_class("fxviz-controls")
        super().__init__([*rows, self.pane], layout=widgets.Layout(width="100%"))
        self.add_class("fxviz-explorer-widget")

        self._sync_trace_controls()
        if expand:  # boxes open from the start, as draw(expand=...) names them
            opened = [expand] if isinstance(expand, str) else list(expand)
            known = self._openable_now(self.view_key)
            if not known:
                raise InputError(f"expand={opened[0]!r}: the first view draws no boxes to open",
                                 "leave expand out, or pass group='module'")
            self._expanded = list(dict.fromkeys(box_name(e, known) for e in opened))
        self._refresh()
        for c in (self.view_control, self.strategy_control, self.compare_control, self.budget_control,
                  self.solver_control, self.group_control, self.depth_control, self.piece_control):
            c.observe(self._on_control, "value")
        self.params_control.observe(self._on_params, "value")
        self.pane.on_msg(self._on_pane_msg)

    # --- compare with another trace ---------------------------------------------------------------
    def compare_with(self, other: Trace | None, strategy: StrategyLike | None = None,
                     strategy_b: StrategyLike | None = None) -> Any:
        """Compare the trace shown (A) with ``other`` (B): ``fxviz.diff(self.trace, other, ...)`` in a
        panel below the graph (summary, both sides drawn, bytes per module, every saved value).
        ``None`` closes the panel.  Returns the ``Diff`` (or None)."""
        from ..diffing import diff
        from .diff_panel import DiffPanel

        panel = self.diff_panel
        if panel is None:
            panel = self.diff_panel = DiffPanel()
            self.children = (*self.children, panel)  # type: ignore[has-type]  # ipywidgets is untyped
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
    def view_key(self) -> ViewKey:
        view = self.view_control.value
        group = self.group_control.value
        vk = ViewKey(
            view=view, strategy=self._strategy(self.strategy_control.value),
            compare=self._strategy(self.compare_control.value) if view == "compare" else None,
            group=None if group == "auto" else group,
            depth=self.depth_control.value if group == "module" else None,
            differences=self._differences and view == "compare")
        if vk.differences:  # drawn node by node, never in boxes: grouping and opened boxes do not apply
            return dataclasses.replace(vk, group=None, depth=None)
        if not self._expanded or self.piece_control.value == -1:
            return vk
        known = self._openable_now(vk)
        return dataclasses.replace(vk, expand=tuple(sorted(e for e in self._expanded if e in known)))

    @property
    def expanded(self) -> list[str]:
        """The boxes opened now (names ``Trace.draw(expand=...)`` takes), in the order opened."""
        return list(self._expanded)

    def expand(self, name: str) -> None:
        """Open a box, as a double click on it (or its "open" button) does: ``name`` is its
        module path, function box name or bookkeeping name (the box record's ``key``)."""
        known = self._openable_now(dataclasses.replace(self.view_key, expand=()))
        if not known:
            raise InputError(f"{name!r}: this view draws no boxes to open", "pick a view drawn with boxes")
        name = box_name(name, known)
        if name not in self._expanded:
            self._expanded.append(name)
            self._refresh()

    def collapse(self, name: str | None = None) -> None:
        """Close the box ``name`` again (and the boxes opened inside it); ``None`` closes every box."""
        if name is None:
            kept: list[str] = []
        else:
            kept = [e for e in self._expanded if e != name and not e.startswith(name + ".")]
        if kept != self._expanded:
            self._expanded = kept
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

    def _openable_now(self, vk: ViewKey) -> set[str]:
        """What ``expand`` takes in the view ``vk`` describes (cached per trace, view and grouping)."""
        side = vk.view if vk.view in ("forward", "backward") else "joint"
        key = (self.params_control.value, self.piece_control.value, side,
               vk.strategy if side != "joint" else None, vk.group)
        if key not in self._openable:
            try:
                self._openable[key] = openable_boxes(self.trace, side, vk.strategy or "default", vk.group)
            except FxvizError:
                self._openable[key] = set()
        return self._openable[key]

    def select(self, name: str) -> None:
        """Select a node (its joint-graph name) as a click in the graph would."""
        self.pane.selected = name

    def _strategy(self, choice: str) -> Strategy:
        """The strategy a control's choice means (the budget kinds read the slider and solver)."""
        if choice == "budget":
            return Strategy("budget", budget=float(self.budget_control.value), solver=self.solver_control.value)
        if choice == "optimal":
            return Strategy("optimal", budget=float(self.budget_control.value))
        return Strategy.parse(choice)

    def _key(self, choice: str) -> str:
        return self._strategy(choice).name

    def _table_strategies(self) -> list[str]:
        """The table's rows: the offered strategies, and the optimum only while it is picked (each
        budget is a MILP solve)."""
        keys = [self._key(c) for _, c in self._choices if c != "optimal"]
        picked = {self.strategy_control.value}
        if self.view_control.value == "compare":
            picked.add(self.compare_control.value)
        return keys + ([self._key("optimal")] if "optimal" in picked else [])

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
            return
        if event == "collapse":
            self.collapse(str(content["key"]) if content.get("key") else None)
            return
        if event == "differences":
            self.show_differences(bool(content.get("on")))
            return
        if event != "row":
            return
        try:
            s = Strategy.parse(str(content.get("strategy", "")))
        except FxvizError:
            return
        if s.kind == "budget":
            with self.hold_trait_notifications():
                self.budget_control.value = s.budget
                self.solver_control.value = s.solver
            self.strategy_control.value = "budget"
            self._refresh()
        elif s.kind == "optimal" and s.budget is not None:
            self.budget_control.value = s.budget
            self.strategy_control.value = "optimal"
            self._refresh()
        elif s.kind in dict((v, k) for k, v in self._choices):
            self.strategy_control.value = s.kind

    def _sync_trace_controls(self) -> None:
        base = self._traces[self.params_control.value]
        pieces = base.pieces
        shown = self.piece_control.value
        options = piece_options(base)
        self.piece_control.options = options  # resets the value to the first choice (the overview)
        self.piece_control.value = shown if shown in [v for _, v in options] else 0
        self.piece_control.layout.display = "" if len(pieces) > 1 else "none"
        depth = _max_depth(self.trace)
        self.depth_control.max = max(depth, 1)

    def _visibility(self) -> None:
        shown = {"": "", False: "none"}
        compare = self.view_control.value == "compare"
        picked = {self.strategy_control.value} | ({self.compare_control.value} if compare else set())
        budget = bool(picked & {"budget", "optimal"})  # both read the budget slider
        self.budget_control.layout.display = shown[""] if budget else shown[False]
        self.solver_control.layout.display = shown[""] if "budget" in picked else shown[False]
        self.compare_control.layout.display = "" if self.view_control.value == "compare" else "none"
        self.depth_control.layout.display = "" if self.group_control.value == "module" else "none"

    def _avoid_self_compare(self) -> bool:
        """A compare view never compares a strategy with itself: when B would equal A, B becomes
        ``payloads.default_compare`` of A.  True when it changed B (which refreshed)."""
        if self.view_control.value != "compare" or self._key(self.compare_control.value) != self.strategy:
            return False
        partner = default_compare(self.strategy_control.value, [v for _, v in self._choices])
        if partner is None:
            return False
        self.compare_control.value = partner
        return True

    def _refresh(self) -> None:
        """Show the view the controls describe: from the caches when seen before."""
        if self._avoid_self_compare():
            return
        self._visibility()
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
        if cached:
            payload = self._views[key]
        else:
            label = _names(vk)
            self.pane.busy = f"computing the {vk.view} view of {label}: partition and layout (first time only)…"
            try:
                payload = view_payload(tr, vk)
            finally:
                self.pane.busy = ""
            if not payload.error:  # a failed view is tried again next time
                self._views[key] = payload
        self._show(payload, self._statuses(tr, vk), self._table(tr, trace_id) if not payload.error else None,
                   keep_zoom=self._keeps_zoom(key))
        self._shown = key if not payload.error else None
        if self.first_picture_s is None and not payload.error:
            self.first_picture_s = time.perf_counter() - self._t_start
        if not payload.error:
            self.timings.append(SwitchTiming(vk.text(), time.perf_counter() - t0, cached))

    def _keeps_zoom(self, key: tuple[Any, ...]) -> bool:
        """Whether the front-end keeps its window: the same graph, view and grouping (one box more
        or less open); a differences drawing is another layout for every pair: its own fit."""
        previous, vk = self._shown, key[2]
        return bool(previous and previous[:2] == key[:2] and isinstance(previous[2], ViewKey)
                    and previous[2].view == vk.view and previous[2].group == vk.group
                    and previous[2].depth == vk.depth and not vk.differences and not previous[2].differences)

    @staticmethod
    def _statuses(tr: Trace, vk: ViewKey) -> dict[str, Any]:
        """What the view's strategies did, by name (partitions cached on the Trace)."""
        shown = [s for s in (vk.strategy, vk.compare if vk.view == "compare" else None) if s is not None]
        return {s.name: status_data(tr.partition(s)) for s in shown}

    def _show(self, payload: ViewPayload, statuses: dict[str, Any], table: dict[str, Any] | None,
              keep_zoom: bool = False) -> None:
        """Hand one view to the page: its payload as one value, with what the page reads beside it."""
        with self.pane.hold_sync():
            self.pane.alert = ""
            self.pane.keep_zoom = keep_zoom
            self.pane.statuses = statuses
            if table is not None:
                self.pane.table = table
            self.pane.view_data = payload.to_json()

    def _show_overview(self) -> None:
        """The whole-model overview of a graph-broken model (the piece selector's first choice)."""
        base = self._traces[self.params_control.value]
        key = (self.params_control.value, "overview")
        if key not in self._tables:
            self.pane.busy = "drawing the whole-model overview (first time only)…"
            try:
                self._tables[key] = overview_data(base, self._table_strategies())
            finally:
                self.pane.busy = ""
        data = self._tables[key]
        self._show(ViewPayload(**data["view"]), {}, data["table"])
        self._shown = key

    def _table(self, tr: Trace, trace_id: tuple[Any, ...]) -> dict[str, Any]:
        """The memory table of the offered strategies: from the cache; else, in a running event
        loop (a notebook kernel), a progress note now and the rows filled in by ``_fill``;
        else computed here."""
        strategies = self._table_strategies()
        key = trace_id + tuple(strategies)
        if key in self._tables:
            return self._tables[key]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:
            self.pane.busy = "computing the memory table (first time only)…"
            try:
                self._tables[key] = self._table_now(tr, strategies)
            finally:
                self.pane.busy = ""
            return self._tables[key]
        if key not in self._fills:
            self._fills[key] = loop.create_task(self._fill(tr, key, strategies))
        return self._progress({}, 0, strategies)

    def _table_now(self, tr: Trace, strategies: list[str]) -> dict[str, Any]:
        try:
            return table_data(tr.memory_table(strategies), tr)
        except FxvizError as exc:
            return {"message": f"no memory table: {exc.message}"}

    @staticmethod
    def _progress(partial: dict[str, Any], done: int, strategies: list[str]) -> dict[str, Any]:
        """The rows computed so far and a note saying which strategy is being computed."""
        note = (f"computing the memory table: strategy {done + 1} of {len(strategies)} "
                f"({strategies[done]})…")
        return {**partial, "message": note, "progress": {"done": done, "total": len(strategies)}}

    async def _fill(self, tr: Trace, key: tuple[Any, ...], strategies: list[str]) -> None:
        """Compute the table one strategy per event-loop turn (partitions are cached on the
        Trace, so the last, full table only adds the rows); show the rows so far as they come."""
        partial: dict[str, Any] = {}
        try:
            for i in range(len(strategies)):
                await asyncio.sleep(0)  # let the kernel send the picture and answer the front-end
                if i + 1 < len(strategies):
                    partial = self._table_now(tr, strategies[:i + 1])
                    if "rows" not in partial:  # the table cannot be made: say so at once
                        self._tables[key] = partial
                        break
                    # no "best" marks until every row is in: the best of the first rows may not be
                    partial["rows"] = [{**r, "best": [False] * len(r["best"])} for r in partial["rows"]]
                    partial["best_note"] = ""
                    self._show_table(key, self._progress(partial, i + 1, strategies))
                else:
                    self._tables[key] = self._table_now(tr, strategies)
        except Exception as exc:  # a bug: say so in the pane, not as an unretrieved task exception
            self._tables[key] = {"message": f"fxviz could not compute the memory table: {type(exc).__name__}: {exc}"}
        finally:
            self._fills.pop(key, None)
        self._show_table(key, self._tables[key])

    def _show_table(self, key: tuple[Any, ...], table: dict[str, Any]) -> None:
        """Put a (partial) table in the pane if it belongs to the graph and strategies shown now."""
        shown = self._shown
        if shown is None or shown[1] == "overview":
            return
        if shown[:2] + tuple(self._table_strategies()) == key:
            self.pane.table = table

    async def filled(self) -> None:
        """Wait until every table being computed in the background is complete (notebooks)."""
        while self._fills:
            await asyncio.gather(*list(self._fills.values()), return_exceptions=True)

    def _doctor(self, tr: Trace, trace_id: tuple[Any, ...]) -> dict[str, Any]:
        if trace_id not in self._doctors:
            self._doctors[trace_id] = doctor_data(tr)
        return self._doctors[trace_id]

    # --- without a kernel ------------------------------------------------------------------------
    def static_html(self) -> str:
        """The current graph, the memory table and the legend as script-free HTML."""
        key = self._shown
        r = self._views.get(key) if key is not None else None
        if key is None or r is None:
            return "<p>fxviz explorer: run the notebook to see the graph</p>"
        table = self._tables.get(key[:2] + tuple(self._table_strategies()))
        label = self.trace.partition(key[2].strategy).label if key[2].strategy else ""
        return static_html(r.svg, table, r.strategy, r.caption,
                           title=f"fxviz explorer: {r.view} view, {label}")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        bundle = super()._repr_mimebundle_(**kwargs)
        data = bundle[0] if isinstance(bundle, tuple) else bundle
        if data is not None:
            data["text/html"] = self.static_html()
        return bundle


class RunExplorer(widgets.VBox):
    """The explorer of a logged run: a rank and a graph (compile id) selector above the explorer
    of the chosen graph (graphs with a backward only; each explorer is built once and kept)."""

    def __init__(self, run: Any, rank: int = 0, compile_id: str | None = None, **options: Any) -> None:
        rows = run.graphs
        rows = rows[rows["joint"] & rows["backward"]]
        self.run = run
        self._graphs = [(int(r["rank"]), str(r["compile_id"]), int(r["piece"])) for _, r in rows.iterrows()]
        self._options = {"strategy": "logged", **options}  # compare: payloads.default_compare
        self._explorers: dict[tuple[int, str, int], Explorer] = {}
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

    def _graph_options(self, rank: int) -> list[tuple[str, tuple[int, str, int]]]:
        return [(f"{g[1]}" + (f" piece {g[2]}" if g[2] else ""), g) for g in self._graphs if g[0] == rank]

    def _explorer(self, key: tuple[int, str, int]) -> Explorer:
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


def _names(vk: ViewKey) -> str:
    """``A``, or ``A vs B`` in the compare view, as the busy note says it."""
    a = vk.strategy.name if vk.strategy else "the layout"
    label = f"{a} vs {vk.compare.name}" if vk.view == "compare" and vk.compare else a
    return label + (" (differences only)" if vk.differences else "")


def _choice(strategy: StrategyLike, budget: float, solver: str,
            choices: Sequence[tuple[str, str]] = tuple(STRATEGY_CHOICES)) -> tuple[str, float, str]:
    """The explorer's controls for a strategy: ``"budget:0.3:greedy"`` -> ``("budget", 0.3, "greedy")``;
    ``"budget"`` alone keeps the slider's budget and solver."""
    if isinstance(strategy, str) and strategy.strip().lower() == "budget":
        return "budget", budget, solver
    s = Strategy.parse(strategy)
    offered = [v for _, v in choices]
    if s.kind not in offered:
        raise InputError(f"the explorer offers the strategies {', '.join(offered)}, not {s.name!r}",
                         "draw other strategies with tr.draw(strategy=...)")
    if s.kind == "budget":
        return "budget", float(s.budget or 0.0), str(s.solver)
    if s.kind == "optimal":  # the slider is a fraction; an absolute size is not a slider position
        if s.budget is None:
            raise InputError(f"the explorer's budget slider is a fraction of min-cut's bytes, not {s.name!r}",
                             "pass strategy='optimal:0.5' (or draw sizes with tr.draw(strategy='optimal:64MiB'))")
        return "optimal", float(s.budget), solver
    return s.kind, budget, solver


@contextlib.contextmanager
def _tracing_note(model: Any, params: str) -> Iterator[None]:
    """In IPython, a line saying what is being traced while ``explore(model, ...)`` traces
    (torch.compile takes seconds to minutes), replaced by nothing when done."""
    handle = None
    try:
        from IPython import get_ipython
        from IPython.display import HTML, display

        if get_ipython() is not None:
            from html import escape

            what = escape(getattr(model, "__class__", type(model)).__name__)
            handle = display(HTML(f"<p class='fxviz-tracing'>fxviz: tracing {what} (torch.compile + AOTAutograd, "
                                  f"parameters {escape(params)}): joint graph, then the first view…</p>"),
                             display_id=True)
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        handle = None
    try:
        yield
    finally:
        if handle is not None:
            handle.update(HTML(""))


def explore(model_or_trace: Any, *inputs: Any, params: str = "lifted", loss_fn: Callable | None = None,
            capture_route: str = "auto", **options: Any) -> Explorer:
    """The notebook explorer of a model (traced here, with ``inputs``) or of a ``Trace``.

    ``options``: ``view`` (joint, forward, backward, compare), ``strategy`` and ``compare``
    (default, min_cut, budget or ``budget:B[:solver]``, recompute_all, eager), ``budget``,
    ``solver``, ``group`` (module, none), ``depth`` and ``expand`` (boxes open from the start, as
    ``Trace.draw(expand=...)`` names them; a double click opens more), ``differences`` (the compare
    view shows only the nodes its two strategies treat differently, as its toggle does).  Given a model, the
    explorer can also switch between parameters lifted and captured as constants.
    """
    if hasattr(model_or_trace, "trace") and hasattr(model_or_trace, "compare_ranks"):  # a Run read from a log
        return RunExplorer(model_or_trace, **options)
    if isinstance(model_or_trace, (tuple, list)):
        raise InputError(f"fxviz.explore got a {type(model_or_trace).__name__} where the model goes",
                         "unpack it: model, inputs = examples.alexnet(); fxviz.explore(model, *inputs)")
    if isinstance(model_or_trace, Trace):
        if inputs:
            raise InputError("fxviz.explore(trace) takes no example inputs: the trace has them",
                             "call fxviz.explore(tr) or fxviz.explore(model, x)")
        return Explorer(model_or_trace, **options)
    return Explorer(model=model_or_trace, inputs=inputs, params=params,
                    trace_kwargs={"loss_fn": loss_fn, "capture_route": capture_route}, **options)
