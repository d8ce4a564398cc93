"""``Trace``: the object users hold.  A thin facade: it asks ``analysis.strategy.choices`` what to show
when nothing is named, hands each question to the analysis and presentation floors, and keeps every
answer in one cache per graph and one per model (``analysis.strategy.cache``), keyed by the question's
inputs.  One door per answer: the saved values are ``saved()`` (which also sums per module and prints
itself folded), the memory table is ``memory_table()`` at the scope asked for, a drawing is ``draw()``
(every view, the overview and the flow network included), a measurement is ``measure()``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import torch.fx as fx

from fxviz import _torch
from fxviz.analysis.advice.target import optimizer_bytes, parse_target
from fxviz.analysis.doctor.diagnose import diagnose
from fxviz.analysis.graph.code import graph_code
from fxviz.analysis.graph.pieces import PieceFacts, check_piece, piece_facts, piece_summaries, renamed, run_renames
from fxviz.analysis.graph.tables import gradient_counts, node_table, parameter_table
from fxviz.analysis.memory.program import compiles
from fxviz.analysis.memory.step import PieceTable, step_table
from fxviz.analysis.memory.sweep import DEFAULT_BUDGETS, memory_sweep
from fxviz.analysis.memory.table import memory_table
from fxviz.analysis.real.gradients import check_gradients
from fxviz.analysis.real.replay import add_replayed, replay_strategies
from fxviz.analysis.strategy import choices
from fxviz.analysis.strategy.cache import Cache, GraphCache
from fxviz.analysis.strategy.flow import min_cut_network
from fxviz.analysis.strategy.strategies import StrategiesLike, Strategy, StrategyLike, parse_list
from fxviz.core.collector import old_objects_frozen
from fxviz.core.errors import InputError
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.text.residuals import saved_text
from fxviz.render.text.summary import summary_text
from fxviz.sources.graphs import Capture, JointGraph, graph_of

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.analysis.graph.code import GraphCode
    from fxviz.analysis.memory.whole import WholeStep
    from fxviz.analysis.real.measure import Measured
    from fxviz.analysis.strategy.flow import FlowNetwork
    from fxviz.analysis.strategy.partition import Partition
    from fxviz.api.advice.options import Advice
    from fxviz.api.saved_table import SavedTable
    from fxviz.render.charts.plots import MemorySweep, MemoryTimeline
    from fxviz.render.graph.drawing import Drawing
    from fxviz.render.text.doctor_view import DoctorReport
    from fxviz.render.text.table import MemoryTable

__all__ = ["Trace", "Pieces"]


class Pieces(list):
    """A model's graphs in execution order (several after graph breaks); ``pieces[i]`` out of range
    says how many there are, in the words every view numbers them by."""

    def __init__(self, traces: Iterable[Trace], capture: Capture) -> None:
        super().__init__(traces)
        self._capture = capture

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, int) and not isinstance(index, bool):
            return super().__getitem__(check_piece(index + len(self) if index < 0 else index, self._capture))
        return super().__getitem__(index)


class Trace:
    """One captured joint graph, with its nodes named and classified, and every view of it."""

    def __init__(self, captured: Capture, index: int = 0, pieces: Pieces | None = None,
                 model_cache: Cache | None = None) -> None:
        self.capture = captured
        self.graph: JointGraph = captured.graphs[index]
        self._pieces = pieces
        # facts of the whole model (piece facts, overview, doctor, the measurement): one cache every piece shares
        self._model_cache = Cache() if model_cache is None else model_cache
        self._cache = self._graph_cache(index)  # facts of this graph, partitions included

    def _graph_cache(self, index: int) -> GraphCache:
        """The facts of graph ``index`` (partitions, compiled code), one cache per graph that every piece reaches."""
        return self._model_cache.get(("graph", index), lambda: GraphCache(self.capture.graphs[index], self.capture))

    # --- the captured data -----------------------------------------------------------------------
    @property
    def joint(self) -> fx.GraphModule:
        """The joint ``GraphModule`` exactly as torch's partitioner receives it (never mutated)."""
        return self.graph.gm

    @property
    def pieces(self) -> Pieces:
        """One Trace per captured graph, in execution order (several after graph breaks)."""
        if self._pieces is None:
            shared = Pieces([self], self.capture)  # one list, filled after each piece holds it
            shared += [Trace(self.capture, i, shared, self._model_cache) for i in range(1, len(self.capture.graphs))]
            self._pieces = shared
        return self._pieces

    @property
    def _piece_facts(self) -> PieceFacts:
        """Every graph run of the model (``analysis.graph.pieces.piece_facts``), once per model."""
        return self._model_cache.get(("piece_facts",), lambda: piece_facts(self.capture))

    @property
    def default_strategy(self) -> Strategy:
        """What views show when no strategy is named: ``logged`` for a log with its partitioned graphs,
        else what the user's step partitions with (``choices.step_strategy``): torch.compile's min-cut,
        its knapsack under an ``activation_memory_budget`` below 1, ``default`` for ``aot_function``."""
        return choices.default_strategy(self.graph, self.capture)

    def _strategy(self, strategy: StrategyLike | None) -> Strategy:
        return self.default_strategy if strategy is None else Strategy.parse(strategy)

    @property
    def offered(self) -> tuple[Strategy, ...]:
        """The strategies views show when none are named, the default first (``analysis.strategy.choices``)."""
        return choices.offered(self.graph, self.capture)

    @property
    def nodes(self) -> pd.DataFrame:
        """One row per joint-graph node, by name (``analysis.graph.tables.node_table``; cached)."""
        return self._cache.get(("nodes",), lambda: node_table(self.graph))

    def parameters(self) -> pd.DataFrame:
        """Per parameter: its nodes and its gradient node (``analysis.graph.tables.parameter_table``)."""
        return parameter_table(self.capture, self.graph.index)

    def summary(self) -> str:
        """A few readable lines: what was captured, how, and what the backward returns."""
        counts = gradient_counts(self.parameters(), self._piece_facts) if self.capture.named_parameters() else None
        return summary_text(self.capture, self.graph.index, counts)

    def __repr__(self) -> str:
        return "<fxviz.Trace " + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"

    # --- analysis ---------------------------------------------------------------------------------
    def partition(self, strategy: StrategyLike | None = None) -> Partition:
        """Partition the joint graph with ``strategy`` (cached; default :attr:`default_strategy`):
        ``"min_cut"``, ``"default_partition"`` (or ``"default"``), ``"budget:0.3[:greedy]"``, ``"eager"``,
        ``"recompute_all"``, ``"optimal:0.5"`` / ``"optimal:64MiB"``, a torch partitioner callable, or a ``Strategy``
        (every form: ``fxviz.analysis.strategy.strategies.forms_text()``)."""
        return self._cache.partition(self._strategy(strategy))

    def _measured(self, measured: Measured | bool | None) -> Measured | None:
        """``measured=`` as every method takes it: a measurement, True (measure now, once), or None."""
        if measured is None or measured is False:
            return None
        if measured is True:
            return self.measure()
        return measured

    def _graph_table(self, chosen: tuple[Strategy, ...], gaps: bool | None = None,
                     compiled: tuple[Strategy, ...] | None = None, index: int | None = None) -> MemoryTable:
        """Graph ``index``'s (default: this one's) memory table for ``chosen`` (cached); the compiled code's
        peaks for the rows of ``compiled`` (default: every row), each lowered once."""
        from fxviz.render.text.table import MemoryTable

        cache = self._cache if index is None else self._graph_cache(index)
        step = {} if cache.graph.logged is not None else choices.step_names(self.capture)
        lowered = chosen if compiled is None else compiled

        def peaks(s: Strategy) -> Any:
            return cache.row_peaks(s) if s in lowered else None

        return cache.frame(("memory_table", chosen, gaps, lowered), lambda: memory_table(
            cache.graph, cache.partition, chosen, gaps=gaps, step=step, get_peaks=peaks), MemoryTable)

    def memory_table(self, strategies: StrategiesLike | None = None, gaps: bool | None = None, *,
                     scope: Literal["graph", "step"] | None = None,
                     measured: Measured | bool | None = None, compiled: bool = False) -> MemoryTable:
        """One row per strategy (a list or a comma-separated string; default :attr:`offered`): saved
        activation / parameter / input bytes (storage-aware), recompute FLOPs and bytes, op counts,
        peaks, torch's own estimate; ``error`` where a strategy fails on this graph.  Exact integers,
        styled in a notebook; ``attrs["caption"]`` says how the partitioners were called and bytes
        counted.  ``gaps``: how far each row is from the exact optimum (two MILP solves per row;
        default: when an ``optimal:B`` strategy is listed).

        Peaks (``forward_peak_bytes``, ``backward_peak_bytes``) are the program's the step runs: under
        inductor its generated code's (lowered by inductor, seconds per graph: the row of the strategy
        the step runs, every row with ``compiled=True``, the others empty), under ``aot_eager`` the
        graphs' op by op; ``unfused_*``: the liveness walk over the unfused graphs, every row.

        ``scope``: ``"graph"`` (this graph alone) or ``"step"`` (every graph of the training step: a row
        per graph and strategy, each as that graph alone, then the whole step's ``total`` row per
        strategy: its peaks in run order, a value crossing a graph break counted once as an activation,
        what eager code between graphs holds); default: the step where the model has several graphs,
        else the graph.  ``measured``: ``measure()``'s result, or True to measure now: its twin
        columns ``measured_*`` (saved bytes, each phase's peak) beside the row of the strategy the real
        step used.  Rows are labelled by
        strategy (``mt.loc["min_cut"]``; the step's ``mt.loc["step min_cut"]``)."""
        from fxviz.analysis.real.measure import add_measured
        from fxviz.render.text.table import MemoryTable

        chosen = tuple(parse_list(strategies) or self.offered)
        if scope not in (None, "graph", "step"):
            raise InputError(f"unknown scope {scope!r}", "use scope='graph' (this graph) or scope='step' (every graph)")
        whole = scope == "step" or (scope is None and len(self.capture.graphs) > 1)
        lowered = chosen if compiled else (self.default_strategy,)  # each costs inductor's lowering
        out = self._step_table(chosen, lowered) if whole else self._graph_table(chosen, gaps, lowered)
        measurement = self._measured(measured)
        return MemoryTable.of(out if measurement is None else add_measured(out, measurement))

    def _step_table(self, chosen: tuple[Strategy, ...], lowered: tuple[Strategy, ...]) -> pd.DataFrame:
        """Every graph's rows, then one ``total`` row per strategy (``analysis.memory.step``), the whole
        step's peaks from its compiled code for the strategies of ``lowered``."""
        from fxviz.render.text.table import MemoryTable

        tables = {g.index: self._graph_table(chosen, None, lowered, g.index) for g in self.capture.graphs}
        totals = {s.name: self._whole.totals(s, tables, s in lowered) for s in chosen if s.kind != "eager"}
        table = step_table([PieceTable(g.index, len(self._piece_facts.runs_of(g.index)), g.has_backward,
                                       tables[g.index]) for g in self.capture.graphs], totals)
        return MemoryTable.of(table)

    @property
    def _whole(self) -> WholeStep:
        """The training step over every graph (``analysis.memory.whole``), one per model."""
        from fxviz.analysis.memory.whole import WholeStep

        return self._model_cache.get(("whole",), lambda: WholeStep(self.capture, self._graph_cache,
                                                                   self._model_cache))

    def saved(self, strategy: StrategyLike | None = None, compare: StrategiesLike | None = None, *,
              run: int | None = None, measured: Measured | bool | None = None) -> SavedTable:
        """What the backward reads from the forward under ``strategy`` (default :attr:`default_strategy`),
        one row per value, activations first (biggest first), the inputs and parameters held anyway last,
        indexed by joint node name (``analysis.memory.saved``): ``kind``, ``module``, ``op``, ``what``
        (``GELU output``), ``shape`` (a tuple of ints), ``dtype``, ``bytes`` (by storage, counted once),
        ``shares_storage_with``, ``source``; then one column per strategy, named by it: what ``strategy``
        does with each value, then each of ``compare`` (default: the other offered ones).  Each kind's
        bytes add up to the memory table's.  ``run=k``: a reused graph's k-th run, its modules named as in that run.
        ``measured`` (a ``measure()`` result, or True): a ``measured`` column, what the real step holds.

        ``.by_module(depth)`` sums the activations per module; ``print(...)`` / ``.to_text()`` reads it
        as words, identical layers folded."""
        import pandas as pd

        from fxviz.analysis.memory.saved import saved_table
        from fxviz.analysis.real.measure import mark_saved
        from fxviz.api.saved_table import SavedTable

        main = self._strategy(strategy)
        listed = parse_list(compare)
        others = tuple(s for s in (listed if listed is not None else self.offered) if s != main)
        out = self._cache.frame(("saved", main, others), lambda: saved_table(
            self.graph, self.partition(main), [self.partition(s) for s in others],
            {} if self.graph.logged is not None else choices.step_names(self.capture)), pd.DataFrame)
        rename = run_renames(self._piece_facts, self.graph.index, run) if run is not None else {}
        if run is not None:
            out["module"] = [renamed(m, rename) for m in out["module"]]
            out.attrs["run"] = run
        measurement = self._measured(measured)
        if measurement is not None:
            out = mark_saved(out, measurement, self.graph)
        return SavedTable.of(out, lambda table, depth: self._by_module(table, main, depth, rename, run),
                             lambda table: self._saved_text(table, main))

    def _by_module(self, table: pd.DataFrame, strategy: Strategy, depth: int | None, rename: dict[str, str],
                   run: int | None) -> pd.DataFrame:
        from fxviz.render.graph.module_level import saved_by_module

        out = saved_by_module(table, self.graph, self.partition(strategy), self._cache, depth, rename)
        if run is not None:
            out.attrs["run"] = run
        return out

    def _saved_text(self, table: pd.DataFrame, strategy: Strategy) -> str:
        return saved_text(self.graph, self.partition(strategy), table, self.capture.model)

    def memory_sweep(self, budgets: Iterable[float] | None = None, solver: str | Sequence[str] = "dp",
                     progress: bool | None = None, optimal: bool = False, *, compiled: bool = False) -> MemorySweep:
        """Min-cut under ``activation_memory_budget`` for each of ``budgets`` (default 0, 0.1, ..., 1)
        with ``solver`` (``dp``, ``greedy``, ``ilp`` or a list), identical partitions in one row;
        ``optimal=True`` adds the exact optimum and torch's ``default`` and ``min_cut`` points;
        ``progress``: a tqdm bar (default: over five budgets).  ``backward_peak_bytes`` under inductor:
        ``compiled=True`` lowers each distinct partition (seconds each), else empty (``unfused_*``: the
        walk).  ``.pareto_plot()`` draws it."""
        from fxviz.render.charts.plots import MemorySweep, sweep_progress

        chosen = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
        wrap = sweep_progress(solver, len(chosen), progress)
        peaks = self._cache.row_peaks if compiled else None
        return self._cache.frame(("memory_sweep", tuple(chosen), str(solver), optimal, compiled), lambda: memory_sweep(
            self.graph, self._cache.partition, chosen, solver=solver, progress=wrap, optimal=optimal,
            get_peaks=peaks), MemorySweep)

    def memory_timeline(self, strategy: StrategiesLike | None = None, *, unfused: bool = False,
                        scope: Literal["graph", "step"] | None = None,
                        optimizer: str | int | None = None, measured: Measured | bool | None = None
                        ) -> MemoryTimeline:
        """Bytes held at each step of the forward and backward, for one strategy or a list (default: the
        step's under inductor, each other one lowered when named; every offered one with graphs under
        ``aot_eager``): each line of inductor's code that allocates or frees, or each node of the graphs
        run op by op (``unfused=True``: the unfused walk under inductor too).  ``scope`` as in
        :meth:`memory_table`: a model of several graphs gives the whole step in run order (``piece``
        names each row's graph).  Each curve's top is the memory table's peak (the total row's for the
        step); ``.peaks`` names each peak's node and module; ``.plot()`` draws the curves.  Parameters and
        inputs are ``resident_bytes``, gradients are on the curve from the line that makes them;
        ``optimizer`` (``"adam"``, ``"sgd"`` or its state's bytes) adds its state, held throughout
        (``optimizer_bytes``, in ``total_bytes``).  ``measured`` (``measure()``'s result, or True): the
        real step's peaks beside the curves (``attrs["measured"]``, drawn by ``.plot()``)."""
        frame = self._timeline(strategy, unfused, scope)
        measurement = self._measured(measured)
        if measurement is not None and measurement.forward_peak_bytes is not None and len(frame):
            held = int(frame["resident_bytes"].max())
            frame.attrs["measured"] = {phase: value + held for phase, value in (
                ("forward", measurement.forward_peak_bytes), ("backward", measurement.backward_peak_bytes))
                if value is not None}
        if optimizer is None:
            return frame
        trained = sum(t.numel() * t.element_size() for _, t in self.capture.named_parameters() if t.requires_grad)
        extra = optimizer_bytes(optimizer, trained)
        frame["optimizer_bytes"] = extra
        frame["total_bytes"] = frame["total_bytes"] + extra
        frame.attrs["measured"] = {k: v + extra for k, v in frame.attrs.get("measured", {}).items()}
        return frame

    def _timeline(self, strategy: StrategiesLike | None, unfused: bool, scope: str | None) -> MemoryTimeline:
        from fxviz.analysis.memory.timeline import memory_timeline
        from fxviz.analysis.memory.whole import timeline_frame
        from fxviz.render.charts.plots import MemoryTimeline

        code = compiles(self.graph) and not unfused
        default = (self.default_strategy,) if code else tuple(choices.drawable(self.offered))
        chosen = tuple(parse_list(strategy) or default)
        if scope == "step" or (scope is None and len(self.capture.graphs) > 1):
            def step() -> pd.DataFrame:
                rows, skipped = [], []
                for s in chosen:
                    tables = {g.index: self._graph_table((s,), None, (s,) if code else (), g.index)
                              for g in self.capture.graphs}
                    more = self._whole.timeline_rows(s, tables, unfused) if s.kind != "eager" else []
                    rows += more
                    skipped += [] if more else [s.name]
                how = "inductor's code" if code else "node by node"
                return timeline_frame(rows, skipped, f"the whole step, {how}")

            return self._model_cache.frame(("step_timeline", chosen, code), step, MemoryTimeline)
        cache = self._cache

        def compiled(p: Partition) -> Any:
            return cache.compiled(p.strategy), cache.graph_step(p.strategy)

        return self._cache.frame(("memory_timeline", chosen, code), lambda: memory_timeline(
            self.graph, [self.partition(s) for s in chosen], compiled if code else None), MemoryTimeline)

    def advise(self, saved: str | int | None = None, peak: str | int | None = None, optimizer: str | int | None = None,
               **options: Any) -> Advice:
        """Changes that make the step fit ``saved="50%"|"3 GiB"`` or ``peak="8 GiB"`` (``optimizer``: "adam" or
        its state's bytes), each predicted by tracing the changed model (``api.advice.search.advise``)."""
        from fxviz.api.advice.search import advise

        target = parse_target(saved, peak)
        memo: dict[Any, Any] = self._model_cache.get(("advice_steps",), dict)  # changed models' steps
        # the advice reads each step's memory table through a Trace (this one, and one of each changed
        # model, of this class: the advice floor cannot import the facade that imports it)
        return self._model_cache.get(("advise", target, optimizer, tuple(sorted(options.items()))), lambda: advise(
            self, target, optimizer, memo=memo, **options))

    # --- drawing ---------------------------------------------------------------------------------
    def draw(self, view: str | DrawSpec = "joint", strategy: StrategyLike | None = None,
             compare: StrategyLike | None = None, group: str | None = None, depth: int | None = None,
             highlight: str | Sequence[str] | None = None, *, piece: int | None = None,
             expand: str | Sequence[str] | None = None, node_limit: int | None = None,
             timeout: float | None = None, differences: bool = False) -> Drawing:
        """Draw the graph: nodes colored by role, with a legend; returns a ``Drawing`` that shows
        itself in Jupyter and has ``.save('g.svg' | 'g.png' | 'g.dot')`` and ``.source``.

        Args:
            view: ``"joint"`` (forward and backward side by side), ``"forward"`` / ``"backward"`` (one
                side of ``strategy``'s partition), ``"compare"`` (``strategy`` vs ``compare``),
                ``"flow"`` (min-cut's flow network and its cut: :meth:`flow_network`) or ``"overview"``
                (every graph of a graph-broken model as one box, in execution order); or a
                ``DrawSpec`` (``fxviz.render.graph.spec``) that says all of it, taken as it is.
            strategy: mark what it saves, recomputes and removes (default: :attr:`default_strategy`, a
                log's ``logged``; a graph compiled for inference: roles only).
            compare: a second strategy: mark what each saves/recomputes that the other does not.
            group: ``"module"`` boxes by module path; ``"none"`` never collapses; default: every
                node up to ``node_limit`` nodes, module boxes above.  ``depth``: the boxes' level.
            highlight: a node name, op, parameter or module (or a list) to emphasise.
            piece: after graph breaks, which graph (0-based; ``view="overview"`` draws them all).
            expand: boxes to open: a module path, a function box's name (``"masking_utils.sdpa_mask()"``)
                or ``"(in-place buffer updates)"``.
            timeout: seconds ``dot`` may take (an automatic collapse keeps a level whose layout timed out).
            differences: with ``compare``, only the nodes the two treat differently, with their
                direct producers and users faded as context.
        """
        if isinstance(view, DrawSpec):
            spec = view
        else:
            named = None if strategy is None else Strategy.parse(strategy)
            second = None if compare is None else Strategy.parse(compare)
            if view == "flow":
                named = choices.flow_strategy(named)
            elif view == "overview":
                named = self._strategy(named)
            elif view in ("joint", "forward", "backward", "compare"):
                named = choices.drawn_strategy(self.graph, self.capture, view, named, second)
            spec = DrawSpec.of(view, named, second, group, depth, expand, highlight, differences, piece,
                               node_limit, timeout)
        if spec.piece is not None and spec.view != "overview":
            return self.pieces[spec.piece].draw(spec.replace(piece=None))
        with old_objects_frozen():  # the collector walks the drawing's records, not the trace's millions of objects
            return self._cache.get(("draw", spec), lambda: self._drawn(spec))

    def _drawn(self, spec: DrawSpec) -> Drawing:
        """``spec`` drawn (``draw`` caches it): the flow network, the overview, or a view of this graph."""
        from fxviz.render.graph.drawing import DEFAULT_TIMEOUT

        timeout = DEFAULT_TIMEOUT if spec.timeout is None else spec.timeout
        if spec.view == "flow":
            from fxviz.render.graph.flow import draw_flow

            assert spec.strategy is not None
            return draw_flow(self.flow_network(spec.strategy), self.graph, self.capture.title, timeout)
        if spec.view == "overview":
            from fxviz.render.graph.overview import draw_overview

            assert spec.strategy is not None
            strategy = spec.strategy
            return self._model_cache.get(("overview", strategy), lambda: draw_overview(piece_summaries(
                self.capture, self.memory_table([strategy], scope="step"), strategy.name, self._piece_facts),
                self._piece_facts, name=self.capture.title))
        from fxviz.render.graph.views import draw

        name = self.capture.title
        if len(self.capture.graphs) > 1:
            name += f" ({graph_of(self.graph.index, len(self.capture.graphs))})"
        return draw(self.graph, spec, self.partition(spec.strategy) if spec.strategy is not None else None,
                    self.partition(spec.compare) if spec.compare is not None else None, name=name,
                    names=choices.step_names(self.capture))

    def flow_network(self, strategy: StrategyLike | None = None) -> FlowNetwork:
        """The flow network torch's min-cut partitioner solves here (recorded from its own call), with
        its cut: ``.edges`` (capacities, torch's reason for each infinite one), ``.cut``, ``.saved``."""
        s = choices.flow_strategy(None if strategy is None else Strategy.parse(strategy))
        return self._cache.get(("flow", s), lambda: min_cut_network(self.graph, s))

    # --- gradients, code, the real step ----------------------------------------------------------
    def check_gradients(self, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
        """Per parameter: ``parameter, has_gradient, max_abs_diff, ok`` against eager autograd."""
        return check_gradients(self.capture, rtol=rtol, atol=atol)

    def doctor(self, strategy: StrategyLike | None = None, *,
               measured: Measured | bool | None = None) -> DoctorReport:
        """Why parameters get no gradient, across every piece: each finding names the parameter, the
        node where the path is cut, why, and the fix (``strategy``: whose backward graphs are checked).
        ``.findings``, ``.table`` (one row per parameter), ``.healthy``; prints as text (cached).
        ``measured`` (a ``measure()`` result, or True): also what the real step keeps beyond the
        partition, with the knob."""
        from fxviz.render.text.doctor_view import DoctorReport

        s = self._strategy(strategy)
        measurement = self._measured(measured)

        def make() -> DoctorReport:
            return DoctorReport(diagnose(self.capture, [p.partition(s) if p.graph.has_backward else None
                                                        for p in self.pieces], measurement))

        return make() if measurement is not None else self._model_cache.get(("doctor", s), make)

    def code(self, part: str = "backward", strategy: StrategyLike | None = None) -> GraphCode:
        """The ``forward`` or ``backward`` graph of a partition (or the ``joint`` graph) as Python with
        real names (``features_0_weight``, ``tangent_loss``; saved values keep their joint names):
        ``str()`` is the code, ``.compile()`` makes it callable."""
        s = None if part == "joint" else self._strategy(strategy)
        count = len(self.capture.graphs)
        where = f", {graph_of(self.graph.index, count)}" if count > 1 else ""
        title = f"{self.capture.title}, parameters {self.capture.params}{where}"
        return self._cache.get(("code", part, s), lambda: graph_code(
            self.graph, part, None if s is None else self.partition(s), title=title))

    def measure(self) -> Measured:
        """Run the real compiled step (``torch.compile`` of a copy of the model, this trace's backend and
        torch config; model, ``.grad``, RNG, dynamo caches left as they were) and catch what it saves for
        the backward: ``.saved`` (a row per storage, named: the partition's value, or a copy of a parameter
        in another layout made by inductor), ``.saved_bytes`` beside ``.estimated_bytes``, ``.reason()``;
        and each phase's peak above the state before the step (``.forward_peak_bytes``,
        ``.backward_peak_bytes``, ``.after_forward_bytes``; ``.peak_method``: on CPU the profiler's
        allocation events in time order, on CUDA ``max_memory_allocated`` per phase, blocks of 512 B);
        shown by ``memory_table/saved/doctor/memory_timeline(measured=m)`` (or ``measured=True``).  Measured once per
        model and torch config (functorch's and inductor's, as torch saves them): a changed setting
        measures again."""
        from fxviz.analysis.real.measure import measure_step, session_step_strategy

        strategy = session_step_strategy()

        def run() -> Measured:
            parts = [(p.graph, p.partition(strategy) if p.graph.has_backward else None) for p in self.pieces]
            return measure_step(self.capture, parts, strategy)

        return self._model_cache.get(("measure", strategy, _torch.step_config_state()), run)

    def replay(self, strategies: StrategiesLike | None = None) -> MemoryTable:
        """Each strategy's partition run on real tensors (default: the offered ones): the memory table
        with ``replayed_*`` twins beside the estimates (``analysis.real.replay``)."""
        from fxviz.render.text.table import MemoryTable

        chosen = parse_list(strategies) or list(self.offered)
        replays = replay_strategies(self.capture, self.graph, self._cache.partition, chosen)
        return MemoryTable.of(add_replayed(self._graph_table(tuple(chosen)), replays))
