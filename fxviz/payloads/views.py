"""The view schema and its one builder: :class:`ViewKey` (everything that decides one drawing),
:class:`ViewPayload` (one rendered view, the shape both front ends read) and :func:`view_payload`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.strategies import Strategy, StrategyLike
from fxviz.core.errors import FxvizError, InputError
from fxviz.payloads.panels import saved_data
from fxviz.render.page.embed import clean_svg, page_data

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["VIEWS", "ViewKey", "ViewPayload", "view_payload", "openable_boxes"]

VIEWS = ("joint", "forward", "backward", "compare")


@dataclass(frozen=True)
class ViewKey:
    """Everything that decides one drawing (and nothing else): the cache key of a view, and the
    only builder of its text (``text()``: the widget's cache, the report's keys, the page's
    ``data-view-key``; no front end rebuilds or parses it).  ``strategy`` and ``compare`` are
    ``Strategy`` values, parsed once here at the door; ``strategy=None`` is the joint layout drawn
    without any strategy's marks (the report draws every strategy on it as an overlay)."""

    view: str
    strategy: Strategy | None
    compare: Strategy | None
    group: str | None
    depth: int | None
    expand: tuple[str, ...]  # the boxes opened (names ``draw(expand=...)`` takes), sorted
    differences: bool  # the compare view: only the nodes the two strategies treat differently

    def __init__(self, view: str = "joint", strategy: StrategyLike | None = "default",
                 compare: StrategyLike | None = None, group: str | None = None, depth: int | None = None,
                 expand: Sequence[str] = (), differences: bool = False) -> None:
        set_ = object.__setattr__  # frozen: the one place the fields are written
        set_(self, "view", view)
        set_(self, "strategy", None if strategy is None else Strategy.parse(strategy))
        set_(self, "compare", None if compare is None else Strategy.parse(compare))
        set_(self, "group", group)
        set_(self, "depth", depth)
        set_(self, "expand", tuple(expand))
        set_(self, "differences", bool(differences))

    def text(self) -> str:
        """``view|strategy|compare|group|depth``, then ``|+opened,boxes`` and ``|differences``."""
        names = (self.strategy.name if self.strategy else None, self.compare.name if self.compare else None)
        base = "|".join(str(x) if x is not None else "-" for x in (self.view, *names, self.group, self.depth))
        return base + ("|+" + ",".join(self.expand) if self.expand else "") + \
            ("|differences" if self.differences else "")


@dataclass(frozen=True)
class ViewPayload:
    """One rendered view: the one shape both front ends read.  The widget syncs it as one trait
    (``GraphPane.view_data``); the report embeds the same dicts (``data["views"]``, by ``key``);
    ``explorer.js`` reads its fields in ``showView``.  Built by :func:`view_payload` (from
    :meth:`head`; the whole-model overview: ``pieces.overview_data``).

    ``key``: ``ViewKey.text()``.  ``strategy`` / ``compare``: the strategies' names (``None``: none;
    the page finds their marks in the statuses it holds, by these names).  ``svg``: the cleaned
    drawing ("" when it failed: ``error`` says why, with what to do).  ``boxes``: the drawn boxes'
    records (``Group.record``: id, key, label, kind, side, members); ``expanded``: the boxes open.
    ``differences``: the differences-only drawing of a compare.  ``overlay``: drawn without any
    strategy's marks (the report's shared joint layout): the page draws them from the statuses.
    ``saved``: the "saved tensors" panel's data by strategy name (``panels.saved_data``): the view's
    strategy, or on the report's shared layout every strategy it overlays.
    """

    key: str
    view: str
    strategy: str | None
    compare: str | None
    svg: str = ""
    caption: str = ""
    boxes: list[dict[str, Any]] = field(default_factory=list)
    expanded: list[str] = field(default_factory=list)
    differences: bool = False
    overlay: bool = False
    error: str = ""
    saved: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def head(cls, key: ViewKey) -> ViewPayload:
        """The fields ``key`` decides, nothing drawn yet: the one place a payload's head is made
        (:func:`view_payload` fills in the drawing; a view the report leaves out, its ``error``)."""
        return cls(key=key.text(), view=key.view, strategy=key.strategy.name if key.strategy else None,
                   compare=key.compare.name if key.compare and key.view == "compare" else None,
                   expanded=list(key.expand), differences=key.differences, overlay=key.strategy is None)

    def to_json(self) -> dict[str, Any]:
        """The payload as page data (``render.embed.page_data``: strict JSON values)."""
        data: dict[str, Any] = page_data(dataclasses.asdict(self))
        return data


def _check_view(tr: Trace, key: ViewKey) -> None:
    """Refuse a view that cannot be drawn, with what to do instead (partitions cached on the Trace)."""
    if key.view not in VIEWS:
        raise InputError(f"unknown view {key.view!r}", f"use one of {', '.join(VIEWS)}")
    if key.strategy is None:
        if key.view not in ("joint", "compare") or key.differences:
            raise InputError(f"the {key.view} view needs a strategy", "pass strategy='default'")
        return
    p = tr.partition(key.strategy)
    q = tr.partition(key.compare) if key.view == "compare" and key.compare else None
    if p.error:
        raise InputError(f"strategy {p.label!r} failed: {p.error}", "pick another strategy")
    if q is not None and q.error:
        raise InputError(f"strategy {q.label!r} failed: {q.error}", "pick another strategy")
    if key.view in ("forward", "backward") and (p.forward is None or p.backward is None):
        raise InputError(f"{p.label} has no {key.view} graph to draw: it is measured, not partitioned",
                         "look at the joint view, which marks what it saves")
    if key.differences and q is None:
        raise InputError("differences only needs the compare view and a strategy to compare with",
                         "pick the compare view and a 'compare with' strategy")


def view_payload(tr: Trace, key: ViewKey, timeout: float | None = None) -> ViewPayload:
    """Partition (cached on the Trace), draw and lay out the view ``key`` names: the one builder of
    a :class:`ViewPayload`.  A view that cannot be drawn (or a bug) comes back with ``error`` set
    and no SVG, so one view's failure never sinks the page that shows the others."""
    head = ViewPayload.head(key)
    try:
        _check_view(tr, key)
        drawing = tr.draw("joint" if key.view == "compare" else key.view, strategy=key.strategy,
                          compare=key.compare if key.view == "compare" else None, group=key.group,
                          depth=key.depth, expand=list(key.expand), timeout=timeout, differences=key.differences)
        saved = {key.strategy.name: saved_data(tr, key.strategy)} if key.strategy is not None else {}
        return dataclasses.replace(head, svg=clean_svg(drawing.svg()), caption=drawing.caption, boxes=drawing.boxes,
                                   saved=saved)
    except FxvizError as exc:
        return dataclasses.replace(head, error=f"{exc.message}\nWhat to do: {exc.hint}" if exc.hint else exc.message)
    except Exception as exc:  # a bug: said in the pane, not a traceback that loses every other view
        return dataclasses.replace(head, error=f"fxviz could not draw this view: {type(exc).__name__}: {exc}")


def openable_boxes(tr: Trace, view: str, strategy: StrategyLike = "default", group: str | None = None) -> set[str]:
    """The names the ``expand`` of ``view`` takes (module paths, function boxes, the bookkeeping
    box), empty where that view draws no boxes: what a front-end may keep open across views."""
    from fxviz.render.graph.views import openable

    side = view if view in ("forward", "backward") else "joint"
    p = tr.partition(strategy) if side != "joint" else None
    if p is not None and p.error:
        return set()
    return openable(tr.graph, side, p, group)


