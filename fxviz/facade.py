"""``Trace``: the object users hold.  A thin facade: it names the captured data, asks
``analysis.choices`` what to show when nothing is named, hands each question to the analysis and
presentation layers, and keeps every answer in one cache per graph and one per model, keyed by the
question's inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import torch.fx as fx

from .analysis import choices
from .analysis.cache import Cache, GraphCache
from .analysis.pieces import PieceFacts, piece_facts
from .analysis.strategies import StrategiesLike, Strategy, StrategyLike, parse_list
from .capture import Capture, JointGraph, capture, graph_of
from .roles import ROLES, role_counts

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    import torch.nn as nn

    from .analysis.code import GraphCode
    from .analysis.flow import FlowNetwork
    from .analysis.partition import Partition
    from .analysis.pieces import PieceSummary
    from .render.doctor_view import DoctorReport
    from .render.drawing import Drawing
    from .render.plots import MemorySweep, MemoryTimeline
    from .render.structure import Structure
    from .render.table import MemoryTable

__all__ = ["Trace", "trace"]

NODE_COLUMNS = ["op", "target", "short_op", "role", "phase", "qualname", "module", "shape", "dtype",
                "bytes", "source", "source_code", "seq_nr", "symbolic_shape", "checkpoint_policy", "checkpoint_region"]
"""``Trace.nodes``' columns; ``shape`` is a tuple of ints (symbolic sizes at their example value), as in
every table of fxviz."""

Frame = TypeVar("Frame", bound="pd.DataFrame")


def _copied(df: pd.DataFrame, as_type: type[Frame]) -> Frame:
    """A copy of a cached frame, as ``as_type`` (a presentation subclass), its ``attrs`` with it:
    the cache keeps its own, whatever the caller does to the copy."""
    out = as_type(df.copy())
    out.attrs = dict(df.attrs)
    return out


def trace(model_or_fn: Callable, *example_inputs: Any, loss_fn: Callable | None = None,
          params: str = "lifted", capture_route: str = "auto", backend: str = "aot_eager",
          dynamic: bool = False) -> Trace:
    """Trace ``model_or_fn(*example_inputs)`` into its joint forward+backward graph.

    Args:
        model_or_fn: an ``nn.Module`` or a function of tensors.
        *example_inputs: the inputs to call it with (tensors; token ids are fine).
        loss_fn: maps the outputs to a scalar; default: the output itself if it is a scalar, else
            the sum of every floating output.
        params: ``"lifted"`` (parameters and buffers become graph inputs, as torch.compile does)
            or ``"closure"`` (parameters are captured as constants, as ``aot_function`` on a
            closure does: the backward then computes no parameter gradient).
        capture_route: ``"auto"`` (dynamo, or aot for meta-device models and closure mode),
            ``"dynamo"`` (torch.compile's capture: module paths, source lines, graph breaks) or
            ``"aot"`` (aot_function over fake tensors: no weights touched, no graph breaks).
        backend: whose joint graph to capture.  ``"aot_eager"`` (default): the graph AOTAutograd
            traces with its own decompositions.  ``"inductor"``: the graph torch.compile's default
            backend partitions (inductor's decompositions, e.g. gelu as erf; its joint-graph
            passes), with min-cut called as inductor calls it.  No kernel is generated.
        dynamic: torch.compile's flag: trace with symbolic sizes (SymInts saved for the backward
            are listed; bytes are evaluated at the example sizes).

    Returns:
        A :class:`Trace`.  With graph breaks, it is the first graph; ``tr.pieces`` has them all,
        ``tr.draw(piece=i)`` draws one, ``tr.overview()`` all of them in execution order,
        ``tr.memory_table_by_piece()`` tabulates each and the whole step, and ``tr.doctor()``
        reasons over all of them (code that ran outside every graph, graphs reused for several modules).

    The model, its ``.grad`` fields, buffers, ``training`` flags and the RNG are left untouched.
    """
    return Trace(capture(model_or_fn, tuple(example_inputs), loss_fn=loss_fn, params=params,
                         route=capture_route, backend=backend, dynamic=dynamic))


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
        """The joint forward+backward ``GraphModule`` exactly as torch's partitioner receives it
        (forward-only when nothing requires grad).  Never mutated by fxviz."""
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
        from .errors import InputError

        pieces = self.pieces
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(pieces):
            raise InputError(f"piece={index!r} is not a graph of this trace, which has {len(pieces)} "
                             f"(graph breaks: {len(self.graph_breaks)})",
                             f"pass a piece from 0 to {len(pieces) - 1}" if len(pieces) > 1 else
                             "this model is one graph: leave piece out")
        return pieces[index]

    @property
    def piece_facts(self) -> PieceFacts:
        """Every graph run of the model (``analysis.pieces.piece_facts``), computed once per model."""
        return self._model_cache.get(("piece_facts",), lambda: piece_facts(self.capture))

    def overview(self, strategy: StrategyLike | None = None) -> Drawing:
        """The whole model as boxes, one per piece (graph), in execution order: edges follow
        execution, a graph dynamo ran for several modules has a double border and numbered runs,
        code that ran outside every graph is a dashed box.  Returns a ``Drawing``."""
        from .render.overview import draw_overview

        s = self._strategy(strategy)
        return self._model_cache.get(("overview", s), lambda: draw_overview(
            self.pieces[0].piece_summaries(s), self.piece_facts, name=self.title))

    def piece_summaries(self, strategy: StrategyLike | None = None) -> list[PieceSummary]:
        """One ``PieceSummary`` per piece: label, node and op counts, saved activation bytes under
        ``strategy`` (one run), how often its graph ran and for which modules."""
        import pandas as pd

        from .analysis.pieces import piece_summaries

        s = self._strategy(strategy)
        saved: list[int | None] = []
        for p in self.pieces:
            value = p.memory_table([s]).iloc[0]["saved_activation_bytes"] if p.has_backward else None
            saved.append(None if value is None or pd.isna(value) else int(value))
        return piece_summaries(self.capture, saved, s.name, self.piece_facts)

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
        """The strategy every view uses when none is named (``analysis.choices.default_strategy``):
        what the run saved (``logged``) for a graph read from a log with its forward and backward
        graphs, else torch's ``default``."""
        return choices.default_strategy(self.graph, self.capture)

    def _strategy(self, strategy: StrategyLike | None) -> Strategy:
        return self.default_strategy if strategy is None else Strategy.parse(strategy)

    @property
    def offered(self) -> tuple[Strategy, ...]:
        """The strategies views show for this trace when none are named, the default first
        (``analysis.choices.offered``)."""
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
        """One row per joint-graph node, indexed by node name (``NODE_COLUMNS``; cached)."""
        return self._cache.get(("nodes",), self._node_frame)

    def _node_frame(self) -> pd.DataFrame:
        import pandas as pd

        rows = [{k: getattr(info, k) for k in NODE_COLUMNS} for info in self.graph.info.values()]
        df = pd.DataFrame(rows, columns=NODE_COLUMNS, index=pd.Index(list(self.graph.info), name="name"))
        df["role"] = pd.Categorical(df["role"], categories=list(ROLES))
        for c in ("bytes", "seq_nr", "checkpoint_region"):
            df[c] = df[c].astype("Int64")
        return df

    def role_counts(self) -> dict[str, int]:
        """Joint-graph nodes per role (``roles.role_counts``): ``forward`` / ``backward`` are the
        joint graph's forward and backward ops, the numbers the summary and the overview print."""
        return role_counts(self.graph.info.values())

    def parameters(self) -> pd.DataFrame:
        """Per model parameter: how it appears in the graph and which node is its gradient
        (``analysis.parameters.parameter_table``)."""
        from .analysis.parameters import parameter_table

        return parameter_table(self.capture, self.index)

    def summary(self) -> str:
        """A few readable lines: what was captured, how, and what the backward returns."""
        from .analysis.parameters import gradient_counts
        from .render.summary import summary_text

        counts = gradient_counts(self.parameters(), self.piece_facts) if self.capture.named_parameters() else None
        return summary_text(self.capture, self.index, counts)

    def __repr__(self) -> str:
        return "<fxviz.Trace " + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"

    # --- analysis ---------------------------------------------------------------------------------
    def partition(self, strategy: StrategyLike | None = None) -> Partition:
        """Partition the joint graph with ``strategy`` (cached; default :attr:`default_strategy`):
        ``"default"``, ``"min_cut"``, ``"budget:0.3"`` / ``"budget:0.3:greedy"``, ``"eager"``,
        ``"recompute_all"``, ``"optimal:0.5"`` / ``"optimal:64MiB"`` (the exact MILP optimum), a
        callable with a torch partitioner's signature, or a :class:`~fxviz.analysis.strategies.Strategy`
        (every form: ``fxviz.analysis.strategies.forms_text()``)."""
        return self._cache.partition(self._strategy(strategy))

    def memory_table(self, strategies: StrategiesLike | None = None, gaps: bool | None = None) -> MemoryTable:
        """One row per strategy: saved activation / parameter / input bytes (storage-aware),
        recompute FLOPs and bytes, op counts, forward and backward peaks, torch's own estimate.

        ``strategies``: a list (or comma-separated string) of strategies as for :meth:`partition`;
        default :attr:`offered` (``default, min_cut, budget:0.5, recompute_all, eager``; read from a
        log: ``logged`` first, no ``eager``).  A strategy that fails on this graph gives a row with
        ``error`` set.  The frame keeps exact integers and displays styled (MiB/GiB, best value per
        column marked) in a notebook; ``df.attrs["caption"]`` says which partitioner arguments were
        passed and how bytes are counted.  ``gaps``: fill ``gap_to_optimal_flops`` /
        ``gap_to_optimal_bytes`` (how far each row is from the exact optimum, two MILP solves per
        row); default: when an ``optimal:B`` strategy is listed."""
        from .analysis.memory import memory_table
        from .render.table import MemoryTable

        chosen = tuple(parse_list(strategies) or self.offered)
        df = self._cache.get(("memory_table", chosen, gaps),
                             lambda: memory_table(self.graph, self._cache.partition, chosen, gaps=gaps))
        return _copied(df, MemoryTable)

    def memory_table_by_piece(self, strategies: StrategiesLike | None = None) -> pd.DataFrame:
        """:meth:`memory_table` for every piece (graph) of the model, one row per piece and strategy,
        then one ``total`` row per strategy: the whole training step (``analysis.step``).  ``runs`` is
        how often dynamo ran the piece's graph in the captured step; totals of count, byte and FLOP
        columns are sums of ``runs`` x the piece's value; peaks and resident bytes are not additive
        and stay empty there.  The eager reference is measured on the whole model: only a total row."""
        from .analysis.step import PieceTable, step_table

        return step_table([PieceTable(p.index, len(self.piece_facts.runs_of(p.index)), p.has_backward,
                                      p.memory_table(strategies)) for p in self.pieces])

    def saved(self, strategy: StrategyLike | None = None, compare: StrategiesLike | None = None, *,
              run: int | None = None) -> pd.DataFrame:
        """What the backward reads from the forward under ``strategy`` (default
        :attr:`default_strategy`), one row per value, biggest first (``analysis.saved.saved_table``).

        Index: the joint node name.  Columns: ``kind`` (activation / parameter / input / symint),
        ``module`` (full path), ``op`` and ``what`` (the op in plain words: ``GELU output``,
        ``LayerNorm rstd``, ``a view of `addmm_1```), ``shape`` (a tuple of ints), ``dtype``, ``bytes``
        (by storage: a storage several saved values share counts once, on its first value's row; the
        others name it in ``shares_storage_with``), ``source``; then one column per strategy of
        ``compare`` (default: the other offered strategies): saved / recomputed / not needed (failed
        where it fails on this graph).  The bytes of each kind add up to :meth:`memory_table`'s
        ``saved_activation_bytes``, ``saved_param_bytes`` and ``saved_input_bytes``.  A graph dynamo
        reused holds one such set per run: ``run=k`` (0-based) names the modules of its k-th run."""
        from .analysis.pieces import renamed
        from .analysis.saved import saved_table

        main = self._strategy(strategy)
        listed = parse_list(compare)
        others = tuple(s for s in (listed if listed is not None else self.offered) if s != main)
        df = self._cache.get(("saved", main, others), lambda: saved_table(
            self.graph, self.partition(main), [self.partition(s) for s in others]))
        out = _copied(df, type(df))
        if run is not None:
            rename = self._run_modules(run)
            out["module"] = [renamed(m, rename) for m in out["module"]]
            out.attrs["run"] = run
        return out

    def _run_modules(self, run: int) -> dict[str, str]:
        """Module paths of this graph's first run -> those of its ``run``-th (``pieces.run_modules``)."""
        from .analysis.pieces import run_modules
        from .errors import InputError

        runs = len(self.piece_facts.runs_of(self.index))
        if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run < max(runs, 1):
            raise InputError(f"run={run!r} is not a run of this graph, which ran {runs} time(s) in the captured step",
                             f"pass a run from 0 to {max(runs, 1) - 1}" if runs > 1 else "leave run out")
        return run_modules(self.piece_facts, self.index, run) if runs else {}

    def memory_by_module(self, strategy: StrategyLike | None = None, depth: int | None = None, *,
                         run: int | None = None) -> pd.DataFrame:
        """Saved activation bytes and values per module, biggest first: the activation rows of
        :meth:`saved` summed per module at ``depth``, a level of the model's structure as the
        drawing counts it (containers such as ``ModuleList`` are no level; ``draw(depth=k)`` with
        ``expand`` reads the same).  Default: the level the default drawing collapses to.  A value
        made outside every module's forward is counted under ``(no module)``.  The bytes add up to
        the memory table's ``saved_activation_bytes``; ``df.attrs["level"]`` is the level used.
        ``run=k``: a reused graph's k-th run, its modules named as in :meth:`saved`."""
        from .errors import InputError
        from .render.module_level import saved_by_module

        if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
            raise InputError(f"depth must be a positive integer, not {depth!r}",
                             "depth=1 sums per top-level module; leave it out for the drawing's level")
        s = self._strategy(strategy)
        out = saved_by_module(self.saved(s, compare=[]), self.graph, self.partition(s), self._structure, depth,
                              self._run_modules(run) if run is not None else {})
        if run is not None:
            out.attrs["run"] = run
        return out

    @property
    def _structure(self) -> Structure:
        """The model's structure as the drawing collapses it (cached)."""
        from .render.scene import joint_scene
        from .render.structure import Structure

        return self._cache.get(("structure",), lambda: Structure(joint_scene(self.graph), self.graph))

    def memory_sweep(self, budgets: Iterable[float] | None = None, solver: str | Sequence[str] = "dp",
                     progress: bool | None = None, optimal: bool = False) -> MemorySweep:
        """The memory / recompute trade-off: min-cut under ``activation_memory_budget`` for each
        of ``budgets`` (default 0, 0.1, ..., 1) with ``solver`` (``dp``, ``greedy``, ``ilp``, or a
        list of them).  Budgets giving identical partitions share one row.  ``optimal=True`` adds
        the exact optimum at each budget (``optimal:B``, an MILP) and torch's ``default`` and
        ``min_cut`` points.  ``progress``: a tqdm bar (default: on for more than five budgets).
        ``.pareto_plot()`` on the result draws the trade-off."""
        from .analysis.sweep import DEFAULT_BUDGETS, memory_sweep
        from .render.plots import MemorySweep

        chosen = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
        wrap: Callable[[Iterable[float]], Iterable[float]] | None = None
        if progress or (progress is None and len(chosen) > 5):
            from tqdm.auto import tqdm

            def wrap(items: Iterable[float]) -> Iterable[float]:
                return tqdm(items, desc=f"budget sweep ({solver})", unit="budget", leave=False)

        df = memory_sweep(self.graph, self._cache.partition, chosen, solver=solver, progress=wrap, optimal=optimal)
        return _copied(df, MemorySweep)

    def memory_timeline(self, strategy: StrategyLike | Sequence[StrategyLike] | None = None) -> MemoryTimeline:
        """Bytes held while each node of the forward and the backward graph runs, for one strategy
        or a list (default: the offered strategies that have graphs).  Counted as the memory table
        counts its peaks: the highest point of each curve is ``forward_peak_bytes`` /
        ``backward_peak_bytes``.  ``.peaks`` names the node and module of each peak; ``.plot()``
        draws one curve per strategy (cached)."""
        from .analysis.timeline import memory_timeline
        from .render.plots import MemoryTimeline

        listed = parse_list(strategy) if strategy is None or isinstance(strategy, (str, Sequence)) \
            else [Strategy.parse(strategy)]
        chosen = tuple(listed or choices.drawable(self.offered))
        df = self._cache.get(("memory_timeline", chosen),
                             lambda: memory_timeline(self.graph, [self.partition(s) for s in chosen]))
        return _copied(df, MemoryTimeline)

    # --- drawing ---------------------------------------------------------------------------------
    def draw(self, view: str = "joint", strategy: StrategyLike | None = None, compare: StrategyLike | None = None,
             group: str | None = None, depth: int | None = None, highlight: str | Sequence[str] | None = None, *,
             piece: int | None = None, expand: str | Sequence[str] | None = None, node_limit: int | None = None,
             timeout: float | None = None, differences: bool = False) -> Drawing:
        """Draw the graph: nodes colored by role, with a legend; returns a ``Drawing`` that shows
        itself in Jupyter and has ``.save('g.svg' | 'g.png' | 'g.dot')`` and ``.source``.

        Args:
            view: ``"joint"`` (forward and backward side by side), ``"forward"`` or ``"backward"``
                (one side of ``strategy``'s partition, default :attr:`default_strategy`),
                ``"compare"`` (the joint view marked for ``strategy`` vs ``compare``), or
                ``"flow"`` (the flow network min-cut solves, with capacities and the cut:
                :meth:`flow_network`).
            strategy: mark what this strategy saves, recomputes and removes (a log's trace:
                what the run saved, ``logged``, unless another is named).
            compare: a second strategy: mark what each saves/recomputes that the other does not.
            group: ``"module"`` clusters nodes by module path; ``"none"`` never collapses;
                default: every node up to ``node_limit`` nodes, module boxes above.
            depth: with module grouping, modules at this depth become one box each.
            highlight: a node name, op, parameter or module (or a list): emphasise matches.
            piece: after graph breaks, which graph to draw (0-based index into ``pieces``);
                default: this one.  :meth:`overview` draws all of them as boxes.
            expand: a box (or a list) to open, to show what is inside: a module path
                (``"model.layers.0"``), a function box's name as its box shows it
                (``"masking_utils.sdpa_mask()"``) or ``"(in-place buffer updates)"``.
            timeout: seconds ``dot`` may take to lay the drawing out (it also picks the level an
                automatic collapse settles on: a level whose layout times out is taken as it is).
            differences: with ``compare``, draw only the nodes the two strategies treat
                differently (saved, recomputed or removed by one only), with their direct
                producers and users faded as context, never grouped.
        """
        from .render.drawing import DEFAULT_TIMEOUT
        from .render.views import NODE_LIMIT, draw

        if piece is not None:
            return self.piece(piece).draw(view, strategy, compare, group, depth, highlight, expand=expand,
                                          node_limit=node_limit, timeout=timeout, differences=differences)
        named = None if strategy is None else Strategy.parse(strategy)
        if view == "flow":
            return self._draw_flow(choices.flow_strategy(named), timeout)
        second = None if compare is None else Strategy.parse(compare)
        first = choices.drawn_strategy(self.graph, self.capture, view, named, second)
        marks = tuple([highlight] if isinstance(highlight, str) else highlight or ())
        opened = tuple([expand] if isinstance(expand, str) else expand or ())
        # timeout is in the key: the layout runs under it, and an automatic collapse keeps a level
        # whose layout timed out, so a longer timeout can draw another picture
        key = ("draw", view, first, second, group, depth, marks, opened, node_limit, timeout, bool(differences))
        name = self.title
        if len(self.capture.graphs) > 1:
            name += f" ({graph_of(self.index, len(self.capture.graphs))})"
        return self._cache.get(key, lambda: draw(
            self.graph, view=view, partition=self.partition(first) if first is not None else None,
            compare=self.partition(second) if second is not None else None, group=group, depth=depth,
            highlight=list(marks), name=name, expand=list(opened),
            node_limit=NODE_LIMIT if node_limit is None else node_limit,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout, differences=bool(differences)))

    def flow_network(self, strategy: StrategyLike | None = None) -> FlowNetwork:
        """The max-flow / min-cut network torch's min-cut partitioner builds for this joint graph
        (recorded from torch's own call, not re-derived), with its cut: ``.edges`` (capacity and
        torch's reason for each infinite edge), ``.cut``, ``.cut_value``, ``.saved`` (cached).
        ``strategy``: min-cut (default) or a memory budget."""
        from .analysis.flow import min_cut_network

        s = choices.flow_strategy(None if strategy is None else Strategy.parse(strategy))
        return self._cache.get(("flow", s), lambda: min_cut_network(self.graph, s))

    def _draw_flow(self, strategy: Strategy, timeout: float | None) -> Drawing:
        from .render.drawing import DEFAULT_TIMEOUT
        from .render.flow import draw_flow

        # timeout is in the key: the drawing lays itself out under it when first shown
        return self._cache.get(("draw_flow", strategy, timeout), lambda: draw_flow(
            self.flow_network(strategy), self.graph, self.title, DEFAULT_TIMEOUT if timeout is None else timeout))

    def check_gradients(self, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
        """Per parameter: ``parameter, has_gradient, max_abs_diff, ok`` against eager autograd."""
        from .analysis.gradients import check_gradients
        from .errors import FxvizError

        if self.from_log:
            raise FxvizError("check_gradients runs the model against eager autograd, and a log of a run has no model",
                             "trace the model itself: fxviz.trace(model, *inputs).check_gradients()")
        return check_gradients(self.capture, rtol=rtol, atol=atol)

    def doctor(self, strategy: StrategyLike | None = None) -> DoctorReport:
        """Why parameters get no gradient, across every graph of the trace (all ``pieces``): each
        finding names the parameter, the joint-graph node where the path is cut, why, and the fix.
        ``strategy``: the partition whose backward graphs are checked for dropped gradients.
        Returns a report with ``.findings``, ``.table`` (one row per parameter) and ``.healthy``;
        it prints as text and displays as a card in Jupyter (cached)."""
        from .analysis.doctor import diagnose
        from .render.doctor_view import DoctorReport

        s = self._strategy(strategy)
        return self._model_cache.get(("doctor", s), lambda: DoctorReport(diagnose(
            self.capture, [p.partition(s) if p.has_backward else None for p in self.pieces])))

    def code(self, part: str = "backward", strategy: StrategyLike | None = None) -> GraphCode:
        """The ``forward`` or ``backward`` graph of a partition (or the ``joint`` graph) as Python
        whose inputs and outputs carry real names (``features_0_weight``,
        ``grad_features_0_weight``, ``tangent_loss``); saved values keep their joint-graph names.
        ``str()`` of the result is the code; ``.compile()`` makes it callable (it runs)."""
        from .analysis.code import graph_code

        s = None if part == "joint" else self._strategy(strategy)
        where = f", {graph_of(self.index, len(self.capture.graphs))}" if len(self.capture.graphs) > 1 else ""
        title = f"{self.title}, parameters {self.params}{where}"
        return self._cache.get(("code", part, s), lambda: graph_code(
            self.graph, part, None if s is None else self.partition(s), title=title))
