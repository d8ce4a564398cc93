"""``fxviz.diff``: each side's saved values are exactly what torch's partitioner (or, for a log,
the run itself) saved, the totals are each side's memory table, and values are paired and
explained right (checkpointing, an inserted op, inductor's decompositions, two ranks, eager)."""

from __future__ import annotations

import shutil

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.errors import InputError

from .compile_log import read_log, saved_of_backward
from .compile_models import MODELS
from .diff_models import net

STRATEGY_KW = {"default": _torch.default_partition, "min_cut": _torch.min_cut_partition}


def torch_saved(tr: fxviz.Trace, strategy: str) -> list[str]:
    """The tensors torch's partitioner saves, called directly on a copy of the joint graph with the
    arguments torch gave it (inductor's ``compiler="inductor"`` included)."""
    graph = tr.graph
    kwargs: dict = dict(num_fwd_outputs=graph.num_fwd_outputs,
                        static_lifetime_input_indices=graph.static_lifetime_input_indices)
    if strategy == "min_cut" and graph.compiler is not None:
        kwargs["compiler"] = graph.compiler
    with _torch.quiet_torch():
        fwd, _ = STRATEGY_KW[strategy](_torch.copy_graph_module(graph.gm), graph.joint_inputs, **kwargs)
    outs = list(fwd.graph.nodes)[-1].args[0][graph.num_fwd_outputs:]
    return [n.name for n in outs if isinstance(_torch.meta_val(n), torch.Tensor)]


def check_sides(d: fxviz.Diff, expected_a: list[str], expected_b: list[str]) -> None:
    """Every saved value of each side has exactly one row; totals are each memory table's."""
    table = d.table
    assert sorted(table["name_a"].dropna()) == sorted(expected_a)
    assert sorted(table["name_b"].dropna()) == sorted(expected_b)
    assert (table["status"] == "both").sum() == (table["name_a"].notna() & table["name_b"].notna()).sum()
    for side, trace, col in ((d.a, d.trace_a, "bytes_a"), (d.b, d.trace_b, "bytes_b")):
        row = trace.memory_table([side.partition.strategy]).iloc[0]
        assert side.activation_bytes == int(row["saved_activation_bytes"])
        assert table.loc[table["owner"] == "activation", col].sum() == int(row["saved_activation_bytes"])
        assert d.by_module[col].sum() == int(row["saved_activation_bytes"])
    assert set(table["match"]) <= set(fxviz.analysis.match.RULES)
    text = d.summary()
    assert all(len(line) <= 100 for line in text.splitlines())
    assert all(len(line) <= 100 for line in d.table_text().splitlines())


def rows(d: fxviz.Diff, **where):
    t = d.table
    for k, v in where.items():
        t = t[t[k] == v]
    return t


@pytest.fixture(scope="module")
def plain_and_checkpointed():
    (m0, x0), (m1, x1) = net(), net(checkpointed=True)
    return fxviz.trace(m0, x0), fxviz.trace(m1, x1)


def test_checkpoint_one_block(plain_and_checkpointed):
    a, b = plain_and_checkpointed
    d = fxviz.diff(a, b)
    check_sides(d, torch_saved(a, "default"), torch_saved(b, "default"))
    t = d.table
    act = t[t["owner"] == "activation"]
    # block 1's activations are saved only without checkpointing, recomputed by policy with it
    b1 = act[act["module"].str.startswith("b1")]
    assert len(b1) and (b1["status"] == "only A").all()
    assert b1["why"].str.contains("B recomputes it (checkpoint policy prefer_recompute)", regex=False).all()
    assert {"addmm", "gelu"} <= set(b1["op"])
    # block 0 is untouched: every value it saves is saved on both sides, paired by name
    b0 = t[t["module"].str.startswith("b0")]
    assert len(b0) and (b0["status"] == "both").all() and (b0["name_a"] == b0["name_b"]).all()
    # with checkpointing the backward keeps block 1's weights instead of their transposes
    only_b = t[t["status"] == "only B"]
    assert set(only_b["op"]) == {"parameter"} and only_b["why"].str.startswith("A saves t").any()
    bm = d.by_module.set_index("module")
    assert bm.loc["b1.act", "change"] < 0 and bm.loc["b0.act", "change"] == 0
    assert d.by_module["change"].abs().is_monotonic_decreasing
    assert "saved activations: A" in d.summary() and "checkpoint policy" in d.summary()


def test_extra_op_before_projection():
    (m0, x0), (m1, x1) = net(), net(extra=True)
    a, b = fxviz.trace(m0, x0), fxviz.trace(m1, x1)
    d = fxviz.diff(a, b)
    check_sides(d, torch_saved(a, "default"), torch_saved(b, "default"))
    t = d.table
    added = rows(d, status="only B")
    assert list(added["op"]) == ["mul"] and list(added["module"]) == ["b0"]
    assert "A's graph has no matching mul in b0" in added["why"].iloc[0]
    gone = rows(d, status="only A")
    assert list(gone["op"]) == ["gelu"] and list(gone["module"]) == ["b0.act"]
    assert gone["why"].iloc[0] == f"B saves {added['name_b'].iloc[0]}, computed from it, instead"
    assert (t[t["module"].str.startswith("b1")]["status"] == "both").all()
    # the inserted mul renamed the later muls (B's b0 scale is mul_1): paired by place, not name
    m = d.matching
    scale_a = next(n for n, i in a.graph.info.items() if i.module == "b0" and i.short_op == "mul")
    scale_b = m.a_to_b[scale_a]
    assert scale_b != scale_a and m.rule[scale_a] == "module+op+position"
    assert b.graph.info[scale_b].module == "b0" and b.graph.info[scale_b].short_op == "mul"


def test_one_trace_two_strategies_and_eager(plain_and_checkpointed):
    a, b = plain_and_checkpointed
    d = fxviz.diff(a, a, "default", "min_cut")
    check_sides(d, torch_saved(a, "default"), torch_saved(a, "min_cut"))
    assert set(d.table["match"]) == {"name"}
    for tr in (a, b):
        e = fxviz.diff(tr, tr, "eager", "default")
        measured = tr.partition("eager").measurement
        assert measured is not None
        names = [s.joint for s in measured.saved if s.joint is not None]
        check_sides(e, names, torch_saved(tr, "default"))
        assert len(e.table) >= len(set(names))
        assert (e.table["name_a"].isna() == e.table["status"].eq("only B")).all()


def test_eager_vs_compiled_under_checkpoint(plain_and_checkpointed):
    """Eager checkpointing keeps only block 1's input; the compiled default partition saves what
    min-cut's policy tags tell it: the diff pairs eager's tensors with graph nodes."""
    _, b = plain_and_checkpointed
    d = fxviz.diff(b, b, "eager", "default")
    both = rows(d, status="both")
    assert len(both) and (both["name_a"] == both["name_b"]).all()


def test_errors_name_the_fix(plain_and_checkpointed):
    a, _ = plain_and_checkpointed
    with pytest.raises(InputError, match="same trace under the same strategy"):
        fxviz.diff(a, a)
    with pytest.raises(InputError, match="not a Trace"):
        fxviz.diff(a, "mlp")


def test_aot_eager_vs_inductor_gelu_mlp():
    model, inputs = MODELS["gelu_mlp"]()
    a = fxviz.trace(model, *inputs)
    b = fxviz.trace(model, *inputs, backend="inductor")
    d = fxviz.diff(a, b, "min_cut")
    check_sides(d, torch_saved(a, "min_cut"), torch_saved(b, "min_cut"))
    gelu = rows(d, op="gelu")
    assert list(gelu["status"]) == ["only A"]
    assert gelu["why"].iloc[0].startswith("a decomposition: B (inductor) has no gelu op; its net.1 runs ")
    assert (rows(d, op="addmm")["status"] == "both").all()
    assert any("decomposition" in w for w in rows(d, status="only B")["why"]) or not len(rows(d, status="only B"))
