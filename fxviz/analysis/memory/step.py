"""The memory table of the whole training step: one row per piece (graph) and strategy, then one
``total`` row per strategy (``Trace.memory_table(scope="step")``).

A graph dynamo reused for several modules runs once per module, each run holding its own saved
values: the totals of count, byte and FLOP columns are sums of ``runs`` x the piece's value.  Peaks
and resident bytes are not additive and stay empty there.  The eager reference is measured on the
whole model at once: it has only a total row.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fxviz.analysis.memory.columns import COLUMNS
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import Do, Say
from fxviz.sources.graphs import graph_name

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

__all__ = ["PieceTable", "STEP_COLUMNS", "step_table"]

STEP_COLUMNS: list[str] = ["piece", "runs", *COLUMNS]

_NOT_ADDITIVE = ("strategy", "error", "forward_peak_bytes", "backward_peak_bytes", "resident_bytes")

CAPTION = Say(
    "One row per piece (graph) and strategy, then the whole step per strategy: count, byte and FLOP "
    "columns summed over pieces, each piece's value times the runs of its graph; peaks are per piece "
    "only; a piece without a backward graph saves nothing and is left out. Code that ran outside every "
    "graph is in no piece row (", Do("doctor"), " names it); the eager row is measured on the whole model.")


@dataclass(frozen=True)
class PieceTable:
    """One piece's memory table: its index, how often its graph ran in the step, whether it has a
    backward graph (a piece without one saves nothing and is in no total)."""

    index: int
    runs: int
    has_backward: bool
    table: pd.DataFrame


def _total(name: str, group: pd.DataFrame) -> dict[str, Any]:
    import pandas as pd

    total: dict[str, Any] = {"piece": "total", "runs": int(group["runs"].sum()), "strategy": name}
    failed = group["error"].notna()
    reasons = zip(group["piece"][failed], group["error"][failed])
    total["error"] = "; ".join(f"{graph_name(p)}: {e}" for p, e in reasons) or None
    for c in COLUMNS:
        if c in _NOT_ADDITIVE:
            continue
        values = group[c] * group["runs"] if c != "seconds" else group[c]
        total[c] = values.sum() if not failed.any() and group[c].notna().all() else pd.NA
    return total


def step_table(pieces: Sequence[PieceTable]) -> pd.DataFrame:
    """The pieces' rows (``STEP_COLUMNS``), then per strategy the total over the pieces with a
    backward graph, then the eager reference's one total row."""
    import pandas as pd

    frames = []
    for piece in pieces:
        df = pd.DataFrame(piece.table)
        df.insert(0, "runs", max(1, piece.runs))
        df.insert(0, "piece", piece.index)
        frames.append(df)
    rows = pd.concat(frames, ignore_index=True)
    eager = rows["strategy"] == Strategy("eager").name
    per_piece = rows[~eager]
    with_backward = {p.index for p in pieces if p.has_backward}
    totals = [_total(name, group) for name, group
              in per_piece[per_piece["piece"].isin(with_backward)].groupby("strategy", sort=False)]
    whole_eager = rows[eager].head(1).assign(piece="total", runs=pd.NA)
    out = pd.concat([per_piece, pd.DataFrame(totals), whole_eager], ignore_index=True)
    out = out[STEP_COLUMNS]
    out.attrs["caption"] = CAPTION
    return out
