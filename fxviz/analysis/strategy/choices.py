"""The choices every front end makes, made once: which strategies a trace offers, which one a view
shows when none is named, which strategy a compare view pairs it with, and which graphs of a logged
run a view offers.  ``Trace``, the payloads, the explorer, the report (its JavaScript reads the answers
from the page data) and the CLI all ask here; a second copy of a rule disagrees sooner or later.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from fxviz.analysis.strategy.strategies import OFFERED, Strategy

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd

    from fxviz.sources.graphs import Capture, JointGraph

__all__ = ["step_strategy", "step_words", "step_names", "named", "budget_strategy", "offered", "offered_of",
           "default_strategy",
           "compare_partner", "compare_partners",
           "drawable", "drawn_strategy", "flow_strategy", "shown_graphs"]

FLOW_STRATEGY = Strategy("min_cut")
"""The flow network is min-cut's: the strategy a flow view shows when none is named."""


def step_strategy(capture: Capture) -> Strategy:
    """The partitioner the user's own step runs on this capture: ``torch.compile`` partitions with
    min-cut (inductor and aot_eager alike: ``torch/_dynamo/backends/debugging.py``), as a knapsack when
    functorch's config set an ``activation_memory_budget`` below 1 at capture time;
    ``aot_function`` (the ``aot`` and ``closure`` routes) with torch's ``default_partition``.  Every
    view's default when the graph was not read from a log (issue 32)."""
    if capture.route in ("aot", "closure"):
        return Strategy("default")
    return budget_strategy(*capture.torch_budget)


def step_words(capture: Capture) -> str:
    """What :func:`step_strategy` is, in words a view prints beside its name."""
    if capture.route in ("aot", "closure"):
        return "what aot_function does"
    budget, _ = capture.torch_budget
    if budget < 1:
        return f"what torch.compile does under your activation_memory_budget={budget:g} (min-cut's knapsack)"
    return "what torch.compile does"


def step_names(capture: Capture) -> dict[str, str]:
    """{strategy name: what it is} for the strategy the user's step runs (none for a log's graph,
    whose default is what the run saved): the words views print beside that name."""
    if all(g.logged is not None for g in capture.graphs):
        return {}
    return {step_strategy(capture).name: step_words(capture)}


def named(strategy: Strategy | str, names: dict[str, str], form: str = "{name} ({words})") -> str:
    """``strategy``'s name, with what it is when it is the user's step's (:func:`step_names`):
    ``min_cut (what torch.compile does)`` (``form`` spells it)."""
    name = strategy if isinstance(strategy, str) else strategy.name
    return form.format(name=name, words=names[name]) if name in names else name


def budget_strategy(budget: float, solver: str) -> Strategy:
    """What torch.compile's min-cut is under ``activation_memory_budget=budget`` with ``solver``:
    plain min-cut at 1, else the knapsack (``budget:B:solver``)."""
    return Strategy("min_cut") if budget >= 1 else Strategy("budget", budget=float(budget), solver=solver)


def offered(graph: JointGraph, capture: Capture) -> tuple[Strategy, ...]:
    """The strategies views show for ``graph`` when none are named, the default first: what the run
    saved (``logged``) for a graph read from a log with its forward and backward graphs, then the
    ``budget:B`` its functorch config ran min-cut under when B < 1; else what the user's own step
    would do (:func:`step_strategy`); a strategy that needs the model (``eager``) only when there
    is a model to run."""
    return offered_of(graph.logged is not None, step_strategy(capture), capture.fn is not None)


def offered_of(logged: bool, step: Strategy, has_model: bool) -> tuple[Strategy, ...]:
    """:func:`offered` from what it reads: whether the graph's own partition was logged, the strategy of
    the user's step (a log's: its run's ``budget:B`` under a budget), whether there is a model (a log's
    own table asks this without rebuilding the graph)."""
    if logged:
        first = [Strategy("logged")]
        if step.kind == "budget":  # a log's run under a memory budget: its knapsack, replayed here
            first.append(step)
    else:
        first = [step]
    return tuple(first) + tuple(s for s in OFFERED if s not in first and (has_model or not s.needs_model))


def default_strategy(graph: JointGraph, capture: Capture) -> Strategy:
    """The strategy a view shows when none is named: the first of :func:`offered`."""
    return offered(graph, capture)[0]


def drawable(strategies: Sequence[Strategy]) -> list[Strategy]:
    """The strategies of ``strategies`` that have forward and backward graphs to draw or replay
    (a measured reference such as eager autograd has none)."""
    return [s for s in strategies if s.kind != "eager"]


def drawn_strategy(graph: JointGraph, capture: Capture, view: str, named: Strategy | None,
                   compare: Strategy | None = None) -> Strategy | None:
    """The strategy a drawing marks: the one ``named``; else the default (:func:`default_strategy`, what
    every view shows: the README's "views show min_cut by default") wherever the graph has a backward to
    partition; else none: a graph compiled for inference shows roles only.  A compare view whose
    ``compare`` is the default opens with the default's partner (:func:`compare_partner`):
    ``compare="min_cut"`` alone compares torch's default_partition with it, not min-cut with itself."""
    if named is not None:
        return named
    if compare is not None and compare == default_strategy(graph, capture):
        return compare_partner(compare, offered(graph, capture)) or compare
    if compare is not None or view in ("forward", "backward") or graph.has_backward:
        return default_strategy(graph, capture)
    return None


def flow_strategy(strategy: Strategy | None) -> Strategy:
    """The strategy whose flow network a flow view shows: min-cut unless one is named."""
    return FLOW_STRATEGY if strategy is None else strategy


def compare_partner(strategy: Strategy, choices: Sequence[Strategy]) -> Strategy | None:
    """The partner a compare view opens with: min-cut for any other strategy, the default for
    min-cut; else the first other strategy of ``choices``; None when there is none."""
    for partner in (Strategy("min_cut"), Strategy("default")):
        if partner != strategy and partner in choices:
            return partner
    return next((s for s in choices if s != strategy), None)


def compare_partners(choices: Sequence[Strategy]) -> dict[str, str | None]:
    """:func:`compare_partner` of each of ``choices``, by strategy name: what a page's script reads
    instead of a rule of its own."""
    usable = drawable(choices)
    out: dict[str, str | None] = {}
    for s in usable:
        partner = compare_partner(s, usable)
        out[s.name] = None if partner is None else partner.name
    return out


def shown_graphs(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows of a logged run's graph table (``Run.graphs``) that a view offers: every graph with
    a joint forward+backward graph, and every inference-only graph (a forward, nothing saved)."""
    return rows[(rows["joint"] & rows["backward"]) | rows["inference"]]
