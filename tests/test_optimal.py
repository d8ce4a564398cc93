"""The optimal partition: checked against brute force, torch's own partitioners, eager autograd.

Every reference here is independent of the MILP: brute force walks the fx graph itself; torch's
points are torch's partitioners measured by the memory table; gradients come from eager autograd
and from torch's own ``aot_function`` runtime.
"""

from __future__ import annotations

import itertools

import pandas as pd
import pytest
import torch
from torch import fx

import fxviz
from fxviz import _torch
from fxviz.analysis.memory.table import memory_row
from fxviz.analysis.real.gradients import eager_gradients, gradient_outputs, run_joint, run_partition
from fxviz.analysis.strategy import optimal
from fxviz.core.graph_facts import Storages, node_flops, node_traffic

from .conftest import SMALL

TORCH_POINTS = ["default", "min_cut"] + [f"budget:{b}:{s}" for s in ("dp", "greedy", "ilp") for b in (0.2, 0.5, 0.8)]


# --- small graphs ----------------------------------------------------------------------------------
def chain(x, w1, w2):
    """torch's test_ac chain (cos, then (mm, cos) per weight), shortened for brute force."""
    x = x.cos()
    for w in (w1, w2):
        x = torch.mm(x, w).cos()
    return x.sum()


def uneven(x, w1, w2, w3):
    """torch's test_ac uneven chain: one saved input of size [n, width] per weight."""
    return sum(torch.mm(x, w).cos().sum() for w in (w1, w2, w3))


def _tensors(*shapes, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g, requires_grad=True) for s in shapes]


@pytest.fixture(scope="module")
def small_traces():
    mlp_model, mlp_inputs = fxviz.examples.mlp(batch=4, sizes=(8, 16, 16, 4))
    return {
        "chain": fxviz.trace(chain, *_tensors((16, 16), (16, 16), (16, 16))),
        "uneven": fxviz.trace(uneven, *_tensors((16, 16), (16, 48), (16, 16), (16, 32))),
        "mlp": fxviz.trace(mlp_model, *mlp_inputs),
    }


def brute_force_points(tr) -> list[tuple[int, int, int]]:
    """(saved activation bytes, recompute FLOPs, recompute bytes) of every choice of saved forward
    values, walked on the fx graph directly (what the backward reads, back through unsaved
    values), on the graph min-cut and the optimal partition see (dead code out, CSE)."""
    gm = _torch.copy_graph_module(tr.graph.gm)
    _torch.cse_like_min_cut(gm)
    nodes = list(gm.graph.nodes)
    backward: set[fx.Node] = set()
    for n in nodes:
        if n.op == "placeholder" and "tangents" in n.name:
            backward.add(n)
        if n in backward:
            backward.update(u for u in n.users if u.op != "output")
    forward = [n for n in nodes if n.op == "call_function" and n not in backward]
    outs = list(nodes[-1].args[0])[tr.graph.num_fwd_outputs:]
    reads = [n for n in forward if n in outs or any(u in backward for u in n.users)]
    storages = Storages(gm)
    free = {storages.key(n.meta["val"]) for n in nodes if n.op in ("placeholder", "get_attr") and n not in backward}
    cost = {n: ((node_flops(n), node_traffic(n)) if tr.graph.info[n.name].phase == "forward" else (0, 0))
            for n in forward}
    ancestors: set[fx.Node] = set()  # saving anything else only adds bytes
    todo = list(reads)
    while todo:
        n = todo.pop()
        if n not in ancestors:
            ancestors.add(n)
            todo.extend(a for a in n.all_input_nodes if a in cost)
    candidates = [n for n in forward if n in ancestors and isinstance(n.meta["val"], torch.Tensor)
                  and storages.key(n.meta["val"]) not in free]
    assert len(candidates) <= 16, len(candidates)  # brute force stays brute
    points = []
    for k in range(len(candidates) + 1):
        for saved in itertools.combinations(candidates, k):
            keep = set(saved)
            seen: set[fx.Node] = set()
            todo = [n for n in reads if n not in keep]
            feasible = True
            while todo:
                n = todo.pop()
                if n in seen:
                    continue
                if _torch.is_random(n):
                    feasible = False
                    break
                seen.add(n)
                todo.extend(a for a in n.all_input_nodes if a in cost and a not in keep)
            if not feasible:
                continue
            nbytes = sum(storages.nbytes(k) for k in {storages.key(n.meta["val"]) for n in saved})
            points.append((nbytes, sum(cost[n][0] for n in seen), sum(cost[n][1] for n in seen)))
    return points


@pytest.mark.parametrize("name", ["chain", "uneven", "mlp"])
def test_brute_force_finds_the_same_optimum(small_traces, name):
    tr = small_traces[name]
    points = brute_force_points(tr)
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    budgets = sorted({p[0] for p in points})
    assert len(budgets) >= 3  # a real trade-off to get right
    for b in budgets + [budgets[-1] * 2]:
        best = min((f, t, nb) for nb, f, t in points if nb <= b)
        sol = optimal.solve(model, b)
        assert sol.optimal
        assert (sol.recompute_flops, sol.recompute_bytes, sol.saved_bytes) == best, b
    # the other side of the trade-off: least bytes under a FLOP cap
    for cap in sorted({p[1] for p in points}):
        best = min((nb, f, t) for nb, f, t in points if f <= cap)
        sol = optimal.solve_min_bytes(model, cap)
        assert (sol.saved_bytes, sol.recompute_flops, sol.recompute_bytes) == best, cap


@pytest.mark.parametrize("name", ["chain", "uneven", "mlp"])
def test_optimal_partition_is_what_the_memory_table_measures(small_traces, name):
    """The solver's own numbers equal the memory table's, measured on torch's extracted graphs."""
    tr = small_traces[name]
    for spec in ("optimal:0", "optimal:0.5", "optimal:1"):
        p = tr.partition(spec)
        assert p.ok, p.error
        row = memory_row(tr.graph, p).values
        sol = p.solution
        assert sol.optimal and "optimal" in sol.describe()
        assert (row["saved_activation_bytes"], row["recompute_flops"], row["recompute_bytes"]) == \
            (sol.saved_bytes, sol.recompute_flops, sol.recompute_bytes)
        assert sol.saved_bytes <= sol.budget_bytes
        assert set(p.recomputed) == set(sol.recomputed)


# --- torch's test_ac chains at full size -------------------------------------------------------------
@pytest.fixture(scope="module")
def ac_traces():
    def chain5(x, *ws):
        x = x.cos()
        for w in ws:
            x = torch.mm(x, w).cos()
        return x.sum()

    def uneven4(x, *ws):
        return sum(torch.mm(x, w).cos().sum() for w in ws)

    return {
        "even": fxviz.trace(chain5, *_tensors((512, 512), *[(512, 512)] * 5)),
        "uneven": fxviz.trace(uneven4, *_tensors((512, 512), *[(512, w * 512) for w in (11, 3, 4, 2)])),
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", ["even", "uneven"])
def test_ac_chains_optimal_beats_the_knapsack_at_every_budget(ac_traces, name):
    tr = ac_traces[name]
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    reference = memory_row(tr.graph, tr.partition("min_cut")).values["saved_activation_bytes"]
    assert reference > 0
    for k in range(11):
        p = tr.partition(f"optimal:{k / 10:g}")
        assert p.ok and p.solution.optimal, p.error
        row = memory_row(tr.graph, p).values
        assert row["saved_activation_bytes"] <= k / 10 * reference
        knapsack = memory_row(tr.graph, tr.partition(f"budget:{k / 10:g}")).values
        if knapsack["saved_activation_bytes"] <= row["saved_activation_bytes"]:
            assert row["recompute_flops"] <= knapsack["recompute_flops"], k
        # wherever torch's budget lands, the optimum at its bytes recomputes no more
        at_same = optimal.solve(model, knapsack["saved_activation_bytes"])
        assert at_same.recompute_flops <= knapsack["recompute_flops"], k


# --- no torch point below the frontier ---------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SMALL))
def test_no_torch_strategy_lies_below_the_frontier(traces, name):
    """A torch partition that saves b bytes and recomputes f FLOPs (then t bytes moved) proves the
    optimum at budget b is at most (f, t): a point strictly below means the model is wrong.
    Partitions that recompute a random op are not partitions of the same program (the backward
    draws a new mask: test_partition shows their gradients differ), so they are set aside, and
    counted."""
    tr = traces[(name, "lifted")]
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    compared = 0
    for spec in TORCH_POINTS:
        p = tr.partition(spec)
        assert p.ok, p.error
        if p.recomputed_random:
            continue
        row = memory_row(tr.graph, p).values
        b, f, t = row["saved_activation_bytes"], row["recompute_flops"], row["recompute_bytes"]
        sol = optimal.solve(model, b)
        assert sol.optimal
        assert (sol.recompute_flops, sol.recompute_bytes) <= (f, t), (spec, (b, f, t), sol.describe())
        assert optimal.solve_min_bytes(model, f).saved_bytes <= b, spec
        compared += 1
    assert compared >= 2  # default and min_cut at least


# --- the partitions run ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["mlp", "pointwise_chain", "resnet_block", "mini_gpt", "alexnet"])
@pytest.mark.parametrize("spec", ["optimal:0.3", "optimal:1"])
def test_optimal_partitions_compute_eager_gradients(traces, name, spec):
    tr = traces[(name, "lifted")]
    graph = tr.graph
    p = tr.partition(spec)
    if not p.ok:  # a budget below what random ops' outputs need: said plainly
        assert "InfeasibleBudget" in p.error and "least possible" in p.error
        return
    assert not p.recomputed_random
    rng = torch.get_rng_state()
    joint_out = run_joint(graph, {k: (v.clone() if graph.info[k].role == "buffer" else v)
                                  for k, v in graph.placeholder_values.items()})
    torch.set_rng_state(rng)
    grads = run_partition(graph, p)
    torch.set_rng_state(rng)
    for j, qual, role in gradient_outputs(graph):
        if role == "parameter":
            torch.testing.assert_close(grads[qual], joint_out[j], rtol=1e-4, atol=1e-5)
    if name in ("mlp", "pointwise_chain", "resnet_block"):  # no dropout: eager draws nothing
        eager = eager_gradients(tr.capture, {"cpu": torch.get_rng_state()})
        for qual, g in eager.items():
            if g is not None and qual in grads:
                torch.testing.assert_close(grads[qual], g, rtol=1e-4, atol=1e-5)


def test_partitioner_inside_aot_function_gives_eager_gradients():
    from functorch.compile import aot_function, make_boxed_func

    def nop(gm, _inputs):
        return make_boxed_func(gm.forward)

    def f(x, w1, b1, w2):
        return (torch.mm(torch.tanh(torch.mm(x, w1) + b1), w2).cos() ** 2).sum()

    args = _tensors((8, 16), (16, 32), (32,), (32, 4), seed=3)
    expected = torch.autograd.grad(f(*args), args)
    fn = fxviz.partitioner("optimal:0.5")
    compiled = aot_function(f, fw_compiler=nop, bw_compiler=nop, partition_fn=fn)
    got = torch.autograd.grad(compiled(*args), args)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    assert fn.solution is not None and fn.solution.optimal
    assert fn.solution.saved_bytes <= fn.solution.budget_bytes
    with pytest.raises(fxviz.StrategyError, match="not a partitioner"):
        fxviz.partitioner("eager")
    # min_cut is torch's min-cut without a memory budget, whatever torch's config says when it runs
    plain = fxviz.partitioner("min_cut")
    with _torch.budget_config(0.0, "dp"):
        got = torch.autograd.grad(aot_function(f, fw_compiler=nop, bw_compiler=nop, partition_fn=plain)(*args), args)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)


# --- limits and failures ---------------------------------------------------------------------------
def test_infeasible_budget_is_a_plain_error(traces):
    tr = traces[("mini_gpt", "lifted")]
    p = tr.partition("optimal:1B")  # what dropout draws from must be saved
    # inductor's graph (the default): the seeds every mask is drawn from (aot_eager's: the masks, getitem)
    assert not p.ok and "least possible" in p.error and "inductor_lookup_seed" in p.error
    assert p.solution is not None and p.solution.status == "infeasible"
    # optimal:0 is the floor of the range optimal:B spans (as budget:0 is torch's): the least possible
    least = tr.partition("optimal:0")
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    floor = optimal.solve_min_bytes(model, int(model.flops.sum()) + 1).saved_bytes
    assert least.ok and least.solution.saved_bytes == floor > 0


def test_time_limit_reports_a_bound_never_an_optimum():
    """With too little time, a solve says what it found and what it proved (measured: a 6-layer
    tiny GPT at 0.05 s gives 'bound' with a 79% MIP gap); never 'optimal' unless proven."""
    model_, inputs = fxviz.examples.mini_gpt(n_layer=6, n_embd=32, n_head=4, vocab=64, block_size=32, seq=16)
    tr = fxviz.trace(model_, *inputs)
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    budget = model.saved_bytes(model.names) // 3
    best = optimal.solve(model, budget)
    assert best.optimal
    for limit in (1e-4, 0.05, 0.3):
        sol = optimal.solve(model, budget, time_limit=limit)
        if sol.status == "bound":
            assert "bound" in sol.describe() and "optimal" not in sol.describe()
            assert sol.bound is not None and sol.bound <= best.recompute_flops + 1e-6 <= sol.recompute_flops + 1e-6
            assert sol.saved_bytes <= budget
        elif sol.status == "timeout":
            assert not sol.saved and "timeout" in sol.describe()
        else:  # proven within the limit: then it is the optimum
            assert sol.optimal and sol.recompute_flops == best.recompute_flops


# --- the memory table's gaps and the sweep's frontier ------------------------------------------------
def test_memory_table_gaps_match_brute_force(small_traces):
    tr = small_traces["chain"]
    points = brute_force_points(tr)
    df = tr.memory_table(["default", "min_cut", "recompute_all", "budget:0.5", "optimal:0.5"])
    assert {"gap_to_optimal_flops", "gap_to_optimal_bytes"} <= set(df.columns)
    for _, r in df.iterrows():
        b, f = int(r["saved_activation_bytes"]), int(r["recompute_flops"])
        best_flops = min(pf for pb, pf, _ in points if pb <= b)
        best_bytes = min(pb for pb, pf, _ in points if pf <= f)
        assert r["gap_to_optimal_flops"] == f - best_flops, r["strategy"]
        assert r["gap_to_optimal_bytes"] == b - best_bytes, r["strategy"]
    assert df.loc[df["strategy"] == "optimal:0.5", "gap_to_optimal_flops"].item() == 0
    assert "gap_to_optimal_flops" in df.attrs["caption"]
    # the default table stays fast: no gaps unless asked
    plain = tr.memory_table(["default", "min_cut"])
    assert plain["gap_to_optimal_flops"].isna().all()
    # shown only where a strategy has one: an empty row says nothing (the frame keeps the column)
    assert "gap_to_optimal" not in plain.to_text() and "gap to optimal" not in plain.styled().to_html()
    gapped = tr.memory_table(["default"], gaps=True)
    assert gapped["gap_to_optimal_flops"].notna().all() and "gap_to_optimal_flops" in gapped.to_text()


def test_memory_table_leaves_measured_and_redrawing_rows_without_gaps(traces, example_models):
    # inductor's graph (the default): random ops draw from saved seeds, so the knapsack replays its
    # masks (no redraw) and has a gap like any partition, never a negative one
    by = {r["strategy"]: r for _, r in traces[("mini_gpt", "lifted")].memory_table(
        ["min_cut", "budget:0.5"], gaps=True).iterrows()}
    assert by["budget:0.5:dp"]["gap_to_optimal_flops"] >= 0 and by["budget:0.5:dp"]["gap_to_optimal_bytes"] >= 0
    model, inputs = example_models["mini_gpt"]
    tr = fxviz.trace(model, *inputs, backend="aot_eager")  # native_dropout: a recomputed mask is redrawn
    df = tr.memory_table(["min_cut", "budget:0.5", "eager"], gaps=True)
    by = {r["strategy"]: r for _, r in df.iterrows()}
    assert by["min_cut"]["gap_to_optimal_flops"] == 0
    assert by["min_cut"]["gap_to_optimal_bytes"] > 0  # min-cut keeps bytes it could recompute for free FLOPs
    for name in ("budget:0.5:dp", "eager"):  # the knapsack redraws dropout here; eager is measured
        assert by[name]["gap_to_optimal_flops"] is pd.NA or pd.isna(by[name]["gap_to_optimal_flops"])
    assert "No gap for budget:0.5:dp, eager" in df.attrs["caption"]


def test_sweep_shows_every_torch_point_against_the_frontier(small_traces, artifacts):
    tr = small_traces["uneven"]
    sweep = tr.memory_sweep([0.0, 0.25, 0.5, 0.75, 1.0], solver=["dp", "greedy"], optimal=True, progress=False)
    assert set(sweep["kind"]) == {"budget", "optimal", "default", "min_cut"}
    opt = sweep[(sweep["kind"] == "optimal") & sweep["error"].isna()]
    assert (opt["status"] == "optimal").all()
    frontier = {int(r["saved_activation_bytes"]): (int(r["recompute_flops"]), int(r["recompute_bytes"]))
                for _, r in opt.iterrows()}
    for _, r in sweep[(sweep["kind"] != "optimal") & sweep["error"].isna()].iterrows():
        if r["recomputed_random_ops"]:
            continue
        b = int(r["saved_activation_bytes"])
        assert b in frontier  # the optimum was solved at every torch point's bytes
        assert frontier[b] <= (int(r["recompute_flops"]), int(r["recompute_bytes"])), r["strategy"]
    assert opt["pareto"].all()
    fig = sweep.pareto_plot()
    path = artifacts / "optimal_frontier_uneven.png"
    fig.savefig(path)
    assert path.stat().st_size > 10_000
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "optimal frontier (MILP)" in labels and "torch min_cut" in labels


def test_partitioner_time_limit_is_passed_to_highs():
    fn = fxviz.partitioner("optimal:0.5", time_limit=5)
    assert fn.time_limit == 5.0
    with pytest.raises(fxviz.StrategyError, match="time_limit"):
        fxviz.partitioner("min_cut", time_limit=5)
