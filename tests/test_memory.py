"""The memory table is exact: every byte figure is checked against real tensors run here.

The references are computed independently of fxviz's fake-tensor accounting: the partition's own
forward and backward graphs are executed on real tensors, and storages are told apart by
``untyped_storage().data_ptr()``.
"""

from __future__ import annotations

import pytest
import torch
import torch.fx as fx

from fxviz.analysis.memory.columns import COLUMNS
from fxviz.analysis.memory.storage import has_symbolic_sizes
from fxviz.analysis.memory.sweep import pareto_mask
from fxviz.analysis.memory.table import memory_table
from fxviz.analysis.strategy.strategies import Strategy
from fxviz.core.errors import StrategyError
from fxviz.core.graph_facts import concrete

from .conftest import SMALL, assert_unchanged, snapshot

GRAPH_STRATEGIES = ["default", "min_cut", "budget:0.5", "recompute_all"]
SWEEP_BUDGETS = [0.0, 0.3, 0.5, 0.7, 1.0]


# --- an independent runner ------------------------------------------------------------------------
def _tensors(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def _resident(graph) -> dict[int, tuple[str, int]]:
    """data_ptr -> (owner, bytes) of every parameter, buffer, constant and user input (real tensors)."""
    out = {}
    for name, value in graph.placeholder_values.items():
        role = graph.info[name].role
        owner = "input" if role == "primal" else "parameter"
        for t in _tensors(value):
            out.setdefault(t.untyped_storage().data_ptr(), (owner, t.untyped_storage().nbytes()))
    for t in graph.constant_values.values():
        out.setdefault(t.untyped_storage().data_ptr(), ("parameter", t.untyped_storage().nbytes()))
    return out


def _run(gm: fx.GraphModule, args: list, resident: dict[int, tuple[str, int]],
         frees_inputs: bool) -> tuple[list, int]:
    """Execute ``gm`` node by node on real tensors, dropping each value after its last user (as
    fx's generated code does; a forward's inputs stay, its caller holds them) and return
    (outputs, peak bytes of the unique live storages plus the resident ones)."""
    nodes = list(gm.graph.nodes)
    last_user: dict[fx.Node, int] = {}
    for i, n in enumerate(nodes):
        for a in n.all_input_nodes:
            last_user[a] = i
    env: dict[fx.Node, object] = {}
    it = iter(args)
    peak = 0
    for i, n in enumerate(nodes):
        if n.op == "placeholder":
            env[n] = next(it)
        elif n.op == "output":
            return list(fx.node.map_arg(n.args[0], env.__getitem__)), peak
        elif n.op == "get_attr":  # a constant (closure mode: the model's real parameter)
            env[n] = getattr(gm, n.target)
        else:
            assert n.op == "call_function", n.op
            env[n] = n.target(*fx.node.map_arg(n.args, env.__getitem__),
                              **fx.node.map_arg(n.kwargs, env.__getitem__))
        live = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes()
                for v in env.values() for t in _tensors(v)}
        live.update({ptr: nbytes for ptr, (_, nbytes) in resident.items()})
        peak = max(peak, sum(live.values()))
        for m in list(env):
            if (m.op != "placeholder" or frees_inputs) and last_user.get(m, -1) <= i:
                del env[m]
    raise AssertionError("no output node")


def run_partition_real(graph, p) -> dict:
    """Forward then backward of ``p`` on real tensors; byte facts counted by data_ptr."""
    resident = _resident(graph)
    rng = torch.get_rng_state()
    try:
        with torch.no_grad():
            fw_args = [graph.placeholder_values[p.fw_to_joint[n.name]]
                       for n in p.forward.graph.nodes if n.op == "placeholder"]
            fw_outs, fw_peak = _run(p.forward, fw_args, resident, frees_inputs=False)
            fw_out_nodes = list(p.forward.graph.nodes)[-1].args[0]
            by_name = {n.name: v for n, v in zip(fw_out_nodes, fw_outs) if isinstance(n, fx.Node)}
            bw_args = []
            for n in p.backward.graph.nodes:
                if n.op != "placeholder":
                    continue
                if n.name in by_name:
                    bw_args.append(by_name[n.name])
                else:  # a tangent: the loss's incoming gradient
                    fake = n.meta["val"]
                    bw_args.append(torch.ones(fake.shape, dtype=fake.dtype))
            _, bw_peak = _run(p.backward, bw_args, resident, frees_inputs=True)
    finally:
        torch.set_rng_state(rng)
    saved = [t for v in fw_outs[graph.num_fwd_outputs:] for t in _tensors(v)]
    storages: dict[int, int] = {}
    for t in saved:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
    by_owner = {"activation": 0, "parameter": 0, "input": 0}
    for ptr, nbytes in storages.items():
        by_owner[resident[ptr][0] if ptr in resident else "activation"] += nbytes
    return {"activation": by_owner["activation"], "parameter": by_owner["parameter"], "input": by_owner["input"],
            "tensors": len(saved), "storages": len(storages),
            "numel_bytes": sum(t.numel() * t.element_size() for t in saved),
            "forward_peak": fw_peak, "backward_peak": bw_peak}


def _row(df, strategy):
    """The row of ``strategy`` (as written: "default" is torch's default_partition), by the table's
    strategy labels (issue 47: ``mt.loc["min_cut"]``)."""
    name = Strategy.parse(strategy).name
    assert list(df.index) == list(df["strategy"]) and df.index.is_unique, list(df.index)
    return df.loc[name]


@pytest.fixture(scope="module")
def tables(traces):
    cache = {}

    def get(name, params="lifted"):
        if (name, params) not in cache:
            tr = traces[(name, params)]
            cache[name, params] = tr.memory_table(GRAPH_STRATEGIES + ["eager"])
        return cache[name, params]

    return get


# --- exactness -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name,params", [(n, "lifted") for n in sorted(SMALL)]
                         + [("mlp", "closure"), ("resnet_block", "closure")])
@pytest.mark.parametrize("strategy", GRAPH_STRATEGIES)
def test_bytes_and_peaks_match_real_storages(traces, tables, name, params, strategy):
    tr = traces[(name, params)]
    row = _row(tables(name, params), tr.partition(strategy).name)
    assert row["error"] is None or row["error"] != row["error"], row["error"]
    real = run_partition_real(tr.graph, tr.partition(strategy))
    assert row["saved_activation_bytes"] == real["activation"]
    assert row["saved_param_bytes"] == real["parameter"]
    assert row["saved_input_bytes"] == real["input"]
    assert row["saved_tensors"] == real["tensors"]
    assert row["saved_storages"] == real["storages"]
    # torch's estimate is numel*itemsize per saved value, whatever the storage
    assert row["torch_estimate_bytes"] == real["numel_bytes"]
    # the unfused walk is exact for the graphs run op by op (as aot_eager runs them)
    assert row["unfused_forward_peak_bytes"] == real["forward_peak"]
    assert row["unfused_backward_peak_bytes"] == real["backward_peak"]


@pytest.mark.parametrize("params", ["lifted", "closure"])
def test_views_of_parameters_are_not_activations(traces, tables, params):
    """The MLP's default partition saves transposed weights (``t``; ``permute`` in inductor's graph,
    the lifted default): parameter bytes, not activations, while torch's own estimate counts them as
    new tensors.  In closure mode the weights are ``get_attr`` constants whose fake tensors share
    nothing with their ``t``: the view edge counts."""
    tr = traces[("mlp", params)]
    p = tr.partition("default")
    assert any(tr.graph.info[s].short_op in ("t", "permute") for s in p.saved)
    row = _row(tables("mlp", params), "default")
    assert row["saved_param_bytes"] > 0
    assert row["torch_estimate_bytes"] > row["saved_activation_bytes"] + row["saved_input_bytes"]


def test_pointwise_chain_min_cut_recomputes_the_pointwise_ops(traces, tables):
    tr = traces[("pointwise_chain", "lifted")]
    df = tables("pointwise_chain")
    default, min_cut = _row(df, "default"), _row(df, "min_cut")
    assert min_cut["saved_activation_bytes"] < default["saved_activation_bytes"]
    recomputed_ops = {tr.graph.info[n].short_op for n in tr.partition("min_cut").recomputed}
    assert {"sin", "cos", "mul", "add"} <= recomputed_ops
    # flop_counter counts pointwise ops as free; the bytes they move are not
    assert min_cut["recompute_flops"] == 0 and min_cut["recompute_bytes"] > 0
    assert default["recomputed_ops"] == 0 and default["recompute_bytes"] == 0


@pytest.mark.parametrize("name", sorted(SMALL))
def test_recompute_all_saves_only_random_draws(traces, tables, name):
    """recompute_all saves no activation except what a random op drew (never drawn twice)."""
    from fxviz.analysis.memory.storage import saved_memory

    tr = traces[(name, "lifted")]
    p = tr.partition("recompute_all")
    random_outputs = set()
    for n in tr.joint.graph.nodes:
        if torch.Tag.nondeterministic_seeded in getattr(n.target, "tags", ()):
            random_outputs |= {n.name} | {u.name for u in n.users}
    activations = {name for s in saved_memory(p, tr.graph).storages if s.owner == "activation" for name in s.names}
    assert activations <= random_outputs
    if not random_outputs:
        assert _row(tables(name), "recompute_all")["saved_activation_bytes"] == 0


def test_pointwise_chain_recompute_all_saves_nothing(tables):
    row = _row(tables("pointwise_chain"), "recompute_all")
    assert row["saved_activation_bytes"] == 0


def test_recompute_flops_are_flop_counters_on_the_recomputed_ops(traces, tables):
    """recompute_all on the MLP runs every matmul of the forward again; count them on real tensors."""
    tr = traces[("mlp", "lifted")]
    row = _row(tables("mlp"), "recompute_all")
    p = tr.partition("recompute_all")
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    rng = torch.get_rng_state()
    with counter, torch.no_grad():
        for n in p.backward.graph.nodes:
            if n.op == "call_function" and p.bw_to_joint.get(n.name) in p.recomputed:
                args = fx.node.map_arg(n.args, lambda a: torch.zeros(a.meta["val"].shape, dtype=a.meta["val"].dtype)
                                       if isinstance(a.meta["val"], torch.Tensor) else a.meta["val"])
                n.target(*args, **n.kwargs)
    torch.set_rng_state(rng)
    assert row["recompute_flops"] == counter.get_total_flops() > 0


# --- the table as a whole ------------------------------------------------------------------------
def test_table_columns_and_caption(traces, tables):
    tr = traces[("mini_gpt", "lifted")]
    df = tables("mini_gpt")
    assert list(df.columns) == COLUMNS
    assert list(df["strategy"]) == ["default_partition", "min_cut", "budget:0.5:dp", "recompute_all", "eager"]
    for c in ("saved_activation_bytes", "saved_param_bytes", "recompute_flops", "forward_peak_bytes"):
        assert str(df[c].dtype) == "Int64"
    cap = df.attrs["caption"]
    assert f"num_fwd_outputs={tr.graph.num_fwd_outputs}" in cap
    from fxviz.analysis.memory.columns import _index_list

    static = tr.graph.static_lifetime_input_indices
    assert f"static_lifetime_input_indices={_index_list(static)}" in cap  # a long list as runs: [1-28] (28 inputs)
    assert len(static) <= 12 or f"[{static[0]}-{static[-1]}] ({len(static)} inputs)" in cap
    assert "torch.compile" in cap
    assert "float mask" in cap  # mini_gpt has dropout: the eager row differs, and says why
    assert (df["recomputed_random_ops"] > 0).any() == ("drawing afresh" in cap)
    for _, r in df[df["strategy"] != "eager"].iterrows():
        assert r["recomputed_random_ops"] == len(tr.partition(r["strategy"]).recomputed_random)


def test_rows_are_labelled_by_strategy(traces):
    """Issue 47: the table is one row per strategy, labelled by it, so a selection keeps the names and
    ``mt.loc["min_cut"]`` is min-cut's row; printed, it still reads one column per strategy."""
    tr = traces[("mlp", "lifted")]
    mt = tr.memory_table()
    assert list(mt.index) == [s.name for s in tr.offered]
    cut = mt.loc[:, ["saved_activation_bytes", "recomputed_ops"]]
    assert list(cut.index) == list(mt.index)
    p = tr.partition("min_cut")
    assert mt.loc["min_cut", "saved_tensors"] == (tr.saved("min_cut")["kind"] != "symint").sum()
    assert mt.loc["min_cut"]["recomputed_ops"] == len(p.recomputed)
    text = repr(mt)
    assert text.splitlines()[0].split() == list(mt.index) and "memory table: 5 strategies" in text
    assert "<table" in mt._repr_html_()
    step = tr.memory_table(scope="step")
    assert "step min_cut" in step.index and step.loc["step min_cut", "strategy"] == "min_cut"


def test_failing_strategy_gives_an_error_row(traces):
    tr = traces[("mlp", "lifted")]

    def broken(joint, joint_inputs, **kwargs):
        raise RuntimeError("solver exploded")

    df = tr.memory_table(["default", broken, "min_cut"])
    assert df["error"].notna().tolist() == [False, True, False]
    assert "solver exploded" in df["error"].iloc[1]
    assert df["saved_activation_bytes"].isna().tolist() == [False, True, False]


def test_getter_that_raises_gives_an_error_row_too(traces):
    tr = traces[("mlp", "lifted")]

    def getter(strategy):
        if strategy.name == "min_cut":
            raise ImportError("no module named 'pulp'")
        return tr.partition(strategy)

    df = memory_table(tr.graph, getter, ["default", "min_cut"])
    assert df["error"].tolist()[0] is None
    assert df["error"].iloc[1] == "ImportError: no module named 'pulp'"


def test_unknown_strategy_is_an_fxviz_error(traces):
    tr = traces[("mlp", "lifted")]
    with pytest.raises(StrategyError, match="valid forms"):
        tr.memory_table(["default", "magic"])


def test_table_changes_nothing(example_models, traces):
    model, _ = example_models["mini_gpt"]
    tr = traces[("mini_gpt", "lifted")]
    code = tr.joint.code
    before = snapshot(model)
    tr.memory_table(["default", "budget:0.3:greedy", "eager"])
    assert_unchanged(model, before)
    assert tr.joint.code == code


def test_symbolic_sizes_are_evaluated_at_their_example_values():
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(lambda x: (x * 2).sum(0), tracing_mode="symbolic")(torch.ones(5, 3))
    assert has_symbolic_sizes(gm)
    x = next(n for n in gm.graph.nodes if n.op == "placeholder").meta["val"]
    assert isinstance(x.shape[0], torch.SymInt) and concrete(x.shape[0]) == 5
    assert not has_symbolic_sizes(fx.symbolic_trace(lambda x: x + 1))


# --- budgets -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["pointwise_chain", "mini_gpt"])
def test_sweep_collapses_identical_partitions_and_is_monotone(traces, name):
    tr = traces[(name, "lifted")]
    budgets = SWEEP_BUDGETS
    sweep = tr.memory_sweep(budgets, progress=False)
    seen = set()
    for _, r in sweep.iterrows():
        parts = [tr.partition(f"budget:{b:g}") for b in r["budgets"]]
        sigs = {(tuple(p.saved), frozenset(p.recomputed)) for p in parts}
        assert len(sigs) == 1, r["budgets"]  # a row's budgets give one partition
        assert not sigs & seen  # and no other row's
        seen |= sigs
        assert r["saved_activation_bytes"] == run_partition_real(tr.graph, parts[0])["activation"]
    assert sorted(b for bs in sweep["budgets"] for b in bs) == budgets
    # torch's dp solver is monotone here in the exact bytes: more budget, more saved, less recompute
    saved = sweep["saved_activation_bytes"].tolist()
    assert saved == sorted(saved), sweep.attrs["non_monotone"]
    assert sweep["monotone"].all() and sweep.attrs["non_monotone"] == []
    assert _row(tr.memory_table(["min_cut"]), "min_cut")["saved_activation_bytes"] == saved[-1]


def test_sweep_flags_non_monotone_rows_it_finds(traces):
    """Whatever the solver does, the ``monotone`` column says where saved bytes drop as the budget grows."""
    tr = traces[("mini_gpt", "lifted")]
    sweep = tr.memory_sweep([0.3, 0.5, 0.7], solver="greedy", progress=False)
    saved = sweep["saved_activation_bytes"].tolist()
    expected = [True] + [b >= a for a, b in zip(saved, saved[1:])]
    assert sweep["monotone"].tolist() == expected
    assert len(sweep.attrs["non_monotone"]) == expected.count(False)


def test_pareto_mask():
    assert pareto_mask([(0, 10, 5), (5, 0, 3), (5, 0, 1), (6, 0, 1), (0, 10, 5)]) == [True, False, True, False, True]


def test_pareto_plot_renders(traces, artifacts):
    tr = traces[("mini_gpt", "lifted")]
    sweep = tr.memory_sweep(SWEEP_BUDGETS, progress=False)  # partitions cached by the sweep test
    fig = sweep.pareto_plot()
    path = artifacts / "memory_sweep_mini_gpt.png"
    fig.savefig(path)
    assert path.stat().st_size > 10_000
    ax = fig.axes[0]
    assert "saved activation memory" in ax.get_xlabel()
    assert sweep["pareto"].any()


# --- presentation --------------------------------------------------------------------------------
def test_styled_table_marks_the_best_values(tables):
    from fxviz.render.text.table import BEST_FILL, best_rows

    df = tables("pointwise_chain")
    html = df._repr_html_()
    assert "KiB" in html and BEST_FILL.lower() in html.lower()
    best = best_rows(df)
    assert best["saved_activation_bytes"] == {_row(df, "recompute_all").name}
    assert best["recompute_bytes"] == {_row(df, "default").name, _row(df, "eager").name}
    # the raw frame keeps exact integers
    assert str(df["saved_activation_bytes"].dtype) == "Int64"


def test_cli_table_prints_the_table(capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["table", "mlp", "--strategies", "default,min_cut,eager"]) == 0
    out = capsys.readouterr().out
    for s in ("default_partition", "min_cut", "eager", "saved_activation_bytes", "KiB", "num_fwd_outputs"):
        assert s in out


def test_cli_table_rejects_unknown_strategies(capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["table", "mlp", "--strategies", "default,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err


def test_terminal_tables_left_align_text_and_right_align_numbers():
    """``fitted_text`` (the doctor's parameter table, ``fxviz nodes``, the run's knapsack): names and
    reasons read from the left, numbers and sizes line their digits up on the right, no trailing blanks."""
    import pandas as pd

    from fxviz.render.text.table import fitted_text

    df = pd.DataFrame({"parameter": ["fc.weight", "b"], "bytes": ["8 KiB", "512 B"], "count": [12, 3],
                       "reason": ["gets a gradient", "no gradient: detached"]})
    lines = fitted_text(df).splitlines()
    assert lines[0].split() == ["parameter", "bytes", "count", "reason"]
    assert lines[1].startswith("fc.weight ") and lines[2].startswith("b         ")
    assert lines[1].index("8 KiB") + 5 == lines[2].index("512 B") + 5  # right-aligned sizes
    assert lines[1].index("12") + 2 == lines[2].index("3") + 1
    assert lines[1].index("gets") == lines[2].index("no gradient") == lines[0].index("reason")
    assert all(line == line.rstrip() for line in lines)
