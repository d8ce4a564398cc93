"""The pieces of a graph-broken model in a report and in the widget: the piece selector's choices,
each other piece's own payloads (``graph.graph_data``), and the whole-model overview.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.graph.pieces import piece_facts, piece_summaries
from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.core.errors import FxvizError
from fxviz.core.units import format_bytes
from fxviz.payloads.graph import PIECE_FIELDS, graph_data
from fxviz.payloads.panels import MISSING, table_data
from fxviz.payloads.views import ViewPayload
from fxviz.render.page.embed import clean_svg
from fxviz.sources.graphs import graph_name, graph_of

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.analysis.graph.pieces import PieceSummary
    from fxviz.api.facade import Trace

__all__ = ["OPTION_CHARS", "pieces_data", "overview_data", "piece_options", "piece_option", "short_option",
           "whole_model_option"]

OPTION_CHARS = 90
"""The most characters a piece selector's choice shows (a longer one is cut, its full text kept as a tooltip)."""


def pieces_data(tr: Trace, keys: Sequence[str], views: Sequence[str], pairs: Sequence[tuple[str, str]],
                group: str | None, depth: int | None, budget: float | None,
                say: Callable[[str], None]) -> list[dict[str, Any]]:
    """One entry per piece of a graph-broken model (empty for one graph): what the piece selector
    shows (label, break reason, node counts, saved bytes, runs; ``option`` in full and ``short``
    as the selector shows it) and, for every piece but the first (whose payloads are the report's
    own), its ``graph_data`` fields (``PIECE_FIELDS``)."""
    pieces = tr.pieces
    if len(pieces) < 2:
        return []
    out = []
    for summary, piece in zip(summaries(tr, keys[0]), pieces):
        option = piece_option(summary)
        entry: dict[str, Any] = {
            "piece": piece.graph.index, "label": summary.label, "reason": summary.reason, "nodes": summary.nodes,
            "forward_ops": summary.forward_ops, "backward_ops": summary.backward_ops,
            "has_backward": summary.has_backward, "saved": format_bytes(summary.saved_bytes, missing=MISSING),
            "saved_bytes": summary.saved_bytes, "strategy": summary.strategy, "runs": summary.runs,
            "modules": [list(m) for m in summary.modules], "option": option, "short": short_option(option),
        }
        if piece.graph.index:
            say(graph_of(piece.graph.index, len(pieces)))
            data = graph_data(piece, keys, views, pairs, group, depth, budget, say)
            entry["payload"] = {k: data[k] for k in PIECE_FIELDS}
        out.append(entry)
    return out


def overview_data(tr: Trace, keys: Sequence[str]) -> dict[str, Any]:
    """The whole-model view: the overview drawing and the per-piece memory table with totals."""
    drawing = tr.draw("overview", keys[0])
    try:
        df = tr.memory_table(keys, scope="step")
        shown = df.copy()
        shown["strategy"] = [f"{'whole model' if p == 'total' else graph_name(int(p))}: {s}"
                             + (f" (x{r} runs)" if p != "total" and r > 1 else "")
                             for p, s, r in zip(df["piece"], df["strategy"], df["runs"])]
        shown.attrs = dict(df.attrs)
        table = table_data(shown)
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}
    view = ViewPayload(key="overview", view="joint", strategy=None, compare=None, svg=clean_svg(drawing.svg()),
                       caption=drawing.caption)
    return {"view": view.to_json(), "table": table}


def piece_options(tr: Trace, strategy: StrategyLike | None = None) -> list[tuple[str, int]]:
    """The piece selector's choices: ``whole model`` (-1, the overview), then each piece with its
    node count, saved bytes, runs and the graph break before it; one graph gives one choice."""
    pieces = tr.pieces
    if len(pieces) < 2:
        return [("graph 1", 0)]
    options = [(whole_model_option(len(pieces)), -1)]
    for p in summaries(tr, strategy):
        options.append((short_option(piece_option(p)), p.index))
    return options


def summaries(tr: Trace, strategy: StrategyLike | None = None) -> list[PieceSummary]:
    """One ``PieceSummary`` per piece (counts, saved activation bytes under ``strategy``, runs): the
    pieces' rows of the step's memory table, as the piece selector and the overview say them."""
    s = tr.default_strategy if strategy is None else Strategy.parse(strategy)
    return piece_summaries(tr.capture, tr.memory_table([s], scope="step"), s.name, piece_facts(tr.capture))


def short_option(text: str) -> str:
    """A piece selector's choice as it shows: cut to ``OPTION_CHARS`` (widget and report)."""
    return text if len(text) <= OPTION_CHARS else text[:OPTION_CHARS - 2] + "\u2026"


def whole_model_option(pieces: int) -> str:
    """The piece selector's first choice (widget and report)."""
    return f"whole model ({pieces} graphs)"


def piece_option(p: PieceSummary) -> str:
    """One piece as the piece selector names it, in full (widget and report): "graph 2 of 3: 14 nodes,
    saves 96 B, ran 2× — after: <the graph break>"."""
    saves = f"saves {format_bytes(p.saved_bytes, missing=MISSING)}" if p.has_backward else "no backward graph"
    text = f"{p.label}: {p.nodes} nodes, {saves}"
    text += f", ran {p.runs}\u00d7" if p.runs > 1 else ""
    return text + (f" \u2014 after: {p.reason}" if p.reason else "")
