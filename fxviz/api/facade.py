"""``Trace``: the object users hold.  A thin facade: it asks ``analysis.choices`` what to show when
nothing is named, hands each question to the analysis and presentation layers, and keeps every
answer in one cache per graph and one per model (``analysis.cache``), keyed by the question's inputs."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, overload

import torch.fx as fx

from fxviz.analysis.graph.pieces import PieceFacts, piece_facts
from fxviz.analysis.strategy import choices
from fxviz.analysis.strategy.cache import Cache, GraphCache
from fxviz.analysis.strategy.strategies import StrategiesLike, Strategy, StrategyLike, parse_list
from fxviz.sources.graphs import Capture, JointGraph, graph_of
from fxviz.sources.roles import role_counts

T = TypeVar("T")

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import torch.nn as nn

    from fxviz.analysis.graph.code import GraphCode
    from fxviz.analysis.graph.pieces import PieceSummary
    from fxviz.analysis.real.measure import Measured
    from fxviz.analysis.strategy.flow import FlowNetwork
    from fxviz.analysis.strategy.partition import Partition
    from fxviz.api.advice.options import Advice
    from fxviz.render.charts.plots import MemorySweep, MemoryTimeline
    from fxviz.render.graph.drawing import Drawing
    from fxviz.render.text.doctor_view import DoctorReport
    from fxviz.render.text.table import MemoryTable

__all__ = ["Trace"]

class Trace:
    """One captured joint graph, with its nodes named and classified, and every view of it."""

    def __init__(self, captured: Capture, index: int = 0, pieces: list[Trace] | None = None,
                 model_cache: Cache | None = None) -> None:
        self.capture = captured
        self.graph: JointGraph = captured.graphs[index]
        self.index = index
        self._pieces = pieces
        self._cache = GraphCache(self.graph, captured)  # facts of this graph, partitions included
        # facts of the whole model (piece facts, overview, doctor): one cache shared by every piece
        self._model_cache = Cache() if model_cache is None else model_cache

    # --- the captured data -----------------------------------------------------------------------
    @property
    def joint(self) -> fx.GraphModule:
        """The joint ``GraphModule`` exactly as torch's partitioner receives it (never mutated)."""
        return self.graph.gm

    @property
    def pieces(self) -> list[Trace]:
        """One Trace per captured graph, in execution order (several after graph breaks)."""
        if self._pieces is None:
            shared: list[Trace] = [self]  # one list, filled after each piece holds it
            shared += [Trace(self.capture, i, shared, self._model_cache) for i in range(1, len(self.capture.graphs))]
            self._pieces = shared
        return self._pieces

    def piece(self, index: int) -> Trace:
        """The ``index``-th graph of the model (0-based), with a clear error when there is none."""
        from fxviz.analysis.graph.pieces import check_piece

        return self.pieces[check_piece(index, self.capture)]

    @property
    def _piece_facts(self) -> PieceFacts:
        """Every graph run of the model (``analysis.pieces.piece_facts``), once per model."""
        return self._model_cache.get(("piece_facts",), lambda: piece_facts(self.capture))

    def overview(self, strategy: StrategyLike | None = None) -> Drawing:
        """The whole model as boxes, one per piece (graph), in execution order; a graph reused for
        several modules has numbered runs, code outside every graph is a dashed box."""
        from fxviz.render.graph.overview import draw_overview

        s = self._strategy(strategy)
        return self._model_cache.get(("overview", s), lambda: draw_overview(
            self.pieces[0].piece_summaries(s), self._piece_facts, name=self.title))

    def piece_summaries(self, strategy: StrategyLike | None = None) -> list[PieceSummary]:
        """One ``PieceSummary`` per piece: counts, saved activation bytes under ``strategy``, runs."""
        import pandas as pd

        from fxviz.analysis.graph.pieces import piece_summaries

        s = self._strategy(strategy)
        values = [p.memory_table([s]).iloc[0]["saved_activation_bytes"] if p.has_backward else None
                  for p in self.pieces]
        saved = [None if v is None or pd.isna(v) else int(v) for v in values]
        return piece_summaries(self.capture, saved, s.name, self._piece_facts)

    @property
    def graph_breaks(self) -> list[str]:
        """Why dynamo split the model into several graphs (empty when it is one graph)."""
        return list(self.capture.graph_breaks)

    @property
    def model(self) -> nn.Module | None:
        return self.capture.model

    @property
    def title(self) -> str:
        """What views call the model: its class, or the traced function's name."""
        return self.capture.title

    @property
    def from_log(self) -> bool:
        """True for a graph read from a log of a real run (no model: nothing can be run)."""
        return self.capture.route == "log"

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
        """The strategies views show when none are named, the default first (``analysis.choices``)."""
        return choices.offered(self.graph, self.capture)

    @property
    def params(self) -> str:
        return self.capture.params

    @property
    def loss(self) -> str:
        return self.capture.loss

    @property
    def has_backward(self) -> bool:
        return self.graph.has_backward

    @property
    def nodes(self) -> pd.DataFrame:
        """One row per joint-graph node, by name (``analysis.tables.node_table``; cached)."""
        from fxviz.analysis.graph.tables import node_table

        return self._cache.get(("nodes",), lambda: node_table(self.graph))

    def role_counts(self) -> dict[str, int]:
        """Joint-graph nodes per role (``roles.role_counts``), as the summary and overview count them."""
        return role_counts(self.graph.info.values())

    def parameters(self) -> pd.DataFrame:
        """Per parameter: its nodes and its gradient node (``analysis.tables.parameter_table``)."""
        from fxviz.analysis.graph.tables import parameter_table

        return parameter_table(self.capture, self.index)

    def summary(self) -> str:
        """A few readable lines: what was captured, how, and what the backward returns."""
        from fxviz.analysis.graph.tables import gradient_counts
        from fxviz.render.text.summary import summary_text

        counts = gradient_counts(self.parameters(), self._piece_facts) if self.capture.named_parameters() else None
        return summary_text(self.capture, self.index, counts)

    def __repr__(self) -> str:
        return "<fxviz.Trace " + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"

    # --- analysis ---------------------------------------------------------------------------------
    def partition(self, strategy: StrategyLike | None = None) -> Partition:
        """Partition the joint graph with ``strategy`` (cached; default :attr:`default_strategy`):
        ``"default"``, ``"min_cut"``, ``"budget:0.3[:greedy]"``, ``"eager"``, ``"recompute_all"``,
        ``"optimal:0.5"`` / ``"optimal:64MiB"``, a torch partitioner callable, or a ``Strategy``
        (every form: ``fxviz.analysis.strategy.strategies.forms_text()``)."""
        return self._cache.partition(self._strategy(strategy))

    def memory_table(self, strategies: StrategiesLike | None = None, gaps: bool | None = None, *,
                     measured: Measured | None = None) -> MemoryTable:
        """One row per strategy (a list or a comma-separated string; default :attr:`offered`): saved
        activation / parameter / input bytes (storage-aware), recompute FLOPs and bytes, op counts,
        peaks, torch's own estimate; ``error`` where a strategy fails on this graph.  Exact integers,
        styled in a notebook; ``attrs["caption"]`` says how the partitioners were called and bytes
        counted.  ``gaps``: how far each row is from the exact optimum (two MILP solves per row;
        default: when an ``optimal:B`` strategy is listed).  ``measured`` (:meth:`measure`): the
        twin columns ``measured_*`` on the row of the strategy the real step used."""
        from fxviz.analysis.memory.table import memory_table
        from fxviz.analysis.real.measure import add_measured
        from fxviz.render.text.table import MemoryTable

        chosen = tuple(parse_list(strategies) or self.offered)
        step = {} if self.graph.logged is not None else choices.step_names(self.capture)
        out = self._cache.frame(("memory_table", chosen, gaps), lambda: memory_table(
            self.graph, self._cache.partition, chosen, gaps=gaps, step=step), MemoryTable)
        return out if measured is None else add_measured(out, measured)

    def memory_table_by_piece(self, strategies: StrategiesLike | None = None, *,
                              measured: Measured | None = None) -> pd.DataFrame:
        """:meth:`memory_table` for every piece (graph), then one ``total`` row per strategy: the whole
        training step, each piece counted ``runs`` times (how often its graph ran; ``analysis.step``);
        ``measured``: the real step's twin beside its strategy's total row."""
        from fxviz.analysis.memory.step import PieceTable, step_table
        from fxviz.analysis.real.measure import add_measured

        out = step_table([PieceTable(p.index, len(self._piece_facts.runs_of(p.index)), p.has_backward,
                                      p.memory_table(strategies)) for p in self.pieces])
        return out if measured is None else add_measured(out, measured)

    def saved(self, strategy: StrategyLike | None = None, compare: StrategiesLike | None = None, *,
              run: int | None = None, measured: Measured | None = None) -> pd.DataFrame:
        """What the backward reads from the forward under ``strategy`` (default :attr:`default_strategy`),
        one row per value, biggest first, indexed by joint node name (``analysis.saved.saved_table``):
        ``kind``, ``module``, ``op``, ``what`` (``GELU output``), ``shape`` (a tuple of ints), ``dtype``,
        ``bytes`` (by storage, counted once), ``shares_storage_with``, ``source``; then what each strategy
        of ``compare`` (default: the other offered ones) does with it.  Each kind's bytes add up to the
        memory table's.  ``run=k``: a reused graph's k-th run, its modules named as in that run.
        ``measured`` (:meth:`measure`): a ``measured`` column, what the real step holds for each value."""
        import pandas as pd

        from fxviz.analysis.graph.pieces import renamed, run_renames
        from fxviz.analysis.memory.saved import saved_table

        main = self._strategy(strategy)
        listed = parse_list(compare)
        others = tuple(s for s in (listed if listed is not None else self.offered) if s != main)
        out = self._cache.frame(("saved", main, others), lambda: saved_table(
            self.graph, self.partition(main), [self.partition(s) for s in others],
            {} if self.graph.logged is not None else choices.step_names(self.capture)), pd.DataFrame)
        if run is not None:
            rename = run_renames(self._piece_facts, self.index, run)
            out["module"] = [renamed(m, rename) for m in out["module"]]
            out.attrs["run"] = run
        if measured is not None:
            from fxviz.analysis.real.measure import mark_saved

            out = mark_saved(out, measured, self.index)
        return out

    def memory_by_module(self, strategy: StrategyLike | None = None, depth: int | None = None, *,
                         run: int | None = None) -> pd.DataFrame:
        """The activation rows of :meth:`saved` summed per module at ``depth``, a level of the model's
        structure as the drawing counts it (default: the default drawing's; ``attrs["level"]``),
        biggest first; they add up to the memory table's ``saved_activation_bytes``
        (``render.module_level``).  ``run=k``: a reused graph's k-th run."""
        from fxviz.analysis.graph.pieces import run_renames
        from fxviz.render.graph.module_level import saved_by_module

        s = self._strategy(strategy)
        out = saved_by_module(self.saved(s, compare=[]), self.graph, self.partition(s), self._cache, depth,
                              run_renames(self._piece_facts, self.index, run) if run is not None else {})
        if run is not None:
            out.attrs["run"] = run
        return out

    def memory_sweep(self, budgets: Iterable[float] | None = None, solver: str | Sequence[str] = "dp",
                     progress: bool | None = None, optimal: bool = False) -> MemorySweep:
        """Min-cut under ``activation_memory_budget`` for each of ``budgets`` (default 0, 0.1, ..., 1)
        with ``solver`` (``dp``, ``greedy``, ``ilp`` or a list), identical partitions in one row;
        ``optimal=True`` adds the exact optimum and torch's ``default`` and ``min_cut`` points;
        ``progress``: a tqdm bar (default: over five budgets).  ``.pareto_plot()`` draws it."""
        from fxviz.analysis.memory.sweep import DEFAULT_BUDGETS, memory_sweep
        from fxviz.render.charts.plots import MemorySweep, sweep_progress

        chosen = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
        wrap = sweep_progress(solver, len(chosen), progress)
        return self._cache.frame(("memory_sweep", tuple(chosen), str(solver), optimal), lambda: memory_sweep(
            self.graph, self._cache.partition, chosen, solver=solver, progress=wrap, optimal=optimal), MemorySweep)

    def memory_timeline(self, strategy: StrategiesLike | None = None) -> MemoryTimeline:
        """Bytes held while each node of the forward and backward graph runs, for one strategy or a
        list (default: the offered ones that have graphs); each curve's top is the memory table's
        peak.  ``.peaks`` names each peak's node and module; ``.plot()`` draws the curves."""
        from fxviz.analysis.memory.timeline import memory_timeline
        from fxviz.render.charts.plots import MemoryTimeline

        chosen = tuple(parse_list(strategy) or choices.drawable(self.offered))
        return self._cache.frame(("memory_timeline", chosen), lambda: memory_timeline(
            self.graph, [self.partition(s) for s in chosen]), MemoryTimeline)

    def advise(self, saved: str | int | None = None, peak: str | int | None = None, optimizer: str | int | None = None,
               **options: Any) -> Advice:
        """Changes that make the step fit ``saved="50%"|"3 GiB"`` or ``peak="8 GiB"`` (``optimizer``: "adam" or
        its state's bytes), each predicted by tracing the changed model (``analysis.advice.advise``)."""
        from fxviz.analysis.advice.target import parse_target
        from fxviz.api.advice.search import advise

        target = parse_target(saved, peak)
        memo: dict[Any, Any] = self._model_cache.get(("advice_steps",), dict)  # changed models' steps
        return self._model_cache.get(("advise", target, optimizer, tuple(sorted(options.items()))), lambda: advise(
            self.capture, target, optimizer, memo=memo, as_trace=type(self), **options))  # opt.trace: a Trace

    def saved_text(self, strategy: StrategyLike | None = None) -> str:
        """:meth:`saved` in JAX's ``print_saved_residuals`` words, identical layers folded."""
        from fxviz.render.text.residuals import saved_text

        s = self._strategy(strategy)
        return saved_text(self.graph, self.partition(s), self.saved(s, compare=[]), self.model)

    # --- drawing ---------------------------------------------------------------------------------
    def draw(self, view: str = "joint", strategy: StrategyLike | None = None, compare: StrategyLike | None = None,
             group: str | None = None, depth: int | None = None, highlight: str | Sequence[str] | None = None, *,
             piece: int | None = None, expand: str | Sequence[str] | None = None, node_limit: int | None = None,
             timeout: float | None = None, differences: bool = False) -> Drawing:
        """Draw the graph: nodes colored by role, with a legend; returns a ``Drawing`` that shows
        itself in Jupyter and has ``.save('g.svg' | 'g.png' | 'g.dot')`` and ``.source``.

        Args:
            view: ``"joint"`` (forward and backward side by side), ``"forward"`` / ``"backward"`` (one
                side of ``strategy``'s partition), ``"compare"`` (``strategy`` vs ``compare``) or
                ``"flow"`` (min-cut's flow network and its cut: :meth:`flow_network`).
            strategy: mark what it saves, recomputes and removes (default: a log's ``logged``, a
                side or compare view's :attr:`default_strategy`; a model's joint view: roles only).
            compare: a second strategy: mark what each saves/recomputes that the other does not.
            group: ``"module"`` boxes by module path; ``"none"`` never collapses; default: every
                node up to ``node_limit`` nodes, module boxes above.  ``depth``: the boxes' level.
            highlight: a node name, op, parameter or module (or a list) to emphasise.
            piece: after graph breaks, which graph (0-based; :meth:`overview` draws them all).
            expand: boxes to open: a module path, a function box's name (``"masking_utils.sdpa_mask()"``)
                or ``"(in-place buffer updates)"``.
            timeout: seconds ``dot`` may take (an automatic collapse keeps a level whose layout timed out).
            differences: with ``compare``, only the nodes the two treat differently, with their
                direct producers and users faded as context.
        """
        from fxviz.api.trace_drawing import draw_trace

        return draw_trace(self, view, strategy, compare, group, depth, highlight, piece=piece, expand=expand,
                          node_limit=node_limit, timeout=timeout, differences=differences)

    def cached(self, key: Hashable, make: Callable[[], T]) -> T:
        """A fact of this graph made once per ``key`` (front-end helpers such as ``trace_drawing`` cache here)."""
        return self._cache.get(key, make)

    def flow_network(self, strategy: StrategyLike | None = None) -> FlowNetwork:
        """The flow network torch's min-cut partitioner solves here (recorded from its own call), with
        its cut: ``.edges`` (capacities, torch's reason for each infinite one), ``.cut``, ``.saved``."""
        from fxviz.analysis.strategy.flow import min_cut_network

        s = choices.flow_strategy(None if strategy is None else Strategy.parse(strategy))
        return self._cache.get(("flow", s), lambda: min_cut_network(self.graph, s))

    def check_gradients(self, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
        """Per parameter: ``parameter, has_gradient, max_abs_diff, ok`` against eager autograd."""
        from fxviz.analysis.real.gradients import check_gradients

        return check_gradients(self.capture, rtol=rtol, atol=atol)

    def doctor(self, strategy: StrategyLike | None = None, *, measured: Measured | None = None) -> DoctorReport:
        """Why parameters get no gradient, across every piece: each finding names the parameter, the
        node where the path is cut, why, and the fix (``strategy``: whose backward graphs are checked).
        ``.findings``, ``.table`` (one row per parameter), ``.healthy``; prints as text (cached).
        ``measured`` (:meth:`measure`): also what the real step keeps beyond the partition, with the knob."""
        from fxviz.analysis.doctor.diagnose import diagnose
        from fxviz.render.text.doctor_view import DoctorReport

        s = self._strategy(strategy)
        def make() -> DoctorReport:
            return DoctorReport(diagnose(self.capture, [p.partition(s) if p.has_backward else None
                                                        for p in self.pieces], measured))

        return make() if measured is not None else self._model_cache.get(("doctor", s), make)

    def code(self, part: str = "backward", strategy: StrategyLike | None = None) -> GraphCode:
        """The ``forward`` or ``backward`` graph of a partition (or the ``joint`` graph) as Python with
        real names (``features_0_weight``, ``tangent_loss``; saved values keep their joint names):
        ``str()`` is the code, ``.compile()`` makes it callable."""
        from fxviz.analysis.graph.code import graph_code

        s = None if part == "joint" else self._strategy(strategy)
        where = f", {graph_of(self.index, len(self.capture.graphs))}" if len(self.capture.graphs) > 1 else ""
        title = f"{self.title}, parameters {self.params}{where}"
        return self._cache.get(("code", part, s), lambda: graph_code(
            self.graph, part, None if s is None else self.partition(s), title=title))

    @overload
    def measure(self, strategies: None = None) -> Measured: ...
    @overload
    def measure(self, strategies: StrategiesLike) -> MemoryTable: ...
    def measure(self, strategies: StrategiesLike | None = None) -> Measured | MemoryTable:
        """Run the real compiled step (``torch.compile`` of a copy of the model, this trace's backend and
        torch config; model, ``.grad``, RNG, dynamo caches left as they were) and catch what it saves for
        the backward: ``.saved`` (a row per storage, named: the partition's value, or a copy of a parameter
        in another layout made by inductor), ``.saved_bytes`` beside ``.estimated_bytes``, ``.reason()``;
        shown by ``memory_table/saved/doctor(measured=m)``.  ``strategies``: each one's partition run on
        real tensors instead: the memory table with ``replayed_*`` twins (``analysis.replay``)."""
        from fxviz.analysis.real.measure import measure_step, session_step_strategy

        if strategies is not None:
            from fxviz.analysis.real.replay import add_replayed, replay_strategies

            chosen = parse_list(strategies) or list(self.offered)
            replays = replay_strategies(self.capture, self.graph, self._cache.partition, chosen)
            return add_replayed(self.memory_table(chosen), replays)
        strategy = session_step_strategy()
        parts = [(p.graph, p.partition(strategy) if p.has_backward else None) for p in self.pieces]
        return measure_step(self.capture, parts, strategy)
