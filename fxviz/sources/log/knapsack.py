"""The run's own knapsack: the ``min_cut_information`` artifact torch's min-cut logs when it solves
an activation-memory budget with ``AOT_PARTITIONER_DEBUG=1`` set (``ac_logging_utils`` in torch's
``_functorch/_activation_checkpointing``).  Torch-free: the payload is JSON.

One row per candidate the knapsack weighed (a value min-cut would save but may recompute): its bytes,
the share of the budget's range it takes (what the solver weighs), its recompute runtime by the run's
estimator, and whether the run saved or recomputed it; the run's budget and activation sizes beside.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from fxviz.core.errors import LogError
from fxviz.core.units import format_bytes

__all__ = ["Knapsack", "KNAPSACK_COLUMNS", "read_knapsack"]

KNAPSACK_COLUMNS = ["node", "op", "bytes", "budget_share", "runtime", "decision"]


@dataclass
class Knapsack:
    """What the run's knapsack weighed and chose (``rows``: ``KNAPSACK_COLUMNS``)."""

    budget: float
    min_bytes: int  # saving only the inputs (min-cut's floor)
    max_bytes: int  # saving what min-cut saves without a budget
    chosen_bytes: int  # what the run's solution saves
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def caption(self) -> str:
        return (f"The run's knapsack (min_cut_information, logged with AOT_PARTITIONER_DEBUG=1): under "
                f"activation_memory_budget={self.budget:g} min-cut may save between {format_bytes(self.min_bytes)} "
                f"(inputs only) and {format_bytes(self.max_bytes)} (min-cut without a budget); its solution saves "
                f"{format_bytes(self.chosen_bytes)}. Each row is a value the solver weighed: budget_share is its "
                "bytes over that range (what the solver packs up to the budget), runtime its recompute cost by "
                "the run's estimator; decision: saved, or recomputed in the backward.")


def _gb_to_bytes(value: Any) -> int:
    return round(float(value) * 1e9)


def read_knapsack(payload: str) -> Knapsack:
    """The ``min_cut_information`` payload as a ``Knapsack``; a payload that is not one raises ``LogError``."""
    try:
        info = json.loads(payload)
        order = list(info["Recomputable Banned Nodes Order"])
        memories = list(info["Absolute Memories"])
        shares = list(info["Knapsack Input Memories"])
        runtimes = list(info["Knapsack Input Runtimes"])
        saved = {int(i) for i in info["Knapsack Saved Nodes"]}
        nodes = info.get("Joint Graph Node Information") or {}
        knapsack = Knapsack(budget=float(info["Memory Budget"]),
                            min_bytes=_gb_to_bytes(info["Min Activation Size (GB)"]),
                            max_bytes=_gb_to_bytes(info["Max Activation Size (GB)"]),
                            chosen_bytes=_gb_to_bytes(info["Saved Values Activation Size (GB)"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise LogError(f"the log's min_cut_information record does not read as torch writes it ({exc})",
                       "the rest of the graph reads without it; report the torch version that wrote it") from exc
    for i, name in enumerate(order):
        knapsack.rows.append({"node": name, "op": str((nodes.get(name) or {}).get("target", "")),
                              "bytes": int(memories[i]) if i < len(memories) else None,
                              "budget_share": float(shares[i]) if i < len(shares) else None,
                              "runtime": float(runtimes[i]) if i < len(runtimes) else None,
                              "decision": "saved" if i in saved else "recomputed"})
    return knapsack
