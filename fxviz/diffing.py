"""``fxviz.diff(a, b)``: what one partition saves that another does not, value by value, and why.

The comparative memory question ("what did checkpointing drop?", "why does the compiled step save
more than eager?", "why does rank 1 save more than rank 0?") answered on two Traces: two models,
one model under two backends, two logged runs or ranks, or one trace under two strategies.  The
facts live in ``analysis.diff`` / ``analysis.match``; this is the object users hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from .analysis.diff import Side, diff_table, module_bytes, side_of
from .analysis.match import RULES, Matching, match_graphs
from .analysis.strategies import Strategy, StrategyLike
from .errors import InputError
from .facade import Trace

if TYPE_CHECKING:  # pragma: no cover
    from .render.drawing import Drawing

__all__ = ["Diff", "diff"]


def _label(tr: Trace, strategy: Strategy) -> str:
    where = f" ({tr.capture.origin})" if tr.capture.origin else ""
    backend = "" if tr.from_log else f", backend {tr.capture.backend}"
    return f"{tr.title}{where}, strategy {strategy.name}{backend}"


def diff(a: Trace, b: Trace, strategy: StrategyLike | None = None, strategy_b: StrategyLike | None = None, *,
         labels: tuple[str, str] | None = None) -> Diff:
    """Compare what two partitions save for the backward, value by value.

    Args:
        a, b: Traces (``fxviz.trace(...)``, ``backend="inductor"`` captures, ``Run.trace(...)`` of
            a log: two log directories, two compiles or two ranks), or one Trace twice.  One graph
            each: after graph breaks, pass the pieces to compare (``tr.piece(i)``).
        strategy: A's strategy; default: A's :attr:`~Trace.default_strategy` (``logged`` for a log
            with its forward and backward graphs, else ``default``).
        strategy_b: B's strategy; default: ``strategy`` when given and B is another trace, else
            B's default strategy.
        labels: what to call A and B in the summary (e.g. the log directories); default: each
            trace's title and origin.

    Returns:
        A :class:`Diff`: ``.table`` (one row per saved value of either side, with how it was
        matched and why only one side saves it), ``.by_module``, ``.summary()``, ``.draw()``.
    """
    for name, tr in (("a", a), ("b", b)):
        if not isinstance(tr, Trace):
            raise InputError(f"fxviz.diff: {name} is a {type(tr).__name__}, not a Trace",
                             "pass Traces: fxviz.trace(model, *inputs) or fxviz.load_logs(dir).trace(rank=...)")
        if not tr.has_backward:
            raise InputError(f"fxviz.diff: {name} ({tr.title}) has no backward graph, so it saves nothing",
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
        from .render.diff_view import diff_summary

        return diff_summary(self.a, self.b, self._table, self.by_module, width)

    def table_text(self, width: int = 100) -> str:
        """The table for a terminal, one line per saved value."""
        from .render.diff_view import diff_table_text

        return diff_table_text(self._table, width)

    def draw(self) -> Drawing:
        """The values one side saves and the other does not, in both graphs side by side (A and B
        clusters, the differences drawing's marks and faded neighbors; dashed lines join matched
        values).  A ``Drawing``: shows itself in Jupyter, ``.save('diff.svg' | '.png' | '.dot')``."""
        from .render.diff_view import draw_diff

        if self._drawing is None:
            self._drawing = draw_diff(self.a, self.b, self._table, self.matching)
        return self._drawing

    def __repr__(self) -> str:
        return "<fxviz.Diff\n" + self.summary() + ">"

    def _repr_html_(self) -> str:
        import html

        return "<pre>" + html.escape(self.summary()) + "</pre>"
