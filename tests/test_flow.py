"""The flow network min-cut solves (``Trace.flow_network``, ``tr.draw("flow")``): recorded from
torch's own call, so its cut must be exactly the saved set of torch's min-cut partition, and the
cut value must be the maximum flow another max-flow algorithm finds on the same network."""

from __future__ import annotations

import math

import networkx as nx
import pytest

from fxviz import _torch
from fxviz.core.errors import StrategyError


@pytest.mark.parametrize("name", ["by_hand", "pointwise_chain", "mlp", "resnet_block", "mini_gpt"])
def test_cut_is_min_cut_partition(traces, name):
    tr = traces[name]
    net = tr.flow_network()
    assert net.solves == 1
    # the cut's nodes are exactly what torch's min-cut partition saves, in the same order
    assert net.saved == list(tr.partition("min_cut").saved)
    cut = net.cut
    assert cut and all(e.node is not None and not e.infinite for e in cut)
    assert math.isclose(net.cut_value, sum(e.capacity for e in cut))
    # max-flow = min-cut, checked with a different algorithm than networkx's default
    g = nx.DiGraph()
    for e in net.edges:
        g.add_edge(e.tail, e.head, **({} if e.infinite else {"capacity": e.capacity}))
    flow = nx.maximum_flow_value(g, "source", "sink", flow_func=nx.algorithms.flow.edmonds_karp)
    assert math.isclose(flow, net.cut_value)
    # a saved node's edge costs at least torch's own size estimate of it (weights scale it up)
    nodes = {n.name: n for n in tr.joint.graph.nodes}
    for e in cut:
        assert e.capacity >= _torch.torch_size_of(nodes[e.node]) or e.capacity == 0


def test_network_vocabulary(traces):
    """Every joint node torch keeps is split in two; source and sink edges are infinite and carry
    torch's reason."""
    net = traces["by_hand"].flow_network()
    assert {"source", "sink"} <= set(net.vertices)
    for e in net.edges:
        if e.tail == "source" or e.head == "sink":
            assert e.infinite and e.reason
    assert net.capacity("primals_1") is not None and net.capacity("no_such_node") is None


def test_flow_drawing_marks_the_cut(traces, tmp_path):
    tr = traces["by_hand"]
    drawing = tr.draw("flow")
    src = drawing.source
    net = tr.flow_network()
    for e in net.cut:
        assert f"{e.tail} -> {e.head}" in src and f"cut: {int(e.capacity)}" in src
    assert "∞" in src
    svg = drawing.svg()
    assert "source" in svg and "sink" in svg
    drawing.save(tmp_path / "flow.png")
    assert (tmp_path / "flow.png").stat().st_size > 1000


def test_flow_leaves_networkx_and_the_graph_alone(traces):
    tr = traces["mlp"]
    before = tr.joint.code
    original = nx.minimum_cut
    from fxviz.analysis.strategy.flow import min_cut_network

    min_cut_network(tr.graph)  # uncached
    assert nx.minimum_cut is original and tr.joint.code == before


def test_flow_of_other_strategies_is_refused(traces):
    with pytest.raises(StrategyError, match="min-cut"):
        traces["by_hand"].flow_network("default")
    with pytest.raises(StrategyError):
        traces["by_hand"].draw("flow", strategy="budget:0.5")


def test_cli_draws_the_flow(tmp_path):
    from fxviz.frontends.cli.entry import main

    out = tmp_path / "flow.svg"
    assert main(["draw", "mlp", "--view", "flow", "-o", str(out)]) == 0
    svg = out.read_text()
    assert "source" in svg and "sink" in svg and "cut: " in svg
