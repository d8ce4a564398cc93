"""The report's time budget: which strategies it partitions and which views it draws before the
budget runs out.  What is left out gets a status of its own (``Status.left_out``) or a view payload
whose ``error`` says how to see it; nothing downstream reads an error's text to know.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.graph_facts import joint_node_count
from fxviz.payloads.panels import Status
from fxviz.payloads.views import ViewPayload, view_payload
from fxviz.render.graph.spec import DrawSpec

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["MIN_CUT_OVER_DEFAULT", "statuses_within", "drawings_within"]

MIN_CUT_OVER_DEFAULT = 3.0
"""How much longer than torch's default partition a min-cut partition takes (24.7 s against 7.9 s on
the 10,282-node graph, issue 26): the estimate of the next strategy's cost, from the first one's."""


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


def _past(start: float, cost: float, budget: float | None) -> bool:
    """Whether spending ``cost`` more seconds would pass ``budget`` seconds since ``start``."""
    return budget is not None and time.perf_counter() - start + cost > budget


def statuses_within(tr: Trace, keys: Sequence[str], start: float, budget: float | None,
                    say: Callable[[str], None]) -> dict[str, Status]:
    """Each strategy's :class:`Status`: the first strategy's always, the others' while under ``budget``
    seconds since ``start``; a strategy past it is ``left_out`` with an ``error`` saying how to see it
    (its partition is not cached, so asking for it later computes it).  "Past it": when the time spent
    plus ``MIN_CUT_OVER_DEFAULT`` times what the first partition took would exceed it."""
    out: dict[str, Status] = {}
    first_cost = 0.0
    for i, s in enumerate(keys):
        if i and _past(start, MIN_CUT_OVER_DEFAULT * first_cost, budget):
            strategy = Strategy.parse(s)
            out[s] = Status.left_out(strategy, _left_out_error(tr, budget, strategy))
            continue
        say(f"partitioning: {s}")
        began = time.perf_counter()
        out[s] = Status.of(tr.partition(s))
        first_cost = first_cost or time.perf_counter() - began
    return out


def drawings_within(tr: Trace, todo: Sequence[DrawSpec], first: DrawSpec, start: float, budget: float | None,
                    left_out: set[str], say: Callable[[str], None]) -> dict[str, dict[str, Any]]:
    """The payload of every view in ``todo``, by key, in order: ``first`` (the view the page opens
    with) always, the others while under ``budget`` seconds since ``start`` and their strategy was
    partitioned (not in ``left_out``); a view left out gets a payload whose ``error`` says so and how
    to draw it.  Past the budget: when the time spent plus what the first drawing took would exceed it."""
    drawn: dict[str, dict[str, Any]] = {}
    first_cost = 0.0
    for k in todo:
        late = _past(start, first_cost, budget)
        if k is not first and (late or (k.strategy is not None and k.strategy.name in left_out)):
            error = _left_out_error(tr, budget, k)
            drawn[k.text()] = dataclasses.replace(ViewPayload.head(k), error=error).to_json()
            continue
        say("drawing: the joint layout" if k is first else f"drawing: {k.text()}")
        began = time.perf_counter()
        drawn[k.text()] = view_payload(tr, k).to_json()
        first_cost = first_cost or time.perf_counter() - began
    return drawn
