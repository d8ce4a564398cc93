"""The notebook explorer (``fxviz.explore``).  ipywidgets and anywidget are imported only when
an explorer is made, so ``import fxviz`` works without the notebook extra."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from .explorer import Explorer

__all__ = ["explore"]


def explore(model_or_trace: Any, *inputs: Any, params: str = "lifted", loss_fn: Callable | None = None,
            capture_route: str = "auto", **options: Any) -> Explorer:
    """The notebook explorer of a model (traced with ``inputs``), of a ``Trace``, or of a logged
    ``Run`` (then with a rank and a graph selector; ``rank=``, ``compile_id=`` choose the first): controls for
    view, strategy, compare-with, memory budget, grouping, search and parameter capture mode
    around a zoomable graph, node details, the memory table, the doctor's findings and the
    legend.  See :func:`fxviz.widgets.explorer.explore` for the options."""
    from .explorer import explore as _explore

    return _explore(model_or_trace, *inputs, params=params, loss_fn=loss_fn, capture_route=capture_route,
                    **options)
