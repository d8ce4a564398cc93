"""One rendered view and its one builder: :class:`ViewPayload` (the shape both front ends read) made by
:func:`view_payload` from a ``DrawSpec`` (``fxviz.render.graph.spec``: everything that decides one
drawing, the cache key, and ``text()``, the key a page names a view by).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.strategies import StrategyLike
from fxviz.core.errors import FxvizError
from fxviz.payloads.panels import saved_data
from fxviz.render.graph.limits import PAGE_PANE
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.page.embed import clean_svg, page_data

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["ViewPayload", "view_payload", "openable_boxes", "opening_units"]


@dataclass(frozen=True)
class ViewPayload:
    """One rendered view: the one shape both front ends read.  The widget syncs it as one trait
    (``GraphPane.view_data``); the report embeds the same dicts (``data["views"]``, by ``key``);
    ``explorer.js`` reads its fields in ``showView``.  Built by :func:`view_payload` (from
    :meth:`head`; the whole-model overview: ``pieces.overview_data``).

    ``key``: ``DrawSpec.text()``.  ``strategy`` / ``compare``: the strategies' names (``None``: none;
    the page finds their marks in the statuses it holds, by these names).  ``svg``: the cleaned
    drawing ("" when it failed: ``error`` says why, with what to do).  ``boxes``: the drawn boxes'
    records (``Group.record``: id, key, label, kind, side, members); ``expanded``: the boxes open.
    ``differences``: the differences-only drawing of a compare.  ``overlay``: drawn without any
    strategy's marks (the report's shared joint layout): the page draws them from the statuses.
    ``saved``: the "saved tensors" panel's data by strategy name (``panels.saved_data``): the view's
    strategy, or on the report's shared layout every strategy it overlays.  ``opening``: the units the
    page opens on when the whole drawing is not readable fitted (:func:`opening_units`: the model's
    blocks), after any focus of its own (differences, search hits, the doctor's nodes).
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
    opening: list[str] = field(default_factory=list)

    @classmethod
    def head(cls, spec: DrawSpec) -> ViewPayload:
        """The fields ``spec`` decides, nothing drawn yet: the one place a payload's head is made
        (:func:`view_payload` fills in the drawing; a view the report leaves out, its ``error``)."""
        return cls(key=spec.text(), view=spec.view, strategy=spec.strategy.name if spec.strategy else None,
                   compare=spec.compare.name if spec.compare and spec.view == "compare" else None,
                   expanded=list(spec.expand), differences=spec.differences, overlay=spec.strategy is None)

    def to_json(self) -> dict[str, Any]:
        """The payload as page data (``render.embed.page_data``: strict JSON values)."""
        data: dict[str, Any] = page_data(dataclasses.asdict(self))
        return data


def view_payload(tr: Trace, spec: DrawSpec, timeout: float | None = None) -> ViewPayload:
    """Partition (cached on the Trace), draw and lay out the view ``spec`` names: the one builder of
    a :class:`ViewPayload`.  A view that cannot be drawn (or a bug) comes back with ``error`` set
    (what the drawing refused, with what to do) and no SVG, so one view's failure never sinks the
    page that shows the others."""
    head = ViewPayload.head(spec)
    try:  # a page opens the drawing fitted in its pane: an automatic collapse at a level readable there
        drawing = tr.draw(spec.replace(pane=PAGE_PANE) if timeout is None else spec.replace(timeout=timeout,
                                                                                             pane=PAGE_PANE))
        saved = {spec.strategy.name: saved_data(tr, spec.strategy)} if spec.strategy is not None else {}
        return dataclasses.replace(head, svg=clean_svg(drawing.svg()), caption=drawing.caption, boxes=drawing.boxes,
                                   saved=saved, opening=opening_units(drawing.boxes))
    except FxvizError as exc:
        return dataclasses.replace(head, error=f"{exc.message}\nWhat to do: {exc.hint}" if exc.hint else exc.message)
    except Exception as exc:  # a bug: said in the pane, not a traceback that loses every other view
        return dataclasses.replace(head, error=f"fxviz could not draw this view: {type(exc).__name__}: {exc}")


def opening_units(boxes: list[dict[str, Any]]) -> list[str]:
    """Where a page opens a collapsed drawing too big to read whole: the forward boxes of the model's
    repeated blocks (``model.layers.0``, ``model.layers.1``: a pattern letter), which the page centers
    at a readable zoom, the first ones on top, instead of the drawing's top left corner (a Hugging Face
    model's attention-mask functions); none where nothing repeats."""
    return [str(b["id"]) for b in boxes
            if b.get("pattern") and b.get("side") == "forward" and b.get("kind") == "module"]


def openable_boxes(tr: Trace, view: str, strategy: StrategyLike = "default", group: str | None = None) -> set[str]:
    """The names the ``expand`` of ``view`` takes (module paths, function boxes, the bookkeeping
    box), empty where that view draws no boxes: what a front-end may keep open across views."""
    from fxviz.render.graph.views import openable

    side = view if view in ("forward", "backward") else "joint"
    p = tr.partition(strategy) if side != "joint" else None
    if p is not None and p.error:
        return set()
    return openable(tr.graph, side, p, group)


