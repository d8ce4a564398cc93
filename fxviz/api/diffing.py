"""``fxviz.diff(a, b)``: what one partition saves that another does not, value by value, and why.

The comparative memory question ("what did checkpointing drop?", "why does the compiled step save
more than eager?", "why does rank 1 save more than rank 0?") answered on two Traces: two models,
one model under two backends, two logged runs or ranks, or one trace under two strategies.  The
facts live in ``analysis.diff`` / ``analysis.match``; this is the object users hold.

Whole steps (:class:`StepDiff`): comparing first graphs only misleads as soon as one side breaks the
graph where the other does not (Hugging Face checkpointing splits a Llama's step in two: the first
graphs alone read -93% where the whole step went -81%), so a side with several graphs is compared
graph by graph, paired by the parameters and modules they hold, with the step's totals.  The
pairing, the one naming rule across breaks and the re-pairing of values saved in graphs that are not
a pair live in ``analysis.step_pairs``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pandas as pd

from fxviz.analysis.diff.match import RULES, Matching, match_graphs
from fxviz.analysis.diff.step_pairs import join_step_rows, outside_notes, pair_pieces, piece_key, prefixes, rooted
from fxviz.analysis.diff.values import BY_MODULE_COLUMNS, Side, diff_table, lone_rows, module_bytes, side_of
from fxviz.analysis.graph.pieces import piece_facts
from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.api.facade import Trace
from fxviz.api.run import Run
from fxviz.core.errors import InputError
from fxviz.core.units import format_bytes
from fxviz.sources.graphs import graph_name
from fxviz.sources.log_source import LogSource

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.render.graph.drawing import Drawing

__all__ = ["Diff", "diff", "StepDiff", "StepPair", "step_diff"]


def _several(x: object) -> bool:
    """A side that is a whole step of more than one graph: a trace (not a piece) of a model with
    graph breaks, or a logged run or list of its traces with several graphs with a backward."""
    if isinstance(x, Trace):
        return x.graph.index == 0 and len(x.capture.graphs) > 1
    if isinstance(x, Run):
        return x.step_graph_count() > 1
    return isinstance(x, Sequence) and sum(isinstance(t, Trace) and t.graph.has_backward for t in x) > 1


def _one_graph(x: Trace | Run | Sequence[Trace]) -> Trace:
    if isinstance(x, Run):
        return x.trace()
    if not isinstance(x, Trace) and isinstance(x, Sequence) and x and isinstance(x[0], Trace):
        return next((t for t in x if t.graph.has_backward), x[0])
    return x  # type: ignore[return-value]  # anything else is refused below, by name


def _label(tr: Trace, strategy: Strategy) -> str:
    where = f" ({tr.capture.origin})" if tr.capture.origin else ""
    backend = "" if tr.capture.from_log else f", backend {tr.capture.backend}"
    return f"{tr.capture.title}{where}, strategy {strategy.name}{backend}"


def diff(a: Trace | Run | Sequence[Trace], b: Trace | Run | Sequence[Trace], strategy: StrategyLike | None = None,
         strategy_b: StrategyLike | None = None, *, labels: tuple[str, str] | None = None,
         whole_step: bool | None = None) -> Diff | StepDiff:
    """Compare what two partitions save for the backward, value by value.

    Args:
        a, b: Traces (``fxviz.trace(...)``, ``backend="inductor"`` captures, ``Run.trace(...)`` of
            a log: two log directories, two compiles or two ranks), or one Trace twice, or two
            logged runs (``fxviz.load_logs(dir)``: their first rank's whole steps; a rank's:
            ``run.traces(rank)``).
        whole_step: compare every graph of each step (a :class:`StepDiff`: graphs paired by what
            they hold, step totals, each pair).  Default: when a side's step has several graphs (a
            model trace with graph breaks, a logged run); ``False`` compares the first graphs with a
            backward only, and a piece (``tr.piece(i)``, i > 0) is always one graph.
        strategy: A's strategy; default: A's :attr:`~Trace.default_strategy` (``logged`` for a log
            with its forward and backward graphs, else what the step partitions with: torch.compile's
            ``min_cut``, or ``default`` for ``aot_function``'s routes).
        strategy_b: B's strategy; default: ``strategy`` when given and B is another trace, else
            B's default strategy.
        labels: what to call A and B in the summary (e.g. the log directories); default: each
            trace's title and origin.

    Returns:
        A :class:`Diff`: ``.table`` (one row per saved value of either side, with how it was
        matched and why only one side saves it), ``.by_module``, ``.summary()``, ``.draw()``.
    """
    for name, x in (("a", a), ("b", b)):  # an empty step (a rank of a log with no graph with a backward)
        if isinstance(x, Sequence) and not isinstance(x, str) and not any(isinstance(t, Trace) for t in x):
            raise InputError(f"fxviz.diff: {name} holds no graph with a backward, so it saves nothing",
                             "pass a Trace, a logged run, or the traces of a rank that has one: run.traces(rank)")
    if whole_step or (whole_step is None and (_several(a) or _several(b))):
        return step_diff(a, b, strategy, strategy_b, labels=labels)
    a, b = _one_graph(a), _one_graph(b)
    for name, tr in (("a", a), ("b", b)):
        if not isinstance(tr, Trace):
            raise InputError(f"fxviz.diff: {name} is a {type(tr).__name__}, not a Trace",
                             "pass Traces: fxviz.trace(model, *inputs) or fxviz.load_logs(dir).trace(rank=...)")
        if not tr.graph.has_backward:
            raise InputError(f"fxviz.diff: {name} ({tr.capture.title}) has no backward graph, so it saves nothing",
                             "trace a step whose loss depends on something that requires grad")
    sa = Strategy.parse(strategy) if strategy is not None else a.default_strategy
    sb = Strategy.parse(strategy_b if strategy_b is not None else strategy if strategy is not None and a is not b
                        else b.default_strategy)
    if a is b and sa == sb:
        raise InputError(f"fxviz.diff: A and B are the same trace under the same strategy ({sa.name})",
                         "pass another trace, or another strategy: fxviz.diff(tr, tr, 'default', 'min_cut')")
    la, lb = (f"{labels[0]}: ", f"{labels[1]}: ") if labels is not None else ("", "")
    return Diff(side_of("A", la + _label(a, sa), a.graph, a.partition(sa)),
                side_of("B", lb + _label(b, sb), b.graph, b.partition(sb)), a, b)


class Diff:
    """Two partitions compared value by value (``fxviz.diff``)."""

    def __init__(self, a: Side, b: Side, trace_a: Trace, trace_b: Trace) -> None:
        self.a = a
        self.b = b
        self.trace_a = trace_a
        self.trace_b = trace_b
        self.matching: Matching = match_graphs(a.graph, b.graph)
        self._table = diff_table(a, b, self.matching)
        self._drawing: Drawing | None = None

    @property
    def table(self) -> pd.DataFrame:
        """One row per saved value of either side, in the saved table's words: ``status`` (both /
        only A / only B), ``module`` (None: no module), ``op``, ``shape_a``/``shape_b`` (tuples of
        ints; None where that side does not save it), ``dtype``, ``kind`` (activation, or a saved view
        of a parameter or input), ``bytes_a``/``bytes_b`` (a storage several saved values view is
        counted at the first), ``name_a``/``name_b`` (joint-graph names), ``match`` (the rule that paired it:
        ``analysis.match.RULES``), ``why`` (when one side only saves it, the reason fxviz found)."""
        return self._table.copy()

    @property
    def by_module(self) -> pd.DataFrame:
        """Saved activation bytes per module for A and B and the change, biggest change first."""
        return module_bytes(self._table)

    @property
    def totals(self) -> tuple[int, int]:
        """Saved activation bytes of A and B: each side's memory table ``saved_activation_bytes``."""
        return self.a.activation_bytes, self.b.activation_bytes

    def match_counts(self) -> dict[str, int]:
        """Rows per matching rule (``analysis.match.RULES``)."""
        counts = self._table["match"].value_counts()
        return {r: int(counts.get(r, 0)) for r in RULES}

    def summary(self, width: int = 100) -> str:
        """Totals, the change, the modules that changed most and the biggest differences."""
        from fxviz.render.text.diff_view import diff_summary

        return diff_summary(self.a, self.b, self._table, self.by_module, width)

    def table_text(self, width: int = 100) -> str:
        """The table for a terminal, one line per saved value."""
        from fxviz.render.text.diff_view import diff_table_text

        return diff_table_text(self._table, width)

    def draw(self) -> Drawing:
        """The values one side saves and the other does not, in both graphs side by side (A and B
        clusters, the differences drawing's marks and faded neighbors; dashed lines join matched
        values).  A ``Drawing``: shows itself in Jupyter, ``.save('diff.svg' | '.png' | '.dot')``."""
        from fxviz.render.text.diff_view import draw_diff

        if self._drawing is None:
            self._drawing = draw_diff(self.a, self.b, self._table, self.matching)
        return self._drawing

    def __repr__(self) -> str:
        return "<fxviz.Diff\n" + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"


@dataclass(frozen=True)
class StepPair:
    """Graph ``a`` of A and graph ``b`` of B (positions in each step's graphs with a backward; None
    where that graph has no partner) and their :class:`Diff` when both exist.  A graph of a run that
    did not break can pair with several graphs of one that did."""

    a: int | None
    b: int | None
    diff: Diff | None


def _pieces(x: Trace | Run | Sequence[Trace]) -> tuple[list[Trace], list[int], list[str | None]]:
    """A side's graphs with a backward, how often each ran, and the frame each compiled."""
    if isinstance(x, Run) or (isinstance(x, Sequence) and all(isinstance(t, Trace) for t in x)):
        traces = [t for t in (x.traces() if isinstance(x, Run) else x) if t.graph.has_backward]
        frames = [t.capture.source.frame if isinstance(t.capture.source, LogSource) else None for t in traces]
        return traces, [1] * len(traces), frames
    if not isinstance(x, Trace):
        raise InputError(f"fxviz.diff: got a {type(x).__name__}, not a Trace or a Run",
                         "pass fxviz.trace(model, *inputs) or fxviz.load_logs(dir)")
    pieces = [x] if x.graph.index > 0 else x.pieces
    facts = piece_facts(x.capture)
    kept = [p for p in pieces if p.graph.has_backward]
    return kept, [max(1, len(facts.runs_of(p.graph.index))) for p in kept], [None] * len(kept)


def _side(letter: str, label: str, tr: Trace, prefix: str, strategy: Strategy) -> Side:
    return side_of(letter, label, rooted(tr.graph, prefix), tr.partition(strategy))


def step_diff(a: Trace | Run | Sequence[Trace], b: Trace | Run | Sequence[Trace], strategy: StrategyLike | None = None,
              strategy_b: StrategyLike | None = None, *, labels: tuple[str, str] | None = None) -> StepDiff:
    """:func:`fxviz.diff` over whole steps (its ``whole_step``): see :class:`StepDiff`."""
    (ta, ra, fa), (tb, rb, fb) = _pieces(a), _pieces(b)
    for name, side in (("a", ta), ("b", tb)):
        if not side:
            raise InputError(f"fxviz.diff: {name} has no graph with a backward, so its step saves nothing",
                             "trace a step whose loss depends on something that requires grad")
    keys_a = [piece_key(i, t.graph, f, r) for i, (t, f, r) in enumerate(zip(ta, fa, ra))]
    keys_b = [piece_key(i, t.graph, f, r) for i, (t, f, r) in enumerate(zip(tb, fb, rb))]
    roots = prefixes(keys_a + keys_b)
    keys_a = [piece_key(i, rooted(t.graph, roots[i]), f, r) for i, (t, f, r) in enumerate(zip(ta, fa, ra))]
    keys_b = [piece_key(j, rooted(t.graph, roots[len(ta) + j]), f, r) for j, (t, f, r) in enumerate(zip(tb, fb, rb))]
    chosen_b = strategy_b if strategy_b is not None else strategy
    la = labels[0] if labels else _step_label(a, ta, _strategy(ta[0], strategy).name)
    lb = labels[1] if labels else _step_label(b, tb, _strategy(tb[0], chosen_b).name)
    sides_a = [_side("A", la, t, roots[i], _strategy(t, strategy)) for i, t in enumerate(ta)]
    sides_b = [_side("B", lb, t, roots[len(ta) + j], _strategy(t, chosen_b)) for j, t in enumerate(tb)]
    pairs: list[StepPair] = []
    tables: list[tuple[int | None, int | None, pd.DataFrame]] = []
    for i, j in pair_pieces(keys_a, keys_b):
        if i is not None and j is not None:
            d = Diff(sides_a[i], sides_b[j], ta[i], tb[j])
            tables.append((i, j, d.table))
        elif i is not None:
            d = None
            tables.append((i, None, lone_rows(sides_a[i], f"B has no graph holding the parameters or modules of "
                                                          f"A's {graph_name(i)}")))
        else:
            d = None
            tables.append((None, j, lone_rows(sides_b[_at(j)], f"A has no graph holding the parameters or modules "
                                                               f"of B's {graph_name(_at(j))}")))
        pairs.append(StepPair(i, j, d))
    modules = ([k.modules for k in keys_a], [k.modules for k in keys_b])
    notes, why = outside_notes(keys_a, keys_b)
    notes += [f"{letter}: {note}" for letter, x in (("A", a), ("B", b)) if isinstance(x, Run)
              for note in [x.step_note()] if note]
    table = join_step_rows(tables, modules)
    if why and len(table):
        table["why"] = [why.get(str(m), w) if st != "both" and m is not None else w
                        for m, st, w in zip(table["module"], table["status"], table["why"])]
    return StepDiff(pairs, table, (la, lb), (ra, rb),
                    ([s.activation_bytes for s in sides_a], [s.activation_bytes for s in sides_b]), notes)


def _at(i: int | None) -> int:
    assert i is not None
    return i


def _strategy(tr: Trace, strategy: StrategyLike | None) -> Strategy:
    return Strategy.parse(strategy) if strategy is not None else tr.default_strategy


def _step_label(x: Trace | Run | Sequence[Trace], traces: list[Trace], strategy: str) -> str:
    """What the summary calls a side: where its step came from, its graphs, the strategy compared."""
    if not isinstance(x, Trace):
        where = f"log {x.path}" if isinstance(x, Run) else traces[0].capture.title
        return f"{where}, {len(traces)} graph(s) with a backward, strategy {strategy}"
    where = f" ({x.capture.origin})" if x.capture.origin else ""
    return (f"{x.capture.title}{where}, backend {x.capture.backend}, {len(traces)} graph(s) with a backward, "
            f"strategy {strategy}")


class StepDiff:
    """Two whole steps compared (``fxviz.diff`` of traces with several graphs, or of logged runs).

    ``.pairs`` (one :class:`StepPair` per paired or lone graph, in run order), ``.totals`` (each
    step's saved activation bytes: every graph's, times the runs of a graph dynamo reused),
    ``.table`` (every saved value of either step: the diff table's columns after ``graph_a`` and
    ``graph_b``, the piece each side saves it in), ``.by_module``, ``.summary()``,
    ``.pair(i)`` (graph ``i`` of A's :class:`Diff`, with its drawing)."""

    def __init__(self, pairs: list[StepPair], table: pd.DataFrame, labels: tuple[str, str],
                 runs: tuple[list[int], list[int]], saved: tuple[list[int], list[int]],
                 notes: list[str] | None = None) -> None:
        self.pairs = pairs
        self.notes = notes or []  # code one side ran outside its graphs: not in its totals
        self.labels = labels
        self._table = table
        self._runs = runs
        self._saved = saved

    def _line(self, p: StepPair) -> str:
        """One line of the step summary: the two graphs, what each saves, how often it ran."""
        def side(letter: str, i: int | None, k: int) -> str:
            if i is None:
                return f"{letter}: no graph"
            runs = self._runs[k][i]
            times = f" x{runs} runs" if runs > 1 else ""
            return f"{letter} {graph_name(i)} {format_bytes(self._saved[k][i])}{times}"

        alone = "" if p.diff is not None else "  (no partner: its values matched across graphs where they can be)"
        return f"{side('A', p.a, 0)}  <->  {side('B', p.b, 1)}{alone}"

    @property
    def table(self) -> pd.DataFrame:
        return self._table.copy()

    @property
    def totals(self) -> tuple[int, int]:
        """Saved activation bytes of the whole step, A and B (each graph times its runs)."""
        sa, sb = self._saved
        ra, rb = self._runs
        return sum(n * r for n, r in zip(sa, ra)), sum(n * r for n, r in zip(sb, rb))

    @property
    def by_module(self) -> pd.DataFrame:
        """Saved activation bytes per module over the whole step (each value times its graph's runs),
        names rooted as ``analysis.step_pairs`` says."""
        t = self._table.copy()
        if not len(t):
            return pd.DataFrame(columns=BY_MODULE_COLUMNS)
        for s, runs in (("a", self._runs[0]), ("b", self._runs[1])):
            times = [1 if g is None else runs[int(g)] for g in t[f"graph_{s}"]]
            t[f"bytes_{s}"] = t[f"bytes_{s}"] * pd.Series(times, index=t.index)
        return module_bytes(t)

    def pair(self, graph_a: int) -> Diff:
        """The :class:`Diff` of A's graph ``graph_a`` (0-based) and its partner."""
        for p in self.pairs:
            if p.a == graph_a and p.diff is not None:
                return p.diff
        raise InputError(f"A's {graph_name(graph_a)} has no partner in B",
                         "pairs: " + "; ".join(self._line(p) for p in self.pairs))

    def summary(self, width: int = 100) -> str:
        """The step totals and change, the pairs, the modules that changed most, the biggest differences."""
        from fxviz.render.text.diff_view import step_diff_summary

        graphs = (len(self._runs[0]), len(self._runs[1]))
        return step_diff_summary(self.labels, self.totals, graphs, [self._line(p) for p in self.pairs], self._table,
                                 self.by_module, width, self.notes)

    def table_text(self, width: int = 100) -> str:
        from fxviz.render.text.diff_view import diff_table_text

        return diff_table_text(self._table, width)

    def __repr__(self) -> str:
        return "<fxviz.StepDiff\n" + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"
