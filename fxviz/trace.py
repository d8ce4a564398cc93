"""``Trace``: the object users hold.  A thin facade over the captured data and the analysis and
presentation layers; every fact it shows is computed once and cached here, keyed by its inputs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, Any

import torch.fx as fx

from .analysis.pieces import piece_facts
from .analysis.strategies import Strategy, StrategyLike, offered, parse_list
from .capture import INFERENCE_NOTE, Capture, JointGraph, capture, graph_name, graph_of
from .graph_facts import joint_node_count
from .roles import PARAMETER_ROLES, ROLES, STATE_ROLES, role_counts

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
    from .render.table import MemoryTable

__all__ = ["Trace", "trace"]

NODE_COLUMNS = ["op", "target", "short_op", "role", "phase", "qualname", "module", "shape", "dtype",
                "bytes", "source", "source_code", "seq_nr", "symbolic_shape", "checkpoint_policy", "checkpoint_region"]


def trace(model_or_fn: Callable, *example_inputs: Any, loss_fn: Callable | None = None,
          params: str = "lifted", capture_route: str = "auto", backend: str = "aot_eager",
          dynamic: bool = False, inputs: dict[str, Any] | None = None, compile_loss: bool = False,
          **keyword_inputs: Any) -> Trace:
    """Trace ``model_or_fn(*example_inputs, **keyword_inputs)`` into its joint forward+backward graph.

    Args:
        model_or_fn: an ``nn.Module`` or a function of tensors.
        *example_inputs: the inputs to call it with (tensors; token ids are fine).
        **keyword_inputs: keyword inputs, as the model is called:
            ``fxviz.trace(model, input_ids=ids, labels=ids)``.  A keyword that is also an fxviz
            option (``loss_fn``, ``params``, ``capture_route``, ``backend``, ``dynamic``, ``inputs``,
            ``compile_loss``) goes in ``inputs``.
        inputs: keyword inputs as a dict, the one way that always works:
            ``fxviz.trace(model, ids, inputs={"params": p})``.
        loss_fn: maps the outputs to a scalar, applied where a ``torch.compile(model)`` step applies
            it: outside the compiled model (``loss_fn(out).backward()``), so the graph returns every
            output the model returns and its backward gets their gradients as tangents.  Default: the
            model's own loss when it returns one (``out.loss`` of a ``ModelOutput``, dict or
            namedtuple), applied outside the graph too; else the output itself if it is a scalar,
            else the sum of every floating output (traced into the graph).
        compile_loss: trace ``loss_fn`` into the graph, as ``torch.compile`` of a step that computes
            the loss does.
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
    from .errors import InputError

    both = sorted(set(keyword_inputs) & set(inputs or {}))
    if both:
        raise InputError(f"keyword input(s) {both} given both as keywords and in inputs=", "pass each input once")
    return Trace(capture(model_or_fn, tuple(example_inputs), loss_fn=loss_fn, params=params,
                         route=capture_route, backend=backend, dynamic=dynamic,
                         keyword_inputs={**(inputs or {}), **keyword_inputs}, compile_loss=compile_loss))


class Trace:
    """One captured joint graph, with its nodes named and classified, and every view of it."""

    def __init__(self, captured: Capture, index: int = 0, pieces: list[Trace] | None = None,
                 model_cache: dict[Any, Any] | None = None) -> None:
        self.capture = captured
        self.graph: JointGraph = captured.graphs[index]
        self.index = index
        self._pieces = pieces
        self._cache: dict[Any, Any] = {}  # facts of this graph
        # facts of the whole model (overview, doctor), one dict shared by every piece
        self._model_cache: dict[Any, Any] = {} if model_cache is None else model_cache

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

    def overview(self, strategy: Any = None) -> Drawing:
        """The whole model as boxes, one per piece (graph), in execution order: edges follow
        execution, a graph dynamo ran for several modules has a double border and numbered runs,
        code that ran outside every graph is a dashed box.  Returns a ``Drawing``."""
        from .render.overview import draw_overview

        root = self.pieces[0]
        strategy = self._strategy(strategy)
        key = ("overview", strategy)
        if key not in self._model_cache:
            self._model_cache[key] = draw_overview(root.piece_summaries(strategy), piece_facts(self.capture),
                                                   name=self.title)
        return self._model_cache[key]

    def piece_summaries(self, strategy: Any = None) -> list[PieceSummary]:
        """One ``PieceSummary`` per piece: label, node and op counts, saved activation bytes under
        ``strategy`` (one run), how often its graph ran and for which modules."""
        import pandas as pd

        from .analysis.pieces import piece_summaries

        s = self._strategy(strategy)
        saved: list[int | None] = []
        for p in self.pieces:
            value = None
            if p.has_backward:
                row = p.memory_table([s]).iloc[0]
                value = None if pd.isna(row["saved_activation_bytes"]) else int(row["saved_activation_bytes"])
            saved.append(value)
        return piece_summaries(self.capture, saved, s.name)

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
        """The strategy every view uses when none is named: what the run saved (``logged``) for a
        graph read from a log with its forward and backward graphs, else torch's ``default``."""
        return Strategy("logged") if self.graph.logged is not None else Strategy("default")

    def _strategy(self, strategy: StrategyLike | None) -> Strategy:
        return self.default_strategy if strategy is None else Strategy.parse(strategy)

    @property
    def offered(self) -> tuple[Strategy, ...]:
        """The strategies views show by default for this trace (``strategies.offered``)."""
        return offered(has_model=self.capture.fn is not None, from_log=self.from_log)

    @property
    def params(self) -> str:
        return self.capture.params

    @property
    def loss(self) -> str:
        return self.capture.loss

    @property
    def has_backward(self) -> bool:
        return self.graph.has_backward

    @cached_property
    def nodes(self) -> pd.DataFrame:
        """One row per joint-graph node, indexed by node name."""
        import pandas as pd
        rows = [{k: getattr(info, k) for k in NODE_COLUMNS} for info in self.graph.info.values()]
        df = pd.DataFrame(rows, columns=NODE_COLUMNS, index=pd.Index(list(self.graph.info), name="name"))
        df["role"] = pd.Categorical(df["role"], categories=list(ROLES))
        df["bytes"] = df["bytes"].astype("Int64")
        df["seq_nr"] = df["seq_nr"].astype("Int64")
        df["checkpoint_region"] = df["checkpoint_region"].astype("Int64")
        return df

    def role_counts(self) -> dict[str, int]:
        """Joint-graph nodes per role (``roles.role_counts``): ``forward`` / ``backward`` are the
        joint graph's forward and backward ops, the numbers the summary and the overview print."""
        return role_counts(self.graph.info.values())

    def parameters(self) -> pd.DataFrame:
        """Per model parameter: how it appears in the graph and which node is its gradient."""
        import pandas as pd
        named = self.capture.named_parameters()  # a log's parameters when there is no model
        rows = []
        if not named:
            return pd.DataFrame(columns=["parameter", "shape", "dtype", "requires_grad", "graph_role",
                                         "graph_nodes", "gradient_node"])
        by_name: dict[str, list[str]] = {}
        grads: dict[str, str] = {}
        for info in self.graph.info.values():
            if info.qualname is None:
                continue
            if info.role in STATE_ROLES:
                by_name.setdefault(info.qualname, []).append(info.name)
            elif info.role == "gradient":
                grads.setdefault(info.qualname, info.name)
        for t in self.pieces[1:]:
            for info in t.graph.info.values():
                if info.qualname and info.role in PARAMETER_ROLES:
                    by_name.setdefault(info.qualname, []).append(f"{info.name} ({graph_name(t.index)})")
                elif info.qualname and info.role == "gradient":
                    grads.setdefault(info.qualname, f"{info.name} ({graph_name(t.index)})")
        for name, p in named:
            nodes = by_name.get(name, [])
            role = "—"
            for found in (self.graph.info.get(n) for n in nodes):
                if found is not None:
                    role = found.role
                    break
            else:
                if nodes:
                    role = "parameter"
            rows.append({"parameter": name, "shape": tuple(p.shape), "dtype": str(p.dtype).replace("torch.", ""),
                         "requires_grad": p.requires_grad, "graph_role": role,
                         "graph_nodes": ", ".join(nodes) or "—", "gradient_node": grads.get(name, "none")})
        return pd.DataFrame(rows)

    def summary(self) -> str:
        """A few readable lines: what was captured, how, and what the backward returns."""
        info = self.graph.info.values()
        counts = self.role_counts()
        title = self.title
        route = {"dynamo": "torch.compile (dynamo) + AOTAutograd", "aot": "aot_function over fake tensors",
                 "closure": "aot_function on a closure (parameters captured as constants)",
                 "log": f"torch.compile in a real run, read from its log ({self.capture.origin})"}[self.capture.route]
        if self.capture.route != "log":
            route += f", {self.capture.backend_label}"
        lines = [
            f"{title}: joint graph of {joint_node_count(info)} nodes ({counts['forward']} forward ops, "
            f"{counts['backward']} backward ops), parameters {self.params}, captured with {route}",
            "  " + ", ".join(f"{counts[r]} {r}" for r in ROLES if counts[r]),
            f"  {self.loss}",
        ]
        if self.graph.inference:
            lines.append(f"  {INFERENCE_NOTE} (compiled with gradients off)")
        elif not self.has_backward:
            lines.append("  no backward graph: nothing the loss depends on requires grad")
        if self.capture.named_parameters():
            params = self.parameters()
            n_grad = int((params["gradient_node"] != "none").sum()) if len(params) else 0
            n_req = int(params["requires_grad"].sum()) if len(params) else 0
            facts = piece_facts(self.capture)
            if len(self.capture.graphs) > 1 and facts.recorded:
                # a graph dynamo reused returns a later run's gradients through its own nodes
                graded = set(params[params["gradient_node"] != "none"]["parameter"]) if len(params) else set()
                reused = {p for p, first in facts.counterpart.items() if first in graded and p not in graded}
                outside = [p for p in facts.outside if p not in graded]
                lines.append(f"  parameters: {len(params)} ({n_req} require grad); {len(graded | reused)} get a "
                             f"gradient from the captured graphs ({len(reused)} through a graph reused for "
                             f"another module), {len(outside)} are used only outside every graph (eager "
                             "code; tr.doctor() says which)")
            else:
                lines.append(f"  parameters: {len(params)} ({n_req} require grad); "
                             f"{n_grad} get a gradient from the backward graph")
        if len(self.capture.graphs) > 1 or self.graph_breaks:
            where = (graph_of(self.index, len(self.capture.graphs)) if len(self.capture.graphs) > 1
                     else "one graph captured; the code at the break ran outside it")
            lines.append(f"  {where}; {len(self.graph_breaks)} graph break(s): " + "; ".join(self.graph_breaks[:3]))
        lines += [f"  warning: {w}" for w in getattr(self.capture, "warnings", [])]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "<fxviz.Trace " + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"

    # --- analysis ---------------------------------------------------------------------------------
    def partition(self, strategy: StrategyLike | None = None) -> Partition:
        """Partition the joint graph with ``strategy`` (cached; default :attr:`default_strategy`):
        ``"default"``, ``"min_cut"``,
        ``"budget:0.3"`` / ``"budget:0.3:greedy"``, ``"eager"``, ``"recompute_all"``,
        ``"optimal:0.5"`` / ``"optimal:64MiB"`` (the exact MILP optimum), a callable
        with a torch partitioner's signature, or a :class:`~fxviz.analysis.strategies.Strategy`
        (every form: ``fxviz.analysis.strategies.forms_text()``)."""
        from .analysis.partition import partition

        s = self._strategy(strategy)
        key = ("partition", s)
        if key not in self._cache:
            self._cache[key] = partition(self.graph, s, self.capture)
        result: Partition = self._cache[key]
        return result

    def memory_table(self, strategies: Any = None, gaps: bool | None = None) -> MemoryTable:
        """One row per strategy: saved activation / parameter / input bytes (storage-aware),
        recompute FLOPs and bytes, op counts, forward and backward peaks, torch's own estimate.

        ``strategies``: a list (or comma-separated string) of strategies as for :meth:`partition`;
        default ``Trace.offered`` (``default, min_cut, budget:0.5, recompute_all, eager``; read from a
        log: ``logged`` first, no ``eager``).  A strategy that fails on this graph gives a row with
        ``error`` set.  The frame keeps exact integers and displays
        styled (MiB/GiB, best value per column marked) in a notebook; ``df.attrs["caption"]`` says
        which partitioner arguments were passed and how bytes are counted.

        ``gaps``: fill ``gap_to_optimal_flops`` / ``gap_to_optimal_bytes`` (how far each row is from
        the exact optimum, two MILP solves per row); default: when an ``optimal:B`` strategy is
        listed."""
        from .analysis.memory import memory_table
        from .render.table import MemoryTable

        chosen = parse_list(strategies) or list(self.offered)
        key = ("memory_table", tuple(chosen), gaps)
        if key not in self._cache:
            self._cache[key] = memory_table(self.graph, self.partition, chosen, gaps=gaps)
        df = self._cache[key]
        table = MemoryTable(df.copy())
        table.attrs = dict(df.attrs)
        return table

    def memory_table_by_piece(self, strategies: Any = None) -> pd.DataFrame:
        """:meth:`memory_table` for every piece (graph) of the model, one row per piece and strategy,
        then one ``total`` row per strategy: the whole training step.

        ``runs`` is how often dynamo ran the piece's graph in the captured step (a graph reused for
        several layers runs once per layer, each run holding its own saved values), so the totals
        of count, byte and FLOP columns are sums of ``runs`` x the piece's value; peaks and resident
        bytes are not additive and stay empty there.  The eager reference is measured on the whole
        model at once: it has only a total row."""
        import pandas as pd

        from .analysis.memory import COLUMNS

        facts = piece_facts(self.capture)
        additive = [c for c in COLUMNS if c not in ("strategy", "error", "forward_peak_bytes",
                                                    "backward_peak_bytes", "resident_bytes")]
        frames = []
        for piece in self.pieces:
            df = pd.DataFrame(piece.memory_table(strategies))
            df.insert(0, "runs", max(1, len(facts.runs_of(piece.index))))
            df.insert(0, "piece", piece.index)
            frames.append(df)
        rows = pd.concat(frames, ignore_index=True)
        eager = rows["strategy"] == Strategy.parse("eager").name
        per_piece = rows[~eager]
        with_backward = {p.index for p in self.pieces if p.has_backward}
        totals = []
        for name, group in per_piece[per_piece["piece"].isin(with_backward)].groupby("strategy", sort=False):
            total: dict[str, Any] = {"piece": "total", "runs": int(group["runs"].sum()), "strategy": name}
            failed = group["error"].notna()
            reasons = zip(group["piece"][failed], group["error"][failed])
            total["error"] = "; ".join(f"{graph_name(p)}: {e}" for p, e in reasons) or None
            for c in additive:
                values = group[c] * group["runs"] if c != "seconds" else group[c]
                total[c] = values.sum() if not failed.any() and group[c].notna().all() else pd.NA
            totals.append(total)
        whole_eager = rows[eager].head(1).assign(piece="total", runs=pd.NA)
        out = pd.concat([per_piece, pd.DataFrame(totals), whole_eager], ignore_index=True)
        out = out[["piece", "runs"] + COLUMNS]
        out.attrs["caption"] = (
            "One row per piece (graph) and strategy, then the whole step per strategy: count, byte and FLOP "
            "columns summed over pieces, each piece's value times the runs of its graph; peaks are per piece "
            "only; a piece without a backward graph saves nothing and is left out. Code that ran outside every "
            "graph is in no piece row (tr.doctor() names it); the eager row "
            "is measured on the whole model.")
        return out

    def saved(self, strategy: StrategyLike | None = None, compare: Any = None, *, run: int | None = None
              ) -> pd.DataFrame:
        """What the backward reads from the forward under ``strategy`` (default: the first of
        ``Trace.offered``: ``default``, or ``logged`` for a log), one row per value, biggest first.

        Index: the joint node name.  Columns: ``kind`` (activation / parameter / input / symint),
        ``module`` (full path), ``op`` and ``what`` (the op in plain words: ``GELU output``,
        ``LayerNorm rstd``, ``a view of `addmm_1```), ``shape``, ``dtype``, ``bytes`` (by storage:
        a storage several saved values share counts once, on its first value's row; the others
        name it in ``shares_storage_with``), ``source``; then one column per strategy of ``compare``
        (default: the other offered strategies) saying what it does with the value: saved /
        recomputed / not needed (failed where it fails on this graph).  The bytes of each kind add
        up to :meth:`memory_table`'s ``saved_activation_bytes``, ``saved_param_bytes`` and
        ``saved_input_bytes``.  A graph dynamo reused holds one such set per run: ``run=k``
        (0-based) names the modules of its k-th run (``layers.1`` where the first was ``layers.0``)."""
        from .analysis.saved import saved_table

        main = Strategy.parse(strategy) if strategy is not None else self.offered[0]
        listed = parse_list(compare) if compare is not None else None
        others = [s for s in (listed if listed is not None else self.offered) if s != main]
        key = ("saved", main, tuple(others))
        if key not in self._cache:
            self._cache[key] = saved_table(self.graph, self.partition(main), [self.partition(s) for s in others])
        df: pd.DataFrame = self._cache[key]
        out = df.copy()
        out.attrs = dict(df.attrs)
        if run is not None:
            rename = self._run_modules(run)
            out["module"] = [_renamed(m, rename) for m in out["module"]]
            out.attrs["run"] = run
        return out

    def _run_modules(self, run: int) -> dict[str, str]:
        """Module paths of this graph's first run -> those of its ``run``-th (``pieces.run_modules``)."""
        from .analysis.pieces import run_modules
        from .errors import InputError

        facts = piece_facts(self.capture)
        runs = len(facts.runs_of(self.index))
        if isinstance(run, bool) or not isinstance(run, int) or not 0 <= run < max(runs, 1):
            raise InputError(f"run={run!r} is not a run of this graph, which ran {runs} time(s) in the captured step",
                             f"pass a run from 0 to {max(runs, 1) - 1}" if runs > 1 else "leave run out")
        return run_modules(facts, self.index, run) if runs else {}

    def memory_by_module(self, strategy: StrategyLike | None = None, depth: int | None = None, *,
                         run: int | None = None) -> pd.DataFrame:
        """Saved activation bytes and values per module, biggest first: the activation rows of
        :meth:`saved` summed per module at ``depth``, a level of the model's structure as the
        drawing counts it (containers such as ``ModuleList`` are no level; ``draw(depth=k)`` with
        ``expand`` reads the same).  Default: the level the default drawing collapses to (the
        deepest modules when it shows every node).  A value made outside every module's forward is
        counted under ``(no module)``.  The bytes add up to the memory table's
        ``saved_activation_bytes``; ``df.attrs["level"]`` is the level used.  ``run=k``: a reused
        graph's k-th run, its modules named as in :meth:`saved`."""
        from .analysis.saved import by_module
        from .errors import InputError
        from .render import scene as sc
        from .render.views import collapse_level

        if depth is not None and (not isinstance(depth, int) or isinstance(depth, bool) or depth < 1):
            raise InputError(f"depth must be a positive integer, not {depth!r}",
                             "depth=1 sums per top-level module; leave it out for the drawing's level")
        table = self.saved(strategy, compare=[])
        rename = self._run_modules(run) if run is not None else {}
        key = ("structure",)
        if key not in self._cache:
            self._cache[key] = sc.Structure(sc.joint_scene(self.graph), self.graph)
        structure: sc.Structure = self._cache[key]
        level = depth if depth is not None else collapse_level(self.graph, structure)

        made = self.partition(Strategy.parse(strategy) if strategy is not None else self.offered[0]).made

        def module_of(name: str) -> str | None:
            wraps = made[name].wraps if name in made else None
            if wraps is not None:  # an RNG state: the module of the op it replays
                name = wraps
            if name not in structure.path:
                return None
            return _renamed(structure.box_of(name, level) or ".".join(structure.path[name]) or None, rename)

        out = by_module(table, module_of)
        out.attrs["level"] = level
        if run is not None:
            out.attrs["run"] = run
        out.attrs["strategy"] = table.attrs["strategy"]
        out.attrs["caption"] = (f"Saved activation bytes per module at level {level} of the model's structure, "
                                f"strategy {table.attrs['strategy']}; they add up to the memory table's "
                                "saved_activation_bytes.")
        return out

    def memory_sweep(self, budgets: Any = None, solver: Any = "dp", progress: bool | None = None,
                     optimal: bool = False) -> MemorySweep:
        """The memory / recompute trade-off: min-cut under ``activation_memory_budget`` for each
        of ``budgets`` (default 0, 0.1, ..., 1) with ``solver`` (``dp``, ``greedy``, ``ilp``, or a
        list of them).  Budgets giving identical partitions share one row.  ``optimal=True`` adds
        the exact optimum at each budget (``optimal:B``, an MILP) and torch's ``default`` and
        ``min_cut`` points: the frontier and how far each torch strategy is from it.
        ``progress``: a tqdm bar (default: on for more than five budgets).  ``.pareto_plot()`` on
        the result draws the trade-off."""
        from .analysis.sweep import DEFAULT_BUDGETS, memory_sweep
        from .render.plots import MemorySweep

        chosen = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
        wrap = None
        if progress or (progress is None and len(chosen) > 5):
            from tqdm.auto import tqdm

            def wrap(items: Any) -> Any:
                return tqdm(items, desc=f"budget sweep ({solver})", unit="budget", leave=False)

        df = memory_sweep(self.graph, self.partition, chosen, solver=solver, progress=wrap, optimal=optimal)
        sweep = MemorySweep(df)
        sweep.attrs = dict(df.attrs)
        return sweep

    def memory_timeline(self, strategy: Any = None) -> MemoryTimeline:
        """Bytes held while each node of the forward and the backward graph runs, for one strategy
        or a list (default: the offered strategies that have graphs).  Counted as the memory table
        counts its peaks: the highest point of each curve is ``forward_peak_bytes`` /
        ``backward_peak_bytes``.  ``.peaks`` names the node and module of each peak; ``.plot()``
        draws one curve per strategy (cached)."""
        from .analysis.timeline import memory_timeline
        from .render.plots import MemoryTimeline

        chosen = parse_list(strategy if isinstance(strategy, (str, list, tuple)) else [strategy]) \
            if strategy is not None else None
        chosen = chosen or [s for s in self.offered if s.kind != "eager"]
        key = ("memory_timeline", tuple(chosen))
        if key not in self._cache:
            self._cache[key] = memory_timeline(self.graph, [self.partition(s) for s in chosen])
        df = self._cache[key]
        timeline = MemoryTimeline(df.copy())
        timeline.attrs = dict(df.attrs)
        return timeline

    # --- drawing ---------------------------------------------------------------------------------
    def draw(self, view: str = "joint", strategy: Any = None, compare: Any = None, group: str | None = None,
             depth: int | None = None, highlight: Any = None, *, piece: int | None = None,
             expand: Any = None, node_limit: int | None = None, timeout: float | None = None,
             differences: bool = False) -> Drawing:
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
            differences: with ``compare``, draw only the nodes the two strategies treat
                differently (saved, recomputed or removed by one only), with their direct
                producers and users faded as context, never grouped: "what min-cut recomputes
                that default saves" on one slide.
        """
        from .render.drawing import DEFAULT_TIMEOUT
        from .render.views import NODE_LIMIT, draw

        if piece is not None:
            return self.piece(piece).draw(view, strategy, compare, group, depth, highlight, expand=expand,
                                          node_limit=node_limit, timeout=timeout, differences=differences)
        if view == "flow":
            return self._draw_flow(strategy if strategy is not None else "min_cut", timeout)

        if strategy is None and (compare is not None or view in ("forward", "backward")
                                 or self.graph.logged is not None):
            strategy = self.default_strategy
        first = None if strategy is None else Strategy.parse(strategy)
        second = None if compare is None else Strategy.parse(compare)
        marks = tuple([highlight] if isinstance(highlight, str) else highlight or ())
        opened = tuple([expand] if isinstance(expand, str) else expand or ())
        key = ("draw", view, first, second, group, depth, marks, opened, node_limit, timeout, bool(differences))
        cached: Drawing | None = self._cache.get(key)
        if cached is not None:
            return cached
        name = self.title
        if len(self.capture.graphs) > 1:
            name += f" ({graph_of(self.index, len(self.capture.graphs))})"
        drawing = draw(self.graph, view=view, partition=self.partition(first) if first is not None else None,
                       compare=self.partition(second) if second is not None else None, group=group, depth=depth,
                       highlight=list(marks), name=name, expand=list(opened),
                       node_limit=NODE_LIMIT if node_limit is None else node_limit,
                       timeout=DEFAULT_TIMEOUT if timeout is None else timeout, differences=bool(differences))
        self._cache[key] = drawing
        return drawing

    def flow_network(self, strategy: Any = "min_cut") -> FlowNetwork:
        """The max-flow / min-cut network torch's min-cut partitioner builds for this joint graph
        (recorded from torch's own call, not re-derived), with its cut: ``.edges`` (capacity and
        torch's reason for each infinite edge), ``.cut``, ``.cut_value``, ``.saved`` (cached)."""
        from .analysis.flow import min_cut_network

        key = ("flow", Strategy.parse(strategy))
        if key not in self._cache:
            self._cache[key] = min_cut_network(self.graph, strategy)
        result: FlowNetwork = self._cache[key]
        return result

    def _draw_flow(self, strategy: Any, timeout: float | None) -> Drawing:
        from .render.drawing import DEFAULT_TIMEOUT
        from .render.flow import draw_flow

        key = ("draw_flow", Strategy.parse(strategy), timeout)
        if key not in self._cache:
            self._cache[key] = draw_flow(self.flow_network(strategy), self.graph, self.title,
                                         DEFAULT_TIMEOUT if timeout is None else timeout)
        result: Drawing = self._cache[key]
        return result

    def check_gradients(self, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
        """Per parameter: ``parameter, has_gradient, max_abs_diff, ok`` against eager autograd."""
        from .analysis.gradients import check_gradients
        from .errors import FxvizError

        if self.from_log:
            raise FxvizError("check_gradients runs the model against eager autograd, and a log of a run has no model",
                             "trace the model itself: fxviz.trace(model, *inputs).check_gradients()")
        return check_gradients(self.capture, rtol=rtol, atol=atol)

    def doctor(self, strategy: Any = None) -> DoctorReport:
        """Why parameters get no gradient, across every graph of the trace (all ``pieces``): each
        finding names the parameter, the joint-graph node where the path is cut, why, and the fix.
        ``strategy``: the partition whose backward graphs are checked for dropped gradients.
        Returns a report with ``.findings``, ``.table`` (one row per parameter) and ``.healthy``;
        it prints as text and displays as a card in Jupyter (cached)."""
        from .analysis.doctor import diagnose
        from .render.doctor_view import DoctorReport

        root = self.pieces[0]
        strategy = self._strategy(strategy)
        key = ("doctor", strategy)
        if key not in self._model_cache:
            parts = [p.partition(strategy) if p.has_backward else None for p in root.pieces]
            self._model_cache[key] = DoctorReport(diagnose(self.capture, parts))
        return self._model_cache[key]

    def code(self, part: str = "backward", strategy: Any = None) -> GraphCode:
        """The ``forward`` or ``backward`` graph of a partition (or the ``joint`` graph) as Python
        whose inputs and outputs carry real names (``features_0_weight``,
        ``grad_features_0_weight``, ``tangent_loss``); saved values keep their joint-graph names.
        ``str()`` of the result is the code; ``.compile()`` makes it callable (it runs)."""
        from .analysis.code import graph_code

        s = self._strategy(strategy)
        key = ("code", part, None if part == "joint" else s)
        if key not in self._cache:
            p = None if part == "joint" else self.partition(s)
            self._cache[key] = graph_code(self.graph, part, p, title=self._code_title())
        return self._cache[key]

    def _code_title(self) -> str:
        name = self.title
        where = f", {graph_of(self.index, len(self.capture.graphs))}" if len(self.capture.graphs) > 1 else ""
        return f"{name}, parameters {self.params}{where}"


def _renamed(module: Any, rename: dict[str, str]) -> Any:
    """``module`` with its longest prefix found in ``rename`` replaced (a reused graph's run)."""
    if not isinstance(module, str) or not rename:
        return module
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        head = ".".join(parts[:k])
        if head in rename:
            return ".".join([rename[head]] + parts[k:])
    return module
