"""The facts the teaching notebooks state, checked on the torch that runs.

The notebooks show (their prose quotes no counts or node names a torch release can change); the
answers in their "Predict" boxes and the statements around them are checked here, against torch's
own partitioners, config and autograd.  When torch changes, a test here fails and names the
notebook whose text must change.  The notebooks themselves run in tests/test_notebooks.py.
"""

from __future__ import annotations

import functools
import json
import pathlib
import re

import pandas as pd
import pytest
import torch
from torch import nn

import fxviz
from fxviz import _torch

ROOT = pathlib.Path(__file__).parent.parent
pytestmark = pytest.mark.slow


# --- 00: by hand ---------------------------------------------------------------------------------
def _by_hand(x, w):
    return torch.sin(x * w).sum()


@pytest.fixture(scope="module")
def by_hand():
    torch.manual_seed(0)
    x, w = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    return fxviz.trace(_by_hand, x, w), x, w


def test_00_joint_graph_is_forward_plus_autograd_grad(by_hand):
    tr, x, w = by_hand
    tangent = torch.tensor(3.0)
    (loss,), grads = tr.joint([x.detach(), w.detach()], [tangent])
    expected = torch.autograd.grad(_by_hand(x, w), (x, w), grad_outputs=tangent)
    assert torch.allclose(loss, _by_hand(x, w))
    assert all(torch.allclose(a, b) for a, b in zip(grads, expected))


def test_00_the_names_its_prose_walks_through(by_hand):
    """Notebook 00 reads the joint graph line by line: these names, and mul_3 = grad x, mul_2 = grad w."""
    tr, _, _ = by_hand
    names = [n.name for n in tr.joint.graph.nodes if n.op != "output"]
    assert names == ["primals_1", "primals_2", "tangents_1", "mul", "sin", "sum_1", "expand", "cos", "mul_1",
                     "mul_2", "mul_3"]
    outputs = [a.name for a in next(n for n in tr.joint.graph.nodes if n.op == "output").args[0]]
    assert outputs == ["sum_1", "mul_3", "mul_2"]  # loss, then the gradients of x and w


def test_00_what_default_and_min_cut_save(by_hand):
    tr, _, _ = by_hand
    inputs = [n for n in tr.nodes.index if tr.nodes.loc[n, "role"] == "primal"]
    default, min_cut = tr.partition("default"), tr.partition("min_cut")
    mul = [n for n in default.saved if n not in inputs]
    assert sorted(default.saved) == sorted(inputs + mul) and len(mul) == 1 and tr.nodes.loc[mul[0], "short_op"] == "mul"
    assert sorted(min_cut.saved) == sorted(inputs) and min_cut.recomputed == set(mul)
    table = tr.memory_table(["default", "min_cut"]).set_index("strategy")
    assert table.loc["default", "backward_peak_bytes"] == table.loc["min_cut", "backward_peak_bytes"]
    # the hand cut: cutting mul alone does not separate source from sink; the inputs' edges do
    net = tr.flow_network()
    assert {e.node for e in net.cut} == set(inputs)
    assert net.capacity(mul[0]) is not None and net.capacity(mul[0]) > 0


def test_00_capacities_follow_torchs_weights(by_hand):
    """solve_min_cut's get_node_weight: int(size * 1.1 ** max(min(dist_from_bw, 100), 1)), doubled when
    every user could fuse with the node; the notebook's table of ratios reads this off."""
    tr, _, _ = by_hand
    net, size = tr.flow_network(), tr.nodes["bytes"]
    forward = tr.nodes[(tr.nodes["phase"] == "forward") & (tr.nodes["op"] == "call_function")]
    by_op = dict(zip(forward["short_op"], forward.index))  # mul, sin, sum: one of each
    inputs = [n for n in tr.nodes.index if tr.nodes.loc[n, "role"] == "primal"]
    assert all(net.capacity(n) == int(size[n] * 1.1) for n in inputs)
    assert net.capacity(by_op["mul"]) == 2 * int(size[by_op["mul"]] * 1.1)
    assert net.capacity(by_op["sin"]) == 2 * int(size[by_op["sin"]] * 1.1 ** 100)
    assert net.capacity(by_op["sum"]) == int(size[by_op["sum"]] * 1.1 ** 100)


# --- 01: partitioning explained ------------------------------------------------------------------
@pytest.fixture(scope="module")
def chain():
    model, (x,) = fxviz.examples.pointwise_chain()
    return fxviz.trace(model, x)


def _no_materialized_ban(joint, inputs, **kwargs):
    with _torch.functorch_config.patch(ban_recompute_materialized_backward=False):
        return _torch.min_cut_partition(joint, inputs, **kwargs)


def test_01_min_cut_saves_less_and_the_materialized_ban_is_not_about_memory(chain):
    t = chain.memory_table(["default", "min_cut", _no_materialized_ban]).set_index("strategy")
    saved = t["saved_activation_bytes"]
    no_ban = next(s for s in t.index if s.startswith("callable:"))
    assert saved["min_cut"] < saved["default"]
    assert saved[no_ban] < saved["min_cut"]  # lifting the ban does save memory
    assert t.loc[no_ban, "recomputed_ops"] > t.loc["min_cut", "recomputed_ops"]
    # "recompute_bytes: several times the bytes they save"; 0 FLOPs for pointwise recomputation
    assert t.loc["min_cut", "recompute_bytes"] > 2 * (saved["default"] - saved["min_cut"])
    assert t.loc["min_cut", "recompute_flops"] == 0
    # saved is not peak: the same backward peak
    assert t.loc["min_cut", "backward_peak_bytes"] == t.loc["default", "backward_peak_bytes"]
    assert t.loc["min_cut", "forward_peak_bytes"] < t.loc["default", "forward_peak_bytes"]


def test_01_parameters_are_free_to_save_under_torch_compile(chain):
    net = chain.flow_network()
    params = [n for n in chain.nodes.index if chain.nodes.loc[n, "role"] == "parameter"]
    assert params and all(net.capacity(p) == 0 for p in params if net.capacity(p) is not None)
    assert _torch.functorch_config.treat_parameters_as_free_to_save


def test_01_bans_carry_torch_reasons(chain):
    bans = {e.head[:-3]: e.reason for e in chain.flow_network().edges if e.tail == "source"}
    ops = chain.nodes["short_op"]
    assert any("materialized in backward" in r for n, r in bans.items() if ops[n] == "sigmoid")
    assert any("allowlist" in r for n, r in bans.items() if ops[n] == "addmm")


@pytest.fixture(scope="module")
def gpt():
    model, inputs = fxviz.examples.mini_gpt(n_layer=2, n_embd=32, n_head=4, vocab=64, block_size=32, seq=16)
    return fxviz.trace(model, *inputs)


def test_01_gpt_min_cut_saves_about_what_default_saves(gpt):
    raw = gpt.memory_table(["default", "min_cut"]).set_index("strategy")["saved_activation_bytes"]
    assert abs(raw["min_cut"] - raw["default"]) <= 0.01 * raw["default"]


def test_01_dead_dropouts_depend_on_the_tracing_context(gpt):
    """Notebook 01: inside a TracingContext (every torch.compile run, and fxviz) dead-code elimination
    treats random ops as pure (``fallback_random`` off), so the default backward runs no dead dropout;
    torch's default_partition called outside one keeps them (``Graph.eliminate_dead_code``)."""
    from fxviz import _torch

    def dropouts(bw):
        return [n for n in bw.graph.nodes if n.target is torch.ops.aten.native_dropout.default]

    assert dropouts(gpt.partition("default").backward) == []
    g = gpt.graph
    with _torch.quiet_torch():
        _, bw = _torch.default_partition(_torch.copy_graph_module(g.gm), g.joint_inputs,
                                         num_fwd_outputs=g.num_fwd_outputs,
                                         static_lifetime_input_indices=g.static_lifetime_input_indices)
    dead = dropouts(bw)
    assert dead and all(len(n.users) == 0 for n in dead)
    assert not gpt.partition("default").recomputed  # the notebook: it recomputes nothing under torch.compile


def test_01_gpt_collapses_in_drawings(gpt):
    from fxviz.render.views import NODE_LIMIT

    assert int((gpt.nodes["op"] != "output").sum()) > NODE_LIMIT


# --- 02: what torch.compile runs -----------------------------------------------------------------
def test_02_inductor_decomposes_then_passes_remove_ops():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))
    x = torch.randn(2, 8)
    eager_style, compiled = fxviz.trace(model, x), fxviz.trace(model, x, backend="inductor")

    def ops(gm):
        return sum(1 for n in gm.graph.nodes if n.op == "call_function" and hasattr(n.target, "overloadpacket"))

    assert ops(compiled.graph.before_joint_passes) > ops(eager_style.joint)
    assert ops(compiled.joint) < ops(compiled.graph.before_joint_passes)
    e, c = eager_style.partition("min_cut"), compiled.partition("min_cut")
    assert any(eager_style.nodes.loc[n, "short_op"] == "gelu" for n in e.saved)
    assert not any(compiled.nodes.loc[n, "short_op"] == "gelu" for n in c.saved)
    bytes_ = [t.memory_table(["min_cut"])["saved_activation_bytes"].iloc[0] for t in (eager_style, compiled)]
    assert bytes_[0] == bytes_[1]
    assert compiled.graph.compiler == "inductor"


# --- 03: memory budget ---------------------------------------------------------------------------
BUDGETS = [0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]


def test_03_budget_bounds_torchs_own_ratio(gpt):
    """(est(saved) - est(inputs)) / (est(min_cut) - est(inputs)), est = torch's _size_of sum."""
    nodes = {n.name: n for n in gpt.joint.graph.nodes}
    inputs = [n for n in gpt.joint.graph.nodes if n.op == "placeholder" and not _torch.is_tangent(n)]

    def est(names):
        return sum(_torch.torch_size_of(nodes[s]) for s in names)

    est_inputs = sum(_torch.torch_size_of(n) for n in inputs)
    est_min_cut = est(gpt.partition("min_cut").saved)
    t = gpt.memory_table(["budget:0"] + [f"budget:{b}" for b in BUDGETS]).set_index("strategy")
    assert t.loc["budget:0:dp", "torch_estimate_bytes"] == est_inputs  # what the notebook computes it from
    for b in BUDGETS:
        ratio = (est(gpt.partition(f"budget:{b}").saved) - est_inputs) / (est_min_cut - est_inputs)
        assert ratio <= b + 1e-9, (b, ratio)
        assert t.loc[f"budget:{b}:dp", "torch_estimate_bytes"] == est(gpt.partition(f"budget:{b}").saved)


def test_03_budget_zero_vs_recompute_all(gpt):
    t = gpt.memory_table(["min_cut", "budget:0", "recompute_all"]).set_index("strategy")
    assert t.loc["budget:0:dp", "saved_activation_bytes"] == 0 and t.loc["budget:0:dp", "recomputed_random_ops"] > 0
    assert t.loc["recompute_all", "saved_activation_bytes"] > 0 and t.loc["recompute_all", "recomputed_random_ops"] == 0
    # saved is not peak: budget 0 peaks in the backward as min-cut does
    assert t.loc["budget:0:dp", "backward_peak_bytes"] == t.loc["min_cut", "backward_peak_bytes"]
    assert t.loc["budget:0:dp", "forward_peak_bytes"] < t.loc["min_cut", "forward_peak_bytes"]


def test_03_rng_functionalization_is_off_by_default():
    assert _torch.functorch_config.functionalize_rng_ops is False


def test_03_pareto_front_leaves_out_redrawing_partitions_and_the_plot_says_so(gpt):
    sweep = gpt.memory_sweep(progress=False)
    ok = sweep[sweep["error"].isna()]
    redraw = ok["recomputed_random_ops"] > 0
    assert redraw.any() and not ok.loc[redraw, "pareto"].any()
    fig = sweep.pareto_plot()
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any("redraws dropout" in lab for lab in labels)
    # the lowest budget at 0 FLOPs redraws dropout (the notebook's "looks free" pick)
    free = ok[ok["recompute_flops"] == 0]
    assert free.loc[free["saved_activation_bytes"].idxmin(), "recomputed_random_ops"] > 0


# --- 04: checkpointing ---------------------------------------------------------------------------
class _MLP(nn.Module):
    def __init__(self, checkpointed=False, context_fn=None, width=256, depth=4):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Sequential(nn.Linear(width, width), nn.GELU()) for _ in range(depth)])
        self.checkpointed, self.context_fn = checkpointed, context_fn

    def forward(self, x):
        from torch.utils.checkpoint import checkpoint

        for layer in self.layers:
            if self.checkpointed:
                kwargs = {"context_fn": self.context_fn} if self.context_fn else {}
                x = checkpoint(layer, x, use_reentrant=False, **kwargs)
            else:
                x = layer(x)
        return x.sum()


def _save_matmuls(ctx, op, *args, **kwargs):
    from torch.utils.checkpoint import CheckpointPolicy

    if op in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
        return CheckpointPolicy.MUST_SAVE
    return CheckpointPolicy.PREFER_RECOMPUTE


@pytest.fixture(scope="module")
def mlps():
    from torch.utils.checkpoint import create_selective_checkpoint_contexts

    x = torch.randn(512, 256)
    return (fxviz.trace(_MLP(), x), fxviz.trace(_MLP(True), x),
            fxviz.trace(_MLP(True, functools.partial(create_selective_checkpoint_contexts, _save_matmuls)), x))


def test_04_checkpointing(mlps):
    plain, ckpt, sac = mlps
    assert [n.name for n in ckpt.joint.graph.nodes] == [n.name for n in plain.joint.graph.nodes]
    policy = ckpt.nodes["checkpoint_policy"]
    saved = set(ckpt.partition("min_cut").saved)
    region = ckpt.nodes["checkpoint_region"]
    nodes = {n.name: n for n in ckpt.joint.graph.nodes}
    # prefer_recompute acts as must-recompute, except a region's output that a later region reads
    # (torch's cleanup_recompute_tags makes it MUST_SAVE): the boundaries are saved, nothing else
    boundary = {n for n in policy[policy == "prefer_recompute"].index
                if any(u.name in region.index and pd.notna(region[u.name]) and region[u.name] > region[n]
                       for u in nodes[n].users)}
    assert boundary and saved & set(policy[policy == "prefer_recompute"].index) == boundary
    sac_policy = sac.nodes["checkpoint_policy"]
    assert set(sac_policy[sac_policy == "must_save"].index) <= set(sac.partition("min_cut").saved)
    rows = {name: t.memory_table([s]).iloc[0] for name, (t, s) in
            {"plain": (plain, "min_cut"), "ckpt": (ckpt, "min_cut"), "sac": (sac, "min_cut"),
             "budget0": (plain, "budget:0")}.items()}
    assert rows["ckpt"]["recompute_flops"] > 0 and rows["sac"]["recompute_flops"] == 0
    assert (rows["ckpt"]["saved_activation_bytes"] < rows["sac"]["saved_activation_bytes"]
            < rows["plain"]["saved_activation_bytes"])
    assert rows["budget0"]["saved_activation_bytes"] < rows["ckpt"]["saved_activation_bytes"]
    peak = {k: r["backward_peak_bytes"] for k, r in rows.items()}
    assert peak["ckpt"] < peak["sac"] < peak["plain"]
    assert rows["budget0"]["backward_peak_bytes"] == rows["plain"]["backward_peak_bytes"]


def test_04_prefer_recompute_is_must_recompute_in_torch():
    from torch.utils.checkpoint import CheckpointPolicy

    class Node:
        def __init__(self) -> None:
            self.meta = {"recompute": CheckpointPolicy.PREFER_RECOMPUTE}

    from torch._functorch.partitioners import must_recompute  # the function the notebook quotes

    assert must_recompute(Node())


# --- 05: missing gradients -----------------------------------------------------------------------
def test_05_closure_capture_facts():
    model, (x,) = fxviz.examples.alexnet(width=0.25)
    bad, good = fxviz.trace(model, x, params="closure"), fxviz.trace(model, x)
    conv_bw = [n for n in bad.joint.graph.nodes if n.target is torch.ops.aten.convolution_backward.default]
    assert conv_bw and all(list(n.args[-1]) == [True, False, False] for n in conv_bw)
    report = bad.doctor()
    assert not report.healthy and len(report.missing) == len(list(model.parameters()))

    def backward_matmuls(t):
        return list(t.nodes.query("phase == 'backward' and short_op == 'mm'").index)

    assert len(backward_matmuls(good)) == 2 * len(backward_matmuls(bad)) > 0
    assert good.check_gradients()["ok"].all()
    bad_check = bad.check_gradients()
    assert not bad_check["has_gradient"].any() and bad_check["eager_has_gradient"].all()


# --- every notebook ------------------------------------------------------------------------------
NOTEBOOKS = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebooks_ask_before_they_tell(name):
    """Each notebook has Predict prompts, each followed by a collapsed answer and then a cell to run;
    and no assert (the checks live here)."""
    cells = json.loads((ROOT / "notebooks" / name).read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    prompts = [i for i, t in enumerate(text) if cells[i]["cell_type"] == "markdown"
               and re.search(r"\*\*Predict[^*]*:\*\*", t)]
    assert prompts, f"{name} asks no Predict question"
    for i in prompts:
        answer = text[i + 1]
        assert cells[i + 1]["cell_type"] == "markdown" and answer.startswith("<details>"), (name, i)
        assert any(c["cell_type"] == "code" for c in cells[i + 2:i + 4]), (name, i)
    for c, t in zip(cells, text):
        if c["cell_type"] == "code":
            assert not re.search(r"^\s*assert\b", t, re.M), f"{name} still asserts: {t[:80]}"
