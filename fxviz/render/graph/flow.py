"""The flow network min-cut solves, drawn with its capacities and its cut.

Left to right: ``source``, the split vertices ``X_in -> X_out`` of every joint node (the edge
between them labelled with its capacity), ``sink``.  Infinite edges are thin and grey (their
tooltip gives torch's reason); the cut edges are thick and in the *saved* color, with their
capacity; vertices on the source's side of the cut are shaded.
"""

from __future__ import annotations

import graphviz

from fxviz.analysis.strategy.flow import SINK, SOURCE, FlowEdge, FlowNetwork
from fxviz.core.errors import RenderError
from fxviz.render.graph.drawing import DEFAULT_TIMEOUT, Drawing
from fxviz.render.theme import EDGE_COLOR, FONT, ROLE_COLORS, STATUS
from fxviz.sources.graphs import JointGraph

__all__ = ["draw_flow", "FLOW_LIMIT"]

# vertices; a 2-layer mini GPT's network has about 700 and is unreadable as one picture
FLOW_LIMIT = 400


def _capacity(c: float) -> str:
    if c == float("inf"):
        return "∞"
    return f"{int(c):,}" if c == int(c) else f"{c:,.1f}"


def _vertex_fill(v: str, graph: JointGraph) -> str:
    base = v[:-3] if v.endswith("_in") else v[:-4] if v.endswith("_out") else v
    info = graph.info.get(base)
    return ROLE_COLORS.get(info.role, "#FFFFFF") if info is not None else "#FFFFFF"


def draw_flow(net: FlowNetwork, graph: JointGraph, name: str = "", timeout: float = DEFAULT_TIMEOUT) -> Drawing:
    """A ``Drawing`` of ``net``: capacities on every finite edge, the cut marked."""
    if len(net.vertices) > FLOW_LIMIT:
        raise RenderError(f"min-cut's network has {len(net.vertices)} vertices, too many to read as one drawing",
                          f"draw the flow of a smaller model (at most {FLOW_LIMIT} vertices), or read "
                          "tr.flow_network().edges as data")
    saved = STATUS["saved"].color
    g = graphviz.Digraph("flow")
    g.attr(rankdir="LR", fontname=FONT, fontsize="11", nodesep="0.15", ranksep="0.35", labelloc="t",
           label=f"min-cut's flow network{': ' + name if name else ''}: cut value "
                 f"{_capacity(net.cut_value)}, saves {', '.join(net.saved) or 'nothing'}\n"
                 "X_in -> X_out: the cost of saving X (cut edges thick, in the saved color);  ∞: no cut may "
                 "cross it;  thick border: source side of the cut;  fill: the node's role")
    g.attr("node", fontname=FONT, fontsize="10", shape="box", style="rounded,filled", height="0.3")
    g.attr("edge", fontname=FONT, fontsize="9")
    for v in net.vertices:
        if v in (SOURCE, SINK):
            g.node(v, v, shape="doublecircle", fillcolor="#FFFFFF", style="filled", fontsize="11")
            continue
        on_source = v in net.source_side
        g.node(v, v, fillcolor=_vertex_fill(v, graph), color="#000000" if on_source else EDGE_COLOR,
               penwidth="2" if on_source else "1",
               tooltip=f"{v}: {'source' if on_source else 'sink'} side of the cut")
    cut = {(e.tail, e.head) for e in net.cut}
    for e in net.edges:
        _edge(g, e, (e.tail, e.head) in cut, saved)
    caption = (f"min-cut's flow network, cut value {_capacity(net.cut_value)}: "
               f"saves {', '.join(net.saved) or 'nothing'}")
    return Drawing(g, nodes=len(net.vertices), timeout=timeout, caption=caption)


def _edge(g: graphviz.Digraph, e: FlowEdge, is_cut: bool, saved_color: str) -> None:
    if is_cut:
        g.edge(e.tail, e.head, label=f"cut: {_capacity(e.capacity)}", color=saved_color, fontcolor=saved_color,
               penwidth="3", tooltip=f"cut: {e.node} is saved (capacity {_capacity(e.capacity)})")
    elif e.infinite:
        g.edge(e.tail, e.head, label="∞", color="#BBBBBB", fontcolor="#999999", penwidth="0.8",
               tooltip=e.reason or "infinite")
    else:
        g.edge(e.tail, e.head, label=_capacity(e.capacity), color=EDGE_COLOR, penwidth="1.4",
               tooltip=f"saving {e.node} costs {_capacity(e.capacity)}")
