"""Everything one report holds: one graph's payloads (``graph.graph_data``), the page's own fields
(title, doctor, legend, constants, timeline) and, after graph breaks, every other piece and the
whole-model overview; or, for a logged run, one such set per graph.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.strategies import Strategy, StrategyLike, parse_list
from fxviz.core.errors import Do, InputError, Say
from fxviz.payloads.graph import PIECE_FIELDS, doctor_strategy, graph_data
from fxviz.payloads.panels import doctor_data, legend_data, page_constants, table_data, timeline_data
from fxviz.payloads.pareto import RunsLike, pareto_data
from fxviz.payloads.pieces import overview_data, pieces_data, whole_model_option
from fxviz.render.graph.limits import REPORT_BUDGET
from fxviz.render.graph.spec import PAGE_VIEWS

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.analysis.real.measure import Measured
    from fxviz.api.advice.options import Advice
    from fxviz.api.facade import Trace

__all__ = ["REPORT_BUDGET", "report_data", "run_report_data"]


def report_data(tr: Trace, strategies: Iterable[StrategyLike] | None = None,
                views: Iterable[str] = ("joint", "forward", "backward", "compare"),
                compare: Sequence[tuple[StrategyLike, StrategyLike]] | None = None, group: str | None = None,
                depth: int | None = None, title: str | None = None,
                progress: Callable[[str], None] | None = None,
                budget: float | None = REPORT_BUDGET, measure: bool | Measured = False,
                runs: RunsLike | None = None, advice: Advice | None = None) -> dict[str, Any]:
    """Every payload one report holds: one joint layout (strategies and compares are overlays on
    it, any pair of ``strategies``), each strategy's forward and backward drawing (``views``: one
    ``ViewPayload`` each, by key), the ``index`` from the controls' state to those keys, the
    node records, the memory table, the doctor's findings and the legend.  ``strategies``: default
    ``tr.offered`` (a log's trace shows what the run saved first).  ``compare``: the pair the
    compare view opens with (its first pair; default: the first strategy and its
    ``choices.compare_partner``).  ``budget``: estimated seconds (from the graph's size, never
    the clock) after which the report stops partitioning further strategies and drawing further views
    (the first strategy and the opening view always; see ``budget.statuses_within``,
    ``budget.drawings_within``), per graph; None computes and draws everything.  ``measure``: True
    runs the real compiled step (``Trace.measure()``: it compiles, so it is asked for), or a
    ``Measured`` already made; the memory table then shows
    its twin and the step's storages, the doctor what it keeps beyond the partition.  ``runs`` (logged
    runs of the same model) and ``advice`` (``tr.advise(...)``): the budget curve with them on it
    (``pareto.pareto_data``), under the timeline."""
    keys = [s.name for s in parse_list(list(tr.offered if strategies is None else strategies)) or []]
    if not keys:
        raise InputError("the report needs at least one strategy", "pass strategies=('default', 'min_cut')")
    views = [v for v in views if v in PAGE_VIEWS]
    if not views:
        raise InputError("the report needs at least one view", f"use views from {', '.join(PAGE_VIEWS)}")
    pairs = [(Strategy.parse(a).name, Strategy.parse(b).name) for a, b in compare] if compare else []
    pairs = [(a, b) for a, b in pairs if a in keys and b in keys and a != b]
    say = progress or (lambda _m: None)
    measured = None
    if measure is not False:
        say("measuring the compiled step")
        measured = tr.measure() if measure is True else measure
    data = graph_data(tr, keys, views, pairs, group, depth, budget, say)
    if measured is not None and data["table"].get("rows"):  # the table's own rows, with the twin
        shown = [str(r["key"]) for r in data["table"]["rows"]]
        data["table"] = table_data(tr.memory_table(shown, scope="graph", measured=measured), tr, measured)
    root = tr.graph.index == 0
    # what the budget left out is computed by nothing else in the report: the timeline and the
    # overview show the strategies its graphs partitioned
    computed = [s for s in keys if data["status"][s]["state"] != "left_out"]
    pieces = pieces_data(tr, keys, views, pairs, group, depth, budget, say) if root else []
    for piece in pieces:
        status = piece.get("payload", {}).get("status", {})
        computed = [s for s in computed if status.get(s, {}).get("state") != "left_out"]
    return {
        "title": title or f"fxviz report: {tr.capture.title}",
        "name": tr.capture.title,
        **data,
        "views": list(views),
        "doctor": doctor_data(tr, doctor_strategy(tr, keys, computed), measured=measured),
        "legend": legend_data(),
        "constants": page_constants(),
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        # graph breaks: every other piece's own payloads and the whole-model overview (issue 14)
        "pieces": pieces,
        "piece_fields": list(PIECE_FIELDS),  # what the page swaps when another piece is picked
        "overview": overview_data(tr, computed or keys[:1]) if root and len(tr.pieces) > 1 else None,
        "whole_model_option": whole_model_option(len(tr.pieces)),
        # the memory timeline ({"svg", "caption"} or None); report.js shows it under the saved tensors
        "timeline": timeline_data(tr, computed),
        "pareto": pareto_data(tr, runs, advice) if root else None,  # the budget curve, runs and advice on it
    }


def run_report_data(graphs: Sequence[tuple[int, str, Trace]], initial: int = 0, title: str | None = None,
                    progress: Callable[[str], None] | None = None, run_summary: str | None = None,
                    **kwargs: Any) -> dict[str, Any]:
    """The payloads of several graphs of a logged run, one ``report_data`` each, for a report
    with a rank and a graph selector.  ``graphs``: (rank, compile id, trace) in display order.
    ``run_summary`` (``Run.summary()``: graphs, eager frames, totals per rank) heads every graph's
    summary, so the whole run is read before any one graph."""
    if not graphs:
        raise InputError("the report needs at least one graph",
                         Say("pick graphs with a backward from ", Do("graphs", on="run", attr=True)))
    say = progress or (lambda _m: None)
    entries: list[dict[str, Any]] = []
    for rank, compile_id, tr in graphs:
        say(f"rank {rank}, graph {compile_id}")
        data = report_data(tr, progress=progress, **kwargs)
        if run_summary:
            data["summary"] = f"{run_summary}\n\nthis graph: {data['summary']}"
        entries.append({"id": f"{rank}|{compile_id}", "rank": rank, "compile_id": compile_id,
                        "label": f"{compile_id} ({tr.capture.title})", "data": data})
    first: dict[str, Any] = entries[initial]["data"]
    # "first" feeds the script-free fallback and is not written into the page's data
    return {"title": title or f"fxviz report: a logged run ({len(entries)} graphs)", "summary": first["summary"],
            "generated": first["generated"], "graphs": entries, "initial": initial, "first": first}
