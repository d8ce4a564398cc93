"""Strategies and the explorer's controls, both ways: a control's choice is a strategy kind, and a
kind whose strategy takes a budget (and a solver) reads them from the slider and the solver control.
Which kinds do is read off parsed ``Strategy`` values, never off their spelling."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.choices import compare_partner, named, offered, step_names
from fxviz.analysis.strategy.strategies import KINDS, Strategy, StrategyLike
from fxviz.core.errors import FxvizError, InputError
from fxviz.payloads.panels import status_data
from fxviz.render.graph.spec import DrawSpec

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["reads_slider", "strategy_of", "controls_of", "partner_choice", "names",
           "statuses_of", "strategy_choices", "ON_REQUEST"]

@functools.cache
def reads_slider(kind: str) -> tuple[bool, bool]:
    """Whether a strategy of ``kind`` takes the budget slider's fraction, and the solver control's
    solver: the fields ``KIND:0.5`` parses into (``budget:0.5`` both; ``optimal:0.5`` the budget)."""
    try:
        probe = Strategy.parse(f"{kind}:0.5")
    except FxvizError:
        return False, False
    return probe.budget is not None, probe.solver is not None


def strategy_of(kind: str, budget: float, solver: str) -> Strategy:
    """The strategy a control's choice means: its kind, with the slider's budget and the solver where
    the kind takes them."""
    takes_budget, takes_solver = reads_slider(kind)
    if takes_budget:
        return Strategy(kind, budget=float(budget), solver=solver if takes_solver else None)
    return Strategy.parse(kind)


def controls_of(strategy: StrategyLike, budget: float, solver: str,
                offered: Sequence[str]) -> tuple[str, float, str]:
    """The controls' settings for a strategy: ``"budget:0.3:greedy"`` -> ``("budget", 0.3, "greedy")``;
    a kind that takes a budget, named alone (``"budget"``), keeps the slider's budget and solver.
    ``offered``: the kinds the strategy control holds."""
    if isinstance(strategy, str) and strategy.strip().lower() in offered and reads_slider(strategy.strip().lower())[0]:
        return strategy.strip().lower(), budget, solver
    s = Strategy.parse(strategy)
    if s.kind not in offered:
        raise InputError(f"the explorer offers the strategies {', '.join(offered)}, not {s.name!r}",
                         "draw other strategies with tr.draw(strategy=...)")
    if not reads_slider(s.kind)[0]:
        return s.kind, budget, solver
    if s.budget is None:  # the slider is a fraction; an absolute size is not a slider position
        raise InputError(f"the explorer's budget slider is a fraction of min-cut's bytes, not {s.name!r}",
                         f"pass strategy='{s.kind}:0.5' (or draw sizes with tr.draw(strategy='{s.kind}:64MiB'))")
    return s.kind, float(s.budget), s.solver or solver


def partner_choice(kind: str, offered: Sequence[str]) -> str | None:
    """The compare control's choice a compare view opens with when A is ``kind``
    (``choices.compare_partner`` among the offered kinds); None when there is none."""
    partner = compare_partner(Strategy(kind), [Strategy(k) for k in offered])
    return partner.kind if partner else None


def names(vk: DrawSpec) -> str:
    """``A``, or ``A vs B`` in the compare view, as the busy note says it."""
    a = vk.strategy.name if vk.strategy else "the layout"
    label = f"{a} vs {vk.compare.name}" if vk.view == "compare" and vk.compare else a
    return label + (" (differences only)" if vk.differences else "")


def statuses_of(tr: Trace, vk: DrawSpec) -> dict[str, Any]:
    """What the view's strategies did, by name (partitions cached on the Trace): the pane's ``statuses``."""
    shown = [s for s in (vk.strategy, vk.compare if vk.view == "compare" else None) if s is not None]
    return {s.name: status_data(tr.partition(s)) for s in shown}


ON_REQUEST: tuple[str, ...] = ("optimal",)
"""Kinds the strategy controls offer beyond the trace's own (``choices.offered``) and the memory table
lists only while one is picked: the exact optimum under the budget slider (issue 16), a MILP solve
per budget."""


def strategy_choices(tr: Trace) -> list[tuple[str, str]]:
    """The strategy controls' (label, kind) options: what the trace offers (``choices.offered``: a
    log's shows what the run saved first, no eager; the user's step's strategy first, with what it
    is), then the kinds ``ON_REQUEST``.  ``explore(model, x)`` traces before it asks, so every way in
    opens on the choices ``fxviz.trace`` shows."""
    names = step_names(tr.capture) if tr.graph.logged is None else {}
    chosen = [(named(s, names) if s.name in names else s.spec.short, s.kind) for s in offered(tr.graph, tr.capture)]
    return [*chosen, *((KINDS[k].short, k) for k in ON_REQUEST)]
