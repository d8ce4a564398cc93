"""Partitions: exactly what torch's partitioners do, on a copy, mapped back to joint names."""

from __future__ import annotations

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.analysis.real.gradients import gradient_outputs, run_joint, run_partition

from .conftest import SMALL

TORCH_STRATEGIES = ["default", "min_cut", "budget:0.5", "budget:0.2:greedy"]


def _direct(graph, strategy):
    """torch's partitioner called directly, the reference fxviz must agree with."""
    gm = _torch.copy_graph_module(graph.gm)
    kwargs = dict(num_fwd_outputs=graph.num_fwd_outputs,
                  static_lifetime_input_indices=graph.static_lifetime_input_indices)
    with _torch.quiet_torch():
        if strategy == "default":
            return _torch.default_partition(gm, graph.joint_inputs, **kwargs)
        if strategy == "min_cut":
            return _torch.min_cut_partition(gm, graph.joint_inputs, **kwargs)
        _, b, *solver = strategy.split(":")
        with torch._functorch.config.patch(activation_memory_budget=float(b),
                                           activation_memory_budget_solver=(solver or ["dp"])[0]):
            return _torch.min_cut_partition(gm, graph.joint_inputs, **kwargs)


@pytest.mark.parametrize("name", sorted(SMALL))
@pytest.mark.parametrize("strategy", TORCH_STRATEGIES)
def test_saved_matches_torch_directly(traces, name, strategy):
    tr = traces[(name, "lifted")]
    code_before = tr.joint.code
    nodes_before = [(n.name, n.op, str(n.target)) for n in tr.joint.graph.nodes]
    p = tr.partition(strategy)
    assert p.ok, p.error
    fwd, bwd = _direct(tr.graph, strategy)
    torch_saved = [n.name for n in list(fwd.graph.nodes)[-1].args[0][tr.graph.num_fwd_outputs:]]
    assert p.saved == torch_saved
    bwd_inputs = {n.name for n in bwd.graph.nodes if n.op == "placeholder"}
    tangents = {n for n, i in tr.graph.info.items() if i.role == "tangent"}
    assert bwd_inputs - tangents == set(torch_saved)
    # the Trace's joint graph is untouched by the (mutating) partitioner
    assert tr.joint.code == code_before
    assert [(n.name, n.op, str(n.target)) for n in tr.joint.graph.nodes] == nodes_before
    # every forward/backward node maps to a joint node
    joint = {n.name for n in tr.joint.graph.nodes}
    assert set(p.fw_to_joint.values()) <= joint and set(p.bw_to_joint.values()) <= joint
    fw_ops = {n.name for n in p.forward.graph.nodes if n.op == "call_function"}
    assert fw_ops <= set(p.fw_to_joint)
    # recomputed = joint forward ops that the backward runs
    bw_ops = {n.name for n in p.backward.graph.nodes if n.op == "call_function"}
    expected = {n for n in bw_ops if tr.graph.info[n].phase == "forward"}
    assert p.recomputed == expected
    present = set(p.fw_to_joint.values()) | set(p.bw_to_joint.values())
    assert p.removed == {n for n in joint if n not in present and n != "output"}


def test_partition_is_cached(traces):
    tr = traces[("mlp", "lifted")]
    assert tr.partition("min_cut") is tr.partition("min_cut")
    assert tr.partition("budget:0.5") is tr.partition("budget:0.5:dp")


@pytest.mark.parametrize("name", ["mlp", "pointwise_chain", "resnet_block", "mini_gpt"])
@pytest.mark.parametrize("strategy", TORCH_STRATEGIES + ["recompute_all"])
def test_partitions_compute_the_joint_gradients(traces, name, strategy):
    tr = traces[(name, "lifted")]
    graph = tr.graph
    rng = torch.get_rng_state()
    joint_out = run_joint(graph, {k: (v.clone() if graph.info[k].role == "buffer" else v)
                                  for k, v in graph.placeholder_values.items()})
    torch.set_rng_state(rng)
    p = tr.partition(strategy)
    grads = run_partition(graph, p)
    torch.set_rng_state(rng)
    params = [(j, qual) for j, qual, role in gradient_outputs(graph) if role == "parameter"]
    if not p.recomputed_random:
        for j, qual in params:
            torch.testing.assert_close(grads[qual], joint_out[j], rtol=1e-4, atol=1e-5)
    else:
        # fxviz flags partitions whose backward redraws dropout masks; the flag is earned:
        # the gradients really differ from the joint graph's
        assert any(not torch.allclose(grads[q], joint_out[j], rtol=1e-4, atol=1e-5) for j, q in params)


def test_budget_knapsack_recomputes_dropout_on_cpu(example_models):
    """torch 2.13's activation-memory-budget knapsack recomputes native_dropout in the backward
    (plain min_cut never does): without RNG functionalization (CPU) the mask is redrawn.  On
    AOTAutograd's own graph (aot_eager): inductor's passes draw every mask from a seed drawn once, which
    the knapsack saves, and its recomputation replays the same mask (the joint-gradient test above)."""
    model, inputs = example_models["mini_gpt"]
    tr = fxviz.trace(model, *inputs, backend="aot_eager")
    assert not tr.partition("min_cut").recomputed_random
    assert not tr.partition("recompute_all").recomputed_random
    flagged = tr.partition("budget:0.5").recomputed_random
    assert flagged and all(tr.graph.info[n].short_op == "native_dropout" for n in flagged)


def test_pointwise_chain_min_cut_recomputes_pointwise(traces):
    tr = traces[("pointwise_chain", "lifted")]
    d, m = tr.partition("default"), tr.partition("min_cut")
    ops = {tr.graph.info[n].short_op for n in m.recomputed}
    assert ops & {"sin", "cos", "sigmoid", "mul", "add"}
    assert len(m.saved) < len(d.saved)


def test_recompute_all_saves_only_inputs_and_random_values(traces):
    tr = traces[("mini_gpt", "lifted")]
    p = tr.partition("recompute_all")
    for name in p.saved:
        info = tr.graph.info[name]
        is_random = torch.Tag.nondeterministic_seeded in getattr(
            next(n for n in tr.joint.graph.nodes if n.name == name).target, "tags", ())
        assert info.op == "placeholder" or is_random or info.short_op == "getitem", name


def test_closure_joint_never_computes_weight_gradients(traces):
    """What torch 2.13 really does with closure-captured parameters: autograd asks
    convolution_backward for the input gradient only (output_mask [True, False, False]), so no
    weight-gradient work exists for a partitioner to drop (older functorch traced it and left it
    dead).  fxviz reports removed nodes from the partition, not from this assumption."""
    tr = traces[("alexnet", "closure")]
    convs = [n for n in tr.joint.graph.nodes if tr.graph.info[n.name].short_op == "convolution_backward"]
    assert len(convs) == 5 and all(list(n.args[-1]) == [True, False, False] for n in convs)
    p = tr.partition("default")
    assert p.ok and all(tr.graph.info[n].role != "gradient" for n in p.removed)


def test_failing_strategy_is_an_error_partition_not_a_crash(traces):
    def broken(gm, joint_inputs, *, num_fwd_outputs, static_lifetime_input_indices=None):
        raise RuntimeError("solver exploded")

    p = traces[("mlp", "lifted")].partition(broken)
    assert not p.ok and "solver exploded" in p.error


def test_user_callable_strategy(traces):
    tr = traces[("mlp", "lifted")]
    p = tr.partition(_torch.default_partition)
    assert p.saved == tr.partition("default").saved


def test_budget_sweep_solves_each_flow_network_once_and_saves_what_torch_saves(traces):
    """A sweep of budgets (``fxviz advise``) shares the flow networks min-cut solves before its knapsack
    (``_torch.partitioners.remembered_min_cuts``): the saved values are torch's own, partitioned without it,
    and networkx is left as it was."""
    import networkx as nx

    from fxviz._torch import partitioners as tp
    from fxviz.analysis.strategy.partition import partition

    solve = nx.minimum_cut
    graph = traces[("mini_gpt", "lifted")].graph
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return solve(*args, **kwargs)

    tp._CUTS.clear()
    nx.minimum_cut = counted
    try:
        sweep = {b: partition(graph, f"budget:{b}") for b in (0.9, 0.7, 0.5, 0.3)}
        solved, calls[:] = len(calls), []
        again = partition(graph, "budget:0.5")
        assert calls == []  # every network of this budget was solved before
    finally:
        nx.minimum_cut = solve
    assert nx.minimum_cut is solve
    assert solved < 4 * 3  # each budget solves the same plain and aggressive networks first
    assert again.saved == sweep[0.5].saved
    for b, p in sweep.items():
        assert p.ok, p.error
        fwd, _ = _direct(graph, f"budget:{b}")  # no memo here: torch as it is
        assert p.saved == [n.name for n in list(fwd.graph.nodes)[-1].args[0][graph.num_fwd_outputs:]]
