"""``fxviz.explore``'s door: which explorer a model, a ``Trace`` or a logged ``Run`` gets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fxviz.api.facade import Trace
from fxviz.api.run import Run
from fxviz.core.errors import InputError
from fxviz.frontends.widgets.explorer import Explorer
from fxviz.frontends.widgets.run_explorer import RunExplorer

__all__ = ["explore"]


def explore(model_or_trace: Any, *inputs: Any, params: str = "lifted", loss_fn: Callable | None = None,
            capture_route: str = "auto", **options: Any) -> Explorer | RunExplorer:
    """The notebook explorer of a model (traced here, with ``inputs``), of a ``Trace``, or of a
    logged ``Run`` (a rank and a graph selector above it; ``rank=``, ``compile_id=`` pick the first).

    ``options``: ``view`` (joint, forward, backward, compare), ``strategy`` and ``compare``
    (default_partition, min_cut, budget or ``budget:B[:solver]``, recompute_all, eager, ``optimal:B``, and a
    log's ``logged``), ``budget``, ``solver``, ``group`` (module, none), ``depth`` and ``expand``
    (boxes open from the start, as ``Trace.draw(expand=...)`` names them; a double click opens
    more), ``differences`` (the compare view shows only the nodes its two strategies treat
    differently, as its toggle does).  Given a model, the explorer can also switch between
    parameters lifted and captured as constants.  ``measure``: True runs the real compiled step
    (``Trace.measure()``; it compiles, so it is asked for) or a ``Measured`` already made, shown
    beside the estimates (``Explorer.show_measured``).  ``runs`` (logged runs of the same model) and
    ``advice`` (``tr.advise(...)``): the budget curve with them on it, below the graph
    (``Explorer.show_budget_curve``).
    """
    measure = options.pop("measure", False)
    curve = {k: options.pop(k) for k in ("runs", "advice") if options.get(k) is not None}
    if isinstance(model_or_trace, Run):
        if curve:
            raise InputError("runs= and advice= go on the budget curve of a model's trace, not of a logged run",
                             "explore the plain trace: fxviz.explore(tr, runs=[run], advice=tr.advise(...))")
        if measure is not False:
            raise InputError("measure runs the model's compiled training step, and a log of a run has no model",
                             "explore the model itself: fxviz.explore(model, x, measure=True)")
        return RunExplorer(model_or_trace, **options)
    if isinstance(model_or_trace, (tuple, list)):
        raise InputError(f"fxviz.explore got a {type(model_or_trace).__name__} where the model goes",
                         "unpack it: model, inputs = examples.alexnet(); fxviz.explore(model, *inputs)")
    if isinstance(model_or_trace, Trace):
        if inputs:
            raise InputError("fxviz.explore(trace) takes no example inputs: the trace has them",
                             "call fxviz.explore(tr) or fxviz.explore(model, x)")
        ex = Explorer(model_or_trace, **options)
    else:
        ex = Explorer(model=model_or_trace, inputs=inputs, params=params,
                      trace_kwargs={"loss_fn": loss_fn, "capture_route": capture_route}, **options)
    if measure is not False:
        ex.show_measured(measure)
    if curve:
        ex.show_budget_curve(**curve)
    return ex
