"""The memory table: one row per strategy of a graph's exact memory facts (``storage``), and the caption
that says how the partitioners were called and the bytes counted."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import COLUMNS, caption, table_frame
from fxviz.analysis.memory.program import RowPeaks, compiles
from fxviz.analysis.memory.storage import (
    elsewhere,
    has_symbolic_sizes,
    offloads,
    peak_bytes,
    recompute_cost,
    saved_memory,
    storage_owners,
)
from fxviz.analysis.strategy.optimal import gaps_to_optimal
from fxviz.analysis.strategy.partition import Partition
from fxviz.analysis.strategy.strategies import Strategy, parse_list
from fxviz.core.errors import StrategyError
from fxviz.core.graph_facts import Storages, graph_flops, graph_op_count
from fxviz.sources.graphs import JointGraph

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["MemoryRow", "memory_row", "offload_notes", "memory_table"]

# --- one row, the table --------------------------------------------------------------------------
@dataclass
class MemoryRow:
    values: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _error_row(strategy: str, reason: str) -> MemoryRow:
    values: dict[str, Any] = {c: None for c in COLUMNS}
    values.update(strategy=strategy, error=reason)
    return MemoryRow(values)


def memory_row(graph: JointGraph, p: Partition, peaks: RowPeaks | None = None) -> MemoryRow:
    """Every column of the memory table for one partition (an error row if ``p`` failed).  ``peaks``:
    its compiled code's peaks where the step runs inductor's code (``program.row_peaks``); without
    them such a row's program peaks are empty (not computed), its unfused walk is there."""
    if p.error is not None:
        return _error_row(p.name, p.error)
    storages = Storages(graph.gm, p.forward, p.backward)
    resident = {k: storages.nbytes(k) for k in storage_owners(graph, storages)}
    measurement = p.measurement
    if measurement is not None:  # the eager row: measured on real tensors, no graphs to walk
        values: dict[str, Any] = {c: None for c in COLUMNS}
        values.update(
            strategy=p.name, saved_tensors=measurement.saved_tensors, saved_storages=measurement.storages,
            saved_activation_bytes=measurement.activation_bytes, saved_param_bytes=measurement.param_bytes,
            saved_input_bytes=measurement.input_bytes, recomputed_ops=measurement.recomputed_ops,
            recomputed_random_ops=None, recompute_flops=measurement.recompute_flops,
            recompute_bytes=measurement.recompute_bytes,
            forward_graph_ops=measurement.forward_aten_ops, resident_bytes=sum(resident.values()),
            torch_estimate_bytes=measurement.estimate_bytes, seconds=p.seconds)
        return MemoryRow(values, list(measurement.notes))
    if p.forward is None or p.backward is None:
        return _error_row(p.name, "the partition has no forward/backward graphs to measure")
    saved = saved_memory(p, graph, storages)
    away = elsewhere(p, storages)
    flops, traffic = recompute_cost(p)
    random = sorted(p.recomputed_random)
    values = {
        "strategy": p.name,
        "saved_tensors": saved.tensors,
        "saved_symints": saved.symints,
        "saved_storages": len(saved.storages),
        "saved_activation_bytes": saved.activation_bytes,
        "saved_param_bytes": saved.param_bytes,
        "saved_input_bytes": saved.input_bytes,
        "offloaded_bytes": saved.offloaded_bytes,
        "recomputed_ops": len(p.recomputed),
        "recomputed_random_ops": len(random),
        "recompute_flops": flops,
        "recompute_bytes": traffic,
        "forward_graph_ops": graph_op_count(p.forward),
        "backward_graph_ops": graph_op_count(p.backward),
        "forward_flops": graph_flops(p.forward),
        "unfused_forward_peak_bytes": peak_bytes(p.forward, storages, resident, inputs_live_throughout=True,
                                                 away=away),
        "unfused_backward_peak_bytes": peak_bytes(p.backward, storages, resident, inputs_live_throughout=False,
                                                  away=away),
        "resident_bytes": sum(resident.values()),
        "torch_estimate_bytes": saved.torch_estimate_bytes,
        "seconds": p.seconds,
        "error": None,
    }
    values.update(_program_peaks(graph, values, peaks))
    notes = offload_notes(p) + ([f"{p.name}: no compiled peaks ({peaks.note})"] if peaks and peaks.note else [])
    return MemoryRow(values, notes)


def _program_peaks(graph: JointGraph, values: dict[str, Any], peaks: RowPeaks | None) -> dict[str, Any]:
    """The row's ``forward_peak_bytes`` / ``backward_peak_bytes`` / ``layout_copy_bytes``: the unfused
    walk where the graphs run op by op; the compiled code's (plus ``resident_bytes``) where inductor's
    code runs, empty where it was not computed."""
    if not compiles(graph):
        return {"forward_peak_bytes": values["unfused_forward_peak_bytes"],
                "backward_peak_bytes": values["unfused_backward_peak_bytes"], "layout_copy_bytes": 0}
    resident = values["resident_bytes"]

    def plus(n: int | None) -> int | None:
        return None if n is None else n + resident

    if peaks is None:
        return {"forward_peak_bytes": None, "backward_peak_bytes": None, "layout_copy_bytes": None}
    return {"forward_peak_bytes": plus(peaks.forward), "backward_peak_bytes": plus(peaks.backward),
            "layout_copy_bytes": peaks.layout_copy_bytes}


def offload_notes(p: Partition) -> list[str]:
    """The caption's words on what ``p`` offloads (none when it offloads nothing)."""
    moved = offloads(p)
    if not moved:
        return []
    names = ", ".join(f"{o.wraps or o.name} to {o.target}" for o in moved)
    away = sorted({o.target for o in moved if o.moved})
    same = sorted({o.target for o in moved if not o.moved})
    words = [f"offloaded_bytes: {p.name} offloads {len(moved)} saved value(s) with torch's activation offloading "
             f"({names}): the copies, not in saved_activation_bytes."]
    if away:
        words.append(f"The peaks count an offloaded value on the device only until its copy to {', '.join(away)} "
                     "and again from its reload in the backward; storages on " + ", ".join(away) + " are left out.")
    if same:
        words.append(f"A copy to {', '.join(same)}, the device the value was on, stays in the same memory: the "
                     "peaks count it.")
    return [" ".join(words)]


def memory_table(graph: JointGraph, get_partition: Callable[[Strategy], Partition],
                 strategies: Iterable[Any], gaps: bool | None = None,
                 step: dict[str, str] | None = None,
                 get_peaks: Callable[[Strategy], RowPeaks | None] | None = None) -> pd.DataFrame:
    """One row per strategy of ``strategies`` (the caller's choice: ``Trace.offered`` by default).
    ``get_partition(strategy)`` partitions ``graph`` (``analysis.cache.GraphCache.partition``).
    A strategy that fails on this graph gives a row with ``error`` set; a malformed strategy
    raises ``StrategyError``.  ``df.attrs["caption"]`` says how the partitioners were called.

    ``gaps``: fill ``gap_to_optimal_flops`` (extra recompute FLOPs over the exact optimum at the
    row's saved activation bytes) and ``gap_to_optimal_bytes`` (extra saved bytes over the optimum
    at the row's recompute FLOPs), two MILP solves per row; default: when an ``optimal`` strategy
    is among ``strategies`` (the default table stays fast).  ``step``: the strategy the user's own
    step runs, by name, and what it is (``choices.step_names``), said first in the caption.
    ``get_peaks(strategy)``: the row's compiled peaks where the step runs inductor's code, None for a
    row whose code was not asked for (its program peaks stay empty; the caption says how to get them)."""
    chosen = parse_list(list(strategies)) or []
    rows, notes = [], []
    skipped: list[str] = []
    for s in chosen:
        name = s.name
        try:
            p = get_partition(s)
            peaks = get_peaks(s) if get_peaks is not None and compiles(graph) and p.error is None \
                and not p.reference else None
            row = memory_row(graph, p, peaks)
            if peaks is None and compiles(graph) and p.error is None and not p.reference:
                skipped.append(name)
        except StrategyError:
            raise
        except Exception as exc:  # one strategy's failure must not sink the table
            row = _error_row(name, f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}")
        rows.append(row.values)
        notes += row.notes
    redraws = [f"{r['strategy']} ({r['recomputed_random_ops']})" for r in rows if r.get("recomputed_random_ops")]
    if redraws:
        notes.insert(0, "recomputed_random_ops: random ops the backward runs again, drawing afresh unless torch "
                        "functionalizes the RNG (so the backward's mask is not the forward's): "
                        + ", ".join(redraws) + ".")
    if skipped:
        notes.append(f"forward_peak_bytes, backward_peak_bytes: not computed for {', '.join(skipped)} (inductor "
                     "lowers each row's partition, seconds per graph): memory_table(compiled=True) computes "
                     "every row's; their unfused_* walk is there.")
    if gaps or (gaps is None and any(s.kind == "optimal" for s in chosen)):
        notes += gaps_to_optimal(graph, rows)
    df = table_frame(rows)
    lead = "".join(f"{s.name} is {(step or {})[s.name]}: fxviz's default. " for s in chosen if s.name in (step or {}))
    df.attrs["caption"] = lead + caption(graph, has_symbolic_sizes(graph.gm), notes)
    return df
