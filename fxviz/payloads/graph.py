"""One graph's payloads in a report: its strategies' statuses, every view's drawing (under the
report's time budget), the index from the controls' state to those drawings, the node records,
the memory table, the compare partners and the view the page opens with.  The report holds one
set for its trace and one for each other piece of a graph-broken model (``pieces.pieces_data``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from fxviz.analysis.strategy.choices import compare_partner, drawable, named, step_names
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import FxvizError
from fxviz.core.graph_facts import joint_node_count
from fxviz.payloads.budget import drawings_within, statuses_within
from fxviz.payloads.panels import Status, node_data, saved_data, table_data
from fxviz.payloads.views import view_payload
from fxviz.render.graph.spec import DrawSpec
from fxviz.render.page.embed import page_data

if TYPE_CHECKING:  # pragma: no cover
    from fxviz.api.facade import Trace

__all__ = ["DIFFERENCES_NODE_LIMIT", "PIECE_FIELDS", "doctor_strategy", "graph_data"]

# A report ships one differences-only drawing per ordered pair of its strategies (A and B are named
# and colored in it) when the joint graph is drawn node by node (at most this many nodes), so its
# "differences only" toggle shows a real relayout; above it, the toggle fades the other nodes of the
# shared layout.  Measured on fxviz's AlexNet (127 nodes, 5 strategies): 20 drawings of 10-70
# nodes, 2.1 MB of SVG, +0.36 MB packed in the page (0.54 -> 0.90 MB, under its 1 MB target) and
# 3.3 s of layout.  A 12-layer GPT's pairs differ in hundreds of nodes each: megabytes, not shipped.
DIFFERENCES_NODE_LIMIT = 150
# ... and at most this many characters of their SVG, the pairs with the strategy the views open with
# first: on inductor's AlexNet (145 nodes) every pair with recompute_all differs in most of the graph
# (220 KB of SVG each) and the 20 drawings took the page from its 1 MB target to 1.18 MB; within this
# budget 10 ship (all 8 with min_cut) and the page is 0.92 MB.  A pair left out falls back to fading
# the shared layout's other nodes, as a big graph's do.
DIFFERENCES_SVG_BUDGET = 1_600_000

PIECE_FIELDS = ("summary", "index", "drawings", "status", "nodes", "table", "initial", "compare_partners")
"""The payload fields that differ from piece to piece (the report swaps them in when one is picked)."""


def graph_data(tr: Trace, keys: Sequence[str], views: Sequence[str], pairs: Sequence[tuple[str, str]],
               group: str | None, depth: int | None, budget: float | None,
               say: Callable[[str], None]) -> dict[str, Any]:
    """The payloads of one graph (``PIECE_FIELDS``, with ``strategies`` and ``pairs``): ``keys`` are
    strategy names, ``pairs`` the (A, B) pairs the compare view may open with (default: the first
    strategy and its ``choices.compare_partner``); ``budget``: see ``budget.statuses_within``."""
    parsed = [Strategy.parse(k) for k in keys]
    partner = compare_partner(parsed[0], parsed)
    first_pair = pairs[0] if pairs else (keys[0], partner.name if partner else None)
    statuses, spent = statuses_within(tr, keys, budget, say)
    left_out = {s for s in keys if statuses[s].state == "left_out"}
    layout = DrawSpec.of("joint", None, None, group, depth)
    todo = [DrawSpec.of(v, s, None, group, depth) for v in views if v in ("forward", "backward") for s in keys]
    if "joint" in views or "compare" in views:
        todo.insert(0, layout)
    drawn = drawings_within(tr, todo, todo[0] if todo else layout, spent, budget, left_out, say)
    if layout.text() in drawn and not drawn[layout.text()].get("error"):
        # the shared layout shows every strategy: each partitioned one's saved tensors
        drawn[layout.text()]["saved"] = page_data({s: saved_data(tr, s) for s in keys if s not in left_out})
    differences = _differences_drawings(tr, keys, statuses, views, drawn, say)
    say("memory table")
    try:
        table = table_data(tr.memory_table([s for s in keys if s not in left_out], scope="graph"), tr)
    except FxvizError as exc:
        table = {"message": f"no memory table: {exc.message}"}
    index = _index(keys, views, group, depth, layout.text(), differences)
    step = {} if tr.graph.logged is not None else step_names(tr.capture)  # "min_cut (what torch.compile does)"
    return {
        "summary": tr.summary(),
        "strategies": [{"key": s, "label": named(s, step) if s in step else statuses[s].label,
                        "error": statuses[s].error} for s in keys],
        "pairs": [list(first_pair)] if first_pair[1] else [],
        "index": index,
        "drawings": drawn,
        "status": {s: st.to_json() for s, st in statuses.items()},
        "nodes": node_data(tr, doctor_strategy(tr, keys, [s for s in keys if s not in left_out])),
        "table": table,
        "initial": _initial(index, views, keys, first_pair, drawn),
        "compare_partners": _partners(statuses),
    }


def doctor_strategy(tr: Trace, keys: Sequence[str], computed: Sequence[str]) -> str:
    """The strategy whose backward graphs a report's doctor checks: the trace's own default (what
    its step runs) where the report partitioned it (``computed``), else the strategy it partitioned
    first, so that the doctor never partitions one the budget left out."""
    own = tr.default_strategy.name
    return own if own in computed else keys[0]


def _partners(statuses: dict[str, Status]) -> dict[str, str | None]:
    """The compare partner of each strategy that was computed (``choices.compare_partner`` among the
    drawable ones that were): what the page's script opens B with, by strategy name."""
    usable = [Strategy.parse(k) for k, st in statuses.items() if st.state == "done"]
    among = drawable(usable)
    return {s.name: p.name if (p := compare_partner(s, among)) else None for s in usable}


def _initial(index: list[dict[str, Any]], views: Sequence[str], keys: Sequence[str],
             first_pair: tuple[str, str | None], drawn: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The view the page opens with: the first of ``views`` that could be drawn, for the first pair."""
    def entry(v: str) -> dict[str, Any] | None:
        b = first_pair[1] if v == "compare" else None
        return next((e for e in index if e["view"] == v and e["strategy"] == first_pair[0] and e["compare"] == b
                     and not e["differences"]), None)

    first = next((e for e in map(entry, views) if e and drawn[e["drawing"]]["svg"]), None) or entry(views[0])
    if first is None:
        return {"view": views[0], "strategy": keys[0], "compare": None, "key": None, "drawing": None}
    return {k: first[k] for k in ("view", "strategy", "compare", "key", "drawing")}


def _index(keys: Sequence[str], views: Sequence[str], group: str | None, depth: int | None,
           layout: str, differences: dict[tuple[str, str], str]) -> list[dict[str, Any]]:
    """Every view the report's controls can ask for: its ``DrawSpec`` text (``key``) and the drawing
    that shows it (``drawing``, a key of ``views``).  Joint and compare views share the layout;
    a pair's differences-only entry exists where its drawing was made."""
    out: list[dict[str, Any]] = []

    def add(k: DrawSpec, drawing: str) -> None:
        out.append({"view": k.view, "strategy": k.strategy.name if k.strategy else None,
                    "compare": k.compare.name if k.compare else None, "differences": k.differences,
                    "key": k.text(), "drawing": drawing})

    for v in views:
        for a in keys:
            if v in ("forward", "backward"):
                k = DrawSpec.of(v, a, None, group, depth)
                add(k, k.text())
            elif v == "joint":
                add(DrawSpec.of("joint", a, None, group, depth), layout)
            else:
                for b in keys:
                    if a != b:
                        add(DrawSpec.of("compare", a, b, group, depth), layout)
                        if (a, b) in differences:
                            add(DrawSpec.of("compare", a, b, differences=True), differences[(a, b)])
    return out


def _differences_drawings(tr: Trace, keys: Sequence[str], statuses: dict[str, Status], views: Sequence[str],
                          drawn: dict[str, dict[str, Any]], say: Callable[[str], None]) -> dict[tuple[str, str], str]:
    """The differences-only drawing of every ordered pair of usable strategies (those with the
    opening strategy first) within ``DIFFERENCES_SVG_BUDGET``, into ``drawn``; returns (A, B) -> its
    key.  None above ``DIFFERENCES_NODE_LIMIT`` joint nodes (see there) or without the compare view."""
    if "compare" not in views or joint_node_count(tr.graph.info.values()) > DIFFERENCES_NODE_LIMIT:
        return {}
    usable = [s for s in keys if statuses[s].state == "done"]
    pairs = [(a, b) for a in usable for b in usable if a != b]
    pairs.sort(key=lambda p: keys[0] not in p)  # the pairs with the opening strategy first (stable)
    out: dict[tuple[str, str], str] = {}
    spent, smallest = 0, DIFFERENCES_SVG_BUDGET
    for i, (a, b) in enumerate(pairs):
        k = DrawSpec.of("compare", a, b, differences=True)
        if DIFFERENCES_SVG_BUDGET - spent < smallest:  # no drawing seen so far would fit: stop laying them out
            say(f"left out: {len(pairs) - i} more differences drawings (the page's SVG budget is spent; the toggle "
                "fades instead)")
            break
        say(f"drawing: {k.text()}")
        r = view_payload(tr, k)
        size = len(r.svg or "")
        smallest = min(smallest, size) if size else smallest
        if spent + size > DIFFERENCES_SVG_BUDGET:
            say(f"left out: {k.text()} ({size} characters of SVG over the page's budget; the toggle fades instead)")
            continue
        spent += size
        drawn[r.key] = r.to_json()
        if not r.error:
            out[(a, b)] = r.key
    return out

