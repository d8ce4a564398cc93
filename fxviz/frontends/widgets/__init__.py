"""The notebook explorer (``fxviz.explore``).  ipywidgets and anywidget are imported only when
an explorer is made, so ``import fxviz`` works without the notebook extra.

One module per job: ``pane`` (the front-end half's traits), ``controls`` (the ipywidgets),
``strategy_map`` (strategies and the controls, both ways), ``boxes`` (the boxes opened),
``table_fill`` (the memory table, filled after the first picture), ``explorer`` (``Explorer``),
``run_explorer`` (a logged run's), ``switch`` (which explorer), ``diff_panel``, ``tracing_note``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from fxviz.core.errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.frontends.widgets.explorer import Explorer
    from fxviz.frontends.widgets.run_explorer import RunExplorer

__all__ = ["explore"]

_NOTEBOOK_EXTRA = ("anywidget", "ipywidgets", "traitlets")


def explore(model_or_trace: Any, *inputs: Any, params: str = "lifted", loss_fn: Callable | None = None,
            capture_route: str = "auto", **options: Any) -> Explorer | RunExplorer:
    """The notebook explorer of a model (traced with ``inputs``), of a ``Trace``, or of a logged
    ``Run`` (then with a rank and a graph selector; ``rank=``, ``compile_id=`` choose the first): controls for
    view, strategy, compare-with, memory budget, grouping, search and parameter capture mode
    around a zoomable graph, node details, the memory table, the doctor's findings and the
    legend.  See :func:`fxviz.frontends.widgets.switch.explore` for the options."""
    try:
        from fxviz.frontends.widgets.switch import explore as _explore
    except ImportError as exc:  # pragma: no cover - exercised only without the notebook extra
        if exc.name not in _NOTEBOOK_EXTRA:
            raise
        raise InputError("the explorer needs ipywidgets and anywidget",
                         "pip install 'fxviz[notebook]' (or: pip install ipywidgets anywidget)") from exc
    return _explore(model_or_trace, *inputs, params=params, loss_fn=loss_fn, capture_route=capture_route,
                    **options)
