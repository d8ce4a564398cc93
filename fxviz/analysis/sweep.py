"""The memory / recompute trade-off: min-cut under activation-memory budgets from 0 to 1.

Each budget is one ``budget:B:solver`` partition (cached on the ``Trace``).  Budgets that give the
same partition (same saved values, same recomputed ops) collapse into one row listing them all.
torch's budget is a fraction of min-cut's activation memory *as torch estimates it* (per-value
``numel * itemsize``), so saved bytes are monotone in the budget only as far as that estimate and
the solver are: rows where the exact, storage-aware bytes go down as the budget goes up are
flagged (``monotone`` False) and listed in ``df.attrs["non_monotone"]``.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

import pandas as pd

from ..capture import JointGraph
from .memory import caption, has_symbolic_sizes, memory_row
from .partition import Partition

__all__ = ["DEFAULT_BUDGETS", "SWEEP_COLUMNS", "memory_sweep", "pareto_mask"]

DEFAULT_BUDGETS: tuple[float, ...] = tuple(round(i / 10, 2) for i in range(11))

SWEEP_COLUMNS: list[str] = [
    "budget", "budgets", "solver", "saved_tensors", "saved_activation_bytes", "saved_param_bytes",
    "recomputed_ops", "recomputed_random_ops", "recompute_flops", "recompute_bytes", "backward_peak_bytes",
    "torch_estimate_bytes", "monotone", "pareto", "error",
]
_INT = ["saved_tensors", "saved_activation_bytes", "saved_param_bytes", "recomputed_ops", "recomputed_random_ops",
        "recompute_flops", "recompute_bytes", "backward_peak_bytes", "torch_estimate_bytes"]


def _signature(p: Partition) -> tuple[Any, ...]:
    return (p.error, tuple(p.saved), frozenset(p.recomputed))


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
                 budgets: Iterable[float] | None = None, solver: str = "dp",
                 progress: Callable[[Iterable[float]], Iterable[float]] | None = None) -> pd.DataFrame:
    """One row per distinct partition over ``budgets`` (default 0, 0.1, ..., 1).

    ``get_partition`` is ``Trace.partition``; ``progress`` may wrap the budget loop (the facade
    passes a tqdm bar for long sweeps: the analysis layer itself never prints).
    """
    budgets = sorted({float(b) for b in (DEFAULT_BUDGETS if budgets is None else budgets)})
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for b in (progress(budgets) if progress is not None else budgets):
        p = get_partition(f"budget:{b:g}:{solver}")
        sig = _signature(p)
        if sig in groups:
            groups[sig]["budgets"].append(b)
            continue
        row = memory_row(graph, p).values
        groups[sig] = {**{c: row.get(c) for c in SWEEP_COLUMNS}, "budget": b, "budgets": [b], "solver": solver}
    rows = sorted(groups.values(), key=lambda r: r["budget"])
    previous: dict[str, Any] | None = None
    non_monotone = []
    for r in rows:
        r["monotone"] = None
        if r["error"] is None:
            r["monotone"] = previous is None or r["saved_activation_bytes"] >= previous["saved_activation_bytes"]
            if previous is not None and not r["monotone"]:
                non_monotone.append(f"budget {previous['budget']:g} -> {r['budget']:g}: saved activations "
                                    f"{previous['saved_activation_bytes']} -> {r['saved_activation_bytes']} bytes")
            previous = r
    ok = [r for r in rows if r["error"] is None]
    estimate_drops = [f"budget {x['budget']:g} -> {y['budget']:g}" for x, y in zip(ok, ok[1:])
                      if y["torch_estimate_bytes"] < x["torch_estimate_bytes"]]
    front = pareto_mask([(r["saved_activation_bytes"], r["recompute_flops"], r["recompute_bytes"]) for r in ok])
    for r, f in zip(ok, front):
        r["pareto"] = f
    df = pd.DataFrame(rows, columns=SWEEP_COLUMNS)
    for c in _INT:
        df[c] = df[c].astype("Int64")
    df["error"] = pd.Series([r.get("error") for r in rows], index=df.index, dtype="object")
    df["monotone"] = df["monotone"].astype("boolean")
    df["pareto"] = df["pareto"].astype("boolean")
    df.attrs["solver"] = solver
    df.attrs["non_monotone"] = non_monotone
    df.attrs["non_monotone_torch_estimate"] = estimate_drops  # where torch's own measure drops
    df.attrs["caption"] = (
        f"min-cut under activation_memory_budget with the {solver} solver; budgets giving identical "
        "partitions are collapsed into one row (budgets lists them). "
        + (("Not monotone: " + "; ".join(non_monotone) + ". ") if non_monotone else
           "Saved activation bytes never drop as the budget grows. ")
        + caption(graph, has_symbolic_sizes(graph.gm)))
    return df
