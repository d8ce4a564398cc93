"""The plain run's budget curve with the other runs on it (issue 34): the points a budget sweep's
Pareto plot adds for logged runs of the same model (what each run saved and recomputed, read from
its log: strategy ``logged``) and for an advice's options (their predictions), and the report's
plot of them (``pareto_data``).  Floor 5: it reads ``Run``s and ``Trace``s; the plots (render)
take the frame it makes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from fxviz.api.run import Run
from fxviz.core.errors import InputError
from fxviz.render.page.embed import clean_svg

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.api.advice.options import Advice
    from fxviz.api.facade import Trace

__all__ = ["POINT_COLUMNS", "budget_points", "pareto_data"]

POINT_COLUMNS: list[str] = ["tag", "label", "kind", "saved_activation_bytes", "recompute_flops", "recompute_bytes",
                            "graphs", "meets"]
"""One row per point: ``tag`` (``L1``, ``A2``: what the plot writes beside the marker), ``label``
(the run's name or the option's), ``kind`` (``logged`` / ``advice`` / ``bound``), the step's saved
activation bytes and recompute cost, how many graphs it sums, whether an option meets its target."""

RunsLike = Mapping[str, Any] | Iterable[Any]


def _named_runs(runs: RunsLike | None) -> list[tuple[str, Any]]:

    if runs is None:
        return []
    items = list(runs.items()) if isinstance(runs, Mapping) else [(None, r) for r in ([runs] if isinstance(
        runs, Run) else runs)]
    out = []
    for name, run in items:
        if not isinstance(run, Run):
            raise InputError(f"runs: {type(run).__name__} is not a logged run",
                             "pass fxviz.load_logs(DIR) results, a list or a {name: run} dict")
        out.append((str(name) if name is not None else run.path.name, run))
    return out


def budget_points(runs: RunsLike | None = None, advice: Advice | None = None, *, rank: int | None = None,
                  graph: int | None = 0) -> pd.DataFrame:
    """The points to put on a budget sweep's Pareto plot (``MemorySweep.pareto_plot(points=...)``):
    for each logged run on ``rank`` (default: rank 0, or the first rank with a backward), what the
    run's own partition saved and recomputed (``Run.traces()``, a graph's ``memory_table(["logged"])``
    row); for each option of ``advice`` (and its bound), its prediction.  ``graph``: which graph with a
    backward, 0-based in run order, as the sweep is of one graph (``tr.memory_sweep()`` is of the
    trace's first: 0, the default); None: the whole step, every graph summed (the options'
    ``saved_bytes``, ``recompute_flops``, ``recompute_bytes``).  ``runs``: a ``Run``, a list, or
    ``{label: run}`` (default labels: the log directories' names)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for k, (name, run) in enumerate(_named_runs(runs), start=1):
        traces = [t for t in run.traces(rank) if t.graph.has_backward]
        if not traces:
            raise InputError(f"runs: {name} logged no graph with a backward", "pass a run of a training step")
        if graph is not None:
            if graph >= len(traces):
                raise InputError(f"runs: {name} has {len(traces)} graph(s) with a backward, no graph {graph}",
                                 "pass graph=None for the whole step, or a graph the run has (0-based)")
            traces = [traces[graph]]
        tables = [t.memory_table(["logged"]).iloc[0] for t in traces]
        bad = [str(r["error"]) for r in tables if isinstance(r.get("error"), str)]
        if bad:
            raise InputError(f"runs: {name}: the run's own partition cannot be read ({bad[0]})",
                             "pass a log that holds the forward and backward graphs")
        rows.append({"tag": f"L{k}", "label": name, "kind": "logged",
                     **{c: sum(int(r[c]) for r in tables) for c in
                        ("saved_activation_bytes", "recompute_flops", "recompute_bytes")},
                     "graphs": len(tables), "meets": None})
    if advice is not None:
        shown = [*advice.options, *([advice.bound] if advice.bound is not None else [])]
        for k, o in enumerate(shown, start=1):
            rows.append({"tag": f"A{k}", "label": o.name, "kind": "bound" if o.bound else "advice",
                         **_option_point(o, graph), "meets": o.meets})
    df = pd.DataFrame(rows, columns=POINT_COLUMNS)
    df.attrs["graph"] = graph
    for c in ("saved_activation_bytes", "recompute_flops", "recompute_bytes", "graphs"):
        df[c] = df[c].astype("Int64")
    target = f" (target: {advice.target.label(advice.plain.saved_bytes)})" if advice is not None else ""
    where = ("the whole step, every graph with a backward summed" if graph is None
             else f"graph {graph + 1} with a backward (in run order)")
    df.attrs["caption"] = (
        f"Logged runs (L): what each run's own partition saved and recomputed, {where} (strategy logged, read "
        f"from its log). Advice (A): each option's prediction, fxviz's trace of the changed model{target}, "
        f"{where}.")
    return df


def _option_point(o: Any, graph: int | None) -> dict[str, int]:
    """An option's coordinates: its whole step (``graph`` None) or one graph's piece of its peak."""
    if graph is None:
        return {"saved_activation_bytes": o.saved_bytes, "recompute_flops": o.recompute_flops,
                "recompute_bytes": o.recompute_bytes, "graphs": len({pk.piece for pk in o.peak.pieces})}
    order = sorted({pk.piece for pk in o.peak.pieces})
    if graph >= len(order):
        raise InputError(f"advice: its step has {len(order)} graph(s) with a backward, no graph {graph}",
                         "pass graph=None for the whole step, or a graph it has (0-based)")
    pk = next(pk for pk in o.peak.pieces if pk.piece == order[graph])
    return {"saved_activation_bytes": pk.saved_bytes, "recompute_flops": pk.recompute_flops,
            "recompute_bytes": pk.recompute_bytes, "graphs": 1}


def pareto_data(tr: Trace, runs: RunsLike | None = None, advice: Advice | None = None) -> dict[str, Any] | None:
    """The report's budget curve (``{"svg", "caption"}``): ``tr.memory_sweep()`` with the points of
    ``runs`` and ``advice`` (``budget_points``); None when neither is given or the trace has no backward."""
    from fxviz.render.charts.pareto_svg import pareto_svg

    if (runs is None and advice is None) or not tr.graph.has_backward:
        return None
    sweep = tr.memory_sweep(progress=False)
    shown = [p for p in tr.pieces if p.graph.has_backward]
    points = budget_points(runs, advice, graph=shown.index(tr) if tr in shown else 0)
    which = f" (graph {tr.graph.index + 1} of {len(shown)}: every point is of that graph)" if len(shown) > 1 else ""
    caption = ("The plain run's budget curve: min-cut under activation_memory_budget 0 to 1 on this graph"
               f"{which} (dots; the line: the Pareto front; labels: budgets). " + points.attrs["caption"])
    return {"svg": clean_svg(pareto_svg(sweep, points)), "caption": caption}
