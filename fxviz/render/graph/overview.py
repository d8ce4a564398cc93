"""The whole-model overview of a graph-broken model: every piece as one box, in execution order.

Edges follow execution: run ``k`` of one graph to run ``k + 1`` of the next, labelled with the
step numbers, so a graph dynamo reused (one block graph for every layer) gets several numbered
edges and a double border.  Code that ran outside every graph (a frame dynamo skipped, the
modules whose parameters no graph received) is a dashed box of its own.  Reads
``analysis.pieces`` facts only.
"""

from __future__ import annotations

import html

import graphviz

from fxviz.analysis.graph.pieces import PieceFacts, PieceSummary
from fxviz.core.units import format_bytes
from fxviz.render import theme
from fxviz.render.graph.drawing import DEFAULT_TIMEOUT, Drawing

__all__ = ["draw_overview"]


def _box(p: PieceSummary) -> str:
    rows = [f"<b>{html.escape(p.label)}</b>",
            f"{p.nodes} nodes: {p.forward_ops} forward ops, {p.backward_ops} backward ops"
            if p.has_backward else f"{p.nodes} nodes: {p.forward_ops} forward ops, no backward graph"]
    if p.saved_bytes is not None and p.has_backward:
        rows.append(f"saves {html.escape(format_bytes(p.saved_bytes))} ({html.escape(p.strategy)}, one run)")
    if p.runs > 1:
        mods = "; ".join(", ".join(m) or "-" for m in p.modules)
        rows.append(f"<b>ran {p.runs} times:</b> reused for {html.escape(mods)}")
    elif p.modules and p.modules[0]:
        rows.append(html.escape(", ".join(p.modules[0])))
    if p.reason:
        short = p.reason if len(p.reason) <= 60 else p.reason[:57] + "..."
        rows.append(f"<i>after break: {html.escape(short)}</i>")
    return "<" + "<br/>".join(rows) + ">"


def draw_overview(pieces: list[PieceSummary], facts: PieceFacts, name: str = "model",
                  timeout: float = DEFAULT_TIMEOUT) -> Drawing:
    """Boxes for the pieces in execution order, edges following execution, reused graphs marked."""
    g = graphviz.Digraph("fxviz_overview", graph_attr={"rankdir": "TB", "fontname": theme.FONT,
                                                       "label": f"{name}: {_graphs(len(pieces))}, execution order",
                                                       "labelloc": "t"},
                         node_attr={"shape": "box", "style": "rounded,filled", "fontname": theme.FONT,
                                    "fontsize": "11", "fillcolor": theme.ROLE_COLORS["forward"]},
                         edge_attr={"color": theme.EDGE_COLOR, "fontname": theme.FONT, "fontsize": "10"})
    for p in pieces:
        attrs = {"id": f"piece-{p.index}", "tooltip": p.label}
        if p.runs > 1:
            attrs["peripheries"] = "2"
            attrs["penwidth"] = "2"
        if not p.has_backward:
            attrs["fillcolor"] = theme.ROLE_COLORS["output"]
        g.node(f"piece{p.index}", _box(p), **attrs)
    # execution order: recorded runs, else the pieces one after another
    order = [r.graph for r in facts.runs] if facts.runs else [p.index for p in pieces]
    edges: dict[tuple[int, int], list[int]] = {}
    for step, (a, b) in enumerate(zip(order, order[1:]), start=1):
        edges.setdefault((a, b), []).append(step)
    for (a, b), steps in edges.items():
        g.edge(f"piece{a}", f"piece{b}", label=" " + ", ".join(str(s) for s in steps) + " ",
               penwidth="2" if len(steps) > 1 else "1")
    outside = list(dict.fromkeys(m.split(".")[0] for m in facts.outside))
    if outside or facts.eager_frames:
        rows = ["<b>ran as plain eager Python (in no graph)</b>"]
        if facts.eager_frames:
            rows.append("frames dynamo skipped: " + html.escape(", ".join(facts.eager_frames)))
        if outside:
            rows.append("modules no graph received: " + html.escape(", ".join(outside)))
        g.node("eager", "<" + "<br/>".join(rows) + ">", style="dashed,rounded", fillcolor="white", id="eager")
    return Drawing(g, nodes=len(pieces) + 1, timeout=timeout,
                   caption=f"{name}: {_graphs(len(pieces))} in execution order; edge labels number the runs; "
                           "a double border marks a graph dynamo ran more than once")


def _graphs(n: int) -> str:
    return "1 graph" if n == 1 else f"{n} graphs"
