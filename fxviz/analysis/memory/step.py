"""The memory table of the whole training step: one row per piece (graph) and strategy, then one
``total`` row per strategy (``Trace.memory_table(scope="step")``).

A graph dynamo reused for several modules runs once per module, each run holding its own saved
values: the totals of count and FLOP columns are sums of ``runs`` x the piece's value.  The total's
peaks, resident bytes and saved activations are the whole step's (``step_totals``): the top of the
step run in order (each graph's forward, then the backwards in reverse, what earlier graphs hold
still held), the model's state and inputs once, a value crossing a graph break counted once as an
activation.  The eager reference is measured on the whole model at once: it has only a total row.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import COLUMNS, INT_COLUMNS
from fxviz.analysis.memory.step_totals import StepTotals
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import Do, Say
from fxviz.sources.graphs import graph_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PieceTable", "STEP_COLUMNS", "step_table"]

STEP_COLUMNS: list[str] = ["piece", "runs", *COLUMNS[:COLUMNS.index("layout_copy_bytes") + 1], "eager_held_bytes",
                           *COLUMNS[COLUMNS.index("layout_copy_bytes") + 1:]]
"""``eager_held_bytes`` (total rows): what code outside the compiled graphs holds when the backward begins
(an eager layer's saved input, a graph output or a routing index its Python frames keep), measured with the
model (the eager tape); empty on a log, which does not hold it, and where no code runs outside the graphs."""

_NOT_ADDITIVE = ("strategy", "error", "forward_peak_bytes", "backward_peak_bytes", "resident_bytes",
                 "unfused_forward_peak_bytes", "unfused_backward_peak_bytes", "eager_held_bytes")

CAPTION = Say(
    "One row per piece (graph) and strategy, each as that graph alone; then the whole step per strategy: "
    "count, byte and FLOP columns summed over pieces, each piece's value times the runs of its graph; its "
    "peaks the whole step's in run order (each graph's forward, then the backwards in reverse, what earlier "
    "graphs saved still held); resident_bytes the model's state and inputs once; saved_activation_bytes "
    "counts a value that crosses a graph break once, as an activation. A piece without a backward graph "
    "saves nothing and is left out. Code that ran outside every graph is in no piece row (", Do("doctor"),
    " names it); the eager row is measured on the whole model.")


@dataclass(frozen=True)
class PieceTable:
    """One piece's memory table: its index, how often its graph ran in the step, whether it has a
    backward graph (a piece without one saves nothing and is in no total)."""

    index: int
    runs: int
    has_backward: bool
    table: pd.DataFrame


def _total(name: str, group: pd.DataFrame, whole: StepTotals | None) -> dict[str, Any]:
    import pandas as pd

    total: dict[str, Any] = {"piece": "total", "runs": int(group["runs"].sum()), "strategy": name}
    failed = group["error"].notna()
    reasons = zip(group["piece"][failed], group["error"][failed])
    total["error"] = "; ".join(f"{graph_name(p)}: {e}" for p, e in reasons) or None
    for c in STEP_COLUMNS[2:]:
        if c in _NOT_ADDITIVE or c not in group:
            continue
        values = group[c] * group["runs"] if c != "seconds" else group[c]
        total[c] = values.sum() if not failed.any() and group[c].notna().all() else pd.NA
    for f in fields(StepTotals) if whole is not None else ():
        value = getattr(whole, f.name)
        total[f.name] = pd.NA if value is None or failed.any() else value
    return total


def step_table(pieces: Sequence[PieceTable], totals: Mapping[str, StepTotals] | None = None) -> pd.DataFrame:
    """The pieces' rows (``STEP_COLUMNS``), then per strategy the total over the pieces with a
    backward graph (``totals``: the whole step's figures by strategy name), then the eager
    reference's one total row."""
    import pandas as pd

    frames = []
    for piece in pieces:
        df = pd.DataFrame(piece.table)
        df.insert(0, "runs", max(1, piece.runs))
        df.insert(0, "piece", piece.index)
        df["eager_held_bytes"] = pd.array([None] * len(df), dtype="Int64")  # a graph alone: no eager code
        frames.append(df)
    rows = pd.concat(frames, ignore_index=True)
    eager = rows["strategy"] == Strategy("eager").name
    per_piece = rows[~eager]
    with_backward = {p.index for p in pieces if p.has_backward}
    rows_total = [_total(name, group, (totals or {}).get(name)) for name, group
                  in per_piece[per_piece["piece"].isin(with_backward)].groupby("strategy", sort=False)]
    whole_eager = rows[eager].head(1).assign(piece="total", runs=pd.NA)
    out = pd.concat([per_piece, pd.DataFrame(rows_total), whole_eager], ignore_index=True)
    out = out[STEP_COLUMNS]
    for c in [*INT_COLUMNS, "eager_held_bytes"]:
        out[c] = pd.array(out[c].tolist(), dtype="Int64")
    out.attrs["caption"] = CAPTION
    return out
