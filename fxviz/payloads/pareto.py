"""The plain run's budget curve with the other runs on it (issue 34): the points a budget sweep's
Pareto plot adds for logged runs of the same model (what each run saved and recomputed, read from
its log: strategy ``logged``) and for an advice's options (their predictions), and the report's
plot of them (``pareto_data``).  Floor 5: it reads ``Run``s and ``Trace``s; the plots (render)
take the frame it makes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ..errors import InputError

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from ..analysis.advice import Advice
    from ..facade import Trace

__all__ = ["POINT_COLUMNS", "budget_points", "pareto_data"]

POINT_COLUMNS: list[str] = ["tag", "label", "kind", "saved_activation_bytes", "recompute_flops", "recompute_bytes",
                            "graphs", "meets"]
"""One row per point: ``tag`` (``L1``, ``A2``: what the plot writes beside the marker), ``label``
(the run's name or the option's), ``kind`` (``logged`` / ``advice`` / ``bound``), the step's saved
activation bytes and recompute cost, how many graphs it sums, whether an option meets its target."""

RunsLike = Mapping[str, Any] | Iterable[Any]


def _named_runs(runs: RunsLike | None) -> list[tuple[str, Any]]:
    from ..logs.run import Run

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


def budget_points(runs: RunsLike | None = None, advice: Advice | None = None, *, rank: int | None = None
                  ) -> pd.DataFrame:
    """The points to put on a budget sweep's Pareto plot (``MemorySweep.pareto_plot(points=...)``):
    each logged run's whole step on ``rank`` (default: rank 0, or the first rank with a backward):
    the sum over its graphs with a backward of what the run's own partition saved and recomputed
    (``Run.traces()``, each graph's ``memory_table(["logged"])`` row); and each option of
    ``advice`` (and its bound) at its predicted ``saved_bytes`` and ``recompute_flops`` /
    ``recompute_bytes``.  ``runs``: a ``Run``, a list, or ``{label: run}`` (default labels: the log
    directories' names)."""
    import pandas as pd

    rows: list[dict[str, Any]] = []
    for k, (name, run) in enumerate(_named_runs(runs), start=1):
        traces = [t for t in run.traces(rank) if t.has_backward]
        if not traces:
            raise InputError(f"runs: {name} logged no graph with a backward", "pass a run of a training step")
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
                         "saved_activation_bytes": o.saved_bytes, "recompute_flops": o.recompute_flops,
                         "recompute_bytes": o.recompute_bytes, "graphs": len(o.peak.pieces) // 2,
                         "meets": o.meets})
    df = pd.DataFrame(rows, columns=POINT_COLUMNS)
    for c in ("saved_activation_bytes", "recompute_flops", "recompute_bytes", "graphs"):
        df[c] = df[c].astype("Int64")
    target = f" (target: {advice.target.label(advice.plain.saved_bytes)})" if advice is not None else ""
    df.attrs["caption"] = (
        "Logged runs (L): the whole step of each run, the sum over its graphs with a backward of what the run's "
        f"own partition saved and recomputed (strategy logged, read from its log). Advice (A): each option's "
        f"prediction, fxviz's trace of the changed model{target}.")
    return df


def pareto_data(tr: Trace, runs: RunsLike | None = None, advice: Advice | None = None) -> dict[str, Any] | None:
    """The report's budget curve (``{"svg", "caption"}``): ``tr.memory_sweep()`` with the points of
    ``runs`` and ``advice`` (``budget_points``); None when neither is given or the trace has no backward."""
    from ..render.embed import clean_svg
    from ..render.pareto_svg import pareto_svg

    if (runs is None and advice is None) or not tr.has_backward:
        return None
    sweep = tr.memory_sweep(progress=False)
    points = budget_points(runs, advice)
    caption = ("The plain run's budget curve: min-cut under activation_memory_budget 0 to 1 on this graph "
               "(dots; the line: the Pareto front; labels: budgets). " + points.attrs["caption"])
    return {"svg": clean_svg(pareto_svg(sweep, points)), "caption": caption}
