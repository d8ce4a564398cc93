"""The report's time budget: which strategies it partitions and which views it draws before the
budget runs out, decided from estimates of each one's cost (from the graph's size), never from the
clock, so that a report's contents do not depend on how busy the machine is.  What is left out gets
a status of its own (``Status.left_out``) or a view payload whose ``error`` says how to see it;
nothing downstream reads an error's text to know.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.graph_facts import joint_node_count
from fxviz.payloads.panels import Status
from fxviz.payloads.views import ViewPayload, view_payload
from fxviz.render.graph.spec import DrawSpec

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["PARTITION_S_PER_NODE", "DRAW_S_PER_NODE", "estimated_seconds", "within", "statuses_within",
           "drawings_within"]

PARTITION_S_PER_NODE: dict[str, float] = {
    "logged": 0.01e-3, "default": 0.25e-3, "recompute_all": 0.3e-3, "eager": 0.25e-3,
    "min_cut": 0.65e-3, "callable": 0.65e-3, "budget": 1.0e-3, "optimal": 2.0e-3,
}
"""Seconds per joint node a partition of each strategy kind is expected to take on a quiet machine: the
report's estimate of a strategy's cost, from the graph's size alone, never from the clock (so the same command
on the same input writes the same report however busy the machine is).  Measured (CPU seconds, 2026-12-07,
benchmarks/RESULTS.md) on a 16-layer Llama log's 3,400-node joint graph: ``logged`` 0.03 s (a reading),
``default_partition`` 0.73, ``min_cut`` 2.24, ``budget:0.5`` 3.55 (min-cut with its knapsack),
``recompute_all`` 0.91; the issue-17 ladder's 10,282-node rung gave ``default_partition`` 2.54 s and
``min_cut`` 4.63 s (a lighter graph per node).  ``optimal`` is a MILP (seconds to minutes: its estimate is the
least); ``eager`` runs the model (its cost is the model's, not the graph's: estimated as a default partition).
Everything fits a 10 s budget up to about 3,500 joint nodes (a 16-layer Llama step, a 12-layer GPT-2)."""

DRAW_S_PER_NODE = 0.1e-3
"""Seconds per node of the graph a drawing shows (the joint graph for the joint layout, about half of it for one
strategy's forward or backward view): building the scene and DOT is linear in the graph's nodes, and a big
graph's drawing collapses into boxes, so ``dot`` itself stays small.  Measured on the same 3,400-node log: the
joint layout 0.13 CPU s, each strategy's forward or backward view 0.14-0.35 CPU s."""


def estimated_seconds(subject: Strategy | DrawSpec, nodes: int) -> float:
    """What computing ``subject`` (a strategy's partition, or a view's drawing) is expected to take on
    a ``nodes``-node joint graph: a pure function of the two, so that the report's contents do not
    depend on the machine's load.  Always above 0 (a budget of 0 leaves out all but the first)."""
    if isinstance(subject, Strategy):
        return max(1, nodes) * PARTITION_S_PER_NODE.get(subject.kind, PARTITION_S_PER_NODE["callable"])
    share = 1.0 if subject.view not in ("forward", "backward") else 0.5
    return max(1, nodes) * share * DRAW_S_PER_NODE


def within(costs: Sequence[float], budget: float | None, spent: float = 0.0) -> list[bool]:
    """Which of the subjects in order, each with its estimated cost, the report computes: the first
    always, each next while ``spent`` plus the estimates of those computed and its own stays under
    ``budget``; once one is left out every later one is too (the order is the user's priority).
    ``budget`` None: all.  Pure: the same costs and budget always give the same answer."""
    keep: list[bool] = []
    for i, cost in enumerate(costs):
        ok = budget is None or (i == 0 or (keep[-1] and spent + cost <= budget))
        keep.append(ok)
        spent += cost if ok else 0.0
    return keep


def _left_out_error(tr: Trace, budget: float | None, subject: Strategy | DrawSpec) -> str:
    """Why a strategy's partition or a view's drawing (``subject``) was left out, and the commands and
    calls that compute it: the one place the CLI spellings are written on this floor."""
    if isinstance(subject, Strategy):
        what = f"partitioning with {subject.label}"
        how = f"see it with 'fxviz table MODEL --strategies {subject.name}' or tr.partition('{subject.name}')"
    else:
        s = subject.strategy
        side = f"--view {subject.view} --strategy {s.name}" if s else f"--view {subject.view}"
        what = f"drawing the {subject.view} view"
        how = f"draw it with 'fxviz draw MODEL {side}' or tr.draw(...)"
    nodes = joint_node_count(tr.graph.info.values())
    return (f"not computed in this report: {what} would pass the report's budget of {budget or 0:g} s on this "
            f"{nodes}-node graph\nWhat to do: {how}, or write the report with budget=None ('fxviz report --budget 0' "
            "computes and draws everything)")


def _say_left_out(say: Callable[[str], None], what: Sequence[str], budget: float | None, nodes: int) -> None:
    """One line of progress (the CLI prints it on stderr) naming what the budget left out and how to
    include it."""
    if what:
        say(f"left out by the report's budget: {', '.join(what)} (estimated past {budget or 0:g} s on this "
            f"{nodes}-node graph; each says in the page how to see it; 'fxviz report --budget 0' or budget=None "
            "includes everything)")


def statuses_within(tr: Trace, keys: Sequence[str], budget: float | None,
                    say: Callable[[str], None]) -> tuple[dict[str, Status], float]:
    """Each strategy's :class:`Status` and the estimated seconds of the partitions computed: the first
    strategy's always, the others in order while their estimated costs (:func:`estimated_seconds`, from
    the joint graph's node count) stay under ``budget`` (:func:`within`); a strategy past it is
    ``left_out`` with an ``error`` saying how to see it (its partition is not cached, so asking for it
    later computes it).  The decision reads no clock: the same trace gives the same statuses."""
    nodes = joint_node_count(tr.graph.info.values())
    strategies = [Strategy.parse(s) for s in keys]
    costs = [estimated_seconds(s, nodes) for s in strategies]
    keep = within(costs, budget)
    out: dict[str, Status] = {}
    for s, strategy, ok in zip(keys, strategies, keep, strict=True):
        if not ok:
            out[s] = Status.left_out(strategy, _left_out_error(tr, budget, strategy))
            continue
        say(f"partitioning: {s}")
        out[s] = Status.of(tr.partition(s))
    _say_left_out(say, [s for s, ok in zip(keys, keep, strict=True) if not ok], budget, nodes)
    return out, sum(c for c, ok in zip(costs, keep, strict=True) if ok)


def drawings_within(tr: Trace, todo: Sequence[DrawSpec], first: DrawSpec, spent: float, budget: float | None,
                    left_out: set[str], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The payload of every view in ``todo``, by key, in order: ``first`` (the view the page opens
    with) always, the others while ``spent`` (the partitions' estimate, :func:`statuses_within`) plus
    the estimated costs of the drawings (:func:`estimated_seconds`) stays under ``budget`` and their
    strategy was partitioned (not in ``left_out``); a view left out gets a payload whose ``error``
    says so and how to draw it.  Reads no clock, as :func:`statuses_within`."""
    nodes = joint_node_count(tr.graph.info.values())
    ordered = [first] + [k for k in todo if k is not first and (k.strategy is None or k.strategy.name not in left_out)]
    keep = dict(zip((k.text() for k in ordered),
                    within([estimated_seconds(k, nodes) for k in ordered], budget, spent), strict=True))
    drawn: dict[str, dict[str, Any]] = {}
    skipped: list[str] = []
    for k in todo:
        if k is not first and not keep.get(k.text(), False):
            error = _left_out_error(tr, budget, k)
            drawn[k.text()] = dataclasses.replace(ViewPayload.head(k), error=error).to_json()
            if k.strategy is None or k.strategy.name not in left_out:
                skipped.append(f"the {k.view} view" + (f" of {k.strategy.name}" if k.strategy else ""))
            continue
        say("drawing: the joint layout" if k is first else f"drawing: {k.text()}")
        drawn[k.text()] = view_payload(tr, k).to_json()
    _say_left_out(say, skipped, budget, nodes)
    return drawn
