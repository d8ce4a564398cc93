"""Checkpointing made visible: per-node policy and region, marks, and the eager row under
``torch.utils.checkpoint`` (what checkpoint itself holds, what it recomputes), each checked
against torch."""

from __future__ import annotations

import functools

import pandas as pd
import pytest
import torch
from torch import nn
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts
from torch.utils.flop_counter import FlopCounterMode

import fxviz
from fxviz.payloads.panels import node_data

MATMULS = (torch.ops.aten.mm.default, torch.ops.aten.addmm.default)


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 16)
        self.b = nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.nn.functional.gelu(self.a(x)))


class Checkpointed(nn.Module):
    """Two blocks, each its own checkpoint region; ``policy``: a selective-checkpoint policy."""

    def __init__(self, policy=None, regions: bool = True) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.b1, self.b2 = Block(), Block()
        self.policy, self.regions = policy, regions

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kw = {}
        if self.policy is not None:
            kw["context_fn"] = functools.partial(create_selective_checkpoint_contexts, self.policy)
        for block in (self.b1, self.b2):
            x = checkpoint(block, x, use_reentrant=False, **kw) if self.regions else block(x)
        return x.sum()


class OneRegion(nn.Module):
    """One selective-checkpoint region over the whole body: its input is the user's input and its
    output is only summed, so every activation eager holds is in the policy's cache."""

    def __init__(self, policy) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Sequential(Block(), Block())
        self.policy = policy

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ctx = functools.partial(create_selective_checkpoint_contexts, self.policy)
        return checkpoint(self.body, x, use_reentrant=False, context_fn=ctx).sum()


def save_matmuls(ctx, op, *args, **kwargs):
    return CheckpointPolicy.MUST_SAVE if op in MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


def x_input() -> torch.Tensor:
    return torch.randn(4, 8, generator=torch.Generator().manual_seed(1))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
@pytest.mark.parametrize("policy", [None, save_matmuls], ids=["plain", "selective"])
def test_checkpoint_columns_are_torchs_node_metadata(backend, policy):
    tr = fxviz.trace(Checkpointed(policy), x_input(), backend=backend)
    nodes = tr.nodes
    tagged = 0
    for n in tr.joint.graph.nodes:
        if n.op == "output":
            continue
        recompute = n.meta.get("recompute")
        expected = recompute.name.lower() if recompute is not None else None
        got = nodes.loc[n.name, "checkpoint_policy"]
        assert (got if isinstance(got, str) else None) == expected, n.name
        region = n.meta.get("ac_graph_id")
        got_region = nodes.loc[n.name, "checkpoint_region"]
        assert (None if pd.isna(got_region) else int(got_region)) == region, n.name
        tagged += expected is not None
    assert tagged > 0
    assert nodes["checkpoint_region"].dropna().nunique() == 2  # one per checkpoint call
    if policy is not None:
        assert set(nodes["checkpoint_policy"].dropna()) == {"must_save", "prefer_recompute"}
    # marked in the drawing, the explorer/report node records and the memory table's caption
    assert "fx-checkpoint" in tr.draw("joint").source
    records = node_data(tr)
    assert any(r["checkpoint_policy"] for r in records.values())
    assert "Checkpointed: 2 torch.utils.checkpoint region(s)" in tr.memory_table(["min_cut"]).attrs["caption"]


def test_no_checkpoint_no_marks():
    tr = fxviz.trace(Checkpointed(regions=False), x_input())
    assert tr.nodes["checkpoint_policy"].isna().all() and tr.nodes["checkpoint_region"].isna().all()
    assert "Checkpointed" not in tr.memory_table(["min_cut"]).attrs["caption"]
    assert "fx-checkpoint" not in tr.draw("joint").source


def _policy_cache_bytes(model_cls) -> tuple[int, int]:
    """An independent count of what a selective-checkpoint policy makes eager keep: run the model
    once with a policy that, on the forward pass, notes every op it tells checkpoint to save and
    the size of that op's result (on meta copies of its arguments)."""
    saved: list[int] = []

    def counting_policy(ctx, op, *args, **kwargs):
        decision = save_matmuls(ctx, op, *args, **kwargs)
        if decision == CheckpointPolicy.MUST_SAVE and not ctx.is_recompute:
            meta = [torch.empty_like(a, device="meta") if isinstance(a, torch.Tensor) else a for a in args]
            out = op(*meta, **kwargs)
            saved.append(out.numel() * out.element_size())
        return decision

    model = model_cls(counting_policy)
    loss = model(x_input())
    loss.backward()
    return sum(saved), len(saved)


def test_eager_row_counts_the_selective_checkpoint_cache():
    expected_bytes, expected_count = _policy_cache_bytes(OneRegion)
    assert expected_count == 4  # two blocks, two linears each
    tr = fxviz.trace(OneRegion(save_matmuls), x_input())
    p = tr.partition("eager")
    m = p.measurement
    assert m is not None
    assert m.checkpoint_bytes == expected_bytes
    assert m.checkpoint_storages == expected_count
    row = tr.memory_table(["eager"]).iloc[0]
    # nothing is saved outside the region (the sum keeps no tensor): the row is the cache
    assert row["saved_activation_bytes"] == expected_bytes
    assert "held by checkpoint itself" in tr.memory_table(["eager"]).attrs["caption"]
    # every held tensor is matched to a joint-graph node: the matmuls the policy saves
    held = [s for s in m.saved if s.held_by == "checkpoint"]
    assert {s.op for s in held} == {"addmm"} and all(s.joint for s in held)


def _backward_flops(model: nn.Module) -> int:
    loss = model(x_input())
    counter = FlopCounterMode(display=False)
    with counter:
        loss.backward()
    return int(counter.get_total_flops())


@pytest.mark.parametrize("policy", [None, save_matmuls], ids=["plain", "selective"])
def test_eager_recompute_is_measured(policy):
    """What eager checkpointing runs again in the backward: the backward's FLOPs with checkpoint
    minus without (torch's own FlopCounterMode, two independent runs)."""
    recompute_flops = _backward_flops(Checkpointed(policy)) - _backward_flops(Checkpointed(regions=False))
    tr = fxviz.trace(Checkpointed(policy), x_input())
    row = tr.memory_table(["eager"]).iloc[0]
    assert row["recompute_flops"] == recompute_flops
    assert row["recomputed_ops"] > 0
    if policy is not None:
        assert recompute_flops == 0  # the policy saves every matmul: nothing costly runs again


def test_eager_recompute_without_checkpoint_is_zero_measured():
    tr = fxviz.trace(Checkpointed(regions=False), x_input())
    row = tr.memory_table(["eager"]).iloc[0]
    assert row["recomputed_ops"] == 0 and row["recompute_flops"] == 0  # measured, not defaulted
    assert tr.partition("eager").measurement.checkpoint_bytes == 0


def test_a_partition_that_saves_an_rng_state_runs():
    """min-cut replays a checkpointed dropout from an RNG state it saves (``forward:NAME``, no joint
    node): running its forward and backward hands that state over by place, and the gradients equal
    those of the partition that saves the mask itself, from the same RNG start (the replay is exact)."""
    from fxviz.analysis.real.gradients import run_partition

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin, self.drop = torch.nn.Linear(8, 8), torch.nn.Dropout(0.5)

        def forward(self, x):
            return checkpoint(lambda t: self.drop(self.lin(t)).relu(), x, use_reentrant=False).sum()

    tr = fxviz.trace(Block(), torch.randn(4, 8), backend="aot_eager")
    replayed, saved_mask = tr.partition("min_cut"), tr.partition("default")
    assert any(s.startswith("forward:") for s in replayed.saved)  # the RNG state it made
    state = torch.get_rng_state()
    try:
        torch.manual_seed(7)
        a = run_partition(tr.graph, replayed)
        torch.manual_seed(7)
        b = run_partition(tr.graph, saved_mask)
    finally:
        torch.set_rng_state(state)
    assert set(a) == set(b) == {"lin.weight", "lin.bias"}
    for name in a:
        torch.testing.assert_close(a[name], b[name])
