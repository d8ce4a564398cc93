"""What newer torch writes beside a run's graphs (issue 33, item 9), read from logs of real runs the
tests make: the run's ``torch._functorch.config`` (its activation-memory budget, solver, estimator),
torch's own knapsack (``min_cut_information``, written with ``AOT_PARTITIONER_DEBUG=1``), and activation
offloading (torch 2.13 offloads the values a pass marks ``should_offload``)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

import fxviz
from fxviz.analysis.strategy.strategies import Strategy

from .logs_util import make_log
from .test_logs_anywhere import _backward_reads, _records

BUDGET = """
import os
os.environ["AOT_PARTITIONER_DEBUG"] = "1"  # torch logs its knapsack (read when torch is imported)
import torch, torch.nn as nn, torch._functorch.config
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 32)
        self.c = nn.Linear(32, 16)
    def forward(self, x):
        h = torch.relu(self.a(x)) @ self.b.weight
        h = torch.relu(self.b(h)) @ self.b.weight
        return self.c(torch.relu(h)).sum()
torch.manual_seed(0)
torch._functorch.config.activation_memory_budget = 0.2
torch.compile(M(), backend="aot_eager")(torch.randn(64, 16)).backward()
"""

OFFLOAD = """
import torch, torch.nn as nn, torch._functorch.config
class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(32, 16)
    def forward(self, x):
        return self.b(torch.relu(self.a(x))).sum()
def mark(gm, inputs):  # a user's joint pass: offload the ReLU output the backward reads
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is torch.ops.aten.relu.default:
            n.meta["should_offload"] = True
    return gm
torch.manual_seed(0)
torch._functorch.config.enable_activation_offloading = True
torch._functorch.config.joint_custom_pass = mark
torch.compile(M(), backend="aot_eager")(torch.randn(8, 16)).backward()
"""


@pytest.fixture(scope="module")
def budget_log(tmp_path_factory):
    return make_log(BUDGET, tmp_path_factory.mktemp("budget") / "trace")


def test_the_runs_budget_is_read_said_and_replayed(budget_log, capsys):
    """The budget the run's config artifact records is the capture's; ``budget:B`` with it comes right
    after ``logged`` and saves what the run saved (torch's partitioner here against the run's); the
    memory table's caption and the doctor say it."""
    (config,) = [json.loads(p) for _, p in _records(budget_log, {"artifact"}) if '"activation_memory_budget"' in p]
    tr = fxviz.load_logs(budget_log).trace()
    assert tr.capture.torch_budget == (config["activation_memory_budget"], "dp") == (0.2, "dp")
    replay = Strategy.parse("budget:0.2:dp")
    assert tr.offered[:2] == (Strategy("logged"), replay) and tr.offered.count(replay) == 1
    assert sorted(tr.partition(replay).saved) == sorted(tr.partition("logged").saved)
    assert sorted(tr.partition("min_cut").saved) != sorted(tr.partition("logged").saved)  # the budget mattered
    caption = tr.memory_table().attrs["caption"]
    assert "the run's functorch config: activation_memory_budget=0.2, solver dp, estimator flops" in caption
    found = [f for f in tr.doctor().diagnosis.findings if f.kind == "run_config"]
    assert len(found) == 1 and "strategy 'budget:0.2:dp' replays it" in found[0].message


def test_the_runs_knapsack_as_a_table(budget_log, capsys):
    """``Run.knapsack``: every value the run's solver weighed, its bytes as fxviz counts the node, and
    saved or recomputed as the run's backward graph reads it; none where torch logged none."""
    run = fxviz.load_logs(budget_log)
    tr = run.trace()
    df = run.knapsack()
    assert df is not None and len(df)
    ((_, bwd),) = _records(budget_log, {"aot_backward_graph"})
    read = set(_backward_reads(bwd))
    for _, row in df.iterrows():
        assert row["bytes"] == tr.nodes.loc[row["node"], "bytes"]
        assert (row["decision"] == "saved") == (row["node"] in read), row["node"]
    assert "activation_memory_budget=0.2" in df.attrs["caption"]
    from fxviz.frontends.cli.entry import main

    assert main(["table", "--logs", str(budget_log)]) == 0
    out = capsys.readouterr().out
    assert "The run's knapsack (min_cut_information" in out and all(n in out for n in df["node"])


def test_no_knapsack_without_the_debug_flag(tmp_path):
    log = make_log(BUDGET.replace('os.environ["AOT_PARTITIONER_DEBUG"] = "1"', "pass"), tmp_path / "trace")
    run = fxviz.load_logs(log)
    assert run.knapsack() is None and run.trace().capture.torch_budget == (0.2, "dp")


def test_activation_offloading_is_a_fate(tmp_path):
    """A value torch offloaded: the run's backward reads its copy (``cpu_offload_relu``), which fxviz
    describes as the joint value offloaded, in that value's module; the doctor says what moved."""
    log = make_log(OFFLOAD, tmp_path / "trace")
    tr = fxviz.load_logs(log).trace()
    ((_, bwd),) = _records(log, {"aot_backward_graph"})
    assert "cpu_offload_relu" in _backward_reads(bwd)
    p = tr.partition("logged")
    made = p.made["forward:cpu_offload_relu"]
    assert (made.kind, made.wraps) == ("offloaded", "relu") and "relu" not in p.saved
    row = tr.saved("logged").loc["forward:cpu_offload_relu"]
    module = tr.nodes.loc["relu", "module"]  # M.forward's own op: no module, as in a model trace
    assert row["op"] == "offloaded" and (row["module"] == module or (pd.isna(row["module"]) and pd.isna(module)))
    assert row["what"].startswith("`relu` offloaded to cpu by torch's activation offloading")
    found = [f for f in tr.doctor().diagnosis.findings if f.kind == "run_config"]
    assert [f.message for f in found] == ["the run set enable_activation_offloading=True: its forward graph copies "
                                          "1 saved value(s) to the CPU (cpu_offload_relu)"]
    assert tr.memory_table()["error"].isna().all()
