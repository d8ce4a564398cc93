"""``Trace.draw``'s work: which strategies a view marks, the drawing's cache key and name, and the
flow view.  Kept beside the facade (same floor) so ``facade.py`` stays the list of what a trace
answers, each answer a call into the room that computes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fxviz.analysis.strategy import choices
from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.core.collector import old_objects_frozen
from fxviz.sources.graphs import graph_of

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace
    from fxviz.render.graph.drawing import Drawing

__all__ = ["draw_trace"]


def draw_trace(tr: Trace, view: str, strategy: StrategyLike | None, compare: StrategyLike | None,
               group: str | None, depth: int | None, highlight: str | Sequence[str] | None, *, piece: int | None,
               expand: str | Sequence[str] | None, node_limit: int | None, timeout: float | None,
               differences: bool) -> Drawing:
    """:meth:`Trace.draw` (its docstring says what each argument does); drawings are cached on the trace."""
    from fxviz.render.graph.drawing import DEFAULT_TIMEOUT
    from fxviz.render.graph.views import NODE_LIMIT, draw

    if piece is not None:
        return tr.piece(piece).draw(view, strategy, compare, group, depth, highlight, expand=expand,
                                    node_limit=node_limit, timeout=timeout, differences=differences)
    named = None if strategy is None else Strategy.parse(strategy)
    if view == "flow":
        return _draw_flow(tr, choices.flow_strategy(named), timeout)
    second = None if compare is None else Strategy.parse(compare)
    first = choices.drawn_strategy(tr.graph, tr.capture, view, named, second)
    marks = tuple([highlight] if isinstance(highlight, str) else highlight or ())
    opened = tuple([expand] if isinstance(expand, str) else expand or ())
    # timeout decides the picture: an automatic collapse keeps a level whose layout timed out
    key = ("draw", view, first, second, group, depth, marks, opened, node_limit, timeout, bool(differences))
    name = tr.title
    if len(tr.capture.graphs) > 1:
        name += f" ({graph_of(tr.index, len(tr.capture.graphs))})"
    with old_objects_frozen():  # the collector walks the drawing's records, not the trace's millions of objects
        return tr.cached(key, lambda: draw(
            tr.graph, view=view, partition=tr.partition(first) if first is not None else None,
            compare=tr.partition(second) if second is not None else None, group=group, depth=depth,
            highlight=list(marks), name=name, expand=list(opened),
            node_limit=NODE_LIMIT if node_limit is None else node_limit,
            timeout=DEFAULT_TIMEOUT if timeout is None else timeout, differences=bool(differences),
            names=choices.step_names(tr.capture)))


def _draw_flow(tr: Trace, strategy: Strategy, timeout: float | None) -> Drawing:
    from fxviz.render.graph.drawing import DEFAULT_TIMEOUT
    from fxviz.render.graph.flow import draw_flow

    # timeout is in the key: the drawing lays itself out under it when first shown
    return tr.cached(("draw_flow", strategy, timeout), lambda: draw_flow(
        tr.flow_network(strategy), tr.graph, tr.title, DEFAULT_TIMEOUT if timeout is None else timeout))
