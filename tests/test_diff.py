"""``fxviz.diff``: each side's saved values are exactly what torch's partitioner (or, for a log,
the run itself) saved, the totals are each side's memory table, and values are paired and
explained right (checkpointing, an inserted op, inductor's decompositions, two ranks, eager)."""

from __future__ import annotations

import shutil

import pytest
import torch

import fxviz
from fxviz import _torch
from fxviz.core.errors import InputError

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
        assert table.loc[table["kind"] == "activation", col].sum() == int(row["saved_activation_bytes"])
        assert d.by_module[col].sum() == int(row["saved_activation_bytes"])
    assert set(table["match"]) <= set(fxviz.analysis.diff.match.RULES)
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
    """The diff's explanations on AOTAutograd's own graph (GELU one gelu op) under default_partition,
    both named (the defaults are inductor's capture and min-cut, compared in the inductor tests)."""
    (m0, x0), (m1, x1) = net(), net(checkpointed=True)
    return fxviz.trace(m0, x0, backend="aot_eager"), fxviz.trace(m1, x1, backend="aot_eager")


def test_checkpoint_one_block(plain_and_checkpointed):
    a, b = plain_and_checkpointed
    d = fxviz.diff(a, b, "default", "default")
    check_sides(d, torch_saved(a, "default"), torch_saved(b, "default"))
    t = d.table
    act = t[t["kind"] == "activation"]
    # block 1's activations are saved only without checkpointing, recomputed by policy with it
    b1 = act[act["module"].str.startswith("b1", na=False)]
    assert len(b1) and (b1["status"] == "only A").all()
    assert b1["why"].str.contains("B recomputes it (checkpoint policy prefer_recompute)", regex=False).all()
    assert {"addmm", "gelu"} <= set(b1["op"])
    # block 0 is untouched: every value it saves is saved on both sides, paired by name
    b0 = t[t["module"].str.startswith("b0", na=False)]
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
    a, b = fxviz.trace(m0, x0, backend="aot_eager"), fxviz.trace(m1, x1, backend="aot_eager")
    d = fxviz.diff(a, b, "default", "default")
    check_sides(d, torch_saved(a, "default"), torch_saved(b, "default"))
    t = d.table
    added = rows(d, status="only B")
    assert list(added["op"]) == ["mul"] and list(added["module"]) == ["b0"]
    assert "A's graph has no matching mul in b0" in added["why"].iloc[0]
    gone = rows(d, status="only A")
    assert list(gone["op"]) == ["gelu"] and list(gone["module"]) == ["b0.act"]
    assert gone["why"].iloc[0] == f"B saves {added['name_b'].iloc[0]}, computed from it, instead"
    assert (t[t["module"].str.startswith("b1", na=False)]["status"] == "both").all()
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
    a = fxviz.trace(model, *inputs, backend="aot_eager")
    b = fxviz.trace(model, *inputs)  # the default: inductor
    assert b.capture.backend == "inductor"
    d = fxviz.diff(a, b, "min_cut")
    check_sides(d, torch_saved(a, "min_cut"), torch_saved(b, "min_cut"))
    gelu = rows(d, op="gelu")
    assert list(gelu["status"]) == ["only A"]
    assert gelu["why"].iloc[0].startswith("a decomposition: B (inductor) has no gelu op; its net.1 runs ")
    assert (rows(d, op="addmm")["status"] == "both").all()
    assert any("decomposition" in w for w in rows(d, status="only B")["why"]) or not len(rows(d, status="only B"))


# --- logs of real torch.compile runs -----------------------------------------------------------
needs_compiler = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                    reason="a real inductor compile needs a C++ compiler")


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """Three real runs, each in a fresh process: plain, extra-op and GELU MLP compiled one after the
    other (one log, three compiles), the checkpointed model (a second log directory), and the GELU
    MLP under inductor (a third)."""
    from concurrent.futures import ThreadPoolExecutor

    from .diff_models import LOG_SCRIPT
    from .logs_util import make_log

    jobs = {"pair": ("aot_eager", "plain,extra,gelu_mlp"), "checkpointed": ("aot_eager", "checkpointed")}
    if shutil.which("g++") or shutil.which("c++"):
        jobs["inductor"] = ("inductor", "gelu_mlp")
    root = tmp_path_factory.mktemp("diff_logs")
    with ThreadPoolExecutor(len(jobs)) as pool:
        futures = {k: pool.submit(make_log, LOG_SCRIPT, root / k, *args) for k, args in jobs.items()}
        return {k: f.result() for k, f in futures.items()}


def logged_saved(directory, compile_id: str) -> list[str]:
    """What the run saved: its logged backward graph's inputs that are not tangents."""
    frame, attempt = (int(x) for x in compile_id.split("/"))
    (code,) = [g.code for g in read_log(directory) if g.kind == "aot_backward_graph"
               and (g.frame_id, g.frame_compile_id) == (frame, attempt)]
    return saved_of_backward(code)



def test_two_log_directories_plain_and_checkpointed(logs):
    plain_run, ckpt_run = fxviz.load_logs(logs["pair"]), fxviz.load_logs(logs["checkpointed"])
    plain_id = plain_run.graphs["compile_id"].iloc[0]
    a, b = plain_run.trace(compile_id=plain_id), ckpt_run.trace()
    d = fxviz.diff(a, b)
    assert d.a.partition.strategy.name == "logged" == d.b.partition.strategy.name
    check_sides(d, logged_saved(logs["pair"], plain_id), logged_saved(logs["checkpointed"], "0/0"))
    t = d.table
    act = t[t["kind"] == "activation"]
    only_a = act[act["status"] == "only A"]
    # the checkpointed block's addmm and GELU outputs: saved by the plain run only, recomputed by policy
    assert set(only_a["op"]) == {"addmm", "gelu"}
    assert only_a["why"].eq("B recomputes it (checkpoint policy prefer_recompute)").all()
    assert all(b.graph.info[n].checkpoint_region is not None for n in d.matching.a_to_b.values()
               if b.graph.info[n].checkpoint_policy is not None)
    # block 0 saves the same on both runs
    assert (act[act["name_a"].isin(["addmm", "gelu"])]["status"] == "both").all()
    assert d.totals == (int(a.memory_table(["logged"])["saved_activation_bytes"].iloc[0]),
                        int(b.memory_table(["logged"])["saved_activation_bytes"].iloc[0]))
    assert d.totals[1] < d.totals[0]


def test_two_compiles_of_one_log_extra_op(logs):
    run = fxviz.load_logs(logs["pair"])
    ids = list(dict.fromkeys(run.graphs["compile_id"]))
    a, b = run.trace(compile_id=ids[0]), run.trace(compile_id=ids[1])
    d = fxviz.diff(a, b)
    check_sides(d, logged_saved(logs["pair"], ids[0]), logged_saved(logs["pair"], ids[1]))
    added, gone = rows(d, status="only B"), rows(d, status="only A")
    assert list(added["op"]) == ["mul"] and list(gone["op"]) == ["gelu"]
    assert gone["why"].iloc[0] == f"B saves {added['name_b'].iloc[0]}, computed from it, instead"
    assert (rows(d, status="both")["name_a"] == rows(d, status="both")["name_b"]).all()


@needs_compiler
def test_aot_eager_vs_inductor_logs(logs):
    eager_run, inductor_run = fxviz.load_logs(logs["pair"]), fxviz.load_logs(logs["inductor"])
    gelu_id = list(dict.fromkeys(eager_run.graphs["compile_id"]))[-1]
    a, b = eager_run.trace(compile_id=gelu_id), inductor_run.trace()
    d = fxviz.diff(a, b)
    check_sides(d, logged_saved(logs["pair"], gelu_id), logged_saved(logs["inductor"], "0/0"))
    gelu = rows(d, op="gelu")
    assert list(gelu["status"]) == ["only A"]
    # each log says which backend ran (inductor writes its own records): the reason is the decomposition,
    # in the module that ran it: the Sequential's GELU child, as a model trace places it
    assert gelu["why"].iloc[0].startswith("a decomposition: B (inductor) has no gelu op; its net.1 runs mul, erf"), \
        gelu["why"].iloc[0]
    assert (rows(d, op="addmm")["status"] == "both").all()


@pytest.fixture(scope="module")
def ddp_log(tmp_path_factory):
    from .logs_util import DISTRIBUTED, make_log

    return make_log(DISTRIBUTED, tmp_path_factory.mktemp("ddp") / "trace", "ddp")


def test_two_ranks_of_a_ddp_run(ddp_log):
    run = fxviz.load_logs(ddp_log)
    a, b = run.trace(rank=0), run.trace(rank=1)
    d = fxviz.diff(a, b)
    from .logs_util import backward_by_rank

    backward = backward_by_rank(ddp_log)
    check_sides(d, saved_of_backward(backward[0]), saved_of_backward(backward[1]))
    t = d.table
    # the same values on both ranks, each rank's batch in its shapes: paired by place, not by shape
    assert (t["status"] == "both").all()
    batch = t[t["shape_a"] != t["shape_b"]]
    assert len(batch) and all(sa[0] == 4 and sb[0] == 6 and sa[1:] == sb[1:]
                              for sa, sb in zip(batch["shape_a"], batch["shape_b"]))
    assert set(batch[batch["op"] != "input"]["match"]) == {"module+op+position"}  # ops: by place
    assert set(batch[batch["op"] == "input"]["match"]) <= {"name"}  # the input x: by its name
    assert d.totals[1] > d.totals[0]


# --- the command -------------------------------------------------------------------------------
def test_cli_two_log_directories(logs, capsys):
    from fxviz.frontends.cli.entry import main

    pair, ckpt = str(logs["pair"]), str(logs["checkpointed"])
    assert main(["diff", "--logs-a", pair, "--logs-b", ckpt]) == 0
    out = capsys.readouterr().out
    run_a, run_b = fxviz.load_logs(pair), fxviz.load_logs(ckpt)
    expected = fxviz.diff(run_a, run_b, labels=(f"log {pair}", f"log {ckpt}"))  # one graph each: a Diff
    assert out.startswith(expected.summary() + "\n\n" + expected.table_text())
    assert all(len(line) <= 100 for line in out.splitlines()), [x for x in out.splitlines() if len(x) > 100]
    assert "B recomputes it (checkpoint policy prefer_recompute)" in out


def test_cli_two_ranks(ddp_log, capsys):
    from fxviz.frontends.cli.entry import main

    assert main(["diff", "--logs", str(ddp_log), "--rank-a", "0", "--rank-b", "1"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # a side's title wraps, never cut
    assert "(rank 0, compile 0/0)" in out and "(rank 1, compile 0/0)" in out and "0 only A, 0 only B" in out


@pytest.mark.parametrize("argv, message", [
    (["diff"], "nothing to compare"),
    (["diff", "mlp", "mlp", "mlp"], "more models than sides"),
    (["diff", "mlp", "--rank-b", "1"], "that side has no log"),
    (["diff", "mlp"], "same trace under the same strategy"),
    (["diff", "--logs-a", "/tmp"], "no B side"),  # was an internal error (AssertionError)
    (["diff", "--logs-a", "/nonexistent/fxviz-dir", "--logs-b", "/nonexistent/fxviz-dir"], "/nonexistent/fxviz-dir"),
])
def test_cli_errors_are_one_line(argv, message, capsys):
    from fxviz.frontends.cli.entry import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "(hint: " in err


def test_draw_both_sides(plain_and_checkpointed):
    a, b = plain_and_checkpointed
    d = fxviz.diff(a, b, "default", "default")
    source = d.draw().source
    t = d.table
    for name in t.loc[t["status"] == "only A", "name_a"]:
        assert f'"A/{name}"' in source
    for name in t.loc[t["status"] == "only B", "name_b"]:
        assert f'"B/{name}"' in source
    # where B keeps none of A's values, B's graph shows them recomputed; matched pairs joined
    assert source.count("B recomputes") == int((t["why"].str.startswith("B recomputes")).sum())
    assert "fx-match" in source and "cluster_A" in source and "cluster_B" in source
    same = fxviz.diff(a, a, "default", "eager")  # eager saves what default saves on this model
    assert (same.table["status"] == "both").all() and "nothing to draw" in same.draw().caption


def test_report_page(plain_and_checkpointed, tmp_path):
    import html as html_lib

    a, b = plain_and_checkpointed
    d = fxviz.diff(a, b)
    path = fxviz.report(d, tmp_path / "diff.html", title="plain <vs> checkpointed")
    page = path.read_text()
    assert "<script" not in page.lower() and "default-src 'none'" in page
    assert "plain &lt;vs&gt; checkpointed" in page and "<svg" in page
    assert html_lib.escape(d.summary().splitlines()[2]) in page
    for name in d.table["name_a"].dropna():
        assert f"<td>{name}</td>" in page
    assert page.count('class="only-a"') == int((d.table["status"] == "only A").sum())


def test_explorer_compares_with_another_trace(plain_and_checkpointed, ddp_log):
    a, b = plain_and_checkpointed
    ex = fxviz.explore(a)
    d = ex.compare_with(b)
    assert ex.diff_panel in ex.children and d.summary().splitlines()[2] in ex.diff_panel.body.value
    assert "<svg" in ex.diff_panel.body.value and "<script" not in ex.diff_panel.body.value.lower()
    ex.compare_with(None)
    assert ex.diff_panel.body.value == ""
    # a logged run: "compare with" any other graph of the run
    run = fxviz.load_logs(ddp_log)
    rex = fxviz.explore(run, rank=0)
    rex.diff_control.value = (1, "0/0", 0)
    panel = rex.explorer.diff_panel
    assert panel.diff is not None and panel.diff.trace_b is run.trace(rank=1)
    assert "(rank 1, compile 0/0)" in panel.body.value
    rex.rank_control.value = 1  # the graph compared with itself: no diff
    assert rex.explorer.trace is run.trace(rank=1) and getattr(rex.explorer, "diff_panel", None) is None


def test_renamed_modules_match_by_op_and_shape(plain_and_checkpointed):
    """The same blocks under other module names (a Sequential: ``0``, ``1`` for ``b0``, ``b1``):
    no module to align on, so values pair by op, shape and dtype in graph order."""
    from .diff_models import Block

    class Seq(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.Sequential(Block(), Block())

        def forward(self, x):
            return self.layers(x).sum()

    a, _ = plain_and_checkpointed
    torch.manual_seed(0)
    model = Seq()
    b = fxviz.trace(model, torch.randn(8, 16), backend="aot_eager")
    d = fxviz.diff(a, b, "default", "default")
    check_sides(d, torch_saved(a, "default"), torch_saved(b, "default"))
    act = d.table[d.table["kind"] == "activation"]
    ops = act[act["op"] != "primal"]
    assert len(ops) and (ops["status"] == "both").all() and set(ops["match"]) == {"op+shape"}
    for _, r in ops.iterrows():  # graph order: b0's values pair with layers.0's
        assert a.graph.info[r["name_a"]].module.replace("b", "layers.", 1) == b.graph.info[r["name_b"]].module


def test_diff_table_speaks_the_saved_tables_words(plain_and_checkpointed):
    """Issue 31: one vocabulary.  Each value's ``kind``, ``shape`` (a tuple of ints, ``shape_a`` /
    ``shape_b`` per side), ``dtype`` and bytes in the diff table are its row's in each side's
    ``tr.saved()``, and its shape is its ``tr.nodes`` row's; a value of no module is None in
    both tables (the per-module sums name it ``(no module)``)."""
    a, b = plain_and_checkpointed
    d = fxviz.diff(a, b, "default", "min_cut")
    t = d.table
    for side, tr, strategy in (("a", a, "default"), ("b", b, "min_cut")):
        saved = tr.saved(strategy, compare=[])
        rows_ = t[t[f"name_{side}"].notna()].set_index(f"name_{side}")
        rows_ = rows_[rows_["kind"] != "symint"]
        assert set(rows_.index) == set(saved[saved["kind"] != "symint"].index)
        for name, r in rows_.iterrows():
            assert r["kind"] == saved.loc[name, "kind"]
            assert r[f"shape_{side}"] == saved.loc[name, "shape"] == tr.nodes.loc[name, "shape"]
            assert isinstance(r[f"shape_{side}"], tuple) and all(type(x) is int for x in r[f"shape_{side}"])
            assert r["dtype"] == saved.loc[name, "dtype"]
            assert r[f"bytes_{side}"] == saved.loc[name, "bytes"]
    assert set(t["module"].dropna()) and "(no module)" not in set(t["module"].dropna())
