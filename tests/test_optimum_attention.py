"""The optimum over torch's own space, on attention (issue 32 item 4).

torch tags CPU attention (``_scaled_dot_product_flash_attention_for_cpu``) as a seeded random op even
at ``dropout_p=0``; its knapsack recomputes it all the same.  Every reference here is torch's:
its partitioners (each knapsack solver at budgets 0..1, min-cut, the default), its
``torch.utils.flop_counter`` on the eager forward, its own ``torch.compile`` runtime with an fxviz
partitioner against eager autograd.
"""

from __future__ import annotations

import functools

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode

import fxviz
from fxviz.analysis.memory.table import memory_row
from fxviz.analysis.strategy import optimal
from fxviz.core.graph_facts import draws_random, redraws_if_recomputed

BUDGETS = [0.0, 0.1, 0.3, 0.5, 0.7, 1.0]
TORCH_POINTS = ["default", "min_cut"] + [f"budget:{b:g}:{s}" for s in ("dp", "greedy", "ilp") for b in BUDGETS]


class Attention(nn.Module):
    """One causal self-attention block by ``F.scaled_dot_product_attention`` (dropout 0)."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in self.qkv(x).split(c, dim=2))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return x + self.proj(y.transpose(1, 2).reshape(b, t, c))


class TwoBlocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Attention(), nn.LayerNorm(16), Attention())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def _attention(n: int) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    return (Attention() if n == 1 else TwoBlocks()), (torch.randn(2, 8, 16),)


MODELS = {
    "attention": lambda: _attention(1),
    "two_attention_blocks": lambda: _attention(2),
    "mini_gpt": lambda: fxviz.examples.mini_gpt(n_layer=1, n_embd=16, n_head=2, vocab=32, block_size=16, seq=8),
}


@pytest.fixture(scope="module")
def attention_traces():
    out = {}
    for name, make in MODELS.items():
        model, inputs = make()
        out[name] = fxviz.trace(model, *inputs)
    return out


def test_cpu_attention_is_tagged_random_and_draws_nothing(attention_traces):
    tr = attention_traces["attention"]
    sdpa = [n for n in tr.joint.graph.nodes
            if "scaled_dot_product" in str(n.target) and "backward" not in str(n.target)]
    assert sdpa and all(torch.Tag.nondeterministic_seeded in n.target.tags for n in sdpa)  # torch's tag
    assert not any(draws_random(n) or redraws_if_recomputed(n) for n in sdpa)
    # dropout does draw: aot_eager's native_dropout redraws when recomputed; inductor's graph (the
    # default) draws from seeds, and recomputing the seeds redraws
    model, inputs = MODELS["mini_gpt"]()
    gpt = fxviz.trace(model, *inputs, backend="aot_eager").joint.graph
    dropout = [n for n in gpt.nodes if n.target is torch.ops.aten.native_dropout.default]
    assert dropout and all(redraws_if_recomputed(n) for n in dropout)
    seeds = [n for n in attention_traces["mini_gpt"].joint.graph.nodes if "inductor_seeds" in str(n.target)]
    assert seeds and all(redraws_if_recomputed(n) for n in seeds)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_no_torch_strategy_beats_the_optimum(attention_traces, name):
    """Every torch point that recomputes the same program (no redrawn random op) has no negative
    gap, and lies on or above the optimal frontier; ``optimal:0`` is feasible where ``budget:0`` is."""
    tr = attention_traces[name]
    df = tr.memory_table(TORCH_POINTS + ["recompute_all", "optimal:0", "optimal:0.5", "optimal:1"], gaps=True)
    assert df["error"].isna().all(), df[["strategy", "error"]]
    compared = 0
    model = optimal.model_of_joint(tr.graph.gm, tr.graph.num_fwd_outputs)
    for _, r in df.iterrows():
        if r["strategy"].startswith("optimal") or r["recomputed_random_ops"]:
            continue
        assert r["gap_to_optimal_flops"] >= 0 and r["gap_to_optimal_bytes"] >= 0, r.to_dict()
        b, f, t = int(r["saved_activation_bytes"]), int(r["recompute_flops"]), int(r["recompute_bytes"])
        sol = optimal.solve(model, b)
        assert (sol.recompute_flops, sol.recompute_bytes) <= (f, t), (r["strategy"], sol.describe())
        compared += 1
    assert compared >= 4
    budget0 = df[df["strategy"] == "budget:0:dp"].iloc[0]
    opt0 = df[df["strategy"] == "optimal:0"].iloc[0]
    if not budget0["recomputed_random_ops"]:  # budget:0 computes the same program: optimal:0 is as low
        assert opt0["saved_activation_bytes"] <= budget0["saved_activation_bytes"]
    else:  # mini_gpt: the knapsack redraws its dropout masks; the optimum saves them, and no more
        least = optimal.solve_min_bytes(model, int(model.flops.sum()) + 1)
        assert opt0["saved_activation_bytes"] == least.saved_bytes > 0


def test_attention_counts_flops_as_torch_counts_the_same_forward(attention_traces):
    """On CPU, torch's flop counter counts 0 for the flash kernel CPU attention dispatches to; with
    the math kernel (two bmm) it counts the matmuls its SDPA formula counts.  fxviz's forward FLOPs
    equal that count, and exceed the Linears' alone."""
    for name in ("attention", "two_attention_blocks"):
        model, (x,) = MODELS[name]()
        tr = attention_traces[name]
        row = memory_row(tr.graph, tr.partition("min_cut")).values
        math = FlopCounterMode(display=False)
        with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH), math, torch.no_grad():
            model(x)
        linears = FlopCounterMode(display=False)
        with linears, torch.no_grad():
            model(x)  # the CPU flash kernel: torch counts only the Linears
        assert row["forward_flops"] == math.get_total_flops() > linears.get_total_flops()


def test_sweep_pareto_flags_are_equal_for_equal_points(attention_traces):
    """Rows at one point (saved bytes, recompute FLOPs, bytes moved) share one flag, redrawing rows
    included (they have none: they are not ranked); a row no other row dominates is flagged."""
    for name in ("two_attention_blocks", "mini_gpt"):
        sweep = attention_traces[name].memory_sweep([0.0, 0.3, 0.6, 1.0], solver=["dp", "greedy"], optimal=True,
                                                    progress=False)
        by_point: dict = {}
        for _, r in sweep[sweep["error"].isna()].iterrows():
            point = (r["saved_activation_bytes"], r["recompute_flops"], r["recompute_bytes"])
            flag = None if r["pareto"] is pd.NA else bool(r["pareto"])
            assert (flag is None) == bool(r["recomputed_random_ops"]), r.to_dict()
            by_point.setdefault(point, set()).add(flag)
        assert all(len(flags) == 1 for flags in by_point.values()), by_point
        assert sum(len(sweep[(sweep["saved_activation_bytes"] == b) & (sweep["recompute_flops"] == f)
                             & (sweep["recompute_bytes"] == t)]) > 1 for b, f, t in by_point) >= 1
        ranked = [p for p, flags in by_point.items() if None not in flags]
        for p in ranked:  # the flag is the definition
            dominated = any(all(b <= a for a, b in zip(p, q)) and q != p for q in ranked)
            assert by_point[p] == {not dominated}, p


class _CheckpointedDropout(nn.Module):
    def __init__(self, policy: CheckpointPolicy | None) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(16, 32), nn.Linear(32, 16)
        self.policy = policy

    def block(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(F.dropout(torch.relu(self.a(x)), 0.3, True))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        policy = self.policy
        if policy is None:
            return checkpoint(self.block, x, use_reentrant=False).sum()
        context = functools.partial(create_selective_checkpoint_contexts, lambda *_a, **_k: policy)
        return checkpoint(self.block, x, use_reentrant=False, context_fn=context).sum()


@pytest.mark.parametrize("policy", [None, CheckpointPolicy.MUST_RECOMPUTE])
@pytest.mark.parametrize("spec", ["optimal:0", "optimal:1", "recompute_all"])
def test_checkpointed_dropout_is_replayed_as_torch_replays_it(policy, spec):
    """A random op a checkpoint policy marks for recompute is recomputed with its RNG state
    replayed, as torch's min-cut does: the compiled step's gradients are eager autograd's."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    def nop(gm, _inputs):
        return make_boxed_func(gm.forward)

    torch.manual_seed(0)
    model, x = _CheckpointedDropout(policy), torch.randn(4, 16)
    torch.manual_seed(1)
    model(x).backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    torch.compiler.reset()
    fn = fxviz.partitioner(spec)
    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=nop, bw_compiler=nop, partition_fn=fn))
    torch.manual_seed(1)
    compiled(x).backward()
    torch.compiler.reset()
    for got, want in zip((p.grad for p in model.parameters()), expected):
        torch.testing.assert_close(got, want)
    if policy is not None and spec.startswith("optimal"):  # recomputed, with the CPU RNG state saved
        assert fn.solution.saved_bytes >= torch.get_rng_state().numel()
