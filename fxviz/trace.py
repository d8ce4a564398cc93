"""``Trace``: the object users hold.  A thin facade over the captured data and the analysis and
presentation layers; every fact it shows is computed once and cached here, keyed by its inputs.
"""

from __future__ import annotations

from collections import Counter
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable

import pandas as pd
import torch.fx as fx

from .analysis.strategies import Strategy, StrategyLike, parse_list
from .capture import Capture, JointGraph, capture
from .roles import ROLES

if TYPE_CHECKING:  # pragma: no cover
    from .analysis.partition import Partition
    from .render.drawing import Drawing

__all__ = ["Trace", "trace"]

NODE_COLUMNS = ["op", "target", "short_op", "role", "phase", "qualname", "module", "shape", "dtype",
                "bytes", "source", "source_code", "seq_nr"]


def trace(model_or_fn: Callable, *example_inputs: Any, loss_fn: Callable | None = None,
          params: str = "lifted", capture_route: str = "auto") -> "Trace":
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

    Returns:
        A :class:`Trace`.  With graph breaks, it is the first graph; ``tr.pieces`` has them all.

    The model, its ``.grad`` fields, buffers, ``training`` flags and the RNG are left untouched.
    """
    return Trace(capture(model_or_fn, tuple(example_inputs), loss_fn=loss_fn, params=params,
                         route=capture_route))


class Trace:
    """One captured joint graph, with its nodes named and classified, and every view of it."""

    def __init__(self, captured: Capture, index: int = 0, pieces: list["Trace"] | None = None) -> None:
        self.capture = captured
        self.graph: JointGraph = captured.graphs[index]
        self.index = index
        self._pieces = pieces
        self._cache: dict[Any, Any] = {}

    # --- the captured data -----------------------------------------------------------------------
    @property
    def joint(self) -> fx.GraphModule:
        """The joint forward+backward ``GraphModule`` exactly as torch's partitioner receives it
        (forward-only when nothing requires grad).  Never mutated by fxviz."""
        return self.graph.gm

    @property
    def pieces(self) -> list["Trace"]:
        """One Trace per captured graph, in execution order (several after graph breaks)."""
        if self._pieces is None:
            self._pieces = [self] + [Trace(self.capture, i) for i in range(1, len(self.capture.graphs))]
            for p in self._pieces[1:]:
                p._pieces = self._pieces
        return self._pieces

    @property
    def graph_breaks(self) -> list[str]:
        """Why dynamo split the model into several graphs (empty when it is one graph)."""
        return list(self.capture.graph_breaks)

    @property
    def model(self) -> Any:
        return self.capture.model

    @property
    def title(self) -> str:
        """What views call the model: its class, or the traced function's name."""
        return self.capture.title

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
        rows = [{k: getattr(info, k) for k in NODE_COLUMNS} for info in self.graph.info.values()]
        df = pd.DataFrame(rows, columns=NODE_COLUMNS, index=pd.Index(list(self.graph.info), name="name"))
        df["role"] = pd.Categorical(df["role"], categories=list(ROLES))
        df["bytes"] = df["bytes"].astype("Int64")
        df["seq_nr"] = df["seq_nr"].astype("Int64")
        return df

    def role_counts(self) -> dict[str, int]:
        counts = Counter(i.role for i in self.graph.info.values())
        return {r: counts.get(r, 0) for r in ROLES}

    def parameters(self) -> pd.DataFrame:
        """Per model parameter: how it appears in the graph and which node is its gradient."""
        model = self.capture.model
        rows = []
        if model is None:
            return pd.DataFrame(columns=["parameter", "shape", "dtype", "requires_grad", "graph_role",
                                         "graph_nodes", "gradient_node"])
        by_name: dict[str, list[str]] = {}
        grads: dict[str, str] = {}
        for info in self.graph.info.values():
            if info.qualname is None:
                continue
            if info.role in ("parameter", "constant", "buffer"):
                by_name.setdefault(info.qualname, []).append(info.name)
            elif info.role == "gradient":
                grads.setdefault(info.qualname, info.name)
        for t in self.pieces[1:]:
            for info in t.graph.info.values():
                if info.qualname and info.role in ("parameter", "constant"):
                    by_name.setdefault(info.qualname, []).append(f"{info.name} (graph {t.index})")
                elif info.qualname and info.role == "gradient":
                    grads.setdefault(info.qualname, f"{info.name} (graph {t.index})")
        for name, p in model.named_parameters():
            nodes = by_name.get(name, [])
            role = "—"
            for info in (self.graph.info.get(n) for n in nodes):
                if info is not None:
                    role = info.role
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
        ops_f = sum(1 for i in info if i.op == "call_function" and i.phase == "forward")
        ops_b = sum(1 for i in info if i.op == "call_function" and i.phase == "backward")
        model = self.capture.model
        title = self.title
        route = {"dynamo": "torch.compile (dynamo) + AOTAutograd", "aot": "aot_function over fake tensors",
                 "closure": "aot_function on a closure (parameters captured as constants)"}[self.capture.route]
        lines = [
            f"{title}: joint graph of {len(self.graph.info)} nodes "
            f"({ops_f} forward ops, {ops_b} backward ops), parameters {self.params}, captured with {route}",
            "  " + ", ".join(f"{counts[r]} {r}" for r in ROLES if counts[r]),
            f"  {self.loss}",
        ]
        if not self.has_backward:
            lines.append("  no backward graph: nothing the loss depends on requires grad")
        if model is not None:
            params = self.parameters()
            n_grad = int((params["gradient_node"] != "none").sum()) if len(params) else 0
            n_req = int(params["requires_grad"].sum()) if len(params) else 0
            lines.append(f"  parameters: {len(params)} ({n_req} require grad); "
                         f"{n_grad} get a gradient from the backward graph")
        if len(self.capture.graphs) > 1 or self.graph_breaks:
            where = (f"graph {self.index + 1} of {len(self.capture.graphs)}" if len(self.capture.graphs) > 1
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
    def partition(self, strategy: StrategyLike = "default") -> Partition:
        """Partition the joint graph with ``strategy`` (cached): ``"default"``, ``"min_cut"``,
        ``"budget:0.3"`` / ``"budget:0.3:greedy"``, ``"eager"``, ``"recompute_all"``, a callable
        with a torch partitioner's signature, or a :class:`~fxviz.analysis.strategies.Strategy`
        (every form: ``fxviz.analysis.strategies.forms_text()``)."""
        from .analysis.partition import partition

        s = Strategy.parse(strategy)
        key = ("partition", s)
        if key not in self._cache:
            self._cache[key] = partition(self.graph, s, self.capture)
        result: Partition = self._cache[key]
        return result

    def memory_table(self, strategies: Any = None) -> pd.DataFrame:
        """One row per strategy: saved activation / parameter / input bytes (storage-aware),
        recompute FLOPs and bytes, op counts, forward and backward peaks, torch's own estimate.

        ``strategies``: a list (or comma-separated string) of strategies as for :meth:`partition`;
        default ``default, min_cut, budget:0.5, recompute_all, eager``.  A strategy that fails on
        this graph gives a row with ``error`` set.  The frame keeps exact integers and displays
        styled (MiB/GiB, best value per column marked) in a notebook; ``df.attrs["caption"]`` says
        which partitioner arguments were passed and how bytes are counted."""
        from .analysis.memory import memory_table
        from .render.table import MemoryTable

        chosen = parse_list(strategies)
        key = ("memory_table", None if chosen is None else tuple(chosen))
        if key not in self._cache:
            self._cache[key] = memory_table(self.graph, self.partition, chosen)
        df = self._cache[key]
        table = MemoryTable(df.copy())
        table.attrs = dict(df.attrs)
        return table

    def memory_sweep(self, budgets: Any = None, solver: str = "dp", progress: bool | None = None) -> pd.DataFrame:
        """The memory / recompute trade-off: min-cut under ``activation_memory_budget`` for each
        of ``budgets`` (default 0, 0.1, ..., 1) with ``solver`` (``dp``, ``greedy``, ``ilp``).
        Budgets giving identical partitions share one row.  ``progress``: a tqdm bar (default: on
        for more than five budgets).  ``.pareto_plot()`` on the result draws the trade-off."""
        from .analysis.sweep import DEFAULT_BUDGETS, memory_sweep
        from .render.plots import MemorySweep

        chosen = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
        wrap = None
        if progress or (progress is None and len(chosen) > 5):
            from tqdm.auto import tqdm

            def wrap(items: Any) -> Any:
                return tqdm(items, desc=f"budget sweep ({solver})", unit="budget", leave=False)

        df = memory_sweep(self.graph, self.partition, chosen, solver=solver, progress=wrap)
        sweep = MemorySweep(df)
        sweep.attrs = dict(df.attrs)
        return sweep

    # --- drawing ---------------------------------------------------------------------------------
    def draw(self, view: str = "joint", strategy: Any = None, compare: Any = None, group: str | None = None,
             depth: int | None = None, highlight: Any = None, *, node_limit: int | None = None,
             timeout: float | None = None) -> Any:
        """Draw the graph: nodes colored by role, with a legend; returns a ``Drawing`` that shows
        itself in Jupyter and has ``.save('g.svg' | 'g.png' | 'g.dot')`` and ``.source``.

        Args:
            view: ``"joint"`` (forward and backward side by side), ``"forward"`` or ``"backward"``
                (one side of ``strategy``'s partition, default strategy ``"default"``).
            strategy: mark what this strategy saves, recomputes and removes.
            compare: a second strategy: mark what each saves/recomputes that the other does not.
            group: ``"module"`` clusters nodes by module path; ``"none"`` never collapses;
                default: every node up to ``node_limit`` nodes, module boxes above.
            depth: with module grouping, modules at this depth become one box each.
            highlight: a node name, op, parameter or module (or a list): emphasise matches.
        """
        from .render.drawing import DEFAULT_TIMEOUT
        from .render.views import NODE_LIMIT, draw

        if strategy is None and (compare is not None or view in ("forward", "backward")):
            strategy = "default"
        first = None if strategy is None else Strategy.parse(strategy)
        second = None if compare is None else Strategy.parse(compare)
        marks = tuple([highlight] if isinstance(highlight, str) else highlight or ())
        key = ("draw", view, first, second, group, depth, marks, node_limit, timeout)
        cached: Drawing | None = self._cache.get(key)
        if cached is not None:
            return cached
        name = self.title
        if len(self.capture.graphs) > 1:
            name += f" (graph {self.index + 1} of {len(self.capture.graphs)})"
        drawing = draw(self.graph, view=view, partition=self.partition(first) if first is not None else None,
                       compare=self.partition(second) if second is not None else None, group=group, depth=depth,
                       highlight=list(marks), name=name,
                       node_limit=NODE_LIMIT if node_limit is None else node_limit,
                       timeout=DEFAULT_TIMEOUT if timeout is None else timeout)
        self._cache[key] = drawing
        return drawing

    def check_gradients(self, rtol: float = 1e-4, atol: float = 1e-5) -> pd.DataFrame:
        """Per parameter: ``parameter, has_gradient, max_abs_diff, ok`` against eager autograd."""
        from .analysis.gradients import check_gradients

        return check_gradients(self.capture, rtol=rtol, atol=atol)

    def doctor(self, strategy: Any = "default") -> Any:
        """Why parameters get no gradient, across every graph of the trace (all ``pieces``): each
        finding names the parameter, the joint-graph node where the path is cut, why, and the fix.
        ``strategy``: the partition whose backward graphs are checked for dropped gradients.
        Returns a report with ``.findings``, ``.table`` (one row per parameter) and ``.healthy``;
        it prints as text and displays as a card in Jupyter (cached)."""
        from .analysis.doctor import diagnose
        from .render.doctor_view import DoctorReport

        root = self.pieces[0]
        key = ("doctor", Strategy.parse(strategy))
        if key not in root._cache:
            parts = [p.partition(strategy) if p.has_backward else None for p in root.pieces]
            root._cache[key] = DoctorReport(diagnose(self.capture, parts))
        return root._cache[key]

    def code(self, part: str = "backward", strategy: Any = "default") -> Any:
        """The ``forward`` or ``backward`` graph of a partition (or the ``joint`` graph) as Python
        whose inputs and outputs carry real names (``features_0_weight``,
        ``grad_features_0_weight``, ``tangent_loss``); saved values keep their joint-graph names.
        ``str()`` of the result is the code; ``.compile()`` makes it callable (it runs)."""
        from .analysis.code import graph_code

        key = ("code", part, None if part == "joint" else Strategy.parse(strategy))
        if key not in self._cache:
            p = None if part == "joint" else self.partition(strategy)
            self._cache[key] = graph_code(self.graph, part, p, title=self._code_title())
        return self._cache[key]

    def _code_title(self) -> str:
        name = self.title
        where = f", graph {self.index + 1} of {len(self.capture.graphs)}" if len(self.capture.graphs) > 1 else ""
        return f"{name}, parameters {self.params}{where}"
