"""``fxviz.explore``'s door: which explorer a model, a ``Trace`` or a logged ``Run`` gets."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from fxviz.api.facade import Trace
from fxviz.api.run import Run
from fxviz.core.errors import InputError, close_matches
from fxviz.frontends.widgets.explorer import Explorer
from fxviz.frontends.widgets.run_explorer import RunExplorer
from fxviz.sources.model.inputs import TRACE_OPTIONS

__all__ = ["explore", "OPTIONS"]

OPTIONS: tuple[str, ...] = ("view", "strategy", "compare", "budget", "solver", "group", "depth", "expand",
                            "differences", "measure", "runs", "advice")
"""``fxviz.explore``'s own options (beside ``params``, ``loss_fn``, ``capture_route`` and, for a model,
``fxviz.trace``'s options); any other keyword given with a model is one of the model's inputs."""


def _split(model: Any, options: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``options`` as (the explorer's and ``fxviz.trace``'s, the model's keyword inputs): a keyword
    neither option is an input of the model (``input_ids=``, ``labels=``), unless it is so close to an
    option's name (``stratgy``) and so far from the model's inputs that it was surely that option."""
    try:
        takes = set(inspect.signature(model.forward if hasattr(model, "forward") else model).parameters)
    except (TypeError, ValueError):
        takes = set()
    own, keywords = {}, {}
    for k, v in options.items():
        if k in OPTIONS or k in TRACE_OPTIONS:
            own[k] = v
            continue
        guess = close_matches(k, OPTIONS + TRACE_OPTIONS)
        if guess and k not in takes and not close_matches(k, takes):
            raise InputError(f"{k!r} is neither an option of fxviz.explore nor an input of the model",
                             f"did you mean {guess[0]}=...? (the options: {', '.join(OPTIONS)})")
        keywords[k] = v
    return own, keywords


def _refuse_unknown(options: dict[str, Any]) -> None:
    """A keyword that is no option of ``fxviz.explore(trace)``, said with the option it resembles."""
    for k in options:
        if k not in OPTIONS:
            guess = close_matches(k, OPTIONS)
            raise InputError(f"fxviz.explore has no option {k!r}",
                             (f"did you mean {guess[0]}=...? " if guess else "") + f"the options: {', '.join(OPTIONS)}"
                             " (a trace's inputs are fixed: trace again with fxviz.trace(model, ...) to change them)")


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
    keywords: dict[str, Any] = {}
    if isinstance(model_or_trace, Trace):
        _refuse_unknown(options)
    elif not isinstance(model_or_trace, Run):
        options, keywords = _split(model_or_trace, options)
    measure = options.pop("measure", False)
    curve = {k: options.pop(k) for k in ("runs", "advice") if options.get(k) is not None}
    if isinstance(model_or_trace, Run):
        return _run_explorer(model_or_trace, options, measure, curve)
    if isinstance(model_or_trace, (tuple, list)):
        raise InputError(f"fxviz.explore got a {type(model_or_trace).__name__} where the model goes",
                         "unpack it: model, inputs = examples.alexnet(); fxviz.explore(model, *inputs)")
    if isinstance(model_or_trace, Trace):
        if inputs:
            raise InputError("fxviz.explore(trace) takes no example inputs: the trace has them",
                             "call fxviz.explore(tr) or fxviz.explore(model, x)")
        ex = Explorer(model_or_trace, **options)
    else:
        traced = {k: options.pop(k) for k in TRACE_OPTIONS if k in options}
        if keywords:  # the model's keyword inputs, as fxviz.trace takes them (inputs= wins no clash: both refused)
            traced["inputs"] = {**traced.get("inputs", {}), **keywords}
        ex = Explorer(model=model_or_trace, inputs=inputs, params=params,
                      trace_kwargs={"loss_fn": loss_fn, "capture_route": capture_route, **traced}, **options)
    if measure is not False:
        ex.show_measured(measure)
    if curve:
        ex.show_budget_curve(**curve)
    return ex


def _run_explorer(run: Run, options: dict[str, Any], measure: Any, curve: dict[str, Any]) -> RunExplorer:
    """A logged run's explorer; what only a model's trace has (its real step, its budget curve) refused."""
    if curve:
        raise InputError("runs= and advice= go on the budget curve of a model's trace, not of a logged run",
                         "explore the plain trace: fxviz.explore(tr, runs=[run], advice=tr.advise(...))")
    if measure is not False:
        raise InputError("measure runs the model's compiled training step, and a log of a run has no model",
                         "explore the model itself: fxviz.explore(model, x, measure=True)")
    return RunExplorer(run, **options)
