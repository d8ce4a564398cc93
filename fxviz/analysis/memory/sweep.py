"""The memory / recompute trade-off: min-cut under activation-memory budgets from 0 to 1.

Each budget is one ``budget:B:solver`` partition (cached on the ``Trace``).  Budgets that give the
same partition (same saved values, same recomputed ops) collapse into one row listing them all.
With ``optimal=True`` the sweep also holds the exact optimum at each budget (``optimal:B``, the
MILP of ``optimal.py``: the frontier no partition can beat) and torch's ``default`` and ``min_cut``
points, so every torch strategy is seen against the frontier.
torch's budget is a fraction of min-cut's activation memory *as torch estimates it* (per-value
``numel * itemsize``), so saved bytes are monotone in the budget only as far as that estimate and
the solver are: rows where the exact, storage-aware bytes go down as the budget goes up are
flagged (``monotone`` False) and listed in ``df.attrs["non_monotone"]``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import caption
from fxviz.analysis.memory.program import RowPeaks, compiles
from fxviz.analysis.memory.storage import has_symbolic_sizes
from fxviz.analysis.memory.table import memory_row
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.units import exact_size
from fxviz.sources.graphs import JointGraph

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["DEFAULT_BUDGETS", "SWEEP_COLUMNS", "memory_sweep", "pareto_mask"]

DEFAULT_BUDGETS: tuple[float, ...] = tuple(round(i / 10, 2) for i in range(11))

SWEEP_COLUMNS: list[str] = [
    "strategy", "kind", "budget", "budgets", "solver", "status", "saved_tensors", "saved_activation_bytes",
    "saved_param_bytes",
    "recomputed_ops", "recomputed_random_ops", "recompute_flops", "recompute_bytes", "backward_peak_bytes",
    "unfused_backward_peak_bytes", "torch_estimate_bytes", "monotone", "pareto", "error",
]
_INT = ["saved_tensors", "saved_activation_bytes", "saved_param_bytes", "recomputed_ops", "recomputed_random_ops",
        "recompute_flops", "recompute_bytes", "backward_peak_bytes", "unfused_backward_peak_bytes",
        "torch_estimate_bytes"]


def _signature(p: Partition) -> tuple[Any, ...]:
    return (p.error, tuple(p.saved), frozenset(p.recomputed))


def _row(graph: JointGraph, p: Partition, get_peaks: Callable[[Strategy], RowPeaks] | None) -> dict[str, Any]:
    peaks = get_peaks(p.strategy) if get_peaks is not None and compiles(graph) and p.error is None else None
    return memory_row(graph, p, peaks).values


def pareto_mask(points: Sequence[Sequence[float]]) -> list[bool]:
    """True for each point no other point dominates (no worse in every coordinate, better in one).
    Points are (saved activation bytes, recompute FLOPs, recompute bytes): FLOPs alone count
    pointwise recomputation as free, so the bytes it moves break the tie."""
    out = []
    for i, p in enumerate(points):
        dominated = any(all(b <= a for a, b in zip(p, q)) and any(b < a for a, b in zip(p, q))
                        for j, q in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def memory_sweep(graph: JointGraph, get_partition: Callable[[str], Partition],
                 budgets: Iterable[float] | None = None, solver: str | Sequence[str] = "dp",
                 progress: Callable[[Iterable[float]], Iterable[float]] | None = None,
                 optimal: bool = False, get_peaks: Callable[[Strategy], RowPeaks] | None = None) -> pd.DataFrame:
    """One row per distinct partition over ``budgets`` (default 0, 0.1, ..., 1).

    ``backward_peak_bytes``: the program's the step runs (``program``): under ``aot_eager`` the
    unfused walk; under inductor its code's, lowered once per distinct partition only where
    ``get_peaks`` is given (a sweep of eleven budgets lowering each would cost minutes), else empty;
    ``unfused_backward_peak_bytes``: the walk, every row.

    ``get_partition`` is ``Trace.partition``; ``progress`` may wrap the budget loop (the facade
    passes a tqdm bar for long sweeps: the analysis layer itself never prints).  ``solver``: one
    knapsack solver or several.  ``optimal``: add the exact optimum at every budget and torch's
    ``default`` and ``min_cut`` points.  ``pareto``: no other row saves no more activation bytes,
    recomputes no more FLOPs and moves no more bytes, one of them strictly less; rows equal in all
    three get the same flag.  Partitions that redraw random values in the backward (they do not
    compute the same gradients) and failed rows have none (``<NA>``).
    """
    import pandas as pd
    budgets = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
    solvers = [solver] if isinstance(solver, str) else list(solver)
    series: list[tuple[str, str | None, list[tuple[Any, str]]]] = []
    for each in solvers:
        series.append(("budget", each, [(b, f"budget:{b:g}:{each}") for b in budgets]))
    if optimal:
        series.append(("default", None, [(None, "default")]))
        series.append(("min_cut", None, [(None, "min_cut")]))
        series.append(("optimal", None, [(b, f"optimal:{b:g}") for b in budgets]))
    all_rows: list[dict[str, Any]] = []
    non_monotone: list[str] = []
    estimate_drops: list[str] = []
    for kind, sv, specs in series:
        groups: dict[tuple[Any, ...], dict[str, Any]] = {}
        wanted: list[Any] = [b for b, _ in specs]
        loop: Iterable[Any] = progress(wanted) if progress is not None and kind in ("budget", "optimal") else wanted
        by_budget = dict(specs)
        for b in loop:
            p = get_partition(by_budget[b])
            sig = _signature(p)
            if sig in groups:
                groups[sig]["budgets"].append(b)
                continue
            row = _row(graph, p, get_peaks)
            solution = getattr(p, "solution", None)
            groups[sig] = {**{c: row.get(c) for c in SWEEP_COLUMNS}, "strategy": p.name, "kind": kind, "budget": b,
                           "budgets": [b] if b is not None else [], "solver": sv,
                           "status": getattr(solution, "status", None)}
        rows = sorted(groups.values(), key=lambda r: (r["budget"] is None, r["budget"] or 0.0))
        previous: dict[str, Any] | None = None
        for r in rows:
            r["monotone"] = None
            if r["error"] is None and r["budget"] is not None:
                r["monotone"] = previous is None or r["saved_activation_bytes"] >= previous["saved_activation_bytes"]
                if not r["monotone"] and previous is not None:
                    non_monotone.append(f"{kind} {sv or ''} budget {previous['budget']:g} -> {r['budget']:g}: saved "
                                        f"activations {previous['saved_activation_bytes']} -> "
                                        f"{r['saved_activation_bytes']} bytes".replace("  ", " "))
                previous = r
        ok = [r for r in rows if r["error"] is None and r["budget"] is not None]
        if kind == "budget":
            estimate_drops += [f"budget {x['budget']:g} -> {y['budget']:g}" for x, y in zip(ok, ok[1:])
                               if y["torch_estimate_bytes"] < x["torch_estimate_bytes"]]
        all_rows += rows
    if optimal:  # the optimum at every torch point's bytes: the frontier is exact where torch lands
        have = {r["saved_activation_bytes"] for r in all_rows if r["kind"] == "optimal" and r["error"] is None}
        wanted_bytes = sorted({int(r["saved_activation_bytes"]) for r in all_rows if r["kind"] != "optimal"
                               and r["error"] is None and not r["recomputed_random_ops"]} - have)
        for nb in wanted_bytes:
            p = get_partition(f"optimal:{exact_size(nb)}")
            row = _row(graph, p, get_peaks)
            if row["error"] is None and row["saved_activation_bytes"] in have:
                continue  # the same optimum as a budget row
            solution = getattr(p, "solution", None)
            all_rows.append({**{c: row.get(c) for c in SWEEP_COLUMNS}, "strategy": p.name, "kind": "optimal",
                             "budget": None, "budgets": [], "solver": None, "monotone": None,
                             "status": getattr(solution, "status", None)})
            if row["error"] is None:
                have.add(row["saved_activation_bytes"])
    valid = [r for r in all_rows if r["error"] is None and not r["recomputed_random_ops"]]
    front = pareto_mask([(r["saved_activation_bytes"], r["recompute_flops"], r["recompute_bytes"]) for r in valid])
    for r in all_rows:  # a failed row or one that redraws random values is not ranked: no flag
        r["pareto"] = None
    for r, f in zip(valid, front):
        r["pareto"] = f
    df = pd.DataFrame(all_rows, columns=SWEEP_COLUMNS)
    for c in _INT:
        df[c] = df[c].astype("Int64")
    df["error"] = pd.Series([r.get("error") for r in all_rows], index=df.index, dtype="object")
    df["monotone"] = df["monotone"].astype("boolean")
    df["pareto"] = df["pareto"].astype("boolean")
    df.attrs["solver"] = ", ".join(solvers)
    df.attrs["optimal"] = optimal
    df.attrs["non_monotone"] = non_monotone
    df.attrs["non_monotone_torch_estimate"] = estimate_drops  # where torch's own measure drops
    redraw = [r["strategy"] for r in all_rows if r["error"] is None and r["recomputed_random_ops"]]
    df.attrs["caption"] = (
        f"min-cut under activation_memory_budget with the {', '.join(solvers)} solver(s); budgets giving identical "
        "partitions are collapsed into one row (budgets lists them). "
        + ("optimal rows: the exact optimum (MILP) with saved activation bytes at most B of the way from the least "
           "possible to min-cut's, and at the saved bytes of every torch point; no partition lies below them. "
           if optimal else "")
        + (("Not monotone: " + "; ".join(non_monotone) + ". ") if non_monotone else
           "Saved activation bytes never drop as the budget grows. ")
        + "pareto: no other row saves no more activation bytes, recomputes no more FLOPs and moves no more bytes "
          "(recompute_bytes: FLOPs count pointwise ops as free), one of them strictly less. "
        + (("Left out of the Pareto front, pareto empty (the backward redraws random values): " + ", ".join(redraw)
            + ". ") if redraw else "")
        + ("backward_peak_bytes: inductor's code for each distinct partition. " if get_peaks is not None and
           compiles(graph) else "backward_peak_bytes: not computed under inductor (Trace.memory_sweep(compiled=True) "
           "lowers each distinct partition); unfused_backward_peak_bytes: the unfused walk. " if compiles(graph)
           else "")
        + caption(graph, has_symbolic_sizes(graph.gm)))
    return df
