"""Every count fxviz prints has one definition: the same trace prints one consistent set of counts in
``Trace.summary``, ``role_counts``, the piece overview, the memory table and ``fxviz logs`` — for a
model traced now and for a real run's TORCH_TRACE log the test writes.

The references are torch's graphs themselves: the joint graph's nodes and ``call_function`` ops, the
partition's forward/backward graphs as torch's partitioner (or the logged run) returned them.
"""

from __future__ import annotations

import operator
import re

import pytest
import torch

import fxviz
from fxviz.core.graph_facts import graph_op_count, joint_node_count
from fxviz.frontends.cli.entry import main
from fxviz.payloads.pieces import summaries
from fxviz.sources.roles import role_counts

from .logs_util import MINI_GPT, make_log

_SUMMARY = re.compile(r"joint graph of (\d+) nodes \((\d+) forward ops, (\d+) backward ops\)")


def _summary_counts(text: str) -> tuple[int, int, int]:
    m = _SUMMARY.search(text)
    assert m is not None, text
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _check_consistent(tr: fxviz.Trace, strategy: str) -> None:
    gm = tr.joint
    counts = role_counts(tr.graph.info.values())
    nodes, fwd, bwd = _summary_counts(tr.summary())
    # nodes: torch's graph less its output node
    assert nodes == len(gm.graph.nodes) - 1 == joint_node_count(gm.graph.nodes)
    # forward/backward ops are the roles of that name, and every call_function is an op of some role
    assert (fwd, bwd) == (counts["forward"], counts["backward"])
    calls = sum(1 for n in gm.graph.nodes if n.op == "call_function")
    op_roles = sum(1 for i in tr.graph.info.values() if i.op == "call_function")
    assert calls == op_roles
    assert fwd + bwd <= calls and fwd > 0 and bwd > 0
    # the roles line says the same numbers
    assert f"{counts['forward']} forward," in tr.summary() and f"{counts['backward']} backward" in tr.summary()
    # the piece overview's label
    piece = summaries(tr, strategy)[0]
    assert (piece.nodes, piece.forward_ops, piece.backward_ops) == (nodes, fwd, bwd)
    # the memory table counts the partition's graphs, under other names
    df = tr.memory_table([strategy])
    assert "forward_ops" not in df.columns and "backward_ops" not in df.columns
    p = tr.partition(strategy)
    ref_fwd = sum(1 for n in p.forward.graph.nodes if n.op == "call_function" and n.target is not operator.getitem)
    ref_bwd = sum(1 for n in p.backward.graph.nodes if n.op == "call_function" and n.target is not operator.getitem)
    assert int(df["forward_graph_ops"].iloc[0]) == ref_fwd == graph_op_count(p.forward)
    assert int(df["backward_graph_ops"].iloc[0]) == ref_bwd == graph_op_count(p.backward)


def test_a_traced_model_prints_one_set_of_counts():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    tr = fxviz.trace(model, torch.randn(3, 8))
    _check_consistent(tr, "min_cut")


@pytest.fixture(scope="module")
def aot_log(tmp_path_factory):
    return make_log(MINI_GPT, tmp_path_factory.mktemp("counts") / "trace", "aot_eager")


def test_a_logged_run_prints_one_set_of_counts(aot_log, capsys):
    run = fxviz.load_logs(aot_log)
    tr = run.trace()
    _check_consistent(tr, "logged")
    nodes = _summary_counts(tr.summary())[0]
    # `fxviz logs`: its nodes column, counted from the log text, is the summary's count
    assert int(run.graphs["nodes"].iloc[0]) == nodes
    assert main(["logs", str(aot_log)]) == 0
    out = capsys.readouterr().out.splitlines()
    # after the first line (wrapped where the directory is long): the streamed table, values right-aligned
    start = next(i for i, line in enumerate(out) if line.startswith("rank "))
    header, row = out[start], out[start + 1]
    end = re.search(r"\bnodes\b", header).end()
    assert re.search(r"(\d+)$", row[:end]).group(1) == str(nodes), "\n".join(out[:3])
    # `fxviz nodes --logs`: the summary, as the notebook prints it
    assert main(["nodes", "--logs", str(aot_log)]) == 0
    assert _summary_counts(capsys.readouterr().out) == _summary_counts(tr.summary())
